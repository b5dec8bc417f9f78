"""Checking one op application against its op-table record.

Shared by the tape builder, the typed graph and the plain and IR interpreters, so all of
them accept the same programs and reject the rest with the same message (op name, every
operand shape, the rule's own explanation).
"""
from __future__ import annotations

import numpy as np

from scalarlab.graph.errors import GraphError
from scalarlab.graph.optable import full_attrs
from scalarlab.scalars.errors import ContextError

from .errors import TapeError


def resolve_attrs(rec, attrs: dict, where: str) -> dict:
    """The record's attributes with defaults filled (the op table's own ``full_attrs``);
    an unknown or missing attribute is a TapeError naming the op."""
    try:
        return full_attrs(rec, attrs)
    except GraphError as exc:
        raise TapeError(f"{where}: op {rec.name}: {exc}") from None


def check_op_shapes(rec, in_shapes: list, param_shapes: list, attrs: dict, where: str) -> tuple:
    """Run the record's shape rule (and param-shape rule); return the output shape.

    Shared by the tape builder and the typed graph, so both reject the same programs with
    the same message: op name, every operand shape, and the rule's own explanation.
    """
    lo, hi = rec.arity
    n = len(in_shapes)
    if n < lo or (hi is not None and n > hi):
        want = f"{lo}" if hi == lo else f"{lo}..{'any' if hi is None else hi}"
        raise TapeError(f"{where}: op {rec.name} takes {want} parent(s) "
                        f"(+ {len(rec.params)} parameter(s)), got {n}")

    def shown():
        return ", ".join(str(list(s)) for s in list(in_shapes) + list(param_shapes))

    try:
        out = tuple(rec.shape(in_shapes, attrs))
    except (GraphError, ContextError, ValueError, TypeError, IndexError) as exc:
        raise TapeError(f"{where}: op {rec.name}: incompatible shapes {shown()}: "
                        f"{exc}") from None
    if rec.params:
        try:
            want = rec.param_shapes(in_shapes, attrs, out)
        except (GraphError, ContextError, ValueError, TypeError, IndexError) as exc:
            raise TapeError(f"{where}: op {rec.name}: incompatible shapes {shown()}: "
                            f"{exc}") from None
        for pname, got in zip(rec.params, param_shapes):
            exp = tuple(want[pname])
            if tuple(got) != exp:
                raise TapeError(f"{where}: op {rec.name}: parameter {pname} has shape "
                                f"{list(got)}, expected {list(exp)} (operands: {shown()})")
    return out


def split_args(rec, n_args: int, where: str) -> int:
    """Number of parents among ``n_args`` arguments (the rest are the record's params).

    Fixed-arity ops take exactly their parents first; trailing optional parameters
    (``param_defaults``, e.g. ``linear``'s ``b``) may be left out.
    """
    lo, hi = rec.arity
    k = len(rec.params)
    if lo == hi and rec.params:
        given = n_args - lo
        required = [p for p in rec.params if p not in getattr(rec, "param_defaults", {})]
        if given < len(required) or given > k:
            raise TapeError(f"{where}: op {rec.name} takes {lo} parent(s) then parameters "
                            f"{', '.join(rec.params)} ({', '.join(required) or 'none'} "
                            f"required); got {n_args} argument(s)")
        return lo
    if n_args < k:
        raise TapeError(f"{where}: op {rec.name} needs its parameters "
                        f"{', '.join(rec.params)} after its parents; got {n_args} argument(s)")
    return n_args - k


def missing_params(rec, k: int, args: list, shapes: list, attrs: dict) -> list:
    """``[(name, raw value)]`` for omitted optional parameters, in parameter order.

    Raw values are float64 zeros/ones or decimal strings, which every context converts
    exactly (or with its one correct rounding).
    """
    n_given = len(args) - k
    if not rec.params or n_given >= len(rec.params):
        return []
    try:
        want = rec.param_shapes(shapes[:k], attrs, tuple(rec.shape(shapes[:k], attrs)))
    except (GraphError, ContextError, ValueError, TypeError, IndexError) as exc:
        shown = ", ".join(str(list(s)) for s in shapes)
        raise TapeError(f"op {rec.name}: incompatible shapes {shown}: {exc}") from None
    out = []
    for p in rec.params[n_given:]:
        spec, shape = rec.param_defaults[p], tuple(want[p])
        if spec == "zeros":
            out.append((p, np.zeros(shape)))
        elif spec == "ones":
            out.append((p, np.ones(shape)))
        else:
            out.append((p, np.full(shape, spec, dtype=object)))
    return out
