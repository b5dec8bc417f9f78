"""Weights in a side .npz: chosen by size (graph.save and `scalarlab import`), loaded
from any working directory, and refused with both names when missing or swapped."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from scalarlab import graph
from scalarlab.experiments.cli import main
from scalarlab.graph import Graph, Node, Payload, fileformat


def _dense(n_out, n_in, seed=0):
    rng = np.random.default_rng(seed)
    g = Graph([Node(0, [], "input", [n_in]), Node(1, [0], "linear", [n_out])])
    return g, Payload({1: {"W": rng.standard_normal((n_out, n_in)), "b": rng.standard_normal(n_out)}})


def test_threshold_counts_numbers():
    # 2^19 numbers is the default threshold: W (1023 x 512) + b (1023) is 524,799 numbers
    g, p = _dense(1023, 512)
    assert fileformat.payload_numbers(p) == 1023 * 513 > fileformat.SIDE_FILE_NUMBERS
    assert fileformat.wants_side_file(p)
    assert not fileformat.wants_side_file(_dense(3, 4)[1]) and not fileformat.wants_side_file(None)


def test_save_picks_a_side_file_by_size_and_loads_from_any_cwd(tmp_path, monkeypatch):
    monkeypatch.setattr(fileformat, "SIDE_FILE_NUMBERS", 100)
    g, p = _dense(20, 8)                                   # 180 numbers: side file
    d = tmp_path / "models"
    d.mkdir()
    side = graph.save(d / "m.json", g, p)
    assert side == str(d / "m.npz") and os.path.exists(side)
    ref = json.loads((d / "m.json").read_text())["payload"]
    assert ref["file"] == "m.npz" and ref["bytes"] == os.path.getsize(side)
    assert ref == fileformat.side_file_ref("m.npz", side)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    for path in (d / "m.json", os.path.relpath(d / "m.json")):
        g2, p2 = graph.load(path)
        assert g2 == g and np.array_equal(p2.get(1)["W"], p.get(1)["W"])
    small = _dense(3, 4)
    assert graph.save(tmp_path / "s.json", *small) is None      # inline: no side file
    assert not (tmp_path / "s.npz").exists()
    assert isinstance(json.loads((tmp_path / "s.json").read_text())["payload"], dict)
    assert graph.save(tmp_path / "f.json", g, p, npz=False) is None   # forced inline
    assert json.loads((tmp_path / "f.json").read_text())["payload"]["1"]


def test_missing_or_swapped_side_file_names_both_files(tmp_path):
    g, p = _dense(4, 3)
    graph.save(tmp_path / "a.json", g, p, npz=True)
    graph.save(tmp_path / "b.json", *_dense(4, 3, seed=1), npz=True)
    os.replace(tmp_path / "b.npz", tmp_path / "a.npz")          # another import's weights
    with pytest.raises(graph.GraphError) as e:
        graph.load(tmp_path / "a.json")
    msg = str(e.value)
    assert "\n" not in msg and f"graph file {tmp_path / 'a.json'}" in msg
    assert f"side file {tmp_path / 'a.npz'} does not match it" in msg and "sha256" in msg
    os.unlink(tmp_path / "a.npz")
    with pytest.raises(graph.GraphError, match=r"a\.json: cannot read its weights' side file "
                                               r".*a\.npz: no such file"):
        graph.load(tmp_path / "a.json")
    # an older file naming its .npz by a bare string still loads (unchecked)
    graph.save(tmp_path / "c.json", g, p, npz=True)
    doc = json.loads((tmp_path / "c.json").read_text())
    doc["payload"] = "c.npz"
    (tmp_path / "c.json").write_text(json.dumps(doc))
    assert np.array_equal(graph.load(tmp_path / "c.json")[1].get(1)["b"], p.get(1)["b"])
    doc["payload"] = {"file": "c.npz", "bytes": 1}
    (tmp_path / "c.json").write_text(json.dumps(doc))
    with pytest.raises(graph.GraphError, match="a side file needs 'file'"):
        graph.load(tmp_path / "c.json")


def test_cli_import_writes_the_side_file_by_size_and_says_so(tmp_path, capsys, monkeypatch):
    onnx_path = tmp_path / "six.onnx"
    assert main(["export", "six-node", "-o", str(onnx_path)]) == 0
    monkeypatch.setattr(fileformat, "SIDE_FILE_NUMBERS", 10)     # six-node holds 43 numbers
    capsys.readouterr()
    assert main(["import", str(onnx_path), "-o", str(tmp_path / "big.json")]) == 0
    line = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("weights:")]
    size = (tmp_path / "big.npz").stat().st_size
    assert line == [f"weights: {tmp_path / 'big.npz'} ({size / 2 ** 20:.1f} MiB, 43 numbers) "
                    f"beside big.json, which loads it (more than 10 numbers; --inline writes "
                    f"them into the JSON)"]
    assert main(["import", str(onnx_path), "-o", str(tmp_path / "in.json"), "--inline"]) == 0
    assert not (tmp_path / "in.npz").exists()
    assert "weights:" not in capsys.readouterr().out
    g1, p1 = graph.load(tmp_path / "in.json")
    g2, p2 = graph.load(tmp_path / "big.json")
    assert g1 == g2 and all(np.array_equal(p1.get(k)[n], p2.get(k)[n])
                            for k, prm in p1.items() for n in prm)
    assert isinstance(json.loads((tmp_path / "in.json").read_text())["payload"], dict)
    with pytest.raises(SystemExit) as e:
        main(["import", str(onnx_path), "-o", str(tmp_path / "x.json"), "--inline", "--npz"])
    assert e.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
