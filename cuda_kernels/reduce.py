"""Row sums in binary32 in a fixed TREE order, and the same order emulated in numpy;
the mean squared error of rows, which sums its squares in that same order.

The order (``tree(T)``, T = threads per block, a power of two) for one row of n values:

1. thread t adds x[t], x[t+T], x[t+2T], ... left to right, starting from +0.0 like the
   reference's sums (an empty thread contributes +0, which changes no partial sum: a
   sum that starts at +0 is never -0);
2. the T partial sums are combined by halving: s[t] += s[t + h] for h = T/2, T/4, ..., 1.

Every addition is one binary32 rounding.  This is not the reference (sequential) order,
so ``reduce_sum`` results differ from the binary32 context by a few ulps; the provider
reports the order as ``tree(T)`` and :func:`tree_sum_emulated` reproduces it bit for bit
on the CPU, which is what the tests compare against.

``row_mse`` computes ``((p - t) * (p - t))`` per entry (two roundings, exactly the
reference's ``square(sub(p, t))``), sums those squares in ``tree(T)`` order and divides
by n once (one rounding, as the reference's ``div(sum, n)``): only the order of the sum
differs from the binary32 context, and for n <= 2 not even that.
"""
from __future__ import annotations

import numpy as np
from numba import cuda

from .roundops import add_rn, div_rn, mul_rn, sub_rn

_CACHE: dict = {}


@cuda.jit(device=True)
def _combine_tree(s, t, T):
    """Step 2 of the order, run by every thread t of the block: the T partial sums in
    shared ``s`` combined by halving, s[t] += s[t + h] for h = T/2, ..., 1; s[0] holds
    the row's sum afterwards."""
    cuda.syncthreads()
    h = T // 2
    while h > 0:
        if t < h:
            s[t] = add_rn(s[t], s[t + h])
        cuda.syncthreads()
        h //= 2


def make_row_sum(T):
    if T & (T - 1) or T < 1:
        raise ValueError(f"tree width must be a power of two, got {T}")

    @cuda.jit
    def row_sum(x, out):
        row = cuda.blockIdx.x
        t = cuda.threadIdx.x
        n = x.shape[1]
        s = cuda.shared.array(T, dtype=np.float32)
        acc = np.float32(0.0)
        for i in range(t, n, T):
            acc = add_rn(acc, x[row, i])
        s[t] = acc
        _combine_tree(s, t, T)
        if t == 0:
            out[row] = s[0]

    return row_sum


def make_row_mse(T):
    if T & (T - 1) or T < 1:
        raise ValueError(f"tree width must be a power of two, got {T}")

    @cuda.jit
    def row_mse(p, t, n_f32, out):
        row = cuda.blockIdx.x
        j = cuda.threadIdx.x
        n = p.shape[1]
        s = cuda.shared.array(T, dtype=np.float32)
        acc = np.float32(0.0)     # squares are >= +0: starting at +0 changes no sum
        for i in range(j, n, T):
            d = sub_rn(p[row, i], t[row, i])
            acc = add_rn(acc, mul_rn(d, d))
        s[j] = acc
        _combine_tree(s, j, T)
        if j == 0:
            out[row] = div_rn(s[0], n_f32)

    return row_mse


def get_row_sum(T: int):
    if ("sum", T) not in _CACHE:
        _CACHE[("sum", T)] = make_row_sum(T)
    return _CACHE[("sum", T)]


def get_row_mse(T: int):
    if ("mse", T) not in _CACHE:
        _CACHE[("mse", T)] = make_row_mse(T)
    return _CACHE[("mse", T)]


def tree_sum_emulated(x2: np.ndarray, T: int) -> np.ndarray:
    """Row sums of a float32 [R, n] array in the ``tree(T)`` order (numpy, vectorised)."""
    x2 = np.asarray(x2, dtype=np.float32)
    R, n = x2.shape
    chunks = max(1, -(-n // T))
    pad = np.zeros((R, chunks * T), dtype=np.float32)
    pad[:, :n] = x2
    pad = pad.reshape(R, chunks, T)
    acc = np.zeros((R, T), dtype=np.float32)
    for c in range(chunks):             # step 1: strided sequential sums (float32 adds)
        acc = acc + pad[:, c, :]
    w = T
    while w > 1:                        # step 2: halving tree
        h = w // 2
        acc = acc[:, :h] + acc[:, h:w]
        w = h
    return acc[:, 0]
