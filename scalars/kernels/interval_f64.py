"""Compiled interval kernels on the float64 grid (``interval:float64``): one pass per op.

Interval division by a divisor that excludes 0 needs only two quotients per element (which
ones follows from the signs of the endpoints), each rounded in its direction exactly: the
round-to-nearest quotient ``q`` and the sign of the exact residual ``x - q*y`` (TwoProduct,
as :func:`scalars.kernels.directed.div_err`) say whether the exact quotient lies below or above
``q``, and one ulp step on the bit pattern gives RD / RU.  Elements the error-free
transformation cannot vouch for (operands or quotients outside [2^-900, 2^900], non-finite
endpoints) make the kernel give up, and the caller runs the generic algorithm.
"""
from __future__ import annotations

import numba
import numpy as np

from . import grid as GK
from .eft import f2i, i2f, two_prod
from .flat import flat_f64

_NEG_TINY_BITS = np.array([-5e-324]).view(np.int64)[0]
_risky = GK.risky


@numba.njit(cache=True, error_model="numpy", inline="always")
def _quotient(x, y, up):
    """RU(x/y) if up else RD(x/y) on the float64 grid, and whether that is trusted."""
    q = x / y
    ph, pl = two_prod(q, y)
    d = ((x - ph) - pl) * (1.0 if y > 0.0 else -1.0)     # sign(exact - q)
    bi = f2i(q)
    zero = (bi << 1) == 0
    if up:
        nb = np.int64(1) if zero else (bi - 1 if bi < 0 else bi + 1)
        r = i2f(nb) if (d > 0.0 and x != 0.0) else q
    else:
        nb = _NEG_TINY_BITS if zero else (bi + 1 if bi < 0 else bi - 1)
        r = i2f(nb) if (d < 0.0 and x != 0.0) else q
    ok = not (_risky(x) | _risky(y) | ((x != 0.0) & (_risky(q) | (q == 0.0))))
    return r, ok


@numba.njit(cache=True, error_model="numpy")
def div_kernel(alo, ahi, blo, bhi, lo, hi):
    """[alo, ahi] / [blo, bhi] with 0 outside every divisor (1-d arrays, one length);
    returns False (results unusable) when some element needs the generic algorithm."""
    good = True
    for i in range(lo.size):
        xl, xh, yl, yh, ok = GK.div_operands(alo[i], ahi[i], blo[i], bhi[i])
        good = good & ok
        rl, okl = _quotient(xl, yl, False)
        rh, okh = _quotient(xh, yh, True)
        lo[i] = rl
        hi[i] = rh
        good = good & okl & okh
    return good


def div_f64(alo, ahi, blo, bhi, shape):
    """(lo, hi) of the quotient interval on the float64 grid, or None (generic path)."""
    arrs = [flat_f64(t, shape) for t in (alo, ahi, blo, bhi)]
    lo = np.empty(arrs[0].size)
    hi = np.empty(arrs[0].size)
    if not div_kernel(*arrs, lo, hi):
        return None
    return lo.reshape(shape), hi.reshape(shape)


def sum_f64(lo2, hi2):
    """(lo, hi) of the sequential outward-rounded sums over the last axis, or None: the one
    compiled sequential-sum loop (:func:`scalars.kernels.grid.sum_grid`) on the float64
    grid."""
    from ..formats import binary64
    return GK.sum_grid(lo2, hi2, binary64)


@numba.njit(cache=True, error_model="numpy", inline="always")
def _root(x, up):
    """RU(sqrt x) if up else RD(sqrt x) for 0 <= x <= 2^900 finite (residual x - s*s by
    TwoProduct gives the sign of sqrt(x) - s)."""
    s = np.sqrt(x)
    ph, pl = two_prod(s, s)
    d = (x - ph) - pl
    bi = f2i(s)
    if up:
        return i2f(np.int64(1) if (bi << 1) == 0 else bi + 1) if d > 0.0 else s
    return i2f(bi - 1) if ((d < 0.0) & (s > 0.0)) else s


@numba.njit(cache=True, error_model="numpy")
def sqrt_kernel(alo, ahi, lo, hi):
    """[RD sqrt(alo), RU sqrt(ahi)] for 0 <= alo <= ahi; False (generic path) when an end
    is negative, NaN, inf or outside [2^-900, 2^900] (and not 0)."""
    good = True
    for i in range(lo.size):
        a, b = alo[i], ahi[i]
        good = good & GK.sqrt_ends_safe(a, b)
        lo[i] = _root(a, False)
        hi[i] = _root(b, True)
    return good


def sqrt_f64(alo, ahi):
    """(lo, hi) of the square-root interval on the float64 grid, or None."""
    a = np.asarray(alo, dtype=np.float64)
    L = flat_f64(a)
    H = flat_f64(ahi, a.shape)
    lo = np.empty(L.size)
    hi = np.empty(L.size)
    if not sqrt_kernel(L, H, lo, hi):
        return None
    return lo.reshape(a.shape), hi.reshape(a.shape)
