"""Logic op records: comparisons ``lt le gt ge eq ne``, boolean ``and or not``,
``select(cond, a, b)`` and the predicates ``isnan isinf isfinite isnormal signbit`` --
what FPCore's ``if`` and its conditions lower to.

Truth values are context values 0 and 1 (so a comparison feeds arithmetic and ``select``
in every context).  ``and``/``or``/``not``/``select`` read a value as true when it is > 0:
on the 0/1 values comparisons produce that is the usual reading, and for other values it
makes ``select`` continuous in its condition away from 0 (NaN reads as false).
Comparisons follow IEEE 754: every ordered comparison with a NaN is false, ``ne`` true.

``select(cond, a, b)`` picks elementwise with the context's ``where``: the unselected
branch's NaN or infinity never leaks into the value, and derivatives flow through the
selected branch only (picked the same way, never multiplied by a 0/1 mask, so a NaN
tangent of the other branch stays out).  The fold evaluates each branch only on the batch
rows that take it (the record's ``guarded`` rule, :func:`branch_rows`): a row reads ``a``
where some entry of its condition may be true and ``b`` where some entry may be false, so
``(if (< x 0) (sqrt (- x)) (sqrt x))`` never takes a square root of a negative.

Interval contexts: a comparison whose outcome differs inside the boxes is ``[0, 1]``
(undecided); ``and``/``or``/``not`` propagate that three-valued logic; ``select`` with an
undecided condition returns the hull of both branches -- sound, since the true value is
one of the two at every point.  The derivative rules of comparisons and boolean ops are 0
(piecewise constant); ``select``'s condition gets a zero cotangent.
"""
from __future__ import annotations

import numpy as np

from scalarlab.scalars.errors import ContextError
from scalarlab.scalars.values import Dual, Interval

from .axes import align, broadcast_shapes, unbroadcast
from .oprecord import OpRecord, register
from .ops_elementwise import _over_duals

COMPARISONS = ("lt", "le", "gt", "ge", "eq", "ne")


def _shape(name):
    def shape(in_shapes, attrs, declared=None):
        return broadcast_shapes(name, *in_shapes)
    return shape


def _aligned(ctx, args, nb):
    r = max(len(ctx.shape(a)) for a in args) - nb
    return [align(ctx, a, nb, r) for a in args]


def _primal(ctx, v):
    """``(base context, primal)`` of a dual-context value (nested duals unwrapped): the
    condition's truth is its primal's."""
    while ctx.is_dual:
        v = v.primal if isinstance(v, Dual) else v
        ctx = ctx.base
    return ctx, v


def _zeros_like(ctx, v):
    return ctx.zeros(ctx.shape(v))


# ------------------------------------------------------------- three-valued truth
def _isnan(ctx, v) -> np.ndarray:
    if ctx.exact:
        return np.zeros(ctx.shape(v), dtype=bool)
    try:
        return np.isnan(np.asarray(ctx.to_float64(v), dtype=np.float64))
    except (ContextError, TypeError, ValueError):
        return np.zeros(ctx.shape(v), dtype=bool)


def _point_compare(ctx, op, a, b):
    """Boolean array of ``a op b`` in a point context (IEEE: NaN compares false)."""
    shape = np.broadcast_shapes(ctx.shape(a), ctx.shape(b))
    lt = np.broadcast_to(np.asarray(ctx.less(a, b), dtype=bool), shape)
    gt = np.broadcast_to(np.asarray(ctx.less(b, a), dtype=bool), shape)
    nan = np.broadcast_to(_isnan(ctx, a), shape) | np.broadcast_to(_isnan(ctx, b), shape)
    eq = ~lt & ~gt & ~nan
    return {"lt": lt, "gt": gt, "le": lt | eq, "ge": gt | eq, "eq": eq, "ne": ~eq}[op]


def _ends(ctx, v):
    v = v if isinstance(v, Interval) else ctx.convert(v)
    return v.lo, v.hi


def _interval_compare(ctx, op, a, b):
    """(surely true, surely false) masks of ``a op b`` over the boxes a, b."""
    al, ah = _ends(ctx, a)
    bl, bh = _ends(ctx, b)

    def m(f, x, y):
        return np.asarray(f(x, y), dtype=bool)
    if op in ("gt", "ge"):
        (al, ah), (bl, bh) = (bl, bh), (al, ah)
        op = "lt" if op == "gt" else "le"
    if op == "lt":
        return m(np.less, ah, bl), m(np.greater_equal, al, bh)
    if op == "le":
        return m(np.less_equal, ah, bl), m(np.greater, al, bh)
    point_eq = m(np.equal, al, ah) & m(np.equal, bl, bh) & m(np.equal, al, bl)
    apart = m(np.less, ah, bl) | m(np.less, bh, al)
    return (point_eq, apart) if op == "eq" else (apart, point_eq)


def _truth(ctx, v):
    """(surely true, surely false) of a truth value v (true: v > 0)."""
    if ctx.is_interval:
        lo, hi = _ends(ctx, v)
        return (np.asarray(np.greater(lo, 0), dtype=bool),
                np.asarray(np.less_equal(hi, 0), dtype=bool))
    pos = np.asarray(ctx.less(ctx.zeros(()), v), dtype=bool)
    return pos, ~pos


def _value(ctx, t, f):
    """The context value of a three-valued truth: 1, 0, or [0, 1] (intervals)."""
    t, f = np.broadcast_arrays(np.asarray(t, dtype=bool), np.asarray(f, dtype=bool))
    if ctx.is_interval:
        return Interval(ctx.convert(np.where(t, 1.0, 0.0)).lo,
                        ctx.convert(np.where(f, 0.0, 1.0)).hi)
    return ctx.convert(np.where(t, 1.0, 0.0))


def pick(ctx, t, f, x, y):
    """x where surely true, y where surely false, the hull of both elsewhere (intervals);
    elementwise, by ``where`` (never by a 0/1 product, so the other side never leaks)."""
    shape = np.broadcast_shapes(np.shape(t), ctx.shape(x), ctx.shape(y))
    x, y = ctx.broadcast_to(x, shape), ctx.broadcast_to(y, shape)
    t, f = np.broadcast_to(t, shape), np.broadcast_to(f, shape)
    if not ctx.is_interval:
        return ctx.where(t, x, y)
    x = x if isinstance(x, Interval) else ctx.convert(x)
    y = y if isinstance(y, Interval) else ctx.convert(y)
    hull = Interval(ctx.minimum(x, y).lo, ctx.maximum(x, y).hi)
    return ctx.where(t, x, ctx.where(f, y, hull))


def branch_rows(ctx, cond, nb):
    """``(then_rows, else_rows)``: bool arrays over the ``nb`` leading batch axes of
    ``cond``, True on the rows that read ``a`` (some entry of the row's condition may be
    true) and ``b`` (some entry may be false; NaN reads as false).  Over intervals an
    undecided entry reads both, so the select takes the hull there; a decided row reads
    one branch.  A row whose condition has no entries reads ``a`` (the value is empty)."""
    t, f = _truth(ctx, cond)
    shape = tuple(ctx.shape(cond))
    t = np.broadcast_to(np.asarray(t, dtype=bool), shape)
    f = np.broadcast_to(np.asarray(f, dtype=bool), shape)
    axes = tuple(range(nb, len(shape)))
    then_rows = ~f.all(axis=axes) if axes else ~f      # possibly true somewhere in the row
    else_rows = ~t.all(axis=axes) if axes else ~t      # possibly false somewhere
    return then_rows | ~(then_rows | else_rows), else_rows


# ------------------------------------------------------------------ records
def _constant_rules(name):
    """VJP/JVP of a piecewise-constant op: zero cotangents and a zero tangent."""
    def vjp(ctx, g, args, y, attrs, nb):
        return [_zeros_like(ctx, a) for a in args]

    def jvp(ctx, args, tans, y, attrs, nb):
        return _zeros_like(ctx, y)
    return vjp, jvp


def _comparison(op, doc):
    def forward(ctx, args, attrs, nb):
        a, b = _aligned(ctx, args, nb)
        if ctx.is_interval:
            return _value(ctx, *_interval_compare(ctx, op, a, b))
        c = _point_compare(ctx, op, a, b)
        return _value(ctx, c, ~c)

    vjp, jvp = _constant_rules(op)
    register(OpRecord(name=op, arity=(2, 2), shape=_shape(op), forward=_over_duals(forward, jvp),
                      vjp=vjp, jvp=jvp, capsule=f"reference.{op}", elementwise=True,
                      doc=doc))


for _op, _doc in (("lt", "a < b as 0/1"), ("le", "a <= b as 0/1"), ("gt", "a > b as 0/1"),
                  ("ge", "a >= b as 0/1"), ("eq", "a == b as 0/1 (NaN: 0)"),
                  ("ne", "a != b as 0/1 (NaN: 1)")):
    _comparison(_op, _doc + "; [0, 1] over intervals where undecided; derivative 0")


def _boolean(op, arity, combine, doc):
    def forward(ctx, args, attrs, nb):
        args = _aligned(ctx, args, nb)
        return _value(ctx, *combine(*[_truth(ctx, a) for a in args]))

    vjp, jvp = _constant_rules(op)
    register(OpRecord(name=op, arity=(arity, arity), shape=_shape(op),
                      forward=_over_duals(forward, jvp), vjp=vjp, jvp=jvp,
                      capsule=f"reference.{op}", elementwise=True, doc=doc))


_boolean("and", 2, lambda p, q: (p[0] & q[0], p[1] | q[1]),
         "a and b (true: > 0) as 0/1; derivative 0")
_boolean("or", 2, lambda p, q: (p[0] | q[0], p[1] & q[1]),
         "a or b (true: > 0) as 0/1; derivative 0")
_boolean("not", 1, lambda p: (p[1], p[0]), "not a (true: > 0) as 0/1; derivative 0")


def _select_record():
    def forward(ctx, args, attrs, nb):
        c, a, b = _aligned(ctx, args, nb)
        return pick(ctx, *_truth(ctx, c), a, b)

    def vjp(ctx, g, args, y, attrs, nb):
        c, a, b = _aligned(ctx, args, nb)
        t, f = _truth(ctx, c)
        zero = ctx.zeros(())
        return [_zeros_like(ctx, args[0]),
                unbroadcast(ctx, pick(ctx, t, f, g, zero), ctx.shape(args[1]), nb),
                unbroadcast(ctx, pick(ctx, t, f, zero, g), ctx.shape(args[2]), nb)]

    def jvp(ctx, args, tans, y, attrs, nb):
        if tans[1] is None and tans[2] is None:
            return _zeros_like(ctx, y)
        c, a, b = _aligned(ctx, args, nb)
        r = len(ctx.shape(y)) - nb
        ta = ctx.zeros(()) if tans[1] is None else align(ctx, tans[1], nb, r)
        tb = ctx.zeros(()) if tans[2] is None else align(ctx, tans[2], nb, r)
        return pick(ctx, *_truth(ctx, c), ta, tb)

    def guarded(ctx, cond, nb):
        return branch_rows(*_primal(ctx, cond), nb)

    register(OpRecord(name="select", arity=(3, 3), shape=_shape("select"),
                      forward=_over_duals(forward, jvp),
                      vjp=vjp, jvp=jvp, capsule="reference.select", elementwise=True,
                      guarded=guarded,
                      doc="cond ? a : b elementwise (cond true: > 0); the fold evaluates "
                          "each branch only on the rows that take it, the other's NaN never "
                          "leaks; the hull of both over intervals where cond is undecided"))


_select_record()


# ------------------------------------------------------------- predicates
# FPCore's isnan isinf isfinite isnormal signbit, as 0/1 values.  isnormal reads the
# context's format (a binary context's, or an interval base's grid); contexts without one
# (rational, mpmath, fp32-real) call every nonzero finite value normal.  Over intervals: three-valued (an enclosure of reals has no NaN unless it
# is the whole line; a box reaching 0 leaves signbit undecided, -0 and +0 being alike).
PREDICATES = ("isnan", "isinf", "isfinite", "isnormal", "signbit")


def _infinite(ctx, v) -> np.ndarray:
    """Point contexts: mask of +-inf (contexts that hold no infinities: none)."""
    none = np.zeros(ctx.shape(v), dtype=bool)
    try:
        pinf, ninf = ctx.convert(np.inf), ctx.convert(-np.inf)
        if not np.isinf(np.asarray(ctx.to_float64(pinf), dtype=np.float64)).all():
            return none                       # E4M3FN: no infinities (inf converts to NaN)
    except ContextError:
        return none
    return (~np.asarray(ctx.less(v, pinf), dtype=bool) & ~_isnan(ctx, v)) | \
        ~np.asarray(ctx.less(ninf, v), dtype=bool) & ~_isnan(ctx, v)


def _min_normal(ctx) -> float:
    fmt = ctx.fmt
    if fmt is None and ctx.is_interval:
        fmt = ctx.endpoint_format
    return 0.0 if fmt is None else float(fmt.min_normal)


def _point_predicate(ctx, op, v):
    nan = _isnan(ctx, v)
    if op == "isnan":
        return nan
    inf = _infinite(ctx, v)
    if op == "isinf":
        return inf
    if op == "isfinite":
        return ~inf & ~nan
    if op == "signbit":
        if ctx.exact or ctx.fmt is None:      # no signed zero, no NaN sign here
            return np.asarray(ctx.less(v, ctx.zeros(())), dtype=bool)
        return np.signbit(np.asarray(ctx.to_float64(v), dtype=np.float64))
    mn = _min_normal(ctx)                     # isnormal
    zero = ctx.zeros(())
    nonzero = np.asarray(ctx.less(v, zero), dtype=bool) | np.asarray(ctx.less(zero, v),
                                                                      dtype=bool)
    big = nonzero
    if mn > 0:
        lim = ctx.convert(mn)
        big = ~np.asarray(ctx.less(ctx.abs(v), lim), dtype=bool)
    return big & ~inf & ~nan


def _interval_predicate(ctx, op, v):
    lo, hi = _ends(ctx, v)

    def m(f, x, y):
        return np.asarray(f(x, y), dtype=bool)
    fin = m(np.greater, lo, -np.inf) & m(np.less, hi, np.inf)
    whole = m(np.equal, lo, -np.inf) & m(np.equal, hi, np.inf)
    point_inf = m(np.equal, lo, hi) & ~fin
    if op == "isnan":
        return np.zeros(np.shape(lo), dtype=bool), ~whole
    if op == "isinf":
        return point_inf, fin
    if op == "isfinite":
        return fin, point_inf
    if op == "signbit":
        return m(np.less, hi, 0), m(np.greater, lo, 0)
    mn = _min_normal(ctx)                     # isnormal
    if mn > 0:
        normal = fin & (m(np.greater_equal, lo, mn) | m(np.less_equal, hi, -mn))
        tiny = m(np.greater, lo, -mn) & m(np.less, hi, mn)
    else:
        normal = fin & (m(np.greater, lo, 0) | m(np.less, hi, 0))
        tiny = m(np.equal, lo, 0) & m(np.equal, hi, 0)
    return normal, tiny | point_inf


def _predicate(op, doc):
    def forward(ctx, args, attrs, nb):
        if ctx.is_interval:
            return _value(ctx, *_interval_predicate(ctx, op, args[0]))
        p = _point_predicate(ctx, op, args[0])
        return _value(ctx, p, ~p)

    vjp, jvp = _constant_rules(op)
    register(OpRecord(name=op, arity=(1, 1), shape=_shape(op), forward=_over_duals(forward, jvp),
                      vjp=vjp, jvp=jvp, capsule=f"reference.{op}", elementwise=True,
                      doc=doc + " as 0/1; three-valued over intervals; derivative 0"))


for _op, _doc in (("isnan", "x is NaN"), ("isinf", "x is +-inf"),
                  ("isfinite", "x is neither NaN nor infinite"),
                  ("isnormal", "x is a normal number of the context's format"),
                  ("signbit", "the sign bit of x (set for -0)")):
    _predicate(_op, _doc)
