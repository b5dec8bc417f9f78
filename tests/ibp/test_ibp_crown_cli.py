"""--method in graph-semantics and sweep: CROWN boxes, containment and width columns."""
from __future__ import annotations

import json

import numpy as np
import pytest

from scalarlab.experiments.cli import main
from scalarlab.graph import examples
from scalarlab.ibp import sweep


def test_graph_semantics_method_crown_json(capsys):
    assert main(["graph-semantics", "--samples", "30", "--radius", "0.5", "--method",
                 "crown", "--json", "--context", "float64"]) == 0
    doc = json.loads(capsys.readouterr().out)
    summary = doc["summary"]
    assert summary["method"] == "crown" and summary["ok"] and summary["violations"] == 0
    w = summary["output_width"]
    assert w["crown"] < 0.55 * w["ibp"] and w["crown-ibp"] < 0.55 * w["ibp"]
    out = doc["rows"][5]
    assert out["hi"] - out["lo"] <= w["crown"] * (1 + 1e-12)


def test_graph_semantics_bad_method_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["graph-semantics", "--method", "deeppoly"])
    assert exc.value.code == 2
    assert "'deeppoly'" in capsys.readouterr().err


def test_sweep_methods_compare_widths(capsys):
    g, p, x0 = examples.six_node_mlp()
    df = sweep(g, p, x0, ["0.05", "0.5"], ["float64"], [100],
               methods=["ibp", "crown", "crown-ibp"])
    assert list(df["method"]) == ["ibp", "crown", "crown-ibp"] * 2
    assert (df["violations"] == 0).all()
    crown = df[df["method"] == "crown"]
    assert (crown["width_vs_ibp"] < 0.6).all()
    # same samples for every method of a row group
    assert df.groupby("radius")["sampled_width"].nunique().eq(1).all()
    assert np.all(df["box_width"] >= df["sampled_width"])
    assert main(["sweep", "--method", "ibp,crown", "--radii", "0.1", "--samples", "20",
                 "--contexts", "float64", "--quiet"]) == 0
    assert "width_vs_ibp" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["sweep", "--method", "crown,dp", "--quiet"])
    assert exc.value.code == 2
    assert "'dp' is not a bounding method" in capsys.readouterr().err
