"""Directed rounding of the vocabulary's functions: interval endpoints.

For an entry ``fn`` of :data:`scalars.functions.FUNCTIONS` and float64 arguments x:

* :func:`func_dir` -- (RD f(x), RU f(x)) onto a binary grid coarser than float64, exactly:
  the float64 value decides where its error bound (``fn.f64_rel``) cannot straddle a grid
  point, the rest go to :func:`mpfr_func_dir` (MPFR, Ziv's strategy).
* :func:`func_widened_f64` -- a float64 enclosure: libm is not correctly rounded, so the
  float64 value is widened by ``fn.f64_ulps`` float64 steps each side (the bound is tested
  against MPFR in tests/scalars/test_interval_functions.py).
"""
from __future__ import annotations

import math

import gmpy2
import numpy as np

from .directed import round_down, round_up
from .formats import Format
from .functions import F64_ABS_ERR, ScalarFunction

_CTX53 = {}


def _to_f64(v, mode: str) -> float:
    """Round an mpfr to float64 (with subnormals) downward or upward, exactly."""
    c = _CTX53.get(mode)
    if c is None:
        c = _CTX53[mode] = gmpy2.context(
            precision=53, emin=-1073, emax=1024, subnormalize=True,
            round=gmpy2.RoundDown if mode == "down" else gmpy2.RoundUp)
    with c:
        return float(+v)


def mpfr_func_dir(fn: ScalarFunction, x: float, grid: Format) -> tuple[float, float]:
    """(RD_grid f(x), RU_grid f(x)) by MPFR with Ziv's strategy (precision 96..1024).

    L <= f(x) <= U holds at every precision, so the answer is always sound; it is the
    correctly rounded directed value as soon as L and U round to the same grid points,
    which happens at 96 bits except when f(x) is within ~2^-90 of a grid value
    (exact cases such as exp(0) = 1 have L = U and resolve at once).
    """
    if math.isnan(x):
        return math.nan, math.nan
    lo = hi = None
    X = gmpy2.mpfr(x, 53)                     # exact
    for wp in (96, 256, 1024):
        L, U = fn.bounds(X, wp)
        if L != L or U != U:   # NaN: outside the domain
            return math.nan, math.nan
        l1, l2 = round_down(_to_f64(L, "down"), grid), round_down(_to_f64(U, "down"), grid)
        h1, h2 = round_up(_to_f64(L, "up"), grid), round_up(_to_f64(U, "up"), grid)
        lo, hi = float(l1), float(h2)
        if l1 == l2 and h1 == h2:
            break
    return lo, hi


def _facts(fn: ScalarFunction, x):
    if fn.facts is None:
        inf = np.full(np.shape(x), np.inf)
        no = np.zeros(np.shape(x), bool)
        return -inf, no, inf, no
    return fn.facts(x)


def func_dir(fn: ScalarFunction, x, grid: Format):
    """Correctly rounded (RD_grid f(x), RU_grid f(x)) for a grid coarser than float64.

    Fast path: the float64 value v, with |v - f(x)| <= fn.f64_rel |v| + F64_ABS_ERR; where
    [v - m, v + m] rounds down and up to single grid values, those are the answers.  The
    rest (results close to a grid value, infinities, exact cases) go through
    :func:`mpfr_func_dir`.
    """
    x = np.array(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        v = fn.eval_f64(x)
        # f64_ulps = 0 declares an exact evaluator (ceil, floor, ...): no error interval
        m = np.abs(v) * fn.f64_rel + F64_ABS_ERR if fn.f64_ulps else np.zeros_like(v)
        lower, lstrict, upper, ustrict = _facts(fn, x)
        a, b = v - m, v + m
        # A strict bound c (f(x) > c) lets the downward check start at next(c): no
        # float64, hence no grid value, lies strictly between c and next(c).
        a_dn = np.maximum(a, lower)
        a_up = np.maximum(a, np.where(lstrict, np.nextafter(lower, np.inf), lower))
        b_dn = np.minimum(b, np.where(ustrict, np.nextafter(upper, -np.inf), upper))
        b_up = np.minimum(b, upper)
        d1, d2 = round_down(a_dn, grid), round_down(b_dn, grid)
        u1, u2 = round_up(a_up, grid), round_up(b_up, grid)
    ok = (d1 == d2) & (u1 == u2) & np.isfinite(x)
    lo = np.where(ok, d1, np.nan)
    hi = np.where(ok, u2, np.nan)
    idx = np.flatnonzero(~ok & ~np.isnan(x))
    if idx.size:
        fl, fh, fx = lo.reshape(-1), hi.reshape(-1), x.reshape(-1)
        for i in idx:
            fl[i], fh[i] = mpfr_func_dir(fn, float(fx[i]), grid)
    return lo, hi


def func_widened_f64(fn: ScalarFunction, x):
    """(lo, hi) float64 enclosure of f(x): the float64 value widened by fn.f64_ulps steps."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        v = fn.eval_f64(x)
        lo, hi = v, v
        for _ in range(fn.f64_ulps):
            lo = np.nextafter(lo, -np.inf)
            hi = np.nextafter(hi, np.inf)
        rlo, rhi = fn.range
        lo = np.maximum(lo, rlo)
        hi = np.minimum(hi, rhi)
        # Known facts (|sin x| <= |x|, e^x >= 1 for x >= 0, ...) tighten without risk.
        lower, _, upper, _ = _facts(fn, x)
        lo = np.maximum(lo, lower)
        hi = np.minimum(hi, upper)
        # Limits at infinite arguments are exact in libm (exp(-inf) = 0, tanh(inf) = 1 ...).
        exact = ~np.isfinite(x) & ~np.isnan(v)
        lo = np.where(exact, v, lo)
        hi = np.where(exact, v, hi)
    return lo, hi
