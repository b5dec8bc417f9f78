"""What model interchange shares: the torch and ONNX importers and the ONNX exporter.

* :class:`UnsupportedOpsError` (all unmappable operations of a model, listed at once) and
  :class:`Unsupported` (one node's reason, collected by the importer's node loop);
* :func:`require`: an optional dependency (torch, onnx), or an error naming the extra;
* :class:`IRBuilder`: appends IR nodes, checking each shape the source model reports
  against the op table's rule, and translates the source's batched tensors to the IR's
  per-example values (:class:`Batched`): axes, permutations, concatenations and
  reductions that would mix examples are refused with the reason;
* :class:`Batched` may carry a ``graph.batch_layout.Layout`` when a source transpose or
  reshape moved or merged its batch axes (the ONNX importer's ``onnx_layout``);
* :class:`PendingConst`: a source constant (ONNX initializer, torch module tensor) that
  becomes a ``const`` node only when an op uses it as a tensor;
* :func:`pair_list`, :func:`param_shape` and :func:`payload_field`: 2-d window
  attributes, and payload fields (or their op-table defaults) as float64 arrays of the
  shape the op table gives them, for export.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import GraphError
from ..node import Graph, Node, OpKind, fmt_shape
from ..optable import OPS, ShapeRuleError, full_attrs, get_op
from ..payload import Payload
from ..validate import check_payload, check_shapes


class UnsupportedOpsError(GraphError):
    """A model holds operations that cannot be mapped; ``.items`` lists each one."""

    def __init__(self, source: str, items):
        self.items = list(items)
        lines = "\n".join(f"  - {t}" for t in self.items)
        super().__init__(f"{source}: {len(self.items)} unsupported operation"
                         f"{'' if len(self.items) == 1 else 's'}:\n{lines}")


class Unsupported(Exception):
    """Raised by one node's converter; the importer collects the reasons."""


def require(module: str, extra: str):
    """Import an optional dependency or raise a GraphError naming the extra to install."""
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError:
        raise GraphError(f"{module} is not installed; install the optional extra: "
                         f"pip install 'scalarlab[{extra}]'") from None


@dataclass
class Batched:
    """A source tensor as an IR value: node id and the number of leading batch axes the
    source tensor carries in front of the node's per-example shape (0 for constants)."""
    id: int
    nb: int
    layout: object = None      # a graph.batch_layout.Layout when a source op moved the batch axes


@dataclass
class PendingConst:
    """A source constant (ONNX initializer or Constant, torch module tensor) with its
    source name; ``id`` is its ``const`` node once an op has used it as a tensor."""
    value: object
    name: str
    id: int = None


def exact_gelu_only(approximate, spelled: str) -> None:
    """The IR's gelu is the exact erf form; a tanh approximation is another function."""
    if approximate != "none":
        raise Unsupported(f"{spelled}(approximate={approximate!r}) is a different function "
                          f"from the IR's exact erf gelu")


def pair_list(v) -> list:
    """A 2-d window attribute (kernel, stride, padding, dilation) as ``[int, int]``."""
    if isinstance(v, (list, tuple)):
        return [int(t) for t in v]
    return [int(v), int(v)]


def param_shape(g: Graph, node, name: str) -> tuple:
    """The shape the op table gives payload field ``name`` of ``node`` in ``g``."""
    rec = OPS[node.kind.op]
    in_shapes = [g.nodes[p].out_shape for p in node.parents]
    return tuple(rec.param_shapes(in_shapes, full_attrs(rec, node.kind.attrs),
                                  node.out_shape)[name])


class IRBuilder:
    """Appends IR nodes (ids = positions), inferring each node's shape with the op table's
    own rule and comparing it with the shape the source model reports.

    ``batch_dims``: how many leading axes of the source's inputs are batch axes; the
    :class:`Batched` helpers translate source axes to per-example axes with it.
    """

    def __init__(self, batch_dims: int = 0):
        self.nodes: list[Node] = []
        self.payload = Payload()
        self.batch_dims = batch_dims

    # ------------------------------------------------------------ plain IR nodes
    def add(self, op, parents, *, out_shape=None, params=None, **attrs) -> int:
        rec = get_op(op)
        kind = OpKind(op, **attrs)
        in_shapes = [self.nodes[p].out_shape for p in parents]
        try:
            fa = full_attrs(rec, kind.attrs)
            if op in ("input", "const"):
                inferred = tuple(out_shape)
            elif op in ("linear", "conv2d") and out_shape is None:
                raise ShapeRuleError(f"{op}: the importer must give the out shape")
            else:
                inferred = tuple(rec.shape(in_shapes, fa, declared=out_shape))
        except ShapeRuleError as exc:
            raise Unsupported(f"IR rule rejects it: {exc}") from None
        if out_shape is not None and tuple(out_shape) != inferred:
            raise Unsupported(f"per-example shape {fmt_shape(inferred)} by the IR rule, "
                              f"{fmt_shape(out_shape)} in the source model")
        i = len(self.nodes)
        self.nodes.append(Node(i, list(parents), kind, inferred))
        if params:
            self.payload.set(i, params, op=op)
        return i

    def const(self, value) -> int:
        v = np.asarray(value, dtype=np.float64)
        return self.add("const", [], out_shape=v.shape, params={"value": v})

    def shape(self, i) -> tuple:
        return self.nodes[i].out_shape

    def finish(self, output: int) -> tuple:
        g = Graph(self.nodes, output)
        check_shapes(g)
        check_payload(g, self.payload)
        return g, self.payload

    # ------------------------------------------------------------ batched values
    def apply(self, op, parents, *, out_shape=None, params=None, **attrs) -> Batched:
        """Node ``op`` of the :class:`Batched` ``parents``; batched if any parent is."""
        nb = max(p.nb for p in parents) if parents else 0
        return Batched(self.add(op, [p.id for p in parents], out_shape=out_shape,
                                params=params, **attrs), nb)

    def rank(self, v: Batched) -> int:
        """The source tensor's rank: batch axes plus per-example axes."""
        return len(self.shape(v.id)) + v.nb

    def axis(self, a, v: Batched, what="axis", rank=None) -> int:
        """Source axis ``a`` of ``v`` (negative counts from the end) as a per-example axis;
        a batch axis is refused (the IR evaluates each example on its own)."""
        r = self.rank(v) if rank is None else rank
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
            raise Unsupported(f"{what} must be an int, got {a!r}")
        a = int(a)
        if not -r <= a < max(r, 1):
            raise Unsupported(f"{what}={a} out of range for rank {r}")
        d = a + r if a < 0 else a
        if d < v.nb:
            raise Unsupported(f"{what}={a} is a batch axis (batch_dims={self.batch_dims}): "
                              f"the IR works per example")
        return d - v.nb

    def permute(self, v: Batched, perm, *, out_shape=None) -> Batched:
        """The source permutation ``perm`` (of all axes); it must keep the batch axes."""
        perm = list(perm)
        if perm[:v.nb] != list(range(v.nb)):
            raise Unsupported(f"perm {perm} moves a batch axis: the IR keeps batch axes in "
                              f"front and evaluates each example alone (exports of "
                              f"nn.MultiheadAttention move it; from_torch maps that module "
                              f"per example)")
        return self.apply("permute", [v], out_shape=out_shape,
                          perm=[p - v.nb for p in perm[v.nb:]])

    def concat(self, parts, axis, *, out_shape=None) -> Batched:
        """Concatenation along source ``axis`` of values that are all batched or all not."""
        if len({p.nb for p in parts}) > 1:
            raise Unsupported("concatenates a constant with a batched tensor")
        if len(parts) == 1:
            return parts[0]
        return self.apply("concat", parts, out_shape=out_shape, axis=self.axis(axis, parts[0]))

    def reduce(self, op: str, v: Batched, axes, keepdims: bool, *, out_shape=None) -> Batched:
        """``reduce_sum``/``reduce_mean`` over the source ``axes`` (None: all axes, which
        must not include a batch axis).  A sum over every per-example axis without
        keepdims is the IR's ``sum`` (its sequential total)."""
        s = self.shape(v.id)
        if axes is None:
            if v.nb:
                raise Unsupported("reduces over all axes, batch axes included (name the "
                                  "per-example axes)")
            per = list(range(len(s)))
        else:
            per = sorted(self.axis(a, v) for a in axes)
        if op == "reduce_sum" and not keepdims and per == list(range(len(s))) and s:
            return self.apply("sum", [v], out_shape=out_shape)
        return self.apply(op, [v], out_shape=out_shape,
                          axis=per if len(per) != 1 else per[0], keepdims=keepdims)


def payload_field(g: Graph, payload, node, name: str, ctx) -> np.ndarray:
    """Payload field ``name`` of ``node`` as a float64 array of its op-table shape.

    A given value is read by ``ctx.convert`` (exact forms -- decimal strings, rationals --
    with ONE correct rounding into the context's format: binary32 for a float32 export,
    float64 otherwise); an omitted optional field is the op table's default.  Interval and
    dual values have no single point value to export: :class:`Unsupported`.
    """
    rec = OPS[node.kind.op]
    shape = param_shape(g, node, name)
    fields = payload.get(node.id) or {}
    if name in fields:
        v = fields[name]
        if hasattr(v, "lo") or hasattr(v, "primal"):
            raise Unsupported(f"payload field {name!r} of node {node.id} is an interval/dual "
                              f"value; export endpoints or primals explicitly")
        val = ctx.convert(v)
    else:
        d = rec.param_defaults.get(name)
        if d is None:
            raise Unsupported(f"payload has no field {name!r} for node {node.id}")
        val = (ctx.zeros(shape) if d == "zeros" else ctx.ones(shape) if d == "ones"
               else ctx.full(shape, d) if shape else ctx.convert(d))
    # binary contexts hold float64 arrays whose entries are values of their format
    return np.asarray(ctx.to_float64(val), dtype=np.float64).reshape(shape)


def ir_shape(op: str, shape, attrs: dict):
    """The output shape the IR's rule for ``op`` gives an input of ``shape`` (the
    converters' check before they emit a node), or :class:`Unsupported` saying why not."""
    from ..optable import full_attrs, get_op
    rec = get_op(op)
    try:
        return rec.shape([shape], full_attrs(rec, attrs))
    except Exception as exc:
        raise Unsupported(f"IR rule rejects it: {exc}") from None
