"""ONNX import, one tiny model per supported op, and the exporter.

Oracles: float64 models against ``onnx.reference.ReferenceEvaluator`` (numpy, float64)
with our float64 fold, to 4 binary64 ulps at the output scale (numpy's pairwise sums and
matmul order differ from ours); float32 models against onnxruntime with our binary32 fold,
to 8 binary32 ulps at the output scale (MLAS blocks and fuses its dot products, and its
exp/tanh/erf kernels are not correctly rounded; we round every operation once in sequence).
"""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from scalarlab import graph
from scalarlab.graph import GraphError, Graph, Node, OpKind, Payload, examples
from scalarlab.graph.exporters.onnx import to_onnx
from scalarlab.graph.importers.onnx import SUPPORTED, from_onnx, load_onnx
from scalarlab.graph.importers.interchange import UnsupportedOpsError

RNG = np.random.default_rng(7)


def _close(got, ref, ulps, mant_bits):
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    scale = max(float(np.abs(ref).max()), 2.0 ** -126)
    err = float(np.abs(got - ref).max())
    assert err <= ulps * 2.0 ** -mant_bits * scale, f"max |diff| {err:.3g} at scale {scale:.3g}"


def _model(op, inputs, inits, attrs=None, opset=20, n_inputs_node=None, dtype=np.float32,
           out_rank=None):
    """One-node model: ``inputs`` = {name: full shape with 'N' first}, ``inits`` = {name: array}."""
    et = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    ins = [helper.make_tensor_value_info(k, et, s) for k, s in inputs.items()]
    initializers = [numpy_helper.from_array(v.astype(dtype) if v.dtype.kind == "f" else v, k)
                    for k, v in inits.items()]
    node_inputs = n_inputs_node if n_inputs_node is not None else list(inputs) + list(inits)
    node = helper.make_node(op, node_inputs, ["y"], **(attrs or {}))
    out = helper.make_tensor_value_info("y", et, None)
    g = helper.make_graph([node], "t", ins, [out], initializer=initializers)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                             ir_version=helper.find_min_ir_version_for([helper.make_opsetid("", opset)]))


def _data(shape, positive=False):
    x = RNG.standard_normal(shape)
    return np.abs(x) + 0.1 if positive else x


def _w(*shape):
    return RNG.standard_normal(shape) * 0.5


# (id, op, inputs {name: shape}, inits {name: array}, attrs, opset, node inputs or None, positive)
B = 2
CASES = [
    ("gemm-linear", "Gemm", {"x": ["N", 3]}, {"W": _w(4, 3), "C": _w(4)}, {"transB": 1}, 13, None, False),
    ("gemm-alpha-beta", "Gemm", {"x": ["N", 3]}, {"B": _w(3, 4), "C": _w(1, 4)},
     {"alpha": 0.5, "beta": 2.0}, 13, None, False),
    ("gemm-no-c", "Gemm", {"x": ["N", 3]}, {"B": _w(3, 4)}, {}, 13, None, False),
    ("matmul", "MatMul", {"x": ["N", 3, 4]}, {"W": _w(4, 5)}, {}, 13, None, False),
    ("matmul-two-inputs", "MatMul", {"x": ["N", 3, 4], "z": ["N", 4, 2]}, {}, {}, 13, None, False),
    ("add-bcast", "Add", {"x": ["N", 3, 4]}, {"c": _w(4)}, {}, 14, None, False),
    ("sub-lead1", "Sub", {"x": ["N", 3, 4]}, {"c": _w(1, 1, 4)}, {}, 14, None, False),
    ("mul-inputs", "Mul", {"x": ["N", 3, 4], "z": ["N", 1, 4]}, {}, {}, 14, None, False),
    ("div", "Div", {"x": ["N", 3, 4]}, {"c": np.abs(_w(3, 1)) + 0.5}, {}, 14, None, False),
    ("relu", "Relu", {"x": ["N", 5]}, {}, {}, 14, None, False),
    ("tanh", "Tanh", {"x": ["N", 5]}, {}, {}, 13, None, False),
    ("sigmoid", "Sigmoid", {"x": ["N", 5]}, {}, {}, 13, None, False),
    ("softplus", "Softplus", {"x": ["N", 5]}, {}, {}, 1, None, False),
    ("gelu", "Gelu", {"x": ["N", 5]}, {}, {}, 20, None, False),
    ("exp", "Exp", {"x": ["N", 5]}, {}, {}, 13, None, False),
    ("log", "Log", {"x": ["N", 5]}, {}, {}, 13, None, True),
    ("abs", "Abs", {"x": ["N", 5]}, {}, {}, 13, None, False),
    ("sqrt", "Sqrt", {"x": ["N", 5]}, {}, {}, 13, None, True),
    ("softmax", "Softmax", {"x": ["N", 3, 4]}, {}, {"axis": 1}, 13, None, False),
    ("logsoftmax", "LogSoftmax", {"x": ["N", 3, 4]}, {}, {"axis": -1}, 13, None, False),
    ("softmax-opset11", "Softmax", {"x": ["N", 3, 4]}, {}, {"axis": 1}, 11, None, False),
    ("layernorm", "LayerNormalization", {"x": ["N", 3, 4]}, {"s": _w(4) + 1, "b": _w(4)},
     {"axis": -1, "epsilon": 1e-3}, 17, None, False),
    ("layernorm-axis1", "LayerNormalization", {"x": ["N", 3, 4]}, {"s": _w(3, 4) + 1},
     {"axis": 1}, 17, None, False),
    ("batchnorm", "BatchNormalization", {"x": ["N", 3, 4, 4]},
     {"g": _w(3) + 1, "b": _w(3), "m": _w(3), "v": np.abs(_w(3)) + 0.5}, {"epsilon": 1e-3}, 15,
     None, False),
    ("conv", "Conv", {"x": ["N", 2, 5, 5]}, {"W": _w(4, 2, 3, 3), "B": _w(4)},
     {"pads": [1, 1, 1, 1], "strides": [2, 2]}, 11, None, False),
    ("conv-group-dil", "Conv", {"x": ["N", 4, 7, 7]}, {"W": _w(6, 2, 3, 3)},
     {"group": 2, "dilations": [2, 2]}, 11, None, False),
    ("maxpool", "MaxPool", {"x": ["N", 2, 6, 6]}, {}, {"kernel_shape": [2, 2], "strides": [2, 2]},
     12, None, False),
    ("maxpool-pad", "MaxPool", {"x": ["N", 2, 5, 5]}, {},
     {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, 12, None, False),
    ("avgpool-pad", "AveragePool", {"x": ["N", 2, 5, 5]}, {},
     {"kernel_shape": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1}, 19, None, False),
    ("concat", "Concat", {"x": ["N", 3, 4], "z": ["N", 2, 4]}, {}, {"axis": 1}, 13, None, False),
    ("reducesum-input", "ReduceSum", {"x": ["N", 3, 4]}, {"axes": np.array([2], np.int64)},
     {"keepdims": 1}, 13, None, False),
    ("reducesum-attr", "ReduceSum", {"x": ["N", 3, 4]}, {}, {"axes": [1, 2], "keepdims": 0}, 11,
     None, False),
    ("reducemean-input", "ReduceMean", {"x": ["N", 3, 4]}, {"axes": np.array([-2], np.int64)},
     {"keepdims": 0}, 18, None, False),
    ("reducemean-attr", "ReduceMean", {"x": ["N", 3, 4]}, {}, {"axes": [1]}, 13, None, False),
    ("transpose", "Transpose", {"x": ["N", 3, 4, 2]}, {}, {"perm": [0, 3, 1, 2]}, 13, None, False),
    ("reshape", "Reshape", {"x": ["N", 3, 4]}, {"s": np.array([0, -1, 2], np.int64)}, {}, 14,
     None, False),
    ("flatten", "Flatten", {"x": ["N", 3, 4]}, {}, {"axis": 1}, 13, None, False),
]


def _erf_gelu(x):
    import math
    erf = np.vectorize(math.erf, otypes=[np.float64])
    return x * 0.5 * (1.0 + erf(x / math.sqrt(2.0)))


def _softmax_flat(x):
    f = x.reshape(x.shape[0], -1)
    e = np.exp(f - f.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).reshape(x.shape)


# ReferenceEvaluator computes Erf in float32 and Softmax with opset-13 semantics at every
# opset, so these two cases use a float64 numpy oracle instead.
OWN_ORACLE = {"gelu": _erf_gelu, "softmax-opset11": _softmax_flat}


def _feeds(inputs, dtype, positive):
    return {k: _data([B] + list(s[1:]), positive).astype(dtype) for k, s in inputs.items()}


def _fold(g, p, feeds, ctx):
    xs = [v.astype(np.float64) for v in feeds.values()]
    return graph.denote(g, p, xs[0] if len(xs) == 1 else xs, ctx)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_each_supported_op_against_reference_and_onnxruntime(case):
    cid, op, inputs, inits, attrs, opset, node_inputs, positive = case
    # float64: the numpy reference evaluator
    m64 = _model(op, inputs, inits, attrs, opset, node_inputs, dtype=np.float64)
    g, p = from_onnx(m64)
    graph.check_shapes(g)
    feeds64 = _feeds(inputs, np.float64, positive)
    if cid in OWN_ORACLE:
        ref = OWN_ORACLE[cid](*feeds64.values())
    else:
        ref = ReferenceEvaluator(m64).run(None, feeds64)[0]
    _close(_fold(g, p, feeds64, "float64"), ref, 4, 52)
    # float32: onnxruntime
    m32 = _model(op, inputs, inits, attrs, opset, node_inputs, dtype=np.float32)
    g32, p32 = from_onnx(m32)
    feeds32 = {k: v.astype(np.float32) for k, v in feeds64.items()}
    sess = ort.InferenceSession(m32.SerializeToString(), providers=["CPUExecutionProvider"])
    _close(_fold(g32, p32, feeds32, "binary32"), sess.run(None, feeds32)[0], 8, 23)


def test_case_table_covers_every_op_the_issue_names():
    named = {"Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Relu", "Tanh", "Sigmoid", "Softplus",
             "Gelu", "Exp", "Log", "Abs", "Sqrt", "Softmax", "LogSoftmax", "LayerNormalization",
             "BatchNormalization", "Conv", "MaxPool", "AveragePool", "Concat", "ReduceSum",
             "ReduceMean", "Transpose", "Reshape", "Flatten"}
    assert named <= {c[1] for c in CASES}
    assert named <= set(SUPPORTED)


def test_gemm_maps_to_linear_or_composes_alpha_beta():
    g, p = from_onnx(_model(*[CASES[0][k] for k in (1, 2, 3, 4, 5)]))
    assert [n.kind.op for n in g] == ["input", "linear"]
    g, _ = from_onnx(_model(*[CASES[1][k] for k in (1, 2, 3, 4, 5)]))
    assert [n.kind.op for n in g] == ["input", "const", "matmul", "const", "mul", "const",
                                      "const", "mul", "add"]
    # ReduceSum over every per-example axis without keepdims is the IR's sum
    m = _model("ReduceSum", {"x": ["N", 3, 4]}, {"axes": np.array([1, 2], np.int64)},
               {"keepdims": 0}, 13)
    assert [n.kind.op for n in from_onnx(m)[0]] == ["input", "sum"]


def test_unsupported_ops_are_listed_in_one_error():
    et = TensorProto.FLOAT
    nodes = [helper.make_node("NonZero", ["x"], ["a"]),
             helper.make_node("Clip", ["x", "x"], ["b"]),
             helper.make_node("Conv", ["x4", "x4"], ["c"]),
             helper.make_node("ReduceSum", ["x"], ["d"], keepdims=0),
             helper.make_node("Transpose", ["x"], ["e"]),
             helper.make_node("Add", ["a", "b"], ["y"])]
    g = helper.make_graph(nodes, "bad", [helper.make_tensor_value_info("x", et, ["N", 3]),
                                         helper.make_tensor_value_info("x4", et, ["N", 1, 4, 4])],
                          [helper.make_tensor_value_info("y", et, None)],
                          initializer=[numpy_helper.from_array(np.ones((2, 1, 3, 3), np.float32), "W"),
                                       numpy_helper.from_array(np.array(1, np.int64), "ax")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    with pytest.raises(UnsupportedOpsError) as ei:
        from_onnx(model, concrete=False)
    items = ei.value.items
    assert len(items) == 4       # the Transpose only moves the batch axis (bookkeeping)
    assert items[0] == "node 0 NonZero (outputs a): no IR mapping for ONNX op 'NonZero'"
    assert items[1].startswith("node 1 Clip (outputs b): min must be a constant")
    assert "weight W ('x4') must be an initializer" in items[2]
    assert "reduces over all axes, batch axes included" in items[3]
    assert isinstance(ei.value, GraphError)


def test_import_errors_name_the_problem(tmp_path):
    m = _model("Relu", {"x": ["N", "M"]}, {})
    with pytest.raises(GraphError, match="per-example axes .* must be concrete"):
        from_onnx(m, batch_dims=1)
    with pytest.raises(GraphError, match="batch_dims=0"):
        from_onnx(_model("Relu", {"x": []}, {}), batch_dims=1)
    g, _ = from_onnx(_model("Relu", {"x": [5]}, {}), batch_dims=0)
    assert g[0].out_shape == (5,)
    # without batch axes ONNX's Flatten is 2-D ([1, 12] for axis 0), with one it is per example
    g, _ = from_onnx(_model("Flatten", {"x": [3, 4]}, {}, {"axis": 0}), batch_dims=0)
    assert g[1].out_shape == (1, 12)
    g, _ = from_onnx(_model("Flatten", {"x": ["N", 3, 4]}, {}, {"axis": 1}))
    assert g[1].out_shape == (12,)
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(GraphError, match="is not an ONNX model"):
        load_onnx(bad)


# ------------------------------------------------------------------------------ export
def _export_graph():
    """An IR graph that walks the exporter's non-trivial paths."""
    nodes = [
        Node(0, [], "input", [3, 4]),
        Node(1, [], "const", [4]),
        Node(2, [0, 1], "matmul", [3]),                                   # batched [3,4] @ const [4]
        Node(3, [], "const", [2, 3]),
        Node(4, [2, 3], "add", [2, 3]),                                   # per-example rank 1 + const rank 2
        Node(5, [4], OpKind("batchnorm_eval", axis=1), [2, 3]),          # not the channel axis 1 of NCHW
        Node(6, [5, 2], "matmul", [2]),                                   # batched [2,3] @ batched [3]
        Node(7, [6], OpKind("broadcast_to", shape=[3, 2]), [3, 2]),
        Node(8, [], "const", [2, 2]),
        Node(9, [7, 8], OpKind("concat", axis=0), [5, 2]),               # batched with a const
        Node(10, [9], OpKind("permute", perm=[1, 0]), [2, 5]),
        Node(11, [10], OpKind("reduce_mean", axis=1, keepdims=True), [2, 1]),
        Node(12, [11], "safe_log", [2, 1]),
        Node(13, [12, 10], "max", [2, 5]),
        Node(14, [13], OpKind("flatten", start_axis=0, end_axis=1), [10]),
        Node(15, [14], OpKind("reshape", shape=[5, -1]), [5, 2]),
        Node(16, [15], "detach", [5, 2]),
        Node(17, [16], OpKind("log_softmax", axis=0), [5, 2]),
        Node(18, [17], "sum", []),
    ]
    g = Graph(nodes)
    p = Payload({1: {"value": _w(4)}, 3: {"value": _w(2, 3)},
                 5: {"mean": _w(3), "var": np.abs(_w(3)) + 0.5, "gamma": _w(3) + 1,
                     "beta": _w(3), "eps": "1e-5"},
                 8: {"value": _w(2, 2)}})
    return g, p


@pytest.mark.parametrize("name", ["six-node", "softmax-axis", "layernorm-axis", "concat-axis",
                                  "exporter-paths"])
def test_export_checks_runs_in_onnxruntime_and_reimports(name):
    if name == "exporter-paths":
        g, p = _export_graph()
        x = _data((4, 3, 4))
    else:
        g, p, x = examples.get(name)
    model = to_onnx(g, p)
    onnx.checker.check_model(model, full_check=True)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    from scalarlab import scalars
    b32 = scalars.get("binary32")
    if isinstance(x, dict):
        xs = {k: np.asarray(b32.to_float64(b32.convert(v)))[None] for k, v in x.items()}
        feeds = {f"input_{k}": v.astype(np.float32) for k, v in xs.items()}
        ours = graph.denote(g, p, xs, "binary32")
    else:
        xb = np.asarray(b32.to_float64(b32.convert(x)))
        xb = xb[None] if name != "exporter-paths" else xb
        feeds = {"x": xb.astype(np.float32)}
        ours = graph.denote(g, p, xb, "binary32")
    _close(sess.run(None, feeds)[0], ours, 8, 23)
    if name == "exporter-paths":
        # a constant concatenated with a batched value is broadcast with Shape -> Expand:
        # the importer folds the shape (batch extent symbolic) and the IR broadcasts the
        # constant over the batch itself
        g2, p2 = from_onnx(model)
        back = graph.denote(g2, p2, xb, "binary32")
        np.testing.assert_array_equal(back, ours)
        return
    g2, p2 = from_onnx(model)
    # the exported float32 payload is what binary32 reads: the re-imported fold is identical
    back = graph.denote(g2, p2, xs if isinstance(x, dict) else xb, "binary32")
    np.testing.assert_array_equal(back, ours)
    if name == "six-node":
        assert graph.listing(g2) == graph.listing(g)


def test_export_float64_matches_reference_evaluator():
    g, p, x0 = examples.six_node_mlp()
    model = to_onnx(g, p, dtype="float64")
    x = np.asarray([[0.3, -0.2, 0.1, 0.4], [0.5, 0.25, -1.0, 2.0]])
    ref = ReferenceEvaluator(model).run(None, {"x": x})[0]
    _close(graph.denote(g, p, x, "float64"), ref, 4, 52)


def test_export_lists_unsupported_ops_and_checks_arguments():
    g = Graph([Node(0, [], "input", [3]), Node(1, [], "const", [3]), Node(2, [0, 1], "mse_loss", [])])
    p = Payload({1: {"value": np.ones(3)}})
    with pytest.raises(UnsupportedOpsError, match=r"node 2 mse_loss: no ONNX mapping for op 'mse_loss'"):
        to_onnx(g, p)
    g6, p6, _ = examples.six_node_mlp()
    with pytest.raises(GraphError, match="dtype must be 'float32' or 'float64'"):
        to_onnx(g6, p6, dtype="float16")
    with pytest.raises(GraphError, match="opset must be an int >= 20"):
        to_onnx(g6, p6, opset=13)
    with pytest.raises(GraphError, match="IR eval: linear 1"):
        to_onnx(g6, p6.swapped(1, 3))
