"""The logic ops (graph/ops_logic.py): IEEE comparisons as 0/1 values in every context,
three-valued logic over intervals, select's NaN safety (forward and JVP) and its interval
hull, the zero derivatives; and the fma op (one rounding, against MPFR)."""
from __future__ import annotations

import gmpy2
import numpy as np
import pytest

from scalarlab import graph, scalars
from scalarlab.graph import Graph, Node, OpKind, Payload
from scalarlab.graph.optable import OPS
from scalarlab.scalars import formats
from scalarlab.scalars.base import to_fraction
from scalarlab.scalars.values import Dual, Interval

NAN, INF = np.nan, np.inf
# (a, b, lt, le, gt, ge, eq, ne) -- IEEE 754: NaN unordered, -0 == +0
TABLE = [(1.0, 2.0, 1, 1, 0, 0, 0, 1), (2.0, 2.0, 0, 1, 0, 1, 1, 0), (NAN, 1.0, 0, 0, 0, 0, 0, 1),
         (NAN, NAN, 0, 0, 0, 0, 0, 1), (-0.0, 0.0, 0, 1, 0, 1, 1, 0), (INF, INF, 0, 1, 0, 1, 1, 0),
         (-INF, 3.0, 1, 1, 0, 0, 0, 1)]
OPNAMES = ["lt", "le", "gt", "ge", "eq", "ne"]


@pytest.mark.parametrize("cname", ["float64", "binary32", "binary16", "mpmath:60"])
def test_comparisons_follow_ieee(cname):
    ctx = scalars.get(cname)
    rows = [t for t in TABLE if cname != "mpmath:60" or not np.isnan(t[0] + t[1])]  # no NaN
    a = ctx.convert(np.array([t[0] for t in rows]))
    b = ctx.convert(np.array([t[1] for t in rows]))
    for k, op in enumerate(OPNAMES):
        got = np.asarray(ctx.to_float64(OPS[op].forward(ctx, [a, b], {}, 0)))
        assert got.tolist() == [t[2 + k] for t in rows], (cname, op)


def test_comparisons_are_exact_in_rational():
    q = scalars.get("rational")
    a, b = q.convert(["1/3", "1/3", "-2"]), q.convert(["0.3333333333333333", "1/3", "-3"])
    want = {"lt": [0, 0, 0], "le": [0, 1, 0], "gt": [1, 0, 1], "ge": [1, 1, 1],
            "eq": [0, 1, 0], "ne": [1, 0, 1]}
    for op, w in want.items():
        assert [to_fraction(t) for t in OPS[op].forward(q, [a, b], {}, 0)] == w, op


def test_boolean_ops_truth_tables():
    ctx = scalars.get("binary32")
    p = ctx.convert([1.0, 1.0, 0.0, 0.0])
    q = ctx.convert([1.0, 0.0, 1.0, 0.0])
    assert OPS["and"].forward(ctx, [p, q], {}, 0).tolist() == [1, 0, 0, 0]
    assert OPS["or"].forward(ctx, [p, q], {}, 0).tolist() == [1, 1, 1, 0]
    assert OPS["not"].forward(ctx, [p], {}, 0).tolist() == [0, 0, 1, 1]


def test_interval_comparisons_and_logic_are_three_valued():
    ctx = scalars.get("interval:binary32")
    a = ctx.make([0.0, 2.0, 0.0, 1.0], [1.0, 3.0, 2.0, 1.0])
    b = ctx.make([1.5, 0.0, 1.0, 1.0], [2.0, 1.0, 3.0, 1.0])
    lt = OPS["lt"].forward(ctx, [a, b], {}, 0)
    assert lt.lo.tolist() == [1, 0, 0, 0] and lt.hi.tolist() == [1, 0, 1, 0]
    eq = OPS["eq"].forward(ctx, [a, b], {}, 0)
    assert eq.lo.tolist() == [0, 0, 0, 1] and eq.hi.tolist() == [0, 0, 1, 1]
    ne = OPS["ne"].forward(ctx, [a, b], {}, 0)
    assert ne.lo.tolist() == [1, 1, 0, 0] and ne.hi.tolist() == [1, 1, 1, 0]
    und = OPS["and"].forward(ctx, [lt, ne], {}, 0)
    assert und.lo.tolist() == [1, 0, 0, 0] and und.hi.tolist() == [1, 0, 1, 0]
    nt = OPS["not"].forward(ctx, [lt], {}, 0)
    assert nt.lo.tolist() == [0, 1, 0, 1] and nt.hi.tolist() == [0, 1, 1, 1]


def test_select_never_leaks_the_unselected_nan():
    g = Graph([Node(0, [], "input", [4]), Node(1, [], "const", []),
               Node(2, [0, 0], OpKind("div"), [4]), Node(3, [0, 1], OpKind("ne"), [4]),
               Node(4, [3, 2, 1], OpKind("select"), [4])])
    pay = Payload({1: {"const": {"value": np.array(0.0)}}})
    x = np.array([2.0, 0.0, -3.0, 0.0])
    for cname in ("float64", "binary32", "binary16"):
        y = graph.denote(g, pay, x, cname)
        assert np.asarray(y).tolist() == [1.0, 0.0, 1.0, 0.0], cname
    # forward-mode derivative through the selected branch only (tangent of x/x is NaN at 0)
    d = graph.denote(g, pay, Dual(x, np.ones(4)), "dual:float64")
    assert d.primal.tolist() == [1.0, 0.0, 1.0, 0.0] and d.tangent.tolist() == [0.0] * 4
    rec = OPS["select"]
    f64 = scalars.get("float64")
    c = np.array([1.0, 0.0, 1.0, 0.0])
    a = np.array([5.0, NAN, 7.0, INF])
    b = np.array([0.0, 1.0, 2.0, 3.0])
    y = rec.forward(f64, [c, a, b], {}, 0)
    assert y.tolist() == [5.0, 1.0, 7.0, 3.0]
    ta = np.array([1.0, NAN, 1.0, NAN])
    tb = np.array([2.0, 2.0, 2.0, 2.0])
    assert rec.jvp(f64, [c, a, b], [None, ta, tb], y, {}, 0).tolist() == [1, 2, 1, 2]
    gc, ga, gb = rec.vjp(f64, np.array([1.0, INF, 1.0, NAN]), [c, a, b], y, {}, 0)
    assert gc.tolist() == [0] * 4 and ga.tolist() == [1, 0, 1, 0]
    assert gb[[0, 2]].tolist() == [0, 0] and gb[1] == INF and np.isnan(gb[3])


def test_select_over_intervals_is_the_hull_where_undecided():
    ctx = scalars.get("interval:float64")
    x = ctx.make([-1.0, 0.5, -3.0], [1.0, 2.0, -2.0])
    zero = ctx.zeros(())
    cond = OPS["gt"].forward(ctx, [x, zero], {}, 0)
    a = ctx.exp(x)
    b = ctx.neg(x)
    y = OPS["select"].forward(ctx, [cond, a, b], {}, 0)
    # undecided: hull of exp([-1,1]) and -[-1,1]; decided: the branch itself
    assert y.lo[0] <= -1.0 and y.hi[0] >= np.e
    assert (y.lo[1], y.hi[1]) == (a.lo[1], a.hi[1])
    assert (y.lo[2], y.hi[2]) == (b.lo[2], b.hi[2])
    rng = np.random.default_rng(0)
    for i in range(3):
        for t in rng.uniform(x.lo[i], x.hi[i], 50):
            v = np.exp(t) if t > 0 else -t
            assert y.lo[i] <= v <= y.hi[i]


def test_piecewise_constant_ops_have_zero_derivatives():
    f64 = scalars.get("float64")
    a, b = np.array([1.0, -2.0]), np.array([0.5, 3.0])
    for op in OPNAMES + ["and", "or"]:
        rec = OPS[op]
        y = rec.forward(f64, [a, b], {}, 0)
        assert [t.tolist() for t in rec.vjp(f64, np.ones(2), [a, b], y, {}, 0)] == [[0, 0]] * 2
        assert rec.jvp(f64, [a, b], [np.ones(2), np.ones(2)], y, {}, 0).tolist() == [0, 0]


def test_fma_op_rounds_once():
    """binary32 fma through the graph op equals MPFR's fma in binary32 (not mul then add)."""
    rng = np.random.default_rng(3)
    f = formats.binary32
    a, b, c = (formats.round_to_format(rng.standard_normal(500), f) for _ in range(3))
    a[:5] = 1.0 + 2.0 ** -23
    b[:5] = 1.0 - 2.0 ** -23
    c[:5] = -1.0
    ctx = scalars.get("binary32")
    got = OPS["fma"].forward(ctx, [a, b, c], {}, 0)
    g = gmpy2.context(precision=24, emin=-148, emax=128, subnormalize=True)
    want = np.array([float(g.fma(gmpy2.mpfr(float(x)), gmpy2.mpfr(float(y)), gmpy2.mpfr(float(z))))
                     for x, y, z in zip(a, b, c)])
    assert np.array_equal(got, want)
    assert got[0] == -(2.0 ** -46)          # the product's low part survives
    q = scalars.get("rational")
    r = OPS["fma"].forward(q, [q.convert(["1/3"]), q.convert(["3/7"]), q.convert(["-1/7"])], {}, 0)
    assert to_fraction(r[0]) == 0
    box = OPS["fma"].forward(scalars.get("interval:binary32"),
                             [Interval(np.array([1.0]), np.array([2.0])), np.array([3.0]),
                              np.array([-1.0])], {}, 0)
    assert (box.lo[0], box.hi[0]) == (2.0, 5.0)


def test_predicates_on_special_values():
    x = np.array([1.0, -0.0, INF, -INF, NAN, 1e-40, -2.0])
    want = {"isnan": [0, 0, 0, 0, 1, 0, 0], "isinf": [0, 0, 1, 1, 0, 0, 0],
            "isfinite": [1, 1, 0, 0, 0, 1, 1], "signbit": [0, 1, 0, 1, 0, 0, 1]}
    for cname, normal in (("float64", [1, 0, 0, 0, 0, 1, 1]), ("binary32", [1, 0, 0, 0, 0, 0, 1])):
        ctx = scalars.get(cname)
        v = ctx.convert(x)
        for op, w in dict(want, isnormal=normal).items():
            assert OPS[op].forward(ctx, [v], {}, 0).tolist() == w, (cname, op)
    e = scalars.get("e4m3")          # no infinities: inf converts to NaN
    v = e.convert(np.array([1.0, INF, 2.0 ** -8]))
    assert OPS["isinf"].forward(e, [v], {}, 0).tolist() == [0, 0, 0]
    assert OPS["isnan"].forward(e, [v], {}, 0).tolist() == [0, 1, 0]
    assert OPS["isnormal"].forward(e, [v], {}, 0).tolist() == [1, 0, 0]   # 2^-8: subnormal
    q = scalars.get("rational")
    v = q.convert(["0", "-1/3", "1e-400"])
    assert [to_fraction(t) for t in OPS["isnormal"].forward(q, [v], {}, 0)] == [0, 1, 1]
    assert [to_fraction(t) for t in OPS["signbit"].forward(q, [v], {}, 0)] == [0, 1, 0]
    iv = scalars.get("interval:binary32")
    box = iv.make([-1.0, 1.0, 0.0, 1e-40, 3.0], [2.0, INF, 0.0, 1e-39, 3.0])
    lohi = {op: (OPS[op].forward(iv, [box], {}, 0).lo.tolist(),
                 OPS[op].forward(iv, [box], {}, 0).hi.tolist()) for op in PRED}
    assert lohi["isfinite"] == ([1, 0, 1, 1, 1], [1, 1, 1, 1, 1])
    assert lohi["isnormal"] == ([0, 0, 0, 0, 1], [1, 1, 0, 0, 1])
    assert lohi["signbit"] == ([0, 0, 0, 0, 0], [1, 0, 1, 0, 0])
    assert lohi["isnan"] == ([0] * 5, [0] * 5)


PRED = ["isnan", "isinf", "isfinite", "isnormal", "signbit"]
