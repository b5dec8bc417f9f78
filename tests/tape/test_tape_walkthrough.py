"""The seed's hand-built tape: node list, (4, 5), 22.5, 4x, detach -> 2x, reached set,
and the six "tape experiments"."""
from fractions import Fraction

import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.tape import TapeBuilder, TapeError, backward, grad

X0 = ["3", "-1.5"]


def build(ctx="float64", detach_second=False, detach_first=False, branches=2,
          leaf_requires_grad=True):
    b = TapeBuilder(ctx)
    x = b.leaf(X0, name="x", requires_grad=leaf_requires_grad)
    prods = [b.mul(x, x) for _ in range(branches)]
    if detach_first:
        prods[0] = b.detach(prods[0])
    if detach_second:
        prods[1] = b.detach(prods[1])
    z = prods[0]
    for p in prods[1:]:
        z = b.add(z, p)
    return b, x, b.sum(z)


def test_recorded_nodes_output_id_and_length():
    b, x, out = build()
    assert (out, len(b.tape)) == (4, 5)
    assert b.tape.nodes() == [("x", []), ("mul", [0, 0]), ("mul", [0, 0]), ("add", [1, 2]),
                              ("sum", [3])]


def test_forward_values_of_the_branches():
    b, x, out = build()
    np.testing.assert_array_equal(b.tape.value(1), [9.0, 2.25])
    np.testing.assert_array_equal(b.tape.value(3), [18.0, 4.5])
    assert float(b.tape.value(out)) == 22.5


def test_gradient_is_4x_with_four_contributions():
    b, x, out = build()
    g = backward(b.tape, out)
    np.testing.assert_array_equal(g[x], [12.0, -6.0])
    assert g.reached == [0, 1, 2, 3, 4]


def test_detached_branch_six_nodes_gradient_2x_reached():
    b, x, out = build(detach_second=True)
    assert b.tape.nodes() == [("x", []), ("mul", [0, 0]), ("mul", [0, 0]), ("detach", [2]),
                              ("add", [1, 3]), ("sum", [4])]
    g = backward(b.tape, out)
    np.testing.assert_array_equal(g[x], [6.0, -3.0])
    assert g.reached == [0, 1, 4, 5]
    assert 2 not in g and 3 not in g
    # forward unchanged, and the detach node reuses the product's value object (no copy)
    assert float(b.tape.value(out)) == 22.5
    assert b.tape.value(3) is b.tape.value(2)


def test_dense_fills_zeros_for_unreached():
    b, x, out = build(detach_second=True)
    g = backward(b.tape, out, dense=True)
    assert sorted(g) == list(range(6))
    np.testing.assert_array_equal(g[2], [0.0, 0.0])
    np.testing.assert_array_equal(g[3], [0.0, 0.0])
    assert g.reached == [0, 1, 4, 5]


def test_rational_figures_are_exact():
    b, x, out = build("rational")
    assert b.tape.value(out)[()] == Fraction(45, 2)
    g = backward(b.tape, out)
    assert [Fraction(int(v.numerator), int(v.denominator)) for v in g[x]] == [12, -6]
    bd, xd, outd = build("rational", detach_second=True)
    gd = backward(bd.tape, outd)
    assert [Fraction(int(v.numerator), int(v.denominator)) for v in gd[xd]] == [6, -3]


def test_transform_api_gives_the_same_two_gradients():
    def live(ops, x):
        return ops.sum(ops.add(ops.mul(x, x), ops.mul(x, x)))

    def stopped(ops, x):
        return ops.sum(ops.add(ops.mul(x, x), ops.detach(ops.mul(x, x))))

    np.testing.assert_array_equal(grad(live)(X0), [12.0, -6.0])
    np.testing.assert_array_equal(grad(stopped)(X0), [6.0, -3.0])


def test_agrees_with_pytorch():
    import torch
    x = torch.tensor([3.0, -1.5], dtype=torch.float64, requires_grad=True)
    (x * x + x * x).sum().backward()
    live = x.grad.numpy().copy()
    x.grad = None
    (x * x + (x * x).detach()).sum().backward()
    stopped = x.grad.numpy().copy()
    b, xi, out = build()
    np.testing.assert_array_equal(backward(b.tape, out)[xi], live)
    b, xi, out = build(detach_second=True)
    np.testing.assert_array_equal(backward(b.tape, out)[xi], stopped)


# ------------------------------------------------------------ tape experiments
def test_experiment1_third_branch_adds_2x():
    b, x, out = build(branches=3)
    assert b.tape.nodes()[3] == ("mul", [0, 0])
    np.testing.assert_array_equal(backward(b.tape, out)[x], [18.0, -9.0])


def test_experiment2_leaf_without_requires_grad_retains_nothing():
    b, x, out = build(leaf_requires_grad=False)
    g = backward(b.tape, out)
    assert x not in g
    assert g.reached == [out]
    with pytest.raises(TapeError, match=r"no gradient for node 0 \(x\) from output 4: it does "
                                        r"not require a gradient"):
        g.leaf_grad(x)
    # dense view: a zero, not a gradient
    np.testing.assert_array_equal(backward(b.tape, out, dense=True)[x], [0.0, 0.0])


def test_experiment3_moving_detach_keeps_derivative_changes_path_ids():
    b2, x2, out2 = build(detach_second=True)
    b1, x1, out1 = build(detach_first=True)
    g2, g1 = backward(b2.tape, out2), backward(b1.tape, out1)
    np.testing.assert_array_equal(g1[x1], g2[x2])
    assert b1.tape.nodes()[3:5] == [("detach", [1]), ("add", [3, 2])]
    assert g2.reached == [0, 1, 4, 5]
    assert g1.reached == [0, 2, 4, 5]             # the surviving product is node 2 now


def test_experiment4_output_independent_of_leaf():
    b = TapeBuilder("float64")
    x = b.leaf(X0, name="x")
    y = b.leaf(["1", "2"], name="y")
    out = b.sum(b.mul(y, y))
    g = backward(b.tape, out)
    assert x not in g
    np.testing.assert_array_equal(g.leaf_grad(y), [2.0, 4.0])
    with pytest.raises(TapeError, match=r"no gradient for node 0 \(x\) from output 3: it was "
                                        r"not reached from the output"):
        g.leaf_grad(x)


def test_experiment5_incompatible_mul_shapes_is_an_error_value():
    b = TapeBuilder("float64")
    x = b.leaf(X0, name="x")
    y = b.leaf(["1", "2", "3"], name="y")
    with pytest.raises(TapeError, match=r"op mul: incompatible shapes \[2\], \[3\]"):
        b.mul(x, y)
    assert len(b.tape) == 2        # nothing was appended


def test_experiment6_changed_constant_in_graph_is_detected():
    from scalarlab.tape import record

    def quad(c):
        def program(ops, x):
            return ops.sum(ops.add(ops.mul(x, x), ops.mul(ops.const(c), ops.mul(x, x))))
        return program

    b, x, out = build()                            # c = 1: the hand-built tape
    tape_val = b.tape.value(out)
    same = record(quad("1"), [(2,)]).forward("float64", [X0])
    changed = record(quad("2"), [(2,)]).forward("float64", [X0])
    assert float(same) == float(tape_val) == 22.5
    assert float(changed) != float(tape_val)
    assert float(changed) == 33.75


# ---------------------------------------------------------------------- errors
def test_output_id_out_of_range():
    b, x, out = build()
    with pytest.raises(TapeError, match=r"output id 5 is out of range for a tape of 5 nodes"):
        backward(b.tape, 5)
    with pytest.raises(TapeError, match="out of range"):
        backward(b.tape, -1)


def test_seed_of_wrong_shape():
    b, x, out = build()
    ctx = scalars.get("float64")
    with pytest.raises(TapeError, match=r"seed of shape \[2\] does not match output node 4 "
                                        r"\(sum\) of shape \[\]"):
        backward(b.tape, out, seed=ctx.ones((2,)))


def test_contribution_of_wrong_shape_names_node_and_both_shapes():
    from scalarlab.tape.tape import TapeNode
    b = TapeBuilder("float64")
    x = b.leaf(X0, name="x")
    ctx = b.ctx
    bad = TapeNode("bad", (x,), ctx.ones(()), (), lambda g: [ctx.ones((3,))], True)
    out = b.tape.append(bad)
    with pytest.raises(TapeError, match=r"node 1 \(bad\) sent a contribution of shape \[3\] "
                                        r"to parent 0 \(x\) of shape \[2\]"):
        backward(b.tape, out)


def test_explicit_seed_scales_gradient():
    b, x, out = build()
    g = backward(b.tape, out, seed=b.ctx.convert("0.5"))
    np.testing.assert_array_equal(g[x], [6.0, -3.0])


def test_disconnected_singular_rule_never_runs():
    """x = 0; r = 1/x is recorded but unreached: no 0 * (1/0) = nan anywhere."""
    b = TapeBuilder("float64")
    x = b.leaf(["0", "0"], name="x")
    one = b.const(["1", "1"], name="one")
    r = b.div(one, x)                         # inf, off the output path
    out = b.sum(b.mul(x, b.const(["2", "3"])))
    g = backward(b.tape, out, dense=True)
    np.testing.assert_array_equal(g[x], [2.0, 3.0])
    np.testing.assert_array_equal(g[r], [0.0, 0.0])
    assert all(np.all(np.isfinite(v)) for v in g.values())
    # the rule itself would have produced nan had it run with a zero cotangent:
    from scalarlab.graph.optable import get_op
    ctx = b.ctx
    rule = get_op("div").vjp(ctx, ctx.zeros((2,)), [b.tape.value(one), b.tape.value(x)],
                             b.tape.value(r), {}, 0)
    assert np.all(np.isnan(rule[1]))


def test_unknown_op_and_bad_attributes_are_tape_errors():
    b = TapeBuilder("float64")
    x = b.leaf([[1.0, 2.0]], name="x")
    with pytest.raises(TapeError, match=r"tape node 1: unknown op 'frobnicate'; known ops: "):
        b.apply("frobnicate", x)
    with pytest.raises(TapeError, match=r"op softmax: .*unknown attribute 'axs'"):
        b.apply("softmax", x, axs=1)
    with pytest.raises(TapeError, match=r"op softmax: .*missing required attribute 'axis'"):
        b.apply("softmax", x)
    with pytest.raises(TapeError, match=r"node id 7 is out of range for a tape of 1 nodes"):
        b.mul(x, 7)
    assert len(b.tape) == 1
