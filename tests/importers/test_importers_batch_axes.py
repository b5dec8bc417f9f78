"""Batch axes are inferred, not assumed; import errors say what is wrong.

ONNX: leading symbolic dimensions (dim_param, or none given) are batch axes, a fixed one
belongs to the example, ``batch_dims``/``--batch-dims K`` overrides.  torch: leading axes
marked dynamic on the example input are batch axes.  Values are checked against
onnxruntime / torch on the same inputs.
"""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from scalarlab import graph
from scalarlab.experiments.cli import main as cli_main
from scalarlab.graph import GraphError
from scalarlab.graph.importers.onnx import from_onnx, infer_batch_dims, load_onnx
from scalarlab.graph.importers.torch_fx import from_torch

RNG = np.random.default_rng(3)


def _softmax_model(shape, axis=-1, opset=17):
    """Softmax over ``axis`` of one input of the given (possibly symbolic) shape."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    g = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], axis=axis)], "s", [x], [y])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _ort(model, x):
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, {"x": x.astype(np.float32)})[0]


def test_fixed_first_dim_belongs_to_the_example():
    """A [4] input is one example of 4 (softmax over all 4), not 4 scalar examples."""
    m = _softmax_model([4], axis=0)
    assert infer_batch_dims(m) == 0
    g, p = from_onnx(m)
    assert g.nodes[0].out_shape == (4,)
    x = RNG.standard_normal(4).astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(graph.denote(g, p, x, "float64"), _ort(m, x), rtol=1e-6)


@pytest.mark.parametrize("shape,nb", [(["N", 3], 1), ([None, 3], 1), (["B", "T", 3], 2),
                                      ([2, 3], 0), ([5], 0)])
def test_leading_symbolic_dims_are_batch_axes(shape, nb):
    m = _softmax_model(shape)
    assert infer_batch_dims(m) == nb
    g, p = from_onnx(m)
    per = tuple(d for d in shape[nb:])
    assert g.nodes[0].out_shape == per
    full = tuple(2 if not isinstance(d, int) else d for d in shape)
    x = RNG.standard_normal(full).astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(graph.denote(g, p, x, "float64"), _ort(m, x), rtol=1e-6)


def test_batch_dims_override_and_its_errors():
    m = _softmax_model([2, 3])
    g, _ = from_onnx(m, batch_dims=1)            # the fixed 2 declared a batch axis
    assert g.nodes[0].out_shape == (3,)
    with pytest.raises(GraphError, match="per-example axes .* must be concrete"):
        from_onnx(_softmax_model(["N", "M"]), batch_dims=1)
    with pytest.raises(GraphError, match=r"batch_dims must be a non-negative int or None"):
        from_onnx(m, batch_dims=-1)
    with pytest.raises(GraphError, match=r"input 'x' shape \[3, 'T'\]: axis 1 is symbolic "
                                         r"after the fixed axis 0"):
        from_onnx(_softmax_model([3, "T"]), concrete=False)
    # by default the refused model imports with concrete shapes: T is 1, or as given
    assert from_onnx(_softmax_model([3, "T"]))[0].nodes[0].out_shape == (3, 1)
    assert from_onnx(_softmax_model([3, "T"]), shapes={"x": (3, 5)})[0].nodes[0].out_shape \
        == (3, 5)
    two = _softmax_model(["N", 3])
    two.graph.input.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, [5]))
    with pytest.raises(GraphError, match=r"different numbers of leading symbolic \(batch\) "
                                         r"axes: \{'x': 1, 'z': 0\}; pass batch_dims"):
        from_onnx(two, concrete=False)


def test_cli_batch_dims_flag(tmp_path, capsys):
    path = tmp_path / "s.onnx"
    onnx.save(_softmax_model([2, 3]), str(path))
    assert cli_main(["import", str(path), "-o", str(tmp_path / "a.json")]) == 0
    assert graph.load(str(tmp_path / "a.json"))[0].nodes[0].out_shape == (2, 3)
    assert cli_main(["import", str(path), "-o", str(tmp_path / "b.json"),
                     "--batch-dims", "1"]) == 0
    assert graph.load(str(tmp_path / "b.json"))[0].nodes[0].out_shape == (3,)


def test_torch_dynamic_axis_is_a_batch_axis():
    m = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Softmax(dim=-1)).eval()
    x = torch.randn(4, 3)
    g, _ = from_torch(m, x)                       # nothing marked: one example [4, 3]
    assert g.nodes[0].out_shape == (4, 3)
    xd = x.clone()
    torch._dynamo.mark_dynamic(xd, 0)
    g, p = from_torch(m, xd)                      # marked: batch axis, per-example [3]
    assert g.nodes[0].out_shape == (3,)
    with torch.no_grad():
        ref = m.double()(x.double()).numpy()
    np.testing.assert_allclose(graph.denote(g, p, x.double().numpy(), "float64"), ref,
                               rtol=1e-14)
    xb = torch.randn(4, 3)
    torch._dynamo.mark_dynamic(xb, 1)
    with pytest.raises(GraphError, match=r"marks axes \[1\] dynamic; only leading axes"):
        from_torch(m, xb)


def test_shape_gather_concat_reshape_is_folded_to_a_reshape():
    """x.view(x.size(0), -1) as ONNX writes it: Shape -> Gather -> Unsqueeze -> Concat ->
    Reshape; the batch extent stays symbolic and the graph holds one reshape."""
    et = TensorProto.FLOAT
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y"])]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([0], np.int64), "ax"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1")]
    gr = helper.make_graph(nodes, "v", [helper.make_tensor_value_info("x", et, ["N", 2, 3])],
                           [helper.make_tensor_value_info("y", et, None)], initializer=inits)
    m = helper.make_model(gr, opset_imports=[helper.make_opsetid("", 17)])
    g, p = from_onnx(m)
    assert [n.kind.op for n in g] == ["input", "reshape"]
    assert g.nodes[1].out_shape == (6,)
    x = RNG.standard_normal((3, 2, 3))
    np.testing.assert_array_equal(graph.denote(g, p, x, "float64"), x.reshape(3, 6))
    # a reshape that merges the batch axis into another one is a moved layout; as the
    # output (the IR's outputs keep their batch axes in front) it is refused
    nodes[3] = helper.make_node("Concat", ["minus1"], ["shape"], axis=0)
    gr = helper.make_graph(nodes, "v", [helper.make_tensor_value_info("x", et, ["N", 2, 3])],
                           [helper.make_tensor_value_info("y", et, None)], initializer=inits)
    with pytest.raises(GraphError, match=r"output 'y' has its batch axis moved \(layout "
                                         r"\[b0\*e0\]\)"):
        from_onnx(helper.make_model(gr, opset_imports=[helper.make_opsetid("", 17)]),
                  concrete=False)


# ------------------------------------------------------------------------------ errors
def test_not_an_onnx_file(tmp_path, capsys):
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(GraphError, match=r"is not an ONNX model: the file is empty \(0 bytes\)"):
        load_onnx(empty)
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x00\xff not protobuf at all \xff")
    with pytest.raises(GraphError, match="is not an ONNX model"):
        load_onnx(junk)
    with pytest.raises(GraphError, match="no such file"):
        load_onnx(tmp_path / "missing.onnx")
    # the CLI: one line, nonzero exit
    assert cli_main(["import", str(empty), "-o", str(tmp_path / "g.json")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("scalarlab import: error: ") and "is not an ONNX model" in err
    assert "\n" not in err
    assert not (tmp_path / "g.json").exists()


def test_several_outputs_name_the_cli_flag(tmp_path, capsys):
    et = TensorProto.FLOAT
    gr = helper.make_graph([helper.make_node("Relu", ["x"], ["a"]),
                            helper.make_node("Tanh", ["x"], ["b"])], "two",
                           [helper.make_tensor_value_info("x", et, ["N", 3])],
                           [helper.make_tensor_value_info("a", et, None),
                            helper.make_tensor_value_info("b", et, None)])
    path = tmp_path / "two.onnx"
    onnx.save(helper.make_model(gr, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    with pytest.raises(GraphError, match=r"2 outputs \['a', 'b'\].*--output NAME"):
        load_onnx(path)
    assert cli_main(["import", str(path), "-o", str(tmp_path / "g.json")]) == 1
    assert "--output NAME" in capsys.readouterr().err
    assert cli_main(["import", str(path), "-o", str(tmp_path / "g.json"), "--output", "b"]) == 0
    g, p = graph.load(str(tmp_path / "g.json"))
    x = RNG.standard_normal((2, 3))
    np.testing.assert_allclose(graph.denote(g, p, x, "float64"), np.tanh(x), rtol=1e-15)


def test_transpose_moving_the_batch_axis_is_bookkeeping_until_an_op_mixes_examples():
    """[N, T, E] -> [T, N, E] -> MatMul -> back: imported (the batch axis only moved);
    a Softmax along the moved batch axis is refused naming the node and the reason."""
    et = TensorProto.FLOAT
    W = RNG.standard_normal((4, 3)).astype(np.float32)
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2]),
             helper.make_node("MatMul", ["t", "W"], ["m"]),
             helper.make_node("Softmax", ["m"], ["s"], axis=-1),
             helper.make_node("Transpose", ["s"], ["y"], perm=[1, 0, 2])]
    gr = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", et, ["N", 5, 4])],
                           [helper.make_tensor_value_info("y", et, None)],
                           initializer=[numpy_helper.from_array(W, "W")])
    m = helper.make_model(gr, opset_imports=[helper.make_opsetid("", 17)])
    g, p = from_onnx(m)
    x = RNG.standard_normal((2, 5, 4)).astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(graph.denote(g, p, x, "float64"), _ort(m, x), rtol=1e-6)
    nodes[2] = helper.make_node("Softmax", ["m"], ["s"], axis=1)
    gr = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", et, ["N", 5, 4])],
                           [helper.make_tensor_value_info("y", et, None)],
                           initializer=[numpy_helper.from_array(W, "W")])
    with pytest.raises(GraphError, match=r"node 2 Softmax \(outputs s\): Softmax: source axis "
                                         r"1 holds a batch axis"):
        from_onnx(helper.make_model(gr, opset_imports=[helper.make_opsetid("", 17)]),
                  concrete=False)
    # with concrete shapes (the default's fallback) N is an axis of the example
    m1 = helper.make_model(gr, opset_imports=[helper.make_opsetid("", 17)])
    g, p = from_onnx(m1, shapes={"x": (2, 5, 4)})
    assert g.nodes[0].out_shape == (2, 5, 4)
    np.testing.assert_allclose(graph.denote(g, p, x, "float64"), _ort(m1, x), rtol=1e-6)
    g, p = from_onnx(m1)
    assert g.nodes[0].out_shape == (1, 5, 4)
    np.testing.assert_allclose(graph.denote(g, p, x[:1], "float64"), _ort(m1, x[:1]),
                               rtol=1e-6)


def test_torch_pow_rsqrt_chunk_and_indexing_map_to_ir_ops():
    """x.pow(1.5) / torch.pow(x, y) -> pow, torch.rsqrt -> 1/sqrt, chunk -> slices,
    x[..., :2] / x[:, 0] -> slice (+ reshape): values against torch float64."""
    class M(torch.nn.Module):
        def forward(self, x):
            a = (x.abs() + 1).pow(1.5) + torch.pow(x.abs() + 1, x)
            u, v = a.chunk(2, dim=-1)
            return torch.rsqrt(u * u + 1) + v[..., :2] + x[:, 0:1, 1:3] * x[:, 1].unsqueeze(1)[..., :2]
    x = torch.randn(3, 2, 4)
    torch._dynamo.mark_dynamic(x, 0)
    g, p = from_torch(M(), x)
    ops = [n.kind.op for n in g]
    assert "pow" in ops and "slice" in ops and "sqrt" in ops
    ref = M()(x.double()).numpy()
    np.testing.assert_allclose(graph.denote(g, p, x.double().numpy(), "float64"), ref,
                               rtol=1e-14, atol=1e-15)


def test_comparisons_and_where_with_a_run_time_condition():
    """Where(Less(x, c), Mul(x, 2), x) and IsInf: select over the IR's 0/1 comparisons,
    against onnxruntime."""
    et = TensorProto.FLOAT
    nodes = [helper.make_node("Less", ["x", "c"], ["m"]),
             helper.make_node("Mul", ["x", "two"], ["d"]),
             helper.make_node("Where", ["m", "d", "x"], ["w"]),
             helper.make_node("IsInf", ["x"], ["i"], detect_negative=0),
             helper.make_node("Cast", ["i"], ["f"], to=1),
             helper.make_node("Add", ["w", "f"], ["y"])]
    inits = [numpy_helper.from_array(np.array([0.5, -0.5, 0.0], np.float32), "c"),
             numpy_helper.from_array(np.array(2.0, np.float32), "two")]
    gr = helper.make_graph(nodes, "w", [helper.make_tensor_value_info("x", et, ["N", 3])],
                           [helper.make_tensor_value_info("y", et, None)], initializer=inits)
    m = helper.make_model(gr, opset_imports=[helper.make_opsetid("", 17)])
    g, p = from_onnx(m)
    assert "select" in [n.kind.op for n in g]
    x = np.array([[0.1, -1.0, np.inf], [1.0, -0.2, -np.inf], [0.4, 0.3, -3.0]],
                 np.float32).astype(np.float64)
    np.testing.assert_array_equal(graph.denote(g, p, x, "float64"), _ort(m, x))


@pytest.mark.parametrize("norm_first,act", [(False, "relu"), (True, "gelu")])
def test_torch_transformer_encoder_layer_maps_per_example(norm_first, act):
    """nn.TransformerEncoderLayer (eval, batch_first) inside a model: self-attention and
    feed-forward composed per example; float64 against torch float64."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(8, 2, 16, activation=act, batch_first=True,
                                             norm_first=norm_first)
    m = torch.nn.Sequential(layer).eval()
    x = torch.randn(3, 5, 8)
    torch._dynamo.mark_dynamic(x, 0)
    g, p = from_torch(m, x)
    assert g.nodes[0].out_shape == (5, 8)
    with torch.no_grad():
        ref = m.double()(x.double()).numpy()
    got = graph.denote(g, p, x.double().numpy(), "float64")
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) <= 1e-12
