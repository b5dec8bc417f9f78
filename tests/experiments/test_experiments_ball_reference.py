"""The ball reference (``--reference enclosure``): a small residual CNN against exact
rationals and the mpmath:200 oracle, and its decisions on constructed cases.

The CNN has what resnet18 has: a strided, padded convolution, batchnorm (its variances
chosen so that ``sqrt(var + eps)`` is rational: the ``rational`` context evaluates the
whole network exactly), relu, a residual add, max pooling, global average pooling and a
gemm.  The ball output must hold the exact output, and every figure it settles (float64
included) must be the exact one.  The decisions: a sample settled at ball:3, one whose
ball:3 radius is too wide but whose midpoint settles (escalated to ball:6), one exactly on
a float64 tie (boundary: straight to the oracle), one whose divisor ball holds 0 at
ball:3 (refused, settled at ball:6).
"""
from fractions import Fraction as F

import numpy as np
import pytest

from scalarlab import graph, scalars
from scalarlab.graph import Graph, Node, OpKind
from scalarlab.experiments import cases as CS
from scalarlab.experiments import compare as C
from scalarlab.experiments import enclosure_reference as ER
from scalarlab.experiments import metrics
from scalarlab.experiments import reference as RF

CTXS = "float64,binary32,bfloat16"


def _resnet_like():
    """input [2, 8, 8] -> conv 3x3 stride 2 pad 1 -> batchnorm -> relu -> conv 3x3 pad 1
    -> + (residual) -> max_pool 2x2 -> global average pool -> flatten -> gemm [3]."""
    rng = np.random.default_rng(7)
    g = Graph([Node(0, [], "input", [2, 8, 8]),
               Node(1, [0], OpKind("conv2d", kernel_size=3, stride=2, padding=1), [4, 4, 4]),
               Node(2, [1], OpKind("batchnorm_eval", axis=0), [4, 4, 4]),
               Node(3, [2], "relu", [4, 4, 4]),
               Node(4, [3], OpKind("conv2d", kernel_size=3, padding=1), [4, 4, 4]),
               Node(5, [3, 4], "add", [4, 4, 4]),
               Node(6, [5], OpKind("max_pool2d", kernel_size=2, stride=2), [4, 2, 2]),
               Node(7, [6], "global_avg_pool", [4, 1, 1]),
               Node(8, [7], "flatten", [4]),
               Node(9, [8], "linear", [3])])
    # var + eps = s^2 exactly (decimal strings), so the rational context takes the sqrt
    var = np.array(["1.56249", "0.24999", "0.56249", "2.24999"], dtype=object)
    p = {1: {"conv2d": {"weight": rng.normal(0, 0.4, (4, 2, 3, 3)),
                        "bias": rng.normal(0, 0.1, 4)}},
         2: {"batchnorm_eval": {"mean": rng.normal(0, 0.1, 4), "var": var,
                                "gamma": rng.normal(1, 0.2, 4), "beta": rng.normal(0, 0.1, 4),
                                "eps": np.array("0.00001", dtype=object)}},
         4: {"conv2d": {"weight": rng.normal(0, 0.3, (4, 4, 3, 3)),
                        "bias": rng.normal(0, 0.1, 4)}},
         9: {"linear": {"W": rng.normal(0, 0.5, (3, 4)), "b": rng.normal(0, 0.1, 3)}}}
    return CS.GraphCase("resnet-like", g, graph.Payload(p))


def _exact_output(case, x):
    vals = graph.denote_all(case.graph, case.payload, x, scalars.get("rational"))
    return [F(int(q.numerator), int(q.denominator)) for q in vals[case.output_id].reshape(-1)]


def _rounded(exact, fmt):
    """Exact rationals correctly rounded into ``fmt`` (through an exact double-double)."""
    hi = np.array([float(q) for q in exact])
    lo = np.array([float(q - F(h)) for q, h in zip(exact, hi)])
    return metrics.correctly_rounded(hi, lo, fmt)


def test_resnet_like_ball_holds_exact_and_settles_exact_figures():
    case = _resnet_like()
    x = CS.box_samples(np.random.default_rng(2).normal(0, 1, (1, 2, 8, 8)), 0.05, 3, seed=5)
    ball = scalars.get("ball:3")
    out = graph.denote_all(case.graph, case.payload, x, ball)[case.output_id]
    exact = _exact_output(case, x)
    mid = out.mid.reshape(out.mid.shape[0], -1)
    rad = out.rad.reshape(-1)
    for j, e in enumerate(exact):
        m = sum(F(float(t)) for t in mid[:, j])
        assert abs(m - e) <= F(float(rad[j]))
        assert rad[j] <= 2.0 ** -140 * abs(float(e))          # tight: ~2^-150 relative
    ctxs = CS.parse_contexts(CTXS)
    ref = RF.compute_reference(case, x, "enclosure", ctxs)
    assert ref.name == "ball:3" and ref.check["samples_by_ball"] == {"ball:3": 3, "ball:6": 0}
    for c in ctxs:
        f = metrics.format_of(c)
        got = metrics.correctly_rounded(*ref.values[case.output_id], f).reshape(-1)
        assert np.array_equal(got, _rounded(exact, f)), c.name
    # compare's figures at the output: the oracle's
    new = C.compare(case, ctxs, x).rows
    old = C.compare(case, ctxs, x, reference="mpmath:200").rows
    at = new["node"] == case.output_id
    cols = ["max_ulps", "mean_ulps", "max_bits", "mean_bits"]
    assert np.array_equal(new.loc[at, cols].to_numpy(), old.loc[at, cols].to_numpy())


def _scale_case():
    """y = (x * 0.1) * 10 + 0 * x: exactly x, but through two decimal weights whose ball:3
    conversions leave a radius of ~2^-160 relative."""
    g = Graph([Node(0, [], "input", [1]), Node(1, [0], "linear", [1]),
               Node(2, [1], "linear", [1])])
    p = graph.Payload({1: {"linear": {"W": np.array([["0.1"]], dtype=object),
                                      "b": np.array(["0"], dtype=object)}},
                       2: {"linear": {"W": np.array([["10"]], dtype=object),
                                      "b": np.array(["0"], dtype=object)}}})
    return CS.GraphCase("scale", g, p)


TIE = "1.00000000000000011102230246251565404236316680908203125"      # 1 + 2^-53
NEAR_TIE = TIE + "0" * 16 + "1"          # 1 + 2^-53 + 10^-70: rounds up to 1 + 2^-52


def test_decisions_settled_escalated_boundary():
    """Three samples through (x * 0.1) * 10 compared in float64: 0.75 settles at ball:3;
    10^-70 above the float64 tie (below ball:3's radius, ~1e-48) the midpoint alone
    settles, so ball:6 (radius ~1e-96) proves it; exactly on the tie nothing can: the
    oracle (as a boundary case, or after ball:6 as a radius case: the product's midpoint
    lands beside the tie)."""
    case = _scale_case()
    x = np.array([["0.75"], [NEAR_TIE], [TIE]], dtype=object)
    ctxs = CS.parse_contexts("float64")
    ref = RF.compute_reference(case, x, "enclosure", ctxs)
    assert ref.check["samples_by_ball"] == {"ball:3": 1, "ball:6": 1}
    assert ref.check["samples_by_oracle"] == 1
    assert ref.check["oracle_reasons"] == {"boundary": 0, "radius": 1, "refused": 0} or \
        ref.check["oracle_reasons"] == {"boundary": 1, "radius": 0, "refused": 0}
    assert ref.name == "ball:3+mpmath:200"
    assert "proven on 2 of 3 samples (1 at ball:3, 1 at ball:6;" in ref.label
    got = metrics.correctly_rounded(*ref.values[2], metrics.format_of(ctxs[0])).reshape(-1)
    assert got.tolist() == [0.75, 1 + 2.0 ** -52, 1.0]     # the tie rounds to even: 1
    assert ref.check["oracle_contradicted"] == 0


def test_decision_boundary_skips_escalation():
    """x + 0 at the exact float64 tie: the midpoint is the tie itself (radius 0), no
    precision settles it, so it goes to the oracle without a ball:6 pass."""
    g = Graph([Node(0, [], "input", [1]), Node(1, [0], "linear", [1])])
    p = graph.Payload({1: {"linear": {"W": np.array([["1"]], dtype=object),
                                      "b": np.array(["0"], dtype=object)}}})
    case = CS.GraphCase("id", g, p)
    x = np.array([[TIE], ["0.5"]], dtype=object)
    ref = RF.compute_reference(case, x, "enclosure", CS.parse_contexts("float64"))
    assert ref.check["oracle_reasons"] == {"boundary": 1, "radius": 0, "refused": 0}
    assert ref.check["samples_by_ball"] == {"ball:3": 1, "ball:6": 0}
    assert "; 1 by mpmath:200 (oracle, all samples) (1 boundary)" in ref.label


def test_decision_refused_then_settled_at_ball6():
    """1 / (0.1 x0 - 0.1 x1) at x = (1, 1 - 10^-60): the divisor is 10^-61 exactly, but its
    ball:3 holds 0 (radius ~1e-50): refused, escalated, settled at ball:6."""
    g = Graph([Node(0, [], "input", [2]), Node(1, [0], "linear", [1]),
               Node(2, [], "const", [1]), Node(3, [2, 1], "div", [1])])
    p = graph.Payload({1: {"linear": {"W": np.array([["0.1", "-0.1"]], dtype=object),
                                      "b": np.array(["0"], dtype=object)}},
                       2: {"const": {"value": np.array([1.0])}}})
    case = CS.GraphCase("refused", g, p)
    x = np.array([["1", "0." + "9" * 60]], dtype=object)
    ref = RF.compute_reference(case, x, "enclosure", CS.parse_contexts("float64"))
    assert ref.check["samples_by_ball"] == {"ball:3": 0, "ball:6": 1}
    assert ref.check["samples_by_oracle"] == 0
    assert "divisor ball" in ref.check["ball_refused"]
    assert ref.values[3][0].reshape(-1).tolist() == [float(10 ** 61)]    # exactly 10^61


def test_settled_rule_at_a_power_of_two():
    """Around 1.0 (float64) the gap below is half the gap above (u = 2^-52): a midpoint
    0.2u below rounds to 1, 0.3u below to 1 - u/2, 0.45u above to 1, 0.55u above to 1 + u;
    exactly u/4 below is a tie (never settled), and a radius that reaches across the
    halfway point (0.2u below, radius 0.1u) is not settled."""
    from scalarlab.scalars.values import Ball
    ctx = scalars.get("ball:3")
    f = metrics.format_of(scalars.get("float64"))
    u = 2.0 ** -52
    for below, rad, want in ((0.2, 0, 1.0), (0.3, 0, 1 - u / 2), (-0.45, 0, 1.0),
                             (-0.55, 0, 1 + u), (0.25, 0, None), (0.2, 0.1, None)):
        b = Ball(np.array([[1.0], [-below * u], [0.0]]), np.array([rad * u]))
        ok, val = ER.ball_settled(ctx, b, f, 1)
        assert bool(ok[0, 0]) is (want is not None), below
        if want is not None:
            assert val[0, 0] == want, below
    # a ball around 0: only a radius below half the smallest subnormal settles it (0 has
    # no ulp of its own; exp(1e-100) - 1 at 191 bits is 0 +/- 2.3e-100, not 0)
    for fmt, tiny, wide in ((f, 2.0 ** -1074, 2.3e-100),
                            (metrics.format_of(scalars.get("binary32")), 2.0 ** -149, 1e-45)):
        for rad, want in ((wide, False), (tiny * 0.4, True), (0.0, True)):
            b = Ball(np.zeros((3, 1)), np.array([rad]))
            ok, val = ER.ball_settled(ctx, b, fmt, 1)
            assert bool(ok[0, 0]) is want, (fmt.name, rad)


def test_reported_nodes_only_keep_their_values():
    """gaps asks for one node: the others' midpoints are NaN views taking no memory (2000
    samples of every node of mobilenet would be 2.4 GB); the node's own values are the
    full reference's, and a sample sent to the oracle still gets the oracle's there."""
    case = _scale_case()
    x = np.array([["0.75"], [TIE]], dtype=object)
    ctxs = CS.parse_contexts("float64")
    full = RF.compute_reference(case, x, "enclosure", ctxs)
    one = RF.compute_reference(case, x, "enclosure", ctxs, nodes=[2])
    assert np.array_equal(one.values[2][0], full.values[2][0])
    assert one.check["samples_by_oracle"] == 1
    assert not one.values[1][0].flags.writeable and np.isnan(one.values[1][0]).all()
    assert one.values[1][0].strides == (0, 0)
