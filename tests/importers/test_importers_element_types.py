"""Input element types: an integer (or bool) input of a torch module or an ONNX model
becomes an input node declaring ``dtype`` (``graph.ops_shape.INTEGER_DTYPES``), kept in
the graph file, so that the lab's jobs hold it exact (tests/experiments/
test_integer_inputs.py)."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper

from scalarlab import graph as G
from scalarlab.experiments.cli import main as cli_main
from scalarlab.graph import OpKind
from scalarlab.graph.errors import GraphError
from scalarlab.graph.importers.element_types import (declare_input_dtypes, load_onnx_typed,
                                                     onnx_input_dtypes)
from scalarlab.graph.importers.torch_fx import from_torch


class _Embed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.e = torch.nn.Embedding(7, 3)
        self.l = torch.nn.Linear(3, 2)

    def forward(self, ids):
        return self.l(self.e(ids))


def _gather_model(tmp_path):
    """ids (int64 [1, 3]) and a mask (bool [1, 3]) -> Gather rows of a table, Where."""
    table = helper.make_tensor("T", TensorProto.FLOAT, [5, 2],
                               np.arange(10, dtype=np.float32) / 4)
    zero = helper.make_tensor("Z", TensorProto.FLOAT, [], [0.0])
    nodes = [helper.make_node("Gather", ["T", "ids"], ["g"], axis=0),
             helper.make_node("Unsqueeze", ["mask", "ax"], ["m"]),
             helper.make_node("Where", ["m", "g", "Z"], ["y"])]
    ax = helper.make_tensor("ax", TensorProto.INT64, [1], [2])
    gr = helper.make_graph(nodes, "g", [
        helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 3]),
        helper.make_tensor_value_info("mask", TensorProto.BOOL, [1, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 2])],
        initializer=[table, zero, ax])
    m = helper.make_model(gr, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "gather.onnx"
    onnx.save(m, str(path))
    return m, path


def test_from_torch_integer_example_declares_the_input_type():
    m = _Embed().double().eval()
    ids = torch.tensor([[1, 6, 0, 3]])
    g, p = from_torch(m, ids)
    assert g.nodes[0].kind == OpKind("input", dtype="int64")
    got = G.denote(g, p, ids.numpy().astype(np.float64), "float64")
    assert np.array_equal(got, m(ids).detach().numpy())
    g32, _ = from_torch(m, ids.to(torch.int32))
    assert g32.nodes[0].kind.attrs == {"dtype": "int32"}
    gf, _ = from_torch(torch.nn.Linear(3, 2), torch.randn(1, 3))
    assert gf.nodes[0].kind.attrs == {}


def test_onnx_inputs_declare_their_types_through_import(tmp_path):
    m, path = _gather_model(tmp_path)
    assert onnx_input_dtypes(m) == ["int64", "bool"]
    g, p = load_onnx_typed(str(path))
    kinds = [g.nodes[i].kind for i in g.input_ids()]
    assert kinds == [OpKind("input", dtype="int64"), OpKind("input", dtype="bool")]
    out = tmp_path / "gather.json"
    assert cli_main(["import", str(path), "-o", str(out)]) == 0
    g2, p2 = G.load(str(out))
    assert [g2.nodes[i].kind for i in g2.input_ids()] == kinds
    ids, mask = np.array([[4.0, 0.0, 2.0]]), np.array([[1.0, 0.0, 1.0]])
    y = G.denote(g2, p2, {g2.input_ids()[0]: ids, g2.input_ids()[1]: mask}, "float64")
    t = np.arange(10, dtype=np.float32).reshape(5, 2) / 4
    assert np.array_equal(y, np.where(mask[..., None] > 0, t[[4, 0, 2]][None], 0.0))
    # a GRAPH argument naming the .onnx file reads the types too
    from scalarlab.experiments.cases import integer_inputs, load_case
    assert integer_inputs(load_case(str(path))) == {g.input_ids()[0]: "int64",
                                                    g.input_ids()[1]: "bool"}


def test_declare_input_dtypes_refuses_what_it_cannot_match():
    g, _ = from_torch(torch.nn.Linear(3, 2), torch.randn(1, 3))
    assert declare_input_dtypes(g, ["float"]) is g
    with pytest.raises(GraphError, match="declares 2 inputs .* 1 input nodes"):
        declare_input_dtypes(g, ["int64", "float"])
    with pytest.raises(GraphError, match="'string' is not 'float'"):
        declare_input_dtypes(g, ["string"])
