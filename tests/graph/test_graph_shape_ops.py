"""The ONNX-style shape ops beyond the shared op cases: split as slice nodes, clear errors
naming the op and values, and exact adjoints in the rational context."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch

from scalarlab import graph, scalars
from scalarlab.graph import Graph, Node, OpKind, Payload
from scalarlab.graph.ops_shape import split_slices
from scalarlab.graph.optable import OPS, ShapeRuleError, full_attrs


def one_node(op, in_shape, **attrs):
    rec = OPS[op]
    out = rec.shape([tuple(in_shape)], full_attrs(rec, attrs))
    return Graph([Node(0, [], "input", list(in_shape)), Node(1, [0], OpKind(op, **attrs), out)])


@pytest.mark.parametrize("n,k", [(7, 3), (6, 3), (5, 5), (9, 4)])
def test_split_as_slices_matches_torch_chunk(n, k):
    x = np.arange(2 * n, dtype=np.float64).reshape(2, n)
    parts = [graph.denote(one_node("slice", (2, n), **a), Payload(), x, "float64")
             for a in split_slices((2, n), axis=-1, num_outputs=k)]
    want = torch.chunk(torch.tensor(x), k, dim=1)
    empty = [p for p in parts if p.size == 0]      # ONNX keeps an empty last output
    parts = [p for p in parts if p.size]
    assert len(parts) == len(want) and len(empty) <= 1
    for p, w in zip(parts, want):
        assert np.array_equal(p, w.numpy())


def test_split_sizes_and_their_errors():
    assert split_slices((10, 2), 0, split=[3, 7]) == [
        {"starts": [0], "ends": [3], "axes": [0]}, {"starts": [3], "ends": [10], "axes": [0]}]
    with pytest.raises(ShapeRuleError, match=r"split: sizes \[3, 6\] do not add up to the axis length 10"):
        split_slices((10,), 0, split=[3, 6])
    with pytest.raises(ShapeRuleError, match=r"split: give split sizes or a positive num_outputs"):
        split_slices((10,), 0)


@pytest.mark.parametrize("op,shape,attrs,msg", [
    ("gather", (4, 3), {"indices": [0, 3], "axis": 1},
     r"gather: index 3 out of range for axis 1 of length 3 \(shape \[4, 3\]\)"),
    ("gather", (4, 3), {"indices": [0.5]}, r"gather: attribute indices must be an int"),
    ("squeeze", (3, 2), {"axes": [1]}, r"squeeze: axis 1 of \[3, 2\] has length 2, not 1"),
    ("pad", (3, 2), {"pads": [0, 2, 0, 0], "mode": "reflect"},
     r"pad: reflect pads \[2, 0\] need at most 1 \(axis 1 has length 2\)"),
    ("pad", (3, 2), {"pads": [0, 1]}, r"pad: pads \[0, 1\] must hold a begin and an end for each of the 2 axes"),
    ("pad", (3, 2), {"pads": [0, 0, 0, 0], "mode": "mirror"}, r"pad: mode must be one of constant, reflect, edge, wrap"),
    ("slice", (3, 2), {"starts": [0], "ends": [1], "steps": [0]}, r"slice: steps must be non-zero"),
    ("expand", (3, 2), {"shape": [4, 2]}, r"expand: shapes do not broadcast: \[3, 2\] vs \[4, 2\]"),
    ("tile", (3, 2), {"repeats": [2]}, r"tile: repeats \[2\] must give one non-negative count per per-example axis of \[3, 2\]"),
    ("unsqueeze", (3,), {"axes": [0, 0]}, r"unsqueeze: repeated axis"),
])
def test_shape_errors_name_the_op_and_the_values(op, shape, attrs, msg):
    with pytest.raises(ShapeRuleError, match=msg):
        OPS[op].shape([shape], full_attrs(OPS[op], attrs))


def test_where_condition_must_be_boolean():
    with pytest.raises(graph.GraphError, match=r"where: attribute condition must be a boolean"):
        graph.check_shapes(Graph([Node(0, [], "input", [2]), Node(1, [], "input", [2]),
                                  Node(2, [0, 1], OpKind("where", condition=[1, 0]), [2])]))


@pytest.mark.parametrize("op,attrs", [
    ("gather", {"indices": [[0, 2, 0], [0, 1, 2]], "axis": 0}),   # repeated indices
    ("pad", {"pads": [2, 2, 1, 2], "mode": "reflect"}),
    ("pad", {"pads": [3, 0, 4, 1], "mode": "edge"}),
    ("pad", {"pads": [1, 1, 1, 1], "value": "1/3"}),
    ("tile", {"repeats": [2, 3]}),
])
def test_adjoints_are_exact_in_rationals(op, attrs):
    """<vjp(g), t> = <g, jvp(t)> exactly (both sides are sums of the same rational terms)."""
    ctx = scalars.get("rational")
    rec = OPS[op]
    a = full_attrs(rec, attrs)
    rng = np.random.default_rng(0)
    x = ctx.convert(rng.integers(-9, 9, (3, 4)))
    t = ctx.convert(rng.integers(-9, 9, (3, 4)))
    y = rec.forward(ctx, [x], a, 0)
    g = ctx.convert(rng.integers(-9, 9, ctx.shape(y)))
    (gx,) = rec.vjp(ctx, g, [x], y, a, 0)
    jt = rec.jvp(ctx, [x], [t], y, a, 0)
    lhs = sum(Fraction(int(u.numerator), int(u.denominator)) * Fraction(int(v.numerator), int(v.denominator))
              for u, v in zip(np.asarray(gx).reshape(-1), np.asarray(t).reshape(-1)))
    rhs = sum(Fraction(int(u.numerator), int(u.denominator)) * Fraction(int(v.numerator), int(v.denominator))
              for u, v in zip(np.asarray(g).reshape(-1), np.asarray(jt).reshape(-1)))
    assert lhs == rhs
