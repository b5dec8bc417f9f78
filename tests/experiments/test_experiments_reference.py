"""``compute_reference``: the float64 shortcut and each of its fallbacks to the oracle.

Each case is a situation a user meets: elapsed times computed from absolute timestamps
(catastrophic cancellation: float64 fails the check), 8-bit pixel intensities compared in
fp8 e4m3 (many samples sit exactly halfway between two e4m3 values), and a batch with a
handful of such samples (re-evaluated in the oracle, the rest from float64).  Reference
values are checked against exact rational arithmetic.
"""
from fractions import Fraction

import numpy as np
import pytest

from scalarlab import graph
from scalarlab import scalars
from scalarlab.experiments import cases as CS
from scalarlab.experiments import compare as C
from scalarlab.experiments import reference as RF
from scalarlab.experiments.errors import ExperimentError


def _elapsed_case(cancel_graph):
    """x = (t0, dt) -> [t0 + dt, t0] -> (t0 + dt) - t0: the exact result is dt."""
    return CS.GraphCase("elapsed", *cancel_graph)


def _pixels_case():
    """Four pixel intensities through relu: the exact output is the input."""
    g = graph.Graph([graph.Node(0, [], "input", [4]), graph.Node(1, [0], "relu", [4])])
    return CS.GraphCase("pixels", g, graph.Payload({}))


def _e4m3_midpoints() -> set:
    """Midpoints between consecutive positive e4m3 values, from the encoding by hand:
    3 significand bits, exponent bias 7, subnormals m/8 * 2^-6, largest finite 448."""
    vals = {Fraction(m, 8) * Fraction(1, 2 ** 6) for m in range(8)}
    vals |= {(1 + Fraction(m, 8)) * Fraction(2) ** (e - 7)
             for e in range(1, 16) for m in range(8)}
    vals = sorted(v for v in vals if v <= 448)
    return {(a + b) / 2 for a, b in zip(vals, vals[1:])}


def test_float64_fails_the_check_on_cancellation(cancel_graph):
    """Timestamps near 1.7e9 s with millisecond offsets: float64 rounds t0 + dt to
    multiples of 2^-22 s, so (t0 + dt) - t0 is not dt, and its binary16 rounding differs
    from dt's on the check samples: the oracle evaluates every sample."""
    rng = np.random.default_rng(11)
    n = 150
    t0 = 1.7e9 + rng.uniform(0.0, 1e6, n)
    dt = rng.uniform(1e-3, 2e-3, n)
    x = np.stack([t0, dt], axis=1)
    ref = RF.compute_reference(_elapsed_case(cancel_graph), x, "mpmath:200",
                               CS.parse_contexts("binary16,bfloat16"),
                               oracle_limit=100, check_samples=32)
    assert ref.name == "mpmath:200" and ref.check == {}
    head, why = ref.label.split("; ", 1)
    assert head == "mpmath:200 (oracle, all samples)"
    assert why.startswith("float64 reference failed the check (")
    assert why.endswith(" rounded values differ on 32 samples)")
    assert int(why.split("(")[1].split()[0]) > 0
    assert "rounding boundary" not in ref.label
    # The oracle's values: (t0 + dt) - t0 == dt exactly, in rationals.
    hi, lo = ref.values[2]
    for k in range(n):
        exact = (Fraction(t0[k]) + Fraction(dt[k])) - Fraction(t0[k])
        assert exact == Fraction(dt[k])
        assert Fraction(float(hi[k, 0])) + Fraction(float(lo[k, 0])) == exact
    # ... which float64 does not give: the check was right to refuse it.
    f64 = CS.evaluate_split(_elapsed_case(cancel_graph), x, scalars.get("float64"))[2][0]
    assert np.count_nonzero(f64[:, 0] != dt) > n // 2


def test_float64_declined_when_many_samples_sit_on_a_rounding_boundary():
    """8-bit pixels compared in e4m3: an odd intensity in [16, 32) (and likewise higher up)
    is exactly halfway between two e4m3 values.  float64 agrees with the oracle everywhere
    (the check passes), yet too many samples sit on a boundary to trust it."""
    rng = np.random.default_rng(3)
    n = 400
    x = rng.integers(0, 256, size=(n, 4)).astype(np.float64)
    ref = RF.compute_reference(_pixels_case(), x, "mpmath:200", CS.parse_contexts("e4m3"),
                               oracle_limit=100, check_samples=32)
    mids = _e4m3_midpoints()
    k = sum(any(Fraction(v) in mids for v in row) for row in x)
    assert k > max(RF.BOUNDARY_REDO_MIN, n // RF.BOUNDARY_REDO_DIVISOR)
    assert ref.name == "mpmath:200"
    assert ref.label == (f"mpmath:200 (oracle, all samples); float64 reference not used: "
                         f"{k} of {n} samples lie within its error of a rounding boundary")
    assert "failed the check" not in ref.label
    for node in (0, 1):
        hi, lo = ref.values[node]
        assert np.array_equal(hi, x) and not lo.any()      # relu of a pixel is the pixel


def test_few_boundary_samples_are_redone_in_the_oracle():
    """Mostly non-integer inputs plus five pixels on e4m3 midpoints: float64 is used, the
    five samples are re-evaluated in the oracle, and the label counts them."""
    rng = np.random.default_rng(4)
    n = 300
    x = rng.uniform(0.0, 200.0, size=(n, 4))
    mids = sorted(float(m) for m in _e4m3_midpoints() if 16 <= m <= 255)
    on_boundary = [7, 50, 51, 120, 299]
    for j, i in enumerate(on_boundary):
        x[i, j % 4] = mids[3 * j]
    ref = RF.compute_reference(_pixels_case(), x, "mpmath:200", CS.parse_contexts("e4m3"),
                               oracle_limit=100, check_samples=32)
    assert ref.name == "float64"
    assert ref.check["rounding_mismatches"] == 0 and ref.check["max_rel_dev"] == 0.0
    assert ref.check["near_boundary_in_oracle"] == len(on_boundary)
    assert ref.label == ("float64, checked against mpmath:200 on 32 samples (max rel dev 0; "
                         "identical correctly rounded values at every node in every compared "
                         "format; 5 samples near a rounding boundary re-evaluated in the oracle)")
    for node in (0, 1):
        hi, lo = ref.values[node]
        assert np.array_equal(hi, x) and not lo.any()


def test_shortcut_not_tried_for_array_oracles_or_wide_formats():
    x = np.random.default_rng(5).uniform(0, 1, size=(150, 4))
    # A binary reference the user asked for is as cheap as float64: no shortcut, no reason.
    ref = RF.compute_reference(_pixels_case(), x, "binary32", CS.parse_contexts("e4m3"),
                               oracle_limit=100)
    assert ref.label == "binary32 (requested reference, not an oracle, all samples)"
    ref = RF.compute_reference(_pixels_case(), x, "float64", CS.parse_contexts("e4m3"),
                               oracle_limit=100)
    assert ref.name == "float64" and ref.label.startswith("float64 (requested reference")
    # binary32 has 24 significand bits (allowed), binary64 53 (refused).
    ref = RF.compute_reference(_pixels_case(), x, "mpmath:200",
                               CS.parse_contexts("binary32,binary64"), oracle_limit=100)
    assert ref.label.endswith("float64 reference not allowed: binary64 too precise for a "
                              "float64 reference")


@pytest.mark.parametrize("name, what", [("interval:binary32", "an interval"),
                                        ("dual:float64", "a dual"),
                                        ("complex128", "a complex")])
def test_point_contexts_only(name, what):
    with pytest.raises(ExperimentError, match=f"context {name} is {what} context"):
        CS.parse_contexts(name)


@pytest.fixture(params=["fmt as registered", "fmt = binary64"])
def float64_ctx(request, monkeypatch):
    """float64 as registered, and with ``fmt`` declared as binary64 on its class: the
    experiments must treat hardware float64 the same either way (by its flags, not its
    name), and apart from the emulated ``binary64`` context (which reduces sequentially)."""
    from scalarlab.scalars import formats
    ctx = scalars.get("float64")
    if request.param == "fmt = binary64":
        monkeypatch.setattr(type(ctx), "fmt", formats.get("binary64"), raising=False)
    return ctx


def test_float64_is_binary64_hardware_either_way(float64_ctx):
    from scalarlab.experiments import metrics
    assert metrics.is_binary64(metrics.format_of(float64_ctx))
    assert CS.is_array_context(float64_ctx) and CS._chunk_size(float64_ctx) == 1 << 18
    assert CS._chunk_size(scalars.get("mpmath:200")) == 256
    x = np.random.default_rng(6).uniform(0, 1, size=(150, 4))
    # float64 as a compared context is too precise for the float64 shortcut ...
    ref = RF.compute_reference(_pixels_case(), x, "mpmath:200", [float64_ctx], oracle_limit=100)
    assert ref.name == "mpmath:200" and "float64 too precise" in ref.label
    # ... and as the reference it is no oracle, and never replaced by itself.
    ref = RF.compute_reference(_pixels_case(), x, "float64", [scalars.get("e4m3")],
                               oracle_limit=100)
    assert ref.label == "float64 (requested reference, not an oracle, all samples)"
    res = C.compare(_pixels_case(), [float64_ctx, scalars.get("binary64")], x[:3])
    assert list(res.rows["format"]) == ["binary64"] * 4
    assert list(res.rows["reduction"]) == ["native", "native", "sequential", "sequential"]
    assert (res.rows["max_ulps"] == 0).all()
