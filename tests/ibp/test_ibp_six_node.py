"""IBP on the six-node MLP: its boxes at radius 0.05 (exact values to 6 decimals), the
informative tanh box, variations (radius, last op, a log node), and the checker's
ability to fail."""
from fractions import Fraction

import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.graph import Graph, Node, Payload, denote_all, examples
from scalarlab.ibp import Box, check_containment, run_ibp
from scalarlab.ibp.errors import IBPError

# The exact boxes (interval:rational, nodes 0-4) at 6 decimals for radius 0.05 around x0.
EXACT_BOXES = {
    0: ([0.25, -0.25, 0.05, 0.35], [0.35, -0.15, 0.15, 0.45]),
    1: ([0.087, -0.0315, -0.0075, 0.0675, -0.015], [0.127, -0.0025, 0.0155, 0.0945, 0.009]),
    2: ([0.087, 0.0, 0.0, 0.0675, 0.0], [0.127, 0.0, 0.0155, 0.0945, 0.009]),
    3: ([0.025445, -0.016025, 0.011355], [0.029815, -0.01222, 0.018045]),
    4: ([0.020775], [0.03564]),
}


@pytest.fixture
def six():
    """A fresh (graph, payload, x0) per test: no test sees another's changes."""
    return examples.six_node_mlp()


def assert_boxed(boxes, expect_none=()):
    """Every node has a box except the ones named in ``expect_none`` (which must be None:
    a rule that gives up there is the documented answer, not a pass by default)."""
    missing = [i for i, b in enumerate(boxes) if b is None]
    assert missing == sorted(expect_none), f"nodes without a box: {missing}"


@pytest.mark.parametrize("ctx", ["interval:binary32", "interval:float64", "interval:rational",
                                 "interval:mpmath:200", "interval:bfloat16"])
def test_boxes_match_seed(six, ctx):
    g, p, x0 = six
    boxes = run_ibp(g, p, Box.from_center_radius(x0, "0.05"), ctx)
    # tanh has no exact rational value: interval:rational gives up on node 5, by design
    assert_boxed(boxes, expect_none=[5] if ctx == "interval:rational" else [])
    # bfloat16 endpoints are 8-bit: only outward, within a few of its ulps
    tol = 5e-7 if "bfloat16" not in ctx else 2e-3
    for nid, (lo, hi) in EXACT_BOXES.items():
        b = boxes[nid]
        blo, bhi = b.lo_float().reshape(-1), b.hi_float().reshape(-1)
        # ours may be wider, only by outward rounding
        assert np.all(blo <= np.array(lo) + 5e-7), (nid, blo, lo)
        assert np.all(bhi >= np.array(hi) - 5e-7), (nid, bhi, hi)
        assert np.all(blo >= np.array(lo) - tol - 5e-7), (nid, blo, lo)
        assert np.all(bhi <= np.array(hi) + tol + 5e-7), (nid, bhi, hi)


def test_exact_boxes_in_rational(six):
    """interval:rational gives the exact image box of the affine layers (no rounding)."""
    g, p, x0 = six
    boxes = run_ibp(g, p, Box.from_center_radius(x0, "0.05"), "interval:rational")
    assert_boxed(boxes, expect_none=[5])
    for nid, (lo, hi) in EXACT_BOXES.items():
        assert [Fraction(v) for v in boxes[nid].lo.reshape(-1)] == [Fraction(str(v)) for v in lo]
        assert [Fraction(v) for v in boxes[nid].hi.reshape(-1)] == [Fraction(str(v)) for v in hi]
    # tanh cannot be bounded exactly over rationals: no box, no error (asserted above)


def test_output_box_informative_and_contains_center(six):
    g, p, x0 = six
    boxes = run_ibp(g, p, Box.from_center_radius(x0, "0.05"), "interval:binary32")
    assert_boxed(boxes)
    out = boxes[5]
    lo, hi = float(out.lo_float()), float(out.hi_float())
    assert lo <= 0.027713 <= hi
    assert hi - lo < 0.02  # the trivial tanh bound [-1, 1] has width 2
    # endpoint rule: [RD tanh(lo4), RU tanh(hi4)], within one binary32 ulp of the real values
    import mpmath
    from scalarlab.scalars import formats
    f32 = formats.get("binary32")
    with mpmath.workprec(200):
        t_lo = mpmath.tanh(mpmath.mpf(float(boxes[4].lo_float())))
        t_hi = mpmath.tanh(mpmath.mpf(float(boxes[4].hi_float())))
        u_lo, u_hi = float(formats.ulp(np.array(lo), f32)), float(formats.ulp(np.array(hi), f32))
        assert t_lo - u_lo < mpmath.mpf(lo) <= t_lo
        assert t_hi <= mpmath.mpf(hi) < t_hi + u_hi
    assert np.float32(lo) == lo and np.float32(hi) == hi
    assert f"{lo:.6f}" == "0.020772" and f"{hi:.6f}" == "0.035625"


def test_batched_boxes_equal_single_calls(six):
    g, p, x0 = six
    centers = np.array([[0.3, -0.2, 0.1, 0.4], [0.1, 0.2, -0.3, 0.0], [1.0, -1.0, 0.5, 0.25]])
    batched = run_ibp(g, p, Box.from_center_radius(centers, 0.05), "interval:binary32")
    assert_boxed(batched)
    for i in range(3):
        single = run_ibp(g, p, Box.from_center_radius(centers[i], 0.05), "interval:binary32")
        assert_boxed(single)
        for b, s in zip(batched, single):
            assert np.array_equal(b.lo[i], s.lo) and np.array_equal(b.hi[i], s.hi)


def test_containment_passes_on_seed_experiment(six):
    g, p, x0 = six
    rep = check_containment(g, p, Box.from_center_radius(x0, "0.05"), samples=50,
                            point_ctx="binary32", seed=0)
    assert rep.ok and rep.samples == 50 and rep.vertices == 16 and rep.violation_count == 0
    assert rep.unbounded == []
    # the sampled outputs really are inside the propagated output box
    out = rep.boxes[5]
    assert np.all((rep.outputs >= out.lo_float()) & (rep.outputs <= out.hi_float()))


def _shrunk_tanh_context(base):
    """A copy of interval context ``base`` whose tanh box is shrunk by 1% (unsound)."""
    import copy

    class ShrunkTanh(type(base)):
        def tanh(self, a):
            r = super().tanh(a)
            iv = self.to_float64(r)
            mid, rad = (iv.lo + iv.hi) / 2, (iv.hi - iv.lo) / 2 * 0.99
            return self.make(self.base.convert(mid - rad), self.base.convert(mid + rad))

    bad = copy.copy(base)
    bad.__class__ = ShrunkTanh
    bad.name = base.name + "+shrunk-tanh"
    return bad


def test_checker_reports_injected_unsound_rule(six):
    """tanh(linear(x)): each box is attained at a vertex, so a tanh rule shrunk by 1% must
    be caught, with a counterexample input inside the input box and exit status 1."""
    _, p6, x0 = six
    g = Graph([Node(0, [], "input", [4]), Node(1, [0], "linear", [5]), Node(2, [1], "tanh", [5])])
    p = Payload({1: p6.get(1)})
    base = scalars.get("interval:binary32")
    bad = _shrunk_tanh_context(base)
    box = Box.from_center_radius(x0, "0.05")
    honest = check_containment(g, p, box, samples=200, point_ctx="binary32", seed=1)
    assert honest.ok and honest.unbounded == []
    rep = check_containment(g, p, box, samples=200, point_ctx="binary32", seed=1,
                            interval_ctx=bad)
    assert not rep.ok and rep.violation_count > 0 and rep.unbounded == []
    v = rep.violations[0]
    assert v.node == 2 and not (v.lo <= v.value <= v.hi)
    assert "node 2" in rep.first_counterexample()
    # the counterexample input is inside the input box
    assert np.all(np.abs(np.array(v.input) - np.array([0.3, -0.2, 0.1, 0.4])) <= 0.05 + 1e-12)


def test_radius_where_node2_coordinate1_leaves_zero(six):
    """Radius variation: node 1 coordinate 1 is -0.017 at x0 with l1 weight norm 0.29, so the
    relu box [0, 0] opens exactly when the radius exceeds 0.017 / 0.29."""
    g, p, x0 = six
    crit = Fraction("0.017") / Fraction("0.29")
    below = run_ibp(g, p, Box.from_center_radius(x0, crit - Fraction(1, 10 ** 6)), "interval:rational")
    at = run_ibp(g, p, Box.from_center_radius(x0, crit), "interval:rational")
    above = run_ibp(g, p, Box.from_center_radius(x0, crit + Fraction(1, 10 ** 6)), "interval:rational")
    for boxes in (below, at, above):
        assert_boxed(boxes, expect_none=[5])               # tanh over rationals, as above
    assert Fraction(below[2].hi[1]) == 0 and Fraction(at[2].hi[1]) == 0
    assert Fraction(above[2].hi[1]) > 0
    wide = run_ibp(g, p, Box.from_center_radius(x0, "0.5"), "interval:binary32")
    assert_boxed(wide)
    assert float(wide[2].hi_float()[1]) > 0


def _replace_last(g, op):
    nodes = list(g.nodes[:5]) + [Node(5, [4], op, [])]
    return Graph(nodes)


def test_sigmoid_and_abs_variations(six):
    g, p, x0 = six
    box = Box.from_center_radius(x0, "0.05")
    sig_boxes = run_ibp(_replace_last(g, "sigmoid"), p, box, "interval:binary32")
    ab_boxes = run_ibp(_replace_last(g, "abs"), p, box, "interval:binary32")
    assert_boxed(sig_boxes)
    assert_boxed(ab_boxes)
    sig, ab = sig_boxes[5], ab_boxes[5]
    assert 0.5 < float(sig.lo_float()) < float(sig.hi_float()) < 0.51
    assert float(ab.lo_float()) == pytest.approx(0.020775, abs=1e-6)
    assert float(ab.hi_float()) == pytest.approx(0.03564, abs=1e-6)
    for gg in (_replace_last(g, "sigmoid"), _replace_last(g, "abs")):
        rep = check_containment(gg, p, box, samples=100, point_ctx="binary32")
        assert rep.ok and rep.unbounded == []


def test_log_after_tanh_never_fails_but_ibp_cannot_show_it(six):
    """log after tanh.  Every column of W2 sums to a positive number and relu >= 0, so the
    sum is >= sum(b2) = 0.01 for EVERY input: log(tanh(.)) never fails.  IBP loses that
    correlation (node 3 is boxed per coordinate), so its tanh box reaches below 0 and the
    log node gets no bound; sampling finds no failing input."""
    g, p, x0 = six
    gl = Graph(list(g.nodes) + [Node(6, [5], "log", [])])
    box = Box.from_center_radius(x0, "0.5")
    boxes = run_ibp(gl, p, box, "interval:binary32")
    assert_boxed(boxes, expect_none=[6])        # log of a box reaching below 0: no bound
    assert float(boxes[5].lo_float()) < 0
    rep = check_containment(gl, p, box, samples=300, point_ctx="float64", seed=3)
    assert rep.ok and not rep.failures and rep.unbounded == [6]
    assert np.min(denote_all(g, p, sample_box_points(box), scalars.get("float64"))[4]) >= 0.01 - 1e-15


def sample_box_points(box):
    from scalarlab.ibp.containment import box_vertices, sample_box
    return np.concatenate([box_vertices(box), sample_box(box, 500, 7)])


def test_log_of_a_signed_layer_reports_failing_inputs(six):
    """log applied to node 1 (which has negative coordinates) fails on real inputs; the
    checker lists them, each with the fold's message naming the node."""
    g, p, x0 = six
    gl = Graph(list(g.nodes[:2]) + [Node(2, [1], "log", [5])])
    p = Payload({1: p.get(1)})
    box = Box.from_center_radius(x0, "0.05")
    assert_boxed(run_ibp(gl, p, box, "interval:binary32"), expect_none=[2])
    rep = check_containment(gl, p, box, samples=100, point_ctx="float64", seed=3)
    assert rep.unbounded == [2]
    assert not rep.ok and len(rep.failures) == rep.checked  # coordinate 1 is always < 0
    assert "log 2" in rep.failures[0].message and "non-positive" in rep.failures[0].message
    vals = denote_all(Graph(list(g.nodes[:2])), p, np.array([f.input for f in rep.failures]),
                      scalars.get("float64"))[1]
    assert np.all(np.min(vals, axis=1) <= 0)


def test_bad_inputs_raise_clear_errors(six):
    g, p, x0 = six
    with pytest.raises(IBPError, match="interval context"):
        run_ibp(g, p, Box.from_center_radius(x0, 0.1), "binary32")
    with pytest.raises(IBPError, match="lo > hi"):
        Box([1.0, 2.0], [0.0, 3.0])
    with pytest.raises(IBPError, match="radius must be >= 0"):
        Box.from_center_radius(x0, -1)
