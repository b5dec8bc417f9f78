"""The vector figures of compare (issue 31): normwise ulps of the output scale, relative
error where the exact value is not tiny, underflow counts and their verdict text, and
divergence measured at each node's own scale.  Exact references are Fractions; every
expected figure is computed from them by hand (Fraction arithmetic, powers of two)."""
from fractions import Fraction as Q

import numpy as np
import pytest

from scalarlab.experiments import cases as CS
from scalarlab.experiments import compare as C
from scalarlab.experiments import compare_table as TB
from scalarlab.experiments import metrics
from scalarlab.experiments.errors import ExperimentError
from scalarlab.graph import Graph, Node, OpKind, Payload
from scalarlab.scalars import formats


def _figures(values, exact, fmt_name, samples=1):
    """``(summary + figures, EntryErrors)`` of float64 ``values`` against Fractions."""
    fmt = formats.get(fmt_name)
    v = np.asarray(values, dtype=np.float64)
    rh, rl = metrics.exact_split(np.asarray(exact, dtype=object))
    e = metrics.entry_errors(v, np.zeros_like(v), rh, rl, fmt)
    row = {**metrics.summarize(e), **metrics.figures(e, v, np.zeros_like(v), rh, rl, samples)}
    row.update(entries=int(v.size), evaluated=True)
    return row, e


def _ulp(q: Q, p: int, emin: int) -> Q:
    """ulp of |q| > 0 in a format of precision p: 2^(max(floor(log2 |q|), emin) - p + 1)."""
    q = abs(q)
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if Q(2) ** e > q:                    # floor(log2 q) by exact comparison
        e -= 1
    return Q(2) ** (max(e, emin) - p + 1)


def _text(row):
    return TB.verdict_text(None, row, None, [], [row], 2.0)


def test_near_zero_entry_dominates_ulps_not_the_normwise_figure():
    # binary32 output (1, 1/3, 10^-9): the first two correctly rounded, the third 1000
    # binary32 ulps of itself off -- yet far below one ulp of the output scale 1.
    exact = [Q(1), Q(1, 3), Q(1, 10 ** 9)]
    third = formats.round_fraction(Q(1, 3), "binary32")
    tiny = formats.round_fraction(Q(1, 10 ** 9), "binary32")
    tiny_off = tiny + 1000 * float(formats.ulp(tiny, "binary32"))
    row, e = _figures([1.0, third, tiny_off], exact, "binary32")
    assert row["max_ulps"] == 1000
    err = max(abs(Q(v) - q) for v, q in zip([1.0, third, tiny_off], exact))
    assert err == abs(Q(third) - Q(1, 3))             # 1/3's rounding, not the tiny entry
    assert row["normwise_ulps"] == pytest.approx(float(err / Q(2) ** -23), rel=1e-12)
    assert row["normwise_ulps"] == pytest.approx(1 / 12)    # (1/3 - RN(1/3)) / 2^-23
    # 10^-9 < 2^-24 * 1: tiny, left out of the relative figure; 1/3's error is its rounding
    assert row["nontiny"] == 2
    assert row["max_rel_err_nontiny"] == pytest.approx(
        float(abs(Q(third) - Q(1, 3)) / Q(1, 3)), rel=1e-12)
    assert row["max_rel_err"] > 1e-5                  # the old figure: the tiny entry's
    assert row["underflow"] == 0 and row["max_abs_ref"] == 1.0
    text = _text(row)
    assert text.startswith("output within 0.0833 ulps of its scale 1 (normwise)")
    assert "per entry up to 1000 ULPs" in text
    assert "not tiny (2 of 3)" in text and "underflow" not in text


def test_normwise_is_per_sample_scale():
    # two samples: (1000, 1) and (2^-10, 2^-10 + 2^-30); the second sample's error is
    # measured against ITS scale, not against 1000 of the first sample
    exact = [Q(1000), Q(1), Q(1, 2 ** 10), Q(1, 2 ** 10) + Q(1, 2 ** 30)]
    vals = [1000.0, 1.0, 2.0 ** -10, 2.0 ** -10]      # binary16 drops the 2^-30
    row, _ = _figures(vals, exact, "binary16", samples=2)
    # sample 2: error 2^-30, scale ulp(2^-10 + 2^-30) in binary16 = 2^(-10 - 10)
    assert row["normwise_ulps"] == pytest.approx(2.0 ** -10, rel=1e-12)
    one, _ = _figures(vals, exact, "binary16", samples=1)  # one scale 1000: ulp 2^-1
    assert one["normwise_ulps"] == pytest.approx(2.0 ** -29, rel=1e-12)
    assert row["max_ulps"] == 0                       # 2^-30 is below half an ulp there


@pytest.mark.parametrize("fmt_name", ["binary16", "e4m3"])
def test_all_underflow_correctly_rounded_to_zero_is_named_underflow(fmt_name):
    fmt = formats.get(fmt_name)
    sub = Q(fmt.min_subnormal)
    exact = [sub / 5, -sub / 3, sub / 7]              # all below half the smallest subnormal
    row, e = _figures([0.0, -0.0, 0.0], exact, fmt_name)
    assert row["max_ulps"] == 0                       # 0 IS the correctly rounded value
    assert row["underflow"] == 3 and row["underflow_rounded"] == 3
    assert row["normwise_ulps"] == pytest.approx(float((sub / 3) / sub), rel=1e-12)
    assert row["nontiny"] == 0                        # all below the normal range
    text = _text(row)
    assert text.startswith("the whole output underflowed: all 3 outputs are 0 where the "
                           "exact value is not (0 is the correctly rounded value")
    assert "correctly rounded (0 ULP)" not in text and "no relative figure" in text


def test_all_underflow_where_zero_is_wrong():
    # 2^-20 is a binary16 subnormal (ordinal 16): the 0 the context gave is 16 ULPs off
    row, _ = _figures([0.0, 0.0], [Q(1, 2 ** 20), Q(3, 2 ** 22)], "binary16")
    assert row["max_ulps"] == 16 and row["underflow"] == 2 and row["underflow_rounded"] == 0
    assert row["normwise_ulps"] == pytest.approx(16.0)   # error 2^-20 / ulp(2^-20) = 2^-24
    text = _text(row)
    assert text.startswith("the whole output underflowed: all 2 outputs are 0 where the "
                           "exact value is not; output within 16 ulps")
    assert "correctly rounded" not in text


def test_mixed_underflow_and_exact_zero():
    # (1, 2^-30, 0, 2^-18): 2^-30 rounds to 0 in binary16 (counted, correctly rounded to
    # 0), the exact 0 is no underflow, 2^-18 lost to 0 is an underflow 64 ULPs off
    exact = [Q(1), Q(1, 2 ** 30), Q(0), Q(1, 2 ** 18)]
    row, _ = _figures([1.0, 0.0, 0.0, 0.0], exact, "binary16")
    assert row["underflow"] == 2 and row["underflow_rounded"] == 1
    assert row["max_ulps"] == 64
    assert row["normwise_ulps"] == pytest.approx(float(Q(1, 2 ** 18) / Q(2) ** -10))
    assert row["nontiny"] == 1 and row["max_rel_err_nontiny"] == 0.0
    text = _text(row)
    assert "underflow: 2 of 4 outputs are 0 where the exact value is not (1 of them " \
           "correctly rounded to 0)" in text
    assert text.startswith("output within 0.00391 ulps of its scale 1 (normwise)")


def test_correctly_rounded_output_without_underflow():
    exact = [Q(1, 3), Q(-2, 7)]
    vals = [formats.round_fraction(q, "bfloat16") for q in exact]
    row, _ = _figures(vals, exact, "bfloat16")
    worst = max(abs(Q(v) - q) for v, q in zip(vals, exact))
    assert row["normwise_ulps"] == pytest.approx(float(worst / _ulp(Q(1, 3), 8, -126)))
    assert row["normwise_ulps"] <= 0.5
    assert "every entry correctly rounded (0 ULP)" in _text(row)


def test_nan_and_inf_handling():
    inf, nan = float("inf"), float("nan")
    # a NaN for a number: the figure is inf and the entry is non-finite
    row, _ = _figures([nan, 2.0], [Q(1), Q(2)], "binary32")
    assert row["normwise_ulps"] == inf and row["nonfinite"] == 1
    assert "1 non-finite entries" in _text(row)
    # an overflow to inf where the exact value is finite
    row, _ = _figures([inf, 1.0], [Q(2) ** 200, Q(1)], "binary32")
    assert row["normwise_ulps"] == inf
    # agreeing non-finite pairs take no part: the figure is the finite entries'
    rh = np.array([nan, inf, 1.5])
    e = metrics.entry_errors(np.array([nan, inf, 1.5]), np.zeros(3), rh, np.zeros(3),
                             formats.get("binary32"))
    f = metrics.figures(e, np.array([nan, inf, 1.5]), np.zeros(3), rh, np.zeros(3))
    assert f["normwise_ulps"] == 0.0 and f["max_abs_ref"] == 1.5 and f["nontiny"] == 1
    # an all-zero exact output measures its error in ulp(0) = the smallest subnormal
    row, _ = _figures([2.0 ** -149, 0.0], [Q(0), Q(0)], "binary32")
    assert row["normwise_ulps"] == 1.0 and row["underflow"] == 0


def test_formatless_context_has_no_normwise_figure():
    rh, rl = metrics.exact_split(np.array([Q(1, 3), Q(1, 10 ** 30)], dtype=object))
    v = rh * (1 + 2.0 ** -40)
    e = metrics.entry_errors(v, np.zeros(2), rh, rl, None)
    f = metrics.figures(e, v, np.zeros(2), rh, rl)
    assert np.isnan(f["normwise_ulps"]) and f["nontiny"] == 1     # 1e-30 < 2^-53 / 3
    assert f["max_rel_err_nontiny"] == pytest.approx(2.0 ** -40, rel=1e-6)


# ------------------------------------------------------------------------- divergence
def _deep_cancellation():
    """An MLP whose node 6 subtracts the two nearly equal entries of node 5 (rows of W5
    with relative gap 2^-10): the error at nodes 1..5 is rounding as usual, at node 6 it is
    hundreds of ulps of the node's (small) scale.  Per-entry bits exceed 2 at node 1."""
    rng = np.random.default_rng(7)
    W1, W3 = rng.standard_normal((16, 8)), rng.standard_normal((16, 16)) / 4
    a = np.abs(rng.standard_normal(16))   # node 5: positive terms, no cancellation there
    g = Graph([Node(0, [], "input", [8]), Node(1, [0], "linear", [16]),
               Node(2, [1], "relu", [16]), Node(3, [2], "linear", [16]),
               Node(4, [3], "relu", [16]), Node(5, [4], "linear", [2]),
               Node(6, [5], "linear", [1]), Node(7, [6], "tanh", [1])])
    p = Payload({1: {"linear": {"W": W1, "b": np.zeros(16)}},
                 3: {"linear": {"W": W3, "b": np.zeros(16)}},
                 5: {"linear": {"W": np.stack([a, a * (1 + 2.0 ** -10)]), "b": np.zeros(2)}},
                 6: {"linear": {"W": np.array([[256.0, -256.0]]), "b": np.zeros(1)}}})
    return CS.GraphCase("deep-cancel", g, p, None), rng.standard_normal((4, 8))


def _conv_stack():
    """A resnet-like stack: conv-relu-conv + skip, relu, conv + skip (3x8x8, 4 channels)."""
    rng = np.random.default_rng(11)
    w1, w3 = rng.standard_normal((4, 3, 3, 3)) / 5, rng.standard_normal((4, 4, 3, 3)) / 6
    at = dict(kernel_size=3, out_channels=4, padding=1)
    g = Graph([Node(0, [], "input", [3, 8, 8]),
               Node(1, [0], OpKind("conv2d", **at), [4, 8, 8]),
               Node(2, [1], "relu", [4, 8, 8]), Node(3, [2], OpKind("conv2d", **at), [4, 8, 8]),
               Node(4, [3, 1], "add", [4, 8, 8]), Node(5, [4], "relu", [4, 8, 8]),
               Node(6, [5], OpKind("conv2d", **at), [4, 8, 8]), Node(7, [6, 4], "add", [4, 8, 8])])
    p = Payload({1: {"weight": w1, "bias": np.zeros(4)}, 3: {"weight": w3, "bias": np.zeros(4)},
                 6: {"weight": w3[::-1].copy(), "bias": np.zeros(4)}})
    return CS.GraphCase("conv-stack", g, p, None), rng.standard_normal((2, 3, 8, 8))


@pytest.mark.parametrize("build, node", [(_deep_cancellation, 6), (_conv_stack, None)])
def test_divergence_at_the_node_scale_not_node_one(build, node):
    case, x = build()
    res = C.compare(case, CS.parse_contexts("binary32,bfloat16,float64"), x)
    assert res.reference.name == "ball:3"      # float64 included: the balls prove it
    for ctx in ("binary32", "bfloat16", "float64"):
        rows = res.rows[res.rows["context"] == ctx]
        # the per-entry rule of old named node 1 on both networks
        assert metrics.first_divergence(list(rows["max_bits"]), 2.0) == 1
        v = res.verdicts[ctx]
        assert v["divergence_node"] == node
        norm = list(rows["normwise_ulps"])
        first = next((i for i, u in enumerate(norm) if u > TB.DEFAULT_DIVERGENCE_ULPS), None)
        assert first == node
        if node is not None:
            assert max(norm[:node]) < 4 and norm[node] > 100
            assert f"error first exceeds 4 ulps of the node's scale at node {node}" in v["text"]
            assert list(rows["divergence_start"]).index(True) == node
        else:
            assert "never above 4 ulps of a node's scale" in v["text"]
    # a threshold above every node's figure finds nothing; one below node 1's finds node 1
    low = C.compare(case, CS.parse_contexts("binary32"), x, divergence_ulps=0.6)
    assert low.verdicts["binary32"]["divergence_node"] == 1
    assert low.meta()["divergence_ulps"] == 0.6
    with pytest.raises(ExperimentError, match="--divergence-ulps must be a number of ulps"):
        C.compare(case, CS.parse_contexts("binary32"), x, divergence_ulps=float("inf"))


def _tiny_case():
    """y = 2^-20 x: on x near 2^-6 the exact output lies near 2^-26, under half binary16's
    smallest subnormal 2^-24 (0 is its correctly rounded value), a binary32 normal."""
    g = Graph([Node(0, [], "input", [1]), Node(1, [0], "linear", [1])])
    p = Payload({1: {"linear": {"W": np.array([[2.0 ** -20]]), "b": np.zeros(1)}}})
    return CS.GraphCase("tiny", g, p, np.array([2.0 ** -6]))


def test_compare_verdict_on_an_underflowing_output():
    res = C.compare(_tiny_case(), CS.parse_contexts("binary16,binary32"),
                    np.array([[2.0 ** -6]]))
    v = res.verdicts["binary16"]
    assert v["output_max_ulps"] == 0                 # what the old verdict called CR
    assert v["output_underflow"] == 1 and v["output_underflow_rounded"] == 1
    assert v["text"].startswith("the whole output underflowed: it is 0 where the exact "
                                "value is not (0 is the correctly rounded value")
    assert "correctly rounded (0 ULP)" not in v["text"]
    assert v["output_normwise_ulps"] == 0.25          # 2^-26 / ulp(2^-26) = 2^-24
    b32 = res.verdicts["binary32"]                   # 2^-26 exactly: no underflow
    assert b32["output_underflow"] == 0 and "every entry correctly rounded (0 ULP)" in b32["text"]


def test_gaps_verdict_counts_underflow_apart():
    """Every output of the tiny graph is 0 in binary16, the correctly rounded value: the
    verdict says 0% correctly rounded and names the underflow."""
    from scalarlab.experiments import gaps as G
    case = _tiny_case()
    res = G.gaps(case, CS.parse_contexts("binary16")[0], samples=20, radius=2.0 ** -9)
    assert np.all(res.ulps == 0)
    text = G.verdict_text(res)
    assert text.startswith("0.0% of outputs correctly rounded; worst 0 ULP")
    assert text.endswith("underflow: 20 of 20 outputs are 0 where the exact value is not "
                         "(20 of them correctly rounded to 0)")
    nw = res.summary.set_index("metric").loc["normwise_ulps"]
    assert 0.1 < nw["max"] < 0.5            # |exact| / 2^-24, exact in [2^-26 - 2^-29, ...]
    assert res.summary.set_index("metric").loc["rel_err_nontiny", "entries"] == 0
