"""The execution guarantee of the interval rules (graph/interval_rules.py).

A per-op rule is a reformulation of the op (softmax as 1 / sum exp(x_j - x_i), ...): its
box holds the exact real result but not what the lab's point context of the same format
computes, which rounds along the op's own evaluation.  The rules add the a-priori bound of
that point evaluation.  Checked here:

* the bound alone (the real rule widened, before the intersection with the generic box)
  holds every point value of random boxes, at random vertices and interior points, in
  float64, binary32, bfloat16 and binary16 — for every reformulated op and for the dot
  products and float64's pairwise sums;
* the bound is small (a few units of the format's roundoff at the box's magnitude);
* the graphs of the issue (relu -> softmax/log_softmax/layernorm/gelu/silu, one layer with
  six inputs and two layers with random weights, radius 0.3) report no violation in any
  of the four formats, both against the point context of the format (execution) and
  against 100-bit mpmath runs (real), boxes still tighter than the generic fold.
"""
from __future__ import annotations

import dataclasses
import zlib
from fractions import Fraction

import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.graph import Graph, Node, OpKind, Payload
from scalarlab.graph import interval_rules as R
from scalarlab.graph.optable import OPS, full_attrs
from scalarlab.ibp import Box, check_containment, run_ibp
from scalarlab.scalars.values import Interval

FORMATS = ["float64", "binary32", "bfloat16", "binary16"]
REFORMULATED = ["softmax", "log_softmax", "layernorm", "gelu", "silu", "mish", "gelu_tanh",
                "hardswish"]


def _format_box(pctx, shape, spread, rng):
    """Random box [lo, hi] with endpoints in the point format (so RN-converted samples
    stay inside), centres spread * N(0, 1), half-widths up to spread / 2."""
    c = spread * rng.standard_normal(shape)
    r = spread / 2 * rng.random(shape)
    lo = np.asarray(pctx.to_float64(pctx.convert(c - r)), dtype=np.float64)
    hi = np.asarray(pctx.to_float64(pctx.convert(c + r)), dtype=np.float64)
    return lo, hi


def _samples(lo, hi, n, rng):
    """n points of the box: the first half at random vertices, the rest inside."""
    u = rng.random((n,) + lo.shape)
    x = np.clip(lo + u * (hi - lo), lo, hi)
    x[: n // 2] = np.where(u[: n // 2] < 0.5, lo, hi)
    return x


def _case(op, pctx, ictx, rng, spread):
    """(interval args, point args builder, attrs, shape) of one op on a random box."""
    if op in ("softmax", "log_softmax"):
        lo, hi = _format_box(pctx, (3, 6), spread, rng)
        return lo, hi, [], full_attrs(OPS[op], {"axis": 1})
    if op == "layernorm":
        lo, hi = _format_box(pctx, (3, 6), spread, rng)
        gamma = rng.standard_normal(6)
        beta = rng.standard_normal(6)
        return lo, hi, [gamma, beta, "1e-5"], full_attrs(OPS[op], {"axis": 1})
    if op in ("linear",):
        lo, hi = _format_box(pctx, (4, 12), spread, rng)
        return lo, hi, [rng.standard_normal((5, 12)), rng.standard_normal(5)], \
            full_attrs(OPS[op], {})
    if op == "reduce_sum":
        lo, hi = _format_box(pctx, (3, 40), spread, rng)
        return lo, hi, [], full_attrs(OPS[op], {"axis": 1})
    lo, hi = _format_box(pctx, (24,), spread, rng)
    return lo, hi, [], full_attrs(OPS[op], {})


def _bound_only(op, ictx, iargs, attrs):
    """The real rule widened by the point evaluation's bound, WITHOUT the generic box."""
    rule = OPS[op].interval
    if op in REFORMULATED:
        real = rule.real(ictx, iargs, attrs, 0)
        return rule.bound(ictx, R.point_rounding(ictx), iargs, attrs, 0, real), real
    return rule(ictx, iargs, attrs, 0), OPS[op].forward(ictx, iargs, attrs, 0)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("op", REFORMULATED + ["linear"])
def test_the_bound_alone_holds_the_point_values(op, fmt):
    """widen(real box) holds every point value of 5 random boxes x 200 points, and the
    widening is a few units of roundoff of the box's magnitude."""
    pctx, ictx = scalars.get(fmt), scalars.get(f"interval:{fmt}")
    pr = R.point_rounding(ictx)
    rng = np.random.default_rng(zlib.crc32(f"{op}/{fmt}".encode()))
    checked = 0
    for k in range(5):
        spread = [0.5, 2.0, 4.0, 1.0, 3.0][k]
        lo, hi, params, attrs = _case(op, pctx, ictx, rng, spread)
        iargs = [ictx.make(lo, hi)] + [ictx.convert(p) for p in params]
        box, real = _bound_only(op, ictx, iargs, attrs)
        xs = _samples(lo, hi, 200, rng)
        pargs = [pctx.convert(xs)] + [pctx.convert(p) for p in params]
        vals = np.asarray(pctx.to_float64(OPS[op].forward(pctx, pargs, attrs, 1)))
        blo, bhi = np.asarray(box.lo, dtype=np.float64), np.asarray(box.hi, dtype=np.float64)
        inside = (blo <= vals) & (vals <= bhi)
        assert inside.all(), (op, fmt, k, vals[~inside][:3], np.broadcast_to(blo, vals.shape)
                              [~inside][:3], np.broadcast_to(bhi, vals.shape)[~inside][:3])
        checked += vals.size
        # small: the bound adds at most 64 (n + 8) u of the magnitudes (layernorm's
        # amplification by 1 / std is bounded by its box-free clamp instead)
        if op != "layernorm":
            rlo = np.asarray(real.lo, dtype=np.float64)
            rhi = np.asarray(real.hi, dtype=np.float64)
            mag = np.maximum(np.abs(rlo), np.abs(rhi)) + 1
            n = 13 if op == "linear" else 6
            extra = (rlo - blo) + (bhi - rhi)
            assert np.all(extra <= 64 * (n + 8) * float(pr.u) * mag * (1 + 4 * spread)), \
                (op, fmt, np.max(extra / mag))
    assert checked >= 5 * 200 * 5


@pytest.mark.parametrize("fmt", ["float64"])
def test_float64_pairwise_sums_are_held(fmt):
    """float64's sums are numpy's pairwise sums, not the interval context's sequential
    ones: the reduction rule adds gamma_n of the magnitudes (magnitudes over 16 decades,
    so the orders round differently)."""
    pctx, ictx = scalars.get(fmt), scalars.get(f"interval:{fmt}")
    assert not R.point_rounding(ictx).sequential
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 200)) * 10.0 ** rng.integers(-8, 8, (64, 200))
    attrs = full_attrs(OPS["reduce_sum"], {"axis": 1})
    box = OPS["reduce_sum"].interval(ictx, [ictx.make(x, x)], attrs, 0)
    seq = OPS["reduce_sum"].forward(ictx, [ictx.make(x, x)], attrs, 0)
    v = np.asarray(OPS["reduce_sum"].forward(pctx, [x], attrs, 0))
    assert np.all((box.lo <= v) & (v <= box.hi))
    # it holds the sequential box and adds at most gamma_201 sum |x| (+ rounding)
    assert np.all(box.lo <= seq.lo) and np.all(seq.hi <= box.hi)
    g = 201 * 2.0 ** -53 / (1 - 201 * 2.0 ** -53)
    assert np.all((seq.lo - box.lo) <= 1.01 * g * np.sum(np.abs(x), axis=1))
    assert np.all((box.hi - seq.hi) <= 1.01 * g * np.sum(np.abs(x), axis=1))


def test_float64_average_pooling_is_held():
    """avg_pool's window sums are float64's pairwise sums too (kernel 50, stride 10)."""
    pctx, ictx = scalars.get("float64"), scalars.get("interval:float64")
    rng = np.random.default_rng(4)
    x = rng.standard_normal((8, 2, 300)) * 10.0 ** rng.integers(-8, 8, (8, 2, 300))
    attrs = full_attrs(OPS["avg_pool1d"], {"kernel_size": [50], "stride": [10]})
    box = OPS["avg_pool1d"].interval(ictx, [ictx.make(x, x)], attrs, 1)
    plain = OPS["avg_pool1d"].forward(ictx, [ictx.make(x, x)], attrs, 1)
    v = np.asarray(OPS["avg_pool1d"].forward(pctx, [x], attrs, 1))
    assert np.all((box.lo <= v) & (v <= box.hi))
    assert np.all(box.lo <= plain.lo) and np.all(plain.hi <= box.hi)


def test_point_rounding_of_each_base():
    """u, eta and the order flags of the bases the bounds read."""
    pr = R.point_rounding(scalars.get("interval:bfloat16"))
    assert (pr.kind, pr.u, pr.eta, pr.sequential) == ("binary", 2.0 ** -8, 2.0 ** -133, True)
    pr = R.point_rounding(scalars.get("interval:binary16"))
    assert (pr.u, pr.eta) == (2.0 ** -11, 2.0 ** -24)
    pr = R.point_rounding(scalars.get("interval:float64"))
    assert (pr.kind, pr.u, pr.eta, pr.sequential) == ("float64", 2.0 ** -53, 2.0 ** -1074,
                                                      False)
    assert pr.func("exp")[0] >= 2.0 ** -52          # libm: its declared ulps, at least one
    pr = R.point_rounding(scalars.get("interval:mpmath:60"))
    assert (pr.kind, pr.u, pr.eta, pr.mirrored_dot) == ("mpmath", 2.0 ** -60, 0, True)
    pr = R.point_rounding(scalars.get("interval:rational"))
    assert pr.kind == "exact" and pr.u == 0
    assert R.point_rounding(scalars.get("interval:binary32")).gamma(3) == \
        Fraction(3, 2 ** 24 - 3)                     # exact: 3u / (1 - 3u)
    assert R.point_rounding(scalars.get("interval:e4m3")).gamma(8) is None


# ------------------------------------------------------------------------ the graphs
HEADS = ["softmax", "log_softmax", "layernorm", "gelu", "silu"]


def _head(op, i, parent, k):
    if op in ("gelu", "silu"):
        return Node(i, [parent], op, [k])
    return Node(i, [parent], OpKind(op, axis=0), [k])


def relu_head(op, seed):
    """input[6] -> relu -> op, centre 2 N(0, 1) (the issue's shape; seeds 5 and 7 gave
    violations in bfloat16/binary16 before the execution bounds)."""
    rng = np.random.default_rng(seed)
    g = Graph([Node(0, [], "input", [6]), Node(1, [0], "relu", [6]), _head(op, 2, 1, 6)])
    return g, Payload({}), 2 * rng.standard_normal(6)


def two_layers(op, seed):
    """input[4] -> linear(8) -> relu -> linear(5) -> op, random N(0, 1) weights."""
    rng = np.random.default_rng(seed)
    g = Graph([Node(0, [], "input", [4]), Node(1, [0], "linear", [8]),
               Node(2, [1], "relu", [8]), Node(3, [2], "linear", [5]), _head(op, 4, 3, 5)])
    p = Payload({1: {"W": rng.standard_normal((8, 4)), "b": rng.standard_normal(8)},
                 3: {"W": rng.standard_normal((5, 8)), "b": rng.standard_normal(5)}})
    return g, p, rng.standard_normal(4)


GRAPHS = [("relu_head", 5), ("relu_head", 7), ("two_layers", 1)]


#: the default run: every head once and every format at least once; -m slow: every pair
ISSUE_DEFAULT = {("softmax", "binary16"), ("log_softmax", "bfloat16"), ("layernorm", "binary32"),
                 ("gelu", "float64"), ("silu", "bfloat16")}


@pytest.mark.parametrize("op, fmt", [
    pytest.param(op, fmt, id=f"{op}-{fmt}",
                 marks=() if (op, fmt) in ISSUE_DEFAULT else pytest.mark.slow)
    for op in HEADS for fmt in FORMATS])
def test_issue_graphs_report_no_violation(op, fmt, monkeypatch):
    """Execution (point runs in the format) and real (100-bit mpmath runs): 0 violations
    at every node, every box claiming both guarantees; the head's box is tighter than
    the generic fold's."""
    ictx = f"interval:{fmt}"
    for kind, seed in GRAPHS:
        g, p, c = (relu_head if kind == "relu_head" else two_layers)(op, seed)
        box = Box.from_center_radius(c, 0.3)
        rep = check_containment(g, p, box, samples=300, point_ctx=fmt, seed=seed)
        assert rep.checked_guarantee == "execution"
        assert rep.violation_count == 0 and not rep.failures, rep.first_counterexample()
        assert all(b.guarantee == ("real", "execution") for b in rep.boxes)
        real = check_containment(g, p, box, samples=30, point_ctx="mpmath:100",
                                 interval_ctx=ictx, seed=seed, boxes=rep.boxes)
        assert real.checked_guarantee == "real"
        assert real.violation_count == 0 and not real.failures, real.first_counterexample()
        assert rep.checked + real.checked >= 330 + 2 * 2 ** 4
        out = g.output
        rec = OPS[op]
        with monkeypatch.context() as m:
            m.setitem(OPS, op, dataclasses.replace(rec, interval=None))
            generic = run_ibp(g, p, box, ictx)[out]
        w, wg = rep.boxes[out].width(), generic.width()
        assert np.all(w <= wg), (kind, seed, w, wg)
        if kind == "two_layers":      # after relu alone gelu/silu see x >= 0: monotone
            assert np.mean(w) < np.mean(wg), (kind, seed, w, wg)
