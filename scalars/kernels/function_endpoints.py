"""Directed rounding of the vocabulary's functions: interval endpoints.

For an entry ``fn`` of :data:`scalars.functions.FUNCTIONS` and float64 arguments x:

* :func:`func_dir` -- (RD f(x), RU f(x)) onto a binary grid coarser than float64, exactly:
  the float64 value decides where its error bound (``fn.f64_rel``) cannot straddle a grid
  point, the rest go to :func:`mpfr_func_dir` (MPFR, Ziv's strategy).
* :func:`func_dir_f64` -- (RD f(x), RU f(x)) onto float64, exactly (the interval:float64
  endpoints): exp, log, tanh, sigmoid and softplus by the compiled double-double kernels
  of :mod:`scalars.kernels.f64_endpoints` (:func:`func_pair_f64`), the entries they leave
  undecided and the other functions by :func:`func_dir_f64_ld` (long double evaluation,
  MPFR for the rest).
* :func:`func_widened_f64` -- the former float64 enclosure, kept as the cheap comparison:
  libm's value widened by ``fn.f64_ulps`` float64 steps each side (the bound is tested
  against MPFR in tests/scalars/test_interval_functions.py).
* :func:`extremum_inside` / :func:`phase_inside` -- whether an extremum of sin/cos (a
  pole of tan) lies in [lo, hi], by exact MPFR argument reduction (used where the float64
  phase test cannot decide: beyond 2^40, near a multiple of pi/2, mpmath endpoints).
"""
from __future__ import annotations

import math

import gmpy2
import numpy as np

from .directed import round_down, round_up
from ..formats import Format
from . import grid as GK
from . import f64_endpoints as F64K
from ..functions import F64_ABS_ERR, FUNCTIONS, ScalarFunction

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
    if fn.name in GK.FUNC_CODES and FUNCTIONS.get(fn.name) is fn:
        # the same test in one compiled pass (numba's libm value, same error bound)
        return GK.func_pair(fn, x, x, grid, lambda t: mpfr_func_dir(fn, t, grid))
    return func_dir_numpy(fn, x, grid)


def func_dir_numpy(fn: ScalarFunction, x, grid: Format):
    """:func:`func_dir` as numpy passes over the vocabulary's float64 evaluator (the
    functions without a compiled evaluator in :mod:`scalars.kernels.grid`)."""
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


def mpf_to_mpfr(t):
    """The exact mpfr value of an mpmath mpf (its own bit count; 0, inf, nan as such)."""
    sign, man, exp, bc = t._mpf_
    if man == 0:
        return gmpy2.mpfr(float(t), 53)       # 0, inf, nan
    with gmpy2.context(precision=max(int(bc), 2), emin=gmpy2.get_emin_min(),
                       emax=gmpy2.get_emax_max()):
        r = gmpy2.mul_2exp(gmpy2.mpfr(-int(man) if sign else int(man)), int(exp))
    return r     # exact: bc bits (a negation outside the context would round to 53)


def exact_mpfr(v):
    """The exact mpfr value of a float64 or an mpmath mpf endpoint."""
    return mpf_to_mpfr(v) if hasattr(v, "_mpf_") else gmpy2.mpfr(float(v), 53)


#: the largest binary exponent whose phase is reduced (2^100000: 100000-bit arithmetic)
MAX_PHASE_EXPONENT = 100_000


def phase_inside(q: int, period: int, a, b) -> bool:
    """Whether ``(q + k period) pi/2`` lies in ``[a, b]`` for some integer k, decided
    rigorously: a, b are exact mpfr values (finite, a <= b); t(x) = (2x/pi - q)/period is
    bounded below and above by directed MPFR arithmetic (pi from MPFR's const_pi rounded
    both ways) at exponent(x) + 64 bits, then +192, +640 (Ziv) until "surely inside"
    (ceil(t(a)_hi) <= floor(t(b)_lo)) and "maybe inside" (ceil(t(a)_lo) <= floor(t(b)_hi))
    agree.  They can only disagree when a multiple lies within 2^-600 |x| of an end (a
    multiple of pi/2 is never a nonzero float); then the answer is the conservative True,
    as it is beyond 2^MAX_PHASE_EXPONENT."""
    e = max(gmpy2.get_exp(a) if a != 0 else 0, gmpy2.get_exp(b) if b != 0 else 0, 1)
    if e > MAX_PHASE_EXPONENT:
        return True
    wide = dict(emin=gmpy2.get_emin_min(), emax=gmpy2.get_emax_max())
    for extra in (64, 192, 640):
        dn = gmpy2.context(precision=e + extra, round=gmpy2.RoundDown, **wide)
        up = gmpy2.context(precision=e + extra, round=gmpy2.RoundUp, **wide)
        with dn:
            pi_lo = gmpy2.const_pi()
        with up:
            pi_hi = gmpy2.const_pi()
        c_lo, c_hi = dn.div(2, pi_hi), up.div(2, pi_lo)       # 2/pi, both ways

        def t_bounds(x):
            lo = dn.mul(x, c_lo if x >= 0 else c_hi)
            hi = up.mul(x, c_hi if x >= 0 else c_lo)
            return dn.div(dn.sub(lo, q), period), up.div(up.sub(hi, q), period)
        al, ah = t_bounds(a)
        bl, bh = t_bounds(b)
        # t has at most e + 1 integer bits: ceil/floor are exact at e + extra bits
        sure = up.ceil(ah) <= dn.floor(bl)
        maybe = dn.ceil(al) <= up.floor(bh)
        if sure == maybe:
            return bool(sure)
    return True


def extremum_inside(phase: float, lo, hi):
    """Whether ``phase + 2 k pi`` lies in ``[lo, hi]`` for some integer k, elementwise, for
    float64 or mpmath endpoints at any magnitude (:func:`phase_inside`: exact reduction in
    MPFR).

    ``phase`` must be a multiple of pi/2 (as the :class:`Periodic` phases of sin and cos
    are); it is taken as that exact multiple.  Non-finite endpoints or lo > hi give True
    (no claim to be narrow).
    """
    q = round(phase / (math.pi / 2))
    if abs(phase - q * math.pi / 2) > 1e-12:
        raise ValueError(f"extremum_inside: phase {phase!r} is not a multiple of pi/2")
    lo = np.asarray(lo)
    hi = np.asarray(hi)
    if lo.dtype != object:
        lo = lo.astype(np.float64)
    if hi.dtype != object:
        hi = hi.astype(np.float64)
    out = np.ones(np.broadcast_shapes(lo.shape, hi.shape), dtype=bool)
    fl, fh = np.broadcast_to(lo, out.shape).reshape(-1), np.broadcast_to(hi, out.shape).reshape(-1)
    fo = out.reshape(-1)
    for i in range(fo.size):
        a, b = exact_mpfr(fl[i]), exact_mpfr(fh[i])
        if not (gmpy2.is_finite(a) and gmpy2.is_finite(b)) or a > b:
            continue
        fo[i] = phase_inside(q, 4, a, b)
    return out


# ------------------------------------------------------------ exactly directed float64
#: x87 extended precision (64-bit significand) is where numpy's long double functions run
#: on x86-64 Linux; elsewhere long double is often float64 itself and every endpoint goes
#: to MPFR.
LONG_DOUBLE_OK = np.finfo(np.longdouble).nmant >= 63
#: Relative error trusted of a long double evaluation (2^4 long double ulps: the glibc
#: long double functions measured within 4.7 ulps; tested against MPFR in
#: tests/scalars/test_interval_f64_endpoints.py).
LD_REL = 2.0 ** -60
#: Functions whose float64 evaluator also runs in long double (numpy ufuncs on a long
#: double array); erf's evaluator is a float64 kernel, so erf endpoints all go to MPFR.
_LD_FUNCS = {"exp", "log", "tanh", "sigmoid", "softplus", "sin", "cos", "atan"}
_DBL_MIN_SUB = 2.0 ** -1074


def _rd64(a):
    """Largest float64 <= each long double value (exact comparison in long double)."""
    f = a.astype(np.float64)
    return np.where(f.astype(np.longdouble) > a, np.nextafter(f, -np.inf), f)


def _ru64(a):
    f = a.astype(np.float64)
    return np.where(f.astype(np.longdouble) < a, np.nextafter(f, np.inf), f)


def func_dir_f64(fn: ScalarFunction, x):
    """Correctly rounded (RD f(x), RU f(x)) onto float64, exactly: the compiled kernels
    where they exist (:func:`func_pair_f64`), else :func:`func_dir_f64_ld`."""
    if fn.name in F64K.CODES and FUNCTIONS.get(fn.name) is fn:
        x = np.array(x, dtype=np.float64)
        return func_pair_f64(fn, x, x)
    return func_dir_f64_ld(fn, x)


def func_pair_f64(fn: ScalarFunction, xl, xh, counted: bool = False):
    """(RD f(xl), RU f(xh)) onto float64 for a function with compiled endpoints (name in
    :data:`scalars.kernels.f64_endpoints.CODES`): one compiled pass, the few undecided
    entries (f(x) within ~2^-67 relative of a float64, results outside the normal range,
    non-finite arguments) through :func:`func_dir_f64_ld`.  ``counted``: also the number
    of NaN ends."""
    r = F64K.endpoints_counted(fn.name, xl, xh, lambda t: func_dir_f64_ld(fn, t))
    return r if counted else r[:2]


def func_dir_f64_ld(fn: ScalarFunction, x):
    """Correctly rounded (RD f(x), RU f(x)) onto float64, exactly, without the compiled
    kernels.

    Fast path: the function in long double, v with |v - f(x)| <= LD_REL |v| + 2^-1100;
    where [v - m, v + m] (widened again for the long double rounding of v +- m, and
    clipped by the function's known facts) rounds down and up to single float64 values,
    those are the answers (about 98.5% of random arguments).  The rest -- results within
    ~2^-60 of a float64, exact cases such as exp(0) = 1, saturated tails, non-finite
    values -- go through :func:`mpfr_func_dir`, as the coarser binary grids do."""
    from ..formats import binary64
    x = np.array(x, dtype=np.float64)
    if not fn.f64_ulps:
        # an exact float64 evaluator (ceil floor trunc round nearbyint): its value is f(x)
        v = fn.eval_f64(x)
        return v, v.copy()
    lo = np.full(x.shape, np.nan)
    hi = np.full(x.shape, np.nan)
    if LONG_DOUBLE_OK and fn.name in _LD_FUNCS and x.size:
        with np.errstate(all="ignore"):
            xl = x.astype(np.longdouble)
            v = np.asarray(fn.f64(xl))
            if v.dtype == np.longdouble:
                m = np.abs(v) * np.longdouble(LD_REL) + np.longdouble(2.0 ** -1100)
                a, b = v - m, v + m
                a = a - np.abs(a) * np.longdouble(2.0 ** -62)     # the rounding of v -+ m
                b = b + np.abs(b) * np.longdouble(2.0 ** -62)
                lower, lstrict, upper, ustrict = _facts(fn, x)
                a_dn = np.maximum(_rd64(a), lower)
                a_up = np.maximum(_ru64(a), np.where(lstrict, np.nextafter(lower, np.inf),
                                                     lower))
                b_dn = np.minimum(_rd64(b), np.where(ustrict, np.nextafter(upper, -np.inf),
                                                     upper))
                b_up = np.minimum(_ru64(b), upper)
                ok = ((a_dn == b_dn) & (a_up == b_up) & np.isfinite(x)
                      & np.isfinite(a_dn) & np.isfinite(b_up))
                lo = np.where(ok, a_dn, np.nan)
                hi = np.where(ok, b_up, np.nan)
    todo = np.flatnonzero(np.isnan(lo) & ~np.isnan(x))
    if todo.size:
        fl, fh, fx = lo.reshape(-1), hi.reshape(-1), x.reshape(-1)
        for i in todo:
            fl[i], fh[i] = mpfr_func_dir(fn, float(fx[i]), binary64)
    return lo, hi
