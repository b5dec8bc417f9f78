"""Interval endpoints of exp log tanh sigmoid softplus erf sin cos against MPFR.

Binary bases (binary32, bfloat16): a degenerate interval [x, x] must map to exactly
[RD f(x), RU f(x)] in the format.  Oracle: gmpy2 with the format's precision, exponent
range and subnormalisation for the MPFR functions; sigmoid and softplus (not MPFR
functions) are evaluated by mpmath at 300 bits and then rounded by that gmpy2 context
(wrong only if f(x) were within 2^-300 of a format value).  float64 base: the widened
libm endpoints must enclose MPFR's value, and the libm error itself must stay below the
documented f64_ulps bound of scalars.functions.
"""
from __future__ import annotations

import gmpy2
import mpmath
import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.scalars.kernels import directed as D
from scalarlab.scalars.functions import FUNCTIONS

from mp_reference import mp_value

MONOTONE = ["exp", "log", "tanh", "sigmoid", "softplus", "erf"]
FORMATS = {"binary32": (24, -126, 127), "bfloat16": (8, -126, 127)}


def _ctx(prec, emin, emax, mode):
    return gmpy2.context(precision=prec, emin=emin - prec + 2, emax=emax + 1,
                         subnormalize=True, round=mode)


_MP = mpmath.MPContext()


def _hp(name, x: float):
    """f(x) as an mpfr from mpmath (sigmoid/softplus), precise enough to round.

    For x > 0 the value is 1 - e^-x.. or x + e^-x..: the precision grows with x so that
    the tail is resolved (about 1.45 x bits plus 200 guard bits).  Above x = 2000 the tail
    e^-x is replaced by e^-2000: the value stays strictly between the same neighbours of
    every format (within 2^-2800 of 1, resp. of x).
    """
    xc = min(max(x, 0.0), 2000.0) if x == x else 0.0
    _MP.prec = 200 + int(1.45 * xc) + (int(abs(x)).bit_length() if np.isfinite(x) else 0)
    X = _MP.mpf(x)
    if _MP.isinf(X):
        if name == "sigmoid":
            return gmpy2.mpfr(1 if X > 0 else 0)
        return gmpy2.mpfr("inf") if X > 0 else gmpy2.mpfr(0)
    tail = _MP.exp(-min(X, 2000)) if X > 0 else None
    if name == "sigmoid":
        v = 1 / (1 + tail) if X > 0 else _MP.exp(X) / (1 + _MP.exp(X))
    else:
        v = X + _MP.log1p(tail) if X > 0 else _MP.log1p(_MP.exp(X))
    man, exp = v.man_exp
    if not man:
        return gmpy2.mpfr(0)
    # below 2^-3000 every format rounds alike (0 down, min subnormal up): clamp the
    # exponent so gmpy2 can hold the value
    exp = max(int(exp), -3000 - int(man).bit_length())
    q = gmpy2.mpq(int(man)) * (gmpy2.mpq(2) ** exp)
    return gmpy2.mpfr(q, 3200)       # exact: a 3000-bit value


def oracle(name, x, fmt_name):
    prec, emin, emax = FORMATS[fmt_name]
    hp = [_hp(name, float(t)) for t in x] if name in ("sigmoid", "softplus") else None
    out = []
    for mode in (gmpy2.RoundDown, gmpy2.RoundUp):
        c = _ctx(prec, emin, emax, mode)
        if hp is not None:
            with c:
                out.append(np.array([float(+v) for v in hp]))
            continue
        g = getattr(c, name)
        with np.errstate(all="ignore"):
            out.append(np.frompyfunc(lambda t: float(g(t)), 1, 1)(x).astype(float))
    return out


def _inputs(fmt_name, name, n, seed):
    """Random format values in the interesting range plus adversarial points."""
    rng = np.random.default_rng(seed)
    ctx = scalars.get(f"interval:{fmt_name}")
    grid = ctx.ends.grid
    pieces = [rng.uniform(-30, 30, n), rng.uniform(-3, 3, n),
              np.ldexp(rng.uniform(-1, 1, n // 4), -rng.integers(5, 140, n // 4)),
              [0.0, 1.0, -1.0, 88.72, 88.73, -87.3, -103.9, 1e-30, -1e-30, 2.0 ** -149,
               709.0, 1e30, -1e30, 3.14159265, 1.5707963]]
    x = D.round_down(np.concatenate([np.asarray(p, dtype=float) for p in pieces]), grid)
    if name == "log":
        x = np.abs(x)
        x = np.concatenate([x, D.round_down(1.0 + rng.integers(-64, 64, 200) * 2.0 ** -20, grid)])
        x = x[x > 0]
    return x


@pytest.mark.parametrize("fmt_name", list(FORMATS))
@pytest.mark.parametrize("name", MONOTONE)
def test_monotone_endpoints_correctly_rounded(fmt_name, name):
    n = 1200 if name in ("sigmoid", "softplus") else 3000    # mpmath oracle is slower
    x = _inputs(fmt_name, name, n, sum(map(ord, fmt_name + name)))
    ctx = scalars.get(f"interval:{fmt_name}")
    r = getattr(ctx, name)(ctx.make(x, x))
    lo, hi = oracle(name, x, fmt_name)
    bad_lo, bad_hi = r.lo != lo, r.hi != hi
    assert not bad_lo.any(), (name, x[bad_lo][:4], r.lo[bad_lo][:4], lo[bad_lo][:4])
    assert not bad_hi.any(), (name, x[bad_hi][:4], r.hi[bad_hi][:4], hi[bad_hi][:4])


@pytest.mark.parametrize("fmt_name", list(FORMATS))
def test_wide_interval_uses_endpoint_rule(fmt_name):
    ctx = scalars.get(f"interval:{fmt_name}")
    x = ctx.make([-2.0, 0.5], [3.0, 0.75])
    for name in MONOTONE:
        if name == "log":
            continue
        r = getattr(ctx, name)(x)
        lo, _ = oracle(name, x.lo, fmt_name)
        _, hi = oracle(name, x.hi, fmt_name)
        np.testing.assert_array_equal(r.lo, lo)
        np.testing.assert_array_equal(r.hi, hi)
    t = ctx.tanh(ctx.make(0.0, 1.0))
    assert 0.76 < t.hi < 0.77 and t.lo == 0.0          # not the global [-1, 1]


@pytest.mark.parametrize("fmt_name", list(FORMATS))
@pytest.mark.parametrize("name", ["sin", "cos"])
def test_sin_cos_point_endpoints_correctly_rounded(fmt_name, name):
    rng = np.random.default_rng(7)
    ctx = scalars.get(f"interval:{fmt_name}")
    x = D.round_down(np.concatenate([rng.uniform(-50, 50, 2000), [0.0, 1e-20, -3e-8]]), ctx.ends.grid)
    r = getattr(ctx, name)(ctx.make(x, x))
    lo, hi = oracle(name, x, fmt_name)
    np.testing.assert_array_equal(r.lo, lo)
    np.testing.assert_array_equal(r.hi, hi)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["exp", "log", "tanh", "sigmoid", "softplus"])
def test_bfloat16_every_value(name):
    from scalarlab.scalars import formats
    x = formats.decode(np.arange(2 ** 16), formats.get("bfloat16"))
    x = x[np.isfinite(x)]
    if name == "log":
        x = x[x > 0]
    ctx = scalars.get("interval:bfloat16")
    r = getattr(ctx, name)(ctx.make(x, x))
    lo, hi = oracle(name, x, "bfloat16")
    np.testing.assert_array_equal(r.lo, lo)
    np.testing.assert_array_equal(r.hi, hi)


@pytest.mark.slow
@pytest.mark.parametrize("name", MONOTONE)
def test_binary32_many_values(name):
    x = _inputs("binary32", name, 30000, 99)
    ctx = scalars.get("interval:binary32")
    r = getattr(ctx, name)(ctx.make(x, x))
    lo, hi = oracle(name, x, "binary32")
    np.testing.assert_array_equal(r.lo, lo)
    np.testing.assert_array_equal(r.hi, hi)


def _ulps(a, b):
    def ordv(v):
        i = np.asarray(v, dtype=np.float64).view(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFFFFFFFFFF), i)
    return np.abs(ordv(a) - ordv(b))


F64_RANGES = {
    "exp": [(-745, 709), (-1, 1)], "log": [(1e-300, 1e300), (0.5, 2.0)],
    "tanh": [(-20, 20), (-1e-3, 1e-3)], "sigmoid": [(-745, 40), (-2, 2)],
    "softplus": [(-745, 745), (-40, 40)], "erf": [(-6, 6), (-1e-3, 1e-3)],
    "sin": [(-1e4, 1e4), (-4, 4)], "cos": [(-1e4, 1e4), (-4, 4)]}


@pytest.mark.parametrize("name", list(F64_RANGES))
def test_float64_widening_bound_encloses_mpfr(name):
    """float64 evaluator error <= f64_ulps - 1 (measured: <= 2) and the widened box
    encloses f(x)."""
    rng = np.random.default_rng(len(name))
    parts = []
    for lo, hi in F64_RANGES[name]:
        if name == "log" and lo > 0 and hi / lo > 1e3:
            parts.append(np.exp(rng.uniform(np.log(lo), np.log(hi), 1500)))
        else:
            parts.append(rng.uniform(lo, hi, 1500))
    x = np.concatenate(parts)
    fn = FUNCTIONS[name]
    v = fn.eval_f64(x)
    c53 = gmpy2.context(precision=53, emin=-1073, emax=1024, subnormalize=True)
    if name in ("sigmoid", "softplus"):
        exact = [_hp(name, float(t)) for t in x]
    else:
        wide = gmpy2.context(precision=200)
        exact = [getattr(wide, name)(float(t)) for t in x]
    with c53:
        nearest = np.array([float(+e) for e in exact])
    assert _ulps(v, nearest).max() <= fn.f64_ulps - 1
    ctx = scalars.get("interval:float64")
    r = getattr(ctx, name)(ctx.make(x, x))
    for i in range(0, x.size, 7):
        assert gmpy2.mpfr(float(r.lo[i]), 53) <= exact[i] <= gmpy2.mpfr(float(r.hi[i]), 53), (name, x[i])
    assert _ulps(r.lo, r.hi).max() <= 2 * fn.f64_ulps


def test_float64_base_limits_and_domain():
    ctx = scalars.get("interval:float64")
    r = ctx.exp(ctx.make([-np.inf, 0.0], [0.0, np.inf]))
    assert r.lo[0] == 0.0 and r.hi[1] == np.inf and r.lo[1] == 1.0
    r = ctx.tanh(ctx.make(-np.inf, np.inf))
    assert r.lo == -1.0 and r.hi == 1.0
    r = ctx.log(ctx.make(0.0, 1.0))
    assert r.lo == -np.inf and r.hi == 0.0
    with pytest.raises(scalars.ContextError, match="log.*negative"):
        ctx.log(ctx.make(-1.0, 1.0))
    with pytest.raises(scalars.ContextError, match="sqrt.*negative"):
        ctx.sqrt(ctx.make(-1e-300, 1.0))


@pytest.mark.parametrize("base", ["float64", "binary32", "bfloat16", "mpmath:200"])
def test_sin_cos_extrema_inside(base):
    ctx = scalars.get(f"interval:{base}")
    s = ctx.sin(ctx.make([1.0, -2.0, 2.0, 0.0], [2.0, -1.0, 2.5, 100.0]))
    lo = ctx.to_float64(s).lo
    hi = ctx.to_float64(s).hi
    tol = 2.0 ** -7 if base == "bfloat16" else 1e-6
    assert hi[0] == 1.0 and np.sin(1.0) - tol < lo[0] <= np.sin(1.0)     # max pi/2 inside
    assert lo[1] == -1.0 and np.sin(-1.0) <= hi[1] < np.sin(-1.0) + tol  # min -pi/2 inside
    assert np.sin(2.5) - tol < lo[2] <= np.sin(2.5) and np.sin(2.0) <= hi[2] < np.sin(2.0) + tol
    assert lo[3] == -1.0 and hi[3] == 1.0
    c = ctx.cos(ctx.make([-0.5, 3.0], [0.5, 3.5]))
    f = ctx.to_float64(c)
    assert f.hi[0] == 1.0 and f.lo[0] <= np.cos(0.5) < f.lo[0] + tol
    assert f.lo[1] == -1.0 and np.cos(3.5) <= f.hi[1] < np.cos(3.5) + tol


def test_mpmath_base_functions_enclose_high_precision():
    ctx = scalars.get("interval:mpmath:200")
    mp = mpmath.MPContext(); mp.prec = 600
    xs = ["-3.5", "-0.001", "0", "0.3", "2", "17.25"]
    for name in MONOTONE + ["sin", "cos"]:
        pts = [x for x in xs if name != "log" or float(x) > 0]
        r = getattr(ctx, name)(ctx.convert(pts))
        for i, x in enumerate(pts):
            X = mp.mpf(x)
            v = mp_value(mp, name, X)
            lo, hi = mp.mpf(r.lo[i]), mp.mpf(r.hi[i])
            assert lo <= v <= hi, (name, x)
            assert hi - lo <= abs(v) * mp.mpf(2) ** -190 + mp.mpf(2) ** -1000, (name, x)
