"""The fx importer's rule tables: every core rule maps its torch form to the same values
as PyTorch (float64), including the rules the other tests reach only through the network
tables (which take precedence) and the rarely written forms (``F.linear``,
``F.softplus(beta=)``, ``torch.maximum``, ``F.dropout(training=False)``, ...)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from scalarlab import graph
from scalarlab.graph.importers import torch_fx
from scalarlab.graph.importers.interchange import UnsupportedOpsError
from scalarlab.graph.importers.torch_fx import import_torch


def _close(got, ref, ulps=8):
    """|got - ref| <= ulps binary64 ulps of the output's scale (torch reassociates its
    dot products; our float64 fold rounds each operation once in sequence)."""
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    assert got.shape == ref.shape
    tol = ulps * 2.0 ** -52 * float(np.abs(ref).max())
    assert float(np.abs(got - ref).max()) <= tol


class Rare(nn.Module):
    """Forms no other importer test writes, each mapped by a core rule."""

    def __init__(self):
        super().__init__()
        self.W = nn.Parameter(torch.randn(6, 4, dtype=torch.float64) * 0.4)
        self.b = nn.Parameter(torch.randn(6, dtype=torch.float64) * 0.1)
        self.sig, self.idm, self.drop = nn.Sigmoid(), nn.Identity(), nn.Dropout(0.3)
        self.lsm, self.flat = nn.LogSoftmax(dim=-1), nn.Flatten()

    def forward(self, x):                                    # x: [B, 4]
        h = F.linear(x, self.W, self.b)                      # [B, 6]
        h = torch.maximum(h, torch.minimum(h * 0.5, x.sum(1, keepdim=True)))
        h = F.softplus(h, beta=2.0) + F.dropout(h, training=False).contiguous()
        h = self.drop(self.idm(self.sig(h))).clone()
        return self.lsm(self.flat(h.reshape(h.size(0), 2, 3)))


def test_rarely_written_forms_match_pytorch():
    torch.manual_seed(7)
    m = Rare().eval()
    x = torch.randn(5, 4, dtype=torch.float64)
    r = import_torch(m, x, batch_dims=1)
    ops = [n.kind.op for n in r.graph]
    assert {"linear", "max", "min", "softplus", "sigmoid", "flatten", "log_softmax"} <= set(ops)
    assert r.names == {"W": (1, "W"), "b": (1, "b")}
    with torch.no_grad():
        ref = m(x).numpy()
    _close(graph.denote(r.graph, r.payload, x.numpy(), "float64"), ref)


class Core(nn.Module):
    """Modules and functions that the network tables map when they are present."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(2, 3, 3, padding="same", dtype=torch.float64)
        self.mp, self.ap = nn.MaxPool2d(2), nn.AvgPool2d(2, stride=1, padding=1)
        self.g = nn.GELU()

    def forward(self, x):                                    # x: [B, 2, 6, 6]
        y = self.ap(self.mp(self.g(self.c(x))))
        return F.gelu(F.max_pool2d(y, 2)) + F.avg_pool2d(y, 2)


def test_core_rules_alone_match_pytorch(monkeypatch):
    """With the network tables empty, the core rules map the model alone: the same ops
    in the listing and the same values as PyTorch."""
    monkeypatch.setattr(torch_fx, "network_tables", lambda torch: ({}, {}, {}))
    torch.manual_seed(3)
    m = Core().eval()
    x = torch.randn(2, 2, 6, 6, dtype=torch.float64)
    r = import_torch(m, x, batch_dims=1)
    assert [n.kind.op for n in r.graph] == [
        "input", "conv2d", "gelu", "max_pool2d", "avg_pool2d", "max_pool2d", "gelu",
        "avg_pool2d", "add"]
    with torch.no_grad():
        ref = m(x).numpy()
    _close(graph.denote(r.graph, r.payload, x.numpy(), "float64"), ref)


def test_tensor_modulus_and_unknown_targets_are_named():
    class Mod(nn.Module):
        def forward(self, x):
            return (x % 0.5).sum(1) + torch.cumprod(x, 1).sum(1) + (x.size(1) % 3)

    with pytest.raises(UnsupportedOpsError) as ei:
        import_torch(Mod(), torch.randn(3, 4), batch_dims=1)
    msg = str(ei.value)
    assert "mod (call_function _operator.mod): no IR mapping for mod of tensors" in msg
    assert "cumprod (call_function torch.cumprod): no IR mapping" in msg
