"""The IR-builder interpreter: lower a program to the canonical IR (``graph.Graph`` +
``graph.Payload``).

References are :class:`IRRef` (an IR node id and its shape) or :class:`ParamRef` (a model
parameter value).  The IR keeps parameters in the payload, keyed by node id, so a
``ParamRef`` used as ``linear``'s ``W``/``b`` becomes that node's payload entry and a
``ParamRef`` used as an ordinary operand becomes a ``const`` node (created once).  What the
IR cannot express is a :class:`LoweringError` naming the op: an op outside the op table,
an op without a forward rule (``input`` through ``apply``), or a payload parameter that is
computed by the program instead of being a parameter.  The result is validated with the
graph package's own two checks before it is returned.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scalarlab.graph.errors import GraphError
from scalarlab.graph.node import Graph, Node, OpKind
from scalarlab.graph.optable import OPS
from scalarlab.graph.payload import Payload, normalize_value, value_shape
from scalarlab.graph.validate import check_payload, check_shapes, check_well_formed

from .op_checks import check_op_shapes, resolve_attrs, split_args
from .errors import TapeError
from .interpreters import flatten, unflatten
from .ops_interface import Ops


class LoweringError(TapeError):
    """A program uses something the canonical IR cannot express."""


@dataclass(frozen=True)
class IRRef:
    id: int
    shape: tuple


@dataclass(eq=False)
class ParamRef:
    """A model parameter: a payload value until an op needs it as a node."""

    value: Any
    name: str
    shape: tuple
    node: Any = None        # IRRef of its const node, once materialised


def _raw_shape(value) -> tuple:
    return tuple(value_shape(normalize_value(value)))


class IRBuilderOps(Ops):
    """Collects IR nodes and payload entries while the program runs."""

    interpreter = "ir"

    def __init__(self):
        self.nodes: list = []
        self.payload: dict = {}

    def _push(self, parents, kind, shape) -> IRRef:
        i = len(self.nodes)
        self.nodes.append(Node(i, list(parents), kind, list(shape)))
        return IRRef(i, tuple(shape))

    def input(self, shape) -> IRRef:
        return self._push([], OpKind("input"), tuple(shape))

    def param(self, value, name: str = "param") -> ParamRef:
        return ParamRef(value, name, _raw_shape(value))

    def const(self, value: Any, name: str = "const") -> IRRef:
        ref = self._push([], OpKind("const"), _raw_shape(value))
        self.payload[ref.id] = {"value": value}
        return ref

    def _node(self, ref, where: str) -> IRRef:
        if isinstance(ref, IRRef):
            return ref
        if isinstance(ref, ParamRef):
            if ref.node is None:
                ref.node = self.const(ref.value, ref.name)
            return ref.node
        raise LoweringError(f"{where}: expected an IR reference, got {type(ref).__name__}")

    def detach(self, ref) -> IRRef:
        r = self._node(ref, "lowering detach")
        return self._push([r.id], OpKind("detach"), r.shape)

    def shape(self, ref) -> tuple:
        return ref.shape

    def apply(self, op: str, *refs, **attrs) -> IRRef:
        where = f"lowering to IR node {len(self.nodes)}"
        rec = OPS.get(op)
        if rec is None:
            raise LoweringError(f"{where}: op {op!r} cannot be expressed in the IR: it is not "
                                f"in the op table")
        if rec.forward is None:
            raise LoweringError(f"{where}: op {op} cannot be expressed through apply: it has "
                                f"no forward rule (graph inputs come from the program's x)")
        full = resolve_attrs(rec, attrs, where)
        k = split_args(rec, len(refs), where)
        parents = [self._node(r, f"{where} ({op})") for r in refs[:k]]
        params = {}
        for pname, r in zip(rec.params, refs[k:]):
            if isinstance(r, ParamRef):
                params[pname] = r.value
            elif isinstance(r, IRRef) and r.id in self.payload and \
                    self.nodes[r.id].kind.op == "const":
                params[pname] = self.payload[r.id]["value"]
            else:
                raise LoweringError(
                    f"{where}: op {op} cannot be expressed in the IR: its parameter {pname} "
                    f"is computed by node {getattr(r, 'id', r)!r} "
                    f"({self.nodes[r.id].kind.op if isinstance(r, IRRef) else '?'}), but the IR "
                    f"reads {op} parameters from the payload")
        pshapes = [_raw_shape(v) for v in params.values()]
        out = check_op_shapes(rec, [p.shape for p in parents], pshapes, full, where)
        given = {a: v for a, v in full.items() if a in attrs}
        ref = self._push([p.id for p in parents], OpKind(op, **given), out)
        if params:
            self.payload[ref.id] = params
        return ref


def lower(program, input_shape, params, check: bool = True):
    """Lower ``program(ops, x, params)`` to ``(graph.Graph, graph.Payload)``.

    ``params`` are concrete parameter values (any tree of lists/dicts); they land in the
    payload.  The graph's output is the program's result; its input is ``x``.
    """
    ops = IRBuilderOps()
    x = ops.input(tuple(input_shape))
    leaves, recipe = flatten(params)
    prefs = unflatten(recipe, [ops.param(v, f"param{i}") for i, v in enumerate(leaves)])
    out = program(ops, x, prefs)
    out = ops._node(out, "lowering output")
    g = Graph(ops.nodes, output=out.id)
    payload = Payload(ops.payload)
    if check:
        try:
            check_well_formed(g)
            check_shapes(g)
            check_payload(g, payload)
        except GraphError as exc:
            raise LoweringError(f"lowered graph failed validation: {exc}") from None
    return g, payload
