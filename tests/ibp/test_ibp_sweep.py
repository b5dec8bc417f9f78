"""Sweeps: figures per row, determinism, Dask = serial, and the CLI commands."""
import json

import numpy as np
import pandas as pd
import pytest

from scalarlab.experiments.cli import main
from scalarlab.graph import examples
from scalarlab.ibp import Box, check_containment, run_ibp, sweep


@pytest.fixture
def six():
    """A fresh (graph, payload, x0) per test: no test sees another's changes."""
    return examples.six_node_mlp()


def test_sweep_rows_recompute(six):
    g, p, x0 = six
    df = sweep(g, p, x0, ["0.01", "0.05"], ["float64", "binary32"], [300], seed=5,
               shard_size=128)
    assert list(df["radius"]) == [0.01, 0.01, 0.05, 0.05]
    assert (df["violations"] == 0).all() and (df["samples"] == 300).all()
    assert (df["vertices"] == 16).all() and (df["unbounded"] == 0).all()
    row = df.iloc[3]
    box = run_ibp(g, p, Box.from_center_radius(x0, "0.05"), "interval:binary32")[5]
    assert row["box_lo"] == float(box.lo_float()) and row["box_hi"] == float(box.hi_float())
    assert row["box_width"] >= row["box_hi"] - row["box_lo"]
    assert 0 < row["tightness"] <= 1
    assert row["tightness"] == pytest.approx(row["sampled_width"] / row["box_width"])
    # the sampled range is what the samples gave (same shards, recomputed here)
    assert row["sampled_lo"] >= row["box_lo"] and row["sampled_hi"] <= row["box_hi"]
    # wider boxes: wider sampled range
    assert df.iloc[2]["sampled_width"] > df.iloc[0]["sampled_width"]


def test_sweep_counts_nodes_without_a_box(six):
    """log(tanh(.)) at radius 0.5: the tanh box reaches below 0, so the log node gets no
    box; the row says so instead of passing it silently."""
    from scalarlab.graph import Graph, Node
    g, p, x0 = six
    gl = Graph(list(g.nodes) + [Node(6, [5], "log", [])])
    df = sweep(gl, p, x0, ["0.01", "0.5"], ["binary32"], [50], seed=1, output_id=5)
    assert list(df["unbounded"]) == [0, 1]
    assert (df["violations"] == 0).all()


def test_sweep_is_deterministic_and_shard_independent_of_engine(six):
    g, p, x0 = six
    a = sweep(g, p, x0, ["0.05"], ["binary32"], [500], seed=3, shard_size=200)
    b = sweep(g, p, x0, ["0.05"], ["binary32"], [500], seed=3, shard_size=200)
    pd.testing.assert_frame_equal(a, b)
    # vertices pin the extremes; without them the sampling seed shows in the sampled range
    c = sweep(g, p, x0, ["0.05"], ["binary32"], [500], seed=3, shard_size=200, vertices=False)
    d = sweep(g, p, x0, ["0.05"], ["binary32"], [500], seed=4, shard_size=200, vertices=False)
    assert c.iloc[0]["sampled_lo"] != d.iloc[0]["sampled_lo"]
    assert c.iloc[0]["vertices"] == 0 and a.iloc[0]["vertices"] == 16


@pytest.mark.slow   # a local cluster (9 s CPU); test_sweep_dask_scheduler stays default
def test_dask_two_workers_equals_serial(six):
    g, p, x0 = six
    kw = dict(seed=9, shard_size=150)
    serial = sweep(g, p, x0, ["0.05", "0.5"], ["float64", "bfloat16"], [400], **kw)
    dask = sweep(g, p, x0, ["0.05", "0.5"], ["float64", "bfloat16"], [400], workers=2, **kw)
    pd.testing.assert_frame_equal(serial, dask)


def test_graph_semantics_cli(capsys):
    assert main(["graph-semantics", "--samples", "50"]) == 0
    out = capsys.readouterr().out
    assert "node 4: [0.020775] .. [0.035640]" in out
    assert "node 5: [0.020772] .. [0.035625]" in out
    assert "output interval: [0.020772, 0.035625]" in out
    assert "all 66 samples inside" in out
    assert main(["graph-semantics", "--samples", "20", "--json", "--context", "float64"]) == 0
    doc = json.loads(capsys.readouterr().out)
    summary = doc["summary"]
    assert doc["format"] == "scalarlab-graph-semantics" and doc["meta"]["radius"] == "0.05"
    assert summary["ok"] and summary["samples"] == 20 and summary["violations"] == 0
    # float64 endpoints are rounded outward from the exact decimals 0.3 - 0.05, ...
    lo0 = doc["rows"][0]["lo"]
    assert lo0 == pytest.approx([0.25, -0.25, 0.05, 0.35], abs=1e-16)
    assert lo0[2] < 0.05 and lo0[0] == 0.25  # 0.05 is not a float64; 0.25 is


def test_graph_semantics_cli_reports_counterexample(monkeypatch, capsys):
    """A broken rule makes the command print the first counterexample and exit 1."""
    from scalarlab import ibp

    real = ibp.run_ibp

    def shrunk(*a, **k):
        boxes = real(*a, **k)
        b = boxes[2]
        mid = (b.lo + b.hi) / 2
        boxes[2] = Box(mid, mid)
        return boxes

    monkeypatch.setattr(ibp, "run_ibp", shrunk)
    assert main(["graph-semantics", "--samples", "10"]) == 1
    out = capsys.readouterr().out
    assert "counterexample: sample" in out and "node 2" in out


def test_sweep_cli_json_and_csv(tmp_path, capsys):
    out = tmp_path / "s.csv"
    rc = main(["sweep", "six-node", "--radii", "0.01,0.05", "--samples", "100",
               "--contexts", "binary32", "--json", "--quiet", "--out", str(out)])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "scalarlab-sweep" and doc["meta"]["seed"] == 0
    recs = doc["rows"]
    assert len(recs) == 2 and all(r["violations"] == 0 for r in recs)
    assert {"samples", "violations", "box_width", "sampled_width", "tightness"} <= set(recs[0])
    df = pd.read_csv(out)
    assert list(df["radius"]) == [0.01, 0.05] and list(df["samples"]) == [100, 100]


def test_sweep_cli_errors(capsys):
    assert main(["sweep", "no-such-graph"]) == 1
    assert "no-such-graph" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["sweep", "--radii", "a,b"])
    assert e.value.code == 2
    assert "--radii" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["sweep", "--workers", "2", "--scheduler", "tcp://x:1"])
    assert e.value.code == 2
