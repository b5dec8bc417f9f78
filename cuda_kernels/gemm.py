"""Shared-memory tiled binary32 GEMM ``C = A @ B (+ bias)`` with a fixed accumulation order.

Each thread owns TM x TN entries of C (a strided micro-tile) and accumulates every output sequentially in k
(k = 0, 1, ..., K-1 across all K tiles), so an output is exactly the left-to-right dot
product of the binary32 reference context:

* ``fma=False``: ``acc = add_rn(acc, mul_rn(a, b))`` - product rounded, then sum rounded
  (the ``binary32`` context's ``matmul``);
* ``fma=True``:  ``acc = fma_rn(a, b, acc)`` - one rounding per step (``binary32+fma``).

The accumulator starts at +0.0, as the reference's sums do (so an all-(-0) dot product is
+0 in both), and can never become -0 afterwards (x + y is -0 in round-to-nearest only when
both are -0); hence the zero-filled tail of the last k tile adds +0 * +0 = +0, an exact
no-op, and the k loop keeps a constant trip count (fully unrolled by the compiler).  The bias is added once at the end with one rounding, as the op table's
``linear`` forward does (``add(matmul(x, W^T), b)``).
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda

from .roundops import add_rn, fma_rn, mul_rn

# Production tiling for large matrices (128x128 block tile, 8 deep, 16x16 threads each
# owning 8x8 outputs) and a small tiling that the simulator can afford to run.
LARGE = dict(BM=128, BN=128, BK=8, TM=8, TN=8)
SMALL = dict(BM=8, BN=8, BK=4, TM=2, TN=2)

_CACHE: dict = {}


def make_gemm(BM, BN, BK, TM, TN, fma):
    """Compile-time constants are closed over, so every tiling is its own kernel."""
    TY = BM // TM           # thread rows
    TX = BN // TN           # thread cols
    NT = TX * TY            # threads per block
    A_LOADS = (BM * BK + NT - 1) // NT
    B_LOADS = (BK * BN + NT - 1) // NT

    @cuda.jit
    def gemm(A, B, bias, has_bias, C):
        M = A.shape[0]
        K = A.shape[1]
        N = B.shape[1]
        As = cuda.shared.array((BK, BM), dtype=np.float32)
        Bs = cuda.shared.array((BK, BN), dtype=np.float32)
        acc = cuda.local.array((TM, TN), dtype=np.float32)
        areg = cuda.local.array(TM, dtype=np.float32)
        breg = cuda.local.array(TN, dtype=np.float32)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        tid = ty * TX + tx
        row0 = cuda.blockIdx.y * BM
        col0 = cuda.blockIdx.x * BN
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = np.float32(0.0)
        for k0 in range(0, K, BK):
            # cooperative, zero-filled tile loads (A tile stored transposed: As[k, m]); the A
            # and B loads are twins over different shared arrays and index orders, written
            # out because local/shared array shapes must be compile-time constants here
            for l in range(A_LOADS):
                idx = tid + l * NT
                if idx < BM * BK:
                    m = idx // BK
                    kk = idx % BK
                    gm = row0 + m
                    gk = k0 + kk
                    v = np.float32(0.0)
                    if gm < M and gk < K:
                        v = A[gm, gk]
                    As[kk, m] = v
            for l in range(B_LOADS):
                idx = tid + l * NT
                if idx < BK * BN:
                    kk = idx // BN
                    n = idx % BN
                    gk = k0 + kk
                    gn = col0 + n
                    v = np.float32(0.0)
                    if gk < K and gn < N:
                        v = B[gk, gn]
                    Bs[kk, n] = v
            cuda.syncthreads()
            for kk in range(BK):
                # strided micro-tile (rows ty + i*TY, cols tx + j*TX): consecutive threads
                # read consecutive shared-memory words (no bank conflicts) and write
                # consecutive columns of C (coalesced)
                for i in range(TM):
                    areg[i] = As[kk, ty + i * TY]
                for j in range(TN):
                    breg[j] = Bs[kk, tx + j * TX]
                for i in range(TM):
                    for j in range(TN):
                        if fma:
                            acc[i, j] = fma_rn(areg[i], breg[j], acc[i, j])
                        else:
                            acc[i, j] = add_rn(acc[i, j], mul_rn(areg[i], breg[j]))
            cuda.syncthreads()
        for i in range(TM):
            gm = row0 + ty + i * TY
            if gm < M:
                for j in range(TN):
                    gn = col0 + tx + j * TX
                    if gn < N:
                        v = acc[i, j]
                        if has_bias:
                            v = add_rn(v, bias[gn])
                        C[gm, gn] = v

    return gemm


def get_gemm(tiling: dict, fma: bool):
    key = (tuple(sorted(tiling.items())), bool(fma))
    if key not in _CACHE:
        _CACHE[key] = make_gemm(fma=bool(fma), **tiling)
    return _CACHE[key]


def launch_gemm(A, B, bias, C, *, fma: bool, tiling: dict):
    """Launch on device (or simulator) arrays: A [M,K], B [K,N], bias [N] or None, C [M,N]."""
    M, N = C.shape
    if M == 0 or N == 0:
        return C
    kern = get_gemm(tiling, fma)
    grid = (math.ceil(N / tiling["BN"]), math.ceil(M / tiling["BM"]))
    block = (tiling["BN"] // tiling["TN"], tiling["BM"] // tiling["TM"])
    has_bias = bias is not None
    if bias is None:
        bias = cuda.device_array(1, dtype=np.float32)
    kern[grid, block](A, B, bias, has_bias, C)
    return C
