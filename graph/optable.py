"""THE op table: one record per op, defined beside its rules.

Every consumer reads this table: the IR fold (``graph.fold``), the tape
(``tape.TapeBuilder.apply``), the typed graph, IBP (the fold over interval contexts, plus
the ops' optional ``interval`` rules) and the kernel planner (``capsule``, ``reduces``,
``dot``).  Adding an op = adding one :class:`~graph.oprecord.OpRecord` in the family module
that holds its rules (``graph/ops_*.py``), plus tests.  The record type and its calling
conventions are in :mod:`graph.oprecord`; importing this module registers every family.
"""
from __future__ import annotations

from .errors import GraphError, OpDataError, ShapeRuleError
from .oprecord import OPS, REQUIRED, OpRecord, full_attrs, register
from . import ops_elementwise, ops_linear, ops_conv, ops_reduce, ops_shape, ops_loss  # noqa: F401
from . import ops_activation  # noqa: F401
from . import ops_logic  # noqa: F401  (comparisons, and/or/not, select)
from . import ops_select  # noqa: F401  (argmax, argmin, topk, topk_indices)
from . import interval_rules

interval_rules.attach()   # op-specific interval rules (graph/interval_rules.py)

__all__ = ["OPS", "OpRecord", "REQUIRED", "register", "full_attrs", "get_op",
           "ShapeRuleError", "OpDataError"]


def get_op(name: str) -> OpRecord:
    try:
        return OPS[name]
    except (KeyError, TypeError):
        raise GraphError(f"unknown op {name!r}; known ops: {', '.join(sorted(OPS))}") from None
