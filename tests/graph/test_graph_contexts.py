"""The same graphs and op rules under interval and dual contexts: the seed's IBP box table,
enclosure of point evaluations, partial evaluation (None where a transfer fails), and dual
tangents equal to the op table's JVP rules."""
from __future__ import annotations

import numpy as np
import pytest

from scalarlab import graph
from scalarlab import scalars
from scalarlab.graph import Graph, Node, Payload, examples
from scalarlab.graph.optable import OPS, full_attrs
from scalarlab.scalars.values import Dual, Interval

from graph_opcases import CASES, draw, make_args

IBP_TABLE = [
    "[0.250000, -0.250000, 0.050000, 0.350000] .. [0.350000, -0.150000, 0.150000, 0.450000]",
    "[0.087000, -0.031500, -0.007500, 0.067500, -0.015000] .. [0.127000, -0.002500, 0.015500, 0.094500, 0.009000]",
    "[0.087000, 0.000000, 0.000000, 0.067500, 0.000000] .. [0.127000, 0.000000, 0.015500, 0.094500, 0.009000]",
    "[0.025445, -0.016025, 0.011355] .. [0.029815, -0.012220, 0.018045]",
    "[0.020775] .. [0.035640]",
]


@pytest.mark.parametrize("ctxname", ["interval:float64", "interval:binary32", "interval:mpmath:200"])
def test_six_node_box_table_matches_seed(ctxname):
    """The seed's IBP block: x0 +- 0.05, one box per node (the fold over an interval
    context), tanh by its monotone endpoint rule; sampled points lie in every box."""
    g, p, x = examples.six_node_mlp()
    ctx = scalars.get(ctxname)
    center = ctx.convert(list(x.reshape(-1)))          # exact decimals, enclosed
    r = ctx.convert("0.05")
    box = Interval(ctx.sub(center, r).lo, ctx.add(center, r).hi)
    vals = graph.denote_all(g, p, box, ctx)
    assert [ctx.format(v) for v in vals[:5]] == IBP_TABLE
    assert ctx.format(vals[5]) == "[0.020772] .. [0.035625]"
    x0 = np.array([0.3, -0.2, 0.1, 0.4])
    pts = x0 + np.random.default_rng(0).uniform(-0.05, 0.05, size=(50, 4))
    for v, b in zip(graph.denote_all(g, p, pts, "float64"), vals):
        lo, hi = _endpoints(ctx, b)
        assert (lo <= v).all() and (v <= hi).all()


def _endpoints(ctx, v):
    """float64 views of an interval's endpoints (outward: lower rounded down, upper up)."""
    base = ctx.base
    return (np.asarray(base.to_float64(v.lo), dtype=np.float64),
            np.asarray(base.to_float64(v.hi), dtype=np.float64))


POINT_OPS = [c for c in CASES]


@pytest.mark.parametrize("c", POINT_OPS, ids=lambda c: c["name"])
def test_ops_enclose_point_values_over_boxes(c):
    """Forward rule over a small box around random inputs encloses the float64 values at
    sampled points (lo - slack <= f(x) <= hi + slack, slack = float64 rounding)."""
    ctx = scalars.get("interval:float64")
    rng = np.random.default_rng(2)
    parents, params = make_args(c, rng)
    rec = OPS[c["op"]]
    attrs = full_attrs(rec, c["attrs"])
    rad = 1e-3
    # integer parents (indices) are exact values: a point box, never perturbed
    args = [ctx.convert(a) if i in c["integer"] else
            Interval(ctx.base.convert(a - rad), ctx.base.convert(a + rad))
            for i, a in enumerate(parents)]
    args += [ctx.convert(a) for a in params]
    y = rec.forward(ctx, args, attrs, 0)
    lo, hi = _endpoints(ctx, y)
    f64 = scalars.get("float64")
    for _ in range(20):
        pts = [a if i in c["integer"] else a + rng.uniform(-rad, rad, size=np.shape(a))
               for i, a in enumerate(parents)]
        v = np.asarray(rec.forward(f64, pts + params, attrs, 0))
        slack = 1e-12 * (1 + np.abs(v))
        assert (lo <= v + slack).all() and (v - slack <= hi).all()


def test_partial_evaluation_gives_none_downstream_of_a_failed_transfer():
    ctx = scalars.get("interval:float64")
    g = Graph([Node(0, [], "input", [2]), Node(1, [0], "log", [2]), Node(2, [1], "exp", [2]),
               Node(3, [0], "relu", [2])])
    box = Interval(np.array([-1.0, 0.5]), np.array([1.0, 2.0]))
    vals = graph.denote_all(g, Payload(), box, ctx, partial=True)
    assert vals[1] is None and vals[2] is None and vals[3] is not None
    with pytest.raises(scalars.ContextError, match="IR eval: log 1"):
        graph.denote_all(g, Payload(), box, ctx)
    # safe_log never fails on such a box
    g2 = Graph([Node(0, [], "input", [2]), Node(1, [0], "safe_log", [2])])
    lo, hi = _endpoints(ctx, graph.denote(g2, Payload(), box, ctx))
    assert lo[0] <= np.log(1e-12) <= hi[0] and hi[0] >= 0


DUAL_OPS = [c for c in CASES if c["op"] not in ("detach",)]


@pytest.mark.parametrize("c", DUAL_OPS, ids=lambda c: c["name"])
def test_dual_tangent_equals_the_jvp_rule(c):
    """Forward over dual:float64 carries the tangent the context's own derivative rules
    give; it must equal the op table's JVP rule (two independent derivations)."""
    dctx = scalars.get("dual:float64")
    f64 = scalars.get("float64")
    rng = np.random.default_rng(4)
    parents, params = make_args(c, rng)
    tans = [draw(np.shape(a), rng) for a in parents]
    rec = OPS[c["op"]]
    attrs = full_attrs(rec, c["attrs"])
    args = [Dual(a, t) for a, t in zip(parents, tans)] + [dctx.convert(a) for a in params]
    y = rec.forward(dctx, args, attrs, 0)
    yf = rec.forward(f64, parents + params, attrs, 0)
    jv = rec.jvp(f64, parents + params, tans + [None] * len(params), yf, attrs, 0)
    np.testing.assert_allclose(y.primal, yf, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(y.tangent, jv, rtol=1e-9, atol=1e-12)


def test_graph_level_jvp_through_duals_matches_chained_rules():
    g, p, x = examples.six_node_mlp()
    x0 = np.array([0.3, -0.2, 0.1, 0.4])
    t = np.array([1.0, -0.5, 0.25, 2.0])
    yd = graph.denote(g, p, Dual(x0, t), "dual:float64")
    f64 = scalars.get("float64")
    vals = graph.denote_all(g, p, x0, f64)
    tan = {0: t}
    for n in list(g.nodes)[1:]:
        rec = OPS[n.kind.op]
        pp = p.converted(f64, n.id)
        args = [vals[q] for q in n.parents] + [pp[k] for k in rec.params]
        tans = [tan[q] for q in n.parents] + [None] * len(rec.params)
        tan[n.id] = rec.jvp(f64, args, tans, vals[n.id], full_attrs(rec, n.kind.attrs), 0)
    assert abs(float(yd.tangent) - float(tan[5])) < 1e-15
