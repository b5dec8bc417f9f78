"""Binary contexts: registry names and variants, properties, exact conversion (one
rounding, never through float64), error messages, printing and shortest decimals."""
from __future__ import annotations

import math
from decimal import Decimal, ROUND_CEILING, ROUND_FLOOR, localcontext
from fractions import Fraction

import gmpy2
import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.scalars import formats
from scalarlab.scalars.binary import BinaryContext


def mpfr_round(q: Fraction, fmt) -> float:
    """MPFR's correctly rounded value of an exact rational in the format (the oracle)."""
    ctx = formats.gmpy2_context(fmt)
    v = float(ctx.div(gmpy2.mpz(q.numerator), gmpy2.mpz(q.denominator)))
    return float(formats.round_to_format(np.array([v]), fmt)[0])


# ------------------------------------------------------------------ registry
def test_names_and_variants():
    names = scalars.names()
    for nm in ("binary64", "binary32", "binary16", "bfloat16", "tf32", "e5m2", "e4m3",
               "binary32+fma", "binary32/pairwise"):
        assert nm in names
    c = scalars.get("binary16+fma")
    assert (c.name, c.fma_dot, c.reduction) == ("binary16+fma", True, "sequential")
    assert c.properties()["reduction"] == "sequential+fma" and c.properties()["fma_dot"]
    p = scalars.get("bfloat16/pairwise")
    assert (p.reduction, p.fma_dot) == ("pairwise", False)
    assert p.properties()["reduction"] == "pairwise"
    b16 = scalars.get("binary(5, 10)/pairwise")
    assert b16.name == "binary(5,10)/pairwise" and b16.fmt == formats.binary16
    assert scalars.get("binary(8,23)").fmt == formats.binary32
    w = scalars.get("binary(11,40)+fma")
    assert w.fmt.precision == 41 and w.fma_dot
    assert scalars.get("e4m3").properties()["overflow"] == "nan"
    assert scalars.get("binary32").properties()["format"] == "binary32"


def test_registry_errors():
    with pytest.raises(scalars.ContextError, match="exp_bits=12 out of range"):
        scalars.get("binary(12,3)")
    with pytest.raises(scalars.ContextError, match=r"unknown context 'binary33'.*binary\(E,M\)"):
        scalars.get("binary33")
    with pytest.raises(scalars.ContextError, match="fma_dot needs the sequential order"):
        BinaryContext("binary32", fma_dot=True, reduction="pairwise")
    with pytest.raises(scalars.ContextError, match="unknown reduction 'tree'"):
        BinaryContext("binary32", reduction="tree")


def test_correctly_rounded_set_is_honest():
    c = scalars.get("binary32")
    for op in ("add", "sub", "mul", "div", "sqrt", "fma", "exp", "log", "tanh", "sigmoid",
               "softplus", "sin", "cos", "erf", "convert"):
        assert op in c.correctly_rounded
    # Reductions round once per step, which is not one rounding of the exact result.
    assert "sum" not in c.correctly_rounded and "matmul" not in c.correctly_rounded
    assert c.properties()["correctly_rounded"] == sorted(c.correctly_rounded)


# ------------------------------------------------------------------ conversion
def test_convert_float64_arrays_round_once():
    c = scalars.get("bfloat16")
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1000) * np.exp2(rng.integers(-140, 140, 1000))
    got = c.convert(x)
    assert np.array_equal(got, formats.round_to_format(x, "bfloat16"), equal_nan=True)
    assert c.convert(0.1).shape == ()
    assert float(c.convert(0.1)) == float(formats.round_to_format(np.array(0.1), "bfloat16"))


def test_convert_exact_values_never_double_round():
    c = scalars.get("binary32")
    m = Fraction(1) + Fraction(1, 2 ** 24)          # midpoint between 1 and next_up(1)
    above = m + Fraction(1, 2 ** 60)                  # float64 would land on m: tie -> 1
    with localcontext() as dctx:
        dctx.prec = 100
        s = str(Decimal(above.numerator) / Decimal(above.denominator))
    assert Fraction(s) == above and float(s) == float(m)
    assert float(c.convert(s)) == 1 + 2.0 ** -23
    assert float(c.convert(above)) == 1 + 2.0 ** -23
    assert float(c.convert(gmpy2.mpq(above.numerator, above.denominator))) == 1 + 2.0 ** -23
    big = 2 ** 60 + 2 ** 36 + 1                        # just above a binary32 midpoint
    assert float(c.convert(big)) == 2.0 ** 60 + 2.0 ** 37
    assert float(c.convert(np.array([big], dtype=np.int64))[0]) == 2.0 ** 60 + 2.0 ** 37
    assert float(c.convert(2 ** 24 + 1)) == 2.0 ** 24            # exact tie: even
    assert float(c.convert(10 ** 400)) == math.inf                 # IEEE overflow
    assert math.isnan(float(scalars.get("e4m3").convert(10 ** 400)))


@pytest.mark.parametrize("name", ["binary32", "binary16", "e4m3", "binary(11,40)", "binary64"])
def test_convert_decimal_strings_vs_mpfr(name):
    c = scalars.get(name)
    rng = np.random.default_rng(1)
    strs = [f"{m}e{e}" for m, e in zip(rng.integers(-10 ** 12, 10 ** 12, 400),
                                        rng.integers(-50, 40, 400))]
    strs += ["0.1", "-0.2", "1/3", "  2.5 ", "448", "464", "465", "-0", "0.000001"]
    got = c.convert(strs)
    want = np.array([mpfr_round(Fraction(s.strip()), c.fmt) for s in strs])
    assert np.array_equal(got, want, equal_nan=True), [s for s, g, w in zip(strs, got, want)
                                                        if not (g == w or g != g and w != w)]


def test_convert_nested_and_special():
    c = scalars.get("binary16")
    got = c.convert([[1, "0.1", Fraction(1, 3)], [0.1, np.float32(0.5), True]])
    assert got.shape == (2, 3) and got.dtype == np.float64
    assert got[0, 1] == mpfr_round(Fraction("0.1"), c.fmt)
    assert got[1, 0] == float(formats.round_to_format(np.array(0.1), "binary16"))
    assert got[0, 2] == mpfr_round(Fraction(1, 3), c.fmt) and got[1, 2] == 1.0
    sp = c.convert(["inf", "-inf", "nan"])
    assert sp[0] == np.inf and sp[1] == -np.inf and np.isnan(sp[2])
    assert c.full((2, 2), "0.1").tolist() == [[got[0, 1]] * 2] * 2
    assert c.ones((3,)).tolist() == [1.0] * 3 and c.zeros((1,)).tolist() == [0.0]


def test_convert_errors_name_the_context():
    c = scalars.get("bfloat16")
    with pytest.raises(scalars.ContextError, match="bfloat16: convert: cannot read 'abc'"):
        c.convert(["1", "abc"])
    with pytest.raises(scalars.ContextError, match="bfloat16: convert: complex"):
        c.convert(1 + 2j)


# ------------------------------------------------------------------ value checks
def test_values_from_elsewhere_are_rejected():
    c = scalars.get("binary32")
    ok = c.convert(np.array([1.0, 2.0]))
    with pytest.raises(scalars.ContextError,
                       match=r"binary32: add: second operand holds 0.1 at index \(1,\), "
                             r"which is not a binary32 value"):
        c.add(ok, np.array([1.0, 0.1]))
    with pytest.raises(scalars.ContextError, match="dtype object .*another context"):
        c.mul(ok, np.array([gmpy2.mpq(1, 3)] * 2, dtype=object))
    with pytest.raises(scalars.ContextError, match="expected a float64 array"):
        c.exp([1.0, 2.0])
    with pytest.raises(scalars.ContextError, match=r"add: shapes do not broadcast: \[2\] vs \[3\]"):
        c.add(ok, c.convert(np.ones(3)))
    with pytest.raises(scalars.ContextError, match="inf at index .* not a e4m3 value"):
        scalars.get("e4m3").neg(np.array([np.inf]))


def test_piecewise_helpers():
    c = scalars.get("binary16")
    x = c.convert(np.array([-2.0, -0.0, 0.0, 3.0, np.nan]))
    assert c.heaviside(x).tolist()[:4] == [0.0, 0.0, 0.0, 1.0]
    s = c.sign(x)
    assert s.tolist()[:4] == [-1.0, 0.0, 0.0, 1.0] and np.isnan(s[4])
    assert c.less(x[:4], c.convert(np.zeros(4))).tolist() == [True, False, False, False]
    w = c.where(np.array([True, False]), x[:2], x[2:4])
    assert w.tolist() == [-2.0, 3.0]


# ------------------------------------------------------------------ printing
def test_format_matches_float64_style():
    c = scalars.get("binary32")
    v = c.convert(["0.3", "-0.2", "0.1", "0.4"])
    assert c.format(v) == "[0.300000, -0.200000, 0.100000, 0.400000]"
    assert c.format(c.convert("0.027713")) == "0.027713"
    assert c.format(v, 3) == scalars.get("float64").format(v, 3)


def _digits(s: str) -> int:
    mant = s.lstrip("-").split("e")[0].replace(".", "").lstrip("0").rstrip("0")
    return max(len(mant), 1)


def _roundtrips(d: Decimal, fmt) -> float:
    return formats.round_fraction(Fraction(d), fmt)


def check_shortest(values, fmt, strs):
    """Round-trip in the format, and no decimal with one digit fewer round-trips: by
    convexity of the rounding interval it suffices to try the two such neighbours of x."""
    for x, s in zip(values.tolist(), strs):
        assert formats.round_fraction(Fraction(s), fmt) == x, (x, s)
        nd = _digits(s)
        if nd == 1 or x == 0:
            continue
        d = Decimal(x)
        e10 = d.adjusted()
        q = Decimal(1).scaleb(e10 - nd + 2)
        for rounding in (ROUND_FLOOR, ROUND_CEILING):
            cand = d.quantize(q, rounding=rounding)
            assert _roundtrips(cand, fmt) != x, (x, s, cand)


@pytest.mark.parametrize("name", ["binary16", "bfloat16", "e4m3", "e5m2"])
def test_exact_string_every_value_of_small_formats(name):
    c = scalars.get(name)
    v = formats.decode(np.arange(1 << c.fmt.total_bits), name)
    v = v[np.isfinite(v)][::5 if c.fmt.total_bits == 16 else 1]
    strs = c.exact_string(v)[1:-1].split(", ")
    assert len(strs) == v.size
    step = 4 if c.fmt.total_bits == 16 else 1
    check_shortest(v[::step], c.fmt, strs[::step])
    if name == "binary16":
        ref = [np.format_float_scientific(np.float16(x), unique=True) for x in v.tolist()]
        assert [_digits(s) for s in strs] == [_digits(r) for r in ref]


def test_exact_string_binary32_against_numpy_shortest():
    c = scalars.get("binary32")
    rng = np.random.default_rng(3)
    v = formats.decode(rng.integers(0, 1 << 32, 3000), "binary32")
    v = v[np.isfinite(v)]
    strs = c.exact_string(v)[1:-1].split(", ")
    ref = [np.format_float_scientific(np.float32(x), unique=True) for x in v.tolist()]
    assert [_digits(s) for s in strs] == [_digits(r) for r in ref]
    check_shortest(v[:300], c.fmt, strs[:300])
    assert c.exact_string(c.convert("0.1")) == "0.1"
    assert c.exact_string(np.array(2.0 ** -149)) == "1e-45"
    assert c.exact_string(np.array([-0.0, np.inf, np.nan])) == "[-0.0, inf, nan]"
    assert scalars.get("e4m3").exact_string(np.array([448.0, 0.001953125])) == "[450.0, 0.002]"
