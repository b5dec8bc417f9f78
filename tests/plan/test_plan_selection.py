"""Kernel planning: capsule selection, policies, errors at the backend boundary."""
import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.graph import Graph, GraphError, Node, OpKind, denote_all
from scalarlab.graph.examples import six_node_mlp
from scalarlab.graph.plan import (Capsule, KernelPlan, PlanError, Policy, Provider, bind, capsules,
                        default_policy, get_capsule, plan, register_capsule,
                        register_provider, run_planned)

SEED_IDS = [1, 2, 3, 4, 5]
SEED_CAPSULES = ["reference.linear", "reference.relu", "reference.linear",
                 "reference.reduce_sum", "reference.tanh"]


def test_six_node_plan_equals_the_seed():
    g, _, _ = six_node_mlp()
    kp = plan(g, Policy(device="cpu"))
    assert isinstance(kp, KernelPlan)
    assert kp.pairs() == (SEED_IDS, SEED_CAPSULES)
    assert [e.op for e in kp] == ["linear", "relu", "linear", "sum", "tanh"]
    # node 0 (input) needs no runtime work
    assert 0 not in kp.node_ids() and len(kp) == 5


def test_show_backend_lines_once_per_op():
    g, _, _ = six_node_mlp()
    lines = bind(plan(g, Policy(device="cpu", context="binary32"))).lines()
    assert lines == [
        "linear: reference.linear provider=reference trust=checked vjp=tape reduction=sequential",
        "relu: reference.relu provider=reference trust=checked vjp=tape reduction=n/a",
        "sum: reference.reduce_sum provider=reference trust=checked vjp=tape reduction=sequential",
        "tanh: reference.tanh provider=reference trust=checked vjp=tape reduction=n/a",
    ]
    fma_lines = bind(plan(g, Policy(context="binary32+fma"))).lines()
    assert fma_lines[0].endswith("reduction=sequential+fma")


def test_cuda_policy_selects_numba_capsules():
    g, _, _ = six_node_mlp()
    kp = plan(g, default_policy("cuda"))
    assert kp.pairs() == (SEED_IDS, ["numba_cuda.linear", "numba_cuda.relu", "numba_cuda.linear",
                                     "numba_cuda.reduce_sum", "numba_cuda.tanh"])
    lines = bind(kp).lines()
    assert lines[2] == ("sum: numba_cuda.reduce_sum provider=numba_cuda trust=checked vjp=tape "
                        "reduction=tree(32)")
    assert lines[3].startswith("tanh: numba_cuda.tanh provider=numba_cuda trust=sampled")


def test_const_and_detach_are_not_planned():
    g = Graph([Node(0, [], OpKind("input"), [3]), Node(1, [], OpKind("const"), [3]),
               Node(2, [0, 1], OpKind("add"), [3]), Node(3, [2], OpKind("detach"), [3]),
               Node(4, [3], OpKind("relu"), [3])])
    kp = plan(g, Policy())
    assert kp.pairs() == ([2, 4], ["reference.add", "reference.relu"])


def test_missing_provider_is_a_plan_error_not_a_graph_error():
    g, _, _ = six_node_mlp()
    with pytest.raises(PlanError) as ei:
        plan(g, Policy(device="cuda", providers=("cublas",)))
    assert not isinstance(ei.value, GraphError)
    msg = str(ei.value)
    assert "'cublas'" in msg and "not registered" in msg and "numba_cuda" in msg


def test_no_silent_fallback_names_node_op_device_and_what_is_missing():
    g = Graph([Node(0, [], OpKind("input"), [3]), Node(1, [0], OpKind("relu"), [3]),
               Node(2, [1], OpKind("softplus"), [3])])
    with pytest.raises(PlanError) as ei:
        plan(g, default_policy("cuda"))
    msg = str(ei.value)
    assert "node 2" in msg and "op softplus" in msg and "device cuda" in msg
    assert "no capsule for backend op 'softplus'" in msg and "reference.softplus" in msg


def test_trust_and_format_filters_explain_themselves():
    g, _, _ = six_node_mlp()
    with pytest.raises(PlanError, match=r"node 5 \(op tanh\).*trust sampled is weaker"):
        plan(g, Policy(device="cuda", providers=("numba_cuda",), trust="checked"))
    # sampled is accepted by a "sampled" policy
    assert plan(g, Policy(device="cuda", providers=("numba_cuda",), trust="sampled"))
    with pytest.raises(PlanError, match=r"node 1 \(op linear\).*computes in binary32\|binary32\+fma, not float64"):
        plan(g, Policy(device="cuda", providers=("numba_cuda",), context="float64"))
    # the six-node graph has a sum, and no interval sum kernel exists
    with pytest.raises(PlanError, match=r"node 4 \(op sum\)"):
        plan(g, Policy(device="cuda", providers=("numba_cuda",), context="interval:binary32"))


@pytest.mark.parametrize("policy, needle", [
    (Policy(device="tpu"), "device 'tpu' is unknown"),
    (Policy(trust="proved"), "trust 'proved' is unknown"),
    (Policy(providers=()), "lists no provider"),
    (Policy(device="cuda", providers=("reference",)), "runs on cpu"),
    (Policy(context="binary33"), "unknown context"),
])
def test_bad_policies(policy, needle):
    g, _, _ = six_node_mlp()
    with pytest.raises(PlanError, match=needle):
        plan(g, policy)


def test_unknown_op_is_a_graph_error():
    g = Graph([Node(0, [], OpKind("input"), [3]), Node(1, [0], OpKind("frobnicate"), [3])])
    with pytest.raises(GraphError, match="unknown op 'frobnicate'"):
        plan(g, Policy())


def test_registry_contracts():
    names = {c.name for c in capsules(provider="reference")}
    # one reference capsule per backend op of the op table
    from scalarlab.graph.optable import OPS
    assert names == {r.capsule for r in OPS.values() if r.capsule}
    assert get_capsule("reference.relu").reduction == "n/a"
    with pytest.raises(PlanError, match="unknown capsule"):
        get_capsule("reference.nope")
    with pytest.raises(ValueError, match="trust"):
        register_capsule(Capsule("x.relu", "relu", "x", "cpu", trust="maybe"))
    with pytest.raises(ValueError, match="registered twice"):
        register_capsule(Capsule("reference.relu", "relu", "reference", "cpu", trust="sampled"))


def test_bind_reports_an_unavailable_provider():
    register_provider(Provider("offline_test", "cpu", lambda: "its library is not installed",
                               lambda c, op, ctx: None))
    register_capsule(Capsule("offline_test.relu", "relu", "offline_test", "cpu"))
    g = Graph([Node(0, [], OpKind("input"), [3]), Node(1, [0], OpKind("relu"), [3])])
    kp = plan(g, Policy(providers=("offline_test",)))
    assert kp.capsule_names() == ["offline_test.relu"]
    with pytest.raises(PlanError, match=r"node 1 \(op relu\): offline_test.relu cannot run: "
                                        r"provider offline_test is unavailable: its library"):
        bind(kp)


@pytest.mark.parametrize("ctx", ["binary32", "float64", "bfloat16"])
def test_reference_run_equals_the_fold(ctx):
    g, p, x0 = six_node_mlp()
    x = np.stack([x0, x0[::-1]])             # a batch of two examples
    got = run_planned(g, p, x, Policy(context=ctx))
    want = denote_all(g, p, x, ctx)
    c = scalars.get(ctx)
    for a, b in zip(got, want):
        assert np.array_equal(c.to_float64(a), c.to_float64(b))


def test_run_planned_names_the_node_of_a_context_error():
    g, p, x0 = six_node_mlp()
    with pytest.raises(scalars.ContextError, match=r"run: tanh 5: context rational cannot "
                                                   r"compute tanh"):
        run_planned(g, p, x0, Policy(context="rational"))


def test_run_planned_show_backend_callback():
    g, p, x0 = six_node_mlp()
    seen = []
    run_planned(g, p, x0, Policy(), show_backend=seen.append)
    assert len(seen) == 4 and seen[1].startswith("relu: reference.relu provider=reference")
