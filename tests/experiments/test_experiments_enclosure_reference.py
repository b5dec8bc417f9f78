"""The enclosure references (``enclosure``: balls, the default of compare and gaps;
``interval``: interval:float64) against the mpmath:200 oracle.

Where an enclosure settles a sample, its correctly rounded output values must be the
oracle's in every compared format and the reported figures (ULPs, bits) equal; a value on
a rounding boundary is not settled and goes to the oracle (labelled); an op the interval
enclosure has no rule for sends the whole run to the old path; with ``interval``, float64
runs take the oracle on every sample, the balls settle them.  Exact ties are built from
rationals by hand.  The ball reference's own decisions: test_experiments_ball_reference.py.
"""
import numpy as np
import pytest

from scalarlab import graph, scalars
from scalarlab.graph import Graph, Node, OpKind
from scalarlab.experiments import cases as CS
from scalarlab.experiments import compare as C
from scalarlab.experiments import enclosure_reference as ER
from scalarlab.experiments import gaps as G
from scalarlab.experiments import metrics
from scalarlab.experiments import reference as RF

LOW = ("binary32", "bfloat16", "binary16", "e4m3")


def _cnn():
    """conv2d(1->3, 3x3, pad 1) -> relu -> conv2d(3->2, 3x3) -> flatten -> linear(->4)
    -> tanh on 6x6 images, random weights (seeded)."""
    rng = np.random.default_rng(5)
    g = Graph([Node(0, [], "input", [1, 6, 6]),
               Node(1, [0], OpKind("conv2d", kernel_size=3, padding=1), [3, 6, 6]),
               Node(2, [1], "relu", [3, 6, 6]),
               Node(3, [2], OpKind("conv2d", kernel_size=3), [2, 4, 4]),
               Node(4, [3], "flatten", [32]),
               Node(5, [4], "linear", [4]),
               Node(6, [5], "tanh", [4])])
    p = {1: {"conv2d": {"weight": rng.normal(0, 0.5, (3, 1, 3, 3)),
                        "bias": rng.normal(0, 0.1, 3)}},
         3: {"conv2d": {"weight": rng.normal(0, 0.3, (2, 3, 3, 3)),
                        "bias": rng.normal(0, 0.1, 2)}},
         5: {"linear": {"W": rng.normal(0, 0.2, (4, 32)), "b": rng.normal(0, 0.1, 4)}}}
    return CS.GraphCase("cnn", g, graph.Payload(p))


def _same_rounding(ref, oracle, node, fmt):
    a = metrics.correctly_rounded(*ref.values[node], fmt)
    b = metrics.correctly_rounded(*oracle.values[node], fmt)
    return np.array_equal(a, b)


@pytest.mark.parametrize("method, name", [("interval", "interval:float64"),
                                          ("enclosure", "ball:3")])
@pytest.mark.parametrize("which", ["six-node", "cnn"])
def test_settled_outputs_are_the_oracles(which, method, name):
    """Every sample settled by the enclosure; the output's correctly rounded values equal
    the oracle's in each low format, and compare's ULP/bits figures at the output too."""
    case = CS.load_case("six-node") if which == "six-node" else _cnn()
    n = 40 if which == "six-node" else 12
    center = CS.center_of(case, None) if which == "six-node" else \
        np.random.default_rng(1).normal(0, 1, (1, 1, 6, 6))
    x = CS.box_samples(center, 0.05, n, seed=3)
    ctxs = CS.parse_contexts(",".join(LOW))
    ref = RF.compute_reference(case, x, method, ctxs)
    oracle = RF.compute_reference(case, x, "mpmath:200", ctxs)
    assert ref.check["samples_by_enclosure"] == n and ref.check["samples_by_oracle"] == 0
    assert ref.name == name and "proven" in ref.label
    out = case.output_id
    for c in ctxs:
        assert _same_rounding(ref, oracle, out, metrics.format_of(c)), c.name
        assert ref.check["settled"][c.name]["oracle"] == 0
    # every node's midpoint lies within its reported radius of the oracle's value
    for i, ((mh, ml), (oh, ol)) in enumerate(zip(ref.values, oracle.values)):
        d = np.abs((mh - oh) + (ml - ol))
        assert np.all(d <= ref.check["node_max_rel_radius"][i] * np.abs(mh) * (1 + 1e-9)
                      + 1e-300), i
    new = C.compare(case, ctxs, x, reference=method).rows
    old = C.compare(case, ctxs, x, reference="mpmath:200").rows
    at = new["node"] == out
    cols = ["max_ulps", "mean_ulps", "max_bits", "mean_bits"]
    assert np.array_equal(new.loc[at, cols].to_numpy(), old.loc[at, cols].to_numpy())
    # the relative errors agree to the printed 3 digits (midpoint vs oracle value)
    assert np.allclose(new.loc[at, "max_rel_err"], old.loc[at, "max_rel_err"], rtol=1e-3)


def test_float64_takes_the_oracle_and_says_so():
    """interval: float64 is beyond a float64 enclosure, the oracle runs; the balls settle
    float64 too, with the oracle's correctly rounded values."""
    case = CS.load_case("six-node")
    x = CS.box_samples(CS.center_of(case, None), 0.05, 5, seed=1)
    ctxs = CS.parse_contexts("float64,binary32")
    ref = RF.compute_reference(case, x, "interval", ctxs)
    oracle = RF.compute_reference(case, x, "mpmath:200", ctxs)
    assert ref.name == "mpmath:200"
    assert "enclosure not used: float64 has 53 significand bits" in ref.label
    for (a, b), (c, d) in zip(ref.values, oracle.values):
        assert np.array_equal(a, c) and np.array_equal(b, d)
    ball = RF.compute_reference(case, x, "enclosure", ctxs)
    assert ball.name == "ball:3" and ball.check["settled"]["float64"]["enclosure"] == 5
    assert _same_rounding(ball, oracle, case.output_id, metrics.format_of(ctxs[0]))


def _tie_case():
    """y = x0 + x1 (a linear node with weights 1, 1)."""
    g = Graph([Node(0, [], "input", [2]), Node(1, [0], "linear", [1])])
    p = graph.Payload({1: {"linear": {"W": np.array([["1", "1"]], dtype=object),
                                      "b": np.array(["0"], dtype=object)}}})
    return CS.GraphCase("tie", g, p)


def test_boundary_value_falls_back_and_is_labelled():
    """x = (1, 2^-24 + 10^-30): the exact sum lies just above the binary32 tie 1 + 2^-24,
    so it rounds up to 1 + 2^-23; the float64 enclosure of the decimal input straddles the
    tie (its ends round to 1 and 1 + 2^-23): not settled, the oracle decides that sample.
    The other sample (x1 = 2^-30) settles."""
    case = _tie_case()
    tiny = "0.000000059604644775390625000000000001"       # 2^-24 + 10^-36
    x = np.array([["1", tiny], ["1", "0.000000000931322574615478515625"]], dtype=object)
    ctxs = CS.parse_contexts("binary32")
    enc = ER.evaluate_enclosure(case, x)
    lo, hi = enc[1]
    assert not ER.settled_entries(lo, hi, metrics.format_of(ctxs[0]))[0, 0]
    ref = RF.compute_reference(case, x, "interval", ctxs)
    assert ref.check["samples_by_oracle"] == 1 and ref.check["samples_by_enclosure"] == 1
    assert ref.check["settled"]["binary32"] == {"enclosure": 1, "oracle": 1, "unsettled": 0}
    assert "proven on 1 of 2 samples" in ref.label and "; 1 by mpmath:200 (oracle" in ref.label
    assert ref.check["oracle_contradicted"] == 0
    r = metrics.correctly_rounded(*ref.values[1], metrics.format_of(ctxs[0])).reshape(-1)
    assert r.tolist() == [1 + 2.0 ** -23, 1.0]      # 1 + 2^-30 rounds to 1 in binary32
    # the balls hold the decimal input to ~2^-159: both samples settle, same values
    ball = RF.compute_reference(case, x, "enclosure", ctxs)
    assert ball.check["samples_by_ball"]["ball:3"] == 2 and ball.check["samples_by_oracle"] == 0
    assert metrics.correctly_rounded(*ball.values[1], metrics.format_of(ctxs[0])) \
        .reshape(-1).tolist() == [1 + 2.0 ** -23, 1.0]


def test_cancellation_falls_back(cancel_graph):
    """The elapsed-time graph (t0 + dt) - t0 with t0 ~ 1.7e12 s: the float64 enclosure of
    the sum is about 2^-11 wide, far wider than binary16's ulp at dt ~ 1e-3 (2^-20): no
    sample is proven, so after the pilot chunk (32 samples) the run goes to the oracle and
    the reference is the oracle's; with 8 samples (no pilot) each sample goes to the
    oracle.  In gaps (inputs rounded to binary16: t0 overflows) the enclosure is NaN."""
    case = CS.GraphCase("elapsed", *cancel_graph)
    rng = np.random.default_rng(11)
    t0 = 1.7e12 + rng.uniform(0.0, 1e6, 40)
    dt = rng.uniform(1e-3, 2e-3, 40)
    x = np.stack([t0, dt], axis=1)
    ctxs = CS.parse_contexts("binary16")
    new = RF.compute_reference(case, x, "interval", ctxs)
    old = RF.compute_reference(case, x, "mpmath:200", ctxs)
    assert new.name == "mpmath:200"
    assert "enclosure not used: it proved none of the first 32 samples" in new.label
    assert np.array_equal(new.values[2][0], old.values[2][0])
    few = RF.compute_reference(case, x[:8], "interval", ctxs)
    assert few.check["samples_by_oracle"] == 8 and few.check["oracle_contradicted"] == 0
    assert np.array_equal(few.values[2][0], old.values[2][0][:8])
    assert np.array_equal(few.values[2][0].reshape(-1), dt[:8])     # the oracle's exact dt
    # the balls carry (t0 + dt) - t0 exactly: every sample settles, the oracle's values
    ball = RF.compute_reference(case, x, "enclosure", ctxs)
    assert ball.check["samples_by_ball"]["ball:3"] == 40
    assert np.array_equal(ball.values[2][0], old.values[2][0])
    ctx = scalars.get("binary16")
    g = G.gaps(case, ctx, x=x[:8])
    assert np.array_equal(g.ulps, G.gaps(case, ctx, x=x[:8], reference="mpmath:200").ulps)
    assert g.reference.check["samples_by_oracle"] == 8


def test_enclosure_that_cannot_evaluate_uses_the_old_path():
    """log(0.1 x0 - 0.1 x1) at x = (1, 1 - 10^-20): the exact argument is 10^-21 > 0, but
    its float64 enclosure holds negative values and the interval log refuses it: the
    enclosure declines and the oracle evaluates every sample (the label says why)."""
    g = Graph([Node(0, [], "input", [2]), Node(1, [0], "linear", [1]),
               Node(2, [1], "log", [1])])
    p = graph.Payload({1: {"linear": {"W": np.array([["0.1", "-0.1"]], dtype=object),
                                      "b": np.array(["0"], dtype=object)}}})
    case = CS.GraphCase("log-cancel", g, p)
    x = np.array([["1", "0.99999999999999999999"]], dtype=object)
    ref = RF.compute_reference(case, x, "interval", CS.parse_contexts("binary32"))
    assert ref.name == "mpmath:200"
    assert "enclosure not used: interval:float64 cannot evaluate" in ref.label
    assert "log" in ref.check["enclosure_not_used"]
    assert abs(ref.values[2][0][0, 0] + 48.35428695287496) < 1e-12
    # a ball of the argument (10^-21 +/- ~10^-50) stays positive: proven, same value
    ball = RF.compute_reference(case, x, "enclosure", CS.parse_contexts("binary32"))
    assert ball.name == "ball:3" and ball.check["samples_by_oracle"] == 0
    assert abs(ball.values[2][0][0, 0] + 48.35428695287496) < 1e-12


def test_cli_default_and_explicit_reference(capsys):
    import json
    from scalarlab.experiments.cli import main
    assert main(["gaps", "--samples", "20", "--quiet", "--json"]) == 0
    meta = json.loads(capsys.readouterr().out)["meta"]
    assert meta["reference_check"]["settled"] == {
        "binary32": {"enclosure": 20, "oracle": 0, "unsettled": 0}}
    assert main(["gaps", "--samples", "20", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "reference  : ball enclosure, proven on 20 of 20 samples (20 at ball:3; node 5 " \
        "entries settled: binary32 20/20)" in out
    assert main(["gaps", "--samples", "20", "--quiet", "--reference", "interval"]) == 0
    assert "reference  : interval:float64 enclosure, proven on 20 of 20 samples (node 5 " \
        "entries settled: binary32 20/20)" in capsys.readouterr().out
    assert main(["gaps", "--samples", "20", "--quiet", "--reference", "mpmath:200"]) == 0
    assert "reference  : mpmath:200 (oracle, all samples)" in capsys.readouterr().out


def test_reduction_order_settles_every_node():
    """reduction-order reports every node against the reference: the enclosure must prove
    every node's values, and the 'vs reference' figures equal the oracle's."""
    from scalarlab.experiments import reduction_order as R
    case = CS.load_case("six-node")
    x = CS.box_samples(CS.center_of(case, None), 0.05, 30, seed=4)
    new = R.reduction_order(case, x, formats=("bfloat16",))
    old = R.reduction_order(case, x, formats=("bfloat16",), reference="mpmath:200")
    assert "proven on 30 of 30 samples (30 at ball:3; every node's entries settled: " \
        "bfloat16 570/570)" in new.reference
    cols = ["max_ulps_vs_reference", "mean_ulps_vs_reference", "max_bits_vs_reference"]
    assert np.array_equal(new.rows[cols].to_numpy(), old.rows[cols].to_numpy())
