"""Error metrics recomputed independently: ULPs from bit patterns, relative error from
exact rationals, correct rounding of double-double references against the exact path."""
from fractions import Fraction

import gmpy2
import mpmath
import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.experiments import metrics
from scalarlab.scalars import formats


def _ord32(x):
    """Ordinal of binary32 values by hand: the int32 bit pattern, negatives mirrored."""
    b = np.asarray(x, dtype=np.float32).view(np.int32).astype(np.int64)
    return np.where(b < 0, -(b & 0x7FFFFFFF), b)


def _ord16(x):
    b = np.asarray(x, dtype=np.float16).view(np.int16).astype(np.int64)
    return np.where(b < 0, -(b & 0x7FFF), b)


def _mpf_fraction(v):
    man, exp = v.man_exp                                 # mpmath: man_exp drops the sign
    return (-1 if v < 0 else 1) * Fraction(int(man)) * Fraction(2) ** int(exp)


def _bf16_from_bits(bits):
    """bfloat16 values from 16-bit patterns: they are the top half of a binary32 pattern."""
    return (np.asarray(bits, dtype=np.uint32) << 16).view(np.float32).astype(np.float64)


def test_ulps_and_bits_binary32_from_bit_patterns():
    rng = np.random.default_rng(1)
    base = rng.integers(0x00000001, 0x7F000000, size=500).astype(np.int32)
    step = rng.integers(-40, 40, size=500).astype(np.int32)
    sign = rng.choice([1, -1], size=500)
    ref = base.view(np.float32).astype(np.float64) * sign
    val = (base + step).view(np.float32).astype(np.float64) * sign
    e = metrics.entry_errors(val, 0 * val, ref, 0 * ref, formats.get("binary32"))
    hand = np.abs(_ord32(val) - _ord32(ref))
    assert np.array_equal(e.ulps, hand.astype(float))
    assert np.array_equal(e.ulps, np.abs(step).astype(float))
    assert np.allclose(e.bits, np.log2(1 + hand), rtol=0, atol=1e-15)


def test_ulps_cross_zero_and_signed_zero_binary16():
    fmt = formats.get("binary16")
    tiny = np.float16(2.0 ** -24)                       # smallest subnormal
    vals = np.array([-3 * tiny, 0.0, -0.0, 5 * tiny, 1.0, -1.0], dtype=np.float64)
    refs = np.array([2 * tiny, -0.0, 0.0, -5 * tiny, np.float16(1.0009765625), -1.0])
    e = metrics.entry_errors(vals, 0 * vals, refs, 0 * refs, fmt)
    hand = np.abs(_ord16(vals) - _ord16(refs)).astype(float)
    assert list(hand) == [5, 0, 0, 10, 1, 0]
    assert np.array_equal(e.ulps, hand)
    assert np.array_equal(e.bits, np.log2(1 + hand))


def test_ulps_bfloat16_from_bit_patterns():
    fmt = formats.get("bfloat16")
    bits = np.array([0x3F80, 0x3F81, 0x0001, 0x8003, 0x7F7F], dtype=np.uint32)
    ref_bits = np.array([0x3F85, 0x3F80, 0x8001, 0x8001, 0x7F70], dtype=np.uint32)
    v, r = _bf16_from_bits(bits), _bf16_from_bits(ref_bits)

    def o(b):
        b = b.astype(np.int64)
        return np.where(b & 0x8000, -(b & 0x7FFF), b)
    hand = np.abs(o(bits) - o(ref_bits)).astype(float)
    assert list(hand) == [5, 1, 2, 2, 15]
    e = metrics.entry_errors(v, 0 * v, r, 0 * r, fmt)
    assert np.array_equal(e.ulps, hand)


def test_reference_is_correctly_rounded_before_ulps():
    """The context value is compared with RN_fmt(reference), not with the raw reference."""
    fmt = formats.get("binary32")
    one = 1.0
    next1 = float(np.nextafter(np.float32(1), np.float32(2)))
    mid = (one + next1) / 2                              # exact binary32 midpoint
    # hi is the midpoint, lo pushes the exact value just above it -> RN32 = next1.
    e = metrics.entry_errors(np.array([next1, one]), np.zeros(2), np.array([mid, mid]),
                             np.array([1e-30, 1e-30]), fmt)
    assert list(e.ulps) == [0.0, 1.0]
    # lo below: RN32 = 1.0
    e = metrics.entry_errors(np.array([next1, one]), np.zeros(2), np.array([mid, mid]),
                             np.array([-1e-30, -1e-30]), fmt)
    assert list(e.ulps) == [1.0, 0.0]
    # exact tie (lo = 0): ties-to-even gives 1.0 (even significand)
    e = metrics.entry_errors(np.array([one]), np.zeros(1), np.array([mid]), np.zeros(1), fmt)
    assert list(e.ulps) == [0.0]


@pytest.mark.parametrize("fmt_name", ["binary32", "binary16", "bfloat16", "e4m3"])
def test_correctly_rounded_double_double_matches_exact_rounding(fmt_name):
    fmt = formats.get(fmt_name)
    rng = np.random.default_rng(7)
    # values near format midpoints, where double rounding would go wrong
    base = formats.round_to_format(rng.uniform(-4, 4, 400), fmt)
    up = formats.next_up(base, fmt)
    hi = (base + up) / 2
    lo = rng.choice([-1.0, 0.0, 1.0], 400) * np.abs(hi) * 2.0 ** -60
    got = metrics.correctly_rounded(hi, lo, fmt)
    want = np.array([formats.round_fraction(Fraction(h) + Fraction(l), fmt)
                     for h, l in zip(hi, lo)])
    assert np.array_equal(got, want)


def test_exact_split_mpmath_mpq_fraction():
    ctx = mpmath.MPContext()
    ctx.prec = 200
    vals = [ctx.mpf(1) / 3, -ctx.mpf(2) / 7, ctx.mpf(0), ctx.mpf(10) ** -310,
            ctx.mpf(2) ** 1100]
    for v in vals:
        hi, lo = metrics.exact_split(np.array([v], dtype=object))
        q = _mpf_fraction(v)
        h = float(q) if abs(q) < Fraction(2) ** 1024 else float("inf") * (1 if q > 0 else -1)
        assert hi[0] == h
        if np.isfinite(h):
            assert lo[0] == float(q - Fraction(h))
    q = gmpy2.mpq(1, 3)
    hi, lo = metrics.exact_split(np.array([q, Fraction(-5, 11)], dtype=object))
    assert hi[0] == 1 / 3 and lo[0] == float(Fraction(1, 3) - Fraction(1 / 3))
    assert hi[1] == -5 / 11 and lo[1] == float(Fraction(-5, 11) - Fraction(-5 / 11))


def _mpfr_f64(m, e):
    """RN64 of the exact m * 2^e by MPFR (binary64 exponent range, subnormals)."""
    ctx = gmpy2.context(precision=53, emin=-1073, emax=1024, subnormalize=True)
    with ctx:
        return float(gmpy2.mul_2exp(gmpy2.mpfr(m), e))


@pytest.mark.parametrize("top", [-(2 ** 128), -5000, -1080, -1077, -1076, -1075, -1074,
                                 1023, 1024, 1025, 5000, 2 ** 128])
def test_exact_split_exponents_past_float64(top):
    """Values whose binary exponent lies far outside float64's (exp(-3.4e38) of GPT-2's
    attention mask is 2^-4.9e38) split without building 2^|e| as an integer; hi is MPFR's
    float64 rounding of the exact value, with either sign."""
    ctx = mpmath.MPContext()
    ctx.prec = 80
    for man in (1, 3, (1 << 79) - 1):
        for sign in (1, -1):
            v = ctx.mpf((sign * man, top - man.bit_length()))
            hi, lo = metrics.exact_split(np.array([v], dtype=object))
            if abs(top) < 10 ** 6:
                want = _mpfr_f64(sign * man, top - man.bit_length())
            else:                                  # MPFR's exponent range ends at 2^62
                want = (float("inf") if top > 0 else 0.0) * sign
            assert hi[0] == want and np.signbit(hi[0]) == (sign < 0), (man, sign, hi, want)
            if np.isfinite(want) and want != 0:
                q = Fraction(sign * man) * Fraction(2) ** (top - man.bit_length())
                assert lo[0] == float(q - Fraction(want))
            else:
                assert lo[0] == 0.0


def test_exact_split_mpfr_with_wide_exponent():
    with gmpy2.context(precision=64, emin=-(2 ** 40), emax=2 ** 40):
        tiny, huge = gmpy2.exp(gmpy2.mpfr("-1e12")), -gmpy2.exp(gmpy2.mpfr("1e12"))
        third = gmpy2.mpfr(1) / 3
    hi, lo = metrics.exact_split(np.array([tiny, huge, third], dtype=object))
    assert hi[0] == 0.0 and not np.signbit(hi[0]) and lo[0] == 0.0
    assert hi[1] == -np.inf
    m, e = third.as_mantissa_exp()
    assert hi[2] == _mpfr_f64(int(m), int(e))
    assert lo[2] == float(Fraction(int(m)) * Fraction(2) ** int(e) - Fraction(hi[2]))


def test_compare_metrics_on_the_attention_mask_constant():
    """The compare reference of softmax over a row holding float32's lowest value (the
    additive mask of GPT-2 exports) splits: masked entries are exactly 0 in float64."""
    from scalarlab.graph import Graph, Node, OpKind
    from scalarlab.experiments.cases import GraphCase
    from scalarlab.experiments.compare import compare
    lowest = float(np.finfo(np.float32).min)
    g = Graph([Node(0, [], "input", [4]),
               Node(1, [], "const", [4]),
               Node(2, [0, 1], "add", [4]),
               Node(3, [2], OpKind("softmax", axis=0), [4])])
    from scalarlab.graph.payload import Payload
    p = Payload()
    p.set(1, {"value": np.array([0.0, 0.0, lowest, lowest])}, op="const")
    case = GraphCase("masked-softmax", g, p)
    x = np.array([[0.25, -0.5, 0.75, 1.0]])
    res = compare(case, [scalars.get("float64"), scalars.get("binary32")], x,
                  reference="mpmath:200")
    out = res.rows[res.rows["node"] == 3]
    assert list(out["context"]) == ["float64", "binary32"]
    assert (out["nonfinite"] == 0).all()
    assert out["max_ulps"].max() <= 1
    hi, lo = res.reference.values[3]
    want = [float(mpmath.exp(0.25) / (mpmath.exp(0.25) + mpmath.exp(-0.5))),
            float(mpmath.exp(-0.5) / (mpmath.exp(0.25) + mpmath.exp(-0.5)))]
    assert hi.reshape(-1)[:2].tolist() == want and hi.reshape(-1)[2:].tolist() == [0.0, 0.0]


def test_relative_and_absolute_error_against_exact_rationals():
    ctx = mpmath.MPContext()
    ctx.prec = 200
    rng = np.random.default_rng(3)
    refs = [ctx.mpf(int(n)) / int(d) for n, d in zip(rng.integers(-10**6, 10**6, 50),
                                                      rng.integers(1, 10**6, 50))]
    ref_arr = np.array(refs, dtype=object)
    rh, rl = metrics.exact_split(ref_arr)
    v = formats.round_to_format(rh, formats.get("bfloat16"))
    e = metrics.entry_errors(v, np.zeros_like(v), rh, rl, formats.get("bfloat16"))
    for i, r in enumerate(refs):
        rq = _mpf_fraction(r)
        err = abs(Fraction(v[i]) - rq)
        assert e.abs_err[i] == pytest.approx(float(err), rel=1e-13, abs=0)
        if rq != 0:
            assert e.rel_err[i] == pytest.approx(float(err / abs(rq)), rel=1e-13, abs=0)


def test_relative_error_at_zero_and_nan_policy():
    fmt = formats.get("binary32")
    v = np.array([0.0, 2.0 ** -10, np.nan, np.nan, 1.0])
    r = np.array([0.0, 0.0, 1.0, np.nan, np.inf])
    e = metrics.entry_errors(v, np.zeros(5), r, np.zeros(5), fmt)
    assert e.rel_err[0] == 0.0 and e.rel_err[1] == np.inf
    assert e.abs_err[2] == np.inf and e.ulps[2] == np.inf
    assert e.abs_err[3] == 0.0 and e.ulps[3] == 0.0          # both NaN: agree
    assert e.abs_err[4] == np.inf
    assert e.nonfinite == 2
    s = metrics.summarize(e)
    assert s["max_ulps"] == np.inf and s["nonfinite"] == 2


def test_float64_ulps_in_binary64():
    fmt = metrics.format_of(scalars.get("float64"))
    assert metrics.is_binary64(fmt)
    # The emulated binary64 context has the same format; hardware float64 differs from it
    # only in how it reduces, not in its values' format.
    assert metrics.format_of(scalars.get("binary64")) == fmt
    for name in ("mpmath:200", "rational", "fp32-real", "complex128"):
        assert metrics.format_of(scalars.get(name)) is None, name
    a = np.array([0.1, -2.5])
    b = np.array([np.nextafter(np.nextafter(0.1, 1), 1), -2.5])
    e = metrics.entry_errors(b, 0 * b, a, 0 * a, fmt)
    hand = np.abs(a.view(np.int64) - b.view(np.int64)).astype(float)
    assert np.array_equal(e.ulps, hand) and list(hand) == [2.0, 0.0]


def test_first_divergence():
    assert metrics.first_divergence([0.0, 1.0, 2.5, 5.0], 2.0) == 2
    assert metrics.first_divergence([0.0, float("nan"), 1.0], 1.0) is None
    assert metrics.first_divergence([0.0, float("inf")], 30.0) == 1


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=200, deadline=None)
@given(st.integers(-(2 ** 31) + 1, 2 ** 31 - 1).filter(lambda b: (b & 0x7F800000) != 0x7F800000),
       st.integers(-(2 ** 31) + 1, 2 ** 31 - 1).filter(lambda b: (b & 0x7F800000) != 0x7F800000))
def test_property_binary32_ulps_are_bit_pattern_distances(a_bits, b_bits):
    a = np.array([a_bits], dtype=np.int32).view(np.float32).astype(np.float64)
    b = np.array([b_bits], dtype=np.int32).view(np.float32).astype(np.float64)
    e = metrics.entry_errors(a, np.zeros(1), b, np.zeros(1), formats.get("binary32"))
    d = abs(int(_ord32(a)[0]) - int(_ord32(b)[0]))
    assert e.ulps[0] == d and e.bits[0] == np.log2(1.0 + d)
    q = abs(Fraction(float(a[0])) - Fraction(float(b[0])))
    assert e.abs_err[0] == float(q)                    # exact: both are binary32 values
