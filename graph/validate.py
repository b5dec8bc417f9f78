"""The two validation levels of the seeds, plus the payload check of the evaluator.

* :func:`check_well_formed` — structure only: id = array position, parents earlier,
  arity per op, output id exists.
* :func:`check_shapes` — runs each op's shape rule on the DECLARED parent shapes and
  compares with the node's declared shape (left to right, first error wins).
* :func:`check_payload` — payload entries agree with their nodes (the ``IR eval:`` errors).

Each raises :class:`GraphError` naming the node, the field and both values.
"""
from __future__ import annotations

from .errors import GraphError
from .node import Graph, fmt_shape
from .optable import OPS, ShapeRuleError, full_attrs


def _graph(g) -> Graph:
    if not isinstance(g, Graph):
        raise GraphError(f"IR graph: expected a Graph, got {type(g).__name__}")
    return g


def _arity_text(lo, hi) -> str:
    if hi == lo:
        return f"{lo} parent" + ("" if lo == 1 else "s")
    if hi is None:
        return f"at least {lo} parents"
    return f"{lo} to {hi} parents"


def check_well_formed(g: Graph) -> None:
    """Ids equal positions, parents precede their node, arity suits the op."""
    g = _graph(g)
    for i, n in enumerate(g.nodes):
        if n.id != i:
            raise GraphError(f"IR graph: id discipline violated at index {i}: nodes[{i}].id = {n.id}")
        for p in n.parents:
            if not (0 <= p < i):
                if p < 0:
                    raise GraphError(f"IR graph: node {i}: parent id {p} is negative ({n!r})")
                raise GraphError(f"IR graph: node {i}: parent id {p} is not < {i} ({n!r})")
        rec = OPS.get(n.kind.op)
        if rec is None:
            raise GraphError(f"IR graph: node {i}: unknown op {n.kind.op!r} ({n!r})")
        lo, hi = rec.arity
        k = len(n.parents)
        if k < lo or (hi is not None and k > hi):
            raise GraphError(f"IR graph: node {i}: arity mismatch: {n.kind.op} takes "
                             f"{_arity_text(lo, hi)}, got {k} ({n!r})")
    if g.nodes and not (0 <= g.output < len(g.nodes)):
        raise GraphError(f"IR graph: output id {g.output} is not a node id (graph has "
                         f"{len(g.nodes)} nodes)")
    if not g.nodes:
        raise GraphError("IR graph: the graph has no nodes")


def infer_node(g: Graph, i: int):
    """Inferred per-example shape of node ``i`` from its parents' declared shapes."""
    n = g.nodes[i]
    rec = OPS[n.kind.op]
    try:
        attrs = full_attrs(rec, n.kind.attrs)
        return tuple(rec.shape([g.nodes[p].out_shape for p in n.parents], attrs,
                               declared=n.out_shape))
    except ShapeRuleError as exc:
        raise GraphError(f"IR graph: node {i}: {exc} ({n!r})") from None


def infer_shapes(g: Graph) -> list:
    """Well-formedness, then every node's inferred shape (list of tuples)."""
    check_well_formed(g)
    return [infer_node(g, i) for i in range(len(g.nodes))]


def check_shapes(g: Graph) -> None:
    """Shape inference vs the declared ``out_shape`` of every node (structure checked first)."""
    check_well_formed(g)
    for i, n in enumerate(g.nodes):
        inferred = infer_node(g, i)
        if inferred != n.out_shape:
            raise GraphError(f"IR graph: node {i}: outShape mismatch: inferred={fmt_shape(inferred)}, "
                             f"declared={fmt_shape(n.out_shape)} ({n!r})")
    g._checked = True


def ensure_valid(g: Graph) -> None:
    """Both levels, once per Graph object (graphs are immutable)."""
    if not _graph(g)._checked:
        check_shapes(g)


def check_payload(g: Graph, payload) -> None:
    """Every payload node has the entry its op needs, of the right shapes; no stray entries.

    Messages follow the seed's evaluator: ``IR eval: linear 1: declared outShape mismatch:
    [5] vs expected [3]``.
    """
    from .payload import Payload, value_shape
    ensure_valid(g)
    if not isinstance(payload, Payload):
        payload = Payload(payload)
    for n in g.nodes:
        rec = OPS[n.kind.op]
        where = f"IR eval: {n.kind.op} {n.id}"
        if not rec.params:
            if n.id in payload:
                raise GraphError(f"{where}: has a payload entry but {n.kind.op} takes no payload")
            continue
        entry_op = payload.op_of(n.id)
        if entry_op is not None and entry_op != n.kind.op:
            raise GraphError(f"{where}: payload entry is a {entry_op} record, node is {n.kind.op}")
        params = payload.get(n.id)
        if params is None:
            missing = [p for p in rec.params if p not in rec.param_defaults]
            if missing:
                raise GraphError(f"{where}: no payload entry for node {n.id} "
                                 f"(needs {', '.join(missing)})")
            params = {}
        unknown = [k for k in params if k not in rec.params]
        if unknown:
            raise GraphError(f"{where}: unknown payload field {unknown[0]!r} "
                             f"(expected {', '.join(rec.params)})")
        given = {k: value_shape(v) for k, v in params.items()}
        in_shapes = [g.nodes[p].out_shape for p in n.parents]
        attrs = full_attrs(rec, n.kind.attrs)
        try:
            if rec.check_payload is not None:
                rec.check_payload(in_shapes, attrs, n.out_shape, given)
            expected = rec.param_shapes(in_shapes, attrs, n.out_shape)
            for name in rec.params:
                if name not in given:
                    if name not in rec.param_defaults:
                        raise ShapeRuleError(f"missing payload {name}")
                    continue
                if tuple(given[name]) != tuple(expected[name]):
                    raise ShapeRuleError(f"payload {name} shape mismatch: {fmt_shape(given[name])} "
                                         f"vs expected {fmt_shape(expected[name])}")
        except ShapeRuleError as exc:
            raise GraphError(f"{where}: {exc}") from None
    ids = {n.id for n in g.nodes}
    for k in payload.ids():
        if k not in ids:
            raise GraphError(f"IR eval: payload entry {k} names no node (graph has "
                             f"{len(g.nodes)} nodes)")
