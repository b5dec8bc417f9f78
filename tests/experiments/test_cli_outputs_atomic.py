"""Atomic outputs: a full disk or an interrupt while writing leaves the previous output
intact (and no temporary files); output paths are refused before any computation."""
from __future__ import annotations

import errno
import io
import json
import os

import pytest

from scalarlab.experiments import outputs
from scalarlab.experiments.cli import main


class _FailingFile(io.StringIO):
    """A file whose write stores half the text and then fails like a full disk (or is
    interrupted): the partial data must never reach the target name."""

    def __init__(self, path, exc, binary=False):
        super().__init__()
        self.path, self.exc, self.binary = path, exc, binary

    def write(self, data):
        with open(self.path, "ab" if self.binary else "a") as fh:
            fh.write(data[: max(1, len(data) // 2)])
        raise self.exc

    def fileno(self):                                          # pragma: no cover
        raise OSError(errno.EBADF, "no descriptor")


def _failing_open(exc):
    real = open

    def fake(path, mode="r", *a, **kw):
        if "w" in mode and "/." in str(path):      # our staged files (hidden staging dirs)
            return _FailingFile(path, exc, binary="b" in mode)
        return real(path, mode, *a, **kw)
    return fake


def _leftovers(d):
    return sorted(p.name for p in d.iterdir() if p.name.startswith("."))


ENOSPC = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("exc, rc, word", [(ENOSPC, 1, "No space left on device"),
                                           (KeyboardInterrupt(), 130, "interrupted")])
@pytest.mark.parametrize("name", ["t.json", "t.csv", "t.md"])
def test_compare_out_full_disk_or_interrupt_keeps_previous_file(tmp_path, monkeypatch, capsys,
                                                                 exc, rc, word, name):
    target = tmp_path / name
    target.write_text("previous run\n")
    monkeypatch.setattr(outputs, "open", _failing_open(exc), raising=False)
    assert main(["compare", "--contexts", "binary32", "--quiet", "--out", str(target)]) == rc
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("scalarlab compare: ") and word in err[0]
    assert target.read_text() == "previous run\n"
    assert _leftovers(tmp_path) == []


def test_successful_write_replaces_and_keeps_mode(tmp_path):
    target = tmp_path / "a.txt"
    target.write_text("old")
    outputs.write_text(target, "new\n")
    assert target.read_text() == "new\n" and _leftovers(tmp_path) == []
    mask = os.umask(0)
    os.umask(mask)
    assert (target.stat().st_mode & 0o777) == 0o666 & ~mask


def test_plot_interrupted_leaves_previous_png(tmp_path, monkeypatch, capsys):
    import matplotlib.figure
    png = tmp_path / "bits.png"
    png.write_bytes(b"old png")

    def broken_savefig(self, path, **kw):
        with open(path, "wb") as fh:
            fh.write(b"\x89PNG partial")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", broken_savefig)
    assert main(["compare", "--contexts", "binary32", "--quiet", "--plot", str(png)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"scalarlab compare: error: --plot {png}: cannot write: No space left on "
                   "device; nothing was replaced: bits.png is unchanged"]
    assert png.read_bytes() == b"old png" and _leftovers(tmp_path) == []


def test_sweep_full_disk_leaves_no_empty_csv(tmp_path, monkeypatch, capsys):
    out = tmp_path / "s.csv"
    monkeypatch.setattr(outputs, "open", _failing_open(ENOSPC), raising=False)
    assert main(["sweep", "--radii", "0.1", "--samples", "5", "--contexts", "binary32",
                 "--quiet", "--out", str(out)]) == 1
    assert "No space left on device" in capsys.readouterr().err
    assert not out.exists() and _leftovers(tmp_path) == []


def test_report_directory_swapped_whole_or_not_at_all(tmp_path, monkeypatch, capsys):
    from scalarlab.experiments import gaps
    from scalarlab.experiments import output_sets
    from scalarlab.experiments import report as R
    d = tmp_path / "rep"
    args = ["report", "--out", str(d), "--samples", "4", "--gap-samples", "4",
            "--graphs", "concat-axis", "--quiet"]

    # the report itself is run by test_experiments_report; here its contents are stubbed
    def tiny(text):
        def build(rep, **kw):
            (rep.directory / R.REPORT_NAME).write_text(text)
            (rep.directory / "t.csv").write_text("a\n1\n")
            rep.files += [R.REPORT_NAME, "t.csv"]
            return rep
        return build
    monkeypatch.setattr(R, "_build", tiny("old report"))
    assert main(args) == 0
    before = sorted(p.name for p in d.iterdir())
    assert before == sorted([output_sets.MARKER, "report.md", "t.csv"])
    assert output_sets.read_marker(d) == ["report.md", "t.csv"]
    monkeypatch.undo()
    capsys.readouterr()

    real = gaps.gaps
    calls = []

    def interrupted(*a, **kw):          # Ctrl-C in the middle: some files already written
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **kw)
    monkeypatch.setattr(gaps, "gaps", interrupted)
    assert main(args) == 130
    assert capsys.readouterr().err.strip() == ("scalarlab report: interrupted (outputs not "
                                               "replaced)")
    assert sorted(p.name for p in d.iterdir()) == before
    assert (d / "report.md").read_text() == "old report"
    assert _leftovers(tmp_path) == []

    # a run that completes replaces the whole directory
    def one(rep, **kw):
        (rep.directory / R.REPORT_NAME).write_text("new report")
        rep.files.append(R.REPORT_NAME)
        return rep
    monkeypatch.setattr(R, "_build", one)
    assert main(args) == 0
    assert sorted(p.name for p in d.iterdir()) == sorted([output_sets.MARKER,
                                                          "report.md"])  # one run's files
    assert (d / "report.md").read_text() == "new report"
    assert _leftovers(tmp_path) == []
    monkeypatch.setattr(R, "_build", lambda rep, **kw: 1 / 0)        # a bug mid-report
    assert main(args) == 3
    assert (d / "report.md").read_text() == "new report" and _leftovers(tmp_path) == []


def test_output_paths_refused_before_computation(tmp_path, monkeypatch, capsys):
    from scalarlab.experiments import compare as C

    def never(*a, **kw):                                       # pragma: no cover
        raise AssertionError("computed before checking the output path")
    monkeypatch.setattr(C, "compare", never)
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    cases = [(["--out", "/nonexistent/t.csv"], "directory /nonexistent does not exist"),
             (["--out", str(tmp_path / "t.txt")], "unknown file type '.txt'"),
             (["--out", str(tmp_path)], "is a directory"),
             (["--plot", str(tmp_path / "p.jpg")], "unknown file type '.jpg'")]
    if os.geteuid() != 0:                      # root writes into read-only directories
        cases.append((["--out", str(ro / "t.json")], "is not writable"))
    for flag, msg in cases:
        with pytest.raises(SystemExit) as e:
            main(["compare", "--quiet", *flag])
        assert e.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("scalarlab compare: error: argument")
        assert msg in err[0]


def test_json_outputs_share_the_schema(tmp_path, capsys):
    """Every JSON output: format, version, meta (versions, graph SHA-256, seed), rows."""
    import hashlib
    from scalarlab import graph
    from scalarlab.graph import examples
    g, p, _ = examples.six_node_mlp()
    f = tmp_path / "g.json"
    graph.save(f, g, p)
    digest = hashlib.sha256(f.read_bytes()).hexdigest()
    runs = {
        "compare": ["compare", str(f), "--input", "-0.3,0.2,0.1,0.4", "--contexts",
                    "binary32", "--quiet", "--json"],
        "gaps": ["gaps", str(f), "--input", "0.3,-0.2,0.1,0.4", "--samples", "20",
                 "--quiet", "--json", "--seed", "3"],
        "sweep": ["sweep", str(f), "--input", "-0.3,0.2,0.1,0.4", "--radii", "0.01",
                  "--samples", "10", "--contexts", "binary32", "--quiet", "--json"],
        "eval": ["eval", str(f), "--input", "-0.3,0.2,0.1,0.4", "--json"],
        "graph-semantics": ["graph-semantics", str(f), "--input", "-0.3,0.2,0.1,0.4",
                            "--samples", "5", "--json"],
    }
    for kind, argv in runs.items():
        assert main(argv) == 0, kind
        doc = json.loads(capsys.readouterr().out)
        assert doc["format"] == f"scalarlab-{kind}" and doc["version"] == 1
        meta = doc["meta"]
        assert set(meta["versions"]) >= {"scalarlab", "numpy", "gmpy2", "mpmath"}
        assert meta["graph"]["sha256"] == digest and meta["graph"]["path"] == str(f)
        assert meta["command"].startswith(f"scalarlab {kind} ")
        assert isinstance(doc["rows"], list) and doc["rows"]
    # centre recorded exactly, negative first coordinate included
    assert main(runs["sweep"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["meta"]["center"] == ["-0.3", "0.2", "0.1", "0.4"]
    row = doc["rows"][0]
    # full precision: the JSON floats are the float64 values themselves (shortest repr)
    assert row["sampled_width"] == pytest.approx(row["sampled_hi"] - row["sampled_lo"],
                                                 rel=1e-15)


def test_csv_sidecar_and_markdown_meta(tmp_path, capsys):
    csv, md = tmp_path / "t.csv", tmp_path / "t.md"
    assert main(["sweep", "--radii", "0.01", "--samples", "10", "--contexts", "binary32",
                 "--quiet", "--out", str(csv)]) == 0
    assert capsys.readouterr().out.strip().endswith(f"wrote {csv}")
    import pandas as pd
    df = pd.read_csv(csv)
    side = json.loads((tmp_path / "t.csv.meta.json").read_text())
    assert side["format"] == "scalarlab-sweep" and side["table"] == "t.csv"
    assert side["meta"]["radii"] == ["0.01"] and "rows" not in side
    assert list(df["radius"]) == [0.01]
    assert main(["sweep", "--radii", "0.01", "--samples", "10", "--contexts", "binary32",
                 "--quiet", "--out", str(md)]) == 0
    text = md.read_text()
    assert text.startswith("# scalarlab sweep: six-node\n") and "- **seed**: 0" in text
    assert "- **versions**: scalarlab=" in text


def test_graph_files_and_payloads_are_replaced_atomically(tmp_path, monkeypatch):
    """graph.save / save_npz (also used by `scalarlab import`): an interrupted save keeps
    the previous file."""
    import numpy as np
    from scalarlab import graph
    from scalarlab.graph import examples, fileformat
    g, p, _ = examples.six_node_mlp()
    path = tmp_path / "g.json"
    graph.save(path, g, p, npz=True)
    before = {f.name: f.read_bytes() for f in tmp_path.iterdir()}
    assert set(before) == {"g.json", "g.npz"}

    def broken_dump(doc, fh, **kw):
        fh.write('{"format": "scalarlab-graph", "nodes": [')      # half a file
        raise KeyboardInterrupt
    monkeypatch.setattr(fileformat.json, "dump", broken_dump)
    with pytest.raises(KeyboardInterrupt):
        graph.save(path, g, p)
    monkeypatch.undo()

    def broken_savez(f, **arrays):
        with open(f, "wb") as fh:
            fh.write(b"PK partial")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(np, "savez", broken_savez)
    with pytest.raises(graph.GraphError, match="No space left on device"):
        fileformat.save_npz(tmp_path / "g.npz", g, p)
    assert {f.name: f.read_bytes() for f in tmp_path.iterdir()} == before
    g2, p2 = graph.load(path)
    assert len(g2.nodes) == len(g.nodes)


def test_report_takes_graph_files_and_a_centre(tmp_path, monkeypatch, capsys):
    """report --graph FILE --input X: the sampled sections run on the file's graph at X
    (the sections themselves are stubbed; test_experiments_report runs a real report)."""
    from scalarlab import graph
    from scalarlab.experiments import report as R
    from scalarlab.graph import examples
    g, p, _ = examples.six_node_mlp()
    f = tmp_path / "g.json"
    graph.save(f, g, p)
    seen = {}

    def record(rep, **kw):
        seen.update(kw)
        (rep.directory / R.REPORT_NAME).write_text("stub")
        rep.files.append(R.REPORT_NAME)
        return rep
    monkeypatch.setattr(R, "_build", record)
    assert main(["report", "--out", str(tmp_path / "rep"), "--graph", str(f), "--graphs",
                 f"{f},concat-axis", "--input", "-0.3,0.2,0.1,0.4", "--quiet"]) == 0
    assert seen["spec"] == str(f) and seen["graphs"] == [str(f), "concat-axis"]
    assert seen["six"].name == "g.json" and len(seen["six"].nodes) == 6
    assert seen["center"].reshape(-1).tolist() == ["-0.3", "0.2", "0.1", "0.4"]
    assert main(["report", "--out", str(tmp_path / "rep"), "--graph", str(f),
                 "--quiet"]) == 1                   # a file has no x0: --input is needed
    assert "has no built-in input; give --input" in capsys.readouterr().err
