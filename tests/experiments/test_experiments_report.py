"""``report``: the standard experiments write report.md, one CSV per table, one PNG per plot."""
import json

import pandas as pd

from scalarlab.experiments import report as R
from scalarlab.experiments.cli import main


def test_report_writes_markdown_tables_and_plots(tmp_path, capsys):
    out = tmp_path / "rep"
    assert main(["report", "--out", str(out), "--samples", "12", "--gap-samples", "12",
                 "--graphs", "six-node,concat-axis", "--tightness", "six-node", "--quiet",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    files = doc["files"]
    assert files[0] == "report.md"
    text = (out / "report.md").read_text()
    for head in ("# scalarlab report", "## 1. Discrepancy tables at the built-in inputs",
                 "### six-node", "### concat-axis",
                 "## 2. six-node over 12 sampled inputs", "## 3. Output rounding gaps",
                 "## 4. Reduction orders on six-node",
                 "## 5. Bound tightness: IBP, per-op interval rules, CROWN"):
        assert head in text
    pngs = [f for f in files if f.endswith(".png")]
    csvs = [f for f in files if f.endswith(".csv")]
    assert "### softmax-axis" not in text
    # 2 graphs + sampled compare + 4 gap histograms + reduction-order plot
    assert len(pngs) == 8 and len(csvs) == 6
    tight = pd.read_csv(out / "tightness.csv")
    assert list(tight["method"]) == ["ibp-generic", "ibp", "crown-ibp", "crown"] * 2
    assert (tight["outside"] == 0).all()
    assert (tight[tight["method"] == "crown"]["width_vs_generic"] < 0.6).all()
    for f in pngs:
        assert f"![{f[:-4]}]({f})" in text
        data = (out / f).read_bytes()[:24]
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        assert (int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")) == (800, 450)
    six = pd.read_csv(out / "compare_six-node.csv")
    assert set(six["context"]) == {"float64", "binary32", "bfloat16", "binary16", "e4m3"}
    assert len(six) == 5 * 6
    gaps = pd.read_csv(out / "gaps_six-node.csv")
    assert set(gaps["sampling"]) == {"box", "bitpattern"} and set(gaps["context"]) == {
        "binary32", "bfloat16"}
    assert R.REPORT_NAME == "report.md"


def test_report_unknown_graph(tmp_path, capsys):
    assert main(["report", "--out", str(tmp_path), "--graphs", "six-node,nine-node"]) == 1
    assert "nine-node: neither a built-in graph nor a file" in capsys.readouterr().err


def test_report_directory_error(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    import pytest
    with pytest.raises(SystemExit) as exc:          # refused while parsing: nothing computed
        main(["report", "--out", str(blocker / "sub"), "--quiet"])
    assert exc.value.code == 2
    assert "does not exist" in capsys.readouterr().err
