"""One source of derivatives at the kinks: the dual context, the graph op table's JVP and
its VJP agree at relu(0), abs(0) and max/min ties (and on both sides of each kink)."""
from __future__ import annotations

import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.graph.optable import OPS
from scalarlab.scalars.values import Dual

BASES = ["float64", "binary32", "rational", "mpmath:80"]


def _f(ctx, v):
    return [float(t) for t in np.asarray(ctx.to_float64(v), dtype=float).reshape(-1)]


def _three_ways(base, op, xs, ts):
    """(dual-context tangent via the record's forward, the record's JVP, the record's
    VJP contracted with ts) for one op at the points xs (one list per operand)."""
    B = scalars.get(base)
    D = scalars.get(f"dual:{base}")
    rec = OPS[op]
    xv = [B.convert(x) for x in xs]
    tv = [B.convert(t) for t in ts]
    y = rec.forward(B, xv, {}, 0)
    dual = rec.forward(D, [Dual(x, t) for x, t in zip(xv, tv)], {}, 0)
    jvp = rec.jvp(B, xv, tv, y, {}, 0)
    g = B.ones(B.shape(y))
    cots = rec.vjp(B, g, xv, y, {}, 0)            # <cotangent, tangent> per operand
    terms = [B.mul(c, t) for c, t in zip(cots, tv)]
    vjp = terms[0] if len(terms) == 1 else B.add(terms[0], terms[1])
    assert _f(B, dual.primal) == _f(B, y)
    return _f(B, dual.tangent), _f(B, jvp), _f(B, vjp)


@pytest.mark.parametrize("base", BASES)
def test_relu_at_zero_is_zero_everywhere(base):
    d, j, v = _three_ways(base, "relu", [["-1", "0", "2"]], [["3", "3", "3"]])
    assert d == j == v == [0.0, 0.0, 3.0]


@pytest.mark.parametrize("base", BASES)
def test_abs_at_zero_is_zero_everywhere(base):
    d, j, v = _three_ways(base, "abs", [["-1", "0", "2"]], [["3", "3", "3"]])
    assert d == j == v == [-3.0, 0.0, 3.0]
    D = scalars.get(f"dual:{base}")                  # the context's own abs agrees
    a = D.abs(D.make(["-1", "0", "2"], ["3", "3", "3"]))
    assert _f(D.base, a.tangent) == d


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("op, method", [("max", "maximum"), ("min", "minimum")])
def test_max_min_ties_split_equally_everywhere(base, op, method):
    a, b = ["1", "2", "3"], ["2", "2", "1"]
    ta, tb = ["4", "4", "4"], ["8", "8", "8"]
    d, j, v = _three_ways(base, op, [a, b], [ta, tb])
    # a < b, tie, a > b: the tie takes half of each tangent
    want = [8.0, 6.0, 4.0] if op == "max" else [4.0, 6.0, 8.0]
    assert d == j == v == want
    D = scalars.get(f"dual:{base}")                  # the context's own method agrees
    r = getattr(D, method)(D.make(a, ta), D.make(b, tb))
    assert _f(D.base, r.tangent) == want


def test_relu_through_the_dual_context_maximum_is_the_max_rule():
    """ctx.maximum(x, 0) is the max op (ties split); the relu op uses its own rule."""
    D = scalars.get("dual:float64")
    r = D.maximum(D.make([0.0], [3.0]), D.zeros((1,)))
    assert r.tangent.tolist() == [1.5]
    y = OPS["relu"].forward(D, [D.make([0.0], [3.0])], {}, 0)
    assert y.tangent.tolist() == [0.0]


def test_nested_duals_take_the_record_rules_at_every_level():
    """dual:dual:float64 through the relu record: zero first and second order at 0."""
    DD = scalars.get("dual:dual:float64")
    D = DD.base
    x = Dual(D.make([0.0, 2.0], [1.0, 1.0]), D.make([1.0, 1.0], [0.0, 0.0]))
    y = OPS["relu"].forward(DD, [x], {}, 0)
    assert y.primal.tangent.tolist() == [0.0, 1.0]
    assert y.tangent.primal.tolist() == [0.0, 1.0]
