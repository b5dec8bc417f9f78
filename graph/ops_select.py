"""Index-producing op records: ``argmax``/``argmin`` and ``topk`` (the k largest or
smallest values along an axis) with ``topk_indices`` (their positions) -- ONNX's ArgMax,
ArgMin and TopK.

Indices are exact integers in every context: they are read off the order of the values,
never computed in the context's arithmetic, and converted once (``ctx.convert`` of
integers), which is exact while the axis length stays within the format's 2^p (a longer
axis is refused, as ``take`` refuses it).  argmax/argmin use the context's ``argmax``;
topk sorts the stored values themselves (float32/float64 arrays of format values, or
``mpq``/``mpf`` objects; the vocabulary has no sort): the comparisons are exact, so ties
are real ties, broken as ONNX says (the lower index first;
``select_last_index`` takes the higher one for argmax/argmin).  A NaN has no place in an
order: it is an error naming the op and the position, not an arbitrary index.

Interval contexts return sound boxes: an index box holds every index the op can return
at some point of the input boxes (a point box gives the exact index), and ``topk``'s
r-th value is the r-th largest (smallest) of the lower ends and of the upper ends
separately -- an order statistic is non-decreasing in each entry, so those are exact
bounds, and no arithmetic happens.  Derivatives: indices are piecewise constant (zero
cotangent and tangent); ``topk``'s values move with the entries they select (a gather).
"""
from __future__ import annotations

import numpy as np

from scalarlab.scalars.values import Interval

from .axes import is_int, norm_axis
from .errors import OpDataError, ShapeRuleError
from .ops_elementwise import _over_duals
from .ops_shape import take_adjoint
from .oprecord import REQUIRED, OpRecord, register


def _flag(op, attrs, name):
    v = attrs[name]
    if not isinstance(v, bool):
        raise ShapeRuleError(f"{op}: attribute {name} must be true or false, got {v!r}")
    return v


def _index_format(op, ctx, n: int):
    """Refuse an axis whose largest index ``n - 1`` the context's format does not hold."""
    fmt = ctx.fmt
    if fmt is not None and n - 1 > 2 ** (fmt.man_bits + 1):
        raise OpDataError(f"{op}: an axis of length {n} has indices up to {n - 1}, beyond "
                          f"2^{fmt.man_bits + 1}, which the context's format "
                          f"({getattr(fmt, 'label', None) or fmt}) does not hold exactly")


def _rows(ctx, x, a: int):
    """``x`` with per-example-or-batch axis ``a`` (absolute) moved last and the rest merged:
    ``(x as [M, n], the moved shape, perm)``."""
    s = tuple(ctx.shape(x))
    perm = tuple(i for i in range(len(s)) if i != a) + (a,)
    t = ctx.transpose(x, perm) if a != len(s) - 1 else x
    moved = tuple(s[i] for i in perm)
    m = int(np.prod(moved[:-1], dtype=np.int64))
    return ctx.reshape(t, (m, s[a])), moved, perm


def _back(ctx, v, moved, perm, k: int):
    """Inverse of :func:`_rows` for ``[M, k]`` results."""
    v = ctx.reshape(v, moved[:-1] + (k,))
    if perm == tuple(range(len(perm))):
        return v
    return ctx.transpose(v, tuple(int(i) for i in np.argsort(perm)))


def _keys(op, ctx, m):
    """The stored values of a point-context ``[M, n]`` array, in an exactly ordered numpy
    array (NaN refused: it has no position in the order)."""
    k = np.asarray(m)
    if k.dtype.kind == "c":
        raise OpDataError(f"{op}: complex values have no order")
    nan = np.isnan(k) if k.dtype != object else np.asarray(k != k, dtype=bool)
    if nan.any():
        r, c = (int(i) for i in np.argwhere(nan)[0])
        raise OpDataError(f"{op}: entry {c} of row {r} along the axis is NaN, which has no "
                          f"place in the order")
    return k


def _ends(ctx, m):
    m = m if isinstance(m, Interval) else ctx.convert(m)
    return np.asarray(m.lo), np.asarray(m.hi)


def _index_box(ctx, first, last):
    """The context value of integer indices: exact in point contexts, the box [first, last]
    in interval contexts."""
    first = np.asarray(first, dtype=np.float64)
    if not ctx.is_interval:
        return ctx.convert(first)
    return Interval(ctx.convert(first).lo, ctx.convert(np.asarray(last, np.float64)).hi)


# ---------------------------------------------------------------------- argmax / argmin
def _ranked_axis(op, in_shapes, attrs) -> tuple:
    """``(input shape, its normalised axis attribute)``; a rank-0 input is refused."""
    s = tuple(in_shapes[0])
    if not s:
        raise ShapeRuleError(f"{op}: needs an input of rank >= 1, got []")
    return s, norm_axis(op, attrs["axis"], len(s))


def _arg_shape(op):
    def shape(in_shapes, attrs, declared=None):
        s, a = _ranked_axis(op, in_shapes, attrs)
        _flag(op, attrs, "select_last_index")
        if s[a] == 0:
            raise ShapeRuleError(f"{op}: axis {a} of {list(s)} is empty")
        if _flag(op, attrs, "keepdims"):
            return s[:a] + (1,) + s[a + 1:]
        return s[:a] + s[a + 1:]
    return shape


def _arg_candidates(lo, hi, last: bool):
    """Which entries of each row of ``[M, n]`` boxes can be the row's argmax: entry i is
    when some point of the boxes makes x_i at least every x_j and above those that win a
    tie (j < i for the first occurrence, j > i with ``last``).  A superset test per side,
    with prefix maxima of the lower ends: hi_i > lo_j over the tie winners, >= over the rest."""
    def beats_all_before(lo_, hi_, strict):
        # max of lo over j < i, compared with hi_i (the first entry has no j < i)
        pm = np.maximum.accumulate(lo_, axis=1)[:, :-1]
        ok = np.greater(hi_[:, 1:], pm) if strict else np.greater_equal(hi_[:, 1:], pm)
        return np.concatenate([np.ones((lo_.shape[0], 1), bool), np.asarray(ok, bool)], 1)
    before = beats_all_before(lo, hi, strict=not last)
    after = beats_all_before(lo[:, ::-1], hi[:, ::-1], strict=last)[:, ::-1]
    cand = before & after
    unknown = np.asarray((lo != lo) | (hi != hi), dtype=bool).any(axis=1)
    cand[unknown] = True        # a NaN end is the whole line: every index is possible
    return cand


def _arg_forward(op, sign):
    def forward(ctx, args, attrs, nb):
        x = args[0]
        s = tuple(ctx.shape(x))
        a = nb + norm_axis(op, attrs["axis"], len(s) - nb)
        n = s[a]
        _index_format(op, ctx, n)
        last = attrs["select_last_index"]
        m, moved, perm = _rows(ctx, x, a)
        if ctx.is_interval:
            lo, hi = _ends(ctx, m)
            if sign < 0:        # argmin is the argmax of -x: negating an end is exact
                lo, hi = -hi, -lo
            cand = _arg_candidates(lo, hi, last)
            first = np.argmax(cand, axis=1)
            final = n - 1 - np.argmax(cand[:, ::-1], axis=1)
        else:
            _keys(op, ctx, m)                   # NaN refused
            v = m if sign > 0 else ctx.neg(m)   # exact: argmin is the argmax of -x
            # the context's argmax gives the first occurrence; the last one is the first of
            # the reversed row
            if last:
                first = n - 1 - np.asarray(ctx.argmax(ctx.take(v, np.arange(n)[::-1], 1), 1))
            else:
                first = np.asarray(ctx.argmax(v, 1))
            final = first
        y = _index_box(ctx, first.reshape(-1, 1), final.reshape(-1, 1))
        y = _back(ctx, y, moved, perm, 1)
        if not attrs["keepdims"]:
            y = ctx.reshape(y, s[:a] + s[a + 1:])
        return y
    return forward


def _zero_vjp(ctx, g, args, y, attrs, nb):
    return [ctx.zeros(ctx.shape(args[0]))]


def _zero_jvp(ctx, args, tans, y, attrs, nb):
    return ctx.zeros(ctx.shape(y))


for _op, _sign, _what in (("argmax", 1, "largest"), ("argmin", -1, "smallest")):
    register(OpRecord(
        name=_op, arity=(1, 1), shape=_arg_shape(_op),
        forward=_over_duals(_arg_forward(_op, _sign), _zero_jvp), vjp=_zero_vjp,
        jvp=_zero_jvp, attrs={"axis": 0, "keepdims": True, "select_last_index": False},
        capsule=f"reference.{_op}",
        doc=f"ONNX {_op.capitalize()}: the index of the {_what} entry along axis (ties: the "
            f"first, or the last with select_last_index), an exact integer; interval "
            f"contexts: the box of every index possible"))


# ----------------------------------------------------------------------- topk
def _topk_shape(op):
    def shape(in_shapes, attrs, declared=None):
        s, a = _ranked_axis(op, in_shapes, attrs)
        k = attrs["k"]
        if not is_int(k) or not 1 <= k <= s[a]:
            raise ShapeRuleError(f"{op}: k={k!r} must be an integer in [1, {s[a]}] (the "
                                 f"extent of axis {a} of {list(s)})")
        _flag(op, attrs, "largest")
        _flag(op, attrs, "sorted")
        return s[:a] + (int(k),) + s[a + 1:]
    return shape


def _order(ctx, m, k: int, largest: bool, op: str):
    """``[M, k]`` positions of the k largest (smallest) entries of each row of the point
    array ``m``, in order, ties by the lower index (a stable sort of exact values)."""
    key = _keys(op, ctx, m)
    return np.argsort(-key if largest else key, axis=1, kind="stable")[:, :k]


def _rank_boxes(lo, hi, k: int, largest: bool):
    """``(first, last)`` ``[M, k]`` index boxes of ranks 0..k-1 over ``[M, n]`` boxes.
    Entry j surely ranks ahead of i when lo_j > hi_i, or lo_j >= hi_i with j < i (the tie
    rule); i's rank at any point lies between the number of entries surely ahead of it and
    n - 1 minus the number it is surely ahead of, so rank r holds one of the entries whose
    range contains r: the box spans the lowest and highest of them."""
    if not largest:
        lo, hi = -hi, -lo
    n = lo.shape[1]
    before = np.arange(n).reshape(n, 1) < np.arange(n).reshape(1, n)     # [j, i]: j < i
    L, H = lo[:, :, None], hi[:, None, :]                                 # lo_j, hi_i
    ahead = np.asarray(np.greater(L, H), bool) | (np.asarray(np.greater_equal(L, H), bool)
                                                  & before)
    lo_rank = ahead.sum(axis=1)                        # entries surely ahead of i
    hi_rank = n - 1 - ahead.sum(axis=2)                # minus those i is surely ahead of
    r = np.arange(k).reshape(1, k, 1)
    can = (lo_rank[:, None, :] <= r) & (r <= hi_rank[:, None, :])        # [M, k, n]
    unknown = np.asarray((lo != lo) | (hi != hi), dtype=bool).any(axis=1)
    can[unknown] = True
    return np.argmax(can, axis=2), n - 1 - np.argmax(can[:, :, ::-1], axis=2)


def _topk_setup(op, ctx, x, attrs, nb):
    s = tuple(ctx.shape(x))
    a = nb + norm_axis(op, attrs["axis"], len(s) - nb)
    m, moved, perm = _rows(ctx, x, a)
    return m, moved, perm, int(attrs["k"]), attrs["largest"]


def _gather_rows(ctx, m, idx):
    """``m[r, idx[r, :]]`` of an ``[M, n]`` array by one flat ``ctx.take`` (no arithmetic):
    ``(values [M, k], flat positions)``."""
    M, n = ctx.shape(m)
    flat = (np.arange(M).reshape(-1, 1) * n + idx).reshape(-1)
    return ctx.reshape(ctx.take(ctx.reshape(m, (M * n,)), flat, axis=0), idx.shape), flat


def _topk_forward(ctx, args, attrs, nb):
    m, moved, perm, k, largest = _topk_setup("topk", ctx, args[0], attrs, nb)
    if ctx.is_interval:
        lo, hi = _ends(ctx, m)
        # the r-th largest of the lower ends and of the upper ends bound the r-th largest
        # value at every point (order statistics are monotone in each entry)
        def stat(e):
            o = np.argsort(-e if largest else e, axis=1, kind="stable")[:, :k]
            return np.take_along_axis(e, o, axis=1)
        ylo, yhi = stat(lo), stat(hi)
        unknown = np.asarray((lo != lo) | (hi != hi), dtype=bool).any(axis=1)
        if unknown.any():
            # a NaN end is the whole line: so is every value of its row
            whole = ctx.convert(np.full(ylo.shape, np.nan))
            ylo = np.where(unknown[:, None], np.asarray(whole.lo), ylo)
            yhi = np.where(unknown[:, None], np.asarray(whole.hi), yhi)
        y = Interval(ylo, yhi)
    else:
        y, _ = _gather_rows(ctx, m, _order(ctx, m, k, largest, "topk"))
    return _back(ctx, y, moved, perm, k)


def _topk_jvp(ctx, args, tans, y, attrs, nb):
    if tans[0] is None:
        return None
    m, moved, perm, k, largest = _topk_setup("topk", ctx, args[0], attrs, nb)
    t, _, _ = _rows(ctx, tans[0], nb + norm_axis("topk", attrs["axis"],
                                                 len(ctx.shape(args[0])) - nb))
    v, _ = _gather_rows(ctx, t, _order(ctx, m, k, largest, "topk"))
    return _back(ctx, v, moved, perm, k)


def _topk_vjp(ctx, g, args, y, attrs, nb):
    x = args[0]
    s = tuple(ctx.shape(x))
    m, moved, perm, k, largest = _topk_setup("topk", ctx, x, attrs, nb)
    M, n = ctx.shape(m)
    idx = _order(ctx, m, k, largest, "topk")
    gm, _, _ = _rows(ctx, g, nb + norm_axis("topk", attrs["axis"], len(s) - nb))
    flat = (np.arange(M).reshape(-1, 1) * n + idx).reshape(-1)
    gx = take_adjoint(ctx, ctx.reshape(gm, (M * k,)), flat, M * n, 0)
    return [_back(ctx, ctx.reshape(gx, (M, n)), moved, perm, n)]


def _topk_indices_forward(ctx, args, attrs, nb):
    m, moved, perm, k, largest = _topk_setup("topk_indices", ctx, args[0], attrs, nb)
    _index_format("topk_indices", ctx, ctx.shape(m)[1])
    if ctx.is_interval:
        lo, hi = _ends(ctx, m)
        first, last = _rank_boxes(lo, hi, k, largest)
    else:
        first = last = _order(ctx, m, k, largest, "topk_indices")
    return _back(ctx, _index_box(ctx, first, last), moved, perm, k)


_TOPK_ATTRS = {"k": REQUIRED, "axis": -1, "largest": True, "sorted": True}
register(OpRecord(
    name="topk", arity=(1, 1), shape=_topk_shape("topk"),
    forward=_over_duals(_topk_forward, _topk_jvp), vjp=_topk_vjp, jvp=_topk_jvp,
    attrs=dict(_TOPK_ATTRS), capsule="reference.topk",
    doc="ONNX TopK's values: the k largest (smallest) entries along axis in order, ties by "
        "the lower index (sorted=false returns them sorted too: ONNX leaves the order open)"))
register(OpRecord(
    name="topk_indices", arity=(1, 1), shape=_topk_shape("topk_indices"),
    forward=_over_duals(_topk_indices_forward, _zero_jvp), vjp=_zero_vjp, jvp=_zero_jvp,
    attrs=dict(_TOPK_ATTRS), capsule="reference.topk_indices",
    doc="ONNX TopK's indices: the positions of topk's values along axis, exact integers; "
        "interval contexts: the box of every index possible at each rank"))
