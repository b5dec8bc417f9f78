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
