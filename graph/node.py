"""The IR records: :class:`OpKind` (op tag + attributes), :class:`Node`, :class:`Graph`.

A graph is plain data: ids, parent ids, op tags and declared shapes are not trusted until
:func:`graph.validate.check_well_formed` and :func:`graph.validate.check_shapes` ran, so
an importer can build a candidate graph from any document first.  Constructors only
normalise types (raising :class:`GraphError` on values of the wrong type).
"""
from __future__ import annotations

from .errors import GraphError


def fmt_shape(shape) -> str:
    """``[2, 3, 4]`` / ``[]``: the shape spelling used by every message and printer."""
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _freeze(v):
    """Attribute values become hashable: lists -> tuples (recursively)."""
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(t) for t in v)
    if isinstance(v, dict):
        raise GraphError(f"attribute values must be numbers, strings, booleans or lists, got {v!r}")
    return v


def _fmt_attr(v) -> str:
    if isinstance(v, tuple):
        return "[" + ", ".join(_fmt_attr(t) for t in v) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "none"
    return str(v)


class OpKind:
    """An op tag with op-local attributes: ``OpKind("softmax", axis=1)``.

    Printed as in the seed listings: ``relu``, ``softmax(axis=1)``,
    ``linear(payload=node_id)`` (payload ops say where their tensors live).
    """

    __slots__ = ("op", "attrs")

    def __init__(self, op, **attrs):
        if not isinstance(op, str):
            raise GraphError(f"op name must be a string, got {op!r}")
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "attrs", {k: _freeze(v) for k, v in attrs.items()})

    def __setattr__(self, name, value):
        raise AttributeError("OpKind is immutable")

    def __eq__(self, other):
        return isinstance(other, OpKind) and self.op == other.op and self.attrs == other.attrs

    def __hash__(self):
        return hash((self.op, tuple(sorted(self.attrs.items()))))

    def __str__(self):
        from .optable import OPS
        parts = [f"{k}={_fmt_attr(v)}" for k, v in self.attrs.items()]
        rec = OPS.get(self.op)
        if rec is not None and rec.params:
            parts.append("payload=node_id")
        return self.op + (f"({', '.join(parts)})" if parts else "")

    def __repr__(self):
        args = "".join(f", {k}={v!r}" for k, v in self.attrs.items())
        return f"OpKind({self.op!r}{args})"


_PLAIN: dict = {}


def as_kind(kind) -> OpKind:
    """An OpKind from an OpKind or an op name (plain kinds are shared: they are immutable)."""
    if isinstance(kind, OpKind):
        return kind
    if isinstance(kind, str):
        k = _PLAIN.get(kind)
        if k is None:
            k = _PLAIN.setdefault(kind, OpKind(kind))
        return k
    raise GraphError(f"node kind must be an OpKind or an op name, got {kind!r}")


class Node:
    """One node: ``Node(id, parents, kind, out_shape)``.  Edges are the parent ids."""

    __slots__ = ("id", "parents", "kind", "out_shape")

    def __init__(self, id, parents, kind, out_shape):
        if type(id) is not int and not _is_int(id):
            raise GraphError(f"IR graph: node id must be an int, got {id!r}")
        if isinstance(parents, (str, bytes)) or not hasattr(parents, "__iter__"):
            raise GraphError(f"IR graph: node {id}: parents must be a list of ints, got {parents!r}")
        parents = tuple(parents)
        for p in parents:
            if type(p) is not int and not _is_int(p):
                raise GraphError(f"IR graph: node {id}: parents must be a list of ints, got "
                                 f"{list(parents)!r}")
        if isinstance(out_shape, (str, bytes)) or not hasattr(out_shape, "__iter__"):
            raise GraphError(f"IR graph: node {id}: out_shape must be a list of ints, got {out_shape!r}")
        out_shape = tuple(out_shape)
        for d in out_shape:
            if not (type(d) is int or _is_int(d)) or d < 0:
                raise GraphError(f"IR graph: node {id}: out_shape must be a list of non-negative "
                                 f"ints, got {list(out_shape)!r}")
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "parents", parents)
        object.__setattr__(self, "kind", kind if type(kind) is OpKind else as_kind(kind))
        object.__setattr__(self, "out_shape", out_shape)

    def __setattr__(self, name, value):
        raise AttributeError("Node is immutable; build a new one (Node.replace)")

    @property
    def op(self) -> str:
        return self.kind.op

    def replace(self, **changes) -> "Node":
        fields = dict(id=self.id, parents=self.parents, kind=self.kind, out_shape=self.out_shape)
        fields.update(changes)
        return Node(**fields)

    def __eq__(self, other):
        return (isinstance(other, Node) and self.id == other.id and self.parents == other.parents
                and self.kind == other.kind and self.out_shape == other.out_shape)

    def __hash__(self):
        return hash((self.id, self.parents, self.kind, self.out_shape))

    def __repr__(self):
        ps = "#[" + ", ".join(str(p) for p in self.parents) + "]"
        return f"Node(id={self.id}, kind={self.kind}, parents={ps}, outShape={fmt_shape(self.out_shape)})"


class Graph:
    """``Graph(nodes, output=None)``: the node array (ids = positions) and the output id
    (default: the last node).  Array order is a topological order."""

    __slots__ = ("nodes", "output", "_checked")

    def __init__(self, nodes, output=None):
        if isinstance(nodes, (str, bytes)) or not hasattr(nodes, "__iter__"):
            raise GraphError(f"IR graph: nodes must be a list of Node, got {nodes!r}")
        nodes = tuple(nodes)
        for i, n in enumerate(nodes):
            if not isinstance(n, Node):
                raise GraphError(f"IR graph: nodes[{i}] is not a Node: {n!r}")
        if output is None:
            output = len(nodes) - 1 if nodes else None
        elif not _is_int(output):
            raise GraphError(f"IR graph: output must be a node id (int), got {output!r}")
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "output", output)
        object.__setattr__(self, "_checked", False)

    def __setattr__(self, name, value):
        if name == "_checked":
            object.__setattr__(self, name, value)
            return
        raise AttributeError("Graph is immutable; build a new one")

    def __len__(self):
        return len(self.nodes)

    def __getitem__(self, i) -> Node:
        return self.nodes[i]

    def __iter__(self):
        return iter(self.nodes)

    def __eq__(self, other):
        return isinstance(other, Graph) and self.nodes == other.nodes and self.output == other.output

    def __hash__(self):
        return hash((self.nodes, self.output))

    def with_nodes(self, nodes, output=None) -> "Graph":
        return Graph(nodes, self.output if output is None else output)

    def input_ids(self) -> list:
        return [n.id for n in self.nodes if n.kind.op == "input"]

    def __repr__(self):
        return f"Graph({len(self.nodes)} nodes, output={self.output})"
