"""ONNX export of the ops of real networks (activations, shape ops, reductions, global
pools): one entry per op in :data:`EXPORTERS`, merged into the exporter's table
(:mod:`graph.exporters.onnx`) and called with the exporter, the node and its filled
attributes.

Batched values carry one leading ONNX batch axis (``off`` = 1): per-example axes are
shifted by it, and attribute tensors (slice starts, pads, repeats) get a neutral entry
for it.  Numeric attributes (decimal strings included) are written as ONNX floats.
"""
from __future__ import annotations

import numpy as np

from scalarlab.scalars.base import to_fraction

from ..axes import norm_axes, norm_axis
from ..importers.interchange import Unsupported
from ..ops_shape import _gather_idx

_ONNX_REDUCE = {"reduce_max": "ReduceMax", "reduce_min": "ReduceMin",
                "reduce_prod": "ReduceProd", "reduce_sum_square": "ReduceSumSquare"}


def _f(v) -> float:
    return float(to_fraction(v) if isinstance(v, str) else v)


def _lst(v) -> list:
    return list(v) if isinstance(v, (list, tuple)) else [v]


def _in_shape(ex, n):
    return ex.g.nodes[n.parents[0]].out_shape


def _clip(ex, n, attrs, off, r_in, x, base):
    lo = ex.init("min", _f(attrs["min"])) if attrs["min"] is not None else ""
    hi = ex.init("max", _f(attrs["max"])) if attrs["max"] is not None else ""
    return ex.emit("Clip", [x, lo, hi], base)


def _activation(onnx_op, *numeric, **fixed):
    """One ONNX op of ``x``: the IR attributes named in ``numeric`` as ONNX floats, plus
    ``fixed`` attributes."""
    def f(ex, n, attrs, off, r_in, x, base):
        return ex.emit(onnx_op, [x], base, **{k: _f(attrs[k]) for k in numeric}, **fixed)
    return f


def _silu(ex, n, attrs, off, r_in, x, base):
    return ex.emit("Mul", [x, ex.emit("Sigmoid", [x], "sig")], base)


def _slice(ex, n, attrs, off, r_in, x, base):
    # the IR slice has ONNX's semantics (negative indices, clamping): same values
    k = len(attrs["starts"]) if isinstance(attrs["starts"], (list, tuple)) else 1
    axes = list(range(k)) if attrs["axes"] is None else _lst(attrs["axes"])
    axes = [norm_axis("slice", a, r_in, "axes") + off for a in axes]
    steps = [1] * k if attrs["steps"] is None else _lst(attrs["steps"])
    return ex.emit("Slice", [x, ex.ints("starts", _lst(attrs["starts"])),
                             ex.ints("ends", _lst(attrs["ends"])), ex.ints("axes", axes),
                             ex.ints("steps", steps)], base)


def _squeeze(ex, n, attrs, off, r_in, x, base):
    axes = ([i for i, d in enumerate(_in_shape(ex, n)) if d == 1] if attrs["axes"] is None
            else norm_axes("squeeze", attrs["axes"], r_in))
    if not axes:
        return ex.emit("Identity", [x], base)
    return ex.emit("Squeeze", [x, ex.ints("axes", [a + off for a in axes])], base)


def _unsqueeze(ex, n, attrs, off, r_in, x, base):
    axes = norm_axes("unsqueeze", attrs["axes"], len(n.out_shape))
    return ex.emit("Unsqueeze", [x, ex.ints("axes", [a + off for a in axes])], base)


def _gather(ex, n, attrs, off, r_in, x, base):
    a, idx, ishape = _gather_idx("gather", _in_shape(ex, n), attrs)
    ind = ex.init("indices", idx.reshape(ishape), np.int64)
    return ex.emit("Gather", [x, ind], base, axis=a + off)


def _take(ex, n, attrs, off, r_in, x, base):
    """Gather with run-time indices: the IR's index values are reals holding integers,
    cast to int64 (exact) for ONNX."""
    data, idx = n.parents
    a = norm_axis("take", attrs["axis"], r_in)
    ind = ex.emit("Cast", [ex.name[idx]], "ids", to=7)
    if not (ex.batched[data] and ex.batched[idx]):
        return ex.emit("Gather", [x, ind], base, axis=a + (1 if ex.batched[data] else 0))
    # each example its own indices: GatherND with batch_dims=1 over the taken axis moved
    # next to the batch axis, then the result's axes put back in the IR's order
    k = len(ex.g.nodes[idx].out_shape)
    q = r_in - a - 1
    front = [0, a + 1] + [i for i in range(1, r_in + 1) if i != a + 1]
    xt = ex.emit("Transpose", [x], "take_front", perm=front)
    ind = ex.emit("Unsqueeze", [ind, ex.ints("axes", [k + 1])], "ids_nd")
    g = ex.emit("GatherND", [xt, ind], "take_nd", batch_dims=1)
    back = [0] + list(range(k + 1, k + 1 + a)) + list(range(1, k + 1)) + \
        list(range(k + 1 + a, k + 1 + a + q))
    return ex.emit("Transpose", [g], base, perm=back)


def _pad(ex, n, attrs, off, r_in, x, base):
    r = r_in
    axes = list(range(r)) if attrs["axes"] is None else [norm_axis("pad", a, r, "axes")
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


def _expand(ex, n, attrs, off, r_in, x, base):
    out = list(n.out_shape)
    xa = ex.expand_rank(n.parents[0], len(out))
    return ex.emit("Expand", [xa, ex.ints("shape", ([1] if off else []) + out)], base)


def _tile(ex, n, attrs, off, r_in, x, base):
    return ex.emit("Tile", [x, ex.ints("repeats", ([1] * off) + [int(t) for t in attrs["repeats"]])],
                   base)


def _where(ex, n, attrs, off, r_in, x, base):
    cond = ex.init("cond", np.asarray(attrs["condition"], dtype=bool), bool)
    r = len(n.out_shape)
    parts = [ex.expand_rank(p, r) for p in n.parents]     # per-example axes aligned
    return ex.emit("Where", [cond] + parts, base)


def _reduce(ex, n, attrs, off, r_in, x, base):
    op = n.kind.op
    axes = norm_axes(op, attrs["axis"], r_in)
    if not axes:
        return ex.emit("Identity", [x], base)
    return ex.emit(_ONNX_REDUCE[op], [x, ex.ints("axes", [a + off for a in axes])], base,
                   keepdims=int(attrs["keepdims"]))


def _global_pool(onnx_op):
    def f(ex, n, attrs, off, r_in, x, base):
        if not off:
            raise Unsupported(f"{n.kind.op} of a constant-only value (ONNX pooling needs the "
                              f"batch axis)")
        return ex.emit(onnx_op, [x], base)
    return f


#: IR op -> ``f(ex, n, attrs, off, r_in, x, base) -> ONNX output name``
EXPORTERS = {
    "clip": _clip,
    "leaky_relu": _activation("LeakyRelu", "alpha"),
    "hardsigmoid": _activation("HardSigmoid", "alpha", "beta"),
    "hardswish": _activation("HardSwish"),
    "elu": _activation("Elu", "alpha"),
    "selu": _activation("Selu", "alpha", "gamma"),
    "silu": _silu,
    "mish": _activation("Mish"),
    "gelu_tanh": _activation("Gelu", approximate="tanh"),
    "slice": _slice, "squeeze": _squeeze, "unsqueeze": _unsqueeze, "gather": _gather,
    "take": _take, "pad": _pad, "expand": _expand, "tile": _tile, "where": _where,
    **{op: _reduce for op in _ONNX_REDUCE},
    "global_avg_pool": _global_pool("GlobalAveragePool"),
    "global_max_pool": _global_pool("GlobalMaxPool"),
}
NETWORK_OPS = tuple(EXPORTERS)
