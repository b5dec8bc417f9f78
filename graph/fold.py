"""The IR fold: ``denote_all`` runs a graph left to right under any scalar context.

One loop over the node array (ids are positions, parents are earlier), no recursion, so a
100,000-node chain evaluates.  Inputs may carry leading batch axes: every value in the
table then has the same batch axes in front of its node's per-example shape, and one call
over N samples equals N single calls (the rules only add ``nb`` to their axes).

This is the one evaluation loop of the IR: each node runs the op table's forward rule, or
the op's own ``interval`` rule in an interval context (IBP), or a kernel given per node
through the ``kernels`` hook (the kernel planner's ``run_planned``).
"""
from __future__ import annotations

import numpy as np

from scalarlab import scalars
from scalarlab.scalars.errors import ContextError, ScalarLabError

from .errors import GraphError
from .node import Graph, fmt_shape
from .optable import OPS, OpDataError, full_attrs
from .payload import as_payload, convert_value
from .validate import check_payload, ensure_valid


def _input_values(g: Graph, x, ctx) -> dict:
    ids = g.input_ids()
    if not ids:
        if x is not None:
            raise GraphError("IR eval: the graph has no input node but an input was given")
        return {}
    if isinstance(x, dict):
        missing = [i for i in ids if i not in x]
        extra = [k for k in x if k not in ids]
        if missing or extra:
            raise GraphError(f"IR eval: input dict keys {sorted(x, key=str)} do not match the "
                             f"input node ids {ids}")
        return {i: x[i] for i in ids}
    if len(ids) == 1:
        return {ids[0]: x}
    if isinstance(x, (list, tuple)) and len(x) == len(ids):
        return dict(zip(ids, x))
    raise GraphError(f"IR eval: the graph has {len(ids)} input nodes {ids}; pass a dict "
                     f"{{node_id: value}} or a list with one value per input")


def _needed(g: Graph, output_id):
    """Mask of the ancestors of ``output_id`` (reverse loop, no recursion)."""
    need = [False] * len(g.nodes)
    need[output_id] = True
    for i in range(output_id, -1, -1):
        if need[i]:
            for p in g.nodes[i].parents:
                need[p] = True
    return need


def node_args(g: Graph, payload, ctx, node, vals) -> tuple:
    """``(args, attrs)`` of one node in the op table's calling convention: parent values
    from ``vals``, then its payload params converted into ``ctx`` (omitted optional params
    filled with their defaults), and its attributes with defaults filled."""
    rec = OPS[node.kind.op]
    args = [vals[p] for p in node.parents]
    if rec.params:
        params = payload.converted(ctx, node.id)
        for name in rec.params:
            args.append(params[name] if name in params
                        else _default_param(ctx, rec, name, g, node))
    attrs = full_attrs(rec, node.kind.attrs) if rec.attrs or node.kind.attrs else {}
    return args, attrs


def rule_for(rec, ctx):
    """The rule the fold runs for an op in ``ctx``: the op's own interval rule in an
    interval context when it has one (tighter than the forward rule run in interval
    arithmetic, proved sound by its tests), else the forward rule."""
    if rec.interval is not None and getattr(ctx, "is_interval", False):
        return rec.interval
    return rec.forward


def denote_all(g: Graph, payload, x, ctx, *, partial: bool = False, kernels=None,
               label: str = "IR eval", _need=None) -> list:
    """The value table: one context value per node (``None`` for skipped/failed nodes).

    ``x``: the input value (anything ``ctx.convert`` accepts, or already a ``ctx`` value),
    optionally with leading batch axes; a dict ``{input_id: value}`` for several inputs.
    ``partial=True``: a ContextError (or domain error) at a node yields ``None`` for it and
    every dependent instead of raising — IBP reads that as "no bound".
    ``kernels``: the per-node kernel hook, ``{node_id: f(args, attrs, nb) -> value}``; a
    node listed there runs its kernel instead of the op table's rule (the kernel planner's
    bound plan), every other node runs the op table.  An error a kernel raises keeps its
    class and gets the node prepended.  ``label`` starts every error message.
    """
    ctx = scalars.get(ctx)
    ensure_valid(g)
    payload = as_payload(payload)
    check_payload(g, payload)
    inputs = _input_values(g, x, ctx)
    kernels = kernels or {}

    vals: list = [None] * len(g.nodes)
    batch = None
    for i, xv in inputs.items():
        node = g.nodes[i]
        if _need is not None and not _need[i]:
            continue
        try:
            v = convert_value(ctx, xv)
        except ContextError as exc:
            raise ContextError(f"{label}: input {i}: {exc}") from None
        s = tuple(ctx.shape(v))
        d = node.out_shape
        nb = len(s) - len(d)
        if nb < 0 or s[nb:] != d:
            raise GraphError(f"{label}: input {i}: input shape mismatch: got {fmt_shape(s)} vs "
                             f"declared {fmt_shape(d)} (leading batch axes allowed)")
        if batch is None:
            batch = s[:nb]
        elif s[:nb] != batch:
            raise GraphError(f"{label}: input {i}: batch axes {fmt_shape(s[:nb])} differ from "
                             f"{fmt_shape(batch)} of another input")
        vals[i] = v
    batch = batch or ()
    nb = len(batch)

    failed = [False] * len(g.nodes)
    any_failed = False
    for node in g.nodes:
        i = node.id
        op = node.kind.op
        if op == "input" or (_need is not None and not _need[i]):
            continue
        if any_failed and any(failed[p] for p in node.parents):
            failed[i] = True
            continue
        where = f"{label}: {op} {i}"
        kernel = kernels.get(i)
        try:
            args, attrs = node_args(g, payload, ctx, node, vals)
            if kernel is not None:
                y = kernel(args, attrs, nb)
            else:
                y = rule_for(OPS[op], ctx)(ctx, args, attrs, nb)
                if op == "const" and nb:
                    y = ctx.broadcast_to(ctx.reshape(y, (1,) * nb + tuple(node.out_shape)),
                                         batch + tuple(node.out_shape))
        except OpDataError as exc:
            if partial:
                failed[i] = any_failed = True
                continue
            raise GraphError(f"{where}: {exc}") from None
        except ContextError as exc:
            if partial:
                failed[i] = any_failed = True
                continue
            raise ContextError(f"{where}: {exc}") from None
        except GraphError as exc:
            raise GraphError(f"{where}: {exc}") from None
        except ScalarLabError as exc:       # a kernel's own error class (the planner's)
            raise type(exc)(f"{where}: {exc}") from None
        except (ValueError, TypeError, IndexError, ArithmeticError) as exc:
            if kernel is not None:
                raise
            raise GraphError(f"{where}: rule failed: {type(exc).__name__}: {exc}") from exc
        # every value is batch + declared shape (check_shapes proved the declared shapes
        # consistent; this catches a rule disagreeing with its own shape rule)
        ys = ctx.shape(y)
        if len(ys) != nb + len(node.out_shape) or tuple(ys[nb:]) != node.out_shape:
            raise GraphError(f"{where}: value has shape {fmt_shape(ys)}, expected batch "
                             f"{fmt_shape(batch)} + declared {fmt_shape(node.out_shape)}")
        vals[i] = y
    return vals


def _default_param(ctx, rec, name, g, node):
    """The value of an omitted optional param (conv bias, layernorm gamma/beta/eps)."""
    default = rec.param_defaults.get(name)
    if default is None:
        raise GraphError(f"missing payload {name}")
    in_shapes = [g.nodes[p].out_shape for p in node.parents]
    shape = rec.param_shapes(in_shapes, full_attrs(rec, node.kind.attrs), node.out_shape)[name]
    if default == "zeros":
        return ctx.zeros(shape)
    if default == "ones":
        return ctx.ones(shape)
    return ctx.full(shape, default) if shape else ctx.convert(default)


def denote(g: Graph, payload, x, ctx, output_id=None):
    """The value of one node (default: the graph's output); only its ancestors run."""
    ensure_valid(g)
    if output_id is None:
        output_id = g.output
    if not isinstance(output_id, (int, np.integer)) or not 0 <= output_id < len(g.nodes):
        raise GraphError(f"IR eval: output id {output_id!r} is not a node id (graph has "
                         f"{len(g.nodes)} nodes)")
    vals = denote_all(g, payload, x, ctx, _need=_needed(g, int(output_id)))
    return vals[int(output_id)]
