"""argmax, argmin, topk and topk_indices (graph/ops_select.py): exact indices with ONNX's
tie rules in every point context (numpy on the same exactly representable values is the
oracle), indices that follow each context's own values, sound interval boxes (every
sampled point's index and value inside, a point box exact), and the refusals (NaN, an
axis longer than the format's integers, k out of range)."""
from __future__ import annotations

import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.graph.errors import OpDataError, ShapeRuleError
from scalarlab.graph.optable import OPS, full_attrs
from scalarlab.scalars.values import Dual, Interval

POINT = ["float64", "binary32", "binary16", "e4m3", "rational", "mpmath:60", "fp32-real",
         "dual:float64"]


def _run(ctx, op, x, nb=0, **attrs):
    rec = OPS[op]
    a = full_attrs(rec, attrs)
    rec.shape([np.shape(x)[nb:]], a)           # the attributes pass the shape rule
    v = Dual(x, np.zeros_like(x)) if ctx.is_dual else ctx.convert(x)
    y = rec.forward(ctx, [v], a, nb)
    return y


def _plain(ctx, y):
    if isinstance(y, Dual):
        assert not np.asarray(y.tangent, dtype=np.float64).any()   # indices do not move
        y = y.primal
        ctx = ctx.base
    return np.asarray(ctx.to_float64(y), dtype=np.float64)


def _np_arg(x, axis, largest, last, keepdims):
    v = x if largest else -x
    if last:
        flipped = np.flip(v, axis=axis)
        i = v.shape[axis] - 1 - np.argmax(flipped, axis=axis)
    else:
        i = np.argmax(v, axis=axis)
    return np.expand_dims(i, axis) if keepdims else i


def _np_topk(x, k, axis, largest):
    o = np.argsort(-x if largest else x, axis=axis, kind="stable")
    o = np.take(o, np.arange(k), axis=axis)
    return np.take_along_axis(x, o, axis=axis), o


@pytest.mark.parametrize("cname", POINT)
def test_ties_follow_onnx_in_every_point_context(cname):
    """Small integers make many ties: the lower index wins, the higher with
    select_last_index; topk's order is stable.  A batch axis in front (nb=1)."""
    ctx = scalars.get(cname)
    x = np.random.default_rng(5).integers(-3, 3, (2, 4, 6)).astype(np.float64)
    for op, largest in (("argmax", True), ("argmin", False)):
        for axis in (0, 1, -1):
            for last in (False, True):
                for keep in (False, True):
                    y = _plain(ctx, _run(ctx, op, x, 1, axis=axis, keepdims=keep,
                                         select_last_index=last))
                    want = _np_arg(x, axis + 1 if axis >= 0 else axis, largest, last, keep)
                    assert np.array_equal(y, want), (op, axis, last, keep)
    for largest in (True, False):
        for axis, k in ((0, 3), (1, 4), (-1, 6)):
            v = _plain(ctx, _run(ctx, "topk", x, 1, k=k, axis=axis, largest=largest))
            i = _plain(ctx, _run(ctx, "topk_indices", x, 1, k=k, axis=axis, largest=largest))
            wv, wi = _np_topk(x, k, axis + 1 if axis >= 0 else axis, largest)
            assert np.array_equal(v, wv) and np.array_equal(i, wi), (largest, axis, k)


def test_indices_follow_each_context_s_own_values():
    """1/3 and the binary64 number nearest it: a tie in float64 (the decimal rounds to the
    same number there), distinct in the exact contexts."""
    x = ["1/3", "0.333333333333333314829616256247390992939472198486328125"]
    f64, q, mp = scalars.get("float64"), scalars.get("rational"), scalars.get("mpmath:200")
    at = full_attrs(OPS["argmax"], {"select_last_index": True})
    assert _plain(f64, OPS["argmax"].forward(f64, [f64.convert(x)], at, 0)).tolist() == [1]
    for ctx in (q, mp):
        assert _plain(ctx, OPS["argmax"].forward(ctx, [ctx.convert(x)], at, 0)).tolist() == [0]
        assert _plain(ctx, OPS["argmin"].forward(ctx, [ctx.convert(x)], at, 0)).tolist() == [1]


def _boxes(rng, shape):
    c = rng.integers(-2, 3, shape).astype(np.float64)
    r = rng.choice([0.0, 0.0, 0.25, 1.0], size=shape)
    return c - r, c + r


def _samples(rng, lo, hi, n):
    """Points of the boxes: uniform ones, and vertices (ends, where ties happen)."""
    for j in range(n):
        if j % 2:
            yield np.where(rng.random(lo.shape) < 0.5, lo, hi)
        else:
            yield lo + (hi - lo) * rng.random(lo.shape)


@pytest.mark.parametrize("cname", ["interval:float64", "interval:rational"])
def test_interval_boxes_hold_every_point_s_index_and_value(cname):
    ctx = scalars.get(cname)
    f64 = scalars.get("float64")
    rng = np.random.default_rng(9)
    lo, hi = _boxes(rng, (3, 5, 4))
    box = Interval(ctx.convert(lo).lo, ctx.convert(hi).hi)
    cases = [("argmax", dict(axis=1, select_last_index=False)),
             ("argmax", dict(axis=2, select_last_index=True, keepdims=False)),
             ("argmin", dict(axis=1, select_last_index=False)),
             ("argmin", dict(axis=0, select_last_index=True)),
             ("topk", dict(k=3, axis=1)), ("topk", dict(k=2, axis=2, largest=False)),
             ("topk_indices", dict(k=3, axis=1)),
             ("topk_indices", dict(k=4, axis=2, largest=False))]
    for op, attrs in cases:
        rec = OPS[op]
        a = full_attrs(rec, attrs)
        y = rec.forward(ctx, [box], a, 0)
        ylo = np.asarray(ctx.base.to_float64(y.lo), np.float64)
        yhi = np.asarray(ctx.base.to_float64(y.hi), np.float64)
        for p in _samples(rng, lo, hi, 200):
            v = np.asarray(rec.forward(f64, [p], a, 0))
            assert ((ylo <= v) & (v <= yhi)).all(), (op, attrs)
        # where every box of a row is a point, the result is that point's own
        pt = rec.forward(ctx, [ctx.convert(lo)], a, 0)
        assert np.array_equal(np.asarray(ctx.base.to_float64(pt.lo), np.float64),
                              np.asarray(ctx.base.to_float64(pt.hi), np.float64))
        assert np.array_equal(np.asarray(ctx.base.to_float64(pt.lo), np.float64),
                              np.asarray(rec.forward(f64, [lo], a, 0))), (op, attrs)


def test_interval_boxes_are_tight_where_the_order_is_decided():
    ctx = scalars.get("interval:float64")
    box = Interval(np.array([0.0, 2.0, 1.0, 5.0]), np.array([1.5, 3.0, 2.5, 6.0]))
    at = full_attrs(OPS["topk_indices"], {"k": 4})
    y = OPS["topk_indices"].forward(ctx, [box], at, 0)
    # [5, 6] leads; [2, 3] and [1, 2.5] may swap, so may [0, 1.5] and [1, 2.5] (rank 2 is
    # any of the three: 2.5 > 1.4 > 1.1), while [2, 3] is surely ahead of [0, 1.5]
    assert y.lo.tolist() == [3, 1, 0, 0] and y.hi.tolist() == [3, 2, 2, 2]
    y = OPS["argmax"].forward(ctx, [box], full_attrs(OPS["argmax"], {}), 0)
    assert y.lo.tolist() == [3] and y.hi.tolist() == [3]


def test_refusals_name_the_op_and_the_value():
    f64 = scalars.get("float64")
    with pytest.raises(OpDataError, match="argmax: entry 2 of row 0 .* NaN"):
        _run(f64, "argmax", np.array([1.0, 2.0, np.nan]))
    with pytest.raises(OpDataError, match="topk_indices: .* NaN"):
        _run(f64, "topk_indices", np.array([[np.nan, 2.0]]), k=1)
    # e4m3 holds the integers up to 16 exactly: index 17 would round to 16
    e4m3 = scalars.get("e4m3")
    assert _plain(e4m3, _run(e4m3, "argmax", np.arange(17.0))).tolist() == [16]
    with pytest.raises(OpDataError, match=r"argmax: an axis of length 18 .* \(e4m3\)"):
        _run(e4m3, "argmax", np.arange(18.0))
    with pytest.raises(ShapeRuleError, match=r"topk: k=5 must be an integer in \[1, 4\]"):
        _run(f64, "topk", np.zeros(4), k=5)
    with pytest.raises(ShapeRuleError, match="argmin: attribute keepdims must be true or false"):
        _run(f64, "argmin", np.zeros(4), keepdims=1)
    with pytest.raises(ShapeRuleError, match="argmax: axis=2 out of range"):
        _run(f64, "argmax", np.zeros((2, 2)), axis=2)


def test_a_nan_end_makes_the_whole_row_unknown():
    ctx = scalars.get("interval:float64")
    box = Interval(np.array([[0.0, np.nan, 2.0], [0.0, 1.0, 2.0]]),
                   np.array([[1.0, 3.0, 2.5], [0.5, 1.5, 2.5]]))
    y = OPS["topk"].forward(ctx, [box], full_attrs(OPS["topk"], {"k": 2}), 0)
    assert np.isinf(y.lo[0]).all() and np.isinf(y.hi[0]).all()
    assert y.lo[1].tolist() == [2.0, 1.0] and y.hi[1].tolist() == [2.5, 1.5]
    i = OPS["topk_indices"].forward(ctx, [box], full_attrs(OPS["topk_indices"], {"k": 2}), 0)
    assert i.lo[0].tolist() == [0, 0] and i.hi[0].tolist() == [2, 2]
    assert i.lo[1].tolist() == [2, 1] and i.hi[1].tolist() == [2, 1]
    a = OPS["argmin"].forward(ctx, [box], full_attrs(OPS["argmin"], {"axis": 1}), 0)
    assert a.lo.tolist() == [[0], [0]] and a.hi.tolist() == [[2], [0]]
