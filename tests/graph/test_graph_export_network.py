"""ONNX export of the ops of real networks: every case of graph_opcases_networks (the
same shapes and attributes the op tests use), exported as float32 with a batch axis and
run by onnxruntime, agrees with the fold in binary32."""
from __future__ import annotations

import numpy as np
import pytest

import onnxruntime as ort
import onnx  # noqa: F401  (the exporter needs it)

from scalarlab import graph  # noqa: E402
from scalarlab.graph import Graph, Node, OpKind, Payload  # noqa: E402
from scalarlab.graph.exporters.onnx import to_onnx  # noqa: E402
from scalarlab.graph.exporters.onnx_network import NETWORK_OPS  # noqa: E402
from scalarlab.graph.optable import OPS, full_attrs  # noqa: E402

from graph_opcases import case, draw  # noqa: E402
from graph_opcases_networks import network_cases  # noqa: E402

CASES = [c for c in network_cases(case) if c["op"] in NETWORK_OPS]


def test_every_network_op_without_geometry_is_exported():
    assert {c["op"] for c in CASES} == set(NETWORK_OPS)


@pytest.mark.parametrize("c", CASES, ids=lambda c: c["name"])
def test_exported_network_op_runs_in_onnxruntime_like_the_fold(c):
    rec = OPS[c["op"]]
    k = len(c["parents"])
    out = rec.shape([tuple(s) for s in c["parents"]], full_attrs(rec, c["attrs"]))
    nodes = [Node(i, [], "input", list(s)) for i, s in enumerate(c["parents"])]
    nodes.append(Node(k, list(range(k)), OpKind(c["op"], **c["attrs"]), list(out)))
    g = Graph(nodes)
    rng = np.random.default_rng(8)
    xs = [draw((3,) + tuple(s), rng, c["domain"].get(i)) for i, s in enumerate(c["parents"])]
    model = to_onnx(g, Payload(), dtype="float32")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feed = {inp.name: x.astype(np.float32) for inp, x in zip(sess.get_inputs(), xs)}
    got = sess.run(None, feed)[0].astype(np.float64)
    want = np.asarray(graph.denote(g, Payload(), {i: x for i, x in enumerate(xs)}, "binary32"))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-6)
