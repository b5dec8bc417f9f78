"""IR + payload -> ONNX model (default opset 20, float32 tensors, leading batch axis "N").

onnx is imported lazily.  Payload entries are converted with the target context's single
correct rounding (``binary32`` for float32 export, ``float64`` for float64), so the
exported initializers are exactly the values our binary32 fold uses.  Every IR value gets
a leading batch axis (symbolic ``N``) unless it comes from constants alone; per-example
axes become axis + 1.  Per-example numpy broadcasting is kept by inserting singleton axes
after ``N`` where ONNX's right-aligned broadcasting would otherwise meet the batch axis.

Node mapping (IR -> ONNX): linear -> Gemm(transB=1) for per-example vectors, else MatMul +
Add; sum -> ReduceSum(keepdims=0); batchnorm_eval on channel axis 0 -> BatchNormalization,
other axes composed of Sub/Add/Sqrt/Div/Mul; flatten of all axes -> Flatten(axis=1), other
flattens and reshapes -> Reshape; safe_log -> Log(Max(x, 1e-12)).  Ops without a mapping
(the loss ops) are listed in one :class:`UnsupportedOpsError`.
"""
from __future__ import annotations

import numpy as np

from ..axes import norm_axes, norm_axis
from ..errors import GraphError
from ..node import Graph
from ..ops_conv import onnx_geometry
from .onnx_network import EXPORTERS as _NETWORK_EXPORTERS
from ..ops_elementwise import SAFE_LOG_TINY
from ..optable import OPS, full_attrs
from ..payload import Payload
from ..validate import check_payload, check_shapes
from ..importers.interchange import (Unsupported, UnsupportedOpsError, payload_field,
                                     require)

DEFAULT_OPSET = 20
_UNARY = {"relu": "Relu", "tanh": "Tanh", "sigmoid": "Sigmoid", "softplus": "Softplus",
          "exp": "Exp", "log": "Log", "abs": "Abs", "sqrt": "Sqrt", "neg": "Neg", "sin": "Sin",
          "cos": "Cos", "gelu": "Gelu", "detach": "Identity"}
_BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "max": "Max", "min": "Min"}


def save_onnx(path, g: Graph, payload, **kw) -> None:
    """Write :func:`to_onnx` of ``g`` to ``path`` (atomically: a temporary file beside it,
    renamed into place when complete, so a failed save keeps the previous file)."""
    from ..fileformat import _Replacing
    onnx = require("onnx", "onnx")
    model = to_onnx(g, payload, **kw)
    try:
        with _Replacing(path) as tmp:
            onnx.save(model, tmp)
    except OSError as exc:
        raise GraphError(f"cannot write ONNX model {path!r}: {exc}") from None


def to_onnx(g: Graph, payload, *, dtype: str = "float32", opset: int = DEFAULT_OPSET,
            batch_name: str = "N", graph_name: str = "scalarlab"):
    """An ``onnx.ModelProto`` computing ``g`` with ``payload``; checked by onnx.checker."""
    onnx = require("onnx", "onnx")
    from scalarlab import scalars
    if dtype not in ("float32", "float64"):
        raise GraphError(f"to_onnx: dtype must be 'float32' or 'float64', got {dtype!r}")
    if not isinstance(opset, int) or opset < 20:
        raise GraphError(f"to_onnx: opset must be an int >= 20 (Gelu), got {opset!r}")
    check_shapes(g)
    payload = payload if isinstance(payload, Payload) else Payload(payload)
    check_payload(g, payload)
    ctx = scalars.get("binary32" if dtype == "float32" else "float64")
    ex = _Exporter(onnx, g, payload, ctx, np.dtype(dtype), batch_name)
    problems = []
    for n in g.nodes:
        try:
            ex.node(n)
        except Unsupported as exc:
            problems.append(f"node {n.id} {n.kind}: {exc}")
    if problems:
        raise UnsupportedOpsError("to_onnx", problems)
    h = onnx.helper
    out = g.nodes[g.output]
    out_name = ex.name[g.output]
    outputs = [h.make_tensor_value_info(out_name, ex.elem, ex.full_shape(out.id))]
    graph = h.make_graph(ex.nodes, graph_name, ex.inputs, outputs, initializer=ex.inits)
    opsets = [h.make_opsetid("", opset)]
    model = h.make_model(graph, opset_imports=opsets, producer_name="scalarlab",
                         ir_version=h.find_min_ir_version_for(opsets))
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as exc:
        raise GraphError(f"to_onnx: onnx.checker rejects the exported model: {exc}") from None
    return model


class _Exporter:
    def __init__(self, onnx, g, payload, ctx, dtype, batch_name):
        self.onnx, self.g, self.payload, self.ctx = onnx, g, payload, ctx
        self.dtype = dtype
        self.elem = onnx.helper.np_dtype_to_tensor_dtype(dtype)
        self.batch_name = batch_name
        self.nodes, self.inputs, self.inits = [], [], []
        self.name: dict = {}
        self.batched: dict = {}
        self._k = 0

    # ---------------------------------------------------------------- helpers
    def fresh(self, base) -> str:
        self._k += 1
        return f"{base}_{self._k}"

    def init(self, base, arr, dtype=None) -> str:
        name = self.fresh(base)
        a = np.asarray(arr, dtype=self.dtype if dtype is None else dtype)
        self.inits.append(self.onnx.numpy_helper.from_array(a, name))
        return name

    def ints(self, base, vals) -> str:
        return self.init(base, np.asarray(list(vals), dtype=np.int64), np.int64)

    def emit(self, op, inputs, base, **attrs) -> str:
        out = self.fresh(base)
        self.nodes.append(self.onnx.helper.make_node(op, list(inputs), [out], **attrs))
        return out

    def full_shape(self, i):
        s = list(self.g.nodes[i].out_shape)
        return ([self.batch_name] if self.batched[i] else []) + s

    def param(self, n, name):
        """Payload field ``name`` of node ``n`` in the export context (default filled)."""
        return payload_field(self.g, self.payload, n, name, self.ctx).astype(self.dtype)

    def expand_rank(self, i, rank) -> str:
        """Value of node ``i`` with singleton axes after the batch axis up to per-example
        ``rank`` (batched values only; ONNX aligns constants from the right already)."""
        s = list(self.g.nodes[i].out_shape)
        if not self.batched[i] or len(s) >= rank:
            return self.name[i]
        return self.emit("Reshape", [self.name[i], self.ints("shape", [0] + [1] * (rank - len(s)) + s)],
                         "align")

    def to_batched(self, i, ref) -> str:
        """A constant-derived value broadcast over the batch axis of node ``ref``."""
        if self.batched[i]:
            return self.name[i]
        shp = self.emit("Shape", [self.name[ref]], "batch", start=0, end=1)
        full = self.emit("Concat", [shp, self.ints("dims", self.g.nodes[i].out_shape)], "bshape",
                         axis=0)
        s = list(self.g.nodes[i].out_shape)
        x = self.emit("Reshape", [self.name[i], self.ints("shape", [1] + s)], "lift")
        return self.emit("Expand", [x, full], "expand")

    def reshape_to(self, x, i, batched) -> str:
        s = list(self.g.nodes[i].out_shape)
        if batched:
            target = ([-1] + s) if int(np.prod(s, dtype=np.int64)) > 0 else ([0] + s)
        else:
            target = s
        return self.emit("Reshape", [x, self.ints("shape", target)], "reshape")

    # ---------------------------------------------------------------- nodes
    def node(self, n):
        """Emit the ONNX nodes of IR node ``n``: one lookup in :data:`EXPORTERS`."""
        op = n.kind.op
        ps = list(n.parents)
        self.batched[n.id] = any(self.batched[p] for p in ps) if op != "input" else True
        rule = EXPORTERS.get(op)
        if rule is None:
            raise Unsupported(f"no ONNX mapping for op {op!r}")
        off = 1 if self.batched[n.id] else 0
        attrs = full_attrs(OPS[op], n.kind.attrs)
        r_in = len(self.g.nodes[ps[0]].out_shape) if ps else 0
        x = self.name[ps[0]] if ps else None
        self.name[n.id] = rule(self, n, attrs, off, r_in, x, f"n{n.id}")

    def matmul(self, n):
        a, b = n.parents
        sa, sb = self.g.nodes[a].out_shape, self.g.nodes[b].out_shape
        ba, bb = self.batched[a], self.batched[b]
        if not (ba or bb) or (ba and not bb and len(sa) == 1 and len(sb) == 2) or \
                (ba and not bb and len(sa) >= len(sb)) or (bb and not ba and len(sb) >= len(sa) and len(sa) >= 2):
            # ONNX's numpy-style matmul already agrees per example here
            return self.emit("MatMul", [self.name[a], self.name[b]], f"n{n.id}")
        xa, xb = self.name[a], self.name[b]
        ra, rb = len(sa), len(sb)
        if ba and ra == 1:
            xa = self.emit("Reshape", [xa, self.ints("shape", [0, 1, sa[0]])], "vec")
            ra = 2
        if bb and rb == 1:
            xb = self.emit("Reshape", [xb, self.ints("shape", [0, sb[0], 1])], "vec")
            rb = 2
        r = max(ra, rb)
        for k, (xx, rr, bat, s) in enumerate(((xa, ra, ba, sa), (xb, rb, bb, sb))):
            if bat and rr < r:
                cur = list(s) if len(s) == rr else ([1] + list(s) if k == 0 else list(s) + [1])
                xx = self.emit("Reshape", [xx, self.ints("shape", [0] + [1] * (r - rr) + cur)],
                               "align")
                if k == 0:
                    xa = xx
                else:
                    xb = xx
        y = self.emit("MatMul", [xa, xb], "mm")
        return self.reshape_to(y, n.id, True)

    def batchnorm(self, n, attrs, off, r_in):
        a = norm_axis("batchnorm_eval", attrs["axis"], r_in)
        P = {k: self.param(n, k) for k in ("mean", "var", "gamma", "beta", "eps")}
        if off and a == 0:
            return self.emit("BatchNormalization",
                             [self.name[n.parents[0]], self.init("gamma", P["gamma"]),
                              self.init("beta", P["beta"]), self.init("mean", P["mean"]),
                              self.init("var", P["var"])], f"n{n.id}", epsilon=float(P["eps"]))
        # the IR's formula on a per-example channel axis a: (x - mean) * 1/sqrt(var+eps) * gamma + beta
        tail = (1,) * (r_in - a - 1)
        c = {k: self.init(k, P[k].reshape(P[k].shape + tail)) for k in ("mean", "var", "gamma", "beta")}
        inv = self.emit("Reciprocal", [self.emit("Sqrt", [self.emit(
            "Add", [c["var"], self.init("eps", P["eps"])], "ve")], "sd")], "inv")
        xhat = self.emit("Mul", [self.emit("Sub", [self.name[n.parents[0]], c["mean"]], "d"), inv], "xhat")
        return self.emit("Add", [self.emit("Mul", [xhat, c["gamma"]], "sc"), c["beta"]], f"n{n.id}")



# ---------------------------------------------------------------- the exporter table
# One entry per IR op: ``f(ex, n, attrs, off, r_in, x, base) -> ONNX output name``, where
# ``attrs`` are the node's filled attributes, ``off`` is 1 when the value carries the batch
# axis, ``r_in`` the first parent's per-example rank, ``x`` its ONNX name and ``base`` the
# name stem of the node's output (the shape of :data:`.onnx_network.EXPORTERS`).
def _input(ex, n, attrs, off, r_in, x, base):
    name = f"input_{n.id}" if len(ex.g.input_ids()) > 1 else "x"
    ex.inputs.append(ex.onnx.helper.make_tensor_value_info(name, ex.elem, ex.full_shape(n.id)))
    return name


def _const(ex, n, attrs, off, r_in, x, base):
    return ex.init(base, ex.param(n, "value"))


def _unary(onnx_op):
    def f(ex, n, attrs, off, r_in, x, base):
        return ex.emit(onnx_op, [x], base)
    return f


def _safe_log(ex, n, attrs, off, r_in, x, base):
    tiny = ex.init("tiny", ex.ctx.to_float64(ex.ctx.convert(SAFE_LOG_TINY)))
    return ex.emit("Log", [ex.emit("Max", [x, tiny], "clamp")], base)


def _binary(onnx_op):
    def f(ex, n, attrs, off, r_in, x, base):
        r = len(n.out_shape)
        a, b = n.parents
        return ex.emit(onnx_op, [ex.expand_rank(a, r), ex.expand_rank(b, r)], base)
    return f


def _matmul(ex, n, attrs, off, r_in, x, base):
    return ex.matmul(n)


def _linear(ex, n, attrs, off, r_in, x, base):
    W, b = ex.param(n, "W"), ex.param(n, "b")
    if off and r_in == 1:
        return ex.emit("Gemm", [x, ex.init("W", W), ex.init("b", b)], base, transB=1)
    return ex.emit("Add", [ex.emit("MatMul", [x, ex.init("WT", W.T)], "mm"), ex.init("b", b)],
                   base)


def _conv(ex, n, attrs, off, r_in, x, base):
    op = n.kind.op
    if not off:
        raise Unsupported(f"{op} of a constant-only value (ONNX Conv needs the batch axis)")
    q = onnx_geometry(op, ex.g.nodes[n.parents[0]].out_shape, attrs)
    return ex.emit("Conv", [x, ex.init("weight", ex.param(n, "weight")),
                            ex.init("bias", ex.param(n, "bias"))], base,
                   group=attrs["groups"], **q)


def _pool(onnx_op):
    def f(ex, n, attrs, off, r_in, x, base):
        op = n.kind.op
        if not off:
            raise Unsupported(f"{op} of a constant-only value (ONNX pooling needs the batch "
                              f"axis)")
        q = onnx_geometry(op, ex.g.nodes[n.parents[0]].out_shape, attrs)
        return ex.emit(onnx_op, [x], base, **q)
    return f


def _sum(ex, n, attrs, off, r_in, x, base):
    if r_in == 0:
        return ex.emit("Identity", [x], base)
    return ex.emit("ReduceSum", [x, ex.ints("axes", [off + a for a in range(r_in)])], base,
                   keepdims=0)


def _reduce(onnx_op):
    def f(ex, n, attrs, off, r_in, x, base):
        axes = norm_axes(n.kind.op, attrs["axis"], r_in)
        if not axes:
            return ex.emit("Identity", [x], base)
        return ex.emit(onnx_op, [x, ex.ints("axes", [off + a for a in axes])], base,
                       keepdims=int(attrs["keepdims"]))
    return f


def _softmax(onnx_op):
    def f(ex, n, attrs, off, r_in, x, base):
        a = norm_axis(n.kind.op, attrs["axis"], r_in)
        return ex.emit(onnx_op, [x], base, axis=a + off)
    return f


def _layernorm(ex, n, attrs, off, r_in, x, base):
    a = norm_axis("layernorm", attrs["axis"], r_in)
    eps = float(ex.param(n, "eps"))
    return ex.emit("LayerNormalization", [x, ex.init("gamma", ex.param(n, "gamma")),
                                          ex.init("beta", ex.param(n, "beta"))],
                   base, axis=a + off, epsilon=eps)


def _batchnorm(ex, n, attrs, off, r_in, x, base):
    return ex.batchnorm(n, attrs, off, r_in)


def _reshape(ex, n, attrs, off, r_in, x, base):
    return ex.reshape_to(x, n.id, off)


def _flatten(ex, n, attrs, off, r_in, x, base):
    if off and r_in >= 1 and norm_axis("flatten", attrs["start_axis"], r_in) == 0 and \
            norm_axis("flatten", attrs["end_axis"], r_in) == r_in - 1:
        return ex.emit("Flatten", [x], base, axis=1)
    return ex.reshape_to(x, n.id, off)


def _permute(ex, n, attrs, off, r_in, x, base):
    return ex.emit("Transpose", [x], base,
                   perm=list(range(off)) + [p + off for p in attrs["perm"]])


def _concat(ex, n, attrs, off, r_in, x, base):
    a = norm_axis("concat", attrs["axis"], r_in)
    ps = list(n.parents)
    ref = next((p for p in ps if ex.batched[p]), None)
    parts = [ex.name[p] if ref is None else ex.to_batched(p, ref) for p in ps]
    return ex.emit("Concat", parts, base, axis=a + off)


def _broadcast_to(ex, n, attrs, off, r_in, x, base):
    shape = list(attrs["shape"])
    xa = ex.expand_rank(n.parents[0], len(shape))
    return ex.emit("Expand", [xa, ex.ints("shape", ([1] if off else []) + shape)], base)


_CORE = {
    "input": _input, "const": _const,
    **{op: _unary(o) for op, o in _UNARY.items()},
    "safe_log": _safe_log,
    **{op: _binary(o) for op, o in _BINARY.items()},
    "matmul": _matmul, "linear": _linear,
    **{f"conv{d}d": _conv for d in (1, 2, 3)},
    **{f"max_pool{d}d": _pool("MaxPool") for d in (1, 2, 3)},
    **{f"avg_pool{d}d": _pool("AveragePool") for d in (1, 2, 3)},
    "sum": _sum, "reduce_sum": _reduce("ReduceSum"), "reduce_mean": _reduce("ReduceMean"),
    "softmax": _softmax("Softmax"), "log_softmax": _softmax("LogSoftmax"),
    "layernorm": _layernorm, "batchnorm_eval": _batchnorm, "reshape": _reshape,
    "flatten": _flatten, "permute": _permute, "concat": _concat,
    "broadcast_to": _broadcast_to,
}
#: IR op -> exporter: the core ops above and the network ops of :mod:`.onnx_network`
EXPORTERS = {**_NETWORK_EXPORTERS, **_CORE}
