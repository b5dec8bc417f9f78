"""Axis and broadcasting helpers shared by the op rules (per-example axes + batch axes).

Rules see values with ``nb`` leading batch axes; attributes name per-example axes.  These
helpers normalise attribute axes, align per-example ranks for numpy-style broadcasting
(inserting singleton axes AFTER the batch axes) and sum cotangents back to a parent's
shape.  They use only the context vocabulary.
"""
from __future__ import annotations

from .errors import ShapeRuleError


def is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def norm_axis(op: str, axis, rank: int, name: str = "axis") -> int:
    """A per-example axis in ``[-rank, rank)`` as a non-negative int, or ShapeRuleError."""
    if not is_int(axis):
        raise ShapeRuleError(f"{op}: attribute {name} must be an int, got {axis!r}")
    if not -rank <= axis < rank:
        raise ShapeRuleError(f"{op}: {name}={axis} out of range for per-example rank {rank}")
    return axis + rank if axis < 0 else axis


def norm_axes(op: str, axis, rank: int) -> tuple:
    """``axis`` (int, list of ints or None = all) -> sorted tuple of distinct axes."""
    if axis is None:
        return tuple(range(rank))
    items = list(axis) if isinstance(axis, (list, tuple)) else [axis]
    out = sorted(norm_axis(op, a, rank) for a in items)
    if len(set(out)) != len(out):
        raise ShapeRuleError(f"{op}: repeated axis in {axis!r}")
    return tuple(out)


def pair(op: str, name: str, v, minimum: int) -> tuple:
    """Conv/pool geometry attribute: an int or a pair of ints, each >= ``minimum``."""
    vals = [v, v] if is_int(v) else (list(v) if isinstance(v, (list, tuple)) else None)
    if vals is None or len(vals) != 2 or not all(is_int(t) for t in vals):
        raise ShapeRuleError(f"{op}: attribute {name} must be an int or a pair of ints, got {v!r}")
    if any(t < minimum for t in vals):
        raise ShapeRuleError(f"{op}: attribute {name}={v!r} must be >= {minimum}")
    return tuple(vals)


def broadcast_shapes(op: str, *shapes) -> tuple:
    """numpy broadcasting of per-example shapes, or ShapeRuleError naming all shapes."""
    rank = max(len(s) for s in shapes)
    out = []
    for i in range(rank):
        dims = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0}
        dims.discard(1)
        if len(dims) > 1:
            shown = " vs ".join(str(list(s)) for s in shapes)
            raise ShapeRuleError(f"{op}: shapes do not broadcast: {shown}")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def align(ctx, v, nb: int, rank: int):
    """Insert singleton axes after the batch axes so the per-example rank is ``rank``."""
    s = ctx.shape(v)
    r = len(s) - nb
    if r >= rank:
        return v
    return ctx.reshape(v, tuple(s[:nb]) + (1,) * (rank - r) + tuple(s[nb:]))


def unbroadcast(ctx, g, target: tuple, nb: int):
    """Sum cotangent ``g`` (batch + broadcast shape) back to the full shape ``target``."""
    gs = tuple(ctx.shape(g))
    target = tuple(target)
    if gs == target:
        return g
    pad = len(gs) - len(target)
    aligned = target[:nb] + (1,) * pad + target[nb:]
    axes = tuple(i for i, (a, d) in enumerate(zip(aligned, gs)) if a == 1 and d != 1)
    if axes:
        g = ctx.sum(g, axis=axes, keepdims=True)
    return ctx.reshape(g, target)


def sum_batch(ctx, g, nb: int):
    """Sum a parameter cotangent over the ``nb`` leading batch axes."""
    if nb == 0:
        return g
    return ctx.sum(g, axis=tuple(range(nb)))


def scalar(ctx, value):
    """A context 0-d constant from an exact number or decimal string (one rounding)."""
    return ctx.convert(value)


def add_opt(ctx, a, b):
    """a + b where ``None`` stands for zero (tangents that do not vary)."""
    if a is None:
        return b
    if b is None:
        return a
    return ctx.add(a, b)
