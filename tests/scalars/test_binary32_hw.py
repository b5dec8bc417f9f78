"""The binary32 context computes on its float32 storage in hardware float32
(scalars.kernels.binary32_hw, scalars.binary32_store), bit-identical to the emulated path (float64
operation + one rounding, scalars.kernels.binary_format FAST, narrowed) on random bit patterns,
the adversarial operands of test_binary_arith and every binary32 in a binade (sqrt), NaN
payloads and signs included; under flush-to-zero it falls back to the emulated path with
exact bit-level conversions; float64 arrays of binary32 values are accepted (non-members
refused) and give the same bits as float32 storage."""
from __future__ import annotations

import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.scalars.kernels import binary32_hw as H
from scalarlab.scalars.kernels import binary_format as K
from scalarlab.scalars import formats
from scalarlab.scalars.errors import ContextError

from test_binary_arith import adversarial_binary32, oracle

SPEC = formats.binary32.spec


def emulated(op, *cols):
    """The emulated FAST path of the float64-storage binary contexts, called directly on
    float64 columns; float64 results."""
    cols = [np.asarray(c, dtype=np.float64) for c in cols]
    out = np.empty(cols[0].size)
    unsafe = np.zeros(cols[0].size, dtype=np.uint8)
    if op in ("add", "sub", "mul", "div"):
        K.binary_fast({"add": K.ADD, "sub": K.SUB, "mul": K.MUL, "div": K.DIV}[op],
                      *cols, out, SPEC)
    elif op == "sqrt":
        K.sqrt_kernel(K.FAST, *cols, out, unsafe, SPEC)
    else:
        K.fma_kernel(K.FAST, *cols, out, unsafe, SPEC)
    assert not unsafe.any()
    return out


def to32(x64):
    """float32 storage of float64 binary32 values, bit by bit (NaN payloads truncated as
    the hardware cast does)."""
    return H.narrow_bits(np.ascontiguousarray(x64, dtype=np.float64).reshape(-1)) \
        .reshape(np.shape(x64))


def same_bits(got, want):
    """Bit equality of two binary32 arrays (float32 storage or float64 values)."""
    def bits(v):
        v = np.asarray(v)
        return (v if v.dtype == np.float32 else to32(v)).reshape(-1).view(np.uint32)
    g, w = bits(got), bits(want)
    bad = np.flatnonzero(g != w)
    assert bad.size == 0, (f"{bad.size} differ; first at {bad[0]}: {g[bad[0]]:#x} vs "
                           f"{w[bad[0]]:#x}")


def operands(n, rng):
    """Random binary32 bit patterns (every class: subnormals, inf, NaNs with payloads and
    both signs), values near 1, the adversarial pairs, and the specials crossed; float32."""
    def pats(k):
        bits = rng.integers(0, 1 << 32, k, dtype=np.uint64).astype(np.uint32)
        return bits.view(np.float32)
    r32 = lambda k: to32(formats.round_to_format(rng.standard_normal(k), "binary32"))  # noqa: E731
    a = np.concatenate([pats(n), r32(n)])
    b = np.concatenate([pats(n), r32(n)])
    A, B = adversarial_binary32(rng)
    sp = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.0, -1.0, 2.0 ** -149,
                   -2.0 ** -149, formats.binary32.max_finite])
    sa, sb = np.meshgrid(sp, sp)
    return (np.concatenate([a, to32(A), to32(sa.ravel())]),
            np.concatenate([b, to32(B), to32(sb.ravel())]))


def wide(x32):
    return H.widen_bits(np.ascontiguousarray(x32).reshape(-1)).reshape(x32.shape)


@pytest.fixture(scope="module")
def ops32():
    return operands(50_000, np.random.default_rng(161))


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_binary_ops_bit_identical_to_emulation(op, ops32):
    a, b = ops32
    ctx = scalars.get("binary32")
    got = getattr(ctx, op)(a, b)
    assert got.dtype == np.float32 and not H.ftz()          # the hardware path ran
    same_bits(got, emulated(op, wide(a), wide(b)))
    # float64 arrays of the same values: accepted, narrowed, the same bits
    same_bits(getattr(ctx, op)(wide(a), wide(b)), got)
    # and MPFR agrees on the adversarial part (values; test_binary_arith covers the rest)
    k = slice(100_000, None)
    want = oracle(ctx.fmt, op, wide(a[k]), wide(b[k]))
    g = wide(got[k])
    assert (((g == want) & (np.signbit(g) == np.signbit(want)))
            | (np.isnan(g) & np.isnan(want))).all()


def test_fma_and_sqrt_bit_identical_to_emulation(ops32):
    a, b = ops32
    rng = np.random.default_rng(3)
    c = rng.permutation(a)
    with np.errstate(all="ignore"):
        cancel = to32(formats.round_to_format(-(wide(a) * wide(b)), "binary32"))
    c = np.where(rng.random(a.size) < 0.3, cancel, c)
    ctx = scalars.get("binary32")
    got = ctx.fma(a, b, c)
    assert got.dtype == np.float32
    same_bits(got, emulated("fma", wide(a), wide(b), wide(c)))
    same_bits(ctx.fma(wide(a), b, wide(c)), got)
    same_bits(ctx.sqrt(a), emulated("sqrt", wide(a)))
    same_bits(ctx.sqrt(b), emulated("sqrt", wide(b)))


def _binade(lo_bits, step):
    bits = np.arange(lo_bits, lo_bits + (1 << 24), step, dtype=np.uint32)
    return bits.view(np.float32)


def test_sqrt_binades_slice():
    """Every 61st binary32 of [1, 4) and of a subnormal-to-normal stretch."""
    ctx = scalars.get("binary32")
    for lo in (0x3F800000, 0x00000001):
        x = _binade(lo, 61)
        same_bits(ctx.sqrt(x), emulated("sqrt", wide(x)))


@pytest.mark.slow
def test_sqrt_binades_exhaustive():
    """Every binary32 of [1, 4) (both parities of the exponent) and the lowest 2^24."""
    ctx = scalars.get("binary32")
    for lo in (0x3F800000, 0x00000001):
        x = _binade(lo, 1)
        same_bits(ctx.sqrt(x), emulated("sqrt", wide(x)))


@pytest.mark.slow
@pytest.mark.parametrize("op", ["add", "mul", "div"])
def test_binary_ops_many_patterns(op):
    a, b = operands(3_000_000, np.random.default_rng(7))
    ctx = scalars.get("binary32")
    same_bits(getattr(ctx, op)(a, b), emulated(op, wide(a), wide(b)))


def test_flush_to_zero_is_detected_and_the_context_falls_back():
    """Under FTZ/DAZ (torch.set_flush_denormal) every operation still gives the IEEE
    bits: subnormal operands and results, casts in and out of float32 storage."""
    import torch
    ctx = scalars.get("binary32")
    s64 = np.array([2.0 ** -149, 3 * 2.0 ** -149, -2.0 ** -140, 1.5])
    s32 = to32(s64)
    old = torch.set_flush_denormal(True)
    try:
        if old is False and torch.set_flush_denormal(True):
            assert H.ftz() and H.flush_to_zero(H.PROBE)    # really on in this thread
        got = {
            "add": ctx.add(s32, s32), "mul": ctx.mul(s32, to32(np.full(4, 0.5))),
            "add64": ctx.add(s64, s64), "sqrt": ctx.sqrt(ctx.abs(s32)),
            "fma": ctx.fma(s32, to32(np.full(4, 0.5)), s32),
            "sum": ctx.sum(s32[:2]), "max": ctx.maximum(s32, ctx.neg(s32)),
            "less": ctx.less(ctx.zeros((4,)), s32), "heaviside": ctx.heaviside(s32),
            "matmul": ctx.matmul(s32[None, :2], ctx.ones((2, 1))),
            "convert": ctx.convert(s64), "to64": ctx.to_float64(s32),
            "exp": ctx.exp(s32),
        }
    finally:
        torch.set_flush_denormal(False)
    t = 2.0 ** -149
    same_bits(got["add"], [2 * t, 6 * t, -2.0 ** -139, 3.0])
    same_bits(got["add64"], got["add"])
    same_bits(got["mul"], [0.0, 2 * t, -2.0 ** -141, 0.75])    # 1.5 * 2^-149 ties to even
    same_bits(got["sqrt"], emulated("sqrt", np.abs(s64)))
    same_bits(got["fma"], emulated("fma", s64, np.full(4, 0.5), s64))
    same_bits(got["sum"], [4 * t])
    same_bits(got["max"], np.abs(s64))
    assert got["less"].tolist() == [True, True, False, True]
    same_bits(got["heaviside"], [1.0, 1.0, 0.0, 1.0])
    same_bits(got["matmul"], [[4 * t]])
    same_bits(got["convert"], s32)
    assert got["to64"].dtype == np.float64 and got["to64"].tolist() == s64.tolist()
    same_bits(got["exp"], ctx.exp(s32))


def test_nonmember_raises_and_wide_nan_payloads_are_narrowed():
    ctx = scalars.get("binary32")
    with pytest.raises(ContextError, match=r"add: first operand holds 1\.0000000000009095 "
                                           r"at index \(1,\), which is not a binary32 value"):
        ctx.add(np.array([1.0, 1.0 + 2.0 ** -40]), np.array([1.0, 1.0], dtype=np.float32))
    with pytest.raises(ContextError, match=r"expected a float32 array .*got dtype int64"):
        ctx.mul(np.ones(2, dtype=np.float32), np.ones(2, dtype=np.int64))
    nan = np.array([0x7FF8000000000123, 0xFFF0000000000001],
                   dtype=np.uint64).view(np.float64)          # payloads float32 cannot carry
    got = ctx.add(nan, np.ones(2))
    same_bits(got, emulated("add", nan, np.ones(2)))          # truncated payloads
    assert got.view(np.uint32).tolist() == [0x7FC00000, 0xFFC00000]


def test_broadcasting_and_shapes():
    ctx = scalars.get("binary32")
    a = formats.round_to_format(np.linspace(-3, 3, 12).reshape(3, 4), "binary32")
    b = formats.round_to_format(np.array([0.1, 0.2, 0.3, 0.4]), "binary32")
    got = ctx.mul(a, b)
    assert got.shape == (3, 4)
    same_bits(got.ravel(), emulated("mul", a.ravel(), np.tile(b, 3)))
    s = ctx.add(np.asarray(1.0), np.asarray(2.0 ** -24))
    assert s.shape == () and float(s) == 1.0


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_broadcast_operands_both_orders(op):
    """Trailing-row broadcasts are read in place, others copied; all give RN(a op b)."""
    ctx = scalars.get("binary32")
    rng = np.random.default_rng(2)
    r = lambda *s: formats.round_to_format(rng.standard_normal(s), "binary32")  # noqa: E731
    a = r(5, 7, 20)
    f = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[op]
    for b in (np.asarray(0.5), r(20), r(7, 1), r(1, 7, 20), r(7, 20)):
        want_ab = formats.round_to_format(f(a, b), "binary32")
        want_ba = formats.round_to_format(f(b, a), "binary32")
        for x, y in ((a, b), (to32(a), to32(b)), (to32(a), b)):
            got = getattr(ctx, op)(x, y)
            assert got.shape == want_ab.shape and got.dtype == np.float32
            same_bits(got, want_ab)
            same_bits(getattr(ctx, op)(y, x), want_ba)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_row_broadcasts_with_nans_bit_identical_to_emulation(op, ops32):
    """The per-row kernels (a bias row read in place, either operand) and the one-row
    case (a short row copied whole) on every class of bit pattern, NaN payloads included:
    the emulated path's bits."""
    a, b = ops32
    ctx = scalars.get("binary32")
    for m in (40, 5):                    # rows of 40 read in place, 5 copied (< 16)
        x = a[:200 * m].reshape(200, m)
        row = b[:m]
        same_bits(getattr(ctx, op)(x, row),
                  emulated(op, wide(x).ravel(), np.tile(wide(row), 200)))
        same_bits(getattr(ctx, op)(row, x),
                  emulated(op, np.tile(wide(row), 200), wide(x).ravel()))
    assert np.isnan(a[:8000]).sum() > 10 and np.isnan(b[:40]).any()


def test_storage_is_float32_and_round_trips():
    """convert/zeros/ones/full and every op return float32; to_float64 widens exactly;
    converting storage (or its float64 widening) gives the same bits back."""
    ctx = scalars.get("binary32")
    rng = np.random.default_rng(5)
    pats = rng.integers(0, 1 << 32, 4000, dtype=np.uint64).astype(np.uint32)
    x = pats.view(np.float32).reshape(40, 100)
    x = np.where(np.isnan(x), np.float32(1.5), x)      # NaN payloads: tested elsewhere
    w = ctx.to_float64(x)
    assert w.dtype == np.float64 and np.array_equal(w, wide(x))
    for v in (ctx.convert(x), ctx.convert(w), ctx.convert(x.T).T, ctx.reshape(w, (100, 40))):
        assert v.dtype == np.float32
        same_bits(v, x)
    for v in (ctx.zeros((2, 3)), ctx.ones((2, 3)), ctx.full((2, 3), "0.1"), ctx.exp(x[:2]),
              ctx.neg(x), ctx.abs(w), ctx.maximum(x, w), ctx.sum(x, axis=0), ctx.square(x),
              ctx.matmul(x[:3], x[:3].T), ctx.where(x > 0, x, w), ctx.concat([x, w]),
              ctx.broadcast_to(w[0], (2, 100)), ctx.heaviside(x), ctx.sign(w), ctx.amax(x)):
        assert isinstance(v, np.ndarray) and v.dtype == np.float32
    assert ctx.full((2,), "0.1").tolist() == [np.float32(0.1)] * 2
    assert ctx.format(ctx.convert("0.1"), 9) == "0.100000001"
    assert ctx.exact_string(ctx.convert(["0.1", 3])) == "[0.1, 3.0]"


def test_mixed_inputs_convert_as_before():
    """float64 arrays, ints, Fractions, mpq and decimal strings: one correct rounding each,
    the same values as the float64-storage rounding primitives give (round_to_format,
    round_fraction), now as float32."""
    import gmpy2
    from fractions import Fraction
    ctx = scalars.get("binary32")
    f = formats.binary32
    rng = np.random.default_rng(9)
    d = rng.standard_normal(500) * 10.0 ** rng.uniform(-46, 39, 500)
    d[:6] = [2.0 ** -150, 2.0 ** -150 * 1.0000001, 3.4028235677973366e38, -0.0, np.inf, 1e-50]
    same_bits(ctx.convert(d), formats.round_to_format(d, f))
    leaves = [7, -(2 ** 60) - 1, Fraction(1, 3), gmpy2.mpq(-22, 7), "0.1", "-1e-45",
              "3.4028235e38", "1e39", "-0", 2 ** 200, np.int64(5), "inf", "nan"]
    got = ctx.convert(np.array(leaves, dtype=object))
    exact = [Fraction(v.item() if isinstance(v, np.generic) else v)
             if v not in ("inf", "nan") else 0 for v in leaves]
    want = [formats.round_fraction(q, f) for q in exact]
    want[-2], want[-1] = np.inf, np.nan            # "-0" is the exact rational 0: +0
    same_bits(got, np.array(want, dtype=np.float64))
    same_bits(ctx.convert(np.arange(-5, 5)), np.arange(-5.0, 5.0))
    same_bits(ctx.convert(2 ** 24 + 1), [2.0 ** 24])
    same_bits(ctx.add(ctx.convert(0.1), 0.5), formats.round_to_format(
        np.array(float(np.float32(0.1)) + 0.5), f))


@pytest.mark.parametrize("name", ["binary32", "binary32/pairwise"])
def test_sums_bit_identical_to_emulation(name):
    """Sequential and pairwise sums over several axes, with subnormals, overflow, signed
    zeros and NaNs, give the emulated kernels' bits."""
    ctx = scalars.get(name)
    rng = np.random.default_rng(11)
    x = to32(formats.round_to_format(rng.standard_normal((37, 5, 6)) *
                                     10.0 ** rng.uniform(-44, 38, (37, 5, 6)), "binary32"))
    x[3, 0, 0] = np.nan
    x[:, 1, 1] = -0.0
    x[5, 2, 2] = np.inf
    pairwise = name.endswith("pairwise")
    for axis in (0, 1, (0, 2), None):
        got = ctx.sum(x, axis=axis)
        axes = ctx._axes("sum", 3, axis)
        keep = [d for d in range(3) if d not in axes]
        x2 = np.ascontiguousarray(np.transpose(wide(x), list(axes) + keep))
        x2 = x2.reshape(int(np.prod([x.shape[d] for d in axes])), -1)
        out = np.empty(x2.shape[1])
        unsafe = np.zeros(x2.shape[1], dtype=np.uint8)
        (K.sum_pairwise if pairwise else K.sum_sequential)(K.FAST, x2, out, unsafe, SPEC)
        assert got.dtype == np.float32 and got.size == out.size
        same_bits(got, out)
    assert ctx.sum(np.zeros((0, 3), np.float32), axis=0).tolist() == [0.0] * 3


def test_bit_conversions_are_the_hardware_casts():
    """widen_bits/narrow_bits (used under FTZ) agree with the float32 <-> float64 casts on
    every class of bit pattern, NaN payloads included."""
    rng = np.random.default_rng(13)
    x = rng.integers(0, 1 << 32, 100_000, dtype=np.uint64).astype(np.uint32)
    x[:8] = [0, 0x80000000, 1, 0x807FFFFF, 0x7F800000, 0xFF800000, 0x7F800001, 0x7FC00000]
    f = x.view(np.float32)
    w = H.widen_bits(f)
    assert np.array_equal(w.view(np.uint64), H.widen(f).view(np.uint64))
    assert np.array_equal(H.narrow_bits(w).view(np.uint32), H.narrow_rn(w).view(np.uint32))
    ok = ~np.isnan(f) | ((x & 0x400000) != 0)             # quiet NaNs round trip too
    assert np.array_equal(H.narrow_bits(w).view(np.uint32)[ok], x[ok])


def test_dual_and_interval_contexts_over_binary32_storage():
    """dual:binary32 carries float32 primal and tangent with the point context's bits;
    interval:binary32 keeps float64 endpoints and takes float32 point values exactly."""
    ctx = scalars.get("binary32")
    x = to32(np.array([0.5, 2.0, -3.25]))
    d = scalars.get("dual:binary32")
    y = d.mul(d.exp(d.make(x, np.ones(3, np.float32))), d.make(x, np.zeros(3)))
    assert y.primal.dtype == np.float32 and y.tangent.dtype == np.float32
    same_bits(y.primal, ctx.mul(ctx.exp(x), x))
    same_bits(y.tangent, ctx.mul(ctx.exp(x), x))           # (e^x)' x + e^x * 0'
    iv = scalars.get("interval:binary32")
    b = iv.add(iv.convert(x), iv.convert(x))
    assert b.lo.dtype == np.float64 and b.hi.dtype == np.float64
    assert b.lo.tolist() == b.hi.tolist() == wide(ctx.add(x, x)).tolist()
