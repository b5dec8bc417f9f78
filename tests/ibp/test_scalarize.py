"""ibp.scalarize: a tensor graph's scalar graph runs bit for bit like the tensor graph."""
import numpy as np
import pytest

from scalarlab import graph, scalars
from scalarlab.graph.fold import denote
from scalarlab.ibp.roundoff import BoundError, roundoff_bound
from scalarlab.ibp.scalarize import scalarize
from scalarlab.scalars import formats


def mlp(decimal=False):
    """input(3) -> linear(4) -> tanh -> linear(2) -> relu, then + input's first two."""
    rng = np.random.default_rng(7)
    W1, b1 = rng.normal(size=(4, 3)), rng.normal(size=4)
    W2, b2 = rng.normal(size=(2, 4)), rng.normal(size=2)
    if decimal:
        W1 = np.vectorize(lambda v: f"{v:.3f}", otypes=[object])(W1)
    g = graph.Graph([graph.Node(0, [], "input", [3]),
                     graph.Node(1, [0], "linear", [4]),
                     graph.Node(2, [1], "tanh", [4]),
                     graph.Node(3, [2], "linear", [2]),
                     graph.Node(4, [3], "relu", [2]),
                     graph.Node(5, [4], "neg", [2])])
    p = graph.Payload({1: {"linear": {"W": W1, "b": b1}}, 3: {"linear": {"W": W2, "b": b2}}})
    return g, p


@pytest.mark.parametrize("decimal", [False, True])
@pytest.mark.parametrize("ctx_name", ["binary64", "binary32", "bfloat16", "binary16"])
def test_scalar_graph_equals_tensor_graph_bit_for_bit(ctx_name, decimal):
    g, p = mlp(decimal)
    sg = scalarize(g, p)
    ctx = scalars.get(ctx_name)
    X = formats.round_to_format(np.random.default_rng(1).uniform(-2, 2, size=(200, 3)),
                                ctx.fmt, "nearest_even")
    want = np.asarray(ctx.to_float64(denote(g, p, ctx.convert(X), ctx))).reshape(200, 2)
    cols = {i: ctx.convert(X[:, j]) for j, i in enumerate(sg.graph.input_ids())}
    for j in range(2):
        got = np.asarray(ctx.to_float64(denote(sg.for_output(j), sg.payload, cols, ctx)))
        assert np.array_equal(got.reshape(-1), want[:, j])


def test_scalar_graph_node_count_follows_the_rounding_order():
    g, p = mlp()
    sg = scalarize(g, p)
    # linear 4x3: 12 products, 8 partial sums, 4 bias adds (+ 16 weight/bias constants)
    ops = [n.kind.op for n in sg.graph.nodes]
    assert ops.count("mul") == 12 + 8 and ops.count("tanh") == 4 and ops.count("relu") == 2
    assert ops.count("add") == (8 + 4) + (6 + 2)


def test_unsupported_op_is_named():
    g = graph.Graph([graph.Node(0, [], "input", [3]),
                     graph.Node(1, [0], graph.OpKind("softmax", axis=0), [3])])
    with pytest.raises(BoundError, match="node 1 .*softmax"):
        scalarize(g, graph.Payload({}))


def test_relu_network_bound_holds_at_samples():
    from scalarlab.experiments import bound as B
    g, p = mlp()
    progs = B.programs_of_graph("mlp", g, p)
    assert [q.name for q in progs] == ["mlp[0]", "mlp[1]"]
    for q in progs:
        for fmt in ("binary32", "bfloat16"):
            row = B.bound_one(q, fmt, box=[(-1, 1)] * 3, samples=64, budget_s=0.5)
            assert row["skip"] == "" and row["violations"] == 0
            assert row["samples"] == 64 and row["sampled_max"] <= row["bound_abs"] < 1


def test_bound_of_scalarized_sum_matches_hand_derivation():
    # sum of 3 inputs in [1, 2], left to right: (x0 + x1) <= 4 then + x2 <= 6
    g = graph.Graph([graph.Node(0, [], "input", [3]), graph.Node(1, [0], "sum", [])])
    sg = scalarize(g, graph.Payload({}))
    got = roundoff_bound(sg.for_output(0), sg.payload, [(1, 2)] * 3, formats.binary64,
                         budget_s=5.0).absolute
    u = 2.0 ** -53
    assert 8 * u <= got <= 8 * u * (1 + 1e-12)          # 4u (binade of 4) + 4u (of 6)


def test_contexts_with_other_sum_orders_are_refused_for_tensor_graphs():
    from scalarlab.experiments import bound as B
    g, p = mlp()
    (q, _) = B.programs_of_graph("mlp", g, p)
    for name, why in (("float64", "sums native"), ("binary32+fma", "with fma")):
        row = B.bound_one(q, name, box=[(-1, 1)] * 3, samples=4)
        assert row["format"] == name and why in row["skip"]
