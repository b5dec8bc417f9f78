"""Every command that takes a GRAPH takes a built-in name, a graph JSON file, an ONNX model
or an FPCore file; graph-semantics boxes several-input graphs as sweep does."""
from __future__ import annotations

import json

import numpy as np

from scalarlab.experiments.cli import main


def _json(argv, capsys):
    rc = main(argv)
    out = capsys.readouterr().out
    assert rc == 0, out
    return json.loads(out)


def test_an_onnx_model_is_a_graph_like_its_json_import(tmp_path, capsys):
    onnx_path, json_path = tmp_path / "six.onnx", tmp_path / "six.json"
    assert main(["export", "six-node", "-o", str(onnx_path)]) == 0
    assert main(["import", str(onnx_path), "-o", str(json_path)]) == 0
    capsys.readouterr()
    x = "0.3,-0.2,0.1,0.4"
    a = _json(["compare", str(onnx_path), "--input", x, "--contexts", "binary32", "--json",
               "--quiet"], capsys)
    b = _json(["compare", str(json_path), "--input", x, "--contexts", "binary32", "--json",
               "--quiet"], capsys)
    strip = [{k: v for k, v in r.items() if k != "graph"} for r in a["rows"]]
    assert strip == [{k: v for k, v in r.items() if k != "graph"} for r in b["rows"]]
    assert len(strip) == 6 and a["rows"][0]["graph"] == "six.onnx"
    # the same boxes and the same sampled executions from the model and from its import
    # (the exported weights are binary32, whose same-format runs can leave the real-valued
    # boxes by an ulp at a vertex: compare the two reports, not a verdict)
    s1, s2 = (_semantics(path, x) for path in (onnx_path, json_path))
    assert s1["rows"] == s2["rows"] and s1["summary"]["violations"] == \
        s2["summary"]["violations"]
    assert s1["summary"]["samples"] == 20 and s1["summary"]["vertices"] == 16


def _semantics(path, x):
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        main(["graph-semantics", str(path), "--input", x, "--samples", "20", "--json"])
    return json.loads(buf.getvalue())


def test_graph_semantics_boxes_a_two_argument_fpcore(tmp_path, capsys):
    f = tmp_path / "two.fpcore"
    f.write_text("(FPCore (x y) (+ (* x x) (/ y x)))")
    doc = _json(["graph-semantics", str(f), "--box", "1:2,-1:1", "--samples", "200",
                 "--context", "float64", "--json"], capsys)
    assert doc["meta"]["box"] == "1:2,-1:1" and doc["meta"]["radius"] is None
    s = doc["summary"]
    assert s["ok"] and s["violations"] == 0 and s["vertices"] == 4
    out = doc["rows"][-1]
    # x^2 + y/x over [1, 2] x [-1, 1] is [0, 4.5]; the box encloses it
    assert out["lo"] <= 0 and out["hi"] >= 4.5 and np.isfinite(out["hi"])
