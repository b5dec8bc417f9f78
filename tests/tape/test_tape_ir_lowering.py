"""One program text lowered to the canonical IR: same values as plain evaluation, payload
holds the parameters, and what the IR cannot express is a LoweringError naming it."""
from fractions import Fraction

import numpy as np
import pytest

from scalarlab import graph
from scalarlab.tape import PlainOps
from scalarlab.tape.ir_lowering import LoweringError, lower


def mlp(ops, x, p):
    h = ops.relu(ops.linear(x, p["W1"], p["b1"]))
    return ops.tanh(ops.sum(ops.linear(h, p["W2"], p["b2"])))


def exact_params():
    r = np.random.default_rng(5)

    def q(shape):
        return np.vectorize(lambda v: Fraction(int(v), 8), otypes=[object])(
            r.integers(-12, 13, shape))
    return {"W1": q((5, 4)), "b1": q((5,)), "W2": q((3, 5)), "b2": q((3,))}


def test_lowered_graph_structure_and_payload():
    p = exact_params()
    g, payload = lower(mlp, (4,), p)
    assert [n.op for n in g.nodes] == ["input", "linear", "relu", "linear", "sum", "tanh"]
    assert [list(n.parents) for n in g.nodes] == [[], [0], [1], [2], [3], [4]]
    assert [list(n.out_shape) for n in g.nodes] == [[4], [5], [5], [3], [], []]
    assert g.output == 5
    assert sorted(payload.get(1)) == ["W", "b"]
    assert payload.get(1)["W"] is p["W1"]


def test_ir_and_plain_interpreters_agree():
    p = exact_params()
    x = np.array([Fraction(3, 10), Fraction(-1, 5), Fraction(1, 10), Fraction(2, 5)], dtype=object)

    def pre_tanh(ops, xx, pp):                  # rational has no tanh: stop at the sum
        return ops.sum(ops.linear(ops.relu(ops.linear(xx, pp["W1"], pp["b1"])),
                                  pp["W2"], pp["b2"]))

    g, payload = lower(pre_tanh, (4,), p)
    ops = PlainOps("rational")
    want = pre_tanh(ops, ops.input(x), {k: ops.const(v) for k, v in p.items()})
    got = graph.denote(g, payload, x, "rational")
    assert got[()] == want[()]
    gf, pf = lower(mlp, (4,), p)
    ops = PlainOps("float64")
    want = mlp(ops, ops.input(x), {k: ops.const(v) for k, v in p.items()})
    assert float(graph.denote(gf, pf, x, "float64")) == float(want)


def test_parameter_used_as_operand_becomes_one_const_node():
    def prog(ops, x, p):
        return ops.sum(ops.add(ops.mul(x, p[0]), p[0]))

    g, payload = lower(prog, (3,), [np.array([1.0, 2.0, 3.0])])
    assert [n.op for n in g.nodes] == ["input", "const", "mul", "add", "sum"]
    np.testing.assert_array_equal(payload.get(1)["value"], [1.0, 2.0, 3.0])
    out = graph.denote(g, payload, np.array([1.0, 1.0, 1.0]), "float64")
    assert float(out) == 12.0


def test_detach_lowers_to_the_ir_stop_gradient():
    def prog(ops, x, p):
        return ops.sum(ops.add(ops.mul(x, x), ops.detach(ops.mul(x, x))))

    g, payload = lower(prog, (2,), [])
    assert [(n.op, list(n.parents)) for n in g.nodes] == [
        ("input", []), ("mul", [0, 0]), ("mul", [0, 0]), ("detach", [2]), ("add", [1, 3]),
        ("sum", [4])]
    assert float(graph.denote(g, payload, np.array([3.0, -1.5]), "float64")) == 22.5


def test_computed_payload_parameter_is_a_lowering_error():
    def prog(ops, x, p):
        w = ops.mul(p[0], p[0])                 # a computed weight: not payload data
        return ops.sum(ops.linear(x, w, p[1]))

    with pytest.raises(LoweringError, match=r"op linear cannot be expressed in the IR: its "
                                            r"parameter W is computed by node 2 \(mul\)"):
        lower(prog, (4,), [np.ones((2, 4)), np.ones(2)])


def test_unknown_op_is_a_lowering_error():
    with pytest.raises(LoweringError, match=r"op 'frobnicate' cannot be expressed in the IR"):
        lower(lambda ops, x, p: ops.apply("frobnicate", x), (2,), [])
