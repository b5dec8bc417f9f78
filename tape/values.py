"""Context values as the tape sees them: conversion, shape, and the stopped value."""
from __future__ import annotations

import numpy as np

from scalarlab.scalars.values import Dual
from scalarlab.scalars.errors import ContextError

from .errors import TapeError


def as_value(v):
    """A numpy scalar (what ``np.sum`` returns for a full reduction) as a 0-d array.

    The context contract says scalars are 0-d arrays; normalising here keeps one numpy
    habit from turning into a shape error on the tape.
    """
    return np.asarray(v) if isinstance(v, np.generic) else v


def value_shape(ctx, v) -> tuple:
    try:
        return tuple(ctx.shape(v))
    except Exception as exc:  # a foreign value (list, float): say so instead of a traceback
        raise TapeError(f"value of type {type(v).__name__} is not a {ctx.name} value: "
                        f"{exc}") from None


def to_context(ctx, value):
    """``value`` as a value of ``ctx``: context-native values pass, others are converted."""
    if ctx.is_dual and hasattr(value, "primal") and hasattr(value, "tangent"):
        return value
    if ctx.is_interval and hasattr(value, "lo") and hasattr(value, "hi"):
        return value
    try:
        return ctx.convert(value)
    except ContextError as exc:
        raise TapeError(f"leaf: cannot convert value into context {ctx.name}: {exc}") from None


def stopped_value(ctx, v):
    """The forward value of ``detach``: the same value, except that over duals its tangent
    is zero (a stopped value does not vary, so forward mode and the tape over duals agree
    with reverse mode: the detached branch contributes nothing at any order)."""
    if ctx.is_dual:
        return Dual(v.primal, ctx.base.zeros(ctx.shape(v)))
    return v
