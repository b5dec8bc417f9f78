"""Host-side launchers: float32 numpy arrays in, float32 numpy arrays out.

Each function copies its operands to the device (or the simulator), launches one kernel
and copies the result back.  Shapes are prepared here (broadcasting, moving the reduced
axis last, transposing W) so every kernel sees contiguous 1-d or 2-d arrays.
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda

from . import elementwise, gemm, interval, reduce, rowwise
from .orders import TREE_WIDTH
from .roundops import SIMULATED

# Tilings do not change results (every output is accumulated sequentially in k); the
# simulator gets the small ones because it runs each thread in Python.
GEMM_TILING = gemm.SMALL if SIMULATED else gemm.LARGE
ILINEAR_TILE = 4 if SIMULATED else 16


def _f32(a) -> np.ndarray:
    # not np.ascontiguousarray: it turns a 0-d array into shape (1,)
    return np.array(a, dtype=np.float32, order="C")


def _launch_1d(kern, n, *arrays):
    threads = max(1, min(elementwise.THREADS, n))
    kern[elementwise.grid_for(n, threads), threads](*arrays)


def linear(x2, Wt, b, *, fma: bool, tiling=None) -> np.ndarray:
    """``x2 @ Wt + b`` with x2 [M, K], Wt [K, N] (= W^T), b [N] or None."""
    x2, Wt = _f32(x2), _f32(Wt)
    M, K = x2.shape
    N = Wt.shape[1]
    out = cuda.device_array((M, N), dtype=np.float32)
    if M and N:
        bias = cuda.to_device(_f32(b)) if b is not None else None
        gemm.launch_gemm(cuda.to_device(x2), cuda.to_device(Wt), bias, out, fma=fma,
                         tiling=tiling or GEMM_TILING)
    return out.copy_to_host()


def binary(op: str, a, b) -> np.ndarray:
    a, b = np.broadcast_arrays(_f32(a), _f32(b))
    shape = a.shape
    a, b = _f32(a).reshape(-1), _f32(b).reshape(-1)
    out = cuda.device_array(a.size, dtype=np.float32)
    if a.size:
        _launch_1d(elementwise.BINARY[op], a.size, cuda.to_device(a), cuda.to_device(b), out)
    return out.copy_to_host().reshape(shape)


def unary(op: str, a) -> np.ndarray:
    a = _f32(a)
    shape = a.shape
    flat = a.reshape(-1)
    out = cuda.device_array(flat.size, dtype=np.float32)
    if flat.size:
        _launch_1d(elementwise.UNARY[op], flat.size, cuda.to_device(flat), out)
    return out.copy_to_host().reshape(shape)


def row_sum(x2, width: int = TREE_WIDTH) -> np.ndarray:
    """Tree-order sums of the rows of x2 [R, n] (see :mod:`cuda_kernels.reduce`)."""
    x2 = _f32(x2)
    R = x2.shape[0]
    out = cuda.device_array(R, dtype=np.float32)
    if R:
        if x2.shape[1] == 0:
            return np.zeros(R, dtype=np.float32)
        reduce.get_row_sum(width)[R, width](cuda.to_device(x2), out)
    return out.copy_to_host()


def row_mse(p2, t2, width: int = TREE_WIDTH) -> np.ndarray:
    """Mean squared error of the rows of p2, t2 [R, n]: squares summed in tree order
    (see :mod:`cuda_kernels.reduce`), then one division by n."""
    p2, t2 = _f32(p2), _f32(t2)
    R, n = p2.shape
    if n == 0:
        # the reference's empty sum is +0 and 0/0 is NaN; nothing to launch
        return np.full(R, np.nan, dtype=np.float32)
    out = cuda.device_array(R, dtype=np.float32)
    if R:
        # n rounded to binary32 once (nearest-even), as the reference's convert(n)
        reduce.get_row_mse(width)[R, width](cuda.to_device(p2), cuda.to_device(t2),
                                            np.float32(n), out)
    return out.copy_to_host()


def _rows_launch(kern, R, *arrays):
    threads = max(1, min(128, R))
    kern[math.ceil(R / threads), threads](*arrays)


def softmax_rows(x2) -> np.ndarray:
    x2 = _f32(x2)
    out = cuda.device_array(x2.shape, dtype=np.float32)
    if x2.size:
        _rows_launch(rowwise.softmax_rows, x2.shape[0], cuda.to_device(x2), out)
    return out.copy_to_host()


def layernorm_rows(x2, gamma, beta, eps) -> np.ndarray:
    x2 = _f32(x2)
    out = cuda.device_array(x2.shape, dtype=np.float32)
    if x2.size:
        _rows_launch(rowwise.layernorm_rows, x2.shape[0], cuda.to_device(x2),
                     cuda.to_device(_f32(gamma).reshape(-1)), cuda.to_device(_f32(beta).reshape(-1)),
                     cuda.to_device(_f32(eps).reshape(1)), out)
    return out.copy_to_host()


# ------------------------------------------------------------------------ intervals
def interval_binary(op: str, alo, ahi, blo, bhi):
    if op != "add":
        raise ValueError(f"no interval kernel for {op}")
    alo, ahi, blo, bhi = np.broadcast_arrays(_f32(alo), _f32(ahi), _f32(blo), _f32(bhi))
    shape = alo.shape
    flat = [cuda.to_device(_f32(v).reshape(-1)) for v in (alo, ahi, blo, bhi)]
    n = int(np.prod(shape))
    olo = cuda.device_array(n, dtype=np.float32)
    ohi = cuda.device_array(n, dtype=np.float32)
    if n:
        _launch_1d(interval.iadd_kernel, n, *flat, olo, ohi)
    return olo.copy_to_host().reshape(shape), ohi.copy_to_host().reshape(shape)


def interval_unary(op: str, lo, hi):
    kern = {"relu": interval.irelu_kernel, "tanh": interval.itanh_kernel}[op]
    lo, hi = _f32(lo), _f32(hi)
    shape = lo.shape
    n = lo.size
    olo = cuda.device_array(n, dtype=np.float32)
    ohi = cuda.device_array(n, dtype=np.float32)
    if n:
        _launch_1d(kern, n, cuda.to_device(lo.reshape(-1)), cuda.to_device(hi.reshape(-1)),
                   olo, ohi)
    return olo.copy_to_host().reshape(shape), ohi.copy_to_host().reshape(shape)


def interval_linear(xlo, xhi, Wtlo, Wthi, blo, bhi, tile=None):
    """Enclosure of ``x @ Wt + b`` for x in [xlo, xhi] [M, K], Wt in [Wtlo, Wthi] [K, N]."""
    tile = tile or ILINEAR_TILE
    xlo, xhi = _f32(xlo), _f32(xhi)
    M, K = xlo.shape
    N = Wtlo.shape[1]
    olo = cuda.device_array((M, N), dtype=np.float32)
    ohi = cuda.device_array((M, N), dtype=np.float32)
    if M and N:
        grid = (math.ceil(N / tile), math.ceil(M / tile))
        interval.get_ilinear(tile)[grid, (tile, tile)](
            cuda.to_device(xlo), cuda.to_device(xhi), cuda.to_device(_f32(Wtlo)),
            cuda.to_device(_f32(Wthi)), cuda.to_device(_f32(blo)), cuda.to_device(_f32(bhi)),
            olo, ohi)
    return olo.copy_to_host(), ohi.copy_to_host()
