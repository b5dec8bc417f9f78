"""The pairwise-order binary32 matmul in hardware float32 (scalars.kernels.binary32_pairwise) gives the
bits of the pairwise context's emulated path (scalars.kernels.binary_format.matmul_pairwise,
float64 and one rounding per product and per addition) and of an independent MPFR oracle
(gmpy2 in binary32's parameters, the tree written as a recursive split at power-of-two
aligned midpoints): edge lengths, edge tiles, batches, weights read transposed, subnormals,
signed zeros, overflow, infinities and NaN bits; and the binary32/pairwise context's
matmul, linear and conv run it."""
from __future__ import annotations

import gmpy2
import numpy as np
import pytest

from scalarlab import graph, scalars
from scalarlab.graph import Graph, Node, OpKind, Payload
from scalarlab.scalars import binary as B
from scalarlab.scalars.kernels import binary32_pairwise as PW
from scalarlab.scalars.kernels import binary_format as K
from scalarlab.scalars import formats

F32 = formats.binary32


def bits(x):
    return np.asarray(x, dtype=np.float64).view(np.int64)


def assert_bits(got, want, what=""):
    """Bit for bit, NaN payloads, signs and zero signs included."""
    g, w = bits(got), bits(want)
    assert g.shape == w.shape, (g.shape, w.shape)
    bad = np.argwhere(g != w)
    if bad.size:
        at = tuple(bad[0])
        raise AssertionError(f"{what}: {len(bad)} entries differ, first at {at}: "
                             f"{np.asarray(got)[at]!r} vs {np.asarray(want)[at]!r}")


def assert_oracle(got, want, what=""):
    """Equal to the MPFR oracle: the same float, zero signs included; NaN where it is NaN
    (MPFR has no NaN payloads)."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    nan = np.isnan(want)
    assert (np.isnan(got) == nan).all(), what
    assert_bits(np.where(nan, 0.0, got), np.where(nan, 0.0, want), what)


class Oracle:
    """binary32 arithmetic in MPFR (precision 24, subnormals, overflow to inf)."""

    def __init__(self):
        self.ctx = formats.gmpy2_context(F32)

    def dot(self, x, y):
        """The pairwise tree over the products: leaves [lo, lo + size) clipped to n, split
        at the aligned midpoint; a right half that starts at or past n is absent (the left
        half is carried up unchanged)."""
        n = len(x)
        if n == 0:
            return 0.0
        prods = [self.ctx.mul(gmpy2.mpfr(float(a)), gmpy2.mpfr(float(b)))
                 for a, b in zip(x, y)]
        size = 1
        while size < n:
            size *= 2

        def tree(lo, size):
            if size == 1:
                return prods[lo]
            mid = lo + size // 2
            left = tree(lo, size // 2)
            if mid >= n:
                return left
            return self.ctx.add(left, tree(mid, size // 2))

        return float(tree(0, size))

    def matmul(self, a, b):
        nb, M, _ = a.shape
        out = np.empty((nb, M, b.shape[2]))
        for q, i, j in np.ndindex(*out.shape):
            out[q, i, j] = self.dot(a[q, i, :], b[q, :, j])
        return out


def emulated(a, b):
    """The pairwise context's emulated path (FAST mode: float64 then one rounding)."""
    a = np.ascontiguousarray(a, dtype=np.float64)
    b = np.ascontiguousarray(b, dtype=np.float64)
    out = np.empty((a.shape[0], a.shape[1], b.shape[2]))
    unsafe = np.zeros(out.shape, dtype=np.uint8)
    K.matmul_pairwise(K.FAST, a, b, out, unsafe, F32.spec)
    assert not unsafe.any()
    return out


def kernel_all_ways(a32, b32):
    """The kernel with float64 and float32 ``out``, B as given and B transposed in place:
    all four must agree bit for bit; returns the float64 result."""
    nb, M, Kd = a32.shape
    N = b32.shape[2]
    o64 = np.full((nb, M, N), 7.0)
    PW.matmul32_pairwise(a32, b32, o64, False)
    o32 = np.full((nb, M, N), 7.0, dtype=np.float32)
    PW.matmul32_pairwise(a32, b32, o32, False)
    assert_bits(o32.astype(np.float64), o64, "float32 out")
    bt = np.ascontiguousarray(np.swapaxes(b32, 1, 2))
    ot = np.full((nb, M, N), 7.0)
    PW.matmul32_pairwise(a32, bt, ot, True)
    assert_bits(ot, o64, "B transposed")
    return o64


def wide(rng, shape):
    """binary32 values over ~40 decades: products round, some land among the subnormals,
    sums cancel."""
    x = rng.standard_normal(shape) * 10.0 ** rng.uniform(-22, 18, shape)
    return x.astype(np.float32)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7, 16, 17, 1023])
def test_tree_equals_the_mpfr_oracle(n):
    rng = np.random.default_rng(n)
    M, N = (9, 17) if n < 100 else (2, 3)       # 9 rows / 17 columns: padded edge tiles
    a, b = wide(rng, (1, M, n)), wide(rng, (1, n, N))
    got = kernel_all_ways(a, b)
    assert_oracle(got, Oracle().matmul(a, b), f"n={n}")
    assert_bits(got, emulated(a, b), f"n={n} emulated")


def test_the_order_is_pairwise_not_sequential():
    # sequentially 2^24 + 1 + 1 + 1 stays 2^24 (every +1 ties to even); the tree adds
    # (2^24 + 1) + (1 + 1) = 2^24 + 2
    a = np.array([[[2.0 ** 24, 1.0, 1.0, 1.0]]], dtype=np.float32)
    o = np.empty((1, 1, 1))
    PW.matmul32_pairwise(a, np.ones((1, 4, 1), np.float32), o, False)
    assert o[0, 0, 0] == 2.0 ** 24 + 2
    assert Oracle().dot(a[0, 0], [1.0] * 4) == 2.0 ** 24 + 2


SHAPES = [(1, 1, 1, 1), (3, 5, 4, 2), (2, 8, 32, 16), (1, 16, 48, 33), (2, 11, 49, 20),
          (1, 3, 250, 7), (1, 1, 1024, 10), (2, 0, 3, 5), (1, 4, 0, 3), (1, 3, 5, 0)]


@pytest.mark.parametrize("shape", SHAPES)
def test_matches_the_emulated_path(shape):
    nb, M, Kd, N = shape
    rng = np.random.default_rng(sum(shape))
    a, b = wide(rng, (nb, M, Kd)), wide(rng, (nb, Kd, N))
    assert_bits(kernel_all_ways(a, b), emulated(a, b), str(shape))


def test_every_length_up_to_70():
    rng = np.random.default_rng(70)
    for n in range(1, 71):
        a, b = wide(rng, (1, 9, n)), wide(rng, (1, n, 5))
        assert_bits(kernel_all_ways(a, b), emulated(a, b), f"n={n}")


def _f32(*v):
    return np.array(v, dtype=np.float64).astype(np.float32)


QNANS = np.array([0x7FC00000, 0xFFC00000, 0x7FC12345, 0xFFC54321, 0x7FD00001, 0xFFE00010],
                 dtype=np.uint32).view(np.float32)
SPECIALS = np.concatenate([QNANS, _f32(0.0, -0.0, np.inf, -np.inf, F32.max_finite,
                                       -F32.max_finite, 2.0 ** -149, -2.0 ** -149,
                                       2.0 ** -126, 1.0, -1.0, 2.0 ** 100, 3.0)])


@pytest.mark.parametrize("shape", [(2, 11, 23, 21), (1, 9, 40, 17), (1, 3, 5, 35)])
def test_specials_and_nan_bits(shape):
    """NaN payloads and signs as the emulated path (which keeps the first operand's NaN in
    a * b and left + right; inf*0 and inf-inf give the default NaN)."""
    nb, M, Kd, N = shape
    rng = np.random.default_rng(Kd)
    w = np.where(np.isnan(SPECIALS), 0.2, np.where(np.isinf(SPECIALS), 0.5, 8.0))
    w = w / w.sum()       # rare NaN and inf operands: many outputs finite, some NaN
    a, b = rng.choice(SPECIALS, (nb, M, Kd), p=w), rng.choice(SPECIALS, (nb, Kd, N), p=w)
    got = kernel_all_ways(a, b)
    assert np.isnan(got).any() and not np.isnan(got).all()
    assert_bits(got, emulated(a, b), "specials")


@pytest.mark.parametrize("b_t", [False, True])
def test_nan_outputs_are_recomputed_sparse_and_dense(b_t):
    """The NaN recompute gives the emulated bits whether NaNs fill whole rows (a NaN in A:
    whole rows recomputed) or a few columns (a NaN in B: outputs gathered one by one):
    the kernel's NaNs are overwritten with a foreign payload first, so only a correct
    recompute restores them."""
    rng = np.random.default_rng(12)
    a, b = wide(rng, (2, 9, 40)), wide(rng, (2, 40, 33))
    a[0, 3, 5], a[0, 3, 17], a[0, 7, 0] = QNANS[2], QNANS[3], QNANS[4]       # dense
    b[1, 4, 2], b[1, 30, 2], b[1, 11, 20] = QNANS[5], QNANS[2], QNANS[1]     # sparse
    bb = np.ascontiguousarray(np.swapaxes(b, 1, 2)) if b_t else b
    res = np.empty((2, 9, 33), dtype=np.float32)
    assert PW._kernel(a, bb, res, b_t)
    nan = np.isnan(res)
    assert nan[0].sum() == 66 and nan[1].sum() == 18
    res[nan] = np.array([0x7FC0DEAD], dtype=np.uint32).view(np.float32)[0]
    PW._redo_nans(a, bb, res, b_t)
    assert_bits(res.astype(np.float64), emulated(a, b), "recomputed NaNs")


def test_subnormals_signed_zeros_and_overflow():
    """Outputs that are exact zeros (the sign decided by each rounding), products that
    underflow to subnormals or to ±0, sums that overflow to ±inf and inf - inf."""
    rng = np.random.default_rng(5)
    small = _f32(0.0, -0.0, 2.0 ** -149, -2.0 ** -149, 2.0 ** -130, -3 * 2.0 ** -140)
    scale = _f32(1.0, -1.0, 0.5, -0.25, 2.0 ** -10, 0.0, -0.0)
    for kd in (3, 4, 19):        # short sums: many exact zeros (2^-149 * 0.25 -> ±0)
        a, b = rng.choice(small, (2, 9, kd)), rng.choice(scale, (2, kd, 17))
        got = kernel_all_ways(a, b)
        want = Oracle().matmul(a, b)
        if kd < 19:
            z = want == 0
            assert z.sum() > 20 and np.signbit(want[z]).any() and not np.signbit(want[z]).all()
        assert_oracle(got, want, f"subnormal/zero, K={kd}")
    big = _f32(F32.max_finite, -F32.max_finite, 2.0 ** 100, -(2.0 ** 100), 1.0, 0.0)
    a, b = rng.choice(big, (1, 9, 7)), rng.choice(big, (1, 7, 17))
    got = kernel_all_ways(a, b)
    want = Oracle().matmul(a, b)
    assert np.isinf(want).any() and np.isnan(want).any()
    assert_oracle(got, want, "overflow")
    assert_bits(got, emulated(a, b), "overflow emulated")


def test_flush_to_zero_takes_the_emulated_path():
    """With FTZ/DAZ set in this thread (as torch.set_flush_denormal does), float32 hardware
    flushes subnormals; the driver sees it through binary32_hw's probe and computes by the
    emulated path, crossing formats by bits: still the MPFR oracle's results."""
    import torch
    from scalarlab.scalars.kernels import binary32_hw as H
    rng = np.random.default_rng(8)
    tiny = _f32(2.0 ** -149, -2.0 ** -149, 2.0 ** -140, 3 * 2.0 ** -135, -(2.0 ** -127))
    scale = _f32(1.0, -0.5, 0.75, 2.0 ** -3, 3.0)
    a, b = rng.choice(tiny, (2, 9, 21)), rng.choice(scale, (2, 21, 17))
    want = Oracle().matmul(a, b)
    assert ((want != 0) & (np.abs(want) < 2.0 ** -126)).sum() > 50     # subnormal results
    bt = np.ascontiguousarray(np.swapaxes(b, 1, 2))
    assert torch.set_flush_denormal(True)
    try:
        assert H.flush_to_zero(H.PROBE)
        raw = np.empty(want.shape, dtype=np.float32)
        PW._kernel(a, b, raw, False)          # the hardware kernel alone does flush
        o64, o32, ot = np.empty(want.shape), np.empty(want.shape, np.float32), np.empty(want.shape)
        PW.matmul32_pairwise(a, b, o64, False)
        PW.matmul32_pairwise(a, b, o32, False)
        PW.matmul32_pairwise(a, bt, ot, True)
        of = PW.matmul(PW.widen_bits(a), PW.widen_bits(b))      # float64 operands
        with pytest.raises(ValueError, match="not a binary32 value"):
            PW.matmul(PW.widen_bits(a) * (1 + 2.0 ** -30), b)
    finally:
        torch.set_flush_denormal(False)
    assert not H.flush_to_zero(H.PROBE)
    assert (PW.widen_bits(raw) != want).any()
    assert_oracle(o64, want, "FTZ, float64 out")
    assert_oracle(PW.widen_bits(o32), want, "FTZ, float32 out")
    assert_oracle(ot, want, "FTZ, B transposed")
    assert_oracle(PW.widen_bits(of), want, "FTZ, float64 operands")


def test_bitwise_format_crossing():
    u = np.concatenate([np.arange(0, 1 << 12), (1 << 23) - np.arange(1, 300),
                        np.random.default_rng(2).integers(0, 1 << 32, 20000)]).astype(np.uint32)
    u = np.concatenate([u, u | np.uint32(1 << 31)])
    x = u.view(np.float32)
    w = PW.widen_bits(x)
    quiet = ~np.isnan(x) | ((u & np.uint32(1 << 22)) != 0)   # hardware quiets sNaN
    with np.errstate(invalid="ignore"):
        assert_bits(w[quiet], x[quiet].astype(np.float64))
    assert (PW.narrow_bits(w).view(np.uint32) == u).all()


def test_float64_operands_are_checked():
    rng = np.random.default_rng(3)
    a, b = wide(rng, (2, 5, 9)), wide(rng, (2, 9, 4))
    got = PW.matmul(a.astype(np.float64), b.astype(np.float64))
    assert got.dtype == np.float32
    assert_bits(got.astype(np.float64), emulated(a, b))
    with pytest.raises(ValueError, match=r"first operand\[0, 1, 2\] = .* not a binary32"):
        bad = a.astype(np.float64)
        bad[0, 1, 2] *= 1 + 2.0 ** -40
        PW.matmul(bad, b)
    with pytest.raises(TypeError, match="second operand has dtype int64"):
        PW.matmul(a, np.ones((2, 9, 4), dtype=np.int64))


@pytest.fixture
def emulated_context(monkeypatch):
    """A function that runs ``f`` with the binary32 context's hardware path switched off
    (as when flush-to-zero is on), so the emulated path computes."""
    def run(f):
        with monkeypatch.context() as m:
            m.setattr(B.H, "flush_to_zero", lambda probe: True)
            return f()
    return run


def test_context_matmul_linear_conv_run_the_kernel(monkeypatch, emulated_context):
    ctx = scalars.get("binary32/pairwise")
    calls = []
    real = PW.matmul32_pairwise

    def spy(a, b, out, b_t):
        calls.append(b_t)
        return real(a, b, out, b_t)

    monkeypatch.setattr(B.PW, "matmul32_pairwise", spy)
    rng = np.random.default_rng(11)
    a = wide(rng, (3, 10, 37)).astype(np.float64)
    b = wide(rng, (37, 18)).astype(np.float64)
    got = ctx.matmul(a, b)
    assert calls == [False]
    assert_bits(got, emulated_context(lambda: ctx.matmul(a, b)), "matmul")
    assert_bits(got, emulated(a, np.broadcast_to(b, (3, 37, 18))), "matmul")

    # linear: x @ W.T + b, the weight read transposed in place
    x = rng.standard_normal((6, 33)).astype(np.float32).astype(np.float64)
    W = rng.standard_normal((20, 33)).astype(np.float32).astype(np.float64)
    bias = rng.standard_normal(20).astype(np.float32).astype(np.float64)
    g = Graph([Node(0, [], "input", [33]), Node(1, [0], "linear", [20])])
    p = Payload()
    p.set(1, {"W": W, "b": bias}, op="linear")
    calls.clear()
    y = graph.denote(g, p, x, ctx)
    assert calls == [True]
    assert_bits(y, emulated_context(lambda: graph.denote(g, p, x, ctx)), "linear")

    # conv2d: im2col + matmul
    w = rng.standard_normal((4, 2, 3, 3)).astype(np.float32).astype(np.float64)
    cb = rng.standard_normal(4).astype(np.float32).astype(np.float64)
    g = Graph([Node(0, [], "input", [2, 6, 7]),
               Node(1, [0], OpKind("conv2d", kernel_size=3, out_channels=4, padding=1),
                    [4, 6, 7])])
    p = Payload()
    p.set(1, {"weight": w, "bias": cb}, op="conv2d")
    xs = rng.standard_normal((2, 2, 6, 7)).astype(np.float32).astype(np.float64)
    calls.clear()
    y = graph.denote(g, p, xs, ctx)
    assert calls
    assert_bits(y, emulated_context(lambda: graph.denote(g, p, xs, ctx)), "conv2d")


@pytest.mark.slow
def test_every_length_up_to_600_and_a_layer_of_the_mlp():
    rng = np.random.default_rng(600)
    for n in range(71, 601):
        a, b = wide(rng, (1, 9, n)), wide(rng, (1, n, 17))
        assert_bits(kernel_all_ways(a, b), emulated(a, b), f"n={n}")
    x = rng.standard_normal((1, 256, 784)).astype(np.float32)
    W = (rng.standard_normal((1, 1024, 784)) / 28).astype(np.float32)
    o = np.empty((1, 256, 1024))
    PW.matmul32_pairwise(x, W, o, True)
    assert_bits(o, emulated(x, np.swapaxes(W, 1, 2)), "784 -> 1024 layer")
