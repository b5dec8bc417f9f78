"""Compiled passes of the interval affine layer ``x W^T + b`` (IBP of dense layers) on the
float64 grid: the interval activation times a point weight matrix plus a bias, and ReLU.

``IntervalContext.affine`` evaluates ``add(matmul(x, transpose(W)), b)`` with the same
midpoint-radius formulas as ``matmul_midrad`` followed by the directed bias addition of
``add``, but with fewer passes over memory:

* :func:`prep_rows` reads the activation endpoints once and writes only what a point
  weight needs: the midpoint ``m`` and ``g = gamma |m| + r`` (``matmul_midrad`` also
  writes ``r`` and ``|m|``, which only an interval weight uses);
* :func:`weight_abs` gives ``|W|`` (and the finiteness of W and its non-zero rows) from a
  bounded cache of immutable weight snapshots, never stale after an in-place change of
  the weight (:class:`_WeightCache`); ``convert`` hands out the snapshot of a cached
  weight (:func:`point_snapshot`);
* :func:`finish_bias` fuses the last pass of the product (rigorous radius, RD/RU of
  ``C -+ R'``) with the directed bias addition (RD/RU of ``lo + b_lo`` / ``hi + b_hi``)
  and the NaN scan: one pass instead of three.

Every float64 operation is the one the unfused code performs, in the same order (two
directed roundings: the product's, then the addition's), so the endpoints are bitwise
identical to ``add(matmul(...), b)``; tests/scalars/test_interval_affine.py checks it.
Whatever these passes cannot vouch for (non-finite or extreme values, a point activation)
makes them report failure, and the caller runs the unfused operations.

The operand passes of the general midpoint-radius matmul (:func:`midrad_prep_fast`: rows
of a C-ordered operand, columns of a transposed weight after a tiled transpose) live here
too: ``directed.midrad_prep``'s kernels, a transposed operand copied in tiles first.
"""
from __future__ import annotations

import threading
import weakref

import numba
import numpy as np

from .directed import (DBL_MAX, _SAFE_HI, _down_bits, _finite, _midrad_cols_kernel,
                       _midrad_one, _midrad_rows_kernel, _up_bits, recycled_empty, scratch)
from .eft import f2i, i2f, two_sum
from .f64_matmul import product as _product
from .flat import writable

__all__ = ["prep_rows", "midrad_prep_fast", "weight_abs", "point_snapshot", "finish_bias",
           "relu_pair", "affine_midrad", "clear_weight_cache"]


# Twin of directed._midrad_rows_kernel, kept apart: stores only m, g (a flag = conditional store)
@numba.njit(cache=True)
def _prep_rows_kernel(lo, hi, gamma, m, g, mask):
    """m = lo/2 + hi/2, g = gamma |m| + max(RU(hi - m), RU(m - lo)) (the radius rounded up
    exactly: TwoSum sign of each subtraction, one ulp step where it was inexact, always
    one where the EFT is not trusted), mask[i] = row i holds an entry with |m| + r > 0;
    returns (all finite, lo == hi everywhere).  ``directed._midrad_one`` per entry, as
    ``directed._midrad_rows_kernel`` (which also stores r and |m|), so m and g are
    bitwise the same."""
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
            g[i, j] = gg
            acc = acc | (av > 0) | (rr > 0)
        mask[i] = acc
    return fin, eq


def prep_rows(lo, hi, gamma: float, key: str):
    """(m, g, mask, all finite, lo == hi) of (P, Q) interval endpoints contracted over
    axis 1 (see :func:`_prep_rows_kernel`); m and g are :func:`directed.scratch` arrays
    named after ``key`` (temporaries of one call)."""
    lo = writable(np.ascontiguousarray(lo, dtype=np.float64))     # one array type
    hi = writable(np.ascontiguousarray(hi, dtype=np.float64))
    m = scratch(f"{key}.m", lo.shape)
    g = scratch(f"{key}.g", lo.shape)
    mask = np.empty(lo.shape[0], dtype=np.bool_)
    fin, eq = _prep_rows_kernel(lo, hi, float(gamma), m, g, mask)
    return m, g, mask, bool(fin), bool(eq)


# ------------------------------------------------- both operands of an interval matmul
@numba.njit(cache=True)
def _transpose_into(src, dst):
    """dst = src.T for C-contiguous 2-d arrays, in 32 x 32 tiles taken band by band of
    dst's rows (several times faster than a strided copy of a large matrix here)."""
    p, n = src.shape
    T = 32
    for i0 in range(0, n, T):
        i1 = min(i0 + T, n)
        for j0 in range(0, p, T):
            j1 = min(j0 + T, p)
            for i in range(i0, i1):
                for j in range(j0, j1):
                    dst[i, j] = src[j, i]


def midrad_prep_fast(lo, hi, gamma: float, axis: int, key: str):
    """``directed.midrad_prep(lo, hi, gamma, axis, key)`` (same values, same C-contiguous
    output layout) for the two layouts of an interval matmul that have a faster pass:
    C-contiguous operands contracted over axis 1, and transposes of C-contiguous
    operands contracted over axis 0 (copied in cache-friendly tiles first).  None for
    other layouts."""
    if (not isinstance(lo, np.ndarray) or not isinstance(hi, np.ndarray) or lo.ndim != 2
            or lo.shape != hi.shape or lo.dtype != np.float64 or hi.dtype != np.float64):
        return None
    axis = axis % 2
    if axis == 1 and lo.flags.c_contiguous and hi.flags.c_contiguous:
        src_lo, src_hi, kernel = lo, hi, _midrad_rows_kernel
    elif axis == 0 and lo.T.flags.c_contiguous and hi.T.flags.c_contiguous:
        # a transposed weight: blocked copies into C order, then the column pass
        src_lo = scratch(f"{key}.tlo", lo.shape)
        src_hi = scratch(f"{key}.thi", lo.shape)
        _transpose_into(lo.T, src_lo)
        _transpose_into(hi.T, src_hi)
        kernel = _midrad_cols_kernel
    else:
        return None
    shape = lo.shape
    m, r, am, g = (scratch(f"{key}.{nm}", shape) for nm in ("m", "r", "am", "g"))
    mask = np.empty(shape[0] if axis == 1 else shape[1], dtype=np.bool_)
    fin, eq = kernel(src_lo, src_hi, float(gamma), m, r, am, g, mask)
    return m, r, am, g, mask, bool(fin), bool(eq)


# ------------------------------------------------------------------------------ |W|
@numba.njit(cache=True)
def _abs_rows_kernel(W, out, mask):
    """out = |W|, mask[i] = row i has a non-zero entry; returns whether every entry is
    finite."""
    r, c = W.shape
    fin = True
    for i in range(r):
        acc = False
        for j in range(c):
            v = abs(W[i, j])
            out[i, j] = v
            fin = fin & (v <= DBL_MAX)
            acc = acc | (v > 0)
        mask[i] = acc
    return fin


@numba.njit(cache=True)
def _same_bits_kernel(X, Y):
    """X and Y (same shape) hold the same bit patterns (signed zeros and NaN payloads
    told apart)."""
    r, c = X.shape
    for i in range(r):
        same = True
        for j in range(c):
            same = same & (f2i(X[i, j]) == f2i(Y[i, j]))
        if not same:
            return False
    return True


#: arrays smaller than this are not cached (|W| costs little there)
_MIN_CACHED = 1 << 14


class _WeightCache:
    """|W| of weight matrices, per thread, bounded.

    A numpy array has no version counter, so nothing tells whether a weight was written
    in place since its |W| was computed.  So an entry holds an *immutable snapshot* W0
    of the weight (a copy backed by a ``bytes`` object: numpy refuses to make it
    writeable) together with |W0|, its non-zero rows and its finiteness:

    * ``IntervalContext.convert`` of a weight with an entry compares the weight bit for
      bit with W0 (one read of each) and, when equal, returns the snapshot as the
      interval's (point) endpoints -- the value of the weight at that moment, which no
      one can change afterwards -- and skips its NaN scan (the entry knows W0 is
      finite);
    * :func:`weight_abs` of a snapshot needs no check at all (its memory cannot change);
      of any other array it compares with the entry's snapshot, or computes |W| afresh
      and makes an entry.

    Entries are keyed by ``id`` of the caller's array and hold only a weak reference to
    it, so they die with it; the total size is bounded (least recently used first)."""

    MAX_ENTRIES = 1 << 24          # float64 entries (snapshots and |W|: 128 MiB) per thread

    def __init__(self):
        self.entries: dict[int, tuple] = {}     # id(W) -> (weakref W, W0, |W0|, mask, fin)
        self.owned: dict[int, int] = {}         # id(W0) -> id(W)
        self.held = 0

    def of_snapshot(self, X):
        """The entry whose snapshot is ``X`` itself, else None."""
        key = self.owned.get(id(X))
        if key is not None:
            e = self.entries.get(key)
            if e is not None and e[1] is X:
                return e
        return None

    def validated(self, W):
        """The entry of ``W`` if W still holds the bits of its snapshot, else None (and
        a stale entry is dropped)."""
        key = id(W)
        e = self.entries.get(key)
        if e is None:
            return None
        if e[0]() is W and e[1].shape == W.shape and _same_bits_kernel(W, e[1]):
            del self.entries[key]           # most recently used last
            self.entries[key] = e
            return e
        self._drop(key)
        return None

    def build(self, W):
        """A new entry for ``W`` (stored when it fits the bound)."""
        W0 = np.frombuffer(W.tobytes(), dtype=np.float64).reshape(W.shape)   # read-only
        A = np.empty(W.shape)
        mask = np.empty(W.shape[0], dtype=np.bool_)
        fin = bool(_abs_rows_kernel(W0, A, mask))
        cost = 2 * W.size
        if cost > self.MAX_ENTRIES:
            return (None, W0, A, mask, fin)
        while self.entries and self.held + cost > self.MAX_ENTRIES:
            self._drop(next(iter(self.entries)))
        key = id(W)
        self._drop(key)
        try:
            ref = weakref.ref(W, self._forget(key))
        except TypeError:                   # not weak-referenceable: not stored
            return (None, W0, A, mask, fin)
        e = (ref, W0, A, mask, fin)
        self.entries[key] = e
        self.owned[id(W0)] = key
        self.held += cost
        return e

    def _drop(self, key):
        e = self.entries.pop(key, None)
        if e is not None:
            self.owned.pop(id(e[1]), None)
            self.held -= 2 * e[1].size

    def _forget(self, key: int):
        """Weakref callback: the array died; drop its entry (if it is still that
        array's: the id may have been reused and re-entered since)."""
        def callback(ref):
            e = self.entries.get(key)
            if e is not None and e[0] is ref:
                self._drop(key)
        return callback


_LOCAL = threading.local()


def _cache() -> _WeightCache:
    c = getattr(_LOCAL, "cache", None)
    if c is None:
        c = _LOCAL.cache = _WeightCache()
    return c


def clear_weight_cache() -> None:
    """Forget every cached |W| of this thread."""
    _LOCAL.cache = _WeightCache()


def _cacheable(W) -> bool:
    return (isinstance(W, np.ndarray) and W.dtype == np.float64 and W.ndim == 2
            and W.flags.c_contiguous and W.size >= _MIN_CACHED)


def weight_abs(W):
    """(|W|, mask of the rows of W holding a non-zero entry, all finite) of a 2-d float64
    weight matrix ``W`` (out, in), |W| C-contiguous.  From the cache when W is a
    snapshot (immutable) or still equal bit for bit to its entry's snapshot, so a weight
    changed in place is never paired with a stale |W|; small or non-contiguous arrays are
    computed afresh."""
    if not _cacheable(W):
        W = np.ascontiguousarray(W, dtype=np.float64)
        A = np.empty(W.shape)
        mask = np.empty(W.shape[0], dtype=np.bool_)
        return A, mask, bool(_abs_rows_kernel(W, A, mask))
    c = _cache()
    e = c.of_snapshot(W) or c.validated(W) or c.build(W)
    return e[2], e[3], e[4]


def point_snapshot(W):
    """An immutable array with the bits of ``W`` if ``W`` is a cached weight (or a
    snapshot) that is finite, else None: ``IntervalContext.convert`` then uses it as
    the point interval's endpoints without scanning for NaN (see :class:`_WeightCache`)."""
    if not _cacheable(W):
        return None
    c = _cache()
    e = c.of_snapshot(W) or c.validated(W)
    if e is None or not e[4]:
        return None
    return e[1]


# -------------------------------------------------------------------- last pass + bias
@numba.njit(cache=True, inline="always")
def _finish_one(x, y0, scale, tiny, nz, bl, bh, rfin, ok_all):
    """One entry of the last pass: R' = y0 * scale + (tiny if nz else 0),
    pl = RD(x - R'), ph = RU(x + R') as ``directed._midrad2d_kernel``, then
    (RD(pl + bl), RU(ph + bh)) as ``directed._add_pair_kernel``, every rounding exact
    (TwoSum sign, one ulp step); with the caller's running flags: rfin and x, y0 finite,
    ok_all and no exact fallback needed here."""
    rfin = rfin & (y0 <= DBL_MAX) & _finite(x)
    y = y0 * scale
    y = y + (tiny if nz else 0.0)
    safe = (abs(x) <= _SAFE_HI) & (abs(y) <= _SAFE_HI)
    t, e = two_sum(x, -y)
    ok = safe & _finite(t) & _finite(e)
    pl = i2f(_down_bits(f2i(t), ok & (e < 0)))
    t2, e2 = two_sum(x, y)
    ok2 = safe & _finite(t2) & _finite(e2)
    ph = i2f(_up_bits(f2i(t2), ok2 & (e2 > 0)))
    # the bias addition
    t, e = two_sum(pl, bl)
    fin = _finite(pl) & _finite(bl)
    okl = not (fin & ((not _finite(t)) | (abs(pl) > _SAFE_HI) | (abs(bl) > _SAFE_HI)))
    tl = i2f(_down_bits(f2i(t), fin & _finite(e) & (e < 0)))
    t, e = two_sum(ph, bh)
    fin = _finite(ph) & _finite(bh)
    okh = not (fin & ((not _finite(t)) | (abs(ph) > _SAFE_HI) | (abs(bh) > _SAFE_HI)))
    th = i2f(_up_bits(f2i(t), fin & _finite(e) & (e > 0)))
    return tl, th, rfin, ok_all & ok & ok2 & okl & okh


@numba.njit(cache=True)
def _finish_bias_kernel(C, R, scale, tiny, nzr, nzc, blo, bhi, lo, hi):
    """For (m, p) C and R and bias ends (p,): the radius R' = R * scale + (tiny where
    row i and column j can hold a non-zero product), then
    lo = RD(RD(C - R') + blo), hi = RU(RU(C + R') + bhi) on the float64 grid, each
    rounding exact (TwoSum sign, one ulp step).  The same operations as
    ``directed._midrad2d_kernel`` followed by ``directed._add_pair_kernel``.  Returns
    (status, nan): status 0 = done, 1 = C or R not finite (the caller uses the endpoint
    algorithm), 2 = some element needs the exact fallback of the unfused code; nan =
    some endpoint is NaN."""
    m, p = C.shape
    rfin = True
    ok_all = True
    nan = False
    for i in range(m):
        for j in range(p):
            tl, th, rfin, ok_all = _finish_one(C[i, j], R[i, j], scale, tiny, nzr[i] & nzc[j],
                                               blo[j], bhi[j], rfin, ok_all)
            lo[i, j] = tl
            hi[i, j] = th
            nan = nan | (tl != tl) | (th != th)
    if not rfin:
        return 1, nan
    if not ok_all:
        return 2, nan
    return 0, nan


@numba.njit(cache=True)
def _finish_bias_relu_kernel(C, R, scale, tiny, nzr, nzc, blo, bhi, gamma2, lo, hi, rlo,
                             rhi, m2, g2, mask2):
    """:func:`_finish_bias_kernel` that also writes the ReLU of its result,
    rlo = max(lo, +0), rhi = max(hi, +0) as :func:`_relu_pair_kernel` (for a dense layer
    whose only consumer is a relu: one pass instead of two), and what
    :func:`_prep_rows_kernel` computes from [rlo, rhi] with ``gamma2`` (m2, g2, mask2,
    for a dense layer reading that relu).  Returns (status, nan, all of [rlo, rhi]
    finite, rlo == rhi everywhere)."""
    m, p = C.shape
    rfin = True
    ok_all = True
    nan = False
    fin2 = True
    eq2 = True
    for i in range(m):
        acc = False
        for j in range(p):
            tl, th, rfin, ok_all = _finish_one(C[i, j], R[i, j], scale, tiny, nzr[i] & nzc[j],
                                               blo[j], bhi[j], rfin, ok_all)
            lo[i, j] = tl
            hi[i, j] = th
            a = tl if (tl > 0.0) | (tl != tl) else 0.0
            b = th if (th > 0.0) | (th != th) else 0.0
            rlo[i, j] = a
            rhi[i, j] = b
            nan = nan | (tl != tl) | (th != th)
            mm, rr, av, gg, fin2, eq2 = _midrad_one(a, b, gamma2, fin2, eq2)
            m2[i, j] = mm
            g2[i, j] = gg
            acc = acc | (av > 0) | (rr > 0)
        mask2[i] = acc
    if not rfin:
        return 1, nan, fin2, eq2
    if not ok_all:
        return 2, nan, fin2, eq2
    return 0, nan, fin2, eq2


def finish_bias(C, R, scale: float, tiny: float, nzr, nzc, blo, bhi):
    """(status, lo, hi, nan) of :func:`_finish_bias_kernel`; lo and hi are fresh result
    arrays (:func:`directed.recycled_empty`)."""
    lo = recycled_empty(C.shape)
    hi = recycled_empty(C.shape)
    status, nan = _finish_bias_kernel(C, R, float(scale), float(tiny), nzr, nzc,
                                      np.ascontiguousarray(blo, dtype=np.float64),
                                      np.ascontiguousarray(bhi, dtype=np.float64), lo, hi)
    return int(status), lo, hi, bool(nan)


# ------------------------------------------------------------------------------ relu
@numba.njit(cache=True)
def _relu_pair_kernel(lo, hi, olo, ohi):
    """olo = max(lo, +0), ohi = max(hi, +0) as numpy's maximum(x, 0.0) (NaN kept, -0
    becomes +0); returns whether a NaN is present."""
    nan = False
    for i in range(lo.size):
        a = lo[i]
        b = hi[i]
        olo[i] = a if (a > 0.0) | (a != a) else 0.0
        ohi[i] = b if (b > 0.0) | (b != b) else 0.0
        nan = nan | (a != a) | (b != b)
    return nan


def relu_pair(lo, hi):
    """(max(lo, 0), max(hi, 0), any NaN) for float64 endpoint arrays of one shape, in one
    pass into fresh result arrays."""
    shape = lo.shape
    flo = np.ascontiguousarray(lo).reshape(-1)
    fhi = np.ascontiguousarray(hi).reshape(-1)
    olo = recycled_empty(shape)
    ohi = recycled_empty(shape)
    nan = _relu_pair_kernel(flo, fhi, olo.reshape(-1), ohi.reshape(-1))
    return olo, ohi, bool(nan)


# ------------------------------------------------------------------------- the layer
def _gamma(n: int) -> float:
    u = 2.0 ** -53
    return (n * u) / (1.0 - n * u) * (1.0 + 2.0 ** -50)      # as matmul_midrad


def affine_midrad(xlo, xhi, W, blo, bhi, relu: bool = False, prep=None):
    """(lo, hi, any NaN) enclosing ``[xlo, xhi] W^T + [blo, bhi]`` on the float64 grid for
    a non-point (P, n) interval activation, a point (p, n) weight ``W`` and a (p,) bias:
    the endpoints of ``IntervalContext.add(matmul_midrad(x, W^T), b)``, bitwise, in
    three compiled passes and two BLAS products.  ``None`` where that composition would
    take another path (a point activation, a product small enough for the long double
    algorithm, non-finite operands, an element needing the exact fallback): the caller
    then runs it unfused.

    ``relu=True``: also ``max(lo, 0), max(hi, 0)`` (the relu of the result, as
    :func:`relu_pair`) from the same pass, and the operand pass of a dense layer reading
    that relu (:func:`prep_rows` of [rlo, rhi]): ``(lo, hi, nan, rlo, rhi, prep)``.
    ``prep``: that operand pass for [xlo, xhi], from the previous layer (the caller
    vouches that it was made from these very endpoints), instead of :func:`prep_rows`.

    Soundness is that of the two operations it fuses (``matmul_midrad``'s docstring has
    the proof): C = fl(m W^T), R' = (g |W|^T)(1 + (n + 10) 2^-52) + (3n + 3) 2^-1074 and
    [RD(C - R'), RU(C + R')] encloses every x W^T, then adding the bias with RD/RU."""
    from .dot_enclosure import AVAILABLE, CHEAP_MACS
    if xlo is xhi or not all(isinstance(t, np.ndarray) and t.dtype == np.float64
                             for t in (xlo, xhi, W, blo, bhi)):
        return None
    if xlo.ndim != 2 or xhi.shape != xlo.shape or W.ndim != 2 or blo.shape != bhi.shape:
        return None
    P, n = xlo.shape
    p = W.shape[0]
    if W.shape[1] != n or blo.shape not in ((p,), (1, p)) or P == 0 or p == 0:
        return None
    if not W.flags.c_contiguous or W.flags.f_contiguous:
        return None            # matmul's |W| then has another layout (other BLAS calls)
    if AVAILABLE and P * n * p <= CHEAP_MACS:      # matmul's long double product
        return None
    gamma = _gamma(n)
    with np.errstate(all="ignore"):
        if prep is not None and prep[0].shape == (P, n):
            m, g, nzA, fin, eq = prep            # made with _gamma(n) by the last pass
        else:
            m, g, nzA, fin, eq = prep_rows(xlo, xhi, gamma, "affine.A")
        if not fin or eq:
            return None
        A, nzB, finW = weight_abs(W)
        if not finW:
            return None
        C = _product(m, W.T, out=scratch("affine.C", (P, p)))
        R = _product(g, A.T, out=scratch("affine.R", (P, p)))
        scale, tiny = 1.0 + (n + 10) * 2.0 ** -52, (3 * n + 3) * 2.0 ** -1074
        if not relu:
            status, lo, hi, nan = finish_bias(C, R, scale, tiny, nzA, nzB,
                                              blo.reshape(-1), bhi.reshape(-1))
            return None if status else (lo, hi, nan)
        lo, hi, rlo, rhi, m2, g2 = (recycled_empty(C.shape) for _ in range(6))
        mask2 = np.empty(P, dtype=np.bool_)
        status, nan, fin2, eq2 = _finish_bias_relu_kernel(
            C, R, scale, tiny, nzA, nzB, np.ascontiguousarray(blo.reshape(-1)),
            np.ascontiguousarray(bhi.reshape(-1)), _gamma(p), lo, hi, rlo, rhi, m2, g2,
            mask2)
    if status:
        return None
    return lo, hi, bool(nan), rlo, rhi, (m2, g2, mask2, bool(fin2), bool(eq2))
