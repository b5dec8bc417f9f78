"""+ - * / sqrt fma of the binary contexts against MPFR (gmpy2) with the format's precision,
exponent range and subnormals: random and adversarial operands, every pair for fp8."""
from __future__ import annotations

import gmpy2
import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.scalars import formats
from scalarlab.scalars.binary import BinaryContext


def oracle(fmt, op, *cols):
    """MPFR's correctly rounded op in the format, element by element; the format's
    overflow rule (E4M3FN: NaN) applied as formats.gmpy2_context documents.  Operands are
    format values, so gmpy2's conversion of the Python floats at the context's precision
    is exact."""
    ctx = formats.gmpy2_context(fmt)
    f = getattr(ctx, op)
    lists = []
    for c in cols:
        c = np.asarray(c, dtype=np.float64).reshape(-1)
        fin = np.isfinite(c)
        assert (formats.round_to_format(c[fin], fmt) == c[fin]).all()
        lists.append(c.tolist())
    out = np.fromiter(map(float, map(f, *lists)), np.float64, len(lists[0]))
    return formats.round_to_format(out, fmt)


def assert_same(got, want, what, *cols):
    """Equal values, equal signs of zero, NaN where NaN."""
    got = np.asarray(got)
    ok = ((got == want) & (np.signbit(got) == np.signbit(want))) | (np.isnan(got) & np.isnan(want))
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        ops = ", ".join(repr(float(c[i])) for c in cols)
        raise AssertionError(f"{what}: {(~ok).sum()} mismatches; first at {i}: op({ops}) = "
                             f"{float(got[i])!r}, MPFR says {float(want[i])!r}")


def random_values(fmt, n, rng):
    """Format values spread over every binade: random bit patterns (all encodings, so
    subnormals, the extremes, inf and NaN too) plus values near 1."""
    fmt = formats.get(fmt)
    if fmt.total_bits == 64:
        vals = rng.integers(-2 ** 63, 2 ** 63 - 1, n // 2, dtype=np.int64).view(np.float64)
    else:
        vals = formats.decode(rng.integers(0, 1 << fmt.total_bits, n // 2), fmt)
    near = formats.round_to_format(rng.standard_normal(n - n // 2) * 4.0, fmt)
    out = np.concatenate([vals, near])
    rng.shuffle(out)
    return out


def adversarial_binary32(rng):
    """Hard cases for binary32: ties, tiny addends, subnormal and overflow boundaries."""
    f = formats.binary32
    k = 2000
    a = formats.round_to_format(rng.uniform(1, 2, k) * np.exp2(rng.integers(-140, 127, k)), f)
    u = formats.ulp(a, f)
    # a + b with b = exactly half an ulp (a tie), a quarter, just over half, tiny.
    tiny_b = np.concatenate([u / 2, -u / 2, u / 4, u / 2 + u / 2 ** 20, u * 2.0 ** -30,
                             -u / 2 - u * 2.0 ** -22])
    tiny_b = formats.round_to_format(tiny_b, f)
    add_a = np.tile(a, 6)
    # Products that are exact midpoints: odd 12- and 13-bit integers give an odd 25-bit
    # product (a tie at p = 24) about half the time; scaled over the exponent range.
    m1 = (rng.integers(1 << 11, 1 << 12, k) * 2 + 1).astype(np.float64)
    m2 = (rng.integers(1 << 10, 1 << 11, k) * 2 + 1).astype(np.float64)
    s1 = rng.integers(-80, 50, k)
    s2 = rng.integers(-80, 50, k)
    tie_a, tie_b = np.ldexp(m1, s1), np.ldexp(m2, s2)
    # Products landing near min_normal, min_subnormal and max_finite.
    x = formats.round_to_format(rng.uniform(1, 2, k), f)
    near = []
    for target in (2.0 ** -126, 2.0 ** -149, 2.0 ** -149 * 3, f.max_finite, 2.0 ** -127):
        near.append(formats.round_to_format(target / x * (1 + rng.uniform(-1e-6, 1e-6, k)), f))
    near_a = np.tile(x, len(near))
    near_b = np.concatenate(near)
    # Sums at the overflow threshold: max + half ulp (tie -> inf), max + less than that.
    mx = f.max_finite
    hu = 2.0 ** 103
    ov_a = np.array([mx, mx, mx, -mx, mx, 2.0 ** 127, 2.0 ** -149, -2.0 ** -149, 2.0 ** -126])
    ov_b = np.array([hu, hu / 2, 2 * hu, -hu, -mx, 2.0 ** 127, 2.0 ** -149, 2.0 ** -149,
                     -2.0 ** -149])
    A = np.concatenate([add_a, tie_a, near_a, ov_a])
    B = np.concatenate([tiny_b, tie_b, near_b, ov_b])
    assert (formats.round_to_format(A, f) == A).all() and (formats.round_to_format(B, f) == B).all()
    return A, B


@pytest.fixture(scope="module")
def b32_operands():
    rng = np.random.default_rng(20261129)
    n = 100_000
    a = random_values("binary32", n, rng)
    b = random_values("binary32", n, rng)
    # Close exponents too (cancellation in sub, quotients near 1).
    c = formats.round_to_format(a * (1 + rng.uniform(-1e-3, 1e-3, n)), "binary32")
    b = np.where(rng.random(n) < 0.2, c, b)
    A, B = adversarial_binary32(rng)
    return np.concatenate([a, A]), np.concatenate([b, B])


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_binary32_elementwise_vs_mpfr(op, b32_operands):
    ctx = scalars.get("binary32")
    a, b = b32_operands
    assert a.size >= 100_000
    got = getattr(ctx, op)(a, b)
    assert_same(got, oracle(ctx.fmt, op, a, b), f"binary32 {op}", a, b)


def test_binary32_sqrt_vs_mpfr(b32_operands):
    ctx = scalars.get("binary32")
    a, b = b32_operands
    # Perfect squares, squares of midpoints' neighbours, subnormals, negatives, -0.
    rng = np.random.default_rng(5)
    m = formats.round_to_format(rng.uniform(1, 2, 5000), "binary32")
    sq = formats.round_to_format(np.concatenate([m * m, np.ldexp(m * m, -140)]), "binary32")
    x = np.concatenate([a, np.abs(b), sq, [-0.0, 0.0, -1.0, np.inf, -np.inf, 2.0 ** -149]])
    assert_same(ctx.sqrt(x), oracle(ctx.fmt, "sqrt", x), "binary32 sqrt", x)


def test_binary32_fma_vs_mpfr(b32_operands):
    ctx = scalars.get("binary32")
    f = ctx.fmt
    a, b = b32_operands
    rng = np.random.default_rng(11)
    n = a.size
    c = random_values(f, n, rng)
    # Cancellation: c = -RN(a*b), leaving the exact tail of the product.
    with np.errstate(all="ignore"):
        cancel = formats.round_to_format(-(a * b), f)
    c = np.where(rng.random(n) < 0.3, cancel, c)
    # Midpoint ties: (1 + k 2^-23)(1 + l 2^-23) - 1 has a 2^-46 tail.
    k = rng.integers(1, 64, 3000).astype(float)
    l = rng.integers(1, 64, 3000).astype(float)
    s = rng.integers(-60, 60, 3000)
    ta = np.ldexp(1 + k * 2.0 ** -23, s)
    tb = 1 + l * 2.0 ** -23
    tc = -np.ldexp(np.ones(3000), s)
    # Tiny addends next to an exact product.
    ua = formats.round_to_format(rng.uniform(1, 2, 3000), f)
    uc = formats.round_to_format(ua * ua * 2.0 ** -25 * rng.choice([-1, 1], 3000), f)
    A = np.concatenate([a, ta, ua])
    B = np.concatenate([b, tb, ua])
    C = np.concatenate([c, tc, uc])
    got = ctx.fma(A, B, C)
    assert_same(got, oracle(f, "fma", A, B, C), "binary32 fma", A, B, C)


@pytest.mark.parametrize("name", ["e4m3", "e5m2"])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_fp8_every_pair(name, op):
    ctx = scalars.get(name)
    v = formats.decode(np.arange(256), name)
    if name == "e4m3":
        v = v[~np.isinf(v)]
    a, b = np.meshgrid(v, v)
    a, b = a.reshape(-1), b.reshape(-1)
    got = getattr(ctx, op)(a, b)
    assert_same(got, oracle(ctx.fmt, op, a, b), f"{name} {op}", a, b)


def test_e4m3_overflow_is_nan_not_inf():
    ctx = scalars.get("e4m3")
    big = np.array([448.0, 448.0, 256.0, -448.0, 1.0])
    got = ctx.add(big, np.array([16.0, 32.0, 224.0, -32.0, 0.0]))
    # 464 is the tie between 448 (even) and 480 (not a value): 448; beyond: NaN.
    assert got[0] == 448.0 and np.isnan(got[1]) and np.isnan(got[2]) and np.isnan(got[3])
    assert not np.isinf(got).any()
    assert np.isnan(ctx.div(np.array([1.0]), np.array([0.0])))[0]
    sat = BinaryContext(formats.Format(4, 3, has_inf=False, nan_encoding="fn",
                                                      saturate=True))
    got = sat.add(big, np.array([16.0, 32.0, 224.0, -32.0, 0.0]))
    assert got.tolist() == [448.0, 448.0, 448.0, -448.0, 1.0]


@pytest.mark.parametrize("name", ["bfloat16", "binary16", "tf32"])
def test_narrow_formats_random(name):
    ctx = scalars.get(name)
    rng = np.random.default_rng(abs(hash(name)) % 2 ** 32)
    a = random_values(name, 20_000, rng)
    b = random_values(name, 20_000, rng)
    c = random_values(name, 20_000, rng)
    for op in ("add", "sub", "mul", "div"):
        assert_same(getattr(ctx, op)(a, b), oracle(ctx.fmt, op, a, b), f"{name} {op}", a, b)
    assert_same(ctx.sqrt(a), oracle(ctx.fmt, "sqrt", a), f"{name} sqrt", a)
    assert_same(ctx.fma(a, b, c), oracle(ctx.fmt, "fma", a, b, c), f"{name} fma", a, b, c)


def wide_operands(fmt, n, rng):
    """Operands for formats served by the error-free-transformation path, including
    products and quotients that underflow float64's normal range (the MPFR fallback)."""
    fmt = formats.get(fmt)
    a = random_values(fmt, n, rng)
    b = random_values(fmt, n, rng)
    lo = fmt.emin - fmt.man_bits
    tiny = formats.round_to_format(rng.uniform(1, 2, 500) * np.exp2(rng.integers(lo, lo + 60, 500)), fmt)
    mid = formats.round_to_format(rng.uniform(1, 2, 500) * np.exp2(rng.integers(-60, 0, 500)), fmt)
    return np.concatenate([a, tiny, mid]), np.concatenate([b, mid, tiny])


@pytest.mark.parametrize("name", ["binary(8,30)", "binary(11,40)", "binary(5,51)",
                                  "binary(10,20)", "binary64"])
def test_wide_formats_vs_mpfr(name):
    ctx = scalars.get(name)
    rng = np.random.default_rng(len(name))
    a, b = wide_operands(ctx.fmt, 20_000, rng)
    c = random_values(ctx.fmt, a.size, rng)
    with np.errstate(all="ignore"):
        cancel = formats.round_to_format(-(a * b), ctx.fmt)
    c = np.where(rng.random(a.size) < 0.3, cancel, c)
    for op in ("add", "sub", "mul", "div"):
        assert_same(getattr(ctx, op)(a, b), oracle(ctx.fmt, op, a, b), f"{name} {op}", a, b)
    x = np.abs(a)
    assert_same(ctx.sqrt(x), oracle(ctx.fmt, "sqrt", x), f"{name} sqrt", x)
    assert_same(ctx.fma(a, b, c), oracle(ctx.fmt, "fma", a, b, c), f"{name} fma", a, b, c)


def test_no_subnormal_format_vs_mpfr():
    fmt = formats.Format(5, 10, subnormals=False)
    ctx = BinaryContext(fmt)
    rng = np.random.default_rng(3)
    v = formats.decode(np.arange(1 << 16), formats.binary16)
    v = formats.round_to_format(v[~np.isnan(v)], fmt)
    a = rng.choice(v, 20_000)
    b = rng.choice(v, 20_000)
    for op in ("add", "sub", "mul", "div"):
        assert_same(getattr(ctx, op)(a, b), oracle(fmt, op, a, b), f"nosub {op}", a, b)


def test_square_neg_abs_exact():
    ctx = scalars.get("bfloat16")
    rng = np.random.default_rng(8)
    a = random_values("bfloat16", 5000, rng)
    assert_same(ctx.square(a), oracle(ctx.fmt, "mul", a, a), "bfloat16 square", a)
    assert_same(ctx.neg(a), -a, "neg", a)
    assert_same(ctx.abs(a), np.abs(a), "abs", a)
    b = random_values("bfloat16", 5000, rng)
    assert_same(ctx.maximum(a, b), np.maximum(a, b), "maximum", a, b)
    assert_same(ctx.minimum(a, b), np.minimum(a, b), "minimum", a, b)


def test_broadcasting_and_shapes():
    ctx = scalars.get("binary16")
    a = ctx.convert(np.arange(6.0).reshape(2, 3) / 7)
    b = ctx.convert(np.array([1 / 3, 2 / 3, 1.0]))
    got = ctx.add(a, b)
    assert got.shape == (2, 3)
    A, B = np.broadcast_arrays(a, b)
    want = oracle(ctx.fmt, "add", A.reshape(-1), B.reshape(-1))
    assert_same(got.reshape(-1), want, "broadcast add", A.reshape(-1), B.reshape(-1))
    s = ctx.mul(np.asarray(ctx.convert(3.0)), a)
    assert s.shape == (2, 3) and isinstance(s, np.ndarray)
    with pytest.raises(scalars.ContextError, match=r"binary16.*add.*\[2, 3\] vs \[2\]"):
        ctx.add(a, ctx.convert(np.ones(2)))


@pytest.mark.parametrize("fmt", [formats.get("binary(2,1)"), formats.get("binary(9,24)"),
                                 formats.get("binary(9,25)"), formats.get("binary(4,30)"),
                                 formats.Format(5, 10, saturate=True),
                                 formats.Format(4, 3, has_inf=False, nan_encoding="fn",
                                                saturate=True)],
                         ids=lambda f: f.name)
def test_edge_formats_vs_mpfr(fmt):
    """The smallest format, both sides of the p <= 25 fast-path limit, a tiny exponent
    range with a wide significand, and saturating formats (overflow -> max_finite)."""
    ctx = BinaryContext(fmt)
    rng = np.random.default_rng(fmt.total_bits)
    plain = formats.Format(fmt.exp_bits, fmt.man_bits)
    a, b, c = (formats.round_to_format(random_values(plain, 4000, rng), fmt) for _ in range(3))
    for op in ("add", "sub", "mul", "div"):
        assert_same(getattr(ctx, op)(a, b), oracle(fmt, op, a, b), f"{fmt} {op}", a, b)
    assert_same(ctx.sqrt(a), oracle(fmt, "sqrt", a), f"{fmt} sqrt", a)
    assert_same(ctx.fma(a, b, c), oracle(fmt, "fma", a, b, c), f"{fmt} fma", a, b, c)
    if fmt.saturate:
        assert np.isfinite(ctx.mul(a, b)[~np.isnan(ctx.mul(a, b))]).all()
