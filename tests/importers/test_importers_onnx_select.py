"""ArgMax, ArgMin and TopK imported from a torch export (a classifier head returning its
predicted class, its least likely class and its top 3): the index outputs are exact
integers equal to onnxruntime's int64 outputs (binary32) and to numpy's order of onnx's
float64 reference values (float64); TopK's values agree as the main zoo's do.  One import
per output (``output=NAME``); the batch axis stays symbolic (per-example import) and the
indices feed a run-time Gather (``take``) in the same graph."""
from __future__ import annotations

import contextlib
import io
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from scalarlab import graph
from scalarlab.graph.importers.onnx import load_onnx
from test_importers_zoo import reference64, ulps32

OUTS = ["best", "worst", "top_v", "top_i", "picked"]


class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(6, 9)
        self.table = torch.nn.Parameter(torch.randn(9, 2))

    def forward(self, x):
        z = self.lin(x)
        v, i = torch.topk(z, 3, dim=-1)
        best = torch.argmax(z, dim=-1)
        # the predicted class's embedding: the index output feeds a run-time Gather
        return best, torch.argmin(z, dim=-1, keepdim=True), v, i, self.table[best]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("select") / "head.onnx"
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(Head().eval(), (torch.randn(2, 6),), str(path), dynamo=False,
                          opset_version=17, input_names=["x"], output_names=OUTS,
                          dynamic_axes={"x": {0: "N"}, **{o: {0: "N"} for o in OUTS}})
    return path


def test_index_outputs_are_exact_and_agree(exported):
    model = onnx.load(str(exported))
    assert {"ArgMax", "ArgMin", "TopK"} <= {n.op_type for n in model.graph.node}
    x = np.random.default_rng(1).standard_normal((5, 6)).astype(np.float32)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ort_out = dict(zip(OUTS, sess.run(None, {"x": x})))
    ref = dict(zip(OUTS, [np.asarray(r) for r in reference64_all(model, x)]))
    for name in OUTS:
        g, p = load_onnx(str(exported), output=name)
        assert g.nodes[0].out_shape == (6,)               # per example: the batch stays N
        y64 = np.asarray(graph.denote(g, p, x.astype(np.float64), "float64"))
        y32 = np.asarray(graph.denote(g, p, x.astype(np.float64), "binary32"), np.float64)
        if name in ("top_v", "picked"):
            assert np.abs(y64 - ref[name]).max() <= 4 * 2.0 ** -52 * np.abs(ref[name]).max()
            assert ulps32(y32, ort_out[name]) <= 2, name
        else:
            assert ort_out[name].dtype == np.int64
            assert np.array_equal(y64, ref[name]), name
            assert np.array_equal(y32, ort_out[name]), name


def reference64_all(model, x):
    """onnx's reference evaluator on the model widened to float64, every output."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    outs = []
    for name in OUTS:
        del m.graph.output[:]
        m.graph.output.extend([o for o in model.graph.output if o.name == name])
        outs.append(reference64(m, {"x": x.astype(np.float64)}))
    return outs
