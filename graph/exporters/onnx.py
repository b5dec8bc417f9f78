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
from .onnx_network import NETWORK_OPS, export_node
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
        h = self.onnx.helper
        op = n.kind.op
        i = n.id
        ps = list(n.parents)
        self.batched[i] = any(self.batched[p] for p in ps) if op != "input" else True
        off = 1 if self.batched[i] else 0
        attrs = full_attrs(OPS[op], n.kind.attrs)
        r_in = len(self.g.nodes[ps[0]].out_shape) if ps else 0
        x = self.name[ps[0]] if ps else None
        base = f"n{i}"
        if op == "input":
            name = f"input_{i}" if len(self.g.input_ids()) > 1 else "x"
            self.inputs.append(h.make_tensor_value_info(name, self.elem, self.full_shape(i)))
            self.name[i] = name
            return
        if op == "const":
            self.name[i] = self.init(base, self.param(n, "value"))
            return
        if op in _UNARY:
            y = self.emit(_UNARY[op], [x], base)
        elif op == "safe_log":
            tiny = self.init("tiny", self.ctx.to_float64(self.ctx.convert(SAFE_LOG_TINY)))
            y = self.emit("Log", [self.emit("Max", [x, tiny], "clamp")], base)
        elif op in _BINARY:
            r = len(n.out_shape)
            y = self.emit(_BINARY[op], [self.expand_rank(ps[0], r), self.expand_rank(ps[1], r)], base)
        elif op == "matmul":
            y = self.matmul(n)
        elif op == "linear":
            W, b = self.param(n, "W"), self.param(n, "b")
            if off and r_in == 1:
                y = self.emit("Gemm", [x, self.init("W", W), self.init("b", b)], base, transB=1)
            else:
                y = self.emit("Add", [self.emit("MatMul", [x, self.init("WT", W.T)], "mm"),
                                      self.init("b", b)], base)
        elif op in ("conv1d", "conv2d", "conv3d"):
            if not off:
                raise Unsupported(f"{op} of a constant-only value (ONNX Conv needs the batch axis)")
            q = onnx_geometry(op, self.g.nodes[ps[0]].out_shape, attrs)
            y = self.emit("Conv", [x, self.init("weight", self.param(n, "weight")),
                                   self.init("bias", self.param(n, "bias"))], base,
                          group=attrs["groups"], **q)
        elif op[:-2] in ("max_pool", "avg_pool") and op[-2] in "123":
            if not off:
                raise Unsupported(f"{op} of a constant-only value (ONNX pooling needs the batch axis)")
            q = onnx_geometry(op, self.g.nodes[ps[0]].out_shape, attrs)
            if op.startswith("max"):
                y = self.emit("MaxPool", [x], base, **q)
            else:
                y = self.emit("AveragePool", [x], base, **q)
        elif op == "sum":
            if r_in == 0:
                y = self.emit("Identity", [x], base)
            else:
                y = self.emit("ReduceSum", [x, self.ints("axes", [off + a for a in range(r_in)])],
                              base, keepdims=0)
        elif op in ("reduce_sum", "reduce_mean"):
            axes = norm_axes(op, attrs["axis"], r_in)
            if not axes:
                y = self.emit("Identity", [x], base)
            else:
                y = self.emit("ReduceSum" if op == "reduce_sum" else "ReduceMean",
                              [x, self.ints("axes", [off + a for a in axes])], base,
                              keepdims=int(attrs["keepdims"]))
        elif op in ("softmax", "log_softmax"):
            a = norm_axis(op, attrs["axis"], r_in)
            y = self.emit("Softmax" if op == "softmax" else "LogSoftmax", [x], base, axis=a + off)
        elif op == "layernorm":
            a = norm_axis(op, attrs["axis"], r_in)
            eps = float(self.param(n, "eps"))
            y = self.emit("LayerNormalization", [x, self.init("gamma", self.param(n, "gamma")),
                                                 self.init("beta", self.param(n, "beta"))],
                          base, axis=a + off, epsilon=eps)
        elif op == "batchnorm_eval":
            y = self.batchnorm(n, attrs, off, r_in)
        elif op in ("reshape", "flatten"):
            if op == "flatten" and off and r_in >= 1 and \
                    norm_axis(op, attrs["start_axis"], r_in) == 0 and \
                    norm_axis(op, attrs["end_axis"], r_in) == r_in - 1:
                y = self.emit("Flatten", [x], base, axis=1)
            else:
                y = self.reshape_to(x, i, off)
        elif op == "permute":
            y = self.emit("Transpose", [x], base,
                          perm=list(range(off)) + [p + off for p in attrs["perm"]])
        elif op == "concat":
            a = norm_axis(op, attrs["axis"], r_in)
            ref = next((p for p in ps if self.batched[p]), None)
            parts = [self.name[p] if ref is None else self.to_batched(p, ref) for p in ps]
            y = self.emit("Concat", parts, base, axis=a + off)
        elif op == "broadcast_to":
            shape = list(attrs["shape"])
            xa = self.expand_rank(ps[0], len(shape))
            y = self.emit("Expand", [xa, self.ints("shape", ([1] if off else []) + shape)], base)
        elif op in NETWORK_OPS:
            y = export_node(self, n, attrs, off, r_in, x, base)
        else:
            raise Unsupported(f"no ONNX mapping for op {op!r}")
        self.name[i] = y

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

