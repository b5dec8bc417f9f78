"""Exact directed rounding of + - * / sqrt on float64 arrays, onto float64 or a binary grid.

Interval endpoints must be rounded *down* (lower end) and *up* (upper end) exactly, but
numpy offers neither rounding-mode control nor an fma.  The trick used here: compute the
round-to-nearest float64 result ``s`` and the exact *sign* of the error ``exact - s`` with
an error-free transformation (TwoSum, Dekker/Veltkamp TwoProduct, the division and square
root residuals).  Because ``s`` is a faithful rounding, the exact value lies strictly
between ``prev(s)`` and ``next(s)``, so

    RD_grid(exact) = RD_grid(s)        if exact >= s   else RD_grid(prev(s))
    RU_grid(exact) = RU_grid(s)        if exact <= s   else RU_grid(next(s))

for any grid that is a subset of the float64 numbers (every binary format with at most 53
significand bits and at most 11 exponent bits).  This also fixes the double-rounding trap
RD_p(RN_53(x)) != RD_p(x): when ``s`` happens to be a p-bit value but the exact value is
below it, the rule steps to ``prev(s)`` first.

EFT preconditions (no overflow in the Veltkamp split, no underflow of the product error)
fail only for operands far from 1; such elements are flagged and settled exactly with gmpy2
rationals, one by one (they are rare, so the loop costs nothing in practice).
"""
from __future__ import annotations

import math
import sys
import threading
from fractions import Fraction

import numba
import numpy as np

from .eft import f2i, i2f, two_prod, two_sum
from .flat import flat_f64, writable
from ..formats import Format, binary64

DBL_MAX = float(np.finfo(np.float64).max)
# Operands whose magnitude lies in [2^-900, 2^900] (or is 0) never break the EFTs below:
# the split cannot overflow and product errors stay far above the float64 subnormals.
_SAFE_LO = 2.0 ** -900
_SAFE_HI = 2.0 ** 900


# ----------------------------------------------------------------- rounding onto a format
# An interval endpoint lives on the *extended* grid of a format: its finite values plus
# -inf and +inf, whatever the format's own overflow rule (an endpoint at +-inf means
# "unbounded", also for formats without infinities or with saturation).  That is why these
# are not round_to_format(x, fmt, "down"/"up"), which applies the format's overflow rule.
def _round_onto(x: np.ndarray, fmt: Format, floor) -> np.ndarray:
    with np.errstate(all="ignore"):
        _, E = np.frexp(x)                       # |x| = f 2^E, f in [0.5, 1)
        q = np.maximum(E - 1, fmt.emin) - fmt.man_bits   # exponent of one grid step
        y = np.ldexp(x, -q)                      # exact: only the exponent changes
        r = np.ldexp(floor(y), q)                # integer * 2^q, exact (q >= -1074)
        return np.where(np.isfinite(x), r, x)


def round_down(x, fmt: Format) -> np.ndarray:
    """Largest value of ``fmt``'s extended grid <= x, elementwise (-inf below -max_finite;
    without subnormals the gap below min_normal holds only 0).  NaN stays NaN."""
    x = np.asarray(x, dtype=np.float64)
    if fmt.is_binary64:
        return x.copy()
    r = _round_onto(x, fmt, np.floor)
    m = fmt.max_finite
    r = np.where((x > m) & np.isfinite(x), m, r)
    r = np.where(x < -m, -np.inf, r)
    if not fmt.subnormals:
        tiny = fmt.min_normal
        r = np.where((x > 0) & (x < tiny), 0.0, r)
        r = np.where((x < 0) & (x > -tiny), -tiny, r)
    return r


def round_up(x, fmt: Format) -> np.ndarray:
    """Smallest value of ``fmt``'s extended grid >= x, elementwise (+inf above
    max_finite; a negative value that rounds up to zero gives -0.0)."""
    x = np.asarray(x, dtype=np.float64)
    if fmt.is_binary64:
        return x.copy()
    r = _round_onto(x, fmt, np.ceil)
    m = fmt.max_finite
    r = np.where(x > m, np.inf, r)
    r = np.where((x < -m) & np.isfinite(x), -m, r)
    if not fmt.subnormals:
        tiny = fmt.min_normal
        r = np.where((x > 0) & (x < tiny), tiny, r)
        r = np.where((x < 0) & (x > -tiny), -0.0, r)
    return r


def _fraction(x: float):
    """Exact rational value of a finite float64 (gmpy2 mpq: much faster than Fraction)."""
    import gmpy2
    return gmpy2.mpq(float(x))


def _settle(s: float, exact: Fraction) -> tuple[float, int]:
    """(faithful float64 s', sign(exact - s')) for an exact rational; handles overflow."""
    if not math.isfinite(s):
        try:
            s = int(exact.numerator) / int(exact.denominator)   # correctly rounded
        except OverflowError:
            s = DBL_MAX if exact > 0 else -DBL_MAX
    if not math.isfinite(s):
        s = math.copysign(DBL_MAX, s)
    fs = _fraction(s)
    return s, int(exact > fs) - int(exact < fs)


def _fallback(s, sgn, mask, exact_of):
    """Recompute (s, sgn) exactly with rationals where ``mask`` is set."""
    idx = np.flatnonzero(mask)
    if idx.size == 0:
        return s, sgn
    s = s.copy(); sgn = sgn.copy()
    fs, fg = s.reshape(-1), sgn.reshape(-1)
    for i in idx:
        fs[i], fg[i] = _settle(float(fs[i]), exact_of(int(i)))
    return s, sgn


def _bc(*xs):
    """Broadcast float64 operands to one shape (0-d stays 0-d; np.ascontiguousarray would
    promote it to 1-d)."""
    arrs = np.broadcast_arrays(*[np.asarray(x, dtype=np.float64) for x in xs])
    return [np.array(a, dtype=np.float64) for a in arrs]


@numba.njit(cache=True)
def _add_err_kernel(a, b, s, sgn, bad):
    """One pass of :func:`two_sum` with the error sign and the fallback mask (numba keeps
    IEEE semantics: no fast-math, so the error-free transformation is exact).  math.isfinite
    on scalars, not np.isfinite: the latter goes through numba's ufunc machinery and makes
    the pass ~10x slower."""
    for i in range(a.size):
        x = a[i]
        y = b[i]
        t, e = two_sum(x, y)
        s[i] = t
        fin = math.isfinite(x) and math.isfinite(y)
        if fin and math.isfinite(e):
            sgn[i] = 1 if e > 0 else (-1 if e < 0 else 0)
        else:
            sgn[i] = 0
        bad[i] = fin and ((not math.isfinite(t)) or abs(x) > _SAFE_HI or abs(y) > _SAFE_HI)


def add_err(a, b):
    """(s, sign(a + b - s)) elementwise; s is RN(a+b), or +-DBL_MAX on finite overflow."""
    a, b = np.broadcast_arrays(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    shape = a.shape
    fa = np.ascontiguousarray(a).reshape(-1)
    fb = np.ascontiguousarray(b).reshape(-1)
    s = np.empty(fa.size)
    sgn = np.empty(fa.size, dtype=np.int8)
    bad = np.empty(fa.size, dtype=np.bool_)
    _add_err_kernel(fa, fb, s, sgn, bad)
    s, sgn, bad = s.reshape(shape), sgn.reshape(shape), bad.reshape(shape)
    return _fallback(s, sgn, bad, lambda i: _fraction(fa[i]) + _fraction(fb[i]))


def sub_err(a, b):
    a, b = _bc(a, b)
    return add_err(a, -b)


@numba.njit(cache=True, inline="always")
def _unsafe1(x):
    """x finite, nonzero and outside [2^-900, 2^900] (where the EFTs may break)."""
    ax = abs(x)
    return ax <= DBL_MAX and ax != 0.0 and (ax < _SAFE_LO or ax > _SAFE_HI)


@numba.njit(cache=True, inline="always")
def _sign8(d):
    return 1 if d > 0.0 else (-1 if d < 0.0 else 0)


@numba.njit(cache=True)
def _mul_err_kernel(a, b, s, sgn, bad):
    """One compiled pass of :func:`mul_err`: the same formulas as its numpy form had."""
    for i in range(a.size):
        x = a[i]
        y = b[i]
        p, e = two_prod(x, y)
        s[i] = p
        fin = abs(x) <= DBL_MAX and abs(y) <= DBL_MAX
        sgn[i] = _sign8(e) if (fin and abs(e) <= DBL_MAX) else 0
        bad[i] = fin and (_unsafe1(x) or _unsafe1(y) or not abs(p) <= DBL_MAX
                          or (p == 0.0 and x != 0.0 and y != 0.0)
                          or (abs(p) < _SAFE_LO and p != 0.0))


@numba.njit(cache=True)
def _div_err_kernel(a, b, s, sgn, bad):
    """One compiled pass of :func:`div_err` (residual a - s*b by TwoProduct)."""
    for i in range(a.size):
        x = a[i]
        y = b[i]
        q = x / y
        s[i] = q
        ph, pl = two_prod(q, y)
        d = (x - ph) - pl
        fin = abs(x) <= DBL_MAX and abs(y) <= DBL_MAX and y != 0.0
        ok = fin and x != 0.0 and abs(d) <= DBL_MAX
        r = _sign8(d) * (1 if y > 0.0 else -1)
        sgn[i] = r if ok else 0
        bad[i] = fin and x != 0.0 and (_unsafe1(x) or _unsafe1(y) or _unsafe1(q)
                                       or not abs(q) <= DBL_MAX or q == 0.0)


@numba.njit(cache=True)
def _sqrt_err_kernel(a, s, sgn, bad):
    """One compiled pass of :func:`sqrt_err` (residual a - s*s by TwoProduct)."""
    for i in range(a.size):
        x = a[i]
        r = math.sqrt(x) if x >= 0.0 else (x if x != x else math.nan)
        s[i] = r
        ph, pl = two_prod(r, r)
        d = (x - ph) - pl
        ok = abs(x) <= DBL_MAX and x > 0.0
        sgn[i] = _sign8(d) if (ok and abs(d) <= DBL_MAX) else 0
        bad[i] = ok and _unsafe1(x)


def _flat_pair(a, b):
    a, b = _bc(a, b)
    return a.shape, np.ascontiguousarray(a).reshape(-1), np.ascontiguousarray(b).reshape(-1)


def mul_err(a, b):
    """(s, sign(a*b - s)) elementwise, s = RN(a*b) (faithful), exact error sign."""
    shape, fa, fb = _flat_pair(a, b)
    s = np.empty(fa.size)
    sgn = np.empty(fa.size, dtype=np.int8)
    bad = np.empty(fa.size, dtype=np.bool_)
    _mul_err_kernel(fa, fb, s, sgn, bad)
    s, sgn, bad = s.reshape(shape), sgn.reshape(shape), bad.reshape(shape)
    return _fallback(s, sgn, bad, lambda i: _fraction(fa[i]) * _fraction(fb[i]))


def div_err(a, b):
    """(s, sign(a/b - s)) elementwise for b != 0; s = RN(a/b).

    The residual r = a - s*b is exact: s*b = ph + pl (TwoProduct), a - ph is exact by
    Sterbenz's lemma (ph is within a factor 1 +- 2^-52 of a), and sign(t - pl) is the
    sign of a float subtraction.  sign(a/b - s) = sign(r) * sign(b).  One compiled pass.
    """
    shape, fa, fb = _flat_pair(a, b)
    s = np.empty(fa.size)
    sgn = np.empty(fa.size, dtype=np.int8)
    bad = np.empty(fa.size, dtype=np.bool_)
    _div_err_kernel(fa, fb, s, sgn, bad)
    s, sgn, bad = s.reshape(shape), sgn.reshape(shape), bad.reshape(shape)
    return _fallback(s, sgn, bad, lambda i: _fraction(fa[i]) / _fraction(fb[i]))


def sqrt_err(a):
    """(s, sign(sqrt(a) - s)) for a >= 0: the sign of the residual a - s*s (one compiled
    pass; operands outside [2^-900, 2^900] settled with rationals)."""
    a = np.array(a, dtype=np.float64)
    fa = np.ascontiguousarray(a).reshape(-1)
    s = np.empty(fa.size)
    sgn = np.empty(fa.size, dtype=np.int8)
    bad = np.empty(fa.size, dtype=np.bool_)
    _sqrt_err_kernel(fa, s, sgn, bad)
    s, sgn = s.reshape(a.shape), sgn.reshape(a.shape)
    idx = np.flatnonzero(bad)
    if idx.size:
        fs, fg = s.reshape(-1), sgn.reshape(-1)
        for i in idx:
            q, ss = _fraction(fa[i]), _fraction(fs[i])
            fg[i] = int(q > ss * ss) - int(q < ss * ss)
    return s, sgn


_NEG_TINY_BITS = np.array([-5e-324]).view(np.int64)[0]


@numba.njit(cache=True)
def _finish64_kernel(bits, sgn, lo, hi):
    """Bit patterns of RD/RU from a finite s (as int64 bits) and sign(exact - s).

    One ulp step is +-1 on the bit pattern (same sign); from zero it is the smallest
    subnormal."""
    for i in range(bits.size):
        b = bits[i]
        lo[i] = b
        hi[i] = b
        g = sgn[i]
        if g == 0:
            continue
        zero = (b << 1) == 0          # +0 or -0
        neg = b < 0
        if g > 0:
            hi[i] = 1 if zero else (b - 1 if neg else b + 1)
        else:
            lo[i] = _NEG_TINY_BITS if zero else (b + 1 if neg else b - 1)


def finish(s, sgn, fmt: Format):
    """(RD_grid(exact), RU_grid(exact)) from s = faithful(exact) and sign(exact - s)."""
    s = np.asarray(s, dtype=np.float64)
    if fmt.is_binary64:   # one compiled pass; the float64 grid needs no further rounding
        fs = np.ascontiguousarray(s).reshape(-1)
        fg = np.ascontiguousarray(np.broadcast_to(np.asarray(sgn, dtype=np.int8), s.shape)).reshape(-1)
        lo = np.empty(fs.size, dtype=np.int64)
        hi = np.empty(fs.size, dtype=np.int64)
        _finish64_kernel(fs.view(np.int64), fg, lo, hi)
        return lo.view(np.float64).reshape(s.shape), hi.view(np.float64).reshape(s.shape)
    with np.errstate(all="ignore"):
        below = np.where(sgn < 0, np.nextafter(s, -np.inf), s)
        above = np.where(sgn > 0, np.nextafter(s, np.inf), s)
    return round_down(below, fmt), round_up(above, fmt)


@numba.njit(cache=True)
def _down_bits(bi, step):
    """Bit pattern of prev(s) if ``step`` else of s, for finite s with bits ``bi``: one ulp
    is -+1 on the pattern (same sign); below +-0 lies the largest negative subnormal.
    Written as selects, not branches: the error signs are data-dependent coin flips."""
    nb = bi + (1 if bi < 0 else -1)
    nb = _NEG_TINY_BITS if (bi << 1) == 0 else nb
    return nb if step else bi


@numba.njit(cache=True)
def _up_bits(bi, step):
    """Bit pattern of next(s) if ``step`` else of s (finite s); above +-0 lies 2^-1074."""
    nb = bi + (-1 if bi < 0 else 1)
    nb = np.int64(1) if (bi << 1) == 0 else nb
    return nb if step else bi


@numba.njit(cache=True)
def _finite(x):
    """math.isfinite as one comparison (NaN compares false): vectorises, no branch."""
    return abs(x) <= DBL_MAX


@numba.njit(cache=True)
def _midrad_kernel(c, r, lo, hi, bad):
    """lo = RD(c - r), hi = RU(c + r) on the float64 grid, exactly, in one pass (TwoSum
    error signs, one ulp step on the bit pattern); ``bad`` marks what needs rationals."""
    loi = lo.view(np.int64)
    hii = hi.view(np.int64)
    for i in range(c.size):
        x = c[i]
        y = r[i]
        safe = (abs(x) <= _SAFE_HI) & (abs(y) <= _SAFE_HI)
        t, e = two_sum(x, -y)      # x - y, exactly as IEEE subtracts
        ok = safe & _finite(t) & _finite(e)
        lo[i] = t
        loi[i] = _down_bits(loi[i], ok & (e < 0))
        t2, e2 = two_sum(x, y)
        ok2 = safe & _finite(t2) & _finite(e2)
        hi[i] = t2
        hii[i] = _up_bits(hii[i], ok2 & (e2 > 0))
        bad[i] = bad[i] | (not (ok & ok2))


@numba.njit(cache=True)
def _midrad2d_kernel(C, R, scale, tiny, nzr, nzc, lo, hi, bad):
    """The last pass of the midpoint-radius matmul on (m, p) arrays, fused: the rigorous
    radius R' = R * scale + (tiny where row i and column j can hold a non-zero product,
    else 0) with the same float64 operations as the unfused numpy code, then
    lo = RD(C - R'), hi = RU(C + R') exactly (TwoSum sign + one ulp step).  R' is written
    back into R for the exact fallback of the ``bad`` elements; returns whether every
    entry of C and of the incoming R was finite."""
    m, p = C.shape
    rfin = True
    for i in range(m):
        for j in range(p):
            x = C[i, j]
            y0 = R[i, j]
            # inf / NaN radius or product (a BLAS overflow): the caller falls back
            rfin = rfin & (y0 <= DBL_MAX) & _finite(x)
            y = y0 * scale
            y = y + (tiny if (nzr[i] & nzc[j]) else 0.0)
            R[i, j] = y
            safe = (abs(x) <= _SAFE_HI) & (abs(y) <= _SAFE_HI)
            t, e = two_sum(x, -y)      # x - y, exactly as IEEE subtracts
            ok = safe & _finite(t) & _finite(e)
            lo[i, j] = i2f(_down_bits(f2i(t), ok & (e < 0)))
            t2, e2 = two_sum(x, y)
            ok2 = safe & _finite(t2) & _finite(e2)
            hi[i, j] = i2f(_up_bits(f2i(t2), ok2 & (e2 > 0)))
            bad[i, j] = not (ok & ok2)
    return rfin


def midrad2d_dir(C, R, scale: float, tiny: float, nzr, nzc, fmt: Format = binary64):
    """(RD_grid(C - R'), RU_grid(C + R')) for R' = R * scale + tiny [nzr_i and nzc_j],
    C, R (m, p) float64; one compiled pass (R is overwritten with R').  None when C or R
    has a non-finite entry (the caller then uses the endpoint algorithm); otherwise the
    results hold no NaN."""
    C = np.ascontiguousarray(C, dtype=np.float64)
    R = np.ascontiguousarray(R, dtype=np.float64)
    nzr = np.ascontiguousarray(nzr, dtype=np.bool_)
    nzc = np.ascontiguousarray(nzc, dtype=np.bool_)
    lo = recycled_empty(C.shape)
    hi = recycled_empty(C.shape)
    bad = scratch("midrad2d.bad", ((C.size + 7) // 8,)).view(np.bool_)[:C.size].reshape(C.shape)
    if not _midrad2d_kernel(C, R, float(scale), float(tiny), nzr, nzc, lo, hi, bad):
        return None
    if bad.any():   # overflow / extreme operands: the general exact path
        lo = np.where(bad, sub_dir(C, R, binary64)[0], lo)
        hi = np.where(bad, add_dir(C, R, binary64)[1], hi)
    if not fmt.is_binary64:
        from .grid import round_pair     # one compiled pass, same values
        lo, hi = round_pair(lo, hi, fmt)
    return lo, hi


_RECYCLE = threading.local()
_RECYCLE_MIN = 1 << 16          # entries; smaller arrays are cheap to allocate
_RECYCLE_PER_SHAPE = 16         # (an IBP of an MLP holds 12 endpoint arrays of a shape)
_RECYCLE_TOTAL = 1 << 24        # entries (128 MiB) pooled per thread at most


def recycled_empty(shape) -> np.ndarray:
    """A fresh-to-the-caller float64 array for a *result*: one this thread allocated
    before and that nobody references any more (only the pool does: every view or user
    reference keeps the refcount up, so a held array is never handed out again), else a
    new one.  Writing into recycled memory avoids the page faults of newly mapped pages,
    the main cost of large endpoint arrays on a VM."""
    shape = tuple(int(k) for k in shape)
    n = int(np.prod(shape, dtype=np.int64))
    if n < _RECYCLE_MIN or n > _SCRATCH_MAX:
        return np.empty(shape)
    pools = getattr(_RECYCLE, "pools", None)
    if pools is None:
        pools = _RECYCLE.pools = {}
    lst = pools.setdefault(shape, [])
    for k in range(len(lst)):
        # references: the list, getrefcount's argument -> 2 means unused elsewhere
        if sys.getrefcount(lst[k]) == 2:
            return lst[k]
    arr = np.empty(shape)
    held = getattr(_RECYCLE, "held", 0)
    if len(lst) < _RECYCLE_PER_SHAPE and held + n <= _RECYCLE_TOTAL:
        lst.append(arr)               # kept for reuse; the pool is bounded in total
        _RECYCLE.held = held + n
    return arr


_SCRATCH = threading.local()
_SCRATCH_MAX = 1 << 23          # entries (64 MiB); larger temporaries are not kept


def scratch(key: str, shape) -> np.ndarray:
    """A float64 work array of ``shape``, reused across calls in this thread (its
    contents are garbage).  Large fresh arrays cost page faults on every call, which
    dominated the midpoint-radius matmul; callers use these only for temporaries that
    never leave the call, and must not hold two live uses of one key."""
    shape = tuple(int(k) for k in shape)
    n = int(np.prod(shape, dtype=np.int64))
    if n > _SCRATCH_MAX:
        return np.empty(shape)
    bufs = getattr(_SCRATCH, "bufs", None)
    if bufs is None:
        bufs = _SCRATCH.bufs = {}
    buf = bufs.get(key)
    if buf is None or buf.size < n:
        buf = bufs[key] = np.empty(max(n, 1))
    return buf[:n].reshape(shape)


@numba.njit(cache=True)
def _abs_scan_kernel(X, out, mask, rows):
    """out = |X| for a C-contiguous (r, c) X; mask = rows (rows=True) or columns with a
    non-zero entry; returns whether every entry is finite.  One pass over X."""
    r, c = X.shape
    fin = True
    for k in range(mask.size):
        mask[k] = False
    for i in range(r):
        acc = False
        if rows:                        # loops without branches inside (they vectorise)
            for j in range(c):
                v = abs(X[i, j])
                out[i, j] = v
                fin = fin & (v <= DBL_MAX)  # inf or NaN fail
                acc = acc | (v > 0)
            mask[i] = acc
        else:
            for j in range(c):
                v = abs(X[i, j])
                out[i, j] = v
                fin = fin & (v <= DBL_MAX)
                mask[j] = mask[j] | (v > 0)
    return fin


def abs_scan(X, axis: int, key: str | None = None):
    """(|X|, flat mask of the lines along ``axis`` holding a non-zero entry, all finite)
    for a 2-d float64 X, in one compiled pass (the weight side of the midpoint-radius
    matmul); an F-contiguous X (a transposed weight matrix) is scanned without a copy."""
    X = np.asarray(X, dtype=np.float64)
    axis = axis % 2
    transposed = X.flags.f_contiguous and not X.flags.c_contiguous
    if transposed:
        Y, ax = X.T, 1 - axis          # the C-contiguous transpose, reduced the other way
    else:
        Y, ax = np.ascontiguousarray(X), axis
    out = np.empty(Y.shape) if key is None else scratch(key, Y.shape)
    # reducing over axis 1 of Y leaves one flag per row of Y, over axis 0 one per column
    mask = np.empty(Y.shape[0] if ax == 1 else Y.shape[1], dtype=np.bool_)
    fin = _abs_scan_kernel(writable(Y), out, mask, ax == 1)
    return (out.T if transposed else out), mask, bool(fin)


@numba.njit(cache=True, inline="always")
def _midrad_one(a, b, gamma, fin, eq):
    """(m, r, |m|, gamma |m| + r, fin and a, b finite, eq and a == b) of one interval
    [a, b] (the flags are the caller's running "all finite", "all points"): m = a/2 + b/2,
    r = max(RU(b - m), RU(m - a)) exactly (TwoSum sign of each subtraction, one ulp step
    where it was inexact, always one where the EFT is not trusted).  The per-entry work
    of :func:`_midrad_rows_kernel`, :func:`_midrad_cols_kernel` and of
    ``interval_affine``'s fused passes."""
    mm = a * 0.5 + b * 0.5
    d1, e1 = two_sum(b, -mm)
    d2, e2 = two_sum(mm, -a)
    trust = (abs(a) <= _SAFE_HI) & (abs(b) <= _SAFE_HI) & _finite(e1) & _finite(e2)
    # bit steps in registers (no store/reload through an int view: vectorises)
    u1 = i2f(_up_bits(f2i(d1), _finite(d1) & ((not trust) | (e1 > 0))))
    u2 = i2f(_up_bits(f2i(d2), _finite(d2) & ((not trust) | (e2 > 0))))
    rr = u1 if u1 >= u2 else u2
    av = abs(mm)
    return mm, rr, av, gamma * av + rr, fin & _finite(a) & _finite(b), eq & (a == b)


# Twins: _midrad_cols_kernel (mask per column) and interval_affine._prep_rows_kernel (no r, |m|
# stores); a flag or layout switch inside one loop would be a conditional store (no vectorising).
@numba.njit(cache=True)
def _midrad_rows_kernel(lo, hi, gamma, m, r, am, g, mask):
    """For (P, Q) C-contiguous endpoints contracted over axis 1: midpoint m = lo/2 + hi/2,
    radius r = max(RU(hi - m), RU(m - lo)) with exactly directed rounding (TwoSum error
    sign, one ulp step only where the subtraction was inexact, always one step where the
    EFT is not trusted), |m|, g = gamma |m| + r (:func:`_midrad_one`), and mask[i] = row i
    holds an entry with |m| + r > 0, kept in a register (the loop vectorises); returns
    (all finite, lo == hi).

    r >= max(hi - m, m - lo) exactly, so [m - r, m + r] contains [lo, hi] wherever the
    rounded m lies; a zero-width entry gets r = 0 (not the subnormal 2^-1074, which
    would also slow the BLAS product down)."""
    P, Q = lo.shape
    fin = True
    eq = True
    for i in range(P):
        acc = False
        for j in range(Q):
            a = lo[i, j]
            b = hi[i, j]
            mm, rr, av, gg, fin, eq = _midrad_one(a, b, gamma, fin, eq)
            m[i, j] = mm
            r[i, j] = rr
            am[i, j] = av
            g[i, j] = gg
            acc = acc | (av > 0) | (rr > 0)
        mask[i] = acc
    return fin, eq


# Twin of _midrad_rows_kernel with the mask or-ed per column (kept apart: see there).
@numba.njit(cache=True)
def _midrad_cols_kernel(lo, hi, gamma, m, r, am, g, mask):
    """The same with contraction over axis 0: mask[j] = column j holds an entry with
    |m| + r > 0, or-ed along each row (the loop vectorises)."""
    P, Q = lo.shape
    fin = True
    eq = True
    for j in range(Q):
        mask[j] = False
    for i in range(P):
        for j in range(Q):
            a = lo[i, j]
            b = hi[i, j]
            mm, rr, av, gg, fin, eq = _midrad_one(a, b, gamma, fin, eq)
            m[i, j] = mm
            r[i, j] = rr
            am[i, j] = av
            g[i, j] = gg
            mask[j] = mask[j] | (av > 0) | (rr > 0)
    return fin, eq


def midrad_prep(lo, hi, gamma: float, axis: int = 1, key: str | None = None):
    """(m, r, |m|, gamma |m| + r, mask, all finite, lo == hi) of 2-d interval endpoints in
    one pass; ``mask`` flags the lines along ``axis`` (the contraction axis) holding an
    entry with |m| + r > 0.  Outputs go to :func:`scratch` arrays named after ``key``
    when given."""
    lo = np.ascontiguousarray(lo, dtype=np.float64)
    hi = np.ascontiguousarray(hi, dtype=np.float64)
    if lo.ndim != 2 or hi.shape != lo.shape:
        raise ValueError(f"midrad_prep: 2-d endpoints of one shape expected, got "
                         f"{lo.shape} and {hi.shape}")
    shape = lo.shape
    m, r, am, g = (np.empty(shape) if key is None else scratch(f"{key}.{nm}", shape)
                   for nm in ("m", "r", "am", "g"))
    rows = (axis % 2) == 1
    mask = np.empty(shape[0] if rows else shape[1], dtype=np.bool_)
    kernel = _midrad_rows_kernel if rows else _midrad_cols_kernel
    fin, eq = kernel(lo, hi, float(gamma), m, r, am, g, mask)
    return m, r, am, g, mask, bool(fin), bool(eq)


def midrad_dir(c, r, fmt: Format = binary64):
    """(RD_grid(c - r), RU_grid(c + r)) elementwise, exactly (midpoint-radius results)."""
    c, r = np.broadcast_arrays(np.asarray(c, dtype=np.float64), np.asarray(r, dtype=np.float64))
    shape = c.shape
    fc, fr = np.ascontiguousarray(c).reshape(-1), np.ascontiguousarray(r).reshape(-1)
    lo, hi = np.empty(fc.size), np.empty(fc.size)
    bad = np.zeros(fc.size, dtype=np.bool_)
    _midrad_kernel(fc, fr, lo, hi, bad)
    lo, hi = lo.reshape(shape), hi.reshape(shape)
    if bad.any() or not fmt.is_binary64:
        m = bad.reshape(shape)
        if bad.any():   # overflow / extreme operands: the general exact path
            lo = np.where(m, sub_dir(c, r, binary64)[0], lo)
            hi = np.where(m, add_dir(c, r, binary64)[1], hi)
        if not fmt.is_binary64:
            lo, hi = round_down(lo, fmt), round_up(hi, fmt)
    return lo, hi


@numba.njit(cache=True)
def _add_pair_kernel(alo, ahi, blo, bhi, lo, hi):
    """lo = RD(alo + blo), hi = RU(ahi + bhi) on the float64 grid in one pass; b repeats
    along the leading axes (a.size is a multiple of b.size: a bias row).  Same TwoSum and
    ulp step as add_err + finish; returns False when some element needs the exact
    rational path (overflow, extreme operands): the caller then recomputes everything;
    and whether a NaN came out (inf + -inf)."""
    nb = blo.size
    ok_all = True
    nan = False
    for q in range(alo.size // nb):
        base = q * nb
        for k in range(nb):
            i = base + k
            x = alo[i]
            y = blo[k]
            t, e = two_sum(x, y)
            fin = _finite(x) & _finite(y)
            ok_all = ok_all & (not (fin & ((not _finite(t)) | (abs(x) > _SAFE_HI) | (abs(y) > _SAFE_HI))))
            tl = i2f(_down_bits(f2i(t), fin & _finite(e) & (e < 0)))
            lo[i] = tl
            x = ahi[i]
            y = bhi[k]
            t, e = two_sum(x, y)
            fin = _finite(x) & _finite(y)
            ok_all = ok_all & (not (fin & ((not _finite(t)) | (abs(x) > _SAFE_HI) | (abs(y) > _SAFE_HI))))
            hi[i] = i2f(_up_bits(f2i(t), fin & _finite(e) & (e > 0)))
            nan = nan | (tl != tl) | (t != t)
    return ok_all, nan


def add_pair_dir(alo, ahi, blo, bhi, shape):
    """(RD(alo + blo), RU(ahi + bhi), any NaN) on the float64 grid, fused, for interval
    addition where b is either of the full ``shape`` or a trailing-axes broadcast (a
    bias); None when that layout does not apply or an element needs the exact fallback."""
    shape = tuple(shape)
    ends = [np.asarray(t, dtype=np.float64) for t in (alo, ahi, blo, bhi)]
    if ends[0].shape != shape or ends[1].shape != shape:
        ends = ends[2:] + ends[:2]           # addition commutes: the full operand first
    alo, ahi, blo, bhi = ends
    if alo.shape != shape or ahi.shape != shape or blo.shape != bhi.shape:
        return None
    bs = blo.shape
    while bs and bs[0] == 1:
        bs = bs[1:]
    if len(bs) > len(shape) or (bs and shape[len(shape) - len(bs):] != bs) or alo.size == 0:
        return None
    fal, fah, fbl, fbh = (flat_f64(t) for t in (alo, ahi, blo, bhi))
    if fbl.size == 0 or fal.size % fbl.size:
        return None
    lo, hi = recycled_empty((fal.size,)), recycled_empty((fal.size,))
    ok, nan = _add_pair_kernel(fal, fah, fbl, fbh, lo, hi)
    if not ok:
        return None
    return lo.reshape(shape), hi.reshape(shape), bool(nan)


def add_dir(a, b, fmt: Format = binary64):
    return finish(*add_err(a, b), fmt)


def sub_dir(a, b, fmt: Format = binary64):
    return finish(*sub_err(a, b), fmt)


def mul_dir(a, b, fmt: Format = binary64):
    return finish(*mul_err(a, b), fmt)


def div_dir(a, b, fmt: Format = binary64):
    return finish(*div_err(a, b), fmt)


def sqrt_dir(a, fmt: Format = binary64):
    return finish(*sqrt_err(a), fmt)


def exact_dir(values, fmt: Format = binary64):
    """(RD, RU) onto ``fmt`` of a flat sequence of exact rationals (Fraction/mpq)."""
    n = len(values)
    s = np.empty(n); sgn = np.empty(n, dtype=np.int8)
    for i, q in enumerate(values):
        q = q if isinstance(q, Fraction) else Fraction(int(q.numerator), int(q.denominator))
        try:
            si = q.numerator / q.denominator
        except OverflowError:
            si = DBL_MAX if q > 0 else -DBL_MAX
        s[i], sgn[i] = _settle(si, q)
    return finish(s, sgn, fmt)
