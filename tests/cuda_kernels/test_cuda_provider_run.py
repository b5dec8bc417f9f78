"""The numba_cuda provider through plan/bind/run_planned, and the provider-diff command."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from scalarlab import scalars
import scalarlab.scalars.formats as F
from scalarlab.cuda_kernels.elementwise import ULP_BOUND, softmax_ulp_bound
from scalarlab.cuda_kernels.reduce import tree_sum_emulated
from scalarlab.cuda_kernels.host import TREE_WIDTH
from scalarlab.experiments.cli import main
from scalarlab.graph import Graph, Node, OpKind, Payload, denote_all
from scalarlab.graph.plan import Policy, PlanError, bind, default_policy, node_args, plan, run_planned

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
B32 = F.get("binary32")


def axis_graph():
    g = Graph([
        Node(0, [], OpKind("input"), [2, 3]),
        Node(1, [0], OpKind("layernorm", axis=1), [2, 3]),
        Node(2, [1], OpKind("softmax", axis=0), [2, 3]),
        Node(3, [], OpKind("const"), [3]),
        Node(4, [2, 3], OpKind("mul"), [2, 3]),
        Node(5, [4, 1], OpKind("add"), [2, 3]),
        Node(6, [5], OpKind("reduce_sum", axis=0, keepdims=True), [1, 3]),
        Node(7, [6], OpKind("sigmoid"), [1, 3]),
        Node(8, [7], OpKind("exp"), [1, 3]),
    ])
    p = Payload({1: {"gamma": ["1.5", "-0.5", "2"], "beta": ["0.1", "0", "-0.25"]},
                 3: {"value": ["0.3", "-1.7", "2.5"]}})
    return g, p


def test_axis_ops_through_the_provider_match_the_reference():
    g, p = axis_graph()
    x = np.array([[[0.5, -1.25, 3.0], [2.0, 0.75, -0.5]],
                  [[1.0, 1.0, 1.0], [-3.0, 0.1, 0.2]]])           # batch of 2
    ref = run_planned(g, p, x, Policy(context="binary32"))
    pol = default_policy("cuda")
    kp = plan(g, pol)
    assert kp.capsule_names() == ["numba_cuda.layernorm", "numba_cuda.softmax", "numba_cuda.mul",
                                  "numba_cuda.add", "numba_cuda.reduce_sum",
                                  "numba_cuda.sigmoid", "numba_cuda.exp"]
    bound = bind(kp)
    ctx = scalars.get("binary32")
    got = run_planned(g, p, x, bound=bound)
    assert np.array_equal(got[1], ref[1])                          # layernorm: exact
    # local checks: each kernel fed with the reference's inputs
    for i, bound_max in ((2, softmax_ulp_bound(2)), (4, 0), (5, 0), (7, ULP_BOUND["sigmoid"]),
                         (8, ULP_BOUND["exp"])):
        args, attrs = node_args(g, p, ctx, g.nodes[i], ref)
        local = bound.kernels[i](args, attrs, 1)
        gap = F.ulp_distance(local.reshape(-1), ref[i].reshape(-1), B32)
        assert gap.max() <= bound_max, (i, gap)
    # reduce_sum over axis 0 of the per-example [2, 3]: tree order per column
    args, attrs = node_args(g, p, ctx, g.nodes[6], ref)
    local = bound.kernels[6](args, attrs, 1)
    cols = np.moveaxis(args[0], 1, -1).reshape(-1, 2).astype(np.float32)
    assert local.shape == (2, 1, 3)
    assert np.array_equal(local.reshape(-1), tree_sum_emulated(cols, TREE_WIDTH))


def test_six_node_without_batch_axes_keeps_scalar_shapes():
    from scalarlab.graph.examples import six_node_mlp
    g, p, x0 = six_node_mlp()
    lines = []
    got = run_planned(g, p, x0, default_policy("cuda"), show_backend=lines.append)
    ref = run_planned(g, p, x0, Policy())
    assert [np.shape(v) for v in got] == [(4,), (5,), (5,), (3,), (), ()]
    for i in (1, 2, 3):
        assert np.array_equal(got[i], ref[i])
    assert F.ulp_distance(got[5], ref[5], B32) <= 4
    assert lines[0].startswith("linear: numba_cuda.linear provider=numba_cuda trust=checked")


def test_non_binary32_values_are_refused_at_the_boundary():
    g = Graph([Node(0, [], OpKind("input"), [2]), Node(1, [0], OpKind("relu"), [2])])
    bound = bind(plan(g, default_policy("cuda")))
    with pytest.raises(PlanError, match=r"value 0\.1 is not a binary32 number"):
        bound.kernels[1]([np.array([0.1, 0.2])], {}, 0)


def test_interval_plan_runs_and_encloses_the_rational_result():
    g = Graph([Node(0, [], OpKind("input"), [3]), Node(1, [0], OpKind("linear"), [2]),
               Node(2, [1], OpKind("relu"), [2]), Node(3, [2, 2], OpKind("add"), [2]),
               Node(4, [3], OpKind("tanh"), [2])])
    p = Payload({1: {"W": [["0.1", "-0.7", "1.3"], ["0.25", "0.5", "-2"]], "b": ["0.01", "-0.3"]}})
    x = np.array(["0.3", "-0.2", "0.9"], dtype=object)
    pol = Policy(device="cuda", providers=("numba_cuda",), context="interval:binary32")
    kp = plan(g, pol)
    assert kp.capsule_names() == ["numba_cuda.interval_linear", "numba_cuda.interval_relu",
                                  "numba_cuda.interval_add", "numba_cuda.interval_tanh"]
    box = run_planned(g, p, x, bound=bind(kp))
    exact = denote_all(g, p, x, "rational", partial=True)     # tanh: None (irrational)
    ref = run_planned(g, p, x, Policy(context="interval:binary32"))
    for i in (1, 2, 3):
        lo, hi = box[i].lo, box[i].hi
        q = [float(v) for v in exact[i].reshape(-1)]
        assert np.all(lo <= np.array(q)) and np.all(np.array(q) <= hi)
        # never looser than the reference interval context
        assert np.all(lo >= ref[i].lo) and np.all(hi <= ref[i].hi)
    assert np.all(box[4].lo <= box[4].hi) and np.all(box[4].hi <= 1)


def test_provider_diff_command_json(capsys):
    assert main(["provider-diff", "six-node", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {r["node"]: r for r in doc["rows"]}
    from scalarlab.cuda_kernels.provider import simulated
    assert doc["meta"]["context"] == "binary32"
    assert doc["meta"]["device"] == ("CUDA simulator" if simulated() else "GPU")
    assert [rows[i]["capsule"] for i in (1, 2, 3, 4, 5)] == [
        "numba_cuda.linear", "numba_cuda.relu", "numba_cuda.linear", "numba_cuda.reduce_sum",
        "numba_cuda.tanh"]
    for i in (1, 2, 3):
        assert rows[i]["max_ulp_local"] == 0 and rows[i]["identical_local"] is True
        assert rows[i]["expected"] == "same order: 0"
    assert rows[4]["order"] == "tree(32)" and rows[4]["reference_order"] == "sequential"
    assert rows[4]["expected"] == "tree(32) vs sequential: gap"
    assert rows[5]["trust"] == "sampled"


def test_provider_diff_table_and_markdown(tmp_path, capsys):
    out = tmp_path / "diff.md"
    assert main(["provider-diff", "--context", "binary32+fma", "--samples", "3",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "numba_cuda vs reference in binary32+fma" in text
    assert "sequential+fma" in text and "tree(32)" in text
    assert "| numba_cuda.reduce_sum |" in out.read_text() or "numba_cuda.reduce_sum" in out.read_text()


@pytest.mark.slow   # a subprocess (3.8 s CPU); test_a_driver_failure_at_launch... stays default
def test_without_device_or_simulator_the_error_says_what_to_do():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", CUDA_VISIBLE_DEVICES="")
    r = subprocess.run([sys.executable, "-m", "scalarlab.experiments", "provider-diff"], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert ("scalarlab provider-diff: error: bind: node 1 (op linear): numba_cuda.linear cannot "
            "run: provider numba_cuda is unavailable: no CUDA device; set "
            "NUMBA_ENABLE_CUDASIM=1 to use the simulator") in r.stderr
    assert "Traceback" not in r.stderr


def test_a_driver_failure_at_launch_becomes_the_boundary_error():
    from scalarlab.cuda_kernels.provider import _launch

    class FakeCudaSupportError(ImportError):      # numba's CudaSupportError is an ImportError
        pass

    def launch():
        raise FakeCudaSupportError("Error at driver init: CUDA driver library cannot be found")

    with pytest.raises(PlanError, match=r"numba_cuda.relu: no CUDA device; set "
                                        r"NUMBA_ENABLE_CUDASIM=1 to use the simulator "
                                        r"\(FakeCudaSupportError: Error at driver init"):
        _launch("numba_cuda.relu", launch)
