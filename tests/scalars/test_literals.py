"""The bounded literal reader (scalars/kernels/literals.py): exact within +-10^1000, a huge
or tiny literal rounded by float contexts exactly as MPFR rounds the literal itself, refused
by exact ones, and every case decided without building 10^e."""
from __future__ import annotations

import random
from fractions import Fraction

import gmpy2
import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.scalars import formats
from scalarlab.scalars.errors import ContextError
from scalarlab.scalars.kernels import literals

HUGE = ["1e999999999", "-1e999999999", "1e-999999999", "-1e-999999999", "7.5e1001",
        "-3e-1001", "0.0001e1005", "1/1" + "0" * 1100, "-" + "9" * 1100 + "/7",
        "1e" + "9" * 40, "-2.5e-" + "9" * 40]


def test_within_the_bound_equals_fraction():
    rng = random.Random(5)
    assert literals.exact("0e999999999") == 0 == literals.exact("-0.000e-999999999")
    texts = ["0", "-0", "1.", ".5", "-12.5e-3", "+3/4", "1e1000", "1e-1000",
             "9.99e999", "123456789012345678901234567890e-1020", "00012.3400e+2"]
    for _ in range(300):
        mant = str(rng.randrange(1, 10 ** rng.randrange(1, 40)))
        cut = rng.randrange(len(mant) + 1)
        exp = rng.randrange(-950, 950)
        texts.append(f"{rng.choice(['', '-', '+'])}{mant[:cut]}.{mant[cut:]}e{exp}")
    for t in texts:
        assert literals.exact(t) == Fraction(t), t
        assert literals.for_rounding(t) == Fraction(t), t


@pytest.mark.parametrize("text", HUGE)
def test_beyond_the_bound_is_refused_by_the_exact_reader(text):
    with pytest.raises(literals.LiteralError, match="limited to magnitudes 10\\^-1000"):
        literals.exact(text)
    for name in ("rational", "mpmath:100", "fp32-real", "interval:binary32"):
        with pytest.raises(ContextError, match="too (large|small) to read exactly"):
            scalars.get(name).convert(np.array([text], dtype=object))


@pytest.mark.parametrize("text", ["banana", "1/0", "0x1p999999999", "", "1e", "1_000",
                                  "1" * 5000, "--1"])
def test_malformed_literals_are_one_error(text):
    with pytest.raises(literals.LiteralError):
        literals.exact(text)
    with pytest.raises(ContextError):
        scalars.get("rational").convert(np.array([text], dtype=object))
    with pytest.raises(ContextError):
        scalars.get("binary16").convert(np.array([text], dtype=object))


@pytest.mark.parametrize("name", ["binary16", "bfloat16", "binary32", "binary(5,2)"])
def test_float_contexts_round_huge_literals_as_mpfr_does(name):
    ctx = scalars.get(name)
    fmt = ctx.fmt
    for text in HUGE + ["6.5e4", "-1e-8", "3/7"]:
        with formats.gmpy2_context(fmt):   # MPFR reads the literal itself, huge exponent too
            want = float(gmpy2.mpfr(gmpy2.mpq(*_ratio(text))) if "/" in text
                         else gmpy2.mpfr(text))
        got = float(np.asarray(ctx.to_float64(ctx.convert(np.array([text], dtype=object))))
                    .reshape(-1)[0])
        assert np.signbit(got) == np.signbit(want) and (got == want), (name, text, got, want)


def _ratio(text):
    n, d = text.split("/")
    return int(n), int(d)


def test_float64_and_complex128_round_like_python_float():
    for text in HUGE:
        if "/" in text:   # p/q beyond the bound: the side of 1 it lies on decides
            n, d = _ratio(text)
            want = (float("-inf") if n < 0 else float("inf")) if abs(n) > abs(d) else (
                -0.0 if n < 0 else 0.0)
        else:
            want = float(text)
        got = float(scalars.get("float64").convert(np.array([text], dtype=object))[0])
        assert got == want and np.signbit(got) == np.signbit(want), (text, got)
        c = complex(scalars.get("complex128").convert(np.array([text], dtype=object))[0])
        assert c.real == want and c.imag == 0, (text, c)
