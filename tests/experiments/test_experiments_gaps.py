"""``gaps``: samplers stay in the format and the box; the distribution is recomputed
independently (ULPs from float16/float32 bit patterns, exact rounding of the oracle)."""
import json
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from scalarlab import graph
from scalarlab import scalars
from scalarlab.experiments import cases as CS
from scalarlab.experiments import gaps as G
from scalarlab.experiments.cli import main
from scalarlab.scalars import formats


def _exact(v):
    man, exp = v.man_exp
    return (-1 if v < 0 else 1) * Fraction(int(man)) * Fraction(2) ** int(exp)


def png_size(path):
    data = open(path, "rb").read(24)
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


@pytest.mark.parametrize("fmt_name", ["binary16", "e4m3", "bfloat16"])
def test_ordinals_round_trip_every_finite_value(fmt_name):
    fmt = formats.get(fmt_name)
    vals = formats.decode(np.arange(2 ** fmt.total_bits), fmt)
    vals = np.unique(vals[np.isfinite(vals)])          # -0 and +0 collapse, sorted
    k = G.ordinals(vals, fmt)
    assert np.array_equal(k, np.arange(-(len(vals) // 2), len(vals) // 2 + 1))
    assert np.array_equal(G.from_ordinals(k, fmt), vals)


def test_binary16_ordinals_match_bit_patterns():
    x = np.float16(np.linspace(-3, 3, 101)).astype(np.float64)
    b = x.astype(np.float16).view(np.int16).astype(np.int64)
    hand = np.where(b < 0, -(b & 0x7FFF), b)
    assert np.array_equal(G.ordinals(x, formats.get("binary16")), hand)


@pytest.mark.parametrize("sampling", G.SAMPLINGS)
def test_samples_are_format_values_in_the_box_and_seeded(sampling):
    fmt = formats.get("bfloat16")
    center = np.array([["0.3", "-0.2", "0.1", "0.4"]], dtype=object)
    x = G.sample_inputs(center, 0.05, 500, 11, fmt, sampling)
    assert x.shape == (500, 4)
    assert np.array_equal(formats.round_to_format(x, fmt), x)
    c = np.array([0.3, -0.2, 0.1, 0.4])
    assert np.all(x >= c - 0.05 - 2.0 ** -8) and np.all(x <= c + 0.05 + 2.0 ** -8)
    if sampling == "bitpattern":                        # rounded inward: strictly inside
        assert np.all(x >= c - 0.05) and np.all(x <= c + 0.05)
    assert np.array_equal(x, G.sample_inputs(center, 0.05, 500, 11, fmt, sampling))
    assert not np.array_equal(x, G.sample_inputs(center, 0.05, 500, 12, fmt, sampling))


def test_bitpattern_sampling_reaches_tiny_values():
    fmt = formats.get("binary16")
    center = np.array([["0"]], dtype=object)
    x = G.sample_inputs(center, 1.0, 4000, 0, fmt, "bitpattern")
    # uniform over ordinals: about half the values of [-1, 1] lie below 2^-7 in magnitude
    assert 0.3 < np.mean(np.abs(x) < 2.0 ** -7) < 0.7
    assert np.any((x != 0) & (np.abs(x) < fmt.min_normal))   # subnormals are hit


def test_distribution_recomputed_independently():
    case = CS.load_case("six-node")
    ctx = scalars.get("binary16")
    res = G.gaps(case, ctx, samples=150, sampling="box", radius=0.05, seed=3)
    x = G.sample_inputs(CS.center_of(case, None), 0.05, 150, 3, formats.get("binary16"), "box")
    v = np.asarray(graph.denote(case.graph, case.payload, x, ctx), dtype=np.float64)
    r = graph.denote(case.graph, case.payload, x, scalars.get("mpmath:200"))
    cr = np.array([formats.round_fraction(_exact(t), formats.get("binary16")) for t in r])
    b = lambda a: a.astype(np.float16).view(np.int16).astype(np.int64)  # noqa: E731
    d = np.abs(b(v) - b(cr)).astype(float)               # all outputs are positive here
    assert np.all(v > 0) and np.all(cr > 0)
    assert np.array_equal(res.ulps, d)
    ulps = res.summary[res.summary["metric"] == "ulps"].iloc[0]
    bits = res.summary[res.summary["metric"] == "bits"].iloc[0]
    assert ulps["max"] == d.max() and ulps["mean"] == pytest.approx(d.mean())
    assert ulps["p50"] == np.percentile(d, 50) and ulps["p99"] == np.percentile(d, 99)
    assert bits["max"] == pytest.approx(np.log2(1 + d.max()))
    assert bits["mean"] == pytest.approx(np.mean(np.log2(1 + d)))
    # normwise, one figure per sample (a scalar output: its own scale); 1/ulp exact here
    ex = [_exact(t) for t in r]
    norm = [float(abs(Fraction(float(a)) - q) / Fraction(float(formats.ulp(float(q), "binary16"))))
            for a, q in zip(v, ex)]
    nw = res.summary[res.summary["metric"] == "normwise_ulps"].iloc[0]
    assert nw["max"] == pytest.approx(max(norm)) and nw["mean"] == pytest.approx(np.mean(norm))
    hist = res.histogram()
    assert sum(hist.values()) == 150
    assert hist == {str(int(k)): int(n) for k, n in zip(*np.unique(d, return_counts=True))}


def test_cli_json_out_and_histogram_png(tmp_path, capsys):
    out, png = tmp_path / "g.csv", tmp_path / "g.png"
    assert main(["gaps", "--context", "bfloat16", "--samples", "80", "--sampling", "bitpattern",
                 "--quiet", "--json", "--out", str(out), "--plot", str(png)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "scalarlab-gaps" and doc["meta"]["sampling"] == "bitpattern"
    assert [r["metric"] for r in doc["rows"]] == ["ulps", "bits", "rel_err", "normwise_ulps",
                                                  "rel_err_nontiny"]
    assert [r["entries"] for r in doc["rows"]][3:] == [80, 80]     # per sample / not tiny
    assert sum(doc["histogram"].values()) == 80
    df = pd.read_csv(out)
    assert list(df.columns) == list(G.SUMMARY_COLUMNS)
    assert np.allclose(df["max"], [r["max"] for r in doc["rows"]])
    assert png_size(png) == (800, 450)


@pytest.mark.parametrize("argv, msg, status", [      # 2: refused while parsing the flags
    (["--context", "mpmath:200"], "has none", 1),
    (["--context", "nope"], "unknown context", 2),
    (["--context", "interval:float64"], "interval context", 1),
    (["--node", "9"], "has nodes 0..5", 1),
    (["--radius", "-1"], "--radius", 2),
])
def test_gaps_user_errors(argv, msg, status, capsys):
    try:
        rc = main(["gaps", "--samples", "5", "--quiet", *argv])
    except SystemExit as exc:
        rc = exc.code
    assert rc == status
    err = capsys.readouterr().err
    assert err.startswith("scalarlab gaps: error: ") and msg in err


def test_checked_float64_reference_gives_the_oracles_gaps():
    case = CS.load_case("six-node")
    ctx = scalars.get("bfloat16")
    cheap = G.gaps(case, ctx, samples=600, seed=9, oracle_limit=500, check_samples=64,
                   reference="mpmath:200")
    oracle = G.gaps(case, ctx, samples=600, seed=9, reference="mpmath:200")
    assert cheap.reference.name == "float64" and oracle.reference.name == "mpmath:200"
    assert "checked against mpmath:200 on 64 samples" in cheap.reference.label
    assert "near_boundary_in_oracle" in cheap.reference.check
    assert np.array_equal(cheap.ulps, oracle.ulps)
    # an explicitly requested binary reference is not called an oracle
    r = G.gaps(case, ctx, samples=20, reference="float64")
    assert r.reference.label.startswith("float64 (requested reference, not an oracle")
