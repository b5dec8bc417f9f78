"""Row-wise binary32 kernels: softmax and layernorm over the last (flattened) axis.

One thread per row, sequential loops, so every sum has the reference (left to right)
order and every step is the op table's formula with one binary32 rounding:

* softmax:   m = max(x); e = exp(x - m); s = sum(e); y = e / s
  (exp from the device math library: not correctly rounded, see ``elementwise``);
* layernorm: mu = sum(x) / n; d = x - mu; var = sum(d * d) / n;
  inv = 1 / sqrt(var + eps); y = (d * inv) * gamma + beta
  (only + - * / sqrt: bit-identical to the binary32 context).

Products go through ``mul_rn`` and sums through ``add_rn`` so the compiler cannot fuse
``d * d + acc`` or ``xhat * gamma + beta`` into an fma; ``/`` and ``math.sqrt`` compile
to ``div.rn.f32`` / ``sqrt.rn.f32`` (IEEE, since fastmath is off).
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda

from .roundops import add_rn, mul_rn


@cuda.jit
def softmax_rows(x, out):
    r = cuda.grid(1)
    if r >= x.shape[0]:
        return
    n = x.shape[1]
    m = x[r, 0]
    for i in range(1, n):
        v = x[r, i]
        if v > m or v != v:     # NaN wins, as in the reference amax
            m = v
    s = np.float32(0.0)
    for i in range(n):
        e = np.float32(math.exp(add_rn(x[r, i], -m)))
        out[r, i] = e
        s = add_rn(s, e)
    for i in range(n):
        out[r, i] = out[r, i] / s


@cuda.jit
def layernorm_rows(x, gamma, beta, eps, out):
    r = cuda.grid(1)
    if r >= x.shape[0]:
        return
    n = x.shape[1]
    nf = np.float32(n)
    s = np.float32(0.0)
    for i in range(n):
        s = add_rn(s, x[r, i])
    mu = s / nf
    q = np.float32(0.0)
    for i in range(n):
        d = add_rn(x[r, i], -mu)
        q = add_rn(q, mul_rn(d, d))
    var = q / nf
    inv = np.float32(1.0) / np.float32(math.sqrt(add_rn(var, eps[0])))
    for i in range(n):
        d = add_rn(x[r, i], -mu)
        out[r, i] = add_rn(mul_rn(mul_rn(d, inv), gamma[i]), beta[i])
