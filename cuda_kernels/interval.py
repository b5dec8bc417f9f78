"""Interval kernels over binary32 endpoints: add, relu, tanh, linear.

Directed rounding is done portably, without rounding-mode instructions or libdevice
(whose simulator stubs return None):

* add: TwoSum in float64 of the two binary32 endpoints gives the exact sum as s + e, and
  ``down32``/``up32`` round that pair outward to binary32 exactly (the result is the
  largest binary32 <= the exact sum, or the smallest >=), see :func:`_rd_pair`.
* linear: every endpoint product of two binary32 numbers is exact in float64 (48
  significant bits, exponents far inside float64's range); products are accumulated in
  float64 rounding each addition toward -inf (lower) / +inf (upper) via TwoSum and one
  float64 next-down/next-up step, then the float64 bounds are rounded outward to binary32.
  Each bound is therefore a true bound, and at most one binary32 ulp looser than the exact
  one (float64 rounding errors are far below a binary32 ulp).  Within NVVM a float64
  product may be fused into the following addition; that changes nothing because the
  product is exact.
* tanh: monotone, so [tanh lo, tanh hi].  The endpoint function is the float64 device
  ``tanh`` (libdevice ``__nv_tanh``, <= 2 ulp of float64 per NVIDIA; correctly rounded
  glibc in the simulator); the value is widened by the documented bound
  ``TANH_REL_WIDEN`` = 2^-44 relative (thousands of float64 ulps, still 2^-21 of a binary32
  ulp), rounded outward to binary32 and clipped to [-1, 1].
* relu: exact, [max(lo, 0), max(hi, 0)].

NaN in an endpoint becomes the whole line ([-inf, +inf]), never a narrow box; an endpoint
product 0 * inf is taken as 0 (the interval-arithmetic convention).
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda

from .roundops import add_down64, add_up64, down32, next_down32, next_up32, two_sum_err, up32

TANH_REL_WIDEN = 2.0 ** -44
_TW = np.float64(TANH_REL_WIDEN)
_NEG_INF32 = np.float32(-np.inf)
_POS_INF32 = np.float32(np.inf)
_NEG_INF64 = np.float64(-np.inf)
_POS_INF64 = np.float64(np.inf)


@cuda.jit(device=True)
def _rd_pair(s, e):
    """binary32 round-down of the exact s + e (s = fl64 sum, e its TwoSum error)."""
    r = np.float32(s)
    rs = np.float64(r)
    if rs > s or (rs == s and e < 0):
        r = next_down32(r)
    return r


@cuda.jit(device=True)
def _ru_pair(s, e):
    r = np.float32(s)
    rs = np.float64(r)
    if rs < s or (rs == s and e > 0):
        r = next_up32(r)
    return r


@cuda.jit(device=True)
def _lo_clean(v):
    return _NEG_INF32 if v != v else v


@cuda.jit(device=True)
def _hi_clean(v):
    return _POS_INF32 if v != v else v


@cuda.jit
def iadd_kernel(alo, ahi, blo, bhi, olo, ohi):
    start = cuda.grid(1)
    step = cuda.gridsize(1)
    for i in range(start, olo.size, step):
        a = np.float64(_lo_clean(alo[i]))
        b = np.float64(_lo_clean(blo[i]))
        s = a + b
        e = two_sum_err(a, s, b)
        lo = _rd_pair(s, e)
        a = np.float64(_hi_clean(ahi[i]))
        b = np.float64(_hi_clean(bhi[i]))
        s = a + b
        e = two_sum_err(a, s, b)
        hi = _ru_pair(s, e)
        # -inf + +inf inside one endpoint is NaN: widen to the whole line
        olo[i] = _lo_clean(lo)
        ohi[i] = _hi_clean(hi)


@cuda.jit
def irelu_kernel(alo, ahi, olo, ohi):
    start = cuda.grid(1)
    step = cuda.gridsize(1)
    for i in range(start, olo.size, step):
        lo = _lo_clean(alo[i])
        hi = _hi_clean(ahi[i])
        olo[i] = lo if lo > 0 else np.float32(0.0)
        ohi[i] = hi if hi > 0 else np.float32(0.0)


@cuda.jit(device=True)
def _tanh_down(x):
    t = math.tanh(np.float64(x))
    w = abs(t) * _TW      # relative: |tanh x| >= ~2^-149 for any binary32 x != 0
    v = down32(t - w)
    return v if v > np.float32(-1.0) else np.float32(-1.0)


@cuda.jit(device=True)
def _tanh_up(x):
    t = math.tanh(np.float64(x))
    w = abs(t) * _TW      # relative: |tanh x| >= ~2^-149 for any binary32 x != 0
    v = up32(t + w)
    return v if v < np.float32(1.0) else np.float32(1.0)


@cuda.jit
def itanh_kernel(alo, ahi, olo, ohi):
    start = cuda.grid(1)
    step = cuda.gridsize(1)
    for i in range(start, olo.size, step):
        olo[i] = _tanh_down(_lo_clean(alo[i]))
        ohi[i] = _tanh_up(_hi_clean(ahi[i]))


@cuda.jit(device=True)
def _pmul(a, b):
    """Exact float64 product of two binary32 endpoints; 0 * inf -> 0."""
    if a == 0 or b == 0:
        return np.float64(0.0)
    return np.float64(a) * np.float64(b)


_CACHE: dict = {}


def make_ilinear(TILE):
    """y[m, n] = sum_k x[m, k] * W[n, k] + b[n] over intervals; one thread per output,
    TILE x TILE shared-memory tiles of the four endpoint arrays (x lo/hi, W^T lo/hi)."""

    @cuda.jit
    def ilinear(xlo, xhi, wlo, whi, blo, bhi, olo, ohi):
        M = xlo.shape[0]
        K = xlo.shape[1]
        N = wlo.shape[1]                  # W is passed transposed: [K, N]
        sxl = cuda.shared.array((TILE, TILE), dtype=np.float32)
        sxh = cuda.shared.array((TILE, TILE), dtype=np.float32)
        swl = cuda.shared.array((TILE, TILE), dtype=np.float32)
        swh = cuda.shared.array((TILE, TILE), dtype=np.float32)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        m = cuda.blockIdx.y * TILE + ty
        n = cuda.blockIdx.x * TILE + tx
        lo = np.float64(-0.0)
        hi = np.float64(-0.0)
        for k0 in range(0, K, TILE):
            # the x and W^T tile loads are twins (other shared arrays, other bounds), written
            # out: a device helper taking four shared arrays would not make this shorter
            k = k0 + tx
            if m < M and k < K:
                sxl[ty, tx] = _lo_clean(xlo[m, k])
                sxh[ty, tx] = _hi_clean(xhi[m, k])
            else:
                sxl[ty, tx] = np.float32(0.0)
                sxh[ty, tx] = np.float32(0.0)
            k = k0 + ty
            if k < K and n < N:
                swl[ty, tx] = _lo_clean(wlo[k, n])
                swh[ty, tx] = _hi_clean(whi[k, n])
            else:
                swl[ty, tx] = np.float32(0.0)
                swh[ty, tx] = np.float32(0.0)
            cuda.syncthreads()
            for kk in range(TILE):
                a0 = sxl[ty, kk]
                a1 = sxh[ty, kk]
                w0 = swl[kk, tx]
                w1 = swh[kk, tx]
                p00 = _pmul(a0, w0)
                p01 = _pmul(a0, w1)
                p10 = _pmul(a1, w0)
                p11 = _pmul(a1, w1)
                pl = min(min(p00, p01), min(p10, p11))
                ph = max(max(p00, p01), max(p10, p11))
                lo = add_down64(lo, pl)
                hi = add_up64(hi, ph)
            cuda.syncthreads()
        if m < M and n < N:
            lo = add_down64(lo, np.float64(_lo_clean(blo[n])))
            hi = add_up64(hi, np.float64(_hi_clean(bhi[n])))
            # -inf + inf (or NaN) anywhere means no information: the whole line
            olo[m, n] = _NEG_INF32 if lo != lo else down32(lo)
            ohi[m, n] = _POS_INF32 if hi != hi else up32(hi)

    return ilinear


def get_ilinear(TILE: int):
    if TILE not in _CACHE:
        _CACHE[TILE] = make_ilinear(TILE)
    return _CACHE[TILE]
