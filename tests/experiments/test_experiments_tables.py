"""Output writers: CSV/Markdown/JSON round trips through pandas, PNG size, progress bars."""
import json
import struct

import numpy as np
import pandas as pd
import pytest

from scalarlab.experiments import tables


def _frame():
    return pd.DataFrame({
        "context": ["binary32", "bfloat16", "e4m3"],
        "node": [0, 1, 2],
        "max_ulps": [0.0, 3.0, np.inf],
        "mean_bits": [0.0, 1.25, np.nan],
        "divergence_start": [False, True, False],
    })


def png_size(path):
    """(width, height) from the PNG signature and IHDR chunk."""
    data = open(path, "rb").read(33)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_csv_round_trip(tmp_path):
    df = _frame()
    p = tables.write_table(tmp_path / "t.csv", "demo", {"graph": "g"}, df)
    back = pd.read_csv(p)
    assert list(back.columns) == list(df.columns)
    assert list(back["context"]) == list(df["context"])
    assert back["max_ulps"].iloc[2] == np.inf
    assert np.isnan(back["mean_bits"].iloc[2])
    assert list(back["divergence_start"]) == [False, True, False]
    assert np.array_equal(back["max_ulps"].to_numpy()[:2], [0.0, 3.0])


def test_json_round_trip(tmp_path):
    df = _frame()
    p = tables.write_table(tmp_path / "t.json", "demo", {"graph": "g", "samples": 3}, df,
                           verdicts=[{"context": "e4m3", "x": np.float64(2.5)}])
    doc = json.loads(p.read_text())
    assert doc["format"] == "scalarlab-demo" and doc["version"] == 1
    assert {k: doc["meta"][k] for k in ("graph", "samples")} == {"graph": "g", "samples": 3}
    assert set(doc["meta"]["versions"]) >= {"scalarlab", "numpy", "gmpy2", "mpmath"}
    assert doc["verdicts"] == [{"context": "e4m3", "x": 2.5}]
    back = pd.DataFrame(doc["rows"])
    assert list(back.columns) == list(df.columns)
    assert back["max_ulps"].iloc[2] == "inf"              # documented: +-inf as strings
    assert np.array_equal(pd.to_numeric(back["max_ulps"]).to_numpy(), df["max_ulps"].to_numpy())
    assert doc["rows"][2]["mean_bits"] is None             # NaN -> null
    assert np.isnan(back["mean_bits"].iloc[2])
    assert list(back["node"]) == [0, 1, 2]


def test_markdown_table(tmp_path):
    df = _frame()
    p = tables.write_table(tmp_path / "t.md", "demo", {"graph": "g"}, df, title="T",
                           extra_md="tail text")
    text = p.read_text()
    lines = [ln for ln in text.splitlines() if ln.startswith("|")]
    assert lines[0] == "| context | node | max_ulps | mean_bits | divergence_start |"
    assert lines[1] == "|:---|---:|---:|---:|:---|"
    assert lines[2] == "| binary32 | 0 | 0 | 0 | yes |".replace("yes", "no")
    assert lines[3] == "| bfloat16 | 1 | 3 | 1.25 | yes |"
    assert lines[4] == "| e4m3 | 2 | inf | - | no |"
    assert text.startswith("# T\n") and "- **graph**: g" in text and "tail text" in text


def test_unknown_suffix_and_missing_directory(tmp_path):
    with pytest.raises(tables.OutputError, match="unknown file type '.xlsx'"):
        tables.write_table(tmp_path / "t.xlsx", "demo", {}, _frame())
    with pytest.raises(tables.OutputError, match="does not exist"):
        tables.write_table(tmp_path / "nope" / "t.csv", "demo", {}, _frame())


def test_png_has_stated_size(tmp_path):
    import matplotlib.image as mpimg
    fig, ax = tables.new_figure()
    ax.plot([0, 1, 2], [1, 0, 2])
    p = tables.save_figure(fig, tmp_path / "p.png")
    w, h = tables.plot_pixels()
    assert (w, h) == (800, 450)
    assert png_size(p) == (w, h)
    img = mpimg.imread(p)
    assert img.shape[:2] == (h, w)
    with pytest.raises(tables.OutputError, match="PNG"):
        fig, ax = tables.new_figure()
        tables.save_figure(fig, tmp_path / "p.jpg")


def test_json_value_policy():
    assert tables.json_value(float("nan")) is None
    assert tables.json_value(-np.inf) == "-inf"
    assert tables.json_value(np.int64(3)) == 3 and type(tables.json_value(np.int64(3))) is int
    assert tables.json_value({"a": [np.float32(0.5), None]}) == {"a": [0.5, None]}
    # strict JSON: no NaN/Infinity tokens
    tables.dumps({"x": tables.json_value(float("inf"))})


def test_progress_silent_when_quiet_or_not_tty(capsys):
    out = list(tables.progress(range(5), desc="x", quiet=True))
    assert out == [0, 1, 2, 3, 4]
    bar = tables.progress(range(3), desc="x", quiet=False)   # pytest's stderr is no TTY
    assert bar.disable
    list(bar)
    assert capsys.readouterr().err == ""


def test_fmt_number():
    assert tables.fmt_number(3.0) == "3"
    assert tables.fmt_number(0.000123456) == "1.23e-04"
    assert tables.fmt_number(0.0327) == "0.0327"
    assert tables.fmt_number(float("inf")) == "inf"
    assert tables.fmt_number(float("nan")) == "-"
    assert tables.fmt_number(True) == "yes"


def test_progress_shown_on_a_tty(monkeypatch):
    monkeypatch.setattr(tables, "_stderr_is_tty", lambda: True)
    assert not tables.progress(range(3), desc="x").disable
    assert tables.progress(range(3), desc="x", quiet=True).disable
