"""The seed's six-node MLP: listing, DOT, validation levels, broken variants, value table
in several contexts, exact rationals, and the chapter's variations."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch

from scalarlab import graph
from scalarlab import scalars
from scalarlab.graph import Graph, Node, examples
from scalarlab.scalars.base import to_fraction

LISTING = """0: input parents=[] out=[4]
1: linear(payload=node_id) parents=[0] out=[5]
2: relu parents=[1] out=[5]
3: linear(payload=node_id) parents=[2] out=[3]
4: sum parents=[3] out=[]
5: tanh parents=[4] out=[]"""

DOT = r"""digraph IR {
  rankdir=LR;
  node [shape=box, fontsize=10];
  n0 [label="0: input\nout=[4]"];
  n1 [label="1: linear(payload=node_id)\nout=[5]"];
  n2 [label="2: relu\nout=[5]"];
  n3 [label="3: linear(payload=node_id)\nout=[3]"];
  n4 [label="4: sum\nout=[]"];
  n5 [label="5: tanh\nout=[]"];
  n0 -> n1;
  n1 -> n2;
  n2 -> n3;
  n3 -> n4;
  n4 -> n5;
}"""

TABLE = ["[0.300000, -0.200000, 0.100000, 0.400000]",
         "[0.107000, -0.017000, 0.004000, 0.081000, -0.003000]",
         "[0.107000, 0.000000, 0.004000, 0.081000, 0.000000]",
         "[0.027540, -0.014730, 0.014910]", "0.027720", "0.027713"]


@pytest.fixture(scope="module")
def six():
    return examples.six_node_mlp()


def test_listing_and_dot_match_the_seed(six):
    g, _, _ = six
    assert graph.listing(g) == LISTING
    assert graph.to_dot(g) == DOT


def test_both_checks_pass_and_shapes_are_inferred(six):
    g, p, _ = six
    graph.check_well_formed(g)
    graph.check_shapes(g)
    graph.check_payload(g, p)
    assert graph.infer_shapes(g) == [(4,), (5,), (5,), (3,), (), ()]


def _nodes(g):
    return list(g.nodes)


def test_wrong_relu_shape_passes_structure_fails_shapes(six):
    g, _, _ = six
    n = _nodes(g)
    bad = Graph(n[:2] + [n[2].replace(out_shape=[4])] + n[3:])
    graph.check_well_formed(bad)
    with pytest.raises(graph.GraphError) as e:
        graph.check_shapes(bad)
    assert str(e.value) == ("IR graph: node 2: outShape mismatch: inferred=[5], declared=[4] "
                            "(Node(id=2, kind=relu, parents=#[1], outShape=[4]))")


def test_forward_parent_reference(six):
    g, _, _ = six
    n = _nodes(g)
    bad = Graph(n[:2] + [n[2].replace(parents=[3])] + n[3:])
    with pytest.raises(graph.GraphError) as e:
        graph.check_well_formed(bad)
    assert str(e.value) == ("IR graph: node 2: parent id 3 is not < 2 "
                            "(Node(id=2, kind=relu, parents=#[3], outShape=[5]))")


def test_id_discipline(six):
    g, _, _ = six
    n = _nodes(g)
    bad = Graph(n[:2] + [n[2].replace(id=7)] + n[3:])
    with pytest.raises(graph.GraphError) as e:
        graph.check_well_formed(bad)
    assert str(e.value) == "IR graph: id discipline violated at index 2: nodes[2].id = 7"


def test_arity_is_checked_by_structure(six):
    g, _, _ = six
    n = _nodes(g)
    bad = Graph(n[:2] + [n[2].replace(parents=[0, 1])] + n[3:])
    with pytest.raises(graph.GraphError, match=r"node 2: arity mismatch: relu takes 1 parent, got 2"):
        graph.check_well_formed(bad)


def test_swapped_payload_keys_fail_at_node_1(six):
    """Variation 2: node 1 gets node 3's weights; evaluation names node 1 and both dims."""
    g, p, x = six
    with pytest.raises(graph.GraphError) as e:
        graph.denote_all(g, p.swapped(1, 3), x, "float64")
    assert str(e.value) == "IR eval: linear 1: declared outShape mismatch: [5] vs expected [3]"


def test_payload_shape_mismatch_names_node_and_shapes(six):
    g, p, x = six
    bad = graph.Payload(p)
    bad.set(3, {"W": np.zeros((3, 4)), "b": np.zeros(3)}, op="linear")
    with pytest.raises(graph.GraphError, match=r"IR eval: linear 3: input shape mismatch: \[5\] vs expected \[4\]"):
        graph.denote(g, bad, x, "float64")
    bad.set(3, {"W": np.zeros((3, 5)), "b": np.zeros(2)}, op="linear")
    with pytest.raises(graph.GraphError, match=r"IR eval: linear 3: payload b shape mismatch: \[2\] vs expected \[3\]"):
        graph.denote(g, bad, x, "float64")


@pytest.mark.parametrize("ctxname", ["float64", "binary32", "fp32-real", "mpmath:200"])
def test_value_table_matches_seed(six, ctxname):
    g, p, x = six
    ctx = scalars.get(ctxname)
    vals = graph.denote_all(g, p, x, ctx)
    assert [ctx.format(v) for v in vals] == TABLE
    assert ctx.format(graph.denote(g, p, x, ctx, output_id=5)) == "0.027713"


def _exact_table():
    """The six-node forward in Python Fractions, from the same decimal strings."""
    F = Fraction
    W1 = [[F(t) for t in r] for r in examples.W1]
    W2 = [[F(t) for t in r] for r in examples.W2]
    b1 = [F(t) for t in examples.B1]
    b2 = [F(t) for t in examples.B2]
    x = [F(t) for t in examples.X0]
    h = [sum((w * xi for w, xi in zip(row, x)), F(0)) + b for row, b in zip(W1, b1)]
    r = [max(t, F(0)) for t in h]
    o = [sum((w * ri for w, ri in zip(row, r)), F(0)) + b for row, b in zip(W2, b2)]
    return [x, h, r, o, [sum(o, F(0))]]


def test_rational_is_exact_up_to_tanh_which_raises(six):
    g, p, x = six
    ctx = scalars.get("rational")
    with pytest.raises(scalars.ContextError, match="tanh 5"):
        graph.denote_all(g, p, x, ctx)
    errors: dict = {}
    vals = graph.denote_all(g, p, x, ctx, partial=True, errors=errors)
    assert vals[5] is None
    # the fold says why, with the message the non-partial fold raises (one failed node)
    with pytest.raises(scalars.ContextError) as info:
        graph.denote_all(g, p, x, ctx)
    assert errors == {5: str(info.value)}
    for got, want in zip(vals[:5], _exact_table()):
        assert [to_fraction(t) for t in np.asarray(got, dtype=object).reshape(-1)] == want
    assert to_fraction(np.asarray(vals[4]).item()) == Fraction(693, 25000)
    assert ctx.format(vals[4]) == "0.027720"


def test_float64_and_binary32_agree_at_6_decimals_but_differ_in_bits(six):
    g, p, x = six
    y64 = float(graph.denote(g, p, x, "float64"))
    y32 = float(graph.denote(g, p, x, "binary32"))
    assert f"{y64:.6f}" == f"{y32:.6f}" == "0.027713"
    assert y64 != y32
    assert float(np.float32(y32)) == y32 and float(np.float32(y64)) != y64
    # both agree with PyTorch in the matching precision
    for dtype, y, tol in ((torch.float64, y64, 1e-16), (torch.float32, y32, 2 ** -28)):
        W1 = torch.tensor([[float(t) for t in r] for r in examples.W1], dtype=dtype)
        W2 = torch.tensor([[float(t) for t in r] for r in examples.W2], dtype=dtype)
        b1 = torch.tensor([float(t) for t in examples.B1], dtype=dtype)
        b2 = torch.tensor([float(t) for t in examples.B2], dtype=dtype)
        x0 = torch.tensor([float(t) for t in examples.X0], dtype=dtype)
        ty = torch.tanh((W2 @ torch.relu(W1 @ x0 + b1) + b2).sum()).item()
        assert abs(ty - y) <= tol


def test_seventh_relu_node(six):
    """Variation 1: relu on node 5 with [] passes both checks; with [3] only the shape
    checker complains."""
    g, p, x = six
    ok = Graph(_nodes(g) + [Node(6, [5], "relu", [])])
    graph.check_shapes(ok)
    assert scalars.get("float64").format(graph.denote(ok, p, x, "float64")) == "0.027713"
    bad = Graph(_nodes(g) + [Node(6, [5], "relu", [3])])
    graph.check_well_formed(bad)
    with pytest.raises(graph.GraphError, match=r"node 6: outShape mismatch: inferred=\[\], declared=\[3\]"):
        graph.check_shapes(bad)


def test_log_after_tanh_fails_only_where_arithmetic_breaks(six):
    """Variation 6: a log node after tanh.  Every column of W2 sums to a positive number
    and relu >= 0, so sum >= sum(b2) = 0.01 and tanh > 0 for every finite input evaluated
    exactly; the inputs that fail are those whose float arithmetic overflows (inf - inf =
    NaN in node 1).  The error names the node and the offending value."""
    g, p, x = six
    gl = Graph(_nodes(g) + [Node(6, [5], "log", [])])
    assert abs(float(graph.denote(gl, p, x, "float64")) - np.log(0.02771290218035732)) < 1e-15
    xs = np.random.default_rng(0).uniform(-100, 100, size=(500, 4))
    assert (np.asarray(graph.denote(g, p, xs, "float64")) > 0).all()
    huge = np.array([np.inf, 0.0, 0.0, 0.0])     # inf - inf in node 3
    with pytest.raises(graph.GraphError, match=r"IR eval: log 6: log of a NaN value: x\[\] = nan"):
        graph.denote(gl, p, huge, "float64")
    ctx = scalars.get("binary32")
    big = np.array([3e39, -3e39, 3e39, 3e39])   # converts to +-inf in binary32
    with pytest.raises(graph.GraphError, match=r"IR eval: log 6: log of a NaN value"):
        graph.denote(gl, p, big, ctx)
    # no overflow in exact arithmetic: a binary32-overflowing finite input is fine there
    big = np.array([3e39, -3e39, 3e39, 3e39])
    assert float(np.asarray(graph.denote(gl, p, big, "float64"))) == 0.0     # log(tanh) = log 1
    # in a batch the message points at the failing sample
    with pytest.raises(graph.GraphError, match=r"log 6: log of a NaN value: x\[2\] = nan"):
        graph.denote(gl, p, np.stack([xs[0], xs[1], huge]), "float64")
    vals = graph.denote_all(gl, p, huge, "float64", partial=True)
    assert vals[6] is None and vals[5] is not None
    # a log node on a value that is exactly non-positive
    gz = Graph([Node(0, [], "input", [2]), Node(1, [0], "log", [2])])
    with pytest.raises(graph.GraphError, match=r"IR eval: log 1: log of a non-positive value: x\[1\] = -0.5"):
        graph.denote(gz, {}, np.array([1.0, -0.5]), "float64")
    with pytest.raises(graph.GraphError, match=r"IR eval: log 1: log of a non-positive value: x\[0\] = 0.0"):
        graph.denote(gz, {}, ["0", "1"], "rational")


def test_sigmoid_and_abs_replacements_evaluate(six):
    g, p, x = six
    for op, f in (("sigmoid", lambda t: 1 / (1 + np.exp(-t))), ("abs", abs)):
        n = _nodes(g)
        g2 = Graph(n[:5] + [Node(5, [4], op, [])])
        assert abs(float(graph.denote(g2, p, x, "float64")) - f(0.02772)) < 1e-15


def test_batched_six_node_equals_single_calls():
    g, p, _ = examples.six_node_mlp()
    xs = np.random.default_rng(1).uniform(-1, 1, size=(3, 5, 4))
    for ctxname in ("binary32", "rational", "float64"):
        ctx = scalars.get(ctxname)
        if ctxname == "rational":
            g = Graph(list(g.nodes)[:5])   # tanh is not rational
        table = graph.denote_all(g, p, xs, ctx)
        for idx in np.ndindex(3, 5):
            single = graph.denote_all(g, p, xs[idx], ctx)
            for tb, ts in zip(table, single):
                a, b = np.asarray(tb[idx]), np.asarray(ts)
                if ctxname == "float64":   # BLAS order depends on the batch shape
                    np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-16)
                else:
                    assert a.shape == b.shape and all(s == t for s, t in zip(a.reshape(-1), b.reshape(-1)))


def test_input_shape_and_output_id_errors(six):
    g, p, x = six
    with pytest.raises(graph.GraphError, match=r"IR eval: input 0: input shape mismatch: got \[3\] vs declared \[4\]"):
        graph.denote(g, p, np.zeros(3), "float64")
    with pytest.raises(graph.GraphError, match="output id 9"):
        graph.denote(g, p, x, "float64", output_id=9)
    with pytest.raises(graph.GraphError, match="no payload entry for node 3"):
        graph.denote(g, {1: p.get(1)}, x, "float64")
