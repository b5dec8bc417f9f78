"""float64 fma (error-free transformations + round-to-odd) against exact rationals.

Oracle: ``Fraction(a)*Fraction(b) + Fraction(c)`` rounded by ``Fraction.__float__``
(correctly rounded, nearest-even), with IEEE 754's rules for zero signs, overflow and
non-finite operands spelled out here independently of the implementation.
"""
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from scalarlab import scalars
from scalarlab.scalars import ContextError
from scalarlab.scalars.kernels.eft import fma_f64

F = scalars.get("float64")


def fma_ref(a: float, b: float, c: float) -> float:
    if not (math.isfinite(a) and math.isfinite(b)):
        return a * b + c  # IEEE: infinite/NaN product, then the sum
    if not math.isfinite(c):
        return c
    q = Fraction(a) * Fraction(b) + Fraction(c)
    if q == 0:
        prod_neg = (math.copysign(1, a) * math.copysign(1, b)) < 0
        if a * b == 0 or Fraction(a) * Fraction(b) == 0:
            # exact zero product: sum of signed zeros (-0 only if both are -0)
            return -0.0 if (prod_neg and math.copysign(1, c) < 0) else 0.0
        return 0.0  # exact cancellation rounds to +0 in round-to-nearest
    try:
        r = float(q)
    except OverflowError:
        return math.inf if q > 0 else -math.inf
    return r if r != 0 else math.copysign(0.0, q)  # underflow keeps the sign


def assert_same(got, a, b, c):
    want = np.array([fma_ref(x, y, z) for x, y, z in zip(a.tolist(), b.tolist(), c.tolist())])
    same = (got == want) & (np.signbit(got) == np.signbit(want)) | (np.isnan(got) & np.isnan(want))
    bad = np.flatnonzero(~same)
    assert bad.size == 0, [(a[i], b[i], c[i], got[i], want[i]) for i in bad[:5]]


def test_random_and_cancellation_cases():
    rng = np.random.default_rng(0)
    n = 20000
    a = rng.standard_normal(n) * 2.0 ** rng.integers(-60, 60, n)
    b = rng.standard_normal(n) * 2.0 ** rng.integers(-60, 60, n)
    p = a * b
    # c = -RN(ab) (pure error term), -RN(ab) nudged by ulps (near midpoints), or random
    c = np.select([rng.random(n) < 0.3, rng.random(n) < 0.6],
                  [-p, -p * (1 + 2.0**-52 * rng.integers(-4, 5, n))],
                  rng.standard_normal(n) * 2.0 ** rng.integers(-60, 60, n))
    assert_same(F.fma(a, b, c), a, b, c)


def test_exact_ties_round_to_even():
    # a, b of 27 bits: a*b has up to 54 bits, so a*b + small integer lands exactly on
    # midpoints between doubles about half the time.
    rng = np.random.default_rng(1)
    n = 8000
    a = rng.integers(2**26, 2**27, n).astype(float)
    b = rng.integers(2**26, 2**27, n).astype(float)
    c = rng.integers(-2**10, 2**10, n).astype(float)
    s = 2.0 ** rng.integers(-300, 300, n)
    a, c = a * s, c * s
    q = [Fraction(x) * Fraction(y) + Fraction(z) for x, y, z in zip(a.tolist(), b.tolist(), c.tolist())]
    ties = sum(1 for v, r in zip(q, (float(v) for v in q))
               if abs(v - Fraction(r)) * 2 == abs(Fraction(np.nextafter(r, np.inf)) - Fraction(r)))
    assert ties > 500  # the sample really contains exact ties
    assert_same(fma_f64(a, b, c), a, b, c)


def test_extreme_exponents_subnormals_and_overflow():
    rng = np.random.default_rng(2)
    n = 4000
    e = lambda lo, hi: (rng.uniform(1, 2, n) * rng.choice([-1.0, 1.0], n)
                        * 2.0 ** rng.integers(lo, hi, n))
    cases = [
        (e(-1074, 1023), e(-1074, 1023), e(-1074, 1023)),      # everything, incl. overflow
        (e(-560, -500), e(-560, -500), e(-1074, -1000)),        # subnormal results
        (e(500, 520), e(500, 520), -e(1000, 1023)),             # product beyond the range
        (e(-20, 20), e(-20, 20), e(-1074, -1022)),              # tiny addend
    ]
    for a, b, c in cases:
        assert_same(fma_f64(a, b, c), a, b, c)


def test_special_values():
    inf, nan = math.inf, math.nan
    rows = [(0.0, 5.0, -0.0), (-0.0, 5.0, -0.0), (-0.0, 5.0, 0.0), (2.0, 3.0, -6.0),
            (-2.0, 3.0, 6.0), (1e-200, -1e-200, 0.0), (1e-200, -1e-200, -0.0),
            (1e308, 10.0, -inf), (1e308, 10.0, inf), (inf, 0.0, 1.0), (inf, 2.0, -inf),
            (inf, 2.0, 1.0), (nan, 1.0, 1.0), (1.0, 1.0, nan), (1e308, 10.0, -1e308),
            (2.0**-1074, 0.5, 0.0), (-(2.0**-1074), 0.5, 0.0), (1e308, 1e308, -inf)]
    a, b, c = (np.array(col) for col in zip(*rows))
    assert_same(F.fma(a, b, c), a, b, c)
    assert math.copysign(1, F.fma(np.array(-(2.0**-1074)), np.array(0.5), np.array(0.0))[()]) == -1


@settings(max_examples=150, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False, width=64),
       st.floats(allow_nan=False, allow_infinity=False, width=64),
       st.floats(allow_nan=False, allow_infinity=False, width=64))
def test_hypothesis_any_finite_triple(a, b, c):
    arr = lambda t: np.array([t])
    assert_same(fma_f64(arr(a), arr(b), arr(c)), arr(a), arr(b), arr(c))


def test_broadcasting_zero_d_and_errors():
    out = F.fma(np.array(3.0), np.array([1.0, 2.0]), np.array([[0.5], [1.5]]))
    assert out.shape == (2, 2) and out.tolist() == [[3.5, 6.5], [4.5, 7.5]]
    z = F.fma(np.array(2.0), np.array(3.0), np.array(1.0))
    assert isinstance(z, np.ndarray) and z.shape == () and z[()] == 7.0
    with pytest.raises(ContextError, match=r"fma: shapes do not broadcast"):
        F.fma(np.ones(2), np.ones(3), np.ones(2))
    with pytest.raises(ContextError, match=r"float64: fma: got an object ndarray of mpq"):
        F.fma(np.ones(2), scalars.get("rational").convert([1, 2]), np.ones(2))
    assert "fma" in F.correctly_rounded
