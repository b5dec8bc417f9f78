"""The JSON graph file (version 1), .npz payloads, malformed-file errors, and the CLI
commands show / check / eval / ir-axis-ops."""
from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

from scalarlab import graph
from scalarlab import scalars
from scalarlab.experiments.cli import main
from scalarlab.graph import Graph, Node, Payload, examples
from scalarlab.scalars.base import to_fraction


def _values(ctxname, g, p, x):
    return [np.asarray(v) for v in graph.denote_all(g, p, x, ctxname)]


def test_round_trip_inline_keeps_exact_decimals(tmp_path):
    g, p, x = examples.six_node_mlp()
    path = tmp_path / "six.json"
    graph.save(path, g, p)
    doc = json.loads(path.read_text())
    assert doc["format"] == "scalarlab-graph" and doc["version"] == 1 and doc["output"] == 5
    assert doc["nodes"][0] == {"id": 0, "parents": [], "kind": "input", "out_shape": [4]}
    assert doc["payload"]["1"]["linear"]["W"][0] == [".15", "-.12", ".08", ".05"]
    g2, p2 = graph.load(path)
    assert g2 == g
    r = scalars.get("rational")
    a = graph.denote_all(Graph(list(g.nodes)[:5]), p, x, r)
    b = graph.denote_all(Graph(list(g2.nodes)[:5]), p2, x, r)
    assert all(np.array_equal(u, v) for u, v in zip(a, b))


def test_round_trip_npz_float_and_attrs(tmp_path):
    g, p, x = examples.layernorm_axis()
    path = tmp_path / "ln.json"
    graph.save(path, g, p, npz=True)
    doc = json.loads(path.read_text())
    assert doc["payload"]["file"] == "ln.npz"
    assert doc["payload"]["bytes"] == (tmp_path / "ln.npz").stat().st_size
    assert doc["nodes"][1]["kind"] == {"op": "layernorm", "axis": 1}
    g2, p2 = graph.load(path)
    assert g2 == g and str(g2.nodes[1].kind) == "layernorm(axis=1, payload=node_id)"
    for u, v in zip(_values("binary32", g, p, x), _values("binary32", g2, p2, x)):
        assert np.array_equal(u, v)
    # float64 payloads round-trip bit for bit inline (JSON numbers are repr'd doubles)
    w = np.random.default_rng(0).standard_normal((3, 4))
    g3 = Graph([Node(0, [], "input", [4]), Node(1, [0], "linear", [3])])
    p3 = Payload({1: {"W": w, "b": np.array([0.1, -1e-300, 5e-324])}})
    graph.save(tmp_path / "f.json", g3, p3)
    _, p4 = graph.load(tmp_path / "f.json")
    assert np.array_equal(p4.get(1)["W"], w) and p4.get(1)["W"].dtype == np.float64
    assert np.array_equal(p4.get(1)["b"], p3.get(1)["b"])


def test_fractions_and_mixed_payload_entries(tmp_path):
    g = Graph([Node(0, [], "input", [2]), Node(1, [0], "linear", [1])])
    p = Payload({1: {"W": np.array([[Fraction(1, 3), "0.1"]], dtype=object), "b": [0.5]}})
    graph.save(tmp_path / "q.json", g, p)
    text = (tmp_path / "q.json").read_text()
    assert '"1/3"' in text and '"0.1"' in text
    g2, p2 = graph.load(tmp_path / "q.json")
    y = graph.denote(g2, p2, ["3", "10"], "rational")
    assert to_fraction(np.asarray(y).reshape(-1)[0]) == Fraction(1) + Fraction(1) + Fraction(1, 2)


def test_payload_entries_of_every_number_type_are_written_exactly():
    """exact_str shares scalars' to_fraction: a negative mpmath value keeps its sign, the
    non-finite values of mpmath and gmpy2 are written by name, like float's."""
    import gmpy2
    import mpmath
    from scalarlab.graph.fileformat import exact_str
    cases = [(mpmath.mpf(-1.5), "-3/2"), (mpmath.mpf("0.375"), "3/8"),
             (mpmath.mpf("inf"), "inf"), (mpmath.mpf("-inf"), "-inf"), (mpmath.mpf("nan"), "nan"),
             (gmpy2.mpfr("-2.5"), "-5/2"), (gmpy2.mpfr("inf"), "inf"), (gmpy2.mpfr("nan"), "nan"),
             (gmpy2.mpq(-3, 4), "-3/4"), (Fraction(1, 3), "1/3"), (np.int64(-7), "-7"),
             (True, "1"), (np.float32(0.1), repr(float(np.float32(0.1)))), (-0.0, "-0.0"),
             (float("-inf"), "-inf"), ("0.1", "0.1")]
    for v, text in cases:
        assert exact_str(v) == text, v
    with pytest.raises(graph.GraphError, match="cannot write payload value"):
        exact_str(object())


def test_mpmath_payload_round_trips_with_its_sign(tmp_path):
    import mpmath
    g = Graph([Node(0, [], "input", [2]), Node(1, [0], "linear", [1])])
    W = np.array([[mpmath.mpf(-1.5), mpmath.mpf("0.25")]], dtype=object)
    p = Payload({1: {"W": W, "b": np.array([mpmath.mpf(-2)], dtype=object)}})
    graph.save(tmp_path / "m.json", g, p)
    g2, p2 = graph.load(tmp_path / "m.json")
    y = graph.denote(g2, p2, ["2", "4"], "rational")
    assert to_fraction(np.asarray(y).reshape(-1)[0]) == Fraction(-3) + Fraction(1) - 2


BAD = [
    ('[]', "expected a JSON object"),
    ('{"format": "x", "version": 1, "nodes": []}', "field 'format'"),
    ('{"format": "scalarlab-graph", "version": 2, "nodes": []}', "field 'version': unsupported version 2"),
    ('{"format": "scalarlab-graph", "version": 1, "nodes": {}}', "field 'nodes'"),
    ('{"format": "scalarlab-graph", "version": 1, "nodes": [{"id": 0, "parents": [], "kind": "input"}]}',
     "node 0: missing field 'out_shape'"),
    ('{"format": "scalarlab-graph", "version": 1, "nodes": [{"id": 0, "parents": ["a"], "kind": "input", "out_shape": [4]}]}',
     "node 0: field 'parents'"),
    ('{"format": "scalarlab-graph", "version": 1, "nodes": [{"id": 0, "parents": [], "kind": {"axis": 1}, "out_shape": [4]}]}',
     "node 0: field 'kind'"),
    ('{"format": "scalarlab-graph", "version": 1, "nodes": [{"id": 0, "parents": [], "kind": "input", "out_shape": [-1]}]}',
     "node 0: field 'out_shape'"),
    ('{"format": "scalarlab-graph", "version": 1, "nodes": [{"id": "0", "parents": [], "kind": "input", "out_shape": [4]}]}',
     "node 0: field 'id'"),
    ('{"format": "scalarlab-graph", "version": 1, "nodes": [], "payload": {"x": {}}}', "payload entry 'x'"),
    ('{"format": "scalarlab-graph", "version": 1, "nodes": [], "payload": {"1": {"linear": {"W": [[1], [1, 2]]}}}}',
     "node 1: payload field 'W': ragged"),
    ('{"format": "scalarlab-graph", "version": 1, "nodes": [], "payload": {"1": {"linear": {"W": [true]}}}}',
     "node 1: payload field 'W': entries must be numbers or strings"),
    ('{"format": "scalarlab-graph", "version": 1, "nodes": [], "output": "5"}', "field 'output'"),
    ('{"format": "scalarlab-graph", "version": 1, "nodes": [], "payload": "missing.npz"}', "payload file"),
    ('{"format": ', "not valid JSON"),
]


@pytest.mark.parametrize("text,msg", BAD)
def test_malformed_files_name_path_node_and_field(tmp_path, text, msg):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(graph.GraphError) as e:
        graph.load(path)
    assert str(path) in str(e.value) and msg in str(e.value)


def test_bad_npz_and_missing_file(tmp_path):
    with pytest.raises(graph.GraphError, match="cannot read"):
        graph.load(tmp_path / "nope.json")
    np.savez(tmp_path / "p.npz", **{"one.W": np.zeros(2)})
    with pytest.raises(graph.GraphError, match="key 'one.W'"):
        graph.fileformat.load_npz(tmp_path / "p.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(graph.GraphError, match="junk.npz: cannot read"):
        graph.fileformat.load_npz(tmp_path / "junk.npz")


# --------------------------------------------------------------------------------- CLI
def test_cli_show_and_dot(capsys):
    assert main(["show", "six-node"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "1: linear(payload=node_id) parents=[0] out=[5]"
    assert main(["show", "softmax-axis", "--dot"]) == 0
    out = capsys.readouterr().out
    assert 'n1 [label="1: softmax(axis=1)\\nout=[2, 3, 4]"];' in out and "n0 -> n1;" in out


def test_cli_check_ok_and_errors(tmp_path, capsys):
    assert main(["check", "six-node"]) == 0
    assert capsys.readouterr().out.strip() == "ok"
    g, p, _ = examples.six_node_mlp()
    n = list(g.nodes)
    graph.save(tmp_path / "bad.json", Graph(n[:2] + [n[2].replace(out_shape=[4])] + n[3:]), p)
    assert main(["check", str(tmp_path / "bad.json")]) == 1
    err = capsys.readouterr().err
    assert "IR graph: node 2: outShape mismatch: inferred=[5], declared=[4]" in err
    graph.save(tmp_path / "swap.json", g, p.swapped(1, 3))
    assert main(["check", str(tmp_path / "swap.json")]) == 1
    assert "IR eval: linear 1: declared outShape mismatch: [5] vs expected [3]" in capsys.readouterr().err
    assert main(["check", "no-such-graph"]) == 1
    assert "neither a built-in" in capsys.readouterr().err


def test_cli_eval_table_and_json(tmp_path, capsys):
    assert main(["eval", "six-node", "--all"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "node 5 tanh out=[]: 0.027713"
    assert out[-2] == "node 4 sum out=[]: 0.027720"
    assert main(["eval", "six-node", "--context", "binary32", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    node = doc["rows"][0]
    assert doc["meta"]["context"] == "binary32" and node["id"] == 5
    assert float(np.float32(node["float64"])) == node["float64"]
    assert float(np.float32(float(node["exact"]))) == node["float64"]   # shortest round trip
    assert main(["eval", "six-node", "--context", "rational", "--all", "--json",
                 "--input", "0.3,-0.2,0.1,0.4"]) == 1    # tanh is irrational
    assert "tanh" in capsys.readouterr().err
    g, p, _ = examples.six_node_mlp()
    graph.save(tmp_path / "four.json", Graph(list(g.nodes)[:5]), p)
    assert main(["eval", str(tmp_path / "four.json"), "--context", "rational", "--json",
                 "--input", "0.3,-0.2,0.1,0.4"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"][0]["exact"] == "693/25000"
    np.save(tmp_path / "x.npy", np.array([[0.3, -0.2, 0.1, 0.4], [0, 0, 0, 0]]))
    assert main(["eval", "six-node", "--input-file", str(tmp_path / "x.npy")]) == 0
    lines = capsys.readouterr().out.splitlines()       # a batch: one line per sample
    assert lines[-3:] == ["node 5 tanh out=[]: batch of 2", "  [0] 0.027713", "  [1] 0.014199"]
    assert main(["eval", "six-node", "--input", "0,0,0,0"]) == 0   # sample 1 on its own
    assert capsys.readouterr().out.splitlines()[-1] == "node 5 tanh out=[]: 0.014199"
    assert main(["eval", "six-node", "--input", "1,2,3"]) == 1
    assert "do not fill the input shape [4]" in capsys.readouterr().err


def test_cli_ir_axis_ops(capsys):
    assert main(["ir-axis-ops"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("== IR axis ops tutorial ==\n")
    assert "[softmax_middle_axis] output shape: [2, 3, 4]" in out
    assert "PyTorch meaning: normalized_shape = x.shape[axis:] = [3,4]" in out
    assert "[concat_middle_axis] output shape: [2, 8, 4]" in out
    assert "[concat_bad_axis] IR graph: node 2: concat: axis=3 out of range" in out
    assert main(["ir-axis-ops", "--arithmetic", "ieee"]) == 0
    assert "(context: binary32)" in capsys.readouterr().out


def test_axis_examples_match_torch():
    import torch
    import torch.nn.functional as F
    g, p, x = examples.softmax_axis()
    xf = np.asarray([float(t) for t in x.reshape(-1)]).reshape(2, 3, 4)
    y = np.asarray(graph.denote(g, p, x, "float64"))
    np.testing.assert_allclose(y, F.softmax(torch.tensor(xf), dim=1).numpy(), rtol=1e-14)
    assert not np.allclose(y, F.softmax(torch.tensor(xf), dim=2).numpy())
    g, p, x = examples.layernorm_axis()
    gam = np.asarray([float(t) for t in p.get(1)["gamma"].reshape(-1)]).reshape(3, 4)
    bet = np.asarray([float(t) for t in p.get(1)["beta"].reshape(-1)]).reshape(3, 4)
    y = np.asarray(graph.denote(g, p, x, "float64"))
    ref = F.layer_norm(torch.tensor(xf), (3, 4), torch.tensor(gam), torch.tensor(bet), 1e-5).numpy()
    np.testing.assert_allclose(y, ref, rtol=1e-12, atol=1e-14)
    g, p, x = examples.concat_axis()
    y = np.asarray(graph.denote(g, p, x, "rational"), dtype=object)
    assert y.shape == (2, 8, 4) and y[0, 3, 0] == to_fraction(x[1][0, 0, 0])


def test_cli_eval_json_exact_strings_per_context(capsys):
    import mpmath
    assert main(["eval", "six-node", "--context", "mpmath:200", "--json"]) == 0
    node = json.loads(capsys.readouterr().out)["rows"][0]
    ctx = scalars.get("mpmath:200")
    y = np.asarray(graph.denote(*examples.six_node_mlp(), ctx), dtype=object).item()
    with mpmath.workprec(200):
        assert mpmath.mpf(node["exact"]) == y and len(node["exact"]) > 60
    assert main(["eval", "six-node", "--context", "interval:binary32", "--json"]) == 0
    node = json.loads(capsys.readouterr().out)["rows"][0]
    lo, hi = node["lo"]["float64"], node["hi"]["float64"]
    assert lo < 0.027712902180357324 < hi and float(np.float32(lo)) == lo
    assert main(["eval", "six-node", "--context", "dual:float64", "--json", "--all"]) == 0
    nodes = json.loads(capsys.readouterr().out)["rows"]
    assert nodes[5]["primal"]["exact"] == repr(0.027712902180357324)
    assert nodes[5]["tangent"]["float64"] == 0.0


def test_cli_eval_and_check_with_a_payload_npz(tmp_path, capsys):
    g, p, _ = examples.six_node_mlp()
    graph.fileformat.save_npz(tmp_path / "p.npz", g, p)
    graph.fileformat.save_npz(tmp_path / "swapped.npz", g, p.swapped(1, 3))
    assert main(["eval", "six-node", "--payload", str(tmp_path / "p.npz"), "--context",
                 "binary32"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "node 5 tanh out=[]: 0.027713"
    assert main(["check", "six-node", "--payload", str(tmp_path / "swapped.npz")]) == 1
    assert "IR eval: linear 1: declared outShape mismatch: [5] vs expected [3]" in capsys.readouterr().err
    # string payloads stay exact through the npz (unicode arrays)
    p2 = graph.fileformat.load_npz(tmp_path / "p.npz")
    assert p2.get(1)["W"][0, 0] == ".15" and p2.op_of(1) == "linear"
