"""Typed SSA graphs: context = state shapes then input shape, construction-time shape
checks, output references, recorded once and re-evaluated with new parameters."""
import numpy as np
import pytest

from scalarlab.tape import EagerOps, PlainOps, TapeError, TypedGraph, record, record_model


def mlp(ops, x, params):
    W1, b1, W2, b2 = params
    h = ops.relu(ops.linear(x, W1, b1))
    return ops.tanh(ops.sum(ops.linear(h, W2, b2)))


PARAM_SHAPES = [(5, 4), (5,), (3, 5), (3,)]


def params(seed):
    r = np.random.default_rng(seed)
    return [r.standard_normal(s) for s in PARAM_SHAPES]


def test_context_is_state_then_input():
    g = record_model(mlp, PARAM_SHAPES, (4,))
    assert g.input_shapes == [(5, 4), (5,), (3, 5), (3,), (4,)]
    assert g.input_names[-1] == "x"
    assert g.shape_of(g.output.index) == ()
    assert "linear" in g.listing()


def test_recorded_once_reevaluated_with_new_parameters():
    g = record_model(mlp, PARAM_SHAPES, (4,))
    n_nodes = len(g.nodes)
    x = np.array([0.3, -0.2, 0.1, 0.4])
    plain = PlainOps("float64")
    for seed in (1, 2, 3):
        p = params(seed)
        want = mlp(plain, x, p)
        got = g.forward("float64", [*p, x])
        assert float(got) == float(want)
    assert len(g.nodes) == n_nodes              # evaluation never re-records


def test_vjp_matches_eager_tape_bit_for_bit():
    g = record_model(mlp, PARAM_SHAPES, (4,))
    p, x = params(7), np.array([0.3, -0.2, 0.1, 0.4])
    out, cots = g.vjp("float64", [*p, x])
    ops = EagerOps("float64")
    hs = [ops.input(v, name=f"p{i}") for i, v in enumerate(p)]
    hx = ops.input(x, name="x")
    o = mlp(ops, hx, hs)
    grads = ops.session.backward(o)
    assert float(out) == float(ops.session.value(o))
    for h, c in zip(hs + [hx], cots):
        np.testing.assert_array_equal(ops.session.grad(grads, h), c)


def test_nodes_are_checked_at_construction():
    g = TypedGraph([(2,), (3,)])
    with pytest.raises(TapeError, match=r"typed graph node 2: op mul: incompatible shapes "
                                        r"\[2\], \[3\]"):
        g.apply("mul", g.inputs[0], g.inputs[1])
    assert len(g.nodes) == 0
    with pytest.raises(TapeError, match=r"op linear: parameter W has shape \[3\], expected"):
        g.apply("linear", g.inputs[0], g.inputs[1], out_features=3)


def test_variable_of_another_graph_is_rejected():
    g, h = TypedGraph([(2,)]), TypedGraph([(2,)])
    with pytest.raises(TapeError, match=rf"belongs to typed graph {h.uid}, not to graph {g.uid}"):
        g.apply("neg", h.inputs[0])


def test_output_may_be_an_input_or_an_earlier_node():
    g = TypedGraph([(2,), (2,)], ["a", "b"])
    s = g.apply("mul", g.inputs[0], g.inputs[1])
    g.apply("sum", s)
    a, b = np.array([2.0, 3.0]), np.array([5.0, 7.0])
    g.set_output(g.inputs[1])                   # no dummy identity node
    np.testing.assert_array_equal(g.forward("float64", [a, b]), b)
    out, (ga, gb) = g.vjp("float64", [a, b], seed=np.array([1.0, 2.0]))
    np.testing.assert_array_equal(ga, [0.0, 0.0])
    np.testing.assert_array_equal(gb, [1.0, 2.0])
    g.set_output(s)                             # an earlier node, not the last one
    out, (ga, gb) = g.vjp("float64", [a, b], seed=np.array([1.0, 1.0]))
    np.testing.assert_array_equal(out, [10.0, 21.0])
    np.testing.assert_array_equal(ga, b)
    np.testing.assert_array_equal(gb, a)


def test_inputs_must_match_the_context():
    g = record(lambda ops, x: ops.sum(x), [(3,)])
    with pytest.raises(TapeError, match=r"input 0 \(in0\) has shape \[2\], the graph was "
                                        r"recorded for \[3\]"):
        g.forward("float64", [np.ones(2)])
    with pytest.raises(TapeError, match="expected 1 inputs"):
        g.forward("float64", [np.ones(3), np.ones(3)])


def test_jvp_rules_are_adjoint_to_the_vjp():
    """<J v, u> = <v, J^T u> with J from the op table's JVP rules and J^T from the tape."""
    def prog(ops, x, w):
        return ops.softplus(ops.matmul(w, ops.tanh(x)))

    g = record(prog, [(4,), (3, 4)])
    r = np.random.default_rng(3)
    x, w = r.standard_normal(4), r.standard_normal((3, 4))
    vx, vw = r.standard_normal(4), r.standard_normal((3, 4))
    u = r.standard_normal(3)
    y, t = g.jvp("float64", [x, w], [vx, vw])
    _, (gx, gw) = g.vjp("float64", [x, w], seed=u)
    lhs = float(np.dot(t, u))
    rhs = float(np.dot(gx, vx) + np.sum(gw * vw))
    assert abs(lhs - rhs) <= 1e-13 * max(1.0, abs(rhs))
