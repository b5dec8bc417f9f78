"""``sweep --spec C`` / ``sweep(..., spec=C)``: rows about the linear functions C z_out.

* the row's box is CROWN's ``spec=`` bound (C applied to the output box for IBP): the
  row -2 z of six-node's scalar output is exactly -2 times the row z (scaling by 2 is
  exact in the backward pass), and both hold every sample's C y;
* a box that misses the samples is reported (violations, first counterexample naming
  the spec row): the check can fail;
* the CLI reads the .npy and refuses a matrix of the wrong shape in one line, exit 1.
"""
from __future__ import annotations

import numpy as np
import pytest

from scalarlab.experiments.cli import main
from scalarlab.graph import examples
from scalarlab.ibp import Box, sweep
import importlib

sweep_mod = importlib.import_module("scalarlab.ibp.sweep")


def test_sweep_spec_rows_are_crowns_spec_bounds():
    from scalarlab.ibp.crown import run_crown
    g, p, x0 = examples.six_node_mlp()
    C = np.array([[1.0], [-2.0]])
    df = sweep(g, p, x0, ["0.05"], ["float64"], [20], methods=["ibp", "crown"], spec=C)
    assert (df["violations"] == 0).all() and (df["claimed_violations"] == 0).all()
    crown = df[df["method"] == "crown"].iloc[0]
    box = run_crown(g, p, Box.from_center_radius(x0, "0.05"), "interval:float64",
                    method="crown", spec=C)
    lo, hi = box.lo_float(), box.hi_float()
    assert lo[1] == -2 * hi[0] and hi[1] == -2 * lo[0]
    assert crown["box_lo"] == min(lo) and crown["box_hi"] == max(hi)
    assert crown["box_width"] == pytest.approx(max(hi - lo), rel=1e-15)
    # the sampled C y span both rows: z in [a, b] and -2 z in [-2 b, -2 a]
    assert lo.min() <= crown["sampled_lo"] < crown["sampled_hi"] <= hi.max()
    assert crown["sampled_lo"] < -0.05 and crown["sampled_hi"] > 0.02
    ibp = df[df["method"] == "ibp"].iloc[0]
    assert crown["box_width"] < ibp["box_width"]
    assert crown["width_vs_ibp"] == pytest.approx(crown["box_width"] / ibp["box_width"])


def test_sweep_spec_reports_a_box_that_misses_the_samples(monkeypatch):
    g, p, x0 = examples.six_node_mlp()
    real = sweep_mod.run_crown

    def narrow(*args, **kw):
        b = real(*args, **kw)
        if kw.get("spec") is None:
            return b
        mid = (b.lo_float() + b.hi_float()) / 2
        return Box(mid, mid, guarantee=b.guarantee)        # a point box: wrong

    monkeypatch.setattr(sweep_mod, "run_crown", narrow)
    df = sweep(g, p, x0, ["0.05"], ["float64"], [20], methods=["crown"],
               spec=np.array([[1.0]]))
    row = df.iloc[0]
    assert row["violations"] > 0 and row["claimed_violations"] == row["violations"]
    assert row["first_counterexample"].startswith("spec row 0: C y = ")


def test_cli_sweep_spec_file_and_shape_error(tmp_path, capsys):
    good, bad = tmp_path / "c.npy", tmp_path / "bad.npy"
    np.save(good, np.array([[1.0], [-1.0]]))
    np.save(bad, np.ones((2, 3)))
    assert main(["sweep", "six-node", "--radii", "0.05", "--samples", "10", "--contexts",
                 "float64", "--method", "crown", "--spec", str(good), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "crown" in out
    assert main(["sweep", "six-node", "--radii", "0.05", "--samples", "10", "--contexts",
                 "float64", "--method", "crown", "--spec", str(bad), "--quiet"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert err.startswith("scalarlab sweep: error: --spec ")
    assert "spec shape [2, 3] does not fit the scalar output node: expected (m, 1) or (m,)" \
        in err
