"""The ``rational`` context against ``fractions.Fraction`` (the exact oracle)."""
from fractions import Fraction

import gmpy2
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from scalarlab import scalars
from scalarlab.scalars import ContextError

R = scalars.get("rational")
fractions_ = st.fractions(max_denominator=10**12).filter(lambda f: abs(f) < 10**15)


def frac_array(vals):
    return np.array([Fraction(int(v.numerator), int(v.denominator)) for v in vals], dtype=object)


def as_fracs(v):
    return [Fraction(int(t.numerator), int(t.denominator)) for t in np.asarray(v).reshape(-1)]


def test_values_are_object_arrays_of_mpq():
    v = R.convert([1, "0.1", Fraction(1, 3), 2.5])
    assert v.dtype == object and v.shape == (4,)
    assert all(isinstance(t, type(gmpy2.mpq(0))) for t in v)
    assert as_fracs(v) == [1, Fraction(1, 10), Fraction(1, 3), Fraction(5, 2)]
    s = R.add(R.convert(1), R.convert("1/2"))
    assert isinstance(s, np.ndarray) and s.shape == () and s[()] == gmpy2.mpq(3, 2)


def test_convert_floats_exactly_and_decimal_strings_exactly():
    x = np.array([0.1, -1e-310, 1e300, 2.0**-1074])
    assert as_fracs(R.convert(x)) == [Fraction(t) for t in x.tolist()]
    assert as_fracs(R.convert(["0.1", "-2.5e-3", " 7/21 ", "1e3"])) == \
        [Fraction(1, 10), Fraction(-1, 400), Fraction(1, 3), 1000]


@pytest.mark.parametrize("bad", [np.array([1.0, np.nan]), np.array([np.inf]), ["abc"], [float("-inf")]])
def test_convert_rejects_non_rationals(bad):
    with pytest.raises(ContextError, match="rational"):
        R.convert(bad)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(fractions_, fractions_, fractions_), min_size=1, max_size=12))
def test_arithmetic_is_exact(triples):
    a, b, c = (list(t) for t in zip(*triples))
    A, B, C = R.convert(frac_array(a)), R.convert(frac_array(b)), R.convert(frac_array(c))
    assert as_fracs(R.add(A, B)) == [x + y for x, y in zip(a, b)]
    assert as_fracs(R.sub(A, B)) == [x - y for x, y in zip(a, b)]
    assert as_fracs(R.mul(A, B)) == [x * y for x, y in zip(a, b)]
    assert as_fracs(R.fma(A, B, C)) == [x * y + z for x, y, z in zip(a, b, c)]
    assert as_fracs(R.square(A)) == [x * x for x in a]
    assert as_fracs(R.neg(A)) == [-x for x in a]
    assert as_fracs(R.abs(A)) == [abs(x) for x in a]
    assert as_fracs(R.maximum(A, B)) == [max(x, y) for x, y in zip(a, b)]
    assert as_fracs(R.minimum(A, B)) == [min(x, y) for x, y in zip(a, b)]
    assert list(R.less(A, B)) == [x < y for x, y in zip(a, b)]
    assert as_fracs(R.sign(A)) == [(x > 0) - (x < 0) for x in a]
    assert as_fracs(R.heaviside(A)) == [1 if x > 0 else 0 for x in a]
    assert as_fracs(R.sum(A)) == [sum(a, Fraction(0))]
    assert as_fracs(R.amax(A)) == [max(a)]
    assert int(R.argmax(A, 0)) == a.index(max(a))
    if all(y != 0 for y in b):
        assert as_fracs(R.div(A, B)) == [x / y for x, y in zip(a, b)]


def test_to_float64_is_correctly_rounded():
    rng = np.random.default_rng(5)
    qs = [Fraction(int(n), int(d)) for n, d in zip(rng.integers(-2**62, 2**62, 500),
                                                   rng.integers(1, 2**62, 500))]
    # near-halfway and subnormal cases: Fraction.__float__ is correctly rounded
    qs += [Fraction(1, 2**1075) + Fraction(1, 2**1200), Fraction(3, 2**1076),
           Fraction(2**53 + 1, 2**53), Fraction(2**54 + 3, 2**54) + Fraction(1, 2**200),
           Fraction(10**400), -Fraction(10**400), Fraction(0)]
    got = R.to_float64(R.convert(frac_array(qs)))
    want = []
    for q in qs:
        try:
            want.append(float(q))
        except OverflowError:
            want.append(np.inf if q > 0 else -np.inf)
    np.testing.assert_array_equal(got, np.array(want))
    assert got[-7] == 2.0**-1074  # 2^-1075 + tiny rounds up, not to the tie's even 0


def test_matmul_sum_exact_and_batched():
    rng = np.random.default_rng(0)
    a = [[Fraction(int(rng.integers(-50, 50)), int(rng.integers(1, 30))) for _ in range(4)]
         for _ in range(3)]
    b = [[Fraction(int(rng.integers(-50, 50)), int(rng.integers(1, 30))) for _ in range(2)]
         for _ in range(4)]
    A, B = R.convert(a), R.convert(b)
    got = R.matmul(A, B)
    want = [[sum((a[i][k] * b[k][j] for k in range(4)), Fraction(0)) for j in range(2)]
            for i in range(3)]
    assert got.shape == (3, 2)
    assert as_fracs(got) == [w for row in want for w in row]
    batched = R.matmul(R.stack([A, A]), B)
    assert batched.shape == (2, 3, 2) and as_fracs(batched[1]) == as_fracs(got)
    assert as_fracs(R.matmul(A, R.convert([b[k][0] for k in range(4)]))) == \
        [want[i][0] for i in range(3)]
    assert as_fracs(R.sum(A, axis=0)) == [sum(col, Fraction(0)) for col in zip(*a)]
    assert R.sum(A, axis=1, keepdims=True).shape == (3, 1)
    assert as_fracs(R.sum(R.zeros((0, 3)), axis=0)) == [0, 0, 0]
    assert as_fracs(R.matmul(R.ones((2, 0)), R.ones((0, 2)))) == [0] * 4


def test_sqrt_perfect_squares_only():
    v = R.convert(["4/9", "0", "144", "1/10000", "2.25"])
    assert as_fracs(R.sqrt(v)) == [Fraction(2, 3), 0, 12, Fraction(1, 100), Fraction(3, 2)]
    with pytest.raises(ContextError, match=r"rational cannot compute sqrt honestly.*2/3"):
        R.sqrt(R.convert(["4", "2/3"]))
    with pytest.raises(ContextError, match=r"sqrt\(-1/4\).*negative"):
        R.sqrt(R.convert(["-1/4"]))


@pytest.mark.parametrize("op", ["exp", "log", "tanh", "sigmoid", "softplus", "sin", "cos", "erf"])
def test_transcendentals_raise_naming_op_and_context(op):
    with pytest.raises(ContextError, match=rf"context rational cannot compute {op} honestly"):
        getattr(R, op)(R.convert(["1/2", "3"]))


def test_exact_special_points():
    z, o = R.zeros((2,)), R.ones((2,))
    assert as_fracs(R.exp(z)) == [1, 1]
    assert as_fracs(R.log(o)) == [0, 0]
    assert as_fracs(R.tanh(z)) == [0, 0] and as_fracs(R.sin(z)) == [0, 0]
    assert as_fracs(R.cos(z)) == [1, 1] and as_fracs(R.sigmoid(z)) == [Fraction(1, 2)] * 2
    with pytest.raises(ContextError, match="softplus"):
        R.softplus(z)  # log 2 is irrational
    with pytest.raises(ContextError, match=r"log\(0\).*non-positive"):
        R.log(R.convert([1, 0]))


def test_division_by_zero_names_op_and_values():
    with pytest.raises(ContextError, match=r"context rational: div\(7/2, 0\) at index \[1\]"):
        R.div(R.convert(["1", "3.5"]), R.convert(["2", "0"]))


def test_foreign_values_shapes_and_nan():
    a = R.convert([1, 2])
    with pytest.raises(ContextError, match=r"rational: add: got a float64 ndarray"):
        R.add(a, np.array([1.0, 2.0]))
    with pytest.raises(ContextError, match=r"fp32-real value"):
        R.mul(a, scalars.get("fp32-real").convert([1, 2]))
    with pytest.raises(ContextError, match=r"shapes do not broadcast: \[2\] vs \[3\]"):
        R.add(a, R.zeros(3))
    with pytest.raises(ContextError, match="nan"):
        R.convert(np.array([np.nan]))
    with pytest.raises(ContextError, match="matmul"):
        R.matmul(a, R.zeros((3, 2)))


def test_format_and_exact_string():
    v = R.convert(["1/3", "-2.5", "1/200000000", "-1/3000000000"])
    assert R.format(v, 6) == "[0.333333, -2.500000, 0.000000, -0.000000]"
    assert R.format(R.convert("0.125"), 2) == "0.12"  # exact tie rounds half-even
    assert R.format(R.convert("0.375"), 2) == "0.38"
    # same layout and digits as float64 on values both represent exactly
    f = np.array([0.5, -3.25, 1e-7])
    assert R.format(R.convert(f), 4) == scalars.get("float64").format(f, 4)
    assert R.exact_string(v) == "[1/3, -5/2, 1/200000000, -1/3000000000]"
    assert R.exact_string(R.convert(3)) == "3/1"


def test_where_take_reshape_keep_values():
    a = R.convert(["1/3", "2/3", "1"])
    w = R.where(np.array([True, False, True]), a, R.zeros(3))
    assert as_fracs(w) == [Fraction(1, 3), 0, 1]
    assert as_fracs(R.take(a, [2, 0], 0)) == [1, Fraction(1, 3)]
    assert R.reshape(a, (3, 1)).shape == (3, 1)
    assert R.properties()["exact"] is True and R.reduction == "sequential"


def test_convert_mpmath_and_mpfr_values_exactly():
    import mpmath
    m = scalars.get("mpmath:53").convert([-2.5, 0.1])
    assert as_fracs(R.convert(m)) == [Fraction(-5, 2), Fraction(0.1)]
    f = scalars.get("fp32-real").convert([-0.1])
    assert as_fracs(R.convert(f)) == [Fraction(float(np.float32(-0.1)))]
    assert as_fracs(R.convert([mpmath.mpf("-0.75")])) == [Fraction(-3, 4)]
