"""Op-specific interval rules (``OpRecord.interval``): sound, never looser than the fold.

An op may replace the generic interval fold (its forward rule run in interval arithmetic)
with its own rule.  Each such rule is checked here on seeded boxes in several interval
contexts:

* sound — every vertex of the input box and seeded interior points, evaluated exactly
  (mpmath at 200 bits from the exact endpoint values), lie inside the rule's box; for
  softmax every coordinate is monotone in every input, so its extremes are at vertices;
* never looser than the generic fold, and strictly tighter on the boxes below;
* close to the exact range (the extremes over the vertices) up to a rounding bound.
"""
from __future__ import annotations

import itertools

import mpmath
import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.graph import Graph, Node, OpKind, denote_all
from scalarlab.graph.optable import OPS, full_attrs
from scalarlab.scalars.values import Interval
from scalarlab.scalars.functions import FUNCTIONS
from scalarlab.scalars.functions_binary import BINARY_FUNCTIONS

CONTEXTS = ["interval:binary32", "interval:float64", "interval:mpmath:60"]
# relative slack allowed beyond the exact range: a row of n terms costs about n + 3
# outward roundings of the endpoint format (exp, sub, n - 1 additions, div)
SLACK = {"interval:binary32": 2.0 ** -19, "interval:float64": 2.0 ** -47,
         "interval:mpmath:60": 2.0 ** -52}
# ... and beyond it for the execution-sound box: the point softmax's own error bound too
EXEC_SLACK = {"interval:binary32": 2.0 ** -17, "interval:float64": 2.0 ** -43,
              "interval:mpmath:60": 2.0 ** -50}


def softmax_exact(row):
    """softmax of one row of mpf values at 200 bits."""
    with mpmath.workprec(200):
        m = max(row)
        e = [mpmath.exp(v - m) for v in row]
        s = mpmath.fsum(e)
        return [v / s for v in e]


def _mpf_array(a):
    """Exact mpf copies of endpoint values (float64 or mpf of up to 200 bits)."""
    with mpmath.workprec(200):
        return np.array([mpmath.mpf(v) for v in np.asarray(a).reshape(-1)],
                        dtype=object).reshape(np.shape(a))


def softmax_points(lo, hi, axis, n_random, seed):
    """Exact softmax values at every vertex of the box [lo, hi] (one box, no batch) and at
    ``n_random`` seeded interior points: (points, values) as object arrays of mpf."""
    lo, hi = _mpf_array(lo), _mpf_array(hi)
    flat_lo, flat_hi = lo.reshape(-1), hi.reshape(-1)
    pts = [np.array([h if b else l for l, h, b in zip(flat_lo, flat_hi, bits)], dtype=object)
           for bits in itertools.product((0, 1), repeat=flat_lo.size)]
    rng = np.random.default_rng(seed)
    with mpmath.workprec(200):
        for _ in range(n_random):
            u = rng.random(flat_lo.size)
            pts.append(np.array([l + mpmath.mpf(float(t)) * (h - l)
                                 for l, h, t in zip(flat_lo, flat_hi, u)], dtype=object))
    vals = []
    for p in pts:
        p = np.moveaxis(p.reshape(lo.shape), axis, -1)
        out = np.empty(p.shape, dtype=object)
        for idx in np.ndindex(p.shape[:-1]):
            out[idx] = softmax_exact(list(p[idx]))
        vals.append(np.moveaxis(out, -1, axis))
    return vals


def _softmax_graph(shape, axis):
    return Graph([Node(0, [], OpKind("input"), list(shape)),
                  Node(1, [0], OpKind("softmax", axis=axis), list(shape))])


# (per-example lower ends, upper ends, axis): boxes that straddle, touch and separate
SOFTMAX_BOXES = [
    ([[-1.0, 0.0, 1.0], [2.0, 2.0, 2.0]], [[1.0, 0.5, 1.0], [2.5, 2.0, 2.0]], 1),
    ([[-1.0, 0.0, 1.0], [2.0, 2.0, 2.0]], [[1.0, 0.5, 1.0], [2.5, 2.0, 2.0]], 0),
    ([[0.1, -3.0, 0.3, 7.0]], [[0.35, -2.5, 0.3, 7.125]], -1),
]


def _box(ctx, lo, hi):
    return ctx.make(np.array(lo, dtype=np.float64), np.array(hi, dtype=np.float64))


FUNCTION_OPS = {name for name in OPS if name in FUNCTIONS or name in BINARY_FUNCTIONS}


def test_every_interval_rule_is_tested_here():
    """A new ``OpRecord.interval`` needs its soundness test in this module."""
    assert {name for name, rec in OPS.items() if rec.interval is not None} == {
        "softmax",
        "log_softmax", "layernorm", "gelu",             # test_graph_interval_rules_ops.py
        "silu", "mish", "gelu_tanh", "hardswish",       # tests/graph/test_graph_activations.py
        # execution bounds of dot products and (float64's pairwise) sums:
        # tests/graph/test_graph_interval_rules_execution.py
        "linear", "matmul", "conv1d", "conv2d", "conv3d",
        "sum", "reduce_sum", "reduce_mean", "global_avg_pool", "reduce_sum_square",
        "avg_pool1d", "avg_pool2d", "avg_pool3d"} | FUNCTION_OPS
    # the scalar functions' rule (libm's / mpmath's declared error for the execution
    # guarantee): tests/graph/test_graph_interval_rules_functions.py


@pytest.mark.parametrize("cname", CONTEXTS)
@pytest.mark.parametrize("case", range(len(SOFTMAX_BOXES)))
def test_softmax_interval_rule_is_sound_and_tight(cname, case):
    lo, hi, axis = SOFTMAX_BOXES[case]
    ctx = scalars.get(cname)
    x = _box(ctx, lo, hi)
    g = _softmax_graph(np.shape(lo), axis)
    got = denote_all(g, {}, x, ctx)[1]
    generic = OPS["softmax"].forward(ctx, [x], full_attrs(OPS["softmax"], {"axis": axis}), 0)

    glo, ghi = _mpf_array(got.lo), _mpf_array(got.hi)
    vals = softmax_points(x.lo, x.hi, axis % len(np.shape(lo)), n_random=20, seed=case)
    for v in vals:                                   # sound: every point inside
        assert np.all(glo <= v) and np.all(v <= ghi), (cname, case)

    # never looser than the generic fold; strictly tighter somewhere on these boxes
    assert np.all(glo >= _mpf_array(generic.lo)) and np.all(ghi <= _mpf_array(generic.hi))
    assert np.any(glo > _mpf_array(generic.lo)) or np.any(ghi < _mpf_array(generic.hi))

    # the real-sound rule (before the point evaluation's error bound) is close to the
    # exact range: its extremes are attained at the vertices (listed first); the
    # execution-sound box adds the bound of binary32/float64/mpmath's own softmax
    # (about (2 D + n + 3) u relative for a row spread D), so it gets EXEC_SLACK
    real = OPS["softmax"].interval.real(ctx, [x], full_attrs(OPS["softmax"], {"axis": axis}), 0)
    rlo, rhi = _mpf_array(real.lo), _mpf_array(real.hi)
    assert np.all(glo <= rlo) and np.all(rhi <= ghi)
    n_vertices = 2 ** int(np.size(lo))
    vmin = np.min(np.stack(vals[:n_vertices]), axis=0)
    vmax = np.max(np.stack(vals[:n_vertices]), axis=0)
    slack = mpmath.mpf(SLACK[cname])
    assert np.all(vmin - rlo <= slack * vmin), (cname, case)
    assert np.all(rhi - vmax <= slack * vmax), (cname, case)
    slack = mpmath.mpf(EXEC_SLACK[cname])
    assert np.all(vmin - glo <= slack * vmin), (cname, case)
    assert np.all(ghi - vmax <= slack * vmax), (cname, case)


def test_softmax_interval_rule_with_batch_axes():
    """Two boxes in one call (a leading batch axis) equal two single calls."""
    ctx = scalars.get("interval:binary32")
    lo = np.array([[-1.0, 0.0, 1.0], [0.25, -2.0, 3.0]])
    hi = np.array([[1.0, 0.5, 1.0], [0.5, -1.0, 3.5]])
    g = _softmax_graph((3,), 0)
    both = denote_all(g, {}, ctx.make(lo, hi), ctx)[1]
    for k in range(2):
        one = denote_all(g, {}, ctx.make(lo[k], hi[k]), ctx)[1]
        assert np.array_equal(both.lo[k], one.lo) and np.array_equal(both.hi[k], one.hi)


def test_point_contexts_keep_the_forward_rule():
    """The interval rule runs only in interval contexts: point values are unchanged."""
    ctx = scalars.get("binary32")
    x = np.array([[0.5, -1.0, 2.0]])
    g = _softmax_graph((1, 3), 1)
    got = denote_all(g, {}, x, ctx)[1]
    want = OPS["softmax"].forward(ctx, [ctx.convert(x)], {"axis": 1}, 0)
    assert np.array_equal(got, want)
    assert not isinstance(got, Interval)


def test_a_degenerate_box_encloses_the_point_value():
    ctx = scalars.get("interval:float64")
    p = np.array([0.5, -1.0, 2.0])
    got = denote_all(_softmax_graph((3,), 0), {}, ctx.make(p, p), ctx)[1]
    exact = softmax_exact([mpmath.mpf(v) for v in p])
    for k in range(3):
        assert mpmath.mpf(got.lo[k]) <= exact[k] <= mpmath.mpf(got.hi[k])
        assert got.hi[k] - got.lo[k] <= 16 * np.spacing(float(exact[k]))
