"""Named parameter exchange (state_dict <-> payload), the CLI import/export commands, and
the clear errors when an optional extra is missing."""
from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
import torch.nn as nn

from scalarlab import graph
from scalarlab.experiments import cli
from scalarlab.graph import GraphError, examples
from scalarlab.graph.importers.state_dict import payload_from_state_dict, state_dict_from_payload
from scalarlab.graph.importers.torch_fx import import_torch

SIX_NAMES = {"l1.weight": (1, "W"), "l1.bias": (1, "b"), "l2.weight": (3, "W"), "l2.bias": (3, "b")}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 3, 3)
        self.bn = nn.BatchNorm2d(3)
        self.fc = nn.Linear(12, 2)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))


class Six(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = nn.Linear(4, 5), nn.Linear(5, 3)

    def forward(self, x):
        return torch.tanh(self.l2(torch.relu(self.l1(x))).sum())


@pytest.fixture(scope="module")
def net():
    torch.manual_seed(3)
    m = Net().eval()
    with torch.no_grad():
        m.bn.running_var.uniform_(0.5, 2.0)
    x = torch.randn(2, 1, 4, 4)
    return m, x, import_torch(m, x, batch_dims=1)


def test_names_cover_the_state_dict(net):
    m, _, r = net
    assert set(r.names) | set(r.ignored) == set(m.state_dict())
    assert r.names["bn.running_var"] == (2, "var") and r.names["fc.bias"] == (5, "b")
    assert r.ignored == ("bn.num_batches_tracked",)


def test_checkpoint_loading_changes_the_payload_not_the_graph(net):
    m, x, r = net
    torch.manual_seed(11)
    other = Net().eval()
    with torch.no_grad():
        other.bn.running_mean.uniform_(-1, 1)
    p = payload_from_state_dict(r.graph, r.names, other.state_dict(), base=r.payload,
                                ignore=r.ignored)
    ours = graph.denote(r.graph, p, x.double().numpy(), "float64")
    with torch.no_grad():
        ref = other.double()(x.double()).numpy()
    np.testing.assert_allclose(ours, ref, rtol=0, atol=4 * 2.0 ** -52 * np.abs(ref).max())
    # eps (not in the state_dict) came from the base payload
    assert float(p.get(2)["eps"]) == m.bn.eps


def test_payload_to_state_dict_loads_into_a_fresh_module(net):
    m, x, r = net
    sd = state_dict_from_payload(r.graph, r.payload, r.names)
    fresh = Net().eval()
    fresh.load_state_dict(sd)       # strict: BatchNorm fills num_batches_tracked itself
    with torch.no_grad():
        np.testing.assert_array_equal(fresh(x).numpy(), m(x).numpy())


def test_six_node_decimal_payload_to_torch_float64():
    g, p, x0 = examples.six_node_mlp()
    sd = state_dict_from_payload(g, p, SIX_NAMES, dtype=torch.float64)
    assert sd["l1.weight"].dtype == torch.float64 and float(sd["l1.weight"][0, 0]) == 0.15
    m = Six().double()
    m.load_state_dict(sd)
    x = torch.tensor([0.3, -0.2, 0.1, 0.4], dtype=torch.float64)
    assert abs(m(x).item() - float(graph.denote(g, p, x0, "float64"))) <= 1e-15
    back = payload_from_state_dict(g, SIX_NAMES, m.state_dict())
    assert float(graph.denote(g, back, x0, "float64")) == float(graph.denote(g, p, x0, "float64"))
    arrays = state_dict_from_payload(g, p, SIX_NAMES, numpy=True)
    assert arrays["l2.bias"].dtype == np.float64 and arrays["l2.bias"].tolist() == [0.02, -0.01, 0.0]


def test_missing_extra_and_misshaped_tensors_are_named():
    g, p, _ = examples.six_node_mlp()
    sd = state_dict_from_payload(g, p, SIX_NAMES, numpy=True)
    short = {k: v for k, v in sd.items() if k != "l2.bias"}
    with pytest.raises(GraphError, match=r"missing 'l2.bias'"):
        payload_from_state_dict(g, SIX_NAMES, short)
    with pytest.raises(GraphError, match=r"unexpected 'l3.weight'"):
        payload_from_state_dict(g, SIX_NAMES, dict(sd, **{"l3.weight": np.zeros(2)}))
    bad = dict(sd, **{"l1.weight": np.zeros((4, 5))})
    with pytest.raises(GraphError, match=r"entry 'l1.weight' \(linear 1 field 'W'\) has shape "
                                         r"\[4, 5\], expected \[5, 4\]"):
        payload_from_state_dict(g, SIX_NAMES, bad)
    with pytest.raises(GraphError, match=r"maps to relu 2 field 'W'"):
        payload_from_state_dict(g, {"x": (2, "W")}, {"x": np.zeros(1)})
    with pytest.raises(GraphError, match="both map to node 1 field 'W'"):
        payload_from_state_dict(g, {"a": (1, "W"), "b": (1, "W")}, {})


# ---------------------------------------------------------------------------------- CLI
def test_cli_export_then_import_round_trip(tmp_path, capsys):
    model = tmp_path / "six.onnx"
    assert cli.main(["export", "six-node", "-o", str(model)]) == 0
    out = tmp_path / "six.json"
    assert cli.main(["import", str(model), "-o", str(out), "--listing"]) == 0
    text = capsys.readouterr().out
    assert "1: linear(payload=node_id) parents=[0] out=[5]" in text
    g, p = graph.load(str(out))
    g6, p6, x0 = examples.six_node_mlp()
    assert g == g6
    assert float(graph.denote(g, p, x0, "binary32")) == float(graph.denote(g6, p6, x0, "binary32"))
    # the written graph file is itself exportable
    assert cli.main(["export", str(out), "-o", str(tmp_path / "again.onnx"), "--dtype",
                     "float64"]) == 0


def test_cli_errors_exit_1_with_the_message(tmp_path, capsys):
    import onnx
    from onnx import helper
    et = onnx.TensorProto.FLOAT
    gr = helper.make_graph([helper.make_node("NonZero", ["x"], ["y"])], "e",
                           [helper.make_tensor_value_info("x", et, ["N", 2])],
                           [helper.make_tensor_value_info("y", et, None)])
    path = tmp_path / "nonzero.onnx"
    onnx.save(helper.make_model(gr, opset_imports=[helper.make_opsetid("", 20)]), str(path))
    assert cli.main(["import", str(path), "-o", str(tmp_path / "g.json")]) == 1
    err = capsys.readouterr().err
    assert "scalarlab import: error: from_onnx: 1 unsupported operation" in err
    assert "node 0 NonZero (outputs y): no IR mapping for ONNX op 'NonZero'" in err
    assert cli.main(["export", "no-such-graph", "-o", str(tmp_path / "x.onnx")]) == 1
    assert "neither a built-in" in capsys.readouterr().err


def test_missing_extra_is_a_clear_error(monkeypatch):
    from scalarlab.graph.exporters.onnx import to_onnx
    g, p, x0 = examples.six_node_mlp()
    monkeypatch.setitem(sys.modules, "onnx", None)         # import onnx -> ImportError
    with pytest.raises(GraphError, match=r"onnx is not installed; install the optional extra: "
                                         r"pip install 'scalarlab\[onnx\]'"):
        to_onnx(g, p)
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(GraphError, match=r"scalarlab\[torch\]"):
        import_torch(object(), None)
