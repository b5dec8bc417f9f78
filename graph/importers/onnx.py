"""ONNX -> IR: initializers become payload entries, ONNX nodes become IR nodes.

onnx is imported lazily.  ONNX tensors carry the batch axis.  Batch axes are INFERRED
from the graph inputs (``batch_dims=None``, the default): the leading dimensions an input
declares symbolically (``dim_param`` such as ``"N"``/``"batch"``, or no value) are batch
axes, a fixed dimension belongs to the example (a ``[4]`` input is one example of shape
``[4]``, not 4 examples of scalars).  Every input must declare the same number of leading
symbolic dimensions, and none after a fixed one.  ``batch_dims=K`` overrides: the first
``K`` axes of every input are batch axes, the rest must be fixed.  Every ONNX ``axis``
is translated to a per-example axis; an operation over a batch axis is refused, naming
the node.  Each ONNX op is one entry of :data:`CONVERTERS` (``f(conv, node, ins, A) ->
outputs``: the core ops here, the network ops of :mod:`.onnx_ops`); an op without one is
refused naming it.  All unsupported nodes are listed in ONE
:class:`~graph.importers.interchange.UnsupportedOpsError`.

Shape arithmetic (``Shape``, ``Gather``, ``Concat``, ``Unsqueeze``, ``Cast`` ... feeding a
``Reshape``, as exporters write ``x.view(x.size(0), -1)``) is folded to constants at import
(:mod:`.onnx_fold`); the batch extents stay symbolic there, so a reshape that keeps them
in front becomes a per-example reshape.  Nodes whose inputs are all constants are folded
when that is exact (integer/boolean values, data movement); float arithmetic on constants
stays in the graph so each context evaluates it.

Concrete shapes (:mod:`.onnx_shapes`; ``shapes=``/``concrete=True``, ``--shape`` in the
CLI, and the fallback when the per-example import refuses a model): every input dimension
is fixed (1 for a symbolic one unless given), onnx infers every shape, ``batch_dims`` is
0 and the model's batch axis is an axis of the example, so transformer exports (``Shape``
of the batch, reshapes and transposes that move it, causal masks) fold to constants.
Integer and boolean inputs (token ids) are inputs holding integers; ``Gather`` with such
run-time indices is the IR's ``take``, which checks that they are integers in range.

Mappings that compose IR ops: ``Gemm`` is ``linear`` when alpha = beta = 1, A is the
batched input and B, C are initializers; otherwise (Transpose) -> matmul -> mul(alpha) ->
add(mul(beta, C)).  ``Softmax``/``LogSoftmax`` before opset 13 (softmax over the flattened
trailing axes) is reshape -> softmax -> reshape.  ``ReduceSum`` over every per-example
axis without keepdims is the IR's ``sum``.  Attribute floats (epsilon, alpha, beta) are
float32 in ONNX; their float32 values go to the payload.
"""
from __future__ import annotations

import numpy as np

from .. import files
from ..errors import GraphError
from ..optable import OPS
from .interchange import (Batched, IRBuilder, PendingConst, Unsupported, UnsupportedOpsError,
                          exact_gelu_only, ir_shape, require)
from .onnx_fold import BatchDim, fold_constant, fold_symbolic, is_symbolic, shape_value
from .onnx_layout import moved, shape_of
from .onnx_ops import available as _network_converters
from .onnx_ops_recurrent import ALL_OUTPUTS as _RECURRENT_OUTPUTS
from .onnx_ops_recurrent import CONVERTERS as _RECURRENT
from .onnx_ops_spatial import CONVERTERS as _SPATIAL
from .onnx_ops_compose import available as _composed

#: mapped but not claimed: Cast to float/double passes a real value through (the IR does
#: not model the cast's rounding, so ONNX's Cast cases are not claimed)
_PASSED_THROUGH = {"Cast"}
#: claimed ops that only shape arithmetic produces: folded to constants at import
#: (:meth:`_OnnxConverter.fold`), never mapped to IR nodes
_FOLDED_ONLY = ("Shape", "Size")
#: ops whose extra outputs may be present while unused (the first output is mapped)
_MULTI_OUTPUT = {"Dropout", "LayerNormalization", "Split"}
#: ops whose extra outputs are mapped too
_ALL_OUTPUTS = {"Dropout", "LayerNormalization", "Split", "TopK", *_RECURRENT_OUTPUTS}

#: ONNX element types of float inputs (float, double, float16, bfloat16) and of integer
#: and boolean inputs (token ids, positions, masks: their values are integers, which every
#: context holds exactly up to 2^p; index-taking ops check that they are)
_FLOAT_TYPES = (1, 11, 10, 16)
_INTEGER_TYPES = (2, 3, 4, 5, 6, 7, 9, 12, 13)

_UNARY = {"Relu": "relu", "Tanh": "tanh", "Sigmoid": "sigmoid", "Softplus": "softplus",
          "Exp": "exp", "Log": "log", "Abs": "abs", "Sqrt": "sqrt", "Neg": "neg",
          "Sin": "sin", "Cos": "cos"}
_BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Max": "max", "Min": "min"}


def load_onnx(path_or_model, *, batch_dims=None, output=None, shapes=None, concrete=None):
    """``(Graph, Payload)`` of an ONNX model (a path, bytes or a ModelProto); the keywords
    are :func:`from_onnx`'s."""
    onnx = require("onnx", "onnx")
    if isinstance(path_or_model, onnx.ModelProto):
        model = path_or_model
    else:
        what = "bytes" if isinstance(path_or_model, bytes) else repr(str(path_or_model))
        if isinstance(path_or_model, bytes):
            data = path_or_model
        else:
            import os
            path = str(path_or_model)
            if not os.path.exists(path):
                raise GraphError(f"cannot read ONNX model {what}: no such file")
            data = files.read_bytes(path, "ONNX model")   # regular file within the cap
        if not data:
            raise GraphError(f"{what} is not an ONNX model: the file is empty (0 bytes)")
        try:
            model = onnx.load_model_from_string(data)
        except Exception as exc:
            raise GraphError(f"{what} is not an ONNX model (the protobuf does not parse: "
                             f"{type(exc).__name__})") from None
        if not model.HasField("graph") or not (model.graph.node or model.graph.output):
            raise GraphError(f"{what} is not an ONNX model: it parses as protobuf but holds "
                             f"no graph (no nodes, no outputs)")
        if model.graph.node and external_data_used(model):
            try:
                import os
                onnx.load_external_data_for_model(model, os.path.dirname(str(path_or_model)))
            except Exception as exc:
                raise GraphError(f"cannot read the external data of ONNX model {what}: "
                                 f"{exc}") from None
    return from_onnx(model, batch_dims=batch_dims, output=output, shapes=shapes,
                     concrete=concrete)


#: Most entries one ONNX tensor may declare (2^31: 16 GiB of float64; a model declaring
#: more is refused before numpy tries to shape it).
MAX_TENSOR_ENTRIES = 2 ** 31


def _tensor_array(numpy_helper, t, what: str) -> np.ndarray:
    """``numpy_helper.to_array(t)`` once the declared shape is sane: no negative dimension,
    at most :data:`MAX_TENSOR_ENTRIES` entries, and the stored data fills it; otherwise a
    GraphError naming the tensor (a file declaring [1e9, 1e9] over no data is refused)."""
    dims = [int(d) for d in t.dims]
    name = f"{what} {t.name!r}" if getattr(t, "name", "") else what
    if any(d < 0 for d in dims):
        raise GraphError(f"ONNX {name}: negative dimension in its shape {dims}")
    n = 1
    for d in dims:
        n *= d
    if n > MAX_TENSOR_ENTRIES:
        raise GraphError(f"ONNX {name}: declares shape {dims} ({n} entries; at most "
                         f"{MAX_TENSOR_ENTRIES} are read)")
    try:
        return numpy_helper.to_array(t)
    except (ValueError, TypeError, OSError, MemoryError) as exc:
        raise GraphError(f"ONNX {name}: its data does not fill the declared shape {dims} "
                         f"({type(exc).__name__}: {exc})") from None


def external_data_used(model) -> bool:
    """True when an initializer keeps its values in a file beside the model."""
    return any(init.data_location == 1 for init in model.graph.initializer)


def _opset(model) -> int:
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return int(o.version)
    return 1


def infer_batch_dims(model) -> int:
    """The number of leading symbolic dimensions the graph inputs declare (the same for
    every input that is not an initializer); GraphError naming the input otherwise."""
    inits = {i.name for i in model.graph.initializer}
    found = {}
    for vi in model.graph.input:
        if vi.name in inits or not vi.type.HasField("tensor_type") or \
                not vi.type.tensor_type.HasField("shape"):
            continue
        dims = list(vi.type.tensor_type.shape.dim)
        sym = [not d.HasField("dim_value") for d in dims]
        k = sym.index(False) if False in sym else len(sym)
        if any(sym[k:]):
            j = k + sym[k:].index(True)
            shown = [d.dim_param or "?" if sym[i] else d.dim_value for i, d in enumerate(dims)]
            raise GraphError(f"from_onnx: input {vi.name!r} shape {shown}: axis {j} is "
                             f"symbolic after the fixed axis {k}; only leading axes can be "
                             f"batch axes (fix that axis in the model, or pass batch_dims)")
        found[vi.name] = k
    if len(set(found.values())) > 1:
        raise GraphError(f"from_onnx: the inputs declare different numbers of leading "
                         f"symbolic (batch) axes: {found}; pass batch_dims (--batch-dims K) "
                         f"to say how many are batch axes")
    return next(iter(found.values()), 0)


def from_onnx(model, *, batch_dims=None, output=None, shapes=None, concrete=None):
    """``(Graph, Payload)`` of an ``onnx.ModelProto`` (see the module docstring).

    ``batch_dims``: None infers the batch axes from the inputs' symbolic dimensions; an
    int K says the first K axes of every input are batch axes.

    ``shapes`` (``{input name: tuple}``) or ``concrete=True``: concrete shapes at import
    (:mod:`.onnx_shapes`): the inputs get those dimensions (1 for every other symbolic
    one), every shape in the model is inferred and folded, and the model's batch axis is
    an axis of the example.  ``concrete=None`` (the default) imports per example where
    that works and falls back to concrete shapes where it refuses the model;
    ``concrete=False`` never does."""
    require("onnx", "onnx")
    if shapes is not None or concrete:
        if batch_dims:
            raise GraphError(f"from_onnx: batch_dims={batch_dims} with concrete shapes (the "
                             f"model's batch axis is an axis of the example there)")
        from .onnx_shapes import concrete_model
        return _from_onnx(concrete_model(model, shapes), 0, output)
    try:
        return _from_onnx(model, batch_dims, output)
    except GraphError as exc:
        if concrete is not None or batch_dims is not None or not _per_example_refusal(exc):
            raise
        first = exc
    from .onnx_shapes import concrete_model
    try:
        return _from_onnx(concrete_model(model), 0, output)
    except GraphError as exc:
        # both refuse: the concrete path's reasons are what is really missing (a moved
        # batch axis is no reason there); a plain error keeps the per-example one
        if isinstance(exc, UnsupportedOpsError):
            raise UnsupportedOpsError("from_onnx", exc.items) from None
        raise first from None


def _per_example_refusal(exc) -> bool:
    """True for the refusals of the per-example path that concrete shapes may lift (an
    unsupported node, a moved batch axis, a symbolic non-leading axis, an integer input)."""
    if isinstance(exc, UnsupportedOpsError):
        return True
    text = str(exc)
    return any(t in text for t in ("batch axis moved", "symbolic after the fixed axis",
                                   "different numbers of leading", "not a float",
                                   "must be concrete"))


def _from_onnx(model, batch_dims, output):
    onnx = require("onnx", "onnx")
    from onnx import numpy_helper
    if batch_dims is None:
        batch_dims = infer_batch_dims(model)
    elif isinstance(batch_dims, bool) or not isinstance(batch_dims, int) or batch_dims < 0:
        raise GraphError(f"from_onnx: batch_dims must be a non-negative int or None (infer), "
                         f"got {batch_dims!r}")
    g = model.graph
    conv = _OnnxConverter(onnx, numpy_helper, _opset(model), batch_dims)
    env: dict = {}
    for init in g.initializer:
        env[init.name] = PendingConst(_tensor_array(numpy_helper, init, "initializer"),
                                      init.name)
    for vi in g.input:
        if vi.name in env:
            continue
        env[vi.name] = conv.input(vi)
    problems = []
    failed = set()
    conv.used = {i for n in g.node for i in n.input} | \
        ({output} if output is not None else {o.name for o in g.output})
    for k, node in enumerate(g.node):
        label = f"node {k} {node.op_type}" + (f" {node.name!r}" if node.name else "") + \
            f" (outputs {', '.join(node.output)})"
        if node.domain not in ("", "ai.onnx"):
            problems.append(f"{label}: domain {node.domain!r} is not the ONNX default domain")
            failed.update(node.output)
            continue
        if any(i in failed for i in node.input if i):
            failed.update(node.output)
            continue
        try:
            missing = [i for i in node.input if i and i not in env]
            if missing:
                raise Unsupported(f"inputs {missing} are not produced before this node")
            results = conv.fold(node, env)
            if results is None:
                if node.op_type not in CONVERTERS and node.op_type not in _FOLDED_ONLY:
                    problems.append(f"{label}: no IR mapping for ONNX op {node.op_type!r}")
                    failed.update(node.output)
                    continue
                results = conv.node(node, env)
            for name, v in zip(node.output, results):
                env[name] = v
        except Unsupported as exc:
            problems.append(f"{label}: {exc}")
            failed.update(node.output)
    outs = [o.name for o in g.output]
    if output is None:
        if len(outs) != 1:
            problems.append(f"the model has {len(outs)} outputs {outs}; an IR graph has one: "
                            f"choose it with --output NAME (output='NAME' in from_onnx)")
        name = outs[0] if outs else None
    else:
        if output not in outs and output not in env:
            raise GraphError(f"from_onnx: --output {output!r} is not a value of the model "
                             f"(its outputs: {outs})")
        name = output
    if problems:
        raise UnsupportedOpsError("from_onnx", problems)
    v = env[name]
    if isinstance(v, PendingConst):
        v = conv.materialize(v)
    if v.layout is not None:
        raise GraphError(f"from_onnx: output {name!r} has its batch axis moved (layout "
                         f"{v.layout}); the IR's outputs keep batch axes in front")
    return conv.b.finish(v.id)


def _moves_batch(op, ins, A) -> bool:
    """True when an input's batch axis is already moved (a layout), or when this node is a
    Transpose that moves it: such nodes go to :func:`.onnx_layout.moved`."""
    if any(isinstance(v, Batched) and v.layout is not None for v in ins):
        return True
    return op == "Transpose" and isinstance(ins[0], Batched) and bool(ins[0].nb) and \
        list(A.get("perm", []))[:ins[0].nb] != list(range(ins[0].nb))


class _OnnxConverter:
    """Maps ONNX nodes to IR nodes, one at a time, into an :class:`IRBuilder`."""

    def __init__(self, onnx, numpy_helper, opset, nb):
        self.onnx = onnx
        self.nh = numpy_helper
        self.opset = opset
        self.nb = nb
        self.b = IRBuilder(nb)
        self.batch = None          # concrete batch extents when the input declares them
        self.unary = _UNARY        # ONNX -> IR unary maps (read by onnx_layout)

    # ---------------------------------------------------------------- values
    def input(self, vi):
        t = vi.type.tensor_type
        if not vi.type.HasField("tensor_type"):
            raise GraphError(f"from_onnx: input {vi.name!r} is not a tensor")
        if t.elem_type not in _FLOAT_TYPES and t.elem_type not in _INTEGER_TYPES:
            raise GraphError(f"from_onnx: input {vi.name!r} has element type "
                             f"{self.onnx.TensorProto.DataType.Name(t.elem_type)}, not a "
                             f"float, integer or bool")
        if not t.HasField("shape"):
            raise GraphError(f"from_onnx: input {vi.name!r} has no shape")
        dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
        if len(dims) < self.nb:
            raise GraphError(f"from_onnx: input {vi.name!r} has rank {len(dims)} < batch_dims="
                             f"{self.nb}; pass batch_dims=0 for a model without a batch axis")
        per = dims[self.nb:]
        if any(d is None for d in per):
            raise GraphError(f"from_onnx: input {vi.name!r} shape {dims}: the per-example axes "
                             f"(after {self.nb} batch axes) must be concrete")
        if self.batch is None and all(d is not None for d in dims[:self.nb]):
            self.batch = tuple(dims[:self.nb])
        return Batched(self.b.add("input", [], out_shape=per), self.nb)

    def materialize(self, c: PendingConst) -> Batched:
        if c.id is None:
            if is_symbolic(c.value):
                raise Unsupported(f"{c.name!r} = {c.value.tolist()} holds a batch extent; the "
                                  f"IR works per example and cannot use it as a tensor value")
            if c.value.dtype.kind not in "fiu":
                raise Unsupported(f"initializer {c.name!r} of dtype {c.value.dtype} is not numeric")
            c.id = self.b.const(c.value.astype(np.float64))
        return Batched(c.id, 0)

    def t(self, v):
        return self.materialize(v) if isinstance(v, PendingConst) else v

    # ---------------------------------------------------------------- folding
    def attrs(self, node) -> dict:
        A = {a.name: self.onnx.helper.get_attribute_value(a) for a in node.attribute}
        return {k: (v.decode() if isinstance(v, bytes) else v) for k, v in A.items()}

    def fold(self, node, env):
        """The node's outputs as constants when they are known at import time (shape
        values, integer arithmetic, data movement of constants); None otherwise."""
        op = node.op_type
        ins = [env[i] if i else None for i in node.input]
        if op == "Shape" and ins and isinstance(ins[0], Batched) and ins[0].layout is not None:
            A = self.attrs(node)
            sv = shape_of(self, ins[0])[int(A.get("start", 0)):A.get("end")]
            return [PendingConst(sv, node.output[0])]
        if op in ("Shape", "Size") and ins and isinstance(ins[0], Batched):
            x = ins[0]
            per = self.b.shape(x.id)
            if op == "Size":
                if x.nb:
                    raise Unsupported("Size of a batched tensor is a batch extent times "
                                      "the example size (the IR works per example)")
                return [PendingConst(np.asarray(int(np.prod(per, dtype=np.int64))), node.output[0])]
            A = self.attrs(node)
            return [PendingConst(shape_value(x.nb, per, int(A.get("start", 0)),
                                             A.get("end")), node.output[0])]
        if op in ("Constant",) or not ins or \
                not all(v is None or isinstance(v, PendingConst) for v in ins):
            return None
        values = [None if v is None else v.value for v in ins]
        if any(is_symbolic(v) for v in values if v is not None):
            if op == "Expand" and not is_symbolic(values[0]):
                return None                 # a constant broadcast over the batch: expand()
            if op == "ConstantOfShape":
                return [self.constant_of_batch_shape(values[0], self.attrs(node))]
            out = fold_symbolic(op, self.attrs(node), values)
            return [PendingConst(out, node.output[0])]
        res = fold_constant(self.onnx, node, values, self.opset)
        if res is None:
            return None
        return [PendingConst(r, o) for r, o in zip(res, node.output)]

    def constant_of_batch_shape(self, shape, A):
        """``ConstantOfShape`` of a shape with batch extents in front: a constant per
        example, broadcast over the batch by the IR."""
        raw = list(shape.reshape(-1))
        lead = 0
        while lead < len(raw) and raw[lead] == BatchDim(lead):
            lead += 1
        if lead > self.nb or any(isinstance(t, BatchDim) for t in raw[lead:]):
            raise Unsupported(f"ConstantOfShape of {raw}: batch extents only in front")
        v = (_tensor_array(self.nh, A["value"], "ConstantOfShape value").reshape(-1)[0]
             if "value" in A else np.float32(0))
        c = PendingConst(np.full([int(t) for t in raw[lead:]], v), "ConstantOfShape")
        return Batched(self.materialize(c).id, lead)

    def with_channels_first(self, x, fn, what):
        """``fn`` (an IR op over a per-example [C, spatial...] value) applied to ``x``, an
        ONNX [N, C, spatial...] tensor.  With a batch axis the IR op sees each example; a
        model whose leading axis is fixed (one example of shape [1, C, ...]) gets that
        axis dropped around the op; a fixed leading extent > 1 is refused."""
        if x.nb:
            if x.nb != 1:
                raise Unsupported(f"{what} with {x.nb} batch axes (ONNX's N is one axis)")
            return fn(x)
        s = self.b.shape(x.id)
        if not s:
            raise Unsupported(f"{what} on a scalar")
        if s[0] == 1:
            inner = self.b.apply("reshape", [x], shape=list(s[1:]))
            y = fn(inner)
            return self.b.apply("reshape", [y], shape=[1] + list(self.b.shape(y.id)))
        # a fixed leading extent N > 1 (concrete shapes: the model's batch axis is an axis
        # of the example): the op on each of the N slices, concatenated (same arithmetic)
        parts = []
        for n in range(s[0]):
            xn = self.b.apply("slice", [x], starts=[n], ends=[n + 1], axes=[0])
            parts.append(self.with_channels_first(xn, fn, what))
        return self.b.apply("concat", parts, axis=0)

    # ---------------------------------------------------------------- nodes
    def node(self, node, env):
        """The IR values of an ONNX node's outputs: one lookup in :data:`CONVERTERS`
        (after the checks every op shares: a moved batch axis, unused extra outputs)."""
        A = self.attrs(node)
        ins = [env[i] if i else None for i in node.input]
        if _moves_batch(node.op_type, ins, A):
            return moved(self, node, ins, A)       # the batch axis moved: onnx_layout
        self.check_extra_outputs(node)
        rule = CONVERTERS.get(node.op_type)
        if rule is None:
            raise Unsupported(f"no IR mapping for ONNX op {node.op_type!r}")
        return rule(self, node, ins, A)

    def check_extra_outputs(self, node):
        """Unsupported when the node has outputs beyond the first that are not mapped
        (allowed only while unused, and only for ops whose extra outputs are optional)."""
        extra = [o for o in node.output[1:] if o]
        if not extra or node.op_type in _ALL_OUTPUTS:
            return
        if node.op_type not in _MULTI_OUTPUT:
            raise Unsupported(f"{len(node.output)} outputs (only the first is mapped)")
        used = [o for o in extra if o in self.used]
        if used:
            raise Unsupported(f"outputs {used} are used (only the first output, "
                              f"{node.output[0]!r}, is mapped)")

    def const_in(self, node, ins, k, what):
        """Input ``k`` of ``node`` as a constant array (Unsupported naming it otherwise)."""
        v = ins[k]
        if not isinstance(v, PendingConst):
            raise Unsupported(f"{what} ({node.input[k]!r}) must be an initializer or Constant")
        return v.value

    def aligned(self, a, b, matmul=False):
        """Operands as nodes; a constant of higher rank than the batched operand's
        per-example rank must have only leading 1s there (they align with batch axes)."""
        va, vb = self.t(a) if not isinstance(a, PendingConst) else None, self.t(b) if not isinstance(b, PendingConst) else None
        out = []
        for v, other in ((a, vb), (b, va)):
            if isinstance(v, PendingConst) and other is not None and other.nb:
                per = len(self.b.shape(other.id))
                val = v.value
                extra = val.ndim - per
                if matmul:
                    extra = val.ndim - max(per, 2) if val.ndim > 2 else 0
                if extra > 0:
                    if any(d != 1 for d in val.shape[:extra]):
                        raise Unsupported(f"constant {v.name!r} of shape {list(val.shape)} "
                                          f"broadcasts along a batch axis")
                    v = PendingConst(val.reshape(val.shape[extra:]), v.name)
            out.append(self.t(v))
        return out

    def binary(self, op, a, b):
        va, vb = self.aligned(a, b)
        return self.b.apply(op, [va, vb])

    def gemm(self, ins, A):
        alpha, beta = float(A.get("alpha", 1.0)), float(A.get("beta", 1.0))
        ta, tb = int(A.get("transA", 0)), int(A.get("transB", 0))
        a, b = ins[0], ins[1]
        c = ins[2] if len(ins) > 2 else None
        if isinstance(a, Batched) and a.nb and ta:
            raise Unsupported("transA=1 on a batched A transposes the batch axis")
        if (isinstance(b, Batched) and b.nb) or (isinstance(c, Batched) and c.nb):
            raise Unsupported("a batched B or C operand (the batch axis is A's rows)")
        if isinstance(a, Batched) and a.nb and alpha == 1.0 and beta == 1.0 and isinstance(b, PendingConst) \
                and (c is None or isinstance(c, PendingConst)):
            W = b.value.T if not tb else b.value
            params = {"W": W.astype(np.float64)}
            if c is not None:
                cv = np.asarray(c.value, dtype=np.float64)
                if cv.size not in (1, W.shape[0]) and cv.shape[-1:] != (W.shape[0],):
                    raise Unsupported(f"C of shape {list(cv.shape)} broadcasts along the batch axis")
                cv = cv.reshape(-1) if cv.size == W.shape[0] else np.full(W.shape[0], cv.reshape(-1)[0])
                params["b"] = cv
            per = self.b.shape(a.id)
            return Batched(self.b.add("linear", [a.id], out_shape=per[:-1] + (W.shape[0],),
                                 params=params), a.nb)
        va = self.t(a)
        if ta:
            va = self.b.apply("permute", [va], perm=[1, 0])
        vb = self.t(b)
        if tb:
            vb = self.b.apply("permute", [vb], perm=[1, 0])
        y = self.b.apply("matmul", [va, vb])
        if alpha != 1.0:
            y = self.b.apply("mul", [y, self.materialize(PendingConst(np.float64(np.float32(alpha)), "alpha"))])
        if c is not None:
            vc = self.aligned(c, y)[0] if isinstance(c, PendingConst) else self.t(c)
            if beta != 1.0:
                vc = self.b.apply("mul", [vc, self.materialize(PendingConst(np.float64(np.float32(beta)), "beta"))])
            y = self.b.apply("add", [y, vc])
        return y

    def expand(self, ins):
        if not isinstance(ins[1], PendingConst):
            raise Unsupported("shape input computed at run time; the IR needs a constant shape")
        raw = list(np.asarray(ins[1].value).reshape(-1))
        lead = 0
        while lead < len(raw) and isinstance(raw[lead], BatchDim) and raw[lead] == BatchDim(lead):
            lead += 1
        c = ins[0]
        if lead and isinstance(c, PendingConst) and c.value.ndim > len(raw) - lead:
            extra = c.value.ndim - (len(raw) - lead)
            if all(d == 1 for d in c.value.shape[:extra]):   # its leading 1s align with the batch
                c = PendingConst(c.value.reshape(c.value.shape[extra:]), c.name)
        x = self.t(c)
        if lead and x.nb == 0 and len(raw) >= lead + len(self.b.shape(x.id)):
            # a constant broadcast over the batch (exporters write Expand(c, Shape(x))):
            # the IR broadcasts constants over the batch itself, so the per-example part
            # is the broadcast and the result carries the batch axes
            per = self._target(np.asarray(raw[lead:], dtype=object), x, "Expand", keep=1)
            s = self.b.shape(x.id)
            s = [1] * (len(per) - len(s)) + list(s)
            per = [max(a, b) if 1 in (a, b) else a for a, b in zip(s, per)]
            return Batched(self.b.add("broadcast_to", [x.id], shape=per), lead)
        target = self._target(ins[1].value, x, "Expand", keep=1)
        s = self.b.shape(x.id)
        full = [1] * x.nb + list(s)
        r = max(len(full), len(target))
        full = [1] * (r - len(full)) + full
        tgt = [1] * (r - len(target)) + target
        if r - len(s) - x.nb > 0 and x.nb:
            raise Unsupported(f"shape {target} adds axes in front of the batch axis")
        if any(t != 1 for t in tgt[:x.nb]):
            raise Unsupported(f"shape {target} expands along a batch axis")
        per = [max(a, b) if 1 in (a, b) else a for a, b in zip(full[x.nb:], tgt[x.nb:])]
        return self.b.apply("broadcast_to", [x], shape=per)

    def softmax(self, op, x, A):
        irop = "softmax" if op == "Softmax" else "log_softmax"
        if self.opset >= 13:
            return self.b.apply(irop, [x], axis=self.b.axis(A.get("axis", -1), x))
        a = self.b.axis(A.get("axis", 1), x)
        s = self.b.shape(x.id)
        if a == len(s) - 1:
            return self.b.apply(irop, [x], axis=a)
        # before opset 13: softmax over the flattened axes [axis:] (coerced to 2-D)
        flat = self.b.apply("reshape", [x], shape=list(s[:a]) + [int(np.prod(s[a:]))])
        y = self.b.apply(irop, [flat], axis=a)
        return self.b.apply("reshape", [y], shape=list(s))

    def layernorm(self, ins, A, node):
        x = self.t(ins[0])
        if int(A.get("stash_type", 1)) != 1:
            raise Unsupported(f"stash_type={A['stash_type']}")
        a = self.b.axis(A.get("axis", -1), x)
        s = self.b.shape(x.id)
        norm = s[a:]
        params = {"eps": np.float64(np.float32(A.get("epsilon", 1e-5)))}
        for key, v in (("gamma", ins[1]), ("beta", ins[2] if len(ins) > 2 else None)):
            if v is None:
                continue
            if not isinstance(v, PendingConst):
                raise Unsupported(f"{key} must be an initializer")
            try:
                params[key] = np.broadcast_to(np.asarray(v.value, np.float64), norm).copy()
            except ValueError:
                raise Unsupported(f"{key} of shape {list(v.value.shape)} does not broadcast "
                                  f"to the normalized shape {list(norm)}") from None
        y = self.b.apply("layernorm", [x], params=params, axis=a)
        if not any(o in self.used for o in node.output[1:] if o):
            return y
        # the Mean and InvStdDev outputs, composed: mean, 1/sqrt(mean((x - mean)^2) + eps)
        axes = list(range(a, len(s)))
        ax = axes if len(axes) > 1 else axes[0]
        mean = self.b.apply("reduce_mean", [x], axis=ax, keepdims=True)
        d = self.b.apply("sub", [x, mean])
        var = self.b.apply("reduce_mean", [self.b.apply("mul", [d, d])], axis=ax, keepdims=True)
        eps = self.materialize(PendingConst(params["eps"], "epsilon"))
        one = self.materialize(PendingConst(np.float64(1.0), "one"))
        inv = self.b.apply("div", [one, self.b.apply("sqrt", [self.b.apply("add", [var, eps])])])
        return [y, mean, inv]

    def batchnorm(self, ins, A, node):
        x = self.t(ins[0])
        if int(A.get("training_mode", 0)):
            raise Unsupported("training_mode=1 (batch statistics)")
        if len([o for o in node.output if o]) > 1:
            raise Unsupported("running-statistics outputs are used")
        if "spatial" in A and int(A["spatial"]) != 1:
            raise Unsupported("spatial=0")
        vals = {}
        for key, i in (("gamma", 1), ("beta", 2), ("mean", 3), ("var", 4)):
            vals[key] = np.asarray(self.const_in(node, ins, i, key), np.float64).reshape(-1)
        vals["eps"] = np.float64(np.float32(A.get("epsilon", 1e-5)))
        return self.b.apply("batchnorm_eval", [x], params=vals, axis=self.b.axis(1, x))

    def _window(self, A, d):
        """ONNX window attributes of a d-d Conv/Pool as IR attributes: padding as the
        begins-then-ends list (asymmetric allowed) and auto_pad passed through."""
        ap = A.get("auto_pad", "NOTSET")
        if ap not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
            raise Unsupported(f"auto_pad={ap!r}")
        out = dict(stride=[int(t) for t in A.get("strides", [1] * d)],
                   dilation=[int(t) for t in A.get("dilations", [1] * d)], auto_pad=ap)
        if ap == "NOTSET":
            pads = [int(t) for t in A.get("pads", [0] * (2 * d))]
            if len(pads) != 2 * d:
                raise Unsupported(f"pads {pads} for a {d}-d window")
            out["padding"] = pads if pads[:d] != pads[d:] else pads[:d]
        return out

    def _ir_shape(self, op, s, attrs):
        return ir_shape(op, s, attrs)

    def conv(self, ins, A, node):
        x = self.t(ins[0])
        w = np.asarray(self.const_in(node, ins, 1, "weight W"), np.float64)
        d = w.ndim - 2
        op = {1: "conv1d", 2: "conv2d", 3: "conv3d"}.get(d)
        if op is None or op not in OPS:
            raise Unsupported(f"weight of rank {w.ndim}: {d}-d convolution is not in the IR")
        k = [int(t) for t in A.get("kernel_shape", w.shape[2:])]
        params = {"weight": w}
        if len(ins) > 2 and ins[2] is not None:
            params["bias"] = np.asarray(self.const_in(node, ins, 2, "bias B"), np.float64)
        attrs = dict(kernel_size=k, out_channels=int(w.shape[0]), groups=int(A.get("group", 1)),
                     **self._window(A, d))
        out = self._ir_shape(op, self.b.shape(x.id), attrs)
        return Batched(self.b.add(op, [x.id], out_shape=out, params=params, **attrs), x.nb)

    def pool(self, op, x, A, node):
        k = [int(t) for t in A["kernel_shape"]]
        d = len(k)
        irop = {"MaxPool": "max_pool", "AveragePool": "avg_pool"}[op] + f"{d}d"
        if irop not in OPS:
            raise Unsupported(f"kernel_shape {k}: {d}-d pooling is not in the IR")
        attrs = dict(kernel_size=k, ceil_mode=bool(int(A.get("ceil_mode", 0))),
                     **self._window(A, d))
        if op == "MaxPool":
            if int(A.get("storage_order", 0)):
                raise Unsupported("storage_order=1")
        else:
            attrs["count_include_pad"] = bool(int(A.get("count_include_pad", 0)))
        self._ir_shape(irop, self.b.shape(x.id), attrs)
        return self.b.apply(irop, [x], **attrs)

    def reduce(self, op, ins, A):
        x = self.t(ins[0])
        axes_input_opset = 13 if op == "ReduceSum" else 18
        if self.opset >= axes_input_opset and len(ins) > 1 and ins[1] is not None:
            axes = [int(a) for a in np.asarray(self._axes_value(ins[1])).reshape(-1)]
        else:
            axes = [int(a) for a in A.get("axes", [])]
        if not axes and int(A.get("noop_with_empty_axes", 0)):
            return x
        return self.b.reduce("reduce_sum" if op == "ReduceSum" else "reduce_mean", x,
                             axes or None, bool(int(A.get("keepdims", 1))))

    def _axes_value(self, v):
        if not isinstance(v, PendingConst):
            raise Unsupported("axes must be an initializer or Constant")
        return v.value

    def _target(self, value, x, op, keep=0):
        """A shape operand as ints; batch extents (from ``Shape``) are allowed only in
        front, each at its own axis, and become ``keep`` (0: copy the axis, 1: no expand)."""
        flat = list(np.asarray(value).reshape(-1))
        out = []
        for k, t in enumerate(flat):
            if isinstance(t, BatchDim):
                if k < x.nb and t == BatchDim(k):
                    out.append(keep)
                    continue
                raise Unsupported(f"{op} to {flat}: entry {k} is {t!r}, a batch extent at "
                                  f"another axis (it merges or moves the batch axis; the IR "
                                  f"works per example)")
            out.append(int(t))
        return out

    def reshape(self, ins, A):
        x = self.t(ins[0])
        if not isinstance(ins[1], PendingConst):
            raise Unsupported("shape input computed at run time (Shape/Gather/...); the IR "
                              "needs a constant shape")
        target = self._target(ins[1].value, x, "Reshape")
        allowzero = int(A.get("allowzero", 0))
        s = self.b.shape(x.id)
        full_in = [None] * x.nb + list(s)
        lead, rest = target[:x.nb], target[x.nb:]
        for k, t in enumerate(lead):
            # -1 keeps the batch axis only when the rest holds exactly one example
            rest_total = int(np.prod([full_in[x.nb + i] if (r == 0 and not allowzero) else r
                                      for i, r in enumerate(rest)], dtype=np.int64))
            whole = t == -1 and -1 not in rest and 0 not in rest[len(s):] and \
                rest_total == int(np.prod(s, dtype=np.int64))
            ok = (t == 0 and not allowzero) or whole or \
                (self.batch is not None and t == self.batch[k])
            if not ok:
                raise Unsupported(f"shape {target} does not keep batch axis {k} (use 0 or -1 "
                                  f"there)")
        per = [full_in[x.nb + i] if (t == 0 and not allowzero) else t for i, t in enumerate(rest)]
        if not allowzero and any(t == 0 and x.nb + i >= len(full_in) for i, t in enumerate(rest)):
            raise Unsupported(f"shape {target}: 0 copies an axis beyond the input's rank")
        return self.b.apply("reshape", [x], shape=per)


# ---------------------------------------------------------------- the converter table
# One entry per ONNX op: ``f(conv, node, ins, A) -> list of output values`` (the shape of
# :data:`.onnx_ops.CONVERTERS`, whose network ops are merged in below).
def _constant(conv, node, ins, A):
    if "value" in A:
        return [PendingConst(_tensor_array(conv.nh, A["value"], "Constant value"),
                             node.output[0])]
    for key, dt in (("value_float", np.float32), ("value_floats", np.float32),
                    ("value_int", np.int64), ("value_ints", np.int64)):
        if key in A:
            return [PendingConst(np.asarray(A[key], dtype=dt), node.output[0])]
    raise Unsupported(f"Constant with attributes {sorted(A)} (value, value_float(s), "
                      f"value_int(s) are read)")


def _identity(conv, node, ins, A):
    return [ins[0]]


def _dropout(conv, node, ins, A):
    if len(node.input) > 2 and node.input[2]:
        if bool(np.asarray(conv.const_in(node, ins, 2, "training_mode"))):
            raise Unsupported("Dropout with training_mode=true")
    if len(node.output) > 1 and node.output[1] in conv.used:
        # inference: the mask keeps every entry (all true), a constant per example
        x = conv.t(ins[0])
        ones = conv.materialize(PendingConst(np.ones(conv.b.shape(x.id)), "mask"))
        return [ins[0], Batched(ones.id, x.nb)]
    return [ins[0]]


def _unary(irop, attributes=True):
    """An elementwise ONNX op that is one IR op; ``attributes=False``: the ONNX op's
    optional attributes change the function, so any given one is refused."""
    def f(conv, node, ins, A):
        if A and not attributes:
            raise Unsupported(f"attributes {sorted(A)}")
        return [conv.b.apply(irop, [conv.t(ins[0])])]
    return f


def _gelu(conv, node, ins, A):
    exact_gelu_only(A.get("approximate", "none"), "Gelu")
    return [conv.b.apply("gelu", [conv.t(ins[0])])]


def _binary(irop, variadic=False):
    """A two-operand ONNX op that is one IR op; ``variadic``: ONNX allows any number of
    inputs, folded left to right (one rounding per pair, as a sequential reduction)."""
    def f(conv, node, ins, A):
        if variadic and len(ins) != 2:
            vals = [v for v in ins if v is not None]
            acc = conv.t(vals[0])
            for v in vals[1:]:
                acc = conv.binary(irop, acc, v)
            return [acc]
        if len(ins) != 2:
            raise Unsupported(f"{len(ins)} inputs (the IR's {irop} takes 2)")
        return [conv.binary(irop, ins[0], ins[1])]
    return f


def _matmul(conv, node, ins, A):
    a, b = conv.aligned(ins[0], ins[1], matmul=True)
    return [conv.b.apply("matmul", [a, b])]


def _gemm(conv, node, ins, A):
    return [conv.gemm(ins, A)]


def _reciprocal(conv, node, ins, A):
    x = conv.t(ins[0])
    return [conv.b.apply("div", [conv.materialize(PendingConst(np.float64(1.0), "one")), x])]


def _expand(conv, node, ins, A):
    return [conv.expand(ins)]


def _softmax(conv, node, ins, A):
    return [conv.softmax(node.op_type, conv.t(ins[0]), A)]


def _layernorm(conv, node, ins, A):
    r = conv.layernorm(ins, A, node)
    return r if isinstance(r, list) else [r]


def _batchnorm(conv, node, ins, A):
    return [conv.batchnorm(ins, A, node)]


def _conv(conv, node, ins, A):
    return [conv.with_channels_first(conv.t(ins[0]),
                                     lambda v: conv.conv([v] + ins[1:], A, node), "Conv")]


def _pool(conv, node, ins, A):
    op = node.op_type
    return [conv.with_channels_first(conv.t(ins[0]), lambda v: conv.pool(op, v, A, node), op)]


def _concat(conv, node, ins, A):
    return [conv.b.concat([conv.t(v) for v in ins], A["axis"])]


def _reduce(conv, node, ins, A):
    return [conv.reduce(node.op_type, ins, A)]


def _transpose(conv, node, ins, A):
    x = conv.t(ins[0])
    r = conv.b.rank(x)
    return [conv.b.permute(x, A.get("perm", range(r - 1, -1, -1)))]


def _reshape(conv, node, ins, A):
    try:
        return [conv.reshape(ins, A)]
    except Unsupported:
        if not (isinstance(ins[0], Batched) and ins[0].nb):
            raise
        return moved(conv, node, ins, A)   # merges/moves the batch axis: a layout


def _cast(conv, node, ins, A):
    # to a float type: the IR value is already a real number, evaluated in the context's
    # own format (a float32 model's float32 casts are no-ops there)
    to = A.get("to")
    if to in (1, 11):
        return [ins[0]]
    x = conv.t(ins[0])
    if to == 9:
        # to bool: nonzero is true (1), zero false (0): exact
        zero = conv.materialize(PendingConst(np.float64(0.0), "zero"))
        return [conv.b.apply("ne", [x, zero])]
    if to in _INTEGER_TYPES:
        # to an integer type: truncation toward zero, exact in every context (values past
        # the integer type's range are undefined in ONNX and not checked here)
        return [conv.b.apply("trunc", [x])]
    raise Unsupported(f"Cast to {conv.onnx.TensorProto.DataType.Name(to)} of a tensor (the "
                      f"IR's values are real numbers in the context's format)")


def _flatten(conv, node, ins, A):
    x = conv.t(ins[0])
    s = conv.b.shape(x.id)
    r = len(s) + x.nb
    a = int(A.get("axis", 1))
    a = a + r if a < 0 else a
    if x.nb and a == x.nb and r > x.nb:     # [N, prod(rest)]: per-example flatten
        return [conv.b.apply("flatten", [x], start_axis=0, end_axis=-1)]
    if x.nb == 0:
        lead = int(np.prod(s[:a], dtype=np.int64))
        return [conv.b.apply("reshape", [x], shape=[lead, int(np.prod(s[a:], dtype=np.int64))])]
    raise Unsupported(f"Flatten(axis={A.get('axis', 1)}) merges batch axes with "
                      f"per-example axes")


_CORE = {
    "Gemm": _gemm, "MatMul": _matmul,
    **{op: _binary(ir, variadic=op in ("Max", "Min")) for op, ir in _BINARY.items()},
    **{op: _unary(ir, attributes=op != "Softplus") for op, ir in _UNARY.items()},
    "Gelu": _gelu, "Softmax": _softmax, "LogSoftmax": _softmax,
    "LayerNormalization": _layernorm, "BatchNormalization": _batchnorm, "Conv": _conv,
    "MaxPool": _pool, "AveragePool": _pool, "Concat": _concat,
    "ReduceSum": _reduce, "ReduceMean": _reduce, "Transpose": _transpose,
    "Reshape": _reshape, "Flatten": _flatten, "Identity": _identity, "Dropout": _dropout,
    "Constant": _constant, "Reciprocal": _reciprocal, "Expand": _expand, "Cast": _cast,
}
#: ONNX op -> converter: the core ops above, then the network ops of :mod:`.onnx_ops`
#: whose IR ops exist (those take precedence: their Gelu also maps approximate='tanh'),
#: then the compositions of :mod:`.onnx_ops_spatial` (ConvTranspose, Resize, ...) and the
#: unrolled recurrent layers of :mod:`.onnx_ops_recurrent`, and the small ops of
#: :mod:`.onnx_ops_compose` written as their ONNX definitions (Celu, Sign, Hardmax, ...)
CONVERTERS = {**_CORE, **_network_converters(), **_SPATIAL, **_RECURRENT, **_composed()}
#: the ONNX ops the importer claims (tests run ONNX's own cases of each)
SUPPORTED = tuple(op for op in CONVERTERS if op not in _PASSED_THROUGH) + _FOLDED_ONLY
