"""The binary32 context's hardware float32 path (scalars.binary32_hw) is bit-identical to the
emulated path (float64 + one rounding, scalars.binary_kernels FAST) on random bit
patterns, the adversarial operands of test_binary_arith and every binary32 in a binade
(sqrt), NaN payloads and signs included; flush-to-zero and non-members fall back."""
from __future__ import annotations

import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.scalars import binary32_hw as H
from scalarlab.scalars import binary_kernels as K
from scalarlab.scalars import formats
from scalarlab.scalars.errors import ContextError

from test_binary_arith import adversarial_binary32, oracle

SPEC = formats.binary32.spec


def emulated(op, *cols):
    """The emulated FAST path of the context, called directly."""
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


def same_bits(got, want):
    g, w = np.asarray(got).view(np.int64), np.asarray(want).view(np.int64)
    bad = np.flatnonzero(g != w)
    assert bad.size == 0, (f"{bad.size} differ; first at {bad[0]}: {got[bad[0]]!r} "
                           f"({g[bad[0]]:#x}) vs {want[bad[0]]!r} ({w[bad[0]]:#x})")


def operands(n, rng):
    """Random binary32 bit patterns (every class: subnormals, inf, NaNs with payloads and
    both signs), values near 1, the adversarial pairs, and the specials crossed."""
    def pats(k):
        with np.errstate(invalid="ignore"):        # signalling NaNs are quietened
            return rng.integers(0, 1 << 32, k, dtype=np.uint64).astype(np.uint32) \
                .view(np.float32).astype(np.float64)
    a = np.concatenate([pats(n), formats.round_to_format(rng.standard_normal(n), "binary32")])
    b = np.concatenate([pats(n), formats.round_to_format(rng.standard_normal(n), "binary32")])
    A, B = adversarial_binary32(rng)
    sp = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.0, -1.0, 2.0 ** -149,
                   -2.0 ** -149, formats.binary32.max_finite])
    sa, sb = np.meshgrid(sp, sp)
    return np.concatenate([a, A, sa.ravel()]), np.concatenate([b, B, sb.ravel()])


@pytest.fixture(scope="module")
def ops32():
    return operands(50_000, np.random.default_rng(161))


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_binary_ops_bit_identical_to_emulation(op, ops32):
    a, b = ops32
    ctx = scalars.get("binary32")
    out = np.empty(a.size)
    assert getattr(H, op)(a, b, out, H.PROBE) == H.OK       # the hardware path ran
    same_bits(out, emulated(op, a, b))
    same_bits(getattr(ctx, op)(a, b), out)
    # and MPFR agrees on the adversarial part (values; test_binary_arith covers the rest)
    k = slice(100_000, None)
    want = oracle(ctx.fmt, op, a[k], b[k])
    got = out[k]
    assert (((got == want) & (np.signbit(got) == np.signbit(want)))
            | (np.isnan(got) & np.isnan(want))).all()


def test_fma_and_sqrt_bit_identical_to_emulation(ops32):
    a, b = ops32
    rng = np.random.default_rng(3)
    c = rng.permutation(a)
    with np.errstate(all="ignore"):
        cancel = formats.round_to_format(-(a * b), "binary32")
    c = np.where(rng.random(a.size) < 0.3, cancel, c)
    ctx = scalars.get("binary32")
    out = np.empty(a.size)
    assert H.fused(a, b, c, out, H.PROBE) == H.OK
    same_bits(out, emulated("fma", a, b, c))
    same_bits(ctx.fma(a, b, c), out)
    assert H.sqrt(a, out, H.PROBE) == H.OK
    same_bits(out, emulated("sqrt", a))
    same_bits(ctx.sqrt(b), emulated("sqrt", b))


def _binade(lo_bits, step):
    bits = np.arange(lo_bits, lo_bits + (1 << 24), step, dtype=np.uint32)
    return bits.view(np.float32).astype(np.float64)


def test_sqrt_binades_slice():
    """Every 61st binary32 of [1, 4) and of a subnormal-to-normal stretch."""
    for lo in (0x3F800000, 0x00000001):
        x = _binade(lo, 61)
        out = np.empty(x.size)
        assert H.sqrt(x, out, H.PROBE) == H.OK
        same_bits(out, emulated("sqrt", x))


@pytest.mark.slow
def test_sqrt_binades_exhaustive():
    """Every binary32 of [1, 4) (both parities of the exponent) and the lowest 2^24."""
    for lo in (0x3F800000, 0x00000001):
        x = _binade(lo, 1)
        out = np.empty(x.size)
        assert H.sqrt(x, out, H.PROBE) == H.OK
        same_bits(out, emulated("sqrt", x))


@pytest.mark.slow
@pytest.mark.parametrize("op", ["add", "mul", "div"])
def test_binary_ops_many_patterns(op):
    a, b = operands(3_000_000, np.random.default_rng(7))
    out = np.empty(a.size)
    assert getattr(H, op)(a, b, out, H.PROBE) == H.OK
    same_bits(out, emulated(op, a, b))


def test_flush_to_zero_is_detected_and_the_context_falls_back():
    a = np.array([2.0 ** -149, 3 * 2.0 ** -149])
    out = np.empty(2)
    # a probe that answers as FTZ/DAZ hardware would: the kernel computes nothing
    assert H.add(a, a, out, np.array([2.0 ** -148, 0.0], dtype=np.float32)) == H.FTZ
    import torch
    ctx = scalars.get("binary32")
    old = torch.set_flush_denormal(True)
    try:
        if old is False and torch.set_flush_denormal(True):
            assert H.add(a, a, out, H.PROBE) == H.FTZ      # really on in this thread
        got = ctx.add(a, a)
        got_m = ctx.mul(a, np.array([0.5, 0.5]))
    finally:
        torch.set_flush_denormal(False)
    same_bits(got, np.array([2.0 ** -148, 6 * 2.0 ** -149]))
    same_bits(got_m, np.array([0.0, 2.0 ** -148]))          # 1.5 * 2^-149 ties to even


def test_nonmember_raises_and_wide_nan_payloads_follow_the_emulation():
    ctx = scalars.get("binary32")
    with pytest.raises(ContextError, match=r"not a binary32 value"):
        ctx.add(np.array([1.0, 1.0 + 2.0 ** -40]), np.array([1.0, 1.0]))
    nan = np.array([0x7FF8000000000123, 0xFFF0000000000001],
                   dtype=np.uint64).view(np.float64)          # payloads float32 cannot carry
    out = np.empty(2)
    assert H.add(nan, np.ones(2), out, H.PROBE) == H.NONMEMBER
    same_bits(ctx.add(nan, np.ones(2)), emulated("add", nan, np.ones(2)))


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
        same_bits(getattr(ctx, op)(a, b).ravel(),
                  formats.round_to_format(f(a, b), "binary32").ravel())
        same_bits(getattr(ctx, op)(b, a).ravel(),
                  formats.round_to_format(f(b, a), "binary32").ravel())
