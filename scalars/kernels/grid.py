"""Compiled directed rounding onto binary grids coarser than float64 (``interval:binary32``,
``interval:bfloat16``, ...): one pass per interval op.

Every grid value is a float64, so a grid endpoint is RD/RU of an exact value t onto the
grid.  Two ways to know t well enough, both as in the numpy paths they replace:

* arithmetic (+ - * / sqrt): s = RN64(t) by the hardware and the exact sign of t - s by an
  error-free transformation (TwoSum, TwoProduct, the division / square-root residual).  No
  float64 lies strictly between t and s, hence RD_grid(t) = RD_grid(prev64(s)) when t < s
  and RD_grid(s) otherwise (RU likewise): :func:`scalars.kernels.directed.finish`.
* functions (exp log tanh sigmoid softplus): the float64 value v (numpy's SIMD exp / log /
  tanh, the sigmoid / softplus compositions finished in the kernel), within
  ``fn.f64_rel |v| + F64_ABS_ERR`` of f(x) (the bound :mod:`scalars.functions` declares,
  with its FAST_PATH_MARGIN); where [v - m, v + m], clipped by the function's known facts,
  rounds down and up to single grid values, those are the answers, exactly as
  :func:`scalars.kernels.function_endpoints.func_dir`.  The rest are flagged and the caller sends
  them to MPFR (:func:`scalars.kernels.function_endpoints.mpfr_func_dir`).

Operands outside [2^-900, 2^900] (EFT preconditions) or non-finite make the arithmetic
kernels give up (return False) and the caller runs the generic algorithm.  Rounding onto
the grid follows :func:`scalars.kernels.directed.round_down` / ``round_up`` (the *extended* grid:
beyond max_finite lies +-inf; without subnormals the gap below min_normal holds only 0).
"""
from __future__ import annotations

import math

import numba
import numpy as np

from .eft import f2i, i2f, two_prod, two_sum
from .flat import flat_f64, writable
from ..formats import Format

_INF = math.inf
_DBL_MAX = float(np.finfo(np.float64).max)
_SAFE_LO = 2.0 ** -900
_SAFE_HI = 2.0 ** 900
_NEG_TINY_BITS = np.array([-5e-324]).view(np.int64)[0]
#: _EXP2[k + 1100] = 2^k for -1074 <= k <= 1023 (0 below, as never indexed there)
_EXP2 = np.array([math.ldexp(1.0, k) if k >= -1074 else 0.0 for k in range(-1100, 1024)])

#: function codes of the compiled evaluators (names of scalars.functions entries)
_jit = numba.njit(cache=True, error_model="numpy")
_jit_inline = numba.njit(cache=True, error_model="numpy", inline="always")

FUNC_CODES = {"exp": 0, "log": 1, "tanh": 2, "sigmoid": 3, "softplus": 4}


def grid_params(fmt: Format):
    """(emin, man_bits, max_finite, subnormals, min_normal) as the kernels take them."""
    return (int(fmt.emin), int(fmt.man_bits), float(fmt.max_finite), bool(fmt.subnormals),
            float(fmt.min_normal))


# ------------------------------------------------------------------ rounding onto a grid
@_jit
def _onto(x, emin, mb, up):
    """floor (ceil if up) of x onto the grid's values, ignoring overflow, without branches
    (the signs of interval ends are coin flips): where |x| >= 2^emin the float64
    significand's low 52 - mb bits are cleared on the bit pattern and, when some were set,
    one grid step is added to the magnitude on the side away from the direction; in the
    grid's subnormal range one scaled floor/ceil.  Both exact; inf stays inf.  (NaN is
    handled by the callers.)"""
    k = 52 - mb
    bi = f2i(x)
    sgn = bi >> 63                               # -1 for negative x, else 0
    mask = (np.int64(1) << k) - 1
    mag = bi & np.int64(0x7FFFFFFFFFFFFFFF)
    low = mag & mask
    inc = ((low + mask) >> k) << k               # one step when low bits were set
    t = mag - low
    step = inc & (~sgn if up else sgn)           # away from 0 only towards the direction
    r_norm = i2f((bi & ~np.int64(0x7FFFFFFFFFFFFFFF)) | (t + step))
    # the grid's subnormal step 2^q; 2^-q must be a float64 (the table holds 2^-1074 ..
    # 2^1023): binary64 itself (q = -1074) keeps x (every float64 is on its grid), a
    # format with -1074 < q < -1023 is rounded onto multiples of 2^-1023 (coarser: still
    # a bound in the right direction)
    q = emin - mb
    qq = max(q, -1023)
    y = x * _EXP2[1100 - qq]                     # exact in the subnormal range
    r_sub = (np.ceil(y) if up else np.floor(y)) * _EXP2[qq + 1100]
    r_sub = x if q <= -1074 else r_sub
    return r_sub if abs(x) < _EXP2[emin + 1100] else r_norm


@_jit
def rd_grid(x, emin, mb, maxf, sub, tiny):
    """Largest value of the extended grid <= x (NaN stays NaN)."""
    r = _onto(x, emin, mb, False)
    r = maxf if (x > maxf and x <= _DBL_MAX) else r
    r = -_INF if x < -maxf else r
    if not sub:
        r = 0.0 if 0.0 < x < tiny else r
        r = -tiny if -tiny < x < 0.0 else r
    return r if x == x else x


@_jit
def ru_grid(x, emin, mb, maxf, sub, tiny):
    """Smallest value of the extended grid >= x (a negative x rounding to 0 gives -0.0)."""
    r = _onto(x, emin, mb, True)
    r = _INF if x > maxf else r
    r = -maxf if (x < -maxf and x >= -_DBL_MAX) else r
    if not sub:
        r = tiny if 0.0 < x < tiny else r
        r = -0.0 if -tiny < x < 0.0 else r
    return r if x == x else x


@_jit_inline
def _prev64(s):
    bi = f2i(s)
    return i2f(_NEG_TINY_BITS if (bi << 1) == 0 else (bi + 1 if bi < 0 else bi - 1))


@_jit_inline
def _next64(s):
    bi = f2i(s)
    return i2f(np.int64(1) if (bi << 1) == 0 else (bi - 1 if bi < 0 else bi + 1))


@_jit_inline
def dir_from(s, d, up, emin, mb, maxf, sub, tiny):
    """RU_grid(t) if up else RD_grid(t), for finite s = RN64(t) and d of the sign of t - s
    (as :func:`scalars.kernels.directed.finish`)."""
    if up:
        return ru_grid(_next64(s) if d > 0.0 else s, emin, mb, maxf, sub, tiny)
    return rd_grid(_prev64(s) if d < 0.0 else s, emin, mb, maxf, sub, tiny)


@_jit_inline
def risky(v):
    """|v| is inf/NaN or nonzero outside [2^-900, 2^900]: an EFT there is not trusted."""
    av = abs(v)
    return (not av <= _DBL_MAX) | ((av != 0.0) & ((av < _SAFE_LO) | (av > _SAFE_HI)))


# ------------------------------------------------------------------------- functions
@_jit
def _finish_eval(code, x, w):
    """f(x) from w, numpy's SIMD pass over the arguments (:func:`_pre`): f(x) itself for
    exp / log / tanh, e^-|x| for the compositions sigmoid and softplus (finished here as
    scalars.functions' _sigmoid64 / _softplus64 do)."""
    if code <= 2:
        return w
    if code == 3:
        return 1.0 / (1.0 + w) if x >= 0.0 else w / (1.0 + w)
    return max(x, 0.0) + math.log1p(w)


def _pre(code, x):
    with np.errstate(all="ignore"):
        if code == 0:
            return np.exp(x)
        if code == 1:
            return np.log(x)
        if code == 2:
            return np.tanh(x)
        return np.exp(-np.abs(x))


@_jit
def _facts(code, x):
    """(lower, lower_strict, upper, upper_strict) of f(x), as scalars.functions' facts."""
    if code == 0:              # e^x > 1 for x > 0, 0 < e^x < 1 for x < 0, e^0 = 1
        return (1.0 if x >= 0.0 else 0.0), x != 0.0, (1.0 if x <= 0.0 else _INF), x < 0.0
    if code == 1:              # log x > 0 iff x > 1, log 1 = 0
        return (0.0 if x >= 1.0 else -_INF), x > 1.0, (0.0 if x <= 1.0 else _INF), x < 1.0
    if code == 2:              # |tanh x| < min(1, |x|) with the sign of x
        return ((0.0 if x > 0.0 else max(x, -1.0)), x != 0.0,
                (0.0 if x < 0.0 else min(x, 1.0)), x != 0.0)
    if code == 3:              # 0 < s < 1, s > 1/2 iff x > 0, s(0) = 1/2
        return (0.5 if x >= 0.0 else 0.0), x != 0.0, (0.5 if x <= 0.0 else 1.0), x != 0.0
    return max(x, 0.0), True, _INF, False       # softplus x > max(0, x)


@_jit_inline
def _func_end(code, x, w, rel, abserr, up, emin, mb, maxf, sub, tiny):
    """(RU f(x) if up else RD f(x), settled) on the grid.

    With A <= B the ends of f(x)'s enclosure (clipped by the facts), RD(A) = RD(B) exactly
    when RD(B) <= A, and RU(A) = RU(B) exactly when B <= RU(A): one rounding per end
    instead of func_dir_numpy's two, the same decision."""
    v = _finish_eval(code, x, w)
    m = abs(v) * rel + abserr
    a = v - m
    b = v + m
    lower, lstrict, upper, ustrict = _facts(code, x)
    if up:
        lo_s = _next64(lower) if lstrict else lower
        a = a if a > lo_s else lo_s
        b = b if b < upper else upper
        r = ru_grid(a, emin, mb, maxf, sub, tiny)
        ok = (a <= b) & (b <= r)
    else:
        up_s = _prev64(upper) if ustrict else upper
        a = a if a > lower else lower
        b = b if b < up_s else up_s
        r = rd_grid(b, emin, mb, maxf, sub, tiny)
        ok = (a <= b) & (r <= a)
    # NaN (an argument or inf - inf) fails a comparison; infinite arguments go to MPFR
    ok = ok & (abs(x) <= _DBL_MAX) & (v - m == v - m) & (v + m == v + m)
    return r, ok


@_jit_inline
def _func_loop(code, xl, xh, wl, wh, rel, abserr, emin, mb, maxf, sub, tiny, lo, hi, tl, th):
    n = 0
    for i in range(lo.size):
        r, ok = _func_end(code, xl[i], wl[i], rel, abserr, False, emin, mb, maxf, sub, tiny)
        lo[i] = r if ok else math.nan
        tl[i] = not ok
        n += np.int64(not ok)
        r, ok = _func_end(code, xh[i], wh[i], rel, abserr, True, emin, mb, maxf, sub, tiny)
        hi[i] = r if ok else math.nan
        th[i] = not ok
        n += np.int64(not ok)
    return n


# One kernel per function (compiled when its function is first used; the former single
# kernel compiled all five, ~30-45 s cold), both ends in one iteration.  Each: lo = RD f(xl),
# hi = RU f(xh) onto the grid, w* = :func:`_pre` of x*; tl / th flag the unsettled ends
# (NaN there); returns the number of flags.  The grid rounding (_onto, rd_grid, ru_grid)
# and the facts are plain compiled functions (LLVM inlines them): inlining them by Numba
# into every call site is what made the cold compile slow.
@_jit
def exp_ends(xl, xh, wl, wh, rel, abserr, emin, mb, maxf, sub, tiny, lo, hi, tl, th):
    return _func_loop(0, xl, xh, wl, wh, rel, abserr, emin, mb, maxf, sub, tiny, lo, hi, tl, th)


@_jit
def log_ends(xl, xh, wl, wh, rel, abserr, emin, mb, maxf, sub, tiny, lo, hi, tl, th):
    return _func_loop(1, xl, xh, wl, wh, rel, abserr, emin, mb, maxf, sub, tiny, lo, hi, tl, th)


@_jit
def tanh_ends(xl, xh, wl, wh, rel, abserr, emin, mb, maxf, sub, tiny, lo, hi, tl, th):
    return _func_loop(2, xl, xh, wl, wh, rel, abserr, emin, mb, maxf, sub, tiny, lo, hi, tl, th)


@_jit
def sigmoid_ends(xl, xh, wl, wh, rel, abserr, emin, mb, maxf, sub, tiny, lo, hi, tl, th):
    return _func_loop(3, xl, xh, wl, wh, rel, abserr, emin, mb, maxf, sub, tiny, lo, hi, tl, th)


@_jit
def softplus_ends(xl, xh, wl, wh, rel, abserr, emin, mb, maxf, sub, tiny, lo, hi, tl, th):
    return _func_loop(4, xl, xh, wl, wh, rel, abserr, emin, mb, maxf, sub, tiny, lo, hi, tl, th)


_FUNC_KERNELS = (exp_ends, log_ends, tanh_ends, sigmoid_ends, softplus_ends)


def func_pair(fn, xl, xh, fmt: Format, mpfr_end):
    """(RD_grid f(xl), RU_grid f(xh)) for a compiled vocabulary function (name in
    :data:`FUNC_CODES`), float64 arrays of one shape; unsettled ends go to
    ``mpfr_end(x) -> (RD, RU)`` (MPFR), NaN arguments give NaN."""
    from ..functions import F64_ABS_ERR
    shape = np.shape(xl)
    L = flat_f64(xl)
    H = flat_f64(xh)
    abserr = F64_ABS_ERR if fn.f64_ulps else 0.0
    rel = fn.f64_rel if fn.f64_ulps else 0.0
    code = FUNC_CODES[fn.name]
    WL = _pre(code, L)
    WH = WL if xl is xh else _pre(code, H)
    lo = np.empty(L.size)
    hi = np.empty(L.size)
    tl = np.empty(L.size, dtype=np.bool_)
    th = np.empty(L.size, dtype=np.bool_)
    if _FUNC_KERNELS[code](L, H, WL, WH, rel, abserr, *grid_params(fmt), lo, hi, tl, th):
        for i in np.flatnonzero(tl):
            if L[i] == L[i]:
                lo[i] = mpfr_end(float(L[i]))[0]
        for i in np.flatnonzero(th):
            if H[i] == H[i]:
                hi[i] = mpfr_end(float(H[i]))[1]
    return lo.reshape(shape), hi.reshape(shape)


# ------------------------------------------------------------------------ arithmetic
@_jit_inline
def _quot_dir(x, y, up, emin, mb, maxf, sub, tiny):
    q = x / y
    ph, pl = two_prod(q, y)
    d = ((x - ph) - pl) * (1.0 if y > 0.0 else -1.0)     # sign(x/y - q)
    ok = not (risky(x) | risky(y) | ((x != 0.0) & (risky(q) | (q == 0.0))))
    return dir_from(q, d, up, emin, mb, maxf, sub, tiny), ok


@_jit_inline
def div_operands(a0, a1, b0, b1):
    """The two quotients of [a0, a1] / [b0, b1] that are the ends when 0 is outside the
    divisor: (xl, yl) for the lower end, (xh, yh) for the upper, and whether 0 is outside
    (a divisor reaching 0, or NaN, sends the caller to the generic path).  Selects, not
    branches: the signs are coin flips."""
    pos = b0 > 0.0
    xl = a0 if pos else a1
    xh = a1 if pos else a0
    yl = b1 if xl >= 0.0 else b0
    yh = b0 if xh >= 0.0 else b1
    return xl, xh, yl, yh, pos | (b1 < 0.0)


@_jit
def div_kernel(alo, ahi, blo, bhi, emin, mb, maxf, sub, tiny, lo, hi):
    """[alo, ahi] / [blo, bhi] with 0 outside every divisor: two quotients per element,
    chosen by the endpoint signs; False when some element needs the generic algorithm."""
    good = True
    for i in range(lo.size):
        xl, xh, yl, yh, ok = div_operands(alo[i], ahi[i], blo[i], bhi[i])
        good = good & ok
        rl, okl = _quot_dir(xl, yl, False, emin, mb, maxf, sub, tiny)
        rh, okh = _quot_dir(xh, yh, True, emin, mb, maxf, sub, tiny)
        lo[i] = rl
        hi[i] = rh
        good = good & okl & okh
    return good


@_jit_inline
def _root_dir(x, up, emin, mb, maxf, sub, tiny):
    s = np.sqrt(x)
    ph, pl = two_prod(s, s)
    return dir_from(s, (x - ph) - pl, up, emin, mb, maxf, sub, tiny)


@_jit_inline
def sqrt_ends_safe(a, b):
    """0 <= a, b <= 2^900 and each of a, b is 0 or >= 2^-900 (NaN fails): the range where
    the TwoProduct residual of a square root is exact (also interval_f64.sqrt_kernel's)."""
    return (a >= 0.0) & (b <= _SAFE_HI) & ((a == 0.0) | (a >= _SAFE_LO)) \
        & ((b == 0.0) | (b >= _SAFE_LO))


@_jit
def sqrt_kernel(alo, ahi, emin, mb, maxf, sub, tiny, lo, hi):
    """[RD sqrt(alo), RU sqrt(ahi)] for 0 <= alo <= ahi; False (generic path) when an end
    is negative, NaN, inf or outside [2^-900, 2^900] (and not 0)."""
    good = True
    for i in range(lo.size):
        a, b = alo[i], ahi[i]
        good = good & sqrt_ends_safe(a, b)
        lo[i] = _root_dir(a, False, emin, mb, maxf, sub, tiny)
        hi[i] = _root_dir(b, True, emin, mb, maxf, sub, tiny)
    return good


@_jit_inline
def _sum_dir(a, b, up, emin, mb, maxf, sub, tiny):
    s, e = two_sum(a, b)
    return dir_from(s, e, up, emin, mb, maxf, sub, tiny), abs(s) <= _SAFE_HI


@_jit
def addsub_kernel(alo, ahi, blo, bhi, neg, emin, mb, maxf, sub, tiny, lo, hi):
    """[alo, ahi] + [blo, bhi] (or minus, when ``neg``: [alo - bhi, ahi - blo]) rounded
    outward; False when an operand or sum leaves [-2^900, 2^900] (or is NaN)."""
    good = True
    for i in range(lo.size):
        a0, a1 = alo[i], ahi[i]
        if neg:
            b0, b1 = -bhi[i], -blo[i]
        else:
            b0, b1 = blo[i], bhi[i]
        good = good & (abs(a0) <= _SAFE_HI) & (abs(a1) <= _SAFE_HI) \
            & (abs(b0) <= _SAFE_HI) & (abs(b1) <= _SAFE_HI)
        rl, okl = _sum_dir(a0, b0, False, emin, mb, maxf, sub, tiny)
        rh, okh = _sum_dir(a1, b1, True, emin, mb, maxf, sub, tiny)
        lo[i] = rl
        hi[i] = rh
        good = good & okl & okh
    return good


@_jit_inline
def _prod_pair(x, y):
    """x*y = p + e exactly (TwoProduct), (0, 0) for a zero factor (+0 both ways, as the
    generic path's 0 * inf rule), and whether the EFT is trusted."""
    z = (x == 0.0) | (y == 0.0)
    p, e = two_prod(x, y)
    return (0.0 if z else p), (0.0 if z else e), z | (not (risky(p) | (p == 0.0)))


@_jit_inline
def _below(p1, e1, p2, e2):
    """p1 + e1 < p2 + e2 for TwoProduct pairs (p = RN of the exact value, RN monotone)."""
    return (p1 < p2) | ((p1 == p2) & (e1 < e2))


@_jit
def mul_kernel(alo, ahi, blo, bhi, emin, mb, maxf, sub, tiny, lo, hi):
    """[alo, ahi] * [blo, bhi]: RD of the least and RU of the greatest of the four exact
    endpoint products (directed rounding is monotone: the same as the least RD and the
    greatest RU, with two roundings instead of eight); the products are compared exactly
    as TwoProduct pairs.  False when an operand or product is non-finite or outside
    [2^-900, 2^900] (and not 0): the generic algorithm handles 0 * inf and the EFT limits."""
    good = True
    for i in range(lo.size):
        a0, a1, b0, b1 = alo[i], ahi[i], blo[i], bhi[i]
        good = good & (not (risky(a0) | risky(a1) | risky(b0) | risky(b1)))
        p0, e0, k0 = _prod_pair(a0, b0)
        p1, e1, k1 = _prod_pair(a0, b1)
        p2, e2, k2 = _prod_pair(a1, b0)
        p3, e3, k3 = _prod_pair(a1, b1)
        good = good & k0 & k1 & k2 & k3
        b01 = _below(p1, e1, p0, e0)
        m01p, m01e = (p1, e1) if b01 else (p0, e0)           # min of 0, 1
        x01p, x01e = (p0, e0) if b01 else (p1, e1)           # max of 0, 1
        b23 = _below(p3, e3, p2, e2)
        m23p, m23e = (p3, e3) if b23 else (p2, e2)
        x23p, x23e = (p2, e2) if b23 else (p3, e3)
        bm = _below(m23p, m23e, m01p, m01e)
        mp, me = (m23p, m23e) if bm else (m01p, m01e)
        bx = _below(x01p, x01e, x23p, x23e)
        xp, xe = (x23p, x23e) if bx else (x01p, x01e)
        lo[i] = dir_from(mp, me, False, emin, mb, maxf, sub, tiny)
        hi[i] = dir_from(xp, xe, True, emin, mb, maxf, sub, tiny)
    return good


@_jit_inline
def _step64(acc, x, up, emin, mb, maxf, sub, tiny):
    """RU(acc + x) if up else RD(acc + x) on the float64 grid (TwoSum error sign, one ulp
    step on the bit pattern), and whether the sum stayed inside the trusted range (the
    grid parameters are unused: the signature of :func:`_sum_dir`)."""
    s, e = two_sum(acc, x)
    bi = f2i(s)
    zero = (bi << 1) == 0
    if up:
        nb = np.int64(1) if zero else (bi - 1 if bi < 0 else bi + 1)
        r = i2f(nb) if e > 0.0 else s
    else:
        nb = _NEG_TINY_BITS if zero else (bi + 1 if bi < 0 else bi - 1)
        r = i2f(nb) if e < 0.0 else s
    return r, abs(s) <= _SAFE_HI


#: rows summed side by side: the lanes of one step are independent and contiguous
_LANES = 16


@_jit_inline
def _sum_rows(lo2, hi2, step, emin, mb, maxf, sub, tiny, lo, hi, lanes):
    """The one sequential interval-sum loop: along the last axis of (R, n) arrays, n >= 1,
    lower ends added with RD and upper ends with RU onto the grid, left to right; ``step``
    is the directed addition (:func:`_sum_dir` onto a grid, :func:`_step64` onto float64
    itself: a compiled function passed in, so each caller compiles only its own).  Rows go in blocks of _LANES, copied transposed into a small buffer, so one
    step of all the block's sums reads contiguous lanes and the loop over lanes vectorises
    (each row keeps its own left-to-right order: bit-identical to one row at a time).
    False when an operand or partial sum leaves [-2^900, 2^900] (or is NaN): the caller
    runs the generic loop."""
    R, n = lo2.shape
    B = lanes                                # a run-time value: LLVM keeps the lane loops
    bl = np.empty((n, B))
    bh = np.empty((n, B))
    acc_l = np.empty(B)
    acc_h = np.empty(B)
    for r0 in range(0, R, B):
        m = min(B, R - r0)
        for k in range(n):
            for j in range(m):
                bl[k, j] = lo2[r0 + j, k]
                bh[k, j] = hi2[r0 + j, k]
        good = True
        for j in range(m):
            acc_l[j] = bl[0, j]
            acc_h[j] = bh[0, j]
            good = good & (abs(acc_l[j]) <= _SAFE_HI) & (abs(acc_h[j]) <= _SAFE_HI)
        for k in range(1, n):
            for j in range(m):
                x = bl[k, j]
                y = bh[k, j]
                a, oka = step(acc_l[j], x, False, emin, mb, maxf, sub, tiny)
                b, okb = step(acc_h[j], y, True, emin, mb, maxf, sub, tiny)
                acc_l[j] = a
                acc_h[j] = b
                good = good & (abs(x) <= _SAFE_HI) & (abs(y) <= _SAFE_HI) & oka & okb
        if not good:
            return False
        for j in range(m):
            lo[r0 + j] = acc_l[j]
            hi[r0 + j] = acc_h[j]
    return True


@_jit
def sum_kernel(lo2, hi2, emin, mb, maxf, sub, tiny, lo, hi, lanes=_LANES):
    """Sequential interval sums along the last axis of (R, n) arrays, n >= 1, each partial
    sum rounded onto the grid (lower ends down, upper ends up), left to right."""
    return _sum_rows(lo2, hi2, _sum_dir, emin, mb, maxf, sub, tiny, lo, hi, lanes)


@_jit
def sum_kernel_f64(lo2, hi2, lo, hi, lanes=_LANES):
    """:func:`sum_kernel` on the float64 grid (interval:float64), the same loop."""
    return _sum_rows(lo2, hi2, _step64, -1022, 52, _DBL_MAX, True, 2.0 ** -1022, lo, hi,
                     lanes)


# ------------------------------------------------------------------ array entry points
def _flat(shape, *xs):
    return [flat_f64(t, shape) for t in xs]


def _run(kernel, shape, fmt, *arrays, extra=()):
    n = int(np.prod(shape, dtype=np.int64))
    lo = np.empty(n)
    hi = np.empty(n)
    if not kernel(*_flat(shape, *arrays), *extra, *grid_params(fmt), lo, hi):
        return None
    return lo.reshape(shape), hi.reshape(shape)


def div_grid(alo, ahi, blo, bhi, shape, fmt: Format):
    """(lo, hi) of the quotient interval on ``fmt``'s grid, or None (generic path)."""
    return _run(div_kernel, shape, fmt, alo, ahi, blo, bhi)


def sqrt_grid(alo, ahi, fmt: Format):
    """(lo, hi) of the square-root interval on ``fmt``'s grid, or None."""
    return _run(sqrt_kernel, np.shape(alo), fmt, alo, ahi)


def add_grid(alo, ahi, blo, bhi, shape, fmt: Format, neg: bool = False):
    """(lo, hi) of [a] + [b] (or [a] - [b] when ``neg``) on ``fmt``'s grid, or None."""
    return _run(addsub_kernel, shape, fmt, alo, ahi, blo, bhi, extra=(bool(neg),))


def mul_grid(alo, ahi, blo, bhi, shape, fmt: Format):
    """(lo, hi) of [a] * [b] on ``fmt``'s grid, or None."""
    return _run(mul_kernel, shape, fmt, alo, ahi, blo, bhi)


def sum_grid(lo2, hi2, fmt: Format):
    """(lo, hi) of the sequential outward-rounded sums over the last axis onto ``fmt``'s
    grid (float64 itself included), or None (generic loop)."""
    kshape = lo2.shape[:-1]
    n = lo2.shape[-1]
    L = writable(np.ascontiguousarray(lo2, dtype=np.float64).reshape(-1, n))
    H = writable(np.ascontiguousarray(hi2, dtype=np.float64).reshape(-1, n))
    lo = np.empty(L.shape[0])
    hi = np.empty(L.shape[0])
    if n == 0:
        return None
    if fmt.is_binary64:
        ok = sum_kernel_f64(L, H, lo, hi, _LANES)
    else:
        ok = sum_kernel(L, H, *grid_params(fmt), lo, hi, _LANES)
    if not ok:
        return None
    return lo.reshape(kshape), hi.reshape(kshape)


@_jit
def _round_pair_kernel(lo, hi, emin, mb, maxf, sub, tiny, out_lo, out_hi):
    for i in range(lo.size):
        out_lo[i] = rd_grid(lo[i], emin, mb, maxf, sub, tiny)
        out_hi[i] = ru_grid(hi[i], emin, mb, maxf, sub, tiny)


def round_pair(lo, hi, fmt: Format):
    """(round_down(lo, fmt), round_up(hi, fmt)) for float64 arrays of one shape, in one
    compiled pass (the same values as :func:`scalars.kernels.directed.round_down` / ``round_up``)."""
    shape = np.shape(lo)
    L, H = _flat(shape, lo, hi)
    a = np.empty(L.size)
    b = np.empty(L.size)
    _round_pair_kernel(L, H, *grid_params(fmt), a, b)
    return a.reshape(shape), b.reshape(shape)
