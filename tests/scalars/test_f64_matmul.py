"""The float64 matmul of scalars.kernels.f64_matmul computes, for every output, fma chains over
k blocks of ``KB`` (256): ``s = RN(a0*b0); s = fma(a_k, b_k, s)`` within a block, and the
blocks' chains added in k order (``C = RN(C + s)``): checked bit for bit against MPFR
(gmpy2 at 53 bits, binary64's exponent range, subnormalised) doing the same, for edge
shapes (partial row tiles and panels, K = 1, several order blocks and passes), any
operand strides (F order, transposed views, slices, reversed and unaligned views),
batches, and operands with subnormals, signed zeros, overflow, infinities and NaN.  On
the MLP shapes it agrees with numpy's BLAS to the rounding error of a dot product, and the
float64 context uses it above its size threshold."""
from __future__ import annotations

import itertools

import gmpy2
import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.scalars.kernels import f64_matmul as F
from scalarlab.scalars.errors import ContextError

CTX = gmpy2.context(precision=53, emin=-1073, emax=1024, subnormalize=True,
                    round=gmpy2.RoundToNearest)
_mul = np.frompyfunc(lambda x, y: CTX.mul(x, y), 2, 1)
_fma = np.frompyfunc(lambda x, y, z: CTX.fma(x, y, z), 3, 1)
_add = np.frompyfunc(lambda x, y: CTX.add(x, y), 2, 1)
_mpfr = np.frompyfunc(lambda x: gmpy2.mpfr(float(x), 53), 1, 1)
_float = np.frompyfunc(float, 1, 1)


def oracle(a, b):
    """Every output of a @ b in MPFR as the kernel defines it (vectorised over outputs, one
    Python-level step per k): a sequential fma chain per k block of ``F.KB``, the blocks'
    chains added in k order, each addition rounded; 2-d or batched 3-d operands."""
    a3 = np.asarray(a, dtype=np.float64)
    b3 = np.asarray(b, dtype=np.float64)
    a3 = a3[None] if a3.ndim == 2 else a3
    b3 = b3[None] if b3.ndim == 2 else b3
    nb = max(a3.shape[0], b3.shape[0])
    a3 = np.broadcast_to(a3, (nb,) + a3.shape[1:])
    b3 = np.broadcast_to(b3, (nb,) + b3.shape[1:])
    A, B = _mpfr(a3), _mpfr(b3)
    total = None
    for s0 in range(0, a3.shape[2], F.KB):
        acc = _mul(A[:, :, s0, None], B[:, None, s0, :])
        for k in range(s0 + 1, min(s0 + F.KB, a3.shape[2])):
            acc = _fma(A[:, :, k, None], B[:, None, k, :], acc)
        total = acc if total is None else _add(total, acc)
    out = _float(total).astype(np.float64)
    return out[0] if np.ndim(a) == 2 and np.ndim(b) == 2 else out


def same_bits(got, want):
    """Equal bit patterns, NaN for NaN (payloads are not promised)."""
    assert got.shape == want.shape
    g, w = got.view(np.int64), want.view(np.int64)
    both_nan = np.isnan(got) & np.isnan(want)
    bad = np.flatnonzero(((g != w) & ~both_nan).ravel())
    assert bad.size == 0, (f"{bad.size} of {got.size} entries differ, first at flat index "
                           f"{bad[0]}: got {got.ravel()[bad[0]]!r}, want "
                           f"{want.ravel()[bad[0]]!r}")


@pytest.fixture
def always(monkeypatch):
    """The kernel for every shape (no size threshold), as the tests of small shapes need."""
    monkeypatch.setattr(F, "MIN_FLOPS", 0)
    monkeypatch.setattr(F, "MIN_MN", 1)
    return F.matmul_f64


def operands(rng, M, K, N, wide=True):
    """Normal values with magnitudes from 2^-60 to 2^60 (wide) so that every product and
    every partial sum rounds, and cancellation happens."""
    a = rng.standard_normal((M, K))
    b = rng.standard_normal((K, N))
    if wide:
        a *= np.exp2(rng.integers(-60, 60, (M, K)))
        b *= np.exp2(rng.integers(-60, 60, (K, N)))
    return a, b


SIZES = (1, 2, 3, 7, 8, 9, 17, 25, 33)
# Every shape of SIZES^3 (partial row tiles of R = 8, partial panels of W = 24, K = 1;
# about 3 ms each, 2.5 s in all) and two longer k loops.  The default selection runs the
# shapes made of 1, 8, 9 and 25 (one row, a whole tile, a tile and one row, three tiles
# and one; N: partial panel, one panel and one column; K = 1 and longer chains) and the
# long k loops; -m slow all 731.
DEFAULT_SIZES = (1, 8, 9, 25)
SHAPES = [pytest.param(*s, marks=() if set(s) <= set(DEFAULT_SIZES) else pytest.mark.slow)
          for s in itertools.product(SIZES, SIZES, SIZES)] + [(16, 130, 48), (9, 300, 26)]


@pytest.mark.parametrize("M,K,N", SHAPES)
def test_fma_chain_matches_mpfr(always, M, K, N):
    rng = np.random.default_rng(M * 10007 + K * 101 + N)
    a, b = operands(rng, M, K, N)
    same_bits(always(a, b), oracle(a, b))


# the default run: every kc on the two small shapes, one block per pass on the largest and
# three blocks per pass on the longest K; -m slow: every kc on every shape
ORDER_DEFAULT = {(16, 130, 48, 1), (9, 700, 10, 600)}


@pytest.mark.parametrize("M,K,N,kc", [
    pytest.param(*s, kc, id=f"{s[0]}-{s[1]}-{s[2]}-{kc}",
                 marks=() if s in ((17, 15, 25), (3, 257, 5)) or (*s, kc) in ORDER_DEFAULT
                 else pytest.mark.slow)
    for s in [(16, 130, 48), (9, 300, 26), (17, 15, 25), (9, 700, 10), (8, 256, 24),
              (3, 257, 5)] for kc in (1, 256, 600)])
def test_order_blocks_and_passes(always, monkeypatch, kc, M, K, N):
    """Order blocks of KB (a chain each, added into C; edge tiles through the scratch
    tile) and passes over the B panels of whole blocks (kc rounded up to KB: 1 -> one
    block per pass, 600 -> three) give the oracle's values."""
    monkeypatch.setattr(F, "KC", kc)
    rng = np.random.default_rng(M * 10007 + K * 101 + N)
    a, b = operands(rng, M, K, N)
    for x, y in ((a, b), (np.asfortranarray(a), np.ascontiguousarray(b.T).T)):
        same_bits(always(x, y), oracle(a, b))


def _views(rng, M, K, N):
    """(name, a, b): the same kinds of operands through every kind of layout."""
    a, b = operands(rng, M, K, N)
    big = np.full((2 * M + 1, 3 * K + 2), np.nan)
    sliced = big[1::2, 2::3][:M, :K]
    sliced[...] = a
    raw = np.zeros(M * K * 8 + 1, dtype=np.uint8)
    unaligned = np.frombuffer(raw.data, dtype=np.float64, count=M * K, offset=1)
    unaligned = unaligned.reshape(M, K)
    unaligned[...] = a
    return [
        ("C @ C", a, b),
        ("F @ F", np.asfortranarray(a), np.asfortranarray(b)),
        ("x @ W.T", a, np.ascontiguousarray(b.T).T),
        ("g.T @ x", np.ascontiguousarray(a.T).T, b),
        ("slices", sliced, b),
        ("reversed", a[::-1, ::-1].copy()[::-1, ::-1], b[::-1].copy()[::-1]),
        ("unaligned", unaligned, b),
    ]


@pytest.mark.parametrize("shape", [(9, 19, 26), (16, 24, 17), (24, 40, 49)])
def test_any_layout_gives_the_same_bits(always, shape):
    rng = np.random.default_rng(sum(shape))
    want = None
    for name, a, b in _views(rng, *shape):
        got = always(a, b)
        assert got.flags.c_contiguous, name
        if want is None:
            want = oracle(a, b)
        try:
            same_bits(got, want)
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from None


def test_batches_and_broadcast_batches(always):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((3, 9, 13)) * np.exp2(rng.integers(-30, 30, (3, 9, 13)))
    b = rng.standard_normal((3, 13, 26))
    b1 = rng.standard_normal((1, 13, 26))
    b2 = rng.standard_normal((13, 26))
    for x, y in ((a, b), (a, b1), (a, b2), (a[:1], b), (b2.T[None, :9], b2),
                 (a.transpose(0, 2, 1).copy().transpose(0, 2, 1), b)):
        got = always(x, y)
        assert got.shape == np.matmul(x, y).shape
        same_bits(got, oracle(x, y))


def test_special_values_land_where_mpfr_puts_them(always):
    """Subnormal products and sums, signed zeros (a chain of -0 products stays -0, one +0
    makes +0), overflow to inf and inf - inf = NaN, inf and NaN operands in given rows and
    columns: every output's bits equal the MPFR chain's."""
    rng = np.random.default_rng(11)
    M, K, N = 11, 9, 27
    a = rng.standard_normal((M, K))
    b = rng.standard_normal((K, N))
    a[0] *= 2.0 ** -1060                         # row 0: subnormal products and sums
    b[:, 1] *= 2.0 ** -20
    a[1] = -0.0                                   # row 1: signed zero chains
    b[:, 2] = 0.0
    b[3:, 3] = -0.0
    a[2, 4] = 1e300; b[4, 12:] = 1e300            # row 2: overflow to +-inf
    a[3, 5] = np.inf                              # row 3: inf times finite, inf - inf
    b[5, 6] = 0.0                                 # inf * 0 = NaN in column 6
    a[4, 6] = np.nan                              # row 4: NaN everywhere
    b[7, 8] = -np.inf                             # column 8: inf from B
    a[5, :] = [2.0 ** 1023, 2.0 ** 1023, -np.inf, 1, 1, 1, 1, 1, 1]
    b[:3, 9] = 1.0                                # row 5 col 9: overflow, then -inf: NaN
    a[6] = 2.0 ** -537; b[:, 10] = 2.0 ** -537    # products exactly 2^-1074 = min subnormal
    a[7] = 2.0 ** -538; b[:, 11] = 2.0 ** -537    # products 2^-1075: ties to even (0)
    got = always(a, b)
    with np.errstate(all="ignore"):
        want = oracle(a, b)
    same_bits(got, want)
    # the cases are the ones meant
    assert want[1, 2] == 0 and np.signbit(want[1, 2])           # -0: all products -0
    assert want[1, 3] == 0 and not np.signbit(want[1, 3])       # mixed zeros: +0
    assert np.isinf(want[2]).any() and np.isnan(want[4]).all() and np.isnan(want[5, 9])
    assert 0 < abs(want[0, 0]) < 2.0 ** -1022 and want[6, 10] == 9 * 2.0 ** -1074


@pytest.mark.parametrize("layout", ["x @ W.T", "g.T @ x"])
def test_mlp_shapes_close_to_numpy(layout):
    """The two GEMMs of the tape MLP step (784-256-10, batch 128) through the threshold
    (the kernel runs): within 1e-12 of numpy relative to sum |a||b| per output."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((128, 784))
    if layout == "x @ W.T":
        a, b = x, rng.standard_normal((256, 784)).T
    else:
        a, b = rng.standard_normal((128, 256)).T, x
    assert F.matmul_f64(a, b) is not None
    got = F.matmul_f64(a, b)
    scale = np.abs(a) @ np.abs(b)
    assert np.max(np.abs(got - a @ b) / scale) < 1e-12
    # and it is the fma chain: one row of outputs against MPFR
    same_bits(got[:1], oracle(a[:1], b))


def test_float64_context_uses_the_chain_above_the_threshold():
    ctx = scalars.get("float64")
    rng = np.random.default_rng(8)
    a, b = operands(rng, 64, 130, 130)          # 1.08e6 multiply-adds >= MIN_FLOPS
    assert a.shape[0] * a.shape[1] * b.shape[1] >= F.MIN_FLOPS
    got = ctx.matmul(a, b)
    same_bits(got, F.matmul_f64(a, b))
    same_bits(got[:2], oracle(a[:2], b))
    # below it, numpy's product exactly
    small = operands(rng, 8, 8, 8)
    same_bits(ctx.matmul(*small), np.matmul(*small))
    # a linear layer: the same chain, then the bias
    W, bias = rng.standard_normal((130, 130)), rng.standard_normal(130)
    same_bits(ctx.affine(a, W, bias), ctx.matmul(a, np.ascontiguousarray(W.T)) + bias)


def test_declines_what_it_does_not_handle():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((128, 128))
    assert F.matmul_f64(a, a) is not None
    assert F.matmul_f64(a.astype(np.float32), a) is None
    assert F.matmul_f64(a[0], a) is None                   # 1-d: numpy
    assert F.matmul_f64(a[:, :0], a[:0]) is None           # K = 0: numpy
    assert F.matmul_f64(a, a[:100]) is None                # does not contract
    assert F.matmul_f64(a[:4], a) is None                  # M < MIN_MN
    assert F.matmul_f64(np.ones((2, 128, 128)), np.ones((3, 128, 128))) is None
    ctx = scalars.get("float64")
    with pytest.raises(ContextError, match=r"matmul: shapes \[128, 128\] and \[100, 128\]"):
        ctx.matmul(a, a[:100])


def test_product_writes_into_out_on_both_paths(always, monkeypatch):
    """``product(a, b, out)``: the chain written into ``out`` (a C array of the result's
    shape), the chain into a fresh array then copied for an ``out`` it cannot write (an
    F-ordered one, one overlapping an operand), numpy's matmul for what the chain
    declines -- every value the MPFR chain's or numpy's."""
    rng = np.random.default_rng(7)
    a, b = operands(rng, 9, 17, 25)
    want = oracle(a, b)
    out = np.full((9, 25), np.nan)
    assert F.product(a, b, out=out) is out
    same_bits(out, want)
    fout = np.asfortranarray(np.full((9, 25), np.nan))
    assert F.product(a, b, out=fout) is fout
    same_bits(fout, want)
    sq, sq2 = operands(rng, 25, 25, 25)                 # out is the left operand itself
    want_sq = oracle(sq, sq2)
    assert F.product(sq, sq2, out=sq) is sq
    same_bits(sq, want_sq)
    same_bits(F.product(a, b), want)                      # no out: a new array
    monkeypatch.setattr(F, "MIN_FLOPS", 1 << 40)          # declined: numpy's matmul
    out2 = np.empty((9, 25))
    assert F.product(a, b, out=out2) is out2
    assert np.array_equal(out2, np.matmul(a, b))


def test_interval_midpoint_radius_products_use_the_chain(monkeypatch):
    """The midpoint-radius interval matmul and IBP's fused dense layer take their float64
    products from ``product`` (the order-free error bound covers the chain): the fused
    layer's m @ W.T goes through it, and its box, like the unfused matmul's, encloses
    the exact range of x W^T + b over the input box (exact rationals)."""
    calls = []
    real = F.product

    def spy(a, b, out=None):
        calls.append(a.shape + b.shape)
        return real(a, b, out)
    import scalarlab.scalars.interval_linalg as I
    import scalarlab.scalars.kernels.interval_affine as IA
    monkeypatch.setattr(I, "_product", spy)
    monkeypatch.setattr(IA, "_product", spy)
    rng = np.random.default_rng(3)
    P, n, p = 64, 130, 140                                # above MIN_FLOPS
    xc = rng.standard_normal((P, n))
    xlo, xhi = xc - 0.01, xc + 0.01
    W = rng.standard_normal((p, n))
    b = rng.standard_normal(p)
    ctx = scalars.get("interval:float64")
    x = ctx.make(xlo, xhi)
    fused = ctx.affine(x, ctx.convert(W), ctx.convert(b))
    assert (P, n, n, p) in calls                          # m @ W.T through product
    calls.clear()
    unfused = ctx.add(ctx.matmul(x, ctx.transpose(ctx.convert(W))), ctx.convert(b))
    assert (P, n, n, p) in calls
    q = np.frompyfunc(gmpy2.mpq, 1, 1)
    rows = [0, 31, 63]
    Wp, Wm = q(np.maximum(W, 0.0)), q(np.minimum(W, 0.0))
    ql, qh = q(xlo[rows]), q(xhi[rows])
    lo_ex = ql @ Wp.T + qh @ Wm.T + q(b)
    hi_ex = qh @ Wp.T + ql @ Wm.T + q(b)
    for r in (fused, unfused):
        assert np.all(q(r.lo[rows]) <= lo_ex) and np.all(hi_ex <= q(r.hi[rows]))


def test_concurrent_calls_from_threads_give_the_same_bits():
    """The kernel releases the GIL and keeps no shared buffers: products computed from
    four threads at once (first use included) equal the ones computed alone."""
    from concurrent.futures import ThreadPoolExecutor
    rng = np.random.default_rng(11)
    pairs = [operands(rng, 128 + 8 * i, 200, 48 + i, wide=False) for i in range(8)]
    pairs = [(a, b) if i % 2 else (a, np.ascontiguousarray(b.T).T)
             for i, (a, b) in enumerate(pairs)]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda ab: F.matmul_f64(*ab), pairs * 3))
    for (a, b), g in zip(pairs * 3, got):
        assert g is not None
        same_bits(g, F.matmul_f64(a, b))


@pytest.mark.parametrize("threads", [2, 3])
def test_thread_ranges_give_the_same_bits(always, monkeypatch, threads):
    """Row ranges (one matrix, edge tiles included) and batch ranges computed on several
    threads equal the one-thread product bit for bit."""
    import numba
    rng = np.random.default_rng(5)
    cases = [operands(rng, 45, 70, 50, wide=False),                  # 6 row tiles, edge
             (rng.standard_normal((5, 33, 40)), rng.standard_normal((5, 40, 27))),
             (rng.standard_normal((33, 40)), rng.standard_normal((3, 40, 27)))]
    monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", 1)
    want = [F.matmul_f64(a, b) for a, b in cases]
    monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", threads)
    monkeypatch.setattr(F, "MIN_THREAD_MACS", 1)
    calls = []
    real = F._gemm

    def spy(*args):
        calls.append(args[-5].shape)         # (..., out, M, N, K, kc)
        return real(*args)
    monkeypatch.setattr(F, "_gemm", spy)
    for (a, b), w in zip(cases, want):
        calls.clear()
        same_bits(F.matmul_f64(a, b), w)
        assert len(calls) == threads            # the work was split
    same_bits(want[0][:2], oracle(cases[0][0][:2], cases[0][1]))


def test_block_sums_with_special_values(always):
    """Where the blocks' chains meet (k = KB): -0 + -0 stays -0, -0 + +0 is +0, inf from
    one block and -inf from the next give NaN, overflow in the sum of two finite block
    chains gives inf -- as MPFR adding the same chains."""
    K = F.KB + 44
    a = np.zeros((8, K))
    b = np.zeros((K, 24))
    a[0, :] = -0.0                                 # every product -0 * 1 = -0
    b[:, :] = 1.0
    a[1, :F.KB] = -0.0                              # block 0: -0; block 1: +0
    a[2, 0], a[2, F.KB] = 1e308, -1e308             # +inf row of b below, then -inf
    b[0, 2], b[F.KB, 2] = 1e10, 1e10
    a[3, 0], a[3, F.KB] = 1e308, 1e308              # each block finite, their sum overflows
    got = always(a, b)
    same_bits(got, oracle(a, b))
    assert np.signbit(got[0, 0]) and got[0, 0] == 0
    assert not np.signbit(got[1, 0]) and got[1, 0] == 0
    assert np.isnan(got[2, 2]) and got[3, 0] == np.inf


def test_k_beyond_one_pass(always):
    """K above KC: two passes over the B panels (each of whole order blocks, the second
    one shorter), in place and packed A."""
    rng = np.random.default_rng(23)
    a, b = operands(rng, 9, F.KC + 252, 24, wide=False)
    want = oracle(a, b)
    same_bits(always(a, b), want)
    same_bits(always(np.asfortranarray(a), b), want)
