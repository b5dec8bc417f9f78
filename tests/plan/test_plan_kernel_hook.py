"""run_planned is the fold with a per-node kernel hook; the planner reads op facts from
the op records (``reduces``, ``dot``), not from lists of its own."""
from __future__ import annotations

import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.graph import Graph, GraphError, Node, OpKind, denote_all
from scalarlab.graph.examples import six_node_mlp
from scalarlab.graph.optable import OPS
from scalarlab.graph.plan import (Capsule, PlanError, Policy, Provider, bind, get_capsule,
                                  is_dot, plan, reduces, register_capsule, register_provider,
                                  run_planned)


def _chain(op, n, width=3):
    nodes = [Node(0, [], OpKind("input"), [width])]
    nodes += [Node(i, [i - 1], OpKind(op), [width]) for i in range(1, n + 1)]
    return Graph(nodes)


def test_kernel_hook_replaces_only_the_listed_nodes():
    g = _chain("relu", 3)
    ctx = scalars.get("float64")
    x = np.array([1.0, -2.0, 3.0])
    calls = []

    def neg_instead(args, attrs, nb):
        calls.append((len(args), attrs, nb))
        return ctx.neg(args[0])

    vals = denote_all(g, {}, x, ctx, kernels={2: neg_instead})
    assert calls == [(1, {}, 0)]
    assert np.array_equal(vals[1], [1.0, 0.0, 3.0])      # relu
    assert np.array_equal(vals[2], [-1.0, -0.0, -3.0])   # the hook's kernel
    assert np.array_equal(vals[3], [0.0, 0.0, 0.0])      # relu again, from the hook's value


def test_kernel_hook_sees_the_batch_axes():
    g = _chain("relu", 1)
    ctx = scalars.get("float64")
    seen = []
    x = np.arange(6.0).reshape(2, 3) - 2.5
    vals = denote_all(g, {}, x, ctx,
                      kernels={1: lambda a, at, nb: seen.append(nb) or ctx.abs(a[0])})
    assert seen == [1] and np.array_equal(vals[1], np.abs(x))


def test_reference_capsule_orders_come_from_the_op_records():
    for name, rec in OPS.items():
        if rec.capsule is None:
            continue
        cap = get_capsule(rec.capsule)
        assert cap.reduction == ("context" if rec.reduces else "n/a"), name
        assert is_dot(cap.op) == rec.dot and reduces(cap.op) == rec.reduces, name
    assert {n for n, r in OPS.items() if r.dot} == {"linear", "matmul", "conv1d", "conv2d", "conv3d"}
    assert not OPS["relu"].reduces and OPS["softmax"].reduces and OPS["sum"].reduces
    fma = scalars.get("binary32+fma")
    assert get_capsule("reference.linear").reduction_in(fma) == "sequential+fma"
    assert get_capsule("reference.reduce_sum").reduction_in(fma) == "sequential"
    assert get_capsule("reference.relu").reduction_in(fma) == "n/a"


def test_reference_run_uses_the_ops_interval_rule_like_the_fold():
    """Over an interval context the reference capsule of softmax runs softmax's own
    interval rule, so run_planned and the fold give the same (tight) boxes."""
    g = Graph([Node(0, [], OpKind("input"), [3]), Node(1, [0], OpKind("softmax", axis=0), [3])])
    ctx = scalars.get("interval:binary32")
    x = ctx.make(np.array([-1.0, 0.0, 1.0]), np.array([1.0, 0.5, 1.0]))
    got = run_planned(g, {}, x, Policy(context="interval:binary32"))[1]
    want = denote_all(g, {}, x, ctx)[1]
    generic = OPS["softmax"].forward(ctx, [x], {"axis": 0}, 0)
    assert np.array_equal(got.lo, want.lo) and np.array_equal(got.hi, want.hi)
    assert np.all(got.hi <= generic.hi) and np.any(got.hi < generic.hi)


def _register_test_provider(name, binder):
    register_provider(Provider(name, "cpu", lambda: None, binder))
    register_capsule(Capsule(f"{name}.relu", "relu", name, "cpu"))


def test_a_kernel_returning_the_wrong_shape_is_a_plan_error():
    _register_test_provider("short_test", lambda c, op, ctx: lambda args, attrs, nb:
                            args[0][..., :2])
    g = _chain("relu", 1)
    with pytest.raises(PlanError, match=r"^run: relu 1: the kernel's value has shape \[2\], "
                                        r"expected \[3\]$"):
        run_planned(g, {}, np.zeros(3), Policy(providers=("short_test",)))


def test_a_kernel_error_keeps_its_class_and_names_the_node():
    def binder(capsule, op, ctx):
        def run(args, attrs, nb):
            raise PlanError("device lost")
        return run

    _register_test_provider("failing_test", binder)
    g = _chain("relu", 2)
    with pytest.raises(PlanError, match=r"^run: relu 1: device lost$"):
        run_planned(g, {}, np.zeros(3), Policy(providers=("failing_test",)))


def test_run_planned_keeps_the_folds_input_checks():
    g, p, x0 = six_node_mlp()
    with pytest.raises(GraphError, match=r"^run: input 0: input shape mismatch: got \[3\] vs "
                                         r"declared \[4\]"):
        run_planned(g, p, x0[:3], Policy())


@pytest.mark.slow   # 4.5 s CPU; the fold's 100k chain (test_graph_properties) stays default
def test_run_planned_evaluates_a_100000_node_chain():
    """One loop, no recursion: the planned run of a long chain does not hit the stack."""
    n = 100_000
    g = _chain("neg", n, width=2)
    bound = bind(plan(g, Policy(context="float64")))
    vals = run_planned(g, {}, np.array([1.5, -2.0]), bound=bound)
    assert np.array_equal(vals[n], [1.5, -2.0])       # an even number of negations
    assert np.array_equal(vals[n - 1], [-1.5, 2.0])
