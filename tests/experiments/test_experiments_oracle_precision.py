"""The default mpmath oracle is raised for inputs with large binary exponents, so tiny
inputs do not vanish against O(1) terms (checked against an independent MPFR evaluation)."""
from __future__ import annotations

import json

import gmpy2
import numpy as np

from scalarlab.experiments import reference as RF
from scalarlab.experiments.cli import main


def test_tiny_input_raises_the_oracle_and_the_gap_is_seen(tmp_path, capsys):
    f = tmp_path / "em1.fpcore"
    f.write_text("(FPCore (x) (- (exp x) 1))")
    assert main(["compare", str(f), "--input", "1e-100", "--contexts", "binary64",
                 "--json", "--quiet"]) == 0
    doc = json.loads(capsys.readouterr().out)
    out = [r for r in doc["rows"] if r["node"] == max(r["node"] for r in doc["rows"])][0]
    # binary64: exp(1e-100) rounds to 1, so the result is 0 while exp(x) - 1 ~ 1e-100:
    # the distance to RN(1e-100) is its bit pattern's distance from 0 (~ 2^62 ULPs)
    with gmpy2.context(precision=53):
        want = gmpy2.mpfr(1e-100)
    assert out["max_ulps"] == float(np.float64(float(want)).view(np.int64))
    assert doc["meta"]["reference_context"] == "mpmath:728"          # 64 + 2 * 332 bits
    assert "raised from mpmath:200" in doc["meta"]["reference"]


def test_ordinary_inputs_keep_the_asked_precision():
    oracle = RF.scalars.get("mpmath:200")
    got, note = RF._oracle_for_inputs(oracle, np.array([[0.3, -2.0, 1e9]]))
    assert got is oracle and note == ""
    got, note = RF._oracle_for_inputs(oracle, {0: np.array([[1e-100]])})
    assert got.name == f"mpmath:{RF.ORACLE_EXPONENT_GUARD + 2 * 332}" and "raised" in note
