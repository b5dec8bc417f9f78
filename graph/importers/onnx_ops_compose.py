"""ONNX -> IR mappings of small ops written as their ONNX definitions in IR ops: Celu,
ThresholdedRelu, Shrink, Sign, Swish, Hardmax, LpNormalization, RMSNormalization,
MeanVarianceNormalization, LRN and CumProd.  Each converter is ``f(conv, node, ins, A) -> list
of outputs``, as in :mod:`.onnx_ops`; an op is claimed only while every IR op of
:data:`NEEDS` exists.

Each composition performs the operations of the ONNX definition in its order (so a
context rounds what the op computes), and picks values with ``select`` rather than
multiplying by a 0/1 mask, so a NaN or infinity of an unselected branch never leaks
(Sign of NaN is NaN, Shrink of +inf is +inf).  Constants are the attributes' float32
values.
"""
from __future__ import annotations

import numpy as np

from ..optable import OPS
from .interchange import PendingConst, Unsupported
from .onnx_ops import f32


def _c(conv, v, name):
    return conv.materialize(PendingConst(np.asarray(v, dtype=np.float64), name))


def _ap(conv, op, *args, **attrs):
    return conv.b.apply(op, list(args), **attrs)


def _celu(conv, node, ins, A):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    x = conv.t(ins[0])
    alpha = _c(conv, f32(A.get("alpha", 1.0)), "alpha")
    zero, one = _c(conv, 0.0, "zero"), _c(conv, 1.0, "one")
    e = _ap(conv, "sub", _ap(conv, "exp", _ap(conv, "div", x, alpha)), one)
    return [_ap(conv, "add", _ap(conv, "relu", x),
                _ap(conv, "min", zero, _ap(conv, "mul", alpha, e)))]


def _thresholded_relu(conv, node, ins, A):
    """x where x > alpha, else 0."""
    x = conv.t(ins[0])
    alpha = _c(conv, f32(A.get("alpha", 1.0)), "alpha")
    return [_ap(conv, "select", _ap(conv, "gt", x, alpha), x, _c(conv, 0.0, "zero"))]


def _shrink(conv, node, ins, A):
    """x + bias where x < -lambd, x - bias where x > lambd, else 0."""
    x = conv.t(ins[0])
    lambd, bias = f32(A.get("lambd", 0.5)), f32(A.get("bias", 0.0))
    b = _c(conv, bias, "bias")
    hi = _ap(conv, "select", _ap(conv, "gt", x, _c(conv, lambd, "lambd")),
             _ap(conv, "sub", x, b), _c(conv, 0.0, "zero"))
    return [_ap(conv, "select", _ap(conv, "lt", x, _c(conv, -lambd, "neg_lambd")),
                _ap(conv, "add", x, b), hi)]


def _sign(conv, node, ins, A):
    """(x > 0) - (x < 0), and NaN where x is NaN (both comparisons are false there)."""
    x = conv.t(ins[0])
    zero = _c(conv, 0.0, "zero")
    s = _ap(conv, "sub", _ap(conv, "gt", x, zero), _ap(conv, "lt", x, zero))
    return [_ap(conv, "select", _ap(conv, "isnan", x), x, s)]


def _swish(conv, node, ins, A):
    """x * sigmoid(alpha * x); alpha = 1 is the IR's silu."""
    x = conv.t(ins[0])
    alpha = f32(A.get("alpha", 1.0))
    if alpha == 1.0 and "silu" in OPS:
        return [_ap(conv, "silu", x)]
    return [_ap(conv, "mul", x, _ap(conv, "sigmoid",
                                    _ap(conv, "mul", _c(conv, alpha, "alpha"), x)))]


def _axis_const(conv, x, a, values, name):
    """``values`` (length of per-example axis ``a``) shaped to broadcast along ``a``."""
    r = len(conv.b.shape(x.id))
    return _c(conv, np.asarray(values, np.float64).reshape([-1] + [1] * (r - a - 1)), name)


def _hardmax(conv, node, ins, A):
    """1 at the first largest entry along axis, 0 elsewhere: argmax == position."""
    x = conv.t(ins[0])
    r = conv.b.rank(x)
    axis = int(A.get("axis", -1 if conv.opset >= 13 else 1))
    if conv.opset < 13 and axis % r != r - 1:
        raise Unsupported(f"Hardmax before opset 13 with axis={axis} (it flattens the "
                          f"axes from axis on)")
    a = conv.b.axis(axis, x)
    n = conv.b.shape(x.id)[a]
    i = _ap(conv, "argmax", x, axis=a, keepdims=True)
    return [_ap(conv, "eq", i, _axis_const(conv, x, a, np.arange(n), "positions"))]


def _lp_norm(conv, node, ins, A):
    """x / ||x||_p along axis (p = 1: sum of |x|; p = 2: sqrt of the sum of squares), 0
    where the norm is 0."""
    x = conv.t(ins[0])
    a = conv.b.axis(int(A.get("axis", -1)), x)
    p = int(A.get("p", 2))
    if p == 2:
        n = _ap(conv, "sqrt", _ap(conv, "reduce_sum_square", x, axis=[a], keepdims=True))
    elif p == 1:
        n = conv.b.reduce("reduce_sum", _ap(conv, "abs", x), [a + x.nb], True)
    else:
        raise Unsupported(f"p={p} (1 and 2 are defined)")
    # a zero norm gives 0, as ONNX's reference does (x / 0 would be 0/0 = NaN there)
    zero = _c(conv, 0.0, "zero")
    return [_ap(conv, "select", _ap(conv, "eq", n, zero), zero, _ap(conv, "div", x, n))]


def _axes_from(conv, x, axis):
    """Per-example axes ``axis .. rank - 1`` (negative ``axis`` counts from the end)."""
    r = conv.b.rank(x)
    axis = axis + r if axis < 0 else axis
    return [conv.b.axis(k, x) for k in range(axis, r)]


def _rms_norm(conv, node, ins, A):
    """x / sqrt(mean(x^2) + epsilon) * scale over the axes from ``axis`` on."""
    x = conv.t(ins[0])
    per = [p + x.nb for p in _axes_from(conv, x, int(A.get("axis", -1)))]
    ms = conv.b.reduce("reduce_mean", _ap(conv, "mul", x, x), per, True)
    eps = _c(conv, f32(A.get("epsilon", 1e-5)), "epsilon")
    y = _ap(conv, "div", x, _ap(conv, "sqrt", _ap(conv, "add", ms, eps)))
    return [conv.binary("mul", y, ins[1])]


def _mvn(conv, node, ins, A):
    """ONNX's function body: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9)."""
    x = conv.t(ins[0])
    per = sorted(conv.b.axis(int(a), x) + x.nb for a in A.get("axes", [0, 2, 3]))
    m = conv.b.reduce("reduce_mean", x, per, True)
    m2 = conv.b.reduce("reduce_mean", _ap(conv, "mul", x, x), per, True)
    std = _ap(conv, "sqrt", _ap(conv, "sub", m2, _ap(conv, "mul", m, m)))
    return [_ap(conv, "div", _ap(conv, "sub", x, m),
                _ap(conv, "add", std, _c(conv, 1e-9, "epsilon")))]


def _lrn(conv, node, ins, A):
    """x / (bias + alpha / size * S)^beta, S the sum of squares over the ``size`` channels
    around each one (zeros past the ends), added in channel order."""
    x = conv.t(ins[0])
    pc = conv.b.axis(1, x, "the channel axis")
    size = int(A["size"])
    r = len(conv.b.shape(x.id))
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    pads = [0] * (2 * r)
    pads[pc], pads[r + pc] = lo, hi
    sq = _ap(conv, "pad", _ap(conv, "mul", x, x), pads=pads)
    C = conv.b.shape(x.id)[pc]
    ssum = None
    for k in range(size):
        t = _ap(conv, "slice", sq, starts=[k], ends=[k + C], axes=[pc])
        ssum = t if ssum is None else _ap(conv, "add", ssum, t)
    # alpha / size is an operation of the definition: the context rounds it
    coef = _ap(conv, "div", _c(conv, f32(A.get("alpha", 1e-4)), "alpha"), _c(conv, size, "size"))
    base = _ap(conv, "add", _c(conv, f32(A.get("bias", 1.0)), "bias"),
               _ap(conv, "mul", coef, ssum))
    return [_ap(conv, "div", x, _ap(conv, "pow", base, _c(conv, f32(A.get("beta", 0.75)),
                                                            "beta")))]


def _cumprod(conv, node, ins, A):
    from .onnx_ops_spatial import cumulative
    return cumulative(conv, ins, A, "mul", 1.0)


CONVERTERS = {
    "Celu": _celu, "ThresholdedRelu": _thresholded_relu, "Shrink": _shrink, "Sign": _sign,
    "Swish": _swish, "Hardmax": _hardmax, "LpNormalization": _lp_norm,
    "RMSNormalization": _rms_norm, "MeanVarianceNormalization": _mvn, "CumProd": _cumprod,
    "LRN": _lrn,
}

#: the IR ops each converter needs
NEEDS = {
    "Celu": ("relu", "min", "mul", "sub", "exp", "div", "add"),
    "ThresholdedRelu": ("select", "gt"), "Shrink": ("select", "gt", "lt", "add", "sub"),
    "Sign": ("select", "isnan", "gt", "lt", "sub"), "Swish": ("mul", "sigmoid"),
    "Hardmax": ("argmax", "eq"), "LpNormalization": ("reduce_sum_square", "sqrt", "abs",
                                                      "reduce_sum", "div", "select", "eq"),
    "RMSNormalization": ("mul", "reduce_mean", "add", "sqrt", "div"),
    "MeanVarianceNormalization": ("reduce_mean", "mul", "sub", "sqrt", "add", "div"),
    "CumProd": ("mul", "slice", "concat"),
    "LRN": ("mul", "pad", "slice", "add", "pow", "div"),
}


def available() -> dict:
    """The converters whose IR ops are all in the op table now."""
    return {op: f for op, f in CONVERTERS.items() if all(n in OPS for n in NEEDS[op])}
