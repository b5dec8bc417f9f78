"""Interval bound propagation = the IR fold over an interval context.

There is no second set of op rules here: ``graph.denote_all`` runs the op table's forward
rules with an interval context, whose arithmetic encloses every point of its operands, or
an op's own tighter ``interval`` rule where its record has one (softmax).
A node whose rule cannot bound its input (log of a box reaching 0, ...) raises a
``ContextError`` inside the fold; with ``partial=True`` the fold records ``None`` for it
and for every node depending on it, and structural errors still raise.
"""
from __future__ import annotations

from typing import Optional

from scalarlab import scalars

from .box import Box
from .errors import IBPError


def interval_context(ctx):
    """Resolve ``ctx`` (name or context) and insist that it is an interval context."""
    c = scalars.get(ctx)
    if not c.is_interval:
        raise IBPError(f"IBP needs an interval context (e.g. interval:binary32), got {c.name}")
    return c


def run_ibp(graph, payload, box: Box, ctx="interval:binary32") -> list[Optional[Box]]:
    """One :class:`Box` (or ``None`` where no bound could be derived) per node.

    ``box`` bounds the graph input; it may carry leading batch axes, in which case one
    call bounds every box of the batch.
    """
    from scalarlab.graph import denote_all

    ictx = interval_context(ctx)
    if not isinstance(box, Box):
        raise IBPError(f"run_ibp: expected a Box for the input, got {type(box).__name__}")
    x = box.to_interval(ictx)
    values = denote_all(graph, payload, x, ictx, partial=True)
    return [None if v is None else Box._of_result(v) for v in values]
