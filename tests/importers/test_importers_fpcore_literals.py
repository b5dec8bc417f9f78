"""Huge and tiny FPCore literals: decided from their spelling (never a huge integer), one
correct rounding into every context for the ones kept exact, +-inf/+-0 beyond every
format's range, one-line errors for unreadable ones -- checked against gmpy2 (MPFR)."""
from fractions import Fraction

import gmpy2
import numpy as np
import pytest

from scalarlab import graph
from scalarlab.experiments import sampling as S
from scalarlab.graph.importers.fpcore import FPCoreError, parse_number, read_fpcore
from scalarlab.graph.importers.fpcore_parse import LITERAL_DIGITS_LIMIT, LITERAL_EXP2_LIMIT
from scalarlab.scalars import formats


def _value(text, ctx="binary64"):
    p, = read_fpcore(f"(FPCore () {text})")
    assert p.skip is None, p.skip
    return p, np.asarray(graph.denote(p.graph, p.payload, None, ctx)).item()


@pytest.mark.parametrize("text, want", [
    ("1e999999999999", np.inf), ("-1e999999999999", -np.inf),
    ("1e-999999999999", 0.0), ("-1e-999999999999", -0.0),
    ("0x1p99999999999", np.inf), ("-0x1.8p-99999999999", -0.0),
    ("1e" + "9" * 5000, np.inf), ("0.5e-" + "9" * 5000, 0.0),
    ("(digits 1 99999999999 10)", np.inf), ("(digits -3 99999999999 2)", -np.inf),
    ("(digits 7 -99999999999 10)", 0.0),
])
def test_hostile_literals_round_to_inf_or_zero(text, want):
    p, v = _value(text)
    assert v == want and np.signbit(v) == np.signbit(want)
    assert p.notes and "taken as" in p.notes[0]
    _, v32 = _value(text, "binary32")
    assert v32 == want and np.signbit(v32) == np.signbit(want)


def test_zero_with_a_huge_exponent_is_zero():
    assert parse_number("0e99999999999999") == (Fraction(0), False)
    assert parse_number("0x0p-99999999999") == (Fraction(0), False)


@pytest.mark.parametrize("fmt", ["binary16", "binary32", "binary64"])
@pytest.mark.parametrize("text", ["1e400", "-2.5e-330", "1e5000", "123456789e-5020",
                                  "0x1.fffffffffffff8p1023", "(digits 3 -1080 2)"])
def test_large_literals_within_the_limit_stay_exact(fmt, text):
    """Kept exact, rounded once into each format: equal to MPFR's rounding of the exact
    value (overflow to inf, underflow to 0 or a subnormal by the format's rules)."""
    p, got = _value(text, fmt)
    num = p.graph.nodes[p.graph.output]
    v = p.payload.get(num.id)["value"]
    v = v.item() if isinstance(v, np.ndarray) else v
    q = Fraction(v)
    f = formats.get(fmt)
    with formats.gmpy2_context(f):
        want = gmpy2.mpfr(gmpy2.mpq(q.numerator, q.denominator))
    assert got == float(want) and np.signbit(got) == np.signbit(float(want)), (text, fmt)
    assert formats.round_fraction(q, f, "nearest_even") == got


def test_exact_literals_in_the_rational_context():
    _, v = _value("(* 1e400 1e-400)", "rational")
    assert Fraction(int(v.numerator), int(v.denominator)) == 1


def test_unreadable_literals_are_one_line_errors():
    with pytest.raises(FPCoreError, match=f"at most {LITERAL_DIGITS_LIMIT} are read"):
        read_fpcore("(FPCore (x) (+ x " + "1" * (LITERAL_DIGITS_LIMIT + 1) + "))")
    with pytest.raises(FPCoreError, match="zero denominator"):
        read_fpcore("(FPCore (x) (+ x 1/0))")


def test_hostile_literals_in_preconditions_are_refused_clearly():
    p, = read_fpcore("(FPCore (x) :pre (<= 1e-999999999999 x 1) x)")
    with pytest.raises(FPCoreError, match=f"beyond 2\\^\\+-{LITERAL_EXP2_LIMIT}"):
        p.boxes()
    q, = read_fpcore("(FPCore (x) :pre (<= 1e-300 x 1e300) x)")
    b, r = q.boxes()
    assert b["x"].lo == Fraction(1, 10 ** 300) and b["x"].hi == 10 ** 300 and r == []
    smp = S.sample(S.regions_from_bounds(b, q.arguments), q.arguments, r, "binary64", 50,
                   np.random.default_rng(0))
    assert np.all(smp.x >= 1e-300) and np.all(smp.x <= 1e300)
