"""The op record: one op's name, arity, shape rule, forward/VJP/JVP rules and facts.

:class:`OpRecord` instances are registered into :data:`OPS` by the op families
(``graph/ops_*.py``); :mod:`graph.optable` imports every family, so consumers read the
filled table from there.  This module imports no op family (that is what keeps the
families and the table free of import cycles).

Calling conventions (all rules are written against the scalar-context vocabulary, so they
run in every context, derivatives included):

* ``args`` = the parent values in order, followed by the op's payload parameters in the
  order of ``record.params`` (e.g. linear: ``[x, W, b]``).  Parents may carry ``nb``
  leading batch axes, all parents the SAME batch axes; parameters never do.  Attribute
  axes always refer to the per-example shape (the rule adds ``nb``).
* ``attrs`` is the node's attribute dict with defaults filled in (``record.attrs`` maps
  attribute name -> default, ``REQUIRED`` = no default); :func:`full_attrs` builds it.
* ``shape(in_shapes, attrs, declared=None) -> out_shape``: per-example shapes of the
  parents only (params excluded), as tuples; raises :class:`ShapeRuleError` with a human
  message on a bad shape/axis/attribute.  ``declared`` is the node's declared out shape;
  only ops whose output extent lives in the payload read it (``input``/``const`` return it
  unchanged; ``linear`` takes ``out_features`` from it unless the attribute is given;
  ``conv2d`` takes ``out_channels`` likewise).  Other rules ignore it.
* ``param_shapes(in_shapes, attrs, out_shape) -> {param: shape}`` for payload ops.
  ``param_defaults`` maps optional params to ``"zeros"``, ``"ones"`` or a decimal string
  (filled by the fold when the payload omits them, e.g. conv bias, layernorm eps).
  ``check_payload(in_shapes, attrs, out_shape, given) -> None`` (optional) raises
  :class:`ShapeRuleError` when the given param shapes disagree with the node; the default
  compares ``given`` with ``param_shapes`` one parameter at a time.
* ``forward(ctx, args, attrs, nb) -> value``.  ``input`` has no forward (the fold supplies
  the input); ``const`` returns its payload value without batch axes (the fold broadcasts
  it over the batch).
* ``vjp(ctx, g, args, y, attrs, nb) -> list`` with one cotangent per arg (``None`` = no
  contribution); cotangents of params are summed over the batch axes.  A rule whose
  function has ``takes_needs = True`` also accepts ``needs=`` (one bool per arg, or None
  for all): the tape passes which args want a gradient, and the rule may return ``None``
  for the others without computing them.
* ``jvp(ctx, args, tangents, y, attrs, nb) -> tangent`` (``tangents[i] is None`` means
  arg ``i`` does not vary); a rule returns ``None`` when the output does not vary.
* Data errors a rule detects itself (``log``/``sqrt`` of values outside the domain in
  point contexts) raise :class:`OpDataError`; the fold wraps them with the node.  Interval
  and dual contexts are left to the context's own rules (a ``ContextError``).

* ``interval(ctx, args, attrs, nb) -> value`` (optional): the op's own rule over an
  interval context (``ctx.is_interval``), used by the fold in place of ``forward`` there.
  It exists to be TIGHTER than the generic fold (the forward rule run in interval
  arithmetic, which forgets that repeated operands are the same value).  Every such rule
  must be proved sound by a test (exact sampling of the input box: every point's value
  lies in the box) and never looser than the generic fold (a test compares both).

* ``guarded(ctx, first, nb) -> tuple of bool arrays`` (optional): the op reads its other
  args only on some batch rows, decided by its FIRST arg (``select``: the condition).  One
  mask per other arg, over the ``nb`` leading batch axes of ``first``, True on the rows
  where that arg is read.  The fold then evaluates the nodes only those args need on
  those rows alone (so a guarded domain error never reaches a row that does not take
  it), and hands the rule a stand-in (zeros) on the other rows: the forward and JVP
  rules must not let a stand-in reach their result there.

Facts read by other parts of the lab:

* ``elementwise``: same-shape map (binary ops broadcast per numpy on per-example shapes).
* ``monotone``: ``"increasing"``/``"decreasing"`` for unary maps (the scalar functions
  take it from their declaration in ``scalars.functions``).
* ``capsule``: the reference kernel capsule name (``None``: no runtime work; the full
  ``sum`` is planned as ``reference.reduce_sum``).
* ``reduces``: the forward rule sums several entries, so its result depends on the
  summation order; the planner reports the context's reduction order for its capsule.
* ``dot``: those sums are dot products (multiply-add), so a context whose dot products
  use fma (``ctx.fma_dot``) rounds once per multiply-add; the planner reports ``+fma``.
* ``affine``: the op is an affine map of one parent while its other parents, payload
  and attributes are fixed -- ``"any"``: of whichever single parent varies (linear,
  convolutions, average pools, shape ops, sums, add/sub/mul, matmul); ``"first"``: only
  of its first parent (div: ``a / c``); ``None``: not affine.  CROWN crosses such a node
  with the exact linear form it reads off the forward rule.
* ``doc``: one line saying what the op computes (shown by the DOT printer).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from .errors import ShapeRuleError

__all__ = ["OpRecord", "REQUIRED", "OPS", "register", "full_attrs"]


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
    param_defaults: dict = field(default_factory=dict)  # optional param -> "zeros"/"ones"/decimal
    check_payload: Optional[Callable] = None
    capsule: Optional[str] = None     # reference capsule name, None: no runtime work
    elementwise: bool = False
    monotone: Optional[str] = None    # "increasing" / "decreasing" / None (unary maps)
    reduces: bool = False             # the forward rule sums: its result depends on the order
    dot: bool = False                 # ... and the sums are dot products (fma matters)
    interval: Optional[Callable] = None   # tighter, test-proved interval rule (see above)
    guarded: Optional[Callable] = None    # rows on which each non-first arg is read (select)
    affine: Optional[str] = None      # "any" / "first": affine in one varying parent (above)
    doc: str = ""


REQUIRED = object()

OPS: dict[str, OpRecord] = {}


def register(rec: OpRecord) -> OpRecord:
    if rec.name in OPS:
        raise ValueError(f"op {rec.name!r} registered twice")
    if rec.dot and not rec.reduces:
        raise ValueError(f"op {rec.name!r}: dot=True needs reduces=True (a dot product sums)")
    if rec.affine not in (None, "any", "first"):
        raise ValueError(f"op {rec.name!r}: affine must be None, 'any' or 'first', "
                         f"got {rec.affine!r}")
    OPS[rec.name] = rec
    return rec


def full_attrs(rec: OpRecord, given: dict) -> dict:
    """The attribute dict a rule sees: ``given`` plus defaults; unknown/missing -> ShapeRuleError."""
    unknown = [k for k in given if k not in rec.attrs]
    if unknown:
        known = ", ".join(rec.attrs) or "none"
        raise ShapeRuleError(f"{rec.name}: unknown attribute {unknown[0]!r} (known: {known})")
    out = {}
    for k, default in rec.attrs.items():
        if k in given:
            out[k] = given[k]
        elif default is REQUIRED:
            raise ShapeRuleError(f"{rec.name}: missing required attribute {k!r}")
        else:
            out[k] = default
    return out
