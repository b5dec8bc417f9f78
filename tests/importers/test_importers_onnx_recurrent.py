"""LSTM, GRU and RNN (uni- and bidirectional, two layers, initial states) exported by
``torch.onnx.export(dynamo=False, opset_version=17)`` and imported with concrete shapes,
unrolled over the sequence: float64 against torch in float64 (the exported model holds
no float32 constant of its own) within 1e-12 relative, binary32 within a few ulps of
onnxruntime on the float32 model."""
from __future__ import annotations

import contextlib
import copy
import io
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from scalarlab import graph
from scalarlab.graph.importers.onnx import from_onnx
from test_importers_zoo import rel_norm, ulps32

CELLS = {"LSTM": torch.nn.LSTM, "GRU": torch.nn.GRU, "RNN": torch.nn.RNN}


class Classifier(torch.nn.Module):
    """A recurrent classifier: the last step's output through a linear head; with
    ``init`` the first layer starts from learned states."""

    def __init__(self, cell, bi, init):
        super().__init__()
        self.r = CELLS[cell](5, 6, batch_first=True, bidirectional=bi, num_layers=2)
        d = 2 if bi else 1
        self.h0 = torch.nn.Parameter(torch.randn(2 * d, 1, 6)) if init else None
        self.c0 = torch.nn.Parameter(torch.randn(2 * d, 1, 6)) if init and cell == "LSTM" \
            else None
        self.fc = torch.nn.Linear(6 * d, 3)

    def forward(self, x):
        if self.h0 is None:
            y, _ = self.r(x)
        elif self.c0 is None:
            y, _ = self.r(x, self.h0)
        else:
            y, _ = self.r(x, (self.h0, self.c0))
        return self.fc(y[:, -1])


#: the default run: every cell, both directions and both initial states, each at least once
#: (LSTM's initial state carries c0 too); -m slow: the other eight combinations
RECURRENT_DEFAULT = {("LSTM", True, True), ("GRU", False, False), ("RNN", True, False),
                     ("RNN", False, True)}


@pytest.mark.parametrize("cell, bi, init", [
    pytest.param(cell, bi, init,
                 marks=() if (cell, bi, init) in RECURRENT_DEFAULT else pytest.mark.slow,
                 id=f"{cell}-{'bidirectional' if bi else 'forward'}-"
                    f"{'initial-state' if init else 'zero-state'}")
    for cell in sorted(CELLS) for bi in (False, True) for init in (False, True)])
def test_recurrent_classifier(cell, bi, init, tmp_path):
    torch.manual_seed(len(cell) + 2 * bi + 4 * init)
    m = Classifier(cell, bi, init).eval()
    x = torch.randn(1, 7, 5)
    path = tmp_path / "r.onnx"
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(m, (x,), str(path), dynamo=False, opset_version=17,
                          input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {1: "T"}})
    model = onnx.load(str(path))
    assert cell in {n.op_type for n in model.graph.node}
    g, p = from_onnx(model, shapes={"x": (1, 7, 5)})
    xn = x.numpy().astype(np.float64)
    with torch.no_grad():
        ref = copy.deepcopy(m).double()(torch.from_numpy(xn)).numpy()
    e64 = rel_norm(graph.denote(g, p, xn, "float64"), ref)
    assert e64 <= 1e-12, e64
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    u = ulps32(graph.denote(g, p, xn, "binary32"), sess.run(None, {"x": x.numpy()})[0])
    assert u <= 8, u
