"""N-d convolution and pooling against onnxruntime (float32 inputs that are exact in
float64; the IR runs in float64) for the ONNX geometry options: auto_pad SAME_UPPER /
SAME_LOWER / VALID, asymmetric pads, dilations, ceil_mode, count_include_pad both ways,
groups; torch for ceil_mode divisors; exact rationals for the pools.

(onnx.reference's numpy evaluator is not used: for SAME_LOWER max pooling, dilated VALID
average pooling and ceil_mode divisors it disagrees with onnxruntime and torch, which
agree with each other and with these rules.)"""
from __future__ import annotations

import numpy as np
import pytest

import onnx
import onnxruntime as ort
from onnx import TensorProto, helper  # noqa: E402

from scalarlab import graph, scalars  # noqa: E402
from scalarlab.graph import Graph, Node, OpKind, Payload  # noqa: E402
from scalarlab.graph.optable import OPS, ShapeRuleError, full_attrs  # noqa: E402
from scalarlab.graph.ops_conv import auto_pads  # noqa: E402


def onnx_run(op_type, inputs, **attrs):
    names = [f"i{k}" for k in range(len(inputs))]
    node = helper.make_node(op_type, names, ["y"], **attrs)
    g = helper.make_graph([node], "t", [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
                                        for n in names],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    m.ir_version = 9
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    feed = {n: np.asarray(v, dtype=np.float32) for n, v in zip(names, inputs)}
    return sess.run(None, feed)[0].astype(np.float64)


def f32(a):
    return np.asarray(a, dtype=np.float32).astype(np.float64)


def ir_run(op, x, params=None, ctx="float64", **attrs):
    """x carries one batch axis (the IR's per-example shape is x.shape[1:])."""
    rec = OPS[op]
    a = full_attrs(rec, attrs)
    out = rec.shape([x.shape[1:]], a) if not rec.params else None
    if rec.params:
        a = full_attrs(rec, dict(attrs, out_channels=params["weight"].shape[0]))
        out = rec.shape([x.shape[1:]], a)
        attrs = dict(attrs, out_channels=params["weight"].shape[0])
    g = Graph([Node(0, [], "input", list(x.shape[1:])), Node(1, [0], OpKind(op, **attrs), list(out))])
    p = Payload({1: params}) if params else Payload()
    return graph.denote(g, p, x, ctx)


def _onnx_pool_attrs(d, k, s, pads, auto_pad, ceil, dil, cip=None):
    a = dict(kernel_shape=[k] * d, strides=[s] * d)
    if auto_pad != "NOTSET":
        a["auto_pad"] = auto_pad
    else:
        a["pads"] = pads
    if ceil:
        a["ceil_mode"] = 1
    if dil != 1:
        a["dilations"] = [dil] * d
    if cip is not None:
        a["count_include_pad"] = int(cip)
    return a


POOL = [
    # d, size, kernel, stride, pads (begins then ends), auto_pad, ceil, dilation
    (1, 9, 3, 2, [1, 0], "NOTSET", True, 1),
    (1, 10, 4, 3, [0, 2], "NOTSET", False, 1),
    (2, 7, 3, 2, [1, 0, 0, 1], "NOTSET", True, 1),
    (2, 8, 3, 2, None, "SAME_UPPER", False, 1),
    (2, 7, 2, 2, None, "SAME_LOWER", False, 1),
    (2, 6, 2, 1, None, "VALID", False, 2),
    (3, 5, 2, 2, [1, 0, 1, 0, 1, 1], "NOTSET", True, 1),
]


@pytest.mark.parametrize("case", POOL, ids=[f"{c[0]}d-{c[5]}-{i}" for i, c in enumerate(POOL)])
def test_max_pool_matches_onnx_reference(case):
    d, n, k, s, pads, auto_pad, ceil, dil = case
    x = f32(np.random.default_rng(0).standard_normal((2, 3) + (n,) * d))
    want = onnx_run("MaxPool", [x], **_onnx_pool_attrs(d, k, s, pads, auto_pad, ceil, dil))
    got = ir_run(f"max_pool{d}d", x, kernel_size=k, stride=s, padding=pads or 0,
                 auto_pad=auto_pad, ceil_mode=ceil, dilation=dil)
    assert got.shape == want.shape and np.array_equal(got, want)


@pytest.mark.parametrize("cip", [True, False])
@pytest.mark.parametrize("case", POOL, ids=[f"{c[0]}d-{c[5]}-{i}" for i, c in enumerate(POOL)])
def test_avg_pool_matches_onnx_reference(case, cip):
    d, n, k, s, pads, auto_pad, ceil, dil = case
    x = f32(np.random.default_rng(1).standard_normal((2, 3) + (n,) * d))
    want = onnx_run("AveragePool", [x], **_onnx_pool_attrs(d, k, s, pads, auto_pad, ceil, dil, cip))
    got = ir_run(f"avg_pool{d}d", x, kernel_size=k, stride=s, padding=pads or 0,
                 auto_pad=auto_pad, ceil_mode=ceil, dilation=dil, count_include_pad=cip)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


def test_avg_pool_ceil_mode_divisor_matches_torch():
    import torch
    import torch.nn.functional as F
    x = np.random.default_rng(2).standard_normal((2, 3, 9, 8))
    for cip in (True, False):
        want = F.avg_pool2d(torch.tensor(x), 3, 2, 1, ceil_mode=True, count_include_pad=cip).numpy()
        got = ir_run("avg_pool2d", x, kernel_size=3, stride=2, padding=1, ceil_mode=True,
                     count_include_pad=cip)
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15)


CONV = [
    # d, size, kernel, stride, pads, auto_pad, dilation, groups
    (1, 11, 3, 2, [2, 1], "NOTSET", 2, 1),
    (2, 7, 3, 1, None, "SAME_UPPER", 1, 2),
    (2, 8, 2, 3, None, "SAME_LOWER", 1, 1),
    (2, 6, 3, 1, None, "VALID", 2, 4),           # depthwise: groups = channels
    (3, 5, 2, 1, [1, 0, 0, 0, 1, 1], "NOTSET", 1, 2),
]


@pytest.mark.parametrize("case", CONV, ids=[f"{c[0]}d-{c[5]}-{i}" for i, c in enumerate(CONV)])
def test_conv_matches_onnx_reference(case):
    d, n, k, s, pads, auto_pad, dil, groups = case
    rng = np.random.default_rng(3)
    C, O = 4, 4
    x = f32(rng.standard_normal((2, C) + (n,) * d))
    w = f32(rng.standard_normal((O, C // groups) + (k,) * d))
    b = f32(rng.standard_normal(O))
    a = dict(kernel_shape=[k] * d, strides=[s] * d, dilations=[dil] * d, group=groups)
    if auto_pad != "NOTSET":
        a["auto_pad"] = auto_pad
    else:
        a["pads"] = pads
    want = onnx_run("Conv", [x, w, b], **a)
    got = ir_run(f"conv{d}d", x, {"weight": w, "bias": b}, kernel_size=k, stride=s,
                 padding=pads or 0, auto_pad=auto_pad, dilation=dil, groups=groups)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_pools_are_exact_in_rationals_with_ceil_mode_and_excluded_padding():
    x = np.random.default_rng(4).integers(-9, 9, (1, 2, 7)).astype(np.float64)
    y = ir_run("avg_pool1d", x, ctx="rational", kernel_size=3, stride=2, padding=1,
               ceil_mode=True, count_include_pad=False)
    from fractions import Fraction
    xs = [Fraction(int(v)) for v in x[0, 0]]
    # windows start at -1, 1, 3, 5 (the last one, [5, 8), is clipped to [5, 7))
    want = [sum(xs[0:2]) / 2, sum(xs[1:4]) / 3, sum(xs[3:6]) / 3, sum(xs[5:7]) / 2]
    assert [Fraction(int(v.numerator), int(v.denominator)) for v in np.asarray(y)[0, 0]] == want


def test_auto_pads_and_geometry_errors():
    assert auto_pads("SAME_UPPER", [7], [3], [2], [1]) == ((1,), (1,))
    assert auto_pads("SAME_UPPER", [8], [3], [2], [1]) == ((0,), (1,))
    assert auto_pads("SAME_LOWER", [8], [3], [2], [1]) == ((1,), (0,))
    rec = OPS["conv1d"]
    with pytest.raises(ShapeRuleError, match=r"conv1d: padding 1 with auto_pad=SAME_UPPER"):
        rec.shape([(2, 9)], full_attrs(rec, dict(kernel_size=3, out_channels=2, padding=1,
                                                 auto_pad="SAME_UPPER")))
    with pytest.raises(ShapeRuleError, match=r"conv1d: auto_pad must be one of NOTSET"):
        rec.shape([(2, 9)], full_attrs(rec, dict(kernel_size=3, out_channels=2, auto_pad="SAME")))
    with pytest.raises(ShapeRuleError, match=r"conv3d: input must be \[C, D, H, W\] per example, got \[2, 9\]"):
        OPS["conv3d"].shape([(2, 9)], full_attrs(OPS["conv3d"], dict(kernel_size=1, out_channels=2)))
    with pytest.raises(ShapeRuleError, match=r"max_pool2d: a pooling window lies entirely in the padding"):
        OPS["max_pool2d"].shape([(1, 4, 4)], full_attrs(OPS["max_pool2d"], dict(kernel_size=2, padding=[2, 0, 0, 0])))
    with pytest.raises(ShapeRuleError, match=r"conv1d: attribute padding must be an int, 1 ints or 2 ints"):
        rec.shape([(2, 9)], full_attrs(rec, dict(kernel_size=3, out_channels=2, padding=[1, 1, 1])))


def test_planner_reports_the_context_order_for_the_summing_records():
    from scalarlab.graph import plan
    for op in ("conv1d", "conv3d", "avg_pool1d", "avg_pool3d"):
        bop = plan.backend_op(op)
        assert plan.reduces(bop), op
    assert plan.is_dot("conv3d") and not plan.is_dot("avg_pool3d")
    assert not plan.reduces("max_pool3d")


@pytest.mark.parametrize("op,attrs", [
    ("conv1d", dict(kernel_size=3, padding=[2, 0], stride=2, dilation=2, out_channels=4, groups=2)),
    ("conv3d", dict(kernel_size=2, auto_pad="SAME_LOWER", out_channels=4, stride=2)),
    ("max_pool2d", dict(kernel_size=3, stride=2, padding=[1, 0, 0, 1], ceil_mode=True)),
    ("avg_pool1d", dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)),
    ("avg_pool3d", dict(kernel_size=2, auto_pad="SAME_UPPER")),
])
def test_onnx_export_writes_the_geometry(op, attrs):
    """The exporter writes explicit pads, ceil_mode and count_include_pad: onnxruntime
    runs the exported model to the fold's values."""
    from scalarlab.graph.exporters.onnx import to_onnx
    d = int(op[-2])
    in_shape = (4,) + (7,) * d
    rng = np.random.default_rng(6)
    rec = OPS[op]
    out = rec.shape([in_shape], full_attrs(rec, attrs))
    g = Graph([Node(0, [], "input", list(in_shape)), Node(1, [0], OpKind(op, **attrs), list(out))])
    params = {}
    if rec.params:
        params = {"weight": f32(rng.standard_normal((4, 4 // attrs.get("groups", 1)) + (attrs["kernel_size"],) * d)),
                  "bias": f32(rng.standard_normal(4))}
    p = Payload({1: params}) if params else Payload()
    model = to_onnx(g, p, dtype="float32")
    x = f32(rng.standard_normal((2,) + in_shape))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    got = sess.run(None, {name: x.astype(np.float32)})[0]
    want = graph.denote(g, p, x, "float64")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
