"""round_fraction / round_fractions (exact inputs, integer arithmetic) against MPFR's
correctly rounded mpq conversion, for every format including binary64."""
from __future__ import annotations

import math
from fractions import Fraction

import gmpy2
import numpy as np
import pytest
from gmpy2 import mpq, mpz

from scalarlab.scalars import formats as F
from test_formats_oracle import (DETERMINISTIC, MPFR_ROUND, assert_same, mpfr_context,
                                 oracle)

FORMATS = [F.binary64, F.binary32, F.binary16, F.bfloat16, F.e4m3, F.e5m2,
           F.Format(5, 10, subnormals=False), F.Format(4, 3, has_inf=False, nan_encoding="fn",
                                                      saturate=True)]


def exact_cases(fmt, n: int, seed: int) -> list:
    """Random rationals across the format's range, exact midpoints between neighbours
    (not float64 numbers when fmt is binary64), and midpoints nudged by tiny amounts."""
    rng = np.random.default_rng(seed)
    out = []
    lo, hi = fmt.emin - fmt.man_bits - 4, fmt.emax + 3
    for _ in range(n):
        num = mpz(int(rng.integers(1, 1 << 62))) * mpz(int(rng.integers(1, 1 << 40)))
        den = mpz(int(rng.integers(1, 1 << 62)))
        q = mpq(num, den)
        e = int(rng.integers(lo, hi)) - (num.bit_length() - den.bit_length())
        q = q * mpq(2) ** e if e >= 0 else q / mpq(2) ** -e
        out.append(q if rng.random() < 0.5 else -q)
    codes = rng.integers(0, 1 << min(fmt.total_bits, 62), n)
    if fmt.total_bits == 64:
        vals = codes.astype(np.int64).view(np.float64)
    else:
        vals = F.decode(codes, fmt)
    vals = vals[np.isfinite(vals)]
    nxt = F.next_up(vals, fmt)
    for v, w in zip(vals.tolist(), nxt.tolist()):
        if math.isfinite(w):
            m = (mpq(v) + mpq(w)) / 2
            tiny = (mpq(w) - mpq(v)) / mpq(2) ** int(rng.integers(3, 200))
            out.extend([m, m + tiny, m - tiny])
    return out


def check_fractions_against_mpfr(fmt, n: int, seed: int) -> None:
    qs = exact_cases(fmt, n, seed)
    rounded = {}
    for rnd in MPFR_ROUND:
        with mpfr_context(fmt, rnd):
            rounded[rnd] = np.array([float(gmpy2.mpfr(q)) for q in qs])
    rz, ra = rounded["toward_zero"], rounded["away"]
    tie = np.array([bool(math.isfinite(b) and a != b and 2 * q == mpq(a) + mpq(b))
                    for q, a, b in zip(qs, rz.tolist(), ra.tolist())])
    neg = np.array([q < 0 for q in qs])
    for mode in DETERMINISTIC:
        want = oracle(rounded, fmt, mode, tie, neg)
        got = F.round_fractions(np.array(qs, dtype=object), fmt, mode)
        assert_same(got, want, [np.array(qs, dtype=object)], f"{fmt.name} {mode}")


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_round_fraction_against_mpfr(fmt):
    check_fractions_against_mpfr(fmt, 400, seed=fmt.total_bits)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_round_fraction_against_mpfr_large(fmt):
    check_fractions_against_mpfr(fmt, 20_000, seed=1000 + fmt.total_bits)


@pytest.mark.parametrize("fmt", [F.binary32, F.binary16, F.e4m3, F.binary64],
                         ids=lambda f: f.name)
def test_round_fraction_agrees_with_round_to_format(fmt):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(3000) * 2.0 ** rng.integers(-40, 40, 3000)
    x = np.concatenate([x, [0.0, 5e-324, 1e300, -1e300]])
    for mode in DETERMINISTIC:
        want = F.round_to_format(x, fmt, mode)
        got = F.round_fractions(np.array([Fraction(v) for v in x.tolist()], dtype=object),
                                fmt, mode)
        assert_same(got, want, [x], f"{fmt.name} {mode}")


def test_input_types():
    f = F.binary16
    third = 0.333251953125  # RN(1/3) in binary16
    assert F.round_fraction(Fraction(1, 3), f) == third
    assert F.round_fraction(mpq(1, 3), f) == third
    assert F.round_fraction("0.3333333333333333333333333333", f) == third
    assert F.round_fraction(" 1/3 ", f) == third
    assert F.round_fraction(mpz(65519), f) == 65504.0
    assert F.round_fraction(65520, f) == np.inf  # the binary16 overflow midpoint ties up
    assert F.round_fraction(2 ** 2000, F.binary64) == math.inf
    assert F.round_fraction(2 ** 2000, F.binary64, "toward_zero") == 1.7976931348623157e308
    assert F.round_fraction(-(2 ** 2000), F.e4m3, "nearest_even") != \
        F.round_fraction(-(2 ** 2000), F.e4m3, "nearest_even")  # NaN: no inf in e4m3
    assert F.round_fraction(0.1, f) == float(np.float16(0.1))
    assert math.isnan(F.round_fraction(float("nan"), f))
    assert F.round_fraction(float("-inf"), f) == -math.inf
    assert F.round_fraction(gmpy2.mpfr("inf"), f) == math.inf
    assert F.round_fraction(gmpy2.mpfr("0.1", 200), F.binary64) == 0.1
    assert F.round_fraction(True, f) == 1.0
    assert math.copysign(1, F.round_fraction(Fraction(-1, 10 ** 30), f)) == -1.0
    assert F.round_fraction(Fraction(0), f) == 0.0
    assert F.round_fraction(Fraction(1, 2 ** 1075), F.binary64) == 0.0  # tie to even 0
    assert F.round_fraction(Fraction(3, 2 ** 1076), F.binary64) == 5e-324


def test_round_fractions_shape_and_errors():
    arr = np.array([[Fraction(1, 3), mpq(2, 3)], [1, "0.5"]], dtype=object)
    out = F.round_fractions(arr, F.e5m2, "up")
    assert out.shape == (2, 2) and out.dtype == np.float64
    assert out.tolist() == [[0.375, 0.75], [1.0, 0.5]]
    with pytest.raises(F.ContextError, match="cannot read 'abc'"):
        F.round_fraction("abc", F.binary16)
    with pytest.raises(F.ContextError, match="expected an exact number.*list"):
        F.round_fraction([1], F.binary16)
    with pytest.raises(F.FormatError, match="unknown rounding mode"):
        F.round_fractions(arr, F.binary16, "ties")
