"""Tightness of the scalar-function interval rules (issue 23), against exact oracles.

* ceil floor trunc round nearbyint: exact in every interval base -- [f(a), f(b)] with the
  integer values themselves (oracle: Python's exact rational rounding);
* sin/cos over any box narrower than 2 pi: the exact range rounded outward, +-1 only where
  an extremum k pi/2 lies inside (oracle: mpmath at 3000 bits, MPFR in the format's
  directed context for the end values);
* tan: point boxes correctly rounded at any argument, boxes beside a pole finite and
  exactly directed, boxes holding a pole the whole line (oracle: MPFR, mpmath);
* fmod/remainder: the exact result where the quotient's integer part is constant over the
  box (point boxes: the exact IEEE result), exact sampling otherwise.
"""
from __future__ import annotations

import math
from fractions import Fraction

import gmpy2
import mpmath
import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.scalars import formats

FLOAT_BASES = ["float64", "binary32", "bfloat16", "binary16"]
ALL_BASES = FLOAT_BASES + ["mpmath:100", "rational"]


def _exact(v) -> Fraction:
    """Exact rational value of an endpoint (float, mpf, mpq)."""
    if hasattr(v, "_mpf_"):
        sign, man, exp, _ = v._mpf_
        q = Fraction(int(man)) * Fraction(2) ** int(exp)
        return -q if sign else q
    if hasattr(v, "numerator"):
        return Fraction(int(v.numerator), int(v.denominator))
    return Fraction(float(v))


def _round_exact(name, q: Fraction) -> int:
    if name == "ceil":
        return math.ceil(q)
    if name == "floor":
        return math.floor(q)
    if name == "trunc":
        return math.trunc(q)
    if name == "round":                     # C round: halves away from zero
        r = math.floor(abs(q) + Fraction(1, 2))
        return -r if q < 0 else r
    return round(q)                         # nearbyint: halves to even


def _format_values(base, x):
    """x rounded onto the base's grid (float bases), as float64."""
    if base in FLOAT_BASES:
        return formats.round_to_format(np.asarray(x, dtype=np.float64),
                                       formats.binary64 if base == "float64"
                                       else formats.get(base))
    return np.asarray(x, dtype=np.float64)


# ============================================================ rounding functions
@pytest.mark.parametrize("base", ALL_BASES)
@pytest.mark.parametrize("name", ["ceil", "floor", "trunc", "round", "nearbyint"])
def test_rounding_functions_are_exact_in_every_base(name, base):
    rng = np.random.default_rng(len(name) + len(base))
    x = np.concatenate([rng.integers(-40, 40, 40) / 4,            # halves and quarters
                        rng.uniform(-1e3, 1e3, 30), [3.7, -3.7, 2.5, -2.5, 0.5, -0.5,
                                                     0.49999999, 1e17 + 2.0, -7.0, 4.5]])
    x = _format_values(base, x)
    x = x[np.isfinite(x)]                              # 1e17 overflows binary16
    x = x[:x.size // 2 * 2]
    ctx = scalars.get(f"interval:{base}")
    a = np.sort(x.reshape(-1, 2), axis=1)
    lo_in, hi_in = a[:, 0].copy(), a[:, 1].copy()
    lo_in[:8], hi_in[:8] = x[:8], x[:8]                # point boxes
    if base == "rational":
        box = ctx.make([str(Fraction(float(t))) for t in lo_in],
                       [str(Fraction(float(t))) for t in hi_in])
    else:
        box = ctx.make(lo_in, hi_in)
    r = getattr(ctx, name)(box)
    for i in range(lo_in.size):
        want_lo = _round_exact(name, Fraction(float(lo_in[i])))
        want_hi = _round_exact(name, Fraction(float(hi_in[i])))
        assert _exact(r.lo[i]) == want_lo, (name, base, lo_in[i], r.lo[i])
        assert _exact(r.hi[i]) == want_hi, (name, base, hi_in[i], r.hi[i])


def test_issue_reproducer_nearbyint():
    ctx = scalars.get("interval:float64")
    r = ctx.nearbyint(ctx.make([3.7], [3.7]))
    assert (r.lo[0], r.hi[0]) == (4.0, 4.0)


# ================================================================== sin, cos, tan
def _fmt(base):
    return formats.binary64 if base == "float64" else formats.get(base)


def _dir(base, fname, x: float, mode: str) -> float:
    """MPFR's f(x) rounded down/up onto the base's grid (the format's own context)."""
    f = _fmt(base)
    c = formats.gmpy2_context(f, mode)
    with c:
        v = float(getattr(c, fname)(gmpy2.mpfr(float(x), 53)))
    return float(formats.round_to_format(np.array(v), f, mode))


def _inside(fname, a, b):
    """(maximum inside, minimum inside) of sin/cos over [a, b], by mpmath at 3000 bits."""
    with mpmath.workprec(3000):
        A, B = mpmath.mpf(a), mpmath.mpf(b)
        phases = (mpmath.pi / 2, -mpmath.pi / 2) if fname == "sin" else (0, mpmath.pi)
        return [mpmath.ceil((A - p) / (2 * mpmath.pi)) * 2 * mpmath.pi + p <= B
                for p in phases]


def _boxes(base, n, seed, wmin=0.0, span=60.0):
    f = _fmt(base)
    rng = np.random.default_rng(seed)
    a = formats.round_to_format(rng.uniform(-span, span, n), f)
    w = rng.uniform(wmin, 2 * math.pi, n)
    b = formats.round_to_format(a + w, f, "down")
    keep = (b - a < 2 * math.pi - 1e-9) & (b >= a)
    return a[keep], b[keep]


@pytest.mark.parametrize("base", FLOAT_BASES)
@pytest.mark.parametrize("fname", ["sin", "cos"])
def test_sin_cos_boxes_narrower_than_two_pi_are_exactly_directed(fname, base):
    """Every box narrower than 2 pi (a third of them 6 .. 2 pi wide): lo = RD(min f),
    hi = RU(max f), +-1 only where an extremum lies inside."""
    a1, b1 = _boxes(base, 60, 1 + len(fname))
    a2, b2 = _boxes(base, 30, 2 + len(fname), wmin=6.0, span=10.0)
    # 6 .. 6.2 wide boxes just missing one extremum (k pi/2 + 2 pi j + 0.05 .. 0.25)
    rng = np.random.default_rng(7)
    f = _fmt(base)
    q = rng.integers(0, 4, 30)
    start = q * math.pi / 2 + 2 * math.pi * rng.integers(-6, 6, 30) + rng.uniform(0.05, 0.25, 30)
    a3 = formats.round_to_format(start, f, "up")
    b3 = formats.round_to_format(a3 + rng.uniform(6.0, 6.02, 30), f, "down")
    a = np.concatenate([a1, a2, a3, [-3.0]])
    b = np.concatenate([b1, b2, b3, [3.0]])
    ctx = scalars.get(f"interval:{base}")
    r = getattr(ctx, fname)(ctx.make(a, b))
    n_not_full = 0
    for i in range(a.size):
        top, bottom = _inside(fname, a[i], b[i])
        want_hi = 1.0 if top else max(_dir(base, fname, a[i], "up"),
                                      _dir(base, fname, b[i], "up"))
        want_lo = -1.0 if bottom else min(_dir(base, fname, a[i], "down"),
                                          _dir(base, fname, b[i], "down"))
        assert (r.lo[i], r.hi[i]) == (want_lo, want_hi), (fname, base, a[i], b[i])
        n_not_full += b[i] - a[i] >= 5.5 and not (top and bottom)
    assert n_not_full >= 10


def test_issue_reproducer_cos():
    ctx = scalars.get("interval:float64")
    r = ctx.cos(ctx.make([-3.0], [3.0]))
    assert r.hi[0] == 1.0 and r.lo[0] == _dir("float64", "cos", 3.0, "down")
    assert r.lo[0] == -0.9899924966004455


@pytest.mark.parametrize("fname", ["sin", "cos"])
def test_sin_cos_mpmath_boxes_are_tight(fname):
    ctx = scalars.get("interval:mpmath:100")
    a, b = _boxes("float64", 40, 9 + len(fname))
    r = getattr(ctx, fname)(ctx.make(a, b))
    with mpmath.workprec(400):
        for i in range(a.size):
            top, bottom = _inside(fname, a[i], b[i])
            f = getattr(mpmath, fname)
            vals = [f(mpmath.mpf(a[i])), f(mpmath.mpf(b[i]))]
            hi = mpmath.mpf(1) if top else max(vals)
            lo = mpmath.mpf(-1) if bottom else min(vals)
            assert r.lo[i] <= lo and hi <= r.hi[i]
            assert hi - r.hi[i] <= 0 or r.hi[i] - hi <= mpmath.mpf(2) ** -95
            assert lo - r.lo[i] <= mpmath.mpf(2) ** -95


def _tan_points(base, n, seed):
    f = _fmt(base)
    rng = np.random.default_rng(seed)
    top = 1000 if base == "float64" else (120 if base in ("binary32", "bfloat16") else 14)
    x = np.ldexp(1 + rng.random(n), rng.integers(-10, top, n)) * np.where(
        rng.random(n) < 0.5, -1, 1)
    with mpmath.workprec(400):       # the grid values nearest the poles k pi + pi/2
        near = [float(mpmath.pi / 2 + k * mpmath.pi) for k in range(-40, 40)]
    x = np.concatenate([x, near])
    return np.unique(formats.round_to_format(x, f))


@pytest.mark.parametrize("base", FLOAT_BASES)
def test_tan_point_boxes_are_correctly_rounded_at_any_argument(base):
    ctx = scalars.get(f"interval:{base}")
    x = _tan_points(base, 120, 5)
    x = x[np.isfinite(x)]
    r = ctx.tan(ctx.make(x, x))
    for i, t in enumerate(x):
        assert (r.lo[i], r.hi[i]) == (_dir(base, "tan", t, "down"), _dir(base, "tan", t, "up")), \
            (base, t, r.lo[i], r.hi[i])


def _pole(k):
    with mpmath.workprec(400):
        return mpmath.pi / 2 + k * mpmath.pi


@pytest.mark.parametrize("base", ["float64", "binary32"])
def test_tan_boxes_beside_and_across_poles(base):
    """[pole - 2^-s, pole - 2^-t] (beside) is finite and exactly directed, however close;
    [pole - d, pole + d] (across) is the whole line."""
    f = _fmt(base)
    ctx = scalars.get(f"interval:{base}")
    ks = list(range(-30, 30))
    prec = 53 if base == "float64" else 24
    a, b, across = [], [], []
    with mpmath.workprec(400):
        for j, k in enumerate(ks):
            p = _pole(k)
            s = 1 + j % (prec - 12)             # from 2^-s below the pole ...
            lo = float(formats.round_to_format(np.array(float(p - mpmath.mpf(2) ** -s)), f,
                                               "down"))
            # ... to a few grid steps below it
            near = p - abs(p) * mpmath.mpf(2) ** -(prec - 3)
            hi = float(formats.round_to_format(np.array(float(near)), f, "down"))
            if j % 3 == 0:              # across: the grid values on both sides
                hi = float(formats.round_to_format(np.array(float(p)), f, "up"))
            a.append(lo), b.append(hi)
            across.append(mpmath.mpf(lo) <= p <= mpmath.mpf(hi))
    r = ctx.tan(ctx.make(np.array(a), np.array(b)))
    n_beside = 0
    for i in range(len(ks)):
        if across[i]:
            assert (r.lo[i], r.hi[i]) == (-math.inf, math.inf), (ks[i], a[i], b[i])
        else:
            n_beside += 1
            assert (r.lo[i], r.hi[i]) == (_dir(base, "tan", a[i], "down"),
                                          _dir(base, "tan", b[i], "up")), (ks[i], a[i], b[i])
    assert n_beside >= 30 and sum(across) >= 10


def test_tan_mpmath_box_beside_a_pole_is_finite():
    ctx = scalars.get("interval:mpmath:100")
    with mpmath.workprec(100):
        p = +_pole(3)
        a, b = p - mpmath.mpf(2) ** -20, p - mpmath.mpf(2) ** -90
        c, d = p - mpmath.mpf(2) ** -90, p + mpmath.mpf(2) ** -90
    r = ctx.tan(ctx.make([a, c], [b, d]))
    with mpmath.workprec(400):
        assert mpmath.isfinite(r.hi[0]) and r.lo[0] <= mpmath.tan(a) and mpmath.tan(b) <= r.hi[0]
        assert r.hi[0] - mpmath.tan(b) <= abs(mpmath.tan(b)) * mpmath.mpf(2) ** -95
    assert mpmath.isinf(r.lo[1]) and mpmath.isinf(r.hi[1])


# ============================================================== fmod, remainder
def _fmod_exact(name, x: Fraction, y: Fraction) -> Fraction:
    """C's fmod (n = trunc(x/y)) and IEEE remainder (n = x/y rounded half to even)."""
    q = x / y
    n = math.trunc(q) if name == "fmod" else round(q)
    return x - n * y


def _rd_ru(base, v: Fraction):
    f = _fmt(base)
    out = []
    for mode in ("down", "up"):
        with formats.gmpy2_context(f, mode):
            out.append(float(gmpy2.mpfr(gmpy2.mpq(v.numerator, v.denominator))))
    return out


def _point_pairs(base, n, seed):
    f = _fmt(base)
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1e6, 1e6, n) * 10.0 ** rng.integers(-3, 3, n)
    y = rng.uniform(-10, 10, n) * 10.0 ** rng.integers(-3, 3, n)
    # quotients at or next to integers and halves (where n changes), huge quotients
    k = n // 4
    y[:k] = np.round(y[:k] * 4) / 4 + 0.25
    x[:k] = y[:k] * (rng.integers(-50, 50, k) + rng.choice([0.0, 0.5], k))
    x[k:k + 4] = [1e300, -1e300, 3e-300, 7.0]
    y[k:k + 4] = [3e-300, 7e-290, 1e300, 0.5]
    x, y = formats.round_to_format(x, f), formats.round_to_format(y, f)
    keep = np.isfinite(x) & np.isfinite(y) & (y != 0)
    return x[keep], y[keep]


@pytest.mark.parametrize("base", FLOAT_BASES)
@pytest.mark.parametrize("name", ["fmod", "remainder"])
def test_fmod_remainder_point_boxes_are_the_exact_result(name, base):
    """A point box gives a point: the exact IEEE result (math.fmod / math.remainder in
    float64, MPFR's fmod / remainder in the format's context elsewhere)."""
    x, y = _point_pairs(base, 200, 3)
    ctx = scalars.get(f"interval:{base}")
    r = getattr(ctx, name)(ctx.make(x, x), ctx.make(y, y))
    c = formats.gmpy2_context(_fmt(base))
    for i in range(x.size):
        if base == "float64":
            want = (math.fmod if name == "fmod" else math.remainder)(x[i], y[i])
        else:
            want = float(getattr(c, name)(gmpy2.mpfr(float(x[i]), 53),
                                          gmpy2.mpfr(float(y[i]), 53)))
        assert Fraction(want) == _fmod_exact(name, Fraction(x[i]), Fraction(y[i]))
        assert r.lo[i] == want and r.hi[i] == want, (name, base, x[i], y[i], r.lo[i], r.hi[i])


def test_issue_reproducer_fmod_point_box():
    ctx = scalars.get("interval:float64")
    r = ctx.fmod(ctx.make([987654.321], [987654.321]), ctx.make([0.00123], [0.00123]))
    assert r.lo[0] == r.hi[0] == math.fmod(987654.321, 0.00123)


@pytest.mark.parametrize("base", ["float64", "binary32", "mpmath:100", "rational"])
@pytest.mark.parametrize("name", ["fmod", "remainder"])
def test_fmod_remainder_boxes_with_constant_quotient_are_tight(name, base):
    """Boxes where n is one integer (checked at the corners by the test, n being monotone):
    [RD min, RU max] of the exact corner values (f = x - n y is linear); every sampled
    point inside.  Other boxes: sound on samples and corners."""
    rng = np.random.default_rng(11)
    xl = np.round(rng.uniform(-40, 40, 60), 2)
    yl = np.round(rng.uniform(0.3, 5, 60), 2) * rng.choice([-1, 1], 60)
    xh = xl + np.round(rng.uniform(0, 0.3, 60), 2)
    yh = yl + np.round(rng.uniform(0, 0.05, 60), 2)
    ctx = scalars.get(f"interval:{base}")
    if base == "rational":
        mk = lambda v: [str(Fraction(str(t))) for t in v]       # noqa: E731
    elif base == "mpmath:100":
        mk = lambda v: [str(t) for t in v]                      # noqa: E731
    else:
        mk = lambda v: v                                        # noqa: E731
    xb, yb = ctx.make(mk(xl), mk(xh)), ctx.make(mk(yl), mk(yh))
    r = getattr(ctx, name)(xb, yb)
    n_const = 0
    for i in range(xl.size):
        X = (_exact(xb.lo[i]), _exact(xb.hi[i]))
        Y = (_exact(yb.lo[i]), _exact(yb.hi[i]))
        lo, hi = _exact(r.lo[i]), _exact(r.hi[i])
        corners = [_fmod_exact(name, a, b) for a in X for b in Y]
        ns = {(math.trunc if name == "fmod" else round)(a / b) for a in X for b in Y}
        for _ in range(12):
            a = X[0] + (X[1] - X[0]) * Fraction(int(rng.integers(0, 1000)), 1000)
            b = Y[0] + (Y[1] - Y[0]) * Fraction(int(rng.integers(0, 1000)), 1000)
            assert lo <= _fmod_exact(name, a, b) <= hi, (name, base, i)
        assert lo <= min(corners) and max(corners) <= hi
        if len(ns) == 1:
            n_const += 1
            if base in ("float64", "binary32"):
                assert (float(lo), float(hi)) == (_rd_ru(base, min(corners))[0],
                                                  _rd_ru(base, max(corners))[1]), (name, i)
            elif base == "rational":
                assert (lo, hi) == (min(corners), max(corners))
            else:
                assert min(corners) - lo <= abs(min(corners)) * Fraction(1, 2 ** 99) + \
                    Fraction(1, 2 ** 200)
                assert hi - max(corners) <= abs(max(corners)) * Fraction(1, 2 ** 99) + \
                    Fraction(1, 2 ** 200)
    assert n_const >= 20


@pytest.mark.parametrize("base", ["float64", "binary32", "mpmath:100"])
def test_zero_dimensional_boxes(base):
    """0-d boxes take the same exact paths (MPFR phase reduction at huge arguments, the
    exact fmod corner values)."""
    ctx = scalars.get(f"interval:{base}")
    t = {"float64": 1e300, "binary32": float(np.float32(1e30)), "mpmath:100": 1e30}[base]
    big = ctx.make(np.array(t), np.array(t))
    for fname in ("sin", "cos", "tan"):
        r = getattr(ctx, fname)(big)
        assert np.shape(r.lo) == ()
        with mpmath.workprec(5000):
            q = _exact(big.lo[()])
            v = getattr(mpmath, fname)(mpmath.mpf(q.numerator) / q.denominator)
            assert mpmath.mpf(r.lo[()]) <= v <= mpmath.mpf(r.hi[()])
            assert mpmath.mpf(r.hi[()]) - mpmath.mpf(r.lo[()]) <= abs(v) * 2.0 ** -20
    r = ctx.fmod(ctx.make(np.array(7.5), np.array(7.5)), ctx.make(np.array(2.0), np.array(2.0)))
    assert np.shape(r.lo) == () and _exact(r.lo[()]) == _exact(r.hi[()]) == Fraction(3, 2)
