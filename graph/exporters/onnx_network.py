"""ONNX export of the ops of real networks (activations, shape ops, reductions, global
pools): one function per op family, called by the exporter's dispatch
(:mod:`graph.exporters.onnx`) with the exporter, the node and its filled attributes.

Batched values carry one leading ONNX batch axis (``off`` = 1): per-example axes are
shifted by it, and attribute tensors (slice starts, pads, repeats) get a neutral entry
for it.  Numeric attributes (decimal strings included) are written as ONNX floats.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..axes import norm_axes, norm_axis
from ..importers.interchange import Unsupported
from ..ops_shape import _gather_idx

NETWORK_OPS = ("clip", "leaky_relu", "hardsigmoid", "hardswish", "elu", "selu", "silu",
               "mish", "gelu_tanh", "slice", "squeeze", "unsqueeze", "gather", "pad",
               "expand", "tile", "where", "reduce_max", "reduce_min", "reduce_prod",
               "reduce_sum_square", "global_avg_pool", "global_max_pool")

_ONNX_REDUCE = {"reduce_max": "ReduceMax", "reduce_min": "ReduceMin",
                "reduce_prod": "ReduceProd", "reduce_sum_square": "ReduceSumSquare"}


def _f(v) -> float:
    return float(Fraction(v.strip()) if isinstance(v, str) else v)


def export_node(ex, n, attrs, off: int, r_in: int, x: str, base: str) -> str:
    """The ONNX output name of IR node ``n`` (one of :data:`NETWORK_OPS`)."""
    op = n.kind.op
    ps = list(n.parents)
    in_shape = ex.g.nodes[ps[0]].out_shape
    if op == "clip":
        lo = ex.init("min", _f(attrs["min"])) if attrs["min"] is not None else ""
        hi = ex.init("max", _f(attrs["max"])) if attrs["max"] is not None else ""
        return ex.emit("Clip", [x, lo, hi], base)
    if op == "leaky_relu":
        return ex.emit("LeakyRelu", [x], base, alpha=_f(attrs["alpha"]))
    if op == "hardsigmoid":
        return ex.emit("HardSigmoid", [x], base, alpha=_f(attrs["alpha"]), beta=_f(attrs["beta"]))
    if op == "hardswish":
        return ex.emit("HardSwish", [x], base)
    if op == "elu":
        return ex.emit("Elu", [x], base, alpha=_f(attrs["alpha"]))
    if op == "selu":
        return ex.emit("Selu", [x], base, alpha=_f(attrs["alpha"]), gamma=_f(attrs["gamma"]))
    if op == "silu":
        return ex.emit("Mul", [x, ex.emit("Sigmoid", [x], "sig")], base)
    if op == "mish":
        return ex.emit("Mish", [x], base)
    if op == "gelu_tanh":
        return ex.emit("Gelu", [x], base, approximate="tanh")
    if op == "slice":
        # the IR slice has ONNX's semantics (negative indices, clamping): same values
        k = len(attrs["starts"]) if isinstance(attrs["starts"], (list, tuple)) else 1
        lst = (lambda v: list(v) if isinstance(v, (list, tuple)) else [v])
        axes = list(range(k)) if attrs["axes"] is None else lst(attrs["axes"])
        axes = [norm_axis(op, a, r_in, "axes") + off for a in axes]
        steps = [1] * k if attrs["steps"] is None else lst(attrs["steps"])
        return ex.emit("Slice", [x, ex.ints("starts", lst(attrs["starts"])),
                                 ex.ints("ends", lst(attrs["ends"])), ex.ints("axes", axes),
                                 ex.ints("steps", steps)], base)
    if op == "squeeze":
        axes = ([i for i, d in enumerate(in_shape) if d == 1] if attrs["axes"] is None
                else norm_axes(op, attrs["axes"], r_in))
        if not axes:
            return ex.emit("Identity", [x], base)
        return ex.emit("Squeeze", [x, ex.ints("axes", [a + off for a in axes])], base)
    if op == "unsqueeze":
        r = len(n.out_shape)
        axes = norm_axes(op, attrs["axes"], r)
        return ex.emit("Unsqueeze", [x, ex.ints("axes", [a + off for a in axes])], base)
    if op == "gather":
        a, idx, ishape = _gather_idx(op, in_shape, attrs)
        ind = ex.init("indices", idx.reshape(ishape), np.int64)
        return ex.emit("Gather", [x, ind], base, axis=a + off)
    if op == "pad":
        r = r_in
        axes = list(range(r)) if attrs["axes"] is None else [norm_axis(op, a, r, "axes")
                                                               for a in attrs["axes"]]
        k = len(axes)
        begins, ends = [0] * (r + off), [0] * (r + off)
        for i, a in enumerate(axes):
            begins[a + off] = int(attrs["pads"][i])
            ends[a + off] = int(attrs["pads"][i + k])
        inputs = [x, ex.ints("pads", begins + ends)]
        if attrs["mode"] == "constant":
            inputs.append(ex.init("value", _f(attrs["value"])))
        return ex.emit("Pad", inputs, base, mode=attrs["mode"])
    if op == "expand":
        out = list(n.out_shape)
        xa = ex.expand_rank(ps[0], len(out))
        return ex.emit("Expand", [xa, ex.ints("shape", ([1] if off else []) + out)], base)
    if op == "tile":
        return ex.emit("Tile", [x, ex.ints("repeats", ([1] * off) + [int(t) for t in attrs["repeats"]])],
                       base)
    if op == "where":
        cond = ex.init("cond", np.asarray(attrs["condition"], dtype=bool), bool)
        r = len(n.out_shape)
        parts = [ex.expand_rank(p, r) for p in ps]     # per-example axes aligned
        return ex.emit("Where", [cond] + parts, base)
    if op in _ONNX_REDUCE:
        axes = norm_axes(op, attrs["axis"], r_in)
        if not axes:
            return ex.emit("Identity", [x], base)
        return ex.emit(_ONNX_REDUCE[op], [x, ex.ints("axes", [a + off for a in axes])], base,
                       keepdims=int(attrs["keepdims"]))
    if op in ("global_avg_pool", "global_max_pool"):
        if not off:
            raise Unsupported(f"{op} of a constant-only value (ONNX pooling needs the batch axis)")
        return ex.emit("GlobalAveragePool" if op == "global_avg_pool" else "GlobalMaxPool",
                       [x], base)
    raise Unsupported(f"no ONNX mapping for op {op!r}")
