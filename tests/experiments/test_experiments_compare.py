"""``compare``: every figure of the table recomputed independently on the six-node graph,
divergence located on a graph built to diverge at a known node, files, plots, errors."""
import json
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from scalarlab import graph
from scalarlab import scalars
from scalarlab.experiments import cases as CS
from scalarlab.experiments import compare as C
from scalarlab.experiments import compare_table as TB
from scalarlab.experiments.cli import main
from scalarlab.experiments.errors import ExperimentError
from scalarlab.scalars import formats
from scalarlab.scalars.errors import ScalarLabError



def png_size(path):
    """(width, height) from the PNG signature and IHDR chunk."""
    data = open(path, "rb").read(24)
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def _exact(v):
    """Exact Fraction of an mpmath mpf (sign handled by hand: man_exp drops it)."""
    man, exp = v.man_exp
    return (-1 if v < 0 else 1) * Fraction(int(man)) * Fraction(2) ** int(exp)


def _ord_by_bits(x, fmt_name):
    """Signed ordinal of format values, from the bit patterns of numpy views."""
    if fmt_name == "binary32":
        b = np.asarray(x, dtype=np.float32).view(np.int32).astype(np.int64)
        return np.where(b < 0, -(b & 0x7FFFFFFF), b)
    if fmt_name == "binary16":
        b = np.asarray(x, dtype=np.float16).view(np.int16).astype(np.int64)
        return np.where(b < 0, -(b & 0x7FFF), b)
    if fmt_name == "bfloat16":     # bfloat16 = top 16 bits of the binary32 pattern
        b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.int64) >> 16
        return np.where(b & 0x8000, -(b & 0x7FFF), b)
    if fmt_name == "binary64":
        b = np.asarray(x, dtype=np.float64).view(np.int64)
        return np.where(b < 0, -(b & 0x7FFFFFFFFFFFFFFF), b)
    raise AssertionError(fmt_name)


@pytest.fixture(scope="module")
def six():
    return CS.load_case("six-node")


@pytest.fixture(scope="module")
def sampled_result(six):
    x = CS.box_samples(CS.center_of(six, None), 0.05, 40, seed=5)
    ctxs = CS.parse_contexts("float64,binary32,bfloat16,binary16")
    return x, C.compare(six, ctxs, x, reference="mpmath:200", threshold=2.0)


def test_every_figure_recomputed_independently(six, sampled_result):
    x, res = sampled_result
    ref_ctx = scalars.get("mpmath:200")
    ref_vals = graph.denote_all(six.graph, six.payload, x, ref_ctx)
    ref_q = [[_exact(v) for v in np.asarray(rv, dtype=object).reshape(-1)] for rv in ref_vals]
    for ctx_name, fmt_name in [("float64", "binary64"), ("binary32", "binary32"),
                               ("bfloat16", "bfloat16"), ("binary16", "binary16")]:
        vals = graph.denote_all(six.graph, six.payload, x, scalars.get(ctx_name))
        fmt = formats.get(fmt_name)
        for node, v, rq in zip(six.nodes, vals, ref_q):
            v = np.asarray(v, dtype=np.float64).reshape(-1)
            abs_q = [abs(Fraction(float(a)) - r) for a, r in zip(v, rq)]
            rel_q = [e / abs(r) if r != 0 else (Fraction(0) if e == 0 else None)
                     for e, r in zip(abs_q, rq)]
            cr = np.array([formats.round_fraction(r, fmt) for r in rq])
            d = np.abs(_ord_by_bits(v, fmt_name) - _ord_by_bits(cr, fmt_name)).astype(float)
            row = res.rows[(res.rows["context"] == ctx_name) & (res.rows["node"] == node.id)]
            assert len(row) == 1
            row = row.iloc[0]
            assert row["entries"] == v.size and row["samples"] == 40
            assert row["max_abs_err"] == pytest.approx(float(max(abs_q)), rel=1e-12, abs=0)
            assert row["mean_abs_err"] == pytest.approx(float(sum(abs_q) / len(abs_q)), rel=1e-12)
            assert None not in rel_q                      # relu zeros are exact zeros
            assert row["max_rel_err"] == pytest.approx(float(max(rel_q)), rel=1e-12, abs=0)
            assert row["mean_rel_err"] == pytest.approx(float(sum(rel_q) / len(rel_q)), rel=1e-12)
            assert row["max_ulps"] == d.max() and row["mean_ulps"] == pytest.approx(d.mean())
            assert row["max_bits"] == pytest.approx(np.log2(1 + d.max()), abs=1e-15)
            assert row["mean_bits"] == pytest.approx(np.mean(np.log2(1 + d)), abs=1e-15)
            assert row["exceeds_threshold"] == (np.log2(1 + d.max()) > 2.0)


def test_default_run_at_x0_header_and_seed_values(six, capsys):
    assert main(["compare", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("scalarlab compare: graph six-node (6 nodes, output node 5)")
    # the ball enclosure proves float64's figures too (the interval one sent them to the oracle)
    assert "reference  : ball enclosure, proven on 1 of 1 samples (1 at ball:3; output " \
        "entries settled: binary64 1/1, binary32 1/1, bfloat16 1/1, binary16 1/1, e4m3 1/1)" in out
    assert "contexts   : float64, binary32, bfloat16, binary16, e4m3" in out
    assert "binary32=sequential" in out and "float64=native" in out
    assert "x0 = (0.3, -0.2, 0.1, 0.4)" in out and "samples    : 1" in out
    verdicts = out.split("verdict:")[1].strip().splitlines()
    assert [v.split()[0] for v in verdicts] == ["float64", "binary32", "bfloat16", "binary16", "e4m3"]
    # The six-node MLP at x0: node 4 = 0.027720, node 5 = 0.027713 to 6 decimals (exact
    # value of node 4: 0.02772; float64 and binary32 both print these digits).
    x0 = CS.center_of(six, None)
    for name in ("float64", "binary32"):
        vals = graph.denote_all(six.graph, six.payload, x0, scalars.get(name))
        assert f"{float(np.asarray(vals[4]).reshape(-1)[0]):.6f}" == "0.027720"
        assert f"{float(np.asarray(vals[5]).reshape(-1)[0]):.6f}" == "0.027713"


def _cancel_graph(tmp_path, cancel_graph):
    """The cancellation graph (x0 + x1) - x0 in a file.  With x = (1, 2^-30) binary32
    rounds the sum to 1 (correctly: 0 ULP at nodes 0 and 1) and node 2 becomes 0 instead
    of 2^-30: the gap starts exactly at node 2.  float64 holds 1 + 2^-30 exactly: no
    divergence."""
    path = tmp_path / "cancel.json"
    graph.save(str(path), *cancel_graph)
    return path


TWO_M30 = "0.000000000931322574615478515625"          # 2^-30, exactly


def test_divergence_at_known_node(tmp_path, cancel_graph):
    assert Fraction(TWO_M30) == Fraction(1, 2 ** 30)
    path = _cancel_graph(tmp_path, cancel_graph)
    case = CS.load_case(str(path))
    x = CS.parse_input(f"1,{TWO_M30}", case.input_shape())
    res = C.compare(case, CS.parse_contexts("binary32,float64"), x, threshold=2.0)
    b32 = res.rows[res.rows["context"] == "binary32"]
    assert list(b32["max_ulps"])[:2] == [0.0, 0.0]
    assert list(b32["divergence_start"]) == [False, False, True]
    # 0 vs 2^-30: the ordinal of 2^-30 in binary32 (exponent field 97, zero significand)
    assert b32["max_ulps"].iloc[2] == 97 * 2 ** 23
    assert b32["max_rel_err"].iloc[2] == 1.0
    assert res.verdicts["binary32"]["divergence_node"] == 2
    assert res.verdicts["float64"]["divergence_node"] is None
    assert list(res.rows[res.rows["context"] == "float64"]["max_ulps"]) == [0.0, 0.0, 0.0]


def test_cli_files_round_trip_and_plot(tmp_path, capsys, cancel_graph):
    path = _cancel_graph(tmp_path, cancel_graph)
    csv, js, md, png = (tmp_path / f"r.{s}" for s in ("csv", "json", "md", "png"))
    base = ["compare", str(path), "--input", f"1,{TWO_M30}", "--contexts", "binary32,bfloat16",
            "--quiet"]
    assert main(base + ["--out", str(csv), "--plot", str(png)]) == 0
    capsys.readouterr()
    assert main(base + ["--out", str(js), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert main(base + ["--out", str(md)]) == 0
    df = pd.read_csv(csv)
    assert list(df.columns) == list(TB.ROW_COLUMNS)
    assert len(df) == 6 and set(df["context"]) == {"binary32", "bfloat16"}
    filedoc = json.loads(js.read_text())
    assert filedoc["format"] == "scalarlab-compare" and filedoc["version"] == 1
    assert filedoc["rows"] == doc["rows"]
    back = pd.DataFrame(filedoc["rows"])
    assert list(back.columns) == list(TB.ROW_COLUMNS)
    assert np.array_equal(back["max_ulps"].astype(float), df["max_ulps"])
    assert back["divergence_start"].tolist() == df["divergence_start"].tolist()
    assert [v["divergence_node"] for v in filedoc["verdicts"]] == [2, 2]
    assert filedoc["meta"]["reduction_orders"] == {"binary32": "sequential",
                                                   "bfloat16": "sequential"}
    text = md.read_text()
    assert text.count("\n| ") >= 7 and "## Verdicts" in text
    assert png_size(png) == (800, 450)


def test_cheap_reference_only_after_check(six):
    x = CS.box_samples(CS.center_of(six, None), 0.05, 120, seed=2)
    ctxs = CS.parse_contexts("binary16,bfloat16")
    res = C.compare(six, ctxs, x, oracle_limit=100, check_samples=32, reference="mpmath:200")
    assert res.reference.name == "float64"
    assert "checked against mpmath:200 on 32 samples" in res.reference.label
    assert res.reference.check["rounding_mismatches"] == 0
    oracle = C.compare(six, ctxs, x, reference="mpmath:200")   # 120 <= limit: all oracle
    assert oracle.reference.name == "mpmath:200"
    cols = ["max_ulps", "mean_ulps", "max_bits"]
    assert np.allclose(res.rows[cols].to_numpy(), oracle.rows[cols].to_numpy())
    # float64 as a compared context: a float64 reference is refused, with the reason
    res = C.compare(six, CS.parse_contexts("float64,binary16"), x, oracle_limit=100,
                    reference="mpmath:200")
    assert res.reference.name == "mpmath:200" and "too precise" in res.reference.label


@pytest.mark.parametrize("argv, msg, status", [      # 2: refused while parsing the flags
    (["--contexts", "binary33"], "unknown context 'binary33'", 2),
    (["--contexts", "interval:binary32"], "interval context", 1),
    (["--contexts", "binary32,binary32"], "given more than once", 2),
    (["no-such-graph"], "neither a built-in", 1),
    (["--input", "1,2"], "got 2 numbers, the input node has shape [4]", 1),
    (["--input", "1,2,x,4"], "'x' is not a decimal number", 2),
    (["--input", "missing.npy"], "no such file", 2),
    (["--out", "table.xlsx"], "unknown file type '.xlsx'", 2),
    (["--plot", "plot.jpg"], "use one of .png", 2),
    (["--samples", "0"], "--samples: must be >= 1", 2),
    (["--reference", "mpmath:x"], "unknown context", 2),
    (["--threshold", "-1"], "--threshold", 2),
    (["--divergence-ulps", "-1"], "--divergence-ulps: must be >= 0, got -1", 2),
    (["--divergence-ulps", "nan"], "--divergence-ulps: must be a finite number", 2),
])
def test_user_errors_exit_1_with_message(argv, msg, status, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ctx = [] if "--contexts" in argv else ["--contexts", "binary32"]
    try:
        rc = main(["compare", "--quiet", *ctx, *argv])
    except SystemExit as exc:
        rc = exc.code
    assert rc == status
    err = capsys.readouterr().err
    assert err.startswith("scalarlab compare: error: ") and msg in err
    assert "Traceback" not in err


def test_argparse_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["compare", "--samples", "many"])
    assert exc.value.code == 2


def test_context_that_cannot_compute_a_node(six):
    """rational is exact up to the sum and refuses tanh: figures stop there, honestly."""
    x = CS.center_of(six, None)
    res = C.compare(six, CS.parse_contexts("rational,binary32"), x)
    rat = res.rows[res.rows["context"] == "rational"]
    assert list(rat["evaluated"]) == [True] * 5 + [False]
    assert (rat["max_rel_err"].iloc[:5] < 1e-30).all()        # exact vs the 200-bit oracle
    assert np.isnan(rat["max_abs_err"].iloc[5]) and rat["entries"].iloc[5] == 0
    v = res.verdicts["rational"]
    assert v["failed_nodes"] == [5]
    # the reason is the fold's own message for the node (no second evaluation)
    with pytest.raises(ScalarLabError) as info:
        graph.denote_all(six.graph, six.payload, x, scalars.get("rational"))
    assert v["failure"] == str(info.value) and "tanh 5" in v["failure"]
    assert v["text"].startswith("cannot compute node 5")
    assert res.verdicts["binary32"]["failed_nodes"] == []


def test_input_npy_goes_through_the_one_reader(tmp_path):
    """``--input x.npy`` is read by npy_input.read_npy: a bool mask is refused (as
    --input-file refuses it), integers within 2^53 and a batch of rows are read exactly,
    and a 0-d file is one input of a scalar input node."""
    mask = tmp_path / "mask.npy"
    np.save(mask, np.array([[True, False, True, False]]))
    with pytest.raises(ExperimentError, match="dtype bool holds truth values"):
        CS.parse_input(str(mask), (4,))
    ints = tmp_path / "ints.npy"
    np.save(ints, np.array([[1, -2, 3, 2 ** 53]], dtype=np.int64))
    x = CS.parse_input(str(ints), (4,))
    assert x.dtype == np.float64 and x.tolist() == [[1.0, -2.0, 3.0, 2.0 ** 53]]
    one = tmp_path / "one.npy"
    np.save(one, np.array([0.25, 0.5, -1.0, 3.0]))
    assert CS.parse_input(str(one), (4,)).shape == (1, 4)
    scalar = tmp_path / "scalar.npy"
    np.save(scalar, np.array(0.75))
    assert CS.parse_input(str(scalar), ()).tolist() == [0.75]
    with pytest.raises(ExperimentError, match="0-d array"):
        CS.parse_input(str(scalar), (4,))
    nan = tmp_path / "nan.npy"
    np.save(nan, np.array([0.25, np.nan, -1.0, 3.0]))
    with pytest.raises(ExperimentError, match=r"entry \[1\] is nan"):
        CS.parse_input(str(nan), (4,))


def test_contexts_flag_is_resolved_once_to_context_objects():
    """The CLI's --contexts type hands the command the contexts themselves; parse_contexts
    takes them as they are (and still refuses a non-point context, naming the flag)."""
    from scalarlab.experiments import argtypes as T
    got = T.contexts("binary32,float64")
    assert got == [scalars.get("binary32"), scalars.get("float64")]
    assert CS.parse_contexts(got) == got
    with pytest.raises(ExperimentError, match="--contexts: context .* interval"):
        CS.parse_contexts(T.contexts("binary32,interval:float64"))
