"""Elementwise binary32 kernels: add, sub, mul, div, neg, relu (exact: bit-identical to the
binary32 context, one IEEE rounding each, none for neg and relu) and exp, tanh, sigmoid (the device math library: NOT correctly rounded).

On a GPU ``math.exp`` / ``math.tanh`` on float32 lower to libdevice ``__nv_expf`` /
``__nv_tanhf``, documented by NVIDIA with a maximum error of 2 ulp; sigmoid is computed
as ``1 / (1 + expf(-x))`` (``e / (1 + e)``, ``e = expf(x)`` for x < 0) with two more
binary32 roundings.  The binary32 reference context
rounds these functions correctly, so the provider reports ULP gaps for them
(:data:`ULP_BOUND`) instead of claiming bit identity.  In the simulator ``math.exp`` runs
in double precision and the result is rounded once to binary32, so the simulator shows
(almost always) zero gap: it cannot reproduce the GPU's gap, only bound-check it.

All kernels walk a flat array with a grid-stride loop (one launch for any size).
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda

from .roundops import add_rn, div_rn, mul_rn, sub_rn

# Documented worst-case gap to the correctly rounded binary32 result, in ulps, on hardware
# (CUDA C Programming Guide, single-precision table; sigmoid adds the rounding of 1 + e and
# of the division to expf's 2 ulp).  Tests assert these bounds in both modes.
ULP_BOUND = {"exp": 2, "tanh": 2, "sigmoid": 4}


def softmax_ulp_bound(n: int) -> int:
    """Gap bound of a softmax row of n entries: expf's 2 ulp in the numerator, the same
    perturbation of the sum (relative), one rounding of the division and up to n/2 ulp
    from partial sums that round differently than the reference's."""
    return 2 * ULP_BOUND["exp"] + 1 + n // 2

THREADS = 256
MAX_BLOCKS = 8192

# One grid-stride kernel per op (twins): a CUDA kernel cannot take the device function
# as an argument, and a closure factory would compile per call site.

@cuda.jit
def add_kernel(a, b, out):
    start = cuda.grid(1)
    step = cuda.gridsize(1)
    for i in range(start, out.size, step):
        out[i] = add_rn(a[i], b[i])


@cuda.jit
def mul_kernel(a, b, out):
    start = cuda.grid(1)
    step = cuda.gridsize(1)
    for i in range(start, out.size, step):
        out[i] = mul_rn(a[i], b[i])


@cuda.jit
def sub_kernel(a, b, out):
    start = cuda.grid(1)
    step = cuda.gridsize(1)
    for i in range(start, out.size, step):
        out[i] = sub_rn(a[i], b[i])


@cuda.jit
def div_kernel(a, b, out):
    start = cuda.grid(1)
    step = cuda.gridsize(1)
    for i in range(start, out.size, step):
        # div.rn.f32 on hardware: the correctly rounded quotient, as the reference's;
        # x/0 is +-inf and 0/0 NaN there too (IEEE results, not errors, in both)
        out[i] = div_rn(a[i], b[i])


@cuda.jit
def neg_kernel(a, out):
    start = cuda.grid(1)
    step = cuda.gridsize(1)
    for i in range(start, out.size, step):
        # a sign flip, no rounding: -(+0) is -0, as numpy.negative in the reference
        out[i] = -a[i]


@cuda.jit
def relu_kernel(a, out):
    start = cuda.grid(1)
    step = cuda.gridsize(1)
    for i in range(start, out.size, step):
        x = a[i]
        # NaN propagates (x != x), as in the reference maximum(x, 0)
        if x > 0 or x != x:
            out[i] = x
        else:
            out[i] = np.float32(0.0)


@cuda.jit
def exp_kernel(a, out):
    start = cuda.grid(1)
    step = cuda.gridsize(1)
    for i in range(start, out.size, step):
        out[i] = np.float32(math.exp(a[i]))


@cuda.jit
def tanh_kernel(a, out):
    start = cuda.grid(1)
    step = cuda.gridsize(1)
    for i in range(start, out.size, step):
        out[i] = np.float32(math.tanh(a[i]))


@cuda.jit
def sigmoid_kernel(a, out):
    start = cuda.grid(1)
    step = cuda.gridsize(1)
    for i in range(start, out.size, step):
        x = a[i]
        # two forms so that neither overflows: for x < 0, e^x / (1 + e^x) keeps the
        # subnormal tail (x in (-103.3, -88.7)) that 1 / (1 + e^-x) would flush to 0
        if x < 0:
            e = np.float32(math.exp(x))
            out[i] = e / add_rn(np.float32(1.0), e)
        else:
            e = np.float32(math.exp(-x))
            out[i] = np.float32(1.0) / add_rn(np.float32(1.0), e)


@cuda.jit
def copy_kernel(a, out):
    """Plain copy: the bandwidth yardstick of the benchmarks."""
    start = cuda.grid(1)
    step = cuda.gridsize(1)
    for i in range(start, out.size, step):
        out[i] = a[i]


UNARY = {"relu": relu_kernel, "neg": neg_kernel, "exp": exp_kernel, "tanh": tanh_kernel,
         "sigmoid": sigmoid_kernel, "copy": copy_kernel}
BINARY = {"add": add_kernel, "sub": sub_kernel, "mul": mul_kernel, "div": div_kernel}


def grid_for(n: int, threads: int = THREADS) -> int:
    return max(1, min(MAX_BLOCKS, (n + threads - 1) // threads))
