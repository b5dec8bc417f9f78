"""The small ONNX ops composed from IR ops (graph/importers/onnx_ops_compose.py) on the
values the node suite does not feed them: NaN, infinities, signed zeros and ties, against
onnx's reference evaluator in float64 (NaN where it gives NaN), in float64 and binary32;
Hardmax's ties and CumProd's exclusive/reverse scans in the rational context (exact)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from scalarlab import graph
from scalarlab.graph.importers.onnx import from_onnx

SPECIAL = np.array([[np.nan, np.inf, -np.inf, 0.0, -0.0, 0.3],
                    [-0.5, 0.5, 1.0, -1.0, 2.5, -7.25]])


def _model(op, shape, inits=(), **attrs):
    ins = ["x"] + [n for n, _ in inits]
    node = helper.make_node(op, ins, ["y"], **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.DOUBLE,
                                                                      list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)],
                          initializer=[helper.make_tensor(n, TensorProto.INT64, [], [v])
                                       for n, v in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 24)])


CASES = [("Sign", {}), ("Shrink", {"lambd": 0.5, "bias": 0.25}), ("Shrink", {}),
         ("ThresholdedRelu", {"alpha": 0.25}), ("Celu", {"alpha": 2.0}),
         ("Swish", {"alpha": 0.5}), ("Hardmax", {"axis": 1})]


@pytest.mark.parametrize("op,attrs", CASES, ids=lambda v: str(v))
def test_special_values_follow_onnx(op, attrs):
    model = _model(op, SPECIAL.shape, **attrs)
    if op == "Hardmax":
        x = np.array([[1.0, 3.0, 3.0, -1.0, 0.0, 3.0], [-0.0, 0.0, -2.0, 0.0, -1.0, -0.5]])
    else:
        x = SPECIAL
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    g, p = from_onnx(model)
    for ctx in ("float64", "binary32"):
        got = np.asarray(graph.denote(g, p, x, ctx), np.float64)
        if ctx == "binary32":
            want = np.asarray(np.float32(want), np.float64) if op in ("Sign", "Hardmax") \
                else want
        ok = np.isnan(got) == np.isnan(want)
        assert ok.all(), (op, ctx, got, want)
        close = np.isclose(got, want, rtol=1e-6 if ctx == "binary32" else 1e-15, atol=0)
        assert (close | np.isnan(want)).all(), (op, ctx, got, want)
    if op == "Sign":          # Sign(NaN) = NaN, not 0; Sign(-0) = 0
        assert np.isnan(got[0, 0]) and got[0, 4] == 0


def test_cumprod_scans_are_exact_in_rational():
    x = np.array([[0.5, 3.0, -2.0, 0.75], [1.5, -0.25, 4.0, 2.0]])
    for excl in (0, 1):
        for rev in (0, 1):
            model = _model("CumProd", x.shape, inits=[("axis", 1)], exclusive=excl,
                           reverse=rev)
            want = ReferenceEvaluator(model).run(None, {"x": x})[0]
            g, p = from_onnx(model)
            got = graph.denote(g, p, x, "rational")
            assert [[float(v) for v in row] for row in got] == want.tolist(), (excl, rev)


@pytest.mark.parametrize("opset", [18, 21])
@pytest.mark.parametrize("batch", ["N", 2])
def test_group_normalization_per_group_and_per_channel_scales(opset, batch):
    """Opset 18 gives one scale/bias per group, 21 one per channel; a symbolic batch axis
    imports per example (the channel axis is then the example's first)."""
    from onnx import numpy_helper
    rng = np.random.default_rng(3)
    k = 2 if opset == 18 else 6
    scale, bias = rng.standard_normal(k), rng.standard_normal(k)
    # opset 21's stash_type says the statistics' precision: double here, so the reference
    # stays in float64 (the IR leaves precision to the context, as for LayerNormalization)
    extra = {"stash_type": TensorProto.DOUBLE} if opset >= 21 else {}
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2,
                            epsilon=1e-3, **extra)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.DOUBLE, [batch, 6, 3, 2])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)],
        initializer=[numpy_helper.from_array(scale, "s"), numpy_helper.from_array(bias, "b")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    x = rng.standard_normal((2, 6, 3, 2))
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    gr, p = from_onnx(model)
    assert gr.nodes[0].out_shape == ((6, 3, 2) if batch == "N" else (2, 6, 3, 2))
    got = np.asarray(graph.denote(gr, p, x, "float64"))
    assert np.abs(got - want).max() <= 1e-14 * np.abs(want).max()
