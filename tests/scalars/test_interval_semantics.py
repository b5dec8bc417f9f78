"""Interval context semantics: conversion, special values, piecewise ops, reductions,
shape ops, errors and the registry/printing contract."""
from __future__ import annotations

from fractions import Fraction

import gmpy2
import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.scalars import ContextError
from scalarlab.scalars.values import Interval

BASES = ["float64", "binary32", "bfloat16", "binary16", "rational", "mpmath:200"]
FLOAT_BASES = ["float64", "binary32", "bfloat16", "binary16"]


def f64(ctx, v):
    """(lo, hi) float64 arrays enclosing v."""
    r = ctx.to_float64(v)
    return np.asarray(r.lo, dtype=float), np.asarray(r.hi, dtype=float)


def test_registry_names_and_properties():
    names = scalars.names()
    for b in BASES:
        assert f"interval:{b}" in names
        ctx = scalars.get(f"interval:{b}")
        p = ctx.properties()
        assert p["interval"] is True and ctx.is_interval
        assert p["reduction"] == "sequential"
        assert p["base"] == b
    assert scalars.get("interval:binary32").fmt.name == "binary32"
    assert scalars.get("interval:e4m3").fmt.name == "e4m3"
    assert scalars.get("interval:binary(5,10)").ends.grid.precision == 11
    assert "exp" in scalars.get("interval:binary32").correctly_rounded
    assert "exp" in scalars.get("interval:float64").correctly_rounded   # exactly directed (func_dir_f64)
    assert scalars.get("interval:rational").exact
    assert scalars.get("interval:float64").properties()["matmul"] == "midpoint-radius"
    with pytest.raises(ContextError, match="interval base"):
        scalars.get("interval:nonsense")
    with pytest.raises(ContextError, match="not supported"):
        scalars.get("interval:complex128")


@pytest.mark.parametrize("fmt_name, prec, emin, emax", [
    ("binary32", 24, -126, 127), ("bfloat16", 8, -126, 127), ("binary16", 11, -14, 15)])
def test_convert_decimal_is_tightest_enclosure(fmt_name, prec, emin, emax):
    ctx = scalars.get(f"interval:{fmt_name}")
    texts = ["0.15", "0.1", "-2.7182818284590452353602874", "1e-7", "65504.5", "3", "1/3"]
    v = ctx.convert(texts)
    for mode, ends in ((gmpy2.RoundDown, v.lo), (gmpy2.RoundUp, v.hi)):
        c = gmpy2.context(precision=prec, emin=emin - prec + 2, emax=emax + 1,
                          subnormalize=True, round=mode)
        with c:
            want = [float(gmpy2.mpfr(gmpy2.mpq(Fraction(t).numerator, Fraction(t).denominator)))
                    for t in texts]
        np.testing.assert_array_equal(ends, want)
    assert v.lo[5] == v.hi[5] == 3.0              # exact values give degenerate boxes
    assert v.lo[0] < v.hi[0]


def test_convert_float64_decimal_differs_from_string():
    ctx = scalars.get("interval:float64")
    a = ctx.convert(0.1)                       # the double 0.1 is a point
    b = ctx.convert("0.1")                     # the decimal 0.1 is not a double
    assert a.lo == a.hi == 0.1
    assert b.lo < Fraction("0.1") < b.hi and np.nextafter(b.lo, 1) == b.hi


def test_convert_rational_and_mpmath_exact():
    r = scalars.get("interval:rational").convert(["0.15", 3])
    assert r.lo[0] == gmpy2.mpq(3, 20) and r.hi[0] == gmpy2.mpq(3, 20)
    ctx = scalars.get("interval:mpmath:200")
    m = ctx.convert("0.1")
    lo_q = ctx.ends._exact(m.lo[()]); hi_q = ctx.ends._exact(m.hi[()])
    assert lo_q < Fraction("0.1") < hi_q and hi_q - lo_q < Fraction(1, 2 ** 200)


@pytest.mark.parametrize("base", FLOAT_BASES + ["mpmath:200"])
def test_nan_gives_whole_line(base):
    ctx = scalars.get(f"interval:{base}")
    v = ctx.convert([np.nan, 1.0])
    lo, hi = f64(ctx, v)
    assert lo[0] == -np.inf and hi[0] == np.inf and lo[1] == hi[1] == 1.0
    w = ctx.make([0.0, np.nan], [np.nan, 1.0])
    lo, hi = f64(ctx, w)
    assert (lo == -np.inf).all() and (hi == np.inf).all()
    # inf - inf inside an operation is NaN -> whole line, never a narrow box
    inf = ctx.make(np.inf, np.inf)
    lo, hi = f64(ctx, ctx.sub(inf, inf))
    assert lo == -np.inf and hi == np.inf
    lo, hi = f64(ctx, ctx.exp(ctx.convert(np.nan)))   # exp of the whole line
    assert lo == 0.0 and hi == np.inf
    raw = Interval(*ctx.ends.point(np.array([np.nan, 0.5])))   # unnormalised NaN endpoint
    lo, hi = f64(ctx, ctx.tanh(raw))
    assert lo[0] == -np.inf and hi[0] == np.inf
    assert lo[1] <= np.tanh(0.5) + 1e-15 and hi[1] >= np.tanh(0.5) - 1e-15 and hi[1] < 0.47


@pytest.mark.parametrize("base", FLOAT_BASES + ["mpmath:200"])
def test_division_by_interval_containing_zero(base):
    ctx = scalars.get(f"interval:{base}")
    num = ctx.make([1.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0])
    den = ctx.make([-1.0, 0.0, -2.0, 0.5], [1.0, 1.0, 0.0, 4.0])
    lo, hi = f64(ctx, ctx.div(num, den))
    assert (lo[:3] == -np.inf).all() and (hi[:3] == np.inf).all()
    assert lo[3] == 0.25 and hi[3] == 4.0


def test_rational_division_by_zero_interval_raises():
    ctx = scalars.get("interval:rational")
    with pytest.raises(ContextError, match=r"div.*contains 0.*unbounded"):
        ctx.div(ctx.convert(1), ctx.make(-1, 1))
    with pytest.raises(ContextError, match="cannot compute tanh|tanh"):
        ctx.tanh(ctx.make(0, 1))
    e = ctx.exp(ctx.make(0, 0))                 # the rational point exp(0) = 1 works
    assert e.lo[()] == 1 and e.hi[()] == 1
    with pytest.raises(ContextError):
        ctx.convert(np.inf)


@pytest.mark.parametrize("base", BASES)
def test_piecewise_ops_are_exact_and_tight(base):
    ctx = scalars.get(f"interval:{base}")
    x = ctx.make([-3, -1, 2, 0, -2], [-1, 2, 5, 0, 0])
    lo, hi = f64(ctx, ctx.abs(x))
    np.testing.assert_array_equal(lo, [1, 0, 2, 0, 0]); np.testing.assert_array_equal(hi, [3, 2, 5, 0, 2])
    lo, hi = f64(ctx, ctx.square(x))
    np.testing.assert_array_equal(lo, [1, 0, 4, 0, 0]); np.testing.assert_array_equal(hi, [9, 4, 25, 0, 4])
    lo, hi = f64(ctx, ctx.heaviside(x))
    np.testing.assert_array_equal(lo, [0, 0, 1, 0, 0]); np.testing.assert_array_equal(hi, [0, 1, 1, 0, 0])
    lo, hi = f64(ctx, ctx.sign(x))
    np.testing.assert_array_equal(lo, [-1, -1, 1, 0, -1]); np.testing.assert_array_equal(hi, [-1, 1, 1, 0, 0])
    y = ctx.make([0, 0, 0, 1, -5], [1, 1, 1, 1, -4])
    lo, hi = f64(ctx, ctx.maximum(x, y))
    np.testing.assert_array_equal(lo, [0, 0, 2, 1, -2]); np.testing.assert_array_equal(hi, [1, 2, 5, 1, 0])
    lo, hi = f64(ctx, ctx.minimum(x, y))
    np.testing.assert_array_equal(lo, [-3, -1, 0, 0, -5]); np.testing.assert_array_equal(hi, [-1, 1, 1, 0, -4])
    lo, hi = f64(ctx, ctx.neg(x))
    np.testing.assert_array_equal(lo, [1, -2, -5, 0, 0]); np.testing.assert_array_equal(hi, [3, 1, -2, 0, 2])
    lo, hi = f64(ctx, ctx.where(np.array([True, False, True, False, True]), x, y))
    np.testing.assert_array_equal(lo, [-3, 0, 2, 1, -2])
    with pytest.raises(ContextError, match="less"):
        ctx.less(x, y)
    with pytest.raises(ContextError, match="argmax"):
        ctx.argmax(x, 0)
    with pytest.raises(ContextError, match="boolean"):
        ctx.where(np.array([1, 0, 1, 0, 1]), x, y)


@pytest.mark.parametrize("base", BASES)
def test_sum_is_sequential_directed(base):
    ctx = scalars.get(f"interval:{base}")
    rng = np.random.default_rng(4)
    a = rng.standard_normal((3, 7))
    x = ctx.make(a, a + 0.25)
    s = ctx.sum(x, axis=1)
    # step by step with the context's own add must give the same endpoints
    acc = ctx.take(x, [0], 1)
    for k in range(1, 7):
        acc = ctx.add(acc, ctx.take(x, [k], 1))
    acc = ctx.reshape(acc, (3,))
    lo, hi = f64(ctx, s); lo2, hi2 = f64(ctx, acc)
    np.testing.assert_array_equal(lo, lo2); np.testing.assert_array_equal(hi, hi2)
    # and it encloses the exact sums
    q = [sum(Fraction(t) for t in row) for row in a]
    for i in range(3):
        assert Fraction(lo[i]) <= q[i] and q[i] + Fraction(7, 4) <= Fraction(hi[i])
    assert ctx.sum(x).shape == ()
    assert ctx.sum(x, axis=(0, 1), keepdims=True).shape == (1, 1)
    assert ctx.sum(x, axis=-1, keepdims=True).shape == (3, 1)
    with pytest.raises(ContextError, match="axis 2 out of range"):
        ctx.sum(x, axis=2)
    m = ctx.amax(x, axis=0)
    lo, hi = f64(ctx, m)
    np.testing.assert_array_equal(lo, np.max(f64(ctx, x)[0], axis=0))
    np.testing.assert_array_equal(hi, np.max(f64(ctx, x)[1], axis=0))


@pytest.mark.parametrize("base", BASES)
def test_shape_ops_apply_to_both_ends(base):
    ctx = scalars.get(f"interval:{base}")
    x = ctx.make(np.arange(6.0).reshape(2, 3), np.arange(6.0).reshape(2, 3) + 1)
    assert ctx.shape(x) == (2, 3)
    t = ctx.transpose(x)
    assert t.shape == (3, 2) and f64(ctx, t)[1][2, 1] == 6.0
    assert ctx.reshape(x, (6,)).shape == (6,)
    assert ctx.concat([x, x], axis=0).shape == (4, 3)
    assert ctx.stack([x, x], axis=1).shape == (2, 2, 3)
    assert f64(ctx, ctx.take(x, [2], 1))[0].tolist() == [[2.0], [5.0]]
    assert ctx.broadcast_to(ctx.convert(1), (2, 2)).shape == (2, 2)
    with pytest.raises(ContextError, match=r"reshape.*\[2, 3\]"):
        ctx.reshape(x, (4,))
    with pytest.raises(ContextError, match="do not broadcast"):
        ctx.add(x, ctx.zeros((4,)))
    with pytest.raises(ContextError, match="exceeds"):
        ctx.make(2, 1)


def test_format_matches_seed_layout():
    for base in ("float64", "binary32", "rational", "mpmath:200"):
        ctx = scalars.get(f"interval:{base}")
        box = ctx.make(["0.25", "-0.25", "0.05", "0.35"], ["0.35", "-0.15", "0.15", "0.45"])
        assert ctx.format(box) == ("[0.250000, -0.250000, 0.050000, 0.350000] .. "
                                   "[0.350000, -0.150000, 0.150000, 0.450000]")
        assert ctx.format(ctx.make("0.020775", "0.035640")) == "[0.020775] .. [0.035640]"


def test_to_float64_encloses_and_width():
    ctx = scalars.get("interval:rational")
    v = ctx.make("1/3", "2/3")
    f = ctx.to_float64(v)
    assert isinstance(f, Interval)
    assert Fraction(f.lo[()]) < Fraction(1, 3) and Fraction(f.hi[()]) > Fraction(2, 3)
    assert ctx.width(v)[()] == gmpy2.mpq(1, 3)
    c32 = scalars.get("interval:binary32")
    w = c32.width(c32.convert("0.1"))
    assert w[()] == 2.0 ** -27


def test_e4m3_overflow_gives_infinite_upper_end():
    ctx = scalars.get("interval:e4m3")
    r = ctx.mul(ctx.make(300, 300), ctx.make(2, 2))
    assert r.lo == 448.0 and r.hi == np.inf
    r = ctx.convert(460.0)
    assert r.lo == 448.0 and r.hi == np.inf


def test_mixed_operands_and_foreign_values():
    ctx = scalars.get("interval:binary32")
    r = ctx.add(ctx.make(1, 2), np.array(0.1))   # a point operand is enclosed first
    assert r.lo < 1.1 < r.hi
    f64ctx = scalars.get("interval:float64")
    x = f64ctx.convert("0.1")
    y = ctx.convert(x)                            # re-rounded outward into binary32
    assert y.lo <= x.lo and y.hi >= x.hi and y.lo < y.hi
    d = scalars.get("dual:float64").convert(1.0)
    with pytest.raises(ContextError, match="dual"):
        ctx.add(d, d)
