"""THE op table: one record per op, defined beside its rules.

Every consumer reads this table: the IR fold (``graph.fold``), the tape
(``tape.TapeBuilder.apply``), the typed graph, IBP (through interval contexts) and the
kernel planner.  Adding an op = adding one :class:`OpRecord` (plus tests).

Calling conventions (all rules are written against the scalar-context vocabulary, so they
run in every context, derivatives included):

* ``args`` = the parent values in order, followed by the op's payload parameters in the
  order of ``record.params`` (e.g. linear: ``[x, W, b]``).  Parents may carry ``nb``
  leading batch axes; parameters never do.  Attribute axes always refer to the
  per-example shape (the rule adds ``nb``).
* ``shape(in_shapes, attrs) -> out_shape``: per-example shapes of the parents only (params
  excluded); raises :class:`ShapeRuleError` with a human message on a bad shape/axis.
* ``param_shapes(in_shapes, attrs, out_shape) -> {param: shape}`` for payload ops.
* ``forward(ctx, args, attrs, nb) -> value``.
* ``vjp(ctx, g, args, y, attrs, nb) -> list`` with one cotangent per arg (``None`` = no
  contribution); cotangents of params are summed over the batch axes.
* ``jvp(ctx, args, tangents, y, attrs, nb) -> tangent`` (``tangents[i] is None`` means
  arg ``i`` does not vary).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from .errors import GraphError


class ShapeRuleError(GraphError):
    """Raised by a shape rule; the validator wraps it with the node it concerns."""


@dataclass(frozen=True)
class OpRecord:
    name: str
    arity: tuple                      # (min_parents, max_parents or None)
    shape: Callable
    forward: Optional[Callable]       # None for input (fold supplies it)
    vjp: Optional[Callable] = None    # None: not differentiable (e.g. input)
    jvp: Optional[Callable] = None
    attrs: dict = field(default_factory=dict)      # attribute name -> default (REQUIRED = no default)
    params: tuple = ()                # payload parameter names, in arg order
    param_shapes: Optional[Callable] = None
    capsule: Optional[str] = None     # reference capsule name, None: no runtime work
    elementwise: bool = False
    monotone: Optional[str] = None    # "increasing" / "decreasing" / None
    linear: bool = False
    doc: str = ""


REQUIRED = object()

OPS: dict[str, OpRecord] = {}


def register(rec: OpRecord) -> OpRecord:
    if rec.name in OPS:
        raise ValueError(f"op {rec.name!r} registered twice")
    OPS[rec.name] = rec
    return rec


def get_op(name: str) -> OpRecord:
    try:
        return OPS[name]
    except KeyError:
        raise GraphError(f"unknown op {name!r}; known ops: {', '.join(sorted(OPS))}") from None
