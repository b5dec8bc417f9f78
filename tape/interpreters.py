"""Three interpreters of the :class:`~tape.ops_interface.Ops` interface.

* :class:`PlainOps` -- references are context values; each op just runs its forward rule.
* :class:`EagerOps` -- references are session handles; each op runs now and appends a
  tape node (so the program can be differentiated by :func:`tape.backward.backward`).
* :class:`GraphOps` -- references are typed-graph variables; each op is recorded (and
  shape-checked) without computing anything.

The fourth interpreter, lowering to the canonical IR, lives in :mod:`tape.ir_lowering`.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from scalarlab import scalars
from scalarlab.graph.errors import GraphError
from scalarlab.graph.optable import get_op
from scalarlab.scalars.errors import ContextError

from .op_checks import check_op_shapes, missing_params, resolve_attrs, split_args
from .values import as_value, to_context, value_shape
from .errors import TapeError
from .ops_interface import Ops
from .session import Handle, Session
from .typed_graph import TypedGraph, Var


class PlainOps(Ops):
    """Evaluate directly in a context: no recording, no gradients."""

    interpreter = "plain"

    def __init__(self, ctx):
        self.ctx = scalars.get(ctx)

    def apply(self, op, *refs, **attrs):
        where = "plain evaluation"
        try:
            rec = get_op(op)
        except GraphError as exc:
            raise TapeError(f"{where}: {exc}") from None
        full = resolve_attrs(rec, attrs, where)
        k = split_args(rec, len(refs), where)
        shapes = [value_shape(self.ctx, r) for r in refs]
        extra = missing_params(rec, k, list(refs), shapes, full)
        refs = tuple(refs) + tuple(to_context(self.ctx, raw) for _, raw in extra)
        shapes = [value_shape(self.ctx, r) for r in refs]
        check_op_shapes(rec, shapes[:k], shapes[k:], full, where)
        try:
            return as_value(rec.forward(self.ctx, list(refs), full, 0))
        except (ContextError, GraphError) as exc:
            raise TapeError(f"{where} ({op}): {exc}") from None

    def detach(self, ref):
        return ref

    def const(self, value: Any, name: str = "const"):
        return to_context(self.ctx, value)

    def input(self, value, name: str = "x"):
        return to_context(self.ctx, value)

    def shape(self, ref) -> tuple:
        return value_shape(self.ctx, ref)


class EagerOps(Ops):
    """Run each op now and record it on the session's tape."""

    interpreter = "eager"

    def __init__(self, session_or_ctx):
        self.session = session_or_ctx if isinstance(session_or_ctx, Session) \
            else Session(session_or_ctx)
        self.ctx = self.session.ctx

    def apply(self, op, *refs, **attrs) -> Handle:
        return self.session.apply(op, *refs, **attrs)

    def detach(self, ref) -> Handle:
        return self.session.detach(ref)

    def const(self, value: Any, name: str = "const") -> Handle:
        return self.session.const(value, name)

    def input(self, value, name: str = "x", requires_grad: bool = True) -> Handle:
        return self.session.leaf(value, name, requires_grad)

    def shape(self, ref) -> tuple:
        return self.session.tape.shape(self.session.resolve(ref))


class GraphOps(Ops):
    """Record into a :class:`TypedGraph`; nothing is computed."""

    interpreter = "graph"

    def __init__(self, graph: TypedGraph):
        self.graph = graph

    def apply(self, op, *refs, **attrs) -> Var:
        return self.graph.apply(op, *refs, **attrs)

    def detach(self, ref) -> Var:
        return self.graph.detach(ref)

    def const(self, value: Any, name: str = "const") -> Var:
        return self.graph.const(value, name)

    def shape(self, ref) -> tuple:
        if not isinstance(ref, Var):
            raise TapeError(f"graph interpreter: expected a variable, got {type(ref).__name__}")
        return ref.shape


# ------------------------------------------------------------------ programs
def is_plain_value(t) -> bool:
    """A nested list of numbers/strings is one value (a literal array), not a tree."""
    if isinstance(t, (list, tuple)):
        return all(is_plain_value(c) for c in t)
    return not isinstance(t, (np.ndarray, dict)) and not hasattr(t, "primal") \
        and not hasattr(t, "lo")


def flatten(tree) -> tuple[list, Any]:
    """Leaves of nested lists/tuples/dicts (dicts in key order) and a rebuild recipe.

    A list or tuple made only of numbers/strings (at any depth) is a literal array, hence
    a single leaf; a list holding arrays, dicts or context values is a tree.
    """
    leaves: list = []

    def walk(t):
        if isinstance(t, (list, tuple)) and not is_plain_value(t):
            return (type(t), [walk(c) for c in t])
        if isinstance(t, dict):
            return (dict, [(k, walk(t[k])) for k in sorted(t)])
        leaves.append(t)
        return None

    return leaves, walk(tree)


def unflatten(recipe, leaves) -> Any:
    """Inverse of :func:`flatten` (consumes ``leaves`` in order)."""
    it = iter(leaves)

    def build(r):
        if r is None:
            return next(it)
        kind, kids = r
        if kind is dict:
            return {k: build(c) for k, c in kids}
        return kind(build(c) for c in kids)

    return build(recipe)


def record(program, arg_shapes, names=None) -> TypedGraph:
    """Record ``program(ops, *args)`` as a typed graph whose inputs are the flattened args.

    ``arg_shapes`` is a tree (per positional argument) of shapes; leaves are tuples of ints.
    For a model ``program(ops, x, params)`` the typed-graph context is conventionally the
    state first, then the input: use :func:`record_model`.
    """
    shapes, recipes = [], []
    for a in arg_shapes:
        leaves, r = _flatten_shapes(a)
        shapes.extend(leaves)
        recipes.append((r, len(leaves)))
    g = TypedGraph(shapes, names)
    ops = GraphOps(g)
    args, pos = [], 0
    for r, n in recipes:
        args.append(unflatten(r, g.inputs[pos:pos + n]))
        pos += n
    out = program(ops, *args)
    g.set_output(out)
    return g


def record_model(program, param_shapes, input_shape) -> TypedGraph:
    """Record ``program(ops, x, params)`` with context ``[*param shapes, input shape]``."""
    leaves, r = _flatten_shapes(param_shapes)
    g = TypedGraph([*leaves, tuple(input_shape)],
                   [f"param{i}" for i in range(len(leaves))] + ["x"])
    ops = GraphOps(g)
    params = unflatten(r, g.inputs[:len(leaves)])
    g.set_output(program(ops, g.inputs[-1], params))
    return g


def _flatten_shapes(tree):
    """Like :func:`flatten`, but a tuple of ints is one leaf (a shape), not a subtree."""
    leaves: list = []

    def is_shape(t):
        return isinstance(t, tuple) and all(isinstance(d, (int, np.integer)) for d in t)

    def walk(t):
        if is_shape(t):
            leaves.append(tuple(int(d) for d in t))
            return None
        if isinstance(t, (list, tuple)):
            return (type(t), [walk(c) for c in t])
        if isinstance(t, dict):
            return (dict, [(k, walk(t[k])) for k in sorted(t)])
        raise TapeError(f"record: expected a shape (tuple of ints) or a list/dict of shapes, "
                        f"got {t!r}")

    return leaves, walk(tree)
