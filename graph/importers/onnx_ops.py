"""ONNX -> IR mappings of the network ops: activations, shape ops, reductions, global
pools, variadic elementwise ops, Split, and ArgMax/ArgMin/TopK (exact index outputs).  Each converter is
``f(conv, node, ins, A) -> list of outputs`` (``conv`` is the importer's converter, ``ins``
the input values -- :class:`Batched` tensors or :class:`PendingConst` constants -- and
``A`` the node's attributes).

An ONNX op is claimed only while the IR op it maps to is in the op table (the table is
read at import), so the claim list never runs ahead of the IR.

Axes: every ONNX axis indexes the source tensor, batch axes included; the converters
translate to per-example axes and refuse an operation over a batch axis with the reason
(a Slice/Pad/Tile that leaves the batch axes alone is fine).  Attribute floats are float32
in ONNX; their float32 values are passed to the IR exactly.
"""
from __future__ import annotations

import numpy as np

from ..optable import OPS
from ..ops_shape import split_slices
from .interchange import PendingConst, Unsupported
from .onnx_fold import is_symbolic

# ONNX op -> IR op for plain unary maps (claimed when the IR op exists)
UNARY = {"Erf": "erf", "HardSwish": "hardswish", "Mish": "mish", "Tan": "tan", "Asin": "asin",
         "Acos": "acos", "Atan": "atan", "Sinh": "sinh", "Cosh": "cosh", "Asinh": "asinh",
         "Acosh": "acosh", "Atanh": "atanh", "Ceil": "ceil", "Floor": "floor",
         "Round": "nearbyint", "Not": "not", "IsNaN": "isnan"}

#: ONNX's float32 defaults of Selu (its schema's alpha and gamma)
_SELU = (1.67326319217681884765625, 1.05070102214813232421875)


def f32(v) -> float:
    """An ONNX float attribute (float32) as the exact Python float of its value."""
    return float(np.float32(v))


def const_value(v, what):
    """A constant operand's array; Unsupported for a run-time tensor or a batch extent."""
    if not isinstance(v, PendingConst):
        raise Unsupported(f"{what} must be a constant (an initializer, a Constant or shape "
                          f"arithmetic the importer folds), not a run-time tensor")
    if is_symbolic(v.value):
        raise Unsupported(f"{what} {v.value.tolist()} holds a batch extent (the IR works per "
                          f"example)")
    return np.asarray(v.value)


def const_ints(v, what):
    return None if v is None else [int(t) for t in const_value(v, what).reshape(-1)]


def opt_input(ins, k):
    return ins[k] if len(ins) > k else None


def _unary(op):
    def f(conv, node, ins, A):
        return [conv.b.apply(UNARY[op], [conv.t(ins[0])])]
    return f


def _act(irop, **defaults):
    def f(conv, node, ins, A):
        attrs = {k: f32(A.get(k, d)) for k, d in defaults.items()}
        return [conv.b.apply(irop, [conv.t(ins[0])], **attrs)]
    return f


def _selu(conv, node, ins, A):
    return [conv.b.apply("selu", [conv.t(ins[0])], alpha=f32(A.get("alpha", _SELU[0])),
                         gamma=f32(A.get("gamma", _SELU[1])))]


def _gelu(conv, node, ins, A):
    approx = A.get("approximate", "none")
    if approx == "tanh":
        return [conv.b.apply("gelu_tanh", [conv.t(ins[0])])]
    if approx != "none":
        raise Unsupported(f"Gelu(approximate={approx!r})")
    return [conv.b.apply("gelu", [conv.t(ins[0])])]


def _clip(conv, node, ins, A):
    x = conv.t(ins[0])
    if conv.opset < 11:
        lo, hi = A.get("min"), A.get("max")
        lo = None if lo is None else f32(lo)
        hi = None if hi is None else f32(hi)
    else:
        b = [opt_input(ins, 1), opt_input(ins, 2)]
        lo, hi = [None if v is None else float(const_value(v, w).reshape(-1)[0])
                  for v, w in zip(b, ("min", "max"))]
    if lo is not None and hi is not None and lo > hi:
        # ONNX: every value becomes max; the IR's clip refuses min > max
        raise Unsupported(f"min {lo} > max {hi}")
    if lo is None and hi is None:
        return [x]
    return [conv.b.apply("clip", [x], min=lo, max=hi)]


def _variadic(irop):
    def f(conv, node, ins, A):
        vals = [v for v in ins if v is not None]
        if not vals:
            raise Unsupported("no inputs")
        acc = conv.t(vals[0]) if len(vals) == 1 else conv.binary(irop if irop != "mean" else "add",
                                                                 vals[0], vals[1])
        for v in vals[2:]:
            acc = conv.binary(irop if irop != "mean" else "add", acc, v)
        if irop == "mean" and len(vals) > 1:
            n = conv.materialize(PendingConst(np.float64(len(vals)), "count"))
            acc = conv.b.apply("div", [acc, n])
        return [acc]
    return f


def _pow(conv, node, ins, A):
    """x^e.  A constant scalar exponent whose power is one correctly rounded IR operation
    maps to it (2: x*x, 1/2: sqrt, -1: 1/x, 1: x); other exponents need the IR's pow."""
    b = ins[1]
    if isinstance(b, PendingConst) and not is_symbolic(b.value) and np.asarray(b.value).size == 1:
        e = float(np.asarray(b.value).reshape(-1)[0])
        x = conv.t(ins[0])
        if e == 1:
            return [x]
        if e == 2:
            return [conv.b.apply("mul", [x, x])]
        if e == 0.5:
            return [conv.b.apply("sqrt", [x])]
        if e == -1:
            one = conv.materialize(PendingConst(np.float64(1.0), "one"))
            return [conv.b.apply("div", [one, x])]
    if "pow" not in OPS:
        raise Unsupported("an exponent other than a constant 2, 1/2, 1 or -1 needs the IR's "
                          "pow op")
    return [conv.binary("pow", ins[0], ins[1])]


def _prelu(conv, node, ins, A):
    """PRelu with a constant slope: leaky_relu for one slope, else relu(x) + slope*min(x, 0)
    (one rounding where it matters: x > 0 adds an exact 0, x < 0 rounds slope*x once)."""
    slope = const_value(ins[1], "slope")
    x = conv.t(ins[0])
    if slope.size == 1:
        return [conv.b.apply("leaky_relu", [x], alpha=float(slope.reshape(-1)[0]))]
    zero = conv.materialize(PendingConst(np.float64(0.0), "zero"))
    neg = conv.b.apply("min", [x, zero])
    return [conv.b.apply("add", [conv.b.apply("relu", [x]), conv.binary("mul", neg, ins[1])])]


def _softsign(conv, node, ins, A):
    """x / (1 + |x|), as ONNX defines it (two roundings)."""
    x = conv.t(ins[0])
    one = conv.materialize(PendingConst(np.float64(1.0), "one"))
    return [conv.b.apply("div", [x, conv.b.apply("add", [one, conv.b.apply("abs", [x])])])]


# ------------------------------------------------------------------------ shape ops
def _slice(conv, node, ins, A):
    x = conv.t(ins[0])
    if conv.opset < 10:
        starts, ends = list(A["starts"]), list(A["ends"])
        axes = list(A.get("axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts, ends = const_ints(ins[1], "starts"), const_ints(ins[2], "ends")
        axes = const_ints(opt_input(ins, 3), "axes") or list(range(len(starts)))
        steps = const_ints(opt_input(ins, 4), "steps") or [1] * len(starts)
    r = conv.b.rank(x)
    keep = ([], [], [], [])
    for s, e, a, st in zip(starts, ends, axes, steps):
        d = a + r if a < 0 else a
        if d < x.nb:
            if st == 1 and s == 0 and e >= 2 ** 31 - 1:
                continue                      # the whole batch axis
            raise Unsupported(f"slices batch axis {a} ([{s}:{e}:{st}]): the IR works per "
                              f"example")
        for lst, v in zip(keep, (s, e, d - x.nb, st)):
            lst.append(int(v))
    if not keep[0]:
        return [x]
    return [conv.b.apply("slice", [x], starts=keep[0], ends=keep[1], axes=keep[2],
                         steps=keep[3])]


def _axes_of(conv, ins, A, k=1):
    if conv.opset >= 13 and len(ins) > k and ins[k] is not None:
        return const_ints(ins[k], "axes")
    return [int(a) for a in A["axes"]] if "axes" in A else None


def _squeeze(conv, node, ins, A):
    x = conv.t(ins[0])
    axes = _axes_of(conv, ins, A)
    if axes is None:
        if x.nb:
            raise Unsupported("Squeeze without axes may drop a batch axis of extent 1; the "
                              "importer needs the axes")
        return [conv.b.apply("squeeze", [x])]
    return [conv.b.apply("squeeze", [x], axes=[conv.b.axis(a, x) for a in axes])]


def _unsqueeze(conv, node, ins, A):
    x = conv.t(ins[0])
    axes = _axes_of(conv, ins, A)
    r = conv.b.rank(x) + len(axes)
    per = []
    for a in axes:
        d = a + r if a < 0 else a
        if not 0 <= d < r:
            raise Unsupported(f"axes {axes} out of range for output rank {r}")
        if d < x.nb:
            raise Unsupported(f"axis {a} inserts an axis before a batch axis")
        per.append(d - x.nb)
    return [conv.b.apply("unsqueeze", [x], axes=sorted(per))]


def _gather(conv, node, ins, A):
    if not isinstance(ins[1], PendingConst):
        # run-time indices (token ids into an embedding table): the IR's take
        x, i = conv.t(ins[0]), conv.t(ins[1])
        if i.nb and x.nb:
            raise Unsupported("Gather from a batched tensor with batched run-time indices")
        a = conv.b.axis(int(A.get("axis", 0)), x)
        return [conv.b.apply("take", [x, i], axis=a)]
    x = conv.t(ins[0])
    idx = const_value(ins[1], "indices")
    if idx.dtype.kind not in "iu":
        raise Unsupported(f"indices of dtype {idx.dtype}")
    a = conv.b.axis(int(A.get("axis", 0)), x)
    return [conv.b.apply("gather", [x], indices=idx.astype(np.int64).tolist(), axis=a)]


def _pad(conv, node, ins, A):
    x = conv.t(ins[0])
    mode = A.get("mode", "constant")
    r = conv.b.rank(x)
    if conv.opset < 11:
        pads, value, axes = list(A["pads"]), f32(A.get("value", 0.0)), None
    else:
        pads = const_ints(ins[1], "pads")
        cv = opt_input(ins, 2)
        value = 0.0 if cv is None else float(const_value(cv, "constant_value").reshape(-1)[0])
        axes = const_ints(opt_input(ins, 3), "axes")
    axes = [a + r if a < 0 else a for a in (axes or range(r))]
    k = len(axes)
    if len(pads) != 2 * k:
        raise Unsupported(f"pads {pads} for {k} axes")
    begins, ends = [0] * (r - x.nb), [0] * (r - x.nb)
    for j, d in enumerate(axes):
        if d < x.nb:
            if pads[j] or pads[j + k]:
                raise Unsupported(f"pads batch axis {d} ({pads[j]}, {pads[j + k]})")
            continue
        begins[d - x.nb], ends[d - x.nb] = pads[j], pads[j + k]
    attrs = dict(pads=begins + ends, mode=mode)
    if mode == "constant":
        attrs["value"] = value
    return [conv.b.apply("pad", [x], **attrs)]


def _tile(conv, node, ins, A):
    x = conv.t(ins[0])
    reps = const_ints(ins[1], "repeats")
    if any(t != 1 for t in reps[:x.nb]):
        raise Unsupported(f"repeats {reps} tile along a batch axis")
    return [conv.b.apply("tile", [x], repeats=reps[x.nb:])]


def _compare(irop):
    def f(conv, node, ins, A):
        return [conv.binary(irop, ins[0], ins[1])]
    return f


def _is_inf(conv, node, ins, A):
    x = conv.t(ins[0])
    neg, pos = int(A.get("detect_negative", 1)), int(A.get("detect_positive", 1))
    y = conv.b.apply("isinf", [x])
    if neg and pos:
        return [y]
    zero = conv.materialize(PendingConst(np.float64(0.0), "zero"))
    if not (neg or pos):
        return [conv.b.apply("mul", [y, zero])]
    side = conv.b.apply("gt" if pos else "lt", [x, zero])      # one sign: isinf and x >< 0
    return [conv.b.apply("and", [y, side])]


def _mod(conv, node, ins, A):
    if not int(A.get("fmod", 0)):
        raise Unsupported("Mod with fmod=0 (integer modulus; the IR's fmod is C's fmod)")
    return [conv.binary("fmod", ins[0], ins[1])]


def _where(conv, node, ins, A):
    if not isinstance(ins[0], PendingConst) and "select" in OPS:
        # a run-time condition (Less, Equal, ... of activations): select, both branches
        # evaluated, the unselected one's NaN never reaching the value
        c, a = conv.aligned(ins[0], ins[1])
        c, b = conv.aligned(c, ins[2])
        return [conv.b.apply("select", [c, a, b])]
    cond = const_value(ins[0], "condition").astype(bool)
    a, b = conv.aligned(ins[1], ins[2])
    nb = max(a.nb, b.nb)
    per = max(len(conv.b.shape(a.id)), len(conv.b.shape(b.id)))
    if nb and cond.ndim > per:
        extra = cond.ndim - per
        if any(d != 1 for d in cond.shape[:extra]):
            raise Unsupported(f"condition of shape {list(cond.shape)} varies along a batch axis")
        cond = cond.reshape(cond.shape[extra:])
    return [conv.b.apply("where", [a, b], condition=cond.tolist())]


def _split(conv, node, ins, A):
    x = conv.t(ins[0])
    outs = [o for o in node.output]
    axis = conv.b.axis(int(A.get("axis", 0)), x)
    split = const_ints(opt_input(ins, 1), "split") if conv.opset >= 13 else \
        (list(A["split"]) if "split" in A else None)
    num = A.get("num_outputs")
    if split is None and num is None:
        num = len(outs)
    try:
        parts = split_slices(conv.b.shape(x.id), axis, split, num)
    except Exception as exc:
        raise Unsupported(str(exc)) from None
    if len(parts) != len(outs):
        raise Unsupported(f"{len(parts)} parts for {len(outs)} outputs")
    return [conv.b.apply("slice", [x], **p) for p in parts]


# ------------------------------------------------------------------------ reductions
def _reduce(irop, post=None, pre=None):
    def f(conv, node, ins, A):
        x = conv.t(ins[0])
        if conv.opset >= 18 and len(ins) > 1 and ins[1] is not None:
            axes = const_ints(ins[1], "axes")
        else:
            axes = [int(a) for a in A.get("axes", [])]
        keep = bool(int(A.get("keepdims", 1)))
        if not axes and int(A.get("noop_with_empty_axes", 0)):
            return [x]
        if pre:
            x = conv.b.apply(pre, [x])
        if not axes:
            if x.nb:
                raise Unsupported("reduces over all axes, batch axes included (name the "
                                  "per-example axes)")
            per = list(range(len(conv.b.shape(x.id))))
        else:
            per = sorted(conv.b.axis(a, x) for a in axes)
        if irop in ("reduce_sum", "reduce_mean"):
            y = conv.b.reduce(irop, x, [a + x.nb for a in per], keep)
        else:
            y = conv.b.apply(irop, [x], axis=per, keepdims=keep)
        if post:
            y = conv.b.apply(post, [y])
        return [y]
    return f


# ------------------------------------------------------------------ index outputs
def _arg(irop):
    def f(conv, node, ins, A):
        x = conv.t(ins[0])
        return [conv.b.apply(irop, [x], axis=conv.b.axis(int(A.get("axis", 0)), x),
                             keepdims=bool(int(A.get("keepdims", 1))),
                             select_last_index=bool(int(A.get("select_last_index", 0))))]
    return f


def _topk(conv, node, ins, A):
    """TopK's two outputs, values and indices; K is an attribute before opset 10, a
    constant input after."""
    x = conv.t(ins[0])
    if conv.opset < 10:
        k = int(A["k"])
    else:
        ks = const_ints(ins[1], "K")
        if len(ks) != 1:
            raise Unsupported(f"K must hold one value, got {ks}")
        k = ks[0]
    at = dict(k=k, axis=conv.b.axis(int(A.get("axis", -1)), x),
              largest=bool(int(A.get("largest", 1))), sorted=bool(int(A.get("sorted", 1))))
    return [conv.b.apply("topk", [x], **at), conv.b.apply("topk_indices", [x], **at)]


def _global_pool(irop):
    def f(conv, node, ins, A):
        x = conv.t(ins[0])
        return [conv.with_channels_first(x, lambda v: conv.b.apply(irop, [v]), irop)]
    return f


CONVERTERS = {
    **{op: _unary(op) for op in UNARY},
    "LeakyRelu": _act("leaky_relu", alpha=0.01),
    "HardSigmoid": _act("hardsigmoid", alpha=0.2, beta=0.5),
    "Elu": _act("elu", alpha=1.0),
    "Selu": _selu,
    "Gelu": _gelu,
    "Clip": _clip,
    "Pow": _pow,
    "PRelu": _prelu,
    "Softsign": _softsign,
    "Sum": _variadic("add"),
    "Mean": _variadic("mean"),
    "Slice": _slice,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "Gather": _gather,
    "Pad": _pad,
    "Tile": _tile,
    "Where": _where,
    "Split": _split,
    "ReduceMax": _reduce("reduce_max"),
    "ReduceMin": _reduce("reduce_min"),
    "ReduceProd": _reduce("reduce_prod"),
    "ReduceSumSquare": _reduce("reduce_sum_square"),
    "ReduceL2": _reduce("reduce_sum_square", post="sqrt"),
    "ReduceL1": _reduce("reduce_sum", pre="abs"),
    "ReduceLogSum": _reduce("reduce_sum", post="log"),
    "ReduceLogSumExp": _reduce("reduce_sum", pre="exp", post="log"),
    "GlobalAveragePool": _global_pool("global_avg_pool"),
    "GlobalMaxPool": _global_pool("global_max_pool"),
    "Less": _compare("lt"), "LessOrEqual": _compare("le"), "Greater": _compare("gt"),
    "GreaterOrEqual": _compare("ge"), "Equal": _compare("eq"), "And": _compare("and"),
    "Or": _compare("or"), "IsInf": _is_inf,
    "Mod": _mod,
    "ArgMax": _arg("argmax"), "ArgMin": _arg("argmin"), "TopK": _topk,
}

#: the IR ops each converter needs (an ONNX op is claimed only when they all exist)
NEEDS = {
    **{op: (ir,) for op, ir in UNARY.items()},
    "LeakyRelu": ("leaky_relu",), "HardSigmoid": ("hardsigmoid",), "Elu": ("elu",),
    "Selu": ("selu",), "Gelu": ("gelu", "gelu_tanh"), "Clip": ("clip",), "Pow": ("mul", "sqrt", "div"),
    "PRelu": ("leaky_relu", "relu", "min", "mul", "add"), "Softsign": ("abs", "add", "div"), "Sum": ("add",),
    "Mean": ("add", "div"), "Slice": ("slice",), "Squeeze": ("squeeze",),
    "Unsqueeze": ("unsqueeze",), "Gather": ("gather", "take"), "Pad": ("pad",), "Tile": ("tile",),
    "Where": ("where",), "Split": ("slice",), "ReduceMax": ("reduce_max",),
    "ReduceMin": ("reduce_min",), "ReduceProd": ("reduce_prod",),
    "ReduceSumSquare": ("reduce_sum_square",), "ReduceL2": ("reduce_sum_square", "sqrt"),
    "ReduceL1": ("reduce_sum", "abs"), "ReduceLogSum": ("reduce_sum", "log"),
    "ReduceLogSumExp": ("reduce_sum", "exp", "log"),
    "GlobalAveragePool": ("global_avg_pool",), "GlobalMaxPool": ("global_max_pool",),
    "Less": ("lt",), "LessOrEqual": ("le",), "Greater": ("gt",), "GreaterOrEqual": ("ge",),
    "Equal": ("eq",), "And": ("and",), "Or": ("or",), "IsInf": ("isinf", "and", "gt", "lt"), "Mod": ("fmod",),
    "ArgMax": ("argmax",), "ArgMin": ("argmin",), "TopK": ("topk", "topk_indices"),
}


def available() -> dict:
    """The converters whose IR ops are all in the op table now."""
    return {op: f for op, f in CONVERTERS.items() if all(n in OPS for n in NEEDS[op])}
