"""The blocked hardware binary32 dot products (scalars.kernels.binary32_matmul) give the bits of the
emulated sequential order (scalars.kernels.binary_format.matmul_sequential, FAST path: float64 and
one rounding per product and per addition, or per multiply-add when fused), for every
shape class (edge rows/columns, K = 0 and 1, batches) and for operands with subnormals,
overflow, infinities and NaN."""
from __future__ import annotations

import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.scalars.kernels import binary32_matmul as BM
from scalarlab.scalars.kernels import binary32_pairwise as PW
from scalarlab.scalars.kernels import binary_format as K
from scalarlab.scalars import formats
from scalarlab.scalars.errors import ContextError

SPEC = formats.binary32.spec


def emulated(fused, A, B, pairwise=False):
    nb, M, _ = A.shape
    out = np.empty((nb, M, B.shape[2]))
    unsafe = np.zeros(out.shape, dtype=np.uint8)
    if pairwise:
        K.matmul_pairwise(K.FAST, A, B, out, unsafe, SPEC)
    else:
        K.matmul_sequential(K.FAST, fused, A, B, out, unsafe, SPEC)
    assert not unsafe.any()
    return out


def b32(x):
    return formats.round_to_format(x, "binary32")


def same_bits(got, want):
    g = np.asarray(got, dtype=np.float64).view(np.int64)
    w = np.asarray(want, dtype=np.float64).view(np.int64)
    nan = np.isnan(np.asarray(got)) & np.isnan(np.asarray(want))
    bad = np.flatnonzero((g != w).ravel() & ~nan.ravel())
    assert bad.size == 0, f"{bad.size} entries differ, first at flat index {bad[0]}"


SHAPES = [(1, 1, 1, 1), (1, 7, 5, 19), (2, 13, 1, 33), (1, 8, 16, 16), (3, 9, 40, 17),
          (1, 17, 300, 50), (1, 1, 64, 10), (2, 0, 3, 5), (1, 4, 0, 3)]


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_blocked_kernel_matches_the_emulated_order(fused, shape):
    nb, M, Kd, N = shape
    rng = np.random.default_rng(M * 1000 + Kd * 10 + N)
    # Wide magnitudes: products and partial sums round at every step, some underflow to
    # subnormals, cancellation happens.
    A = b32(rng.standard_normal((nb, M, Kd)) * 10.0 ** rng.uniform(-20, 20, (nb, M, Kd)))
    B = b32(rng.standard_normal((nb, Kd, N)) * 10.0 ** rng.uniform(-20, 20, (nb, Kd, N)))
    out = np.empty((nb, M, N), dtype=np.float32)   # binary32 storage
    BM.matmul32(fused, A.astype(np.float32), B.astype(np.float32), out, False)
    want = emulated(fused, A, B)
    same_bits(out, want)
    BT = np.ascontiguousarray(np.swapaxes(B, 1, 2)).astype(np.float32)
    BM.matmul32(fused, A.astype(np.float32), BT, out, True)      # B given transposed
    same_bits(out, want)
    if not fused:
        PW.matmul32_pairwise(A.astype(np.float32), B.astype(np.float32), out, False)
        same_bits(out, emulated(False, A, B, pairwise=True))


@pytest.mark.parametrize("fused", [False, True])
def test_special_values_and_the_order_matters(fused):
    f = formats.binary32
    rng = np.random.default_rng(4)
    vals = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, f.max_finite, -f.max_finite,
                     2.0 ** -149, -2.0 ** -149, 2.0 ** -126, 1.0, -1.0, 2.0 ** 100, 3.0])
    A = rng.choice(vals, (2, 11, 23))
    B = rng.choice(vals, (2, 23, 21))
    out = np.empty((2, 11, 21), dtype=np.float32)
    BM.matmul32(fused, A.astype(np.float32), B.astype(np.float32), out, False)
    same_bits(out, emulated(fused, A, B))
    PW.matmul32_pairwise(A.astype(np.float32), B.astype(np.float32), out, False)
    same_bits(out, emulated(False, A, B, pairwise=True))
    # (2^24 + 1 + 1) in order is 2^24 (each +1 ties to even), not 2^24 + 2: order kept
    a = np.array([[[2.0 ** 24, 1.0, 1.0]]])
    o = np.empty((1, 1, 1), dtype=np.float32)
    BM.matmul32(fused, a.astype(np.float32), np.ones((1, 3, 1), np.float32), o, False)
    assert float(o[0, 0, 0]) == 2.0 ** 24


def test_context_matmul_uses_it_and_keeps_checks():
    ctx = scalars.get("binary32")
    rng = np.random.default_rng(9)
    a = b32(rng.standard_normal((5, 37, 29)))
    b = b32(rng.standard_normal((29, 18)))
    got = ctx.matmul(a, b)
    want = emulated(False, a, np.broadcast_to(b, (5, 29, 18)).copy())
    same_bits(got, want)
    wt = np.ascontiguousarray(b.T)                      # x @ W.T, W read in place
    same_bits(ctx.matmul(a, wt.T), want)
    # float32 storage in, float32 out: the same bits, a transposed weight read in place
    a32, wt32 = a.astype(np.float32), wt.astype(np.float32)
    for got32 in (ctx.matmul(a32, b.astype(np.float32)), ctx.matmul(a32, wt32.T),
                  ctx.matmul(a32, wt.T)):
        assert got32.dtype == np.float32 and got32.shape == (5, 37, 18)
        same_bits(got32, want)
    v = b32(rng.standard_normal(29))
    same_bits(ctx.matmul(v, b), emulated(False, v[None, None], b[None])[0, 0])
    same_bits(ctx.matmul(b.T, v), emulated(False, b.T[None].copy(), v[None, :, None])[0, :, 0])
    pctx = scalars.get("binary32/pairwise")
    same_bits(pctx.matmul(a, b), emulated(False, a, np.broadcast_to(b, (5, 29, 18)).copy(),
                                          pairwise=True))
    fctx = scalars.get("binary32+fma")
    same_bits(fctx.matmul(a, b), emulated(True, a, np.broadcast_to(b, (5, 29, 18)).copy()))
    with pytest.raises(ContextError, match="not a binary32 value"):
        ctx.matmul(a[0] + 2.0 ** -40, b)
    with pytest.raises(ContextError, match="do not contract"):
        ctx.matmul(a, b.T)
