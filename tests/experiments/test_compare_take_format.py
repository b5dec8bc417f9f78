"""compare on a token-id model whose embedding table is longer than a narrow format
counts exactly: that context is reported as not evaluated, the others as usual."""
from __future__ import annotations

import json

import numpy as np

from scalarlab import graph as G
from scalarlab.experiments.cli import main as cli_main
from scalarlab.graph import Graph, Node, OpKind
from scalarlab.graph.payload import Payload


def test_compare_marks_a_format_too_narrow_for_the_indices_and_reports_the_others(
        tmp_path, capsys):
    """e4m3 holds the integers up to 16 only: a take over 20 rows is refused for e4m3
    (its indices could be rounded to other rows) while binary32 is compared."""
    nodes = [Node(0, [], OpKind("input", dtype="int64"), [3]),
             Node(1, [], "const", [20, 2]),
             Node(2, [1, 0], OpKind("take", axis=0), [3, 2]),
             Node(3, [2], "linear", [3, 1])]
    p = Payload()
    p.set(1, {"value": np.arange(40, dtype=np.float64).reshape(20, 2) / 8}, op="const")
    p.set(3, {"W": np.array([["0.1", "-0.3"]], dtype=object),
              "b": np.array(["0.5"], dtype=object)}, op="linear")
    path = tmp_path / "embed.json"
    G.save(str(path), Graph(nodes), p)
    out = tmp_path / "cmp.json"
    code = cli_main(["compare", str(path), "--input", "19,3,0", "--contexts",
                     "binary32,e4m3", "--quiet", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    doc = json.loads(out.read_text())
    v = {d["context"]: d for d in doc["verdicts"]} if isinstance(doc["verdicts"], list) \
        else doc["verdicts"]
    assert v["binary32"]["failed_nodes"] == [] and v["binary32"]["output_max_ulps"] <= 4
    assert v["e4m3"]["failed_nodes"] == [2, 3]            # the take and its dependent
    assert "take: an axis of length 20" in v["e4m3"]["failure"]
    assert "does not hold exactly" in v["e4m3"]["failure"]
    rows = {(r["context"], r["node"]): r for r in doc["rows"]}
    assert rows[("binary32", 3)]["evaluated"] and not rows[("e4m3", 3)]["evaluated"]


def test_ieee_kernels_fall_back_only_for_elementwise_maps():
    """The IEEE fallback calls the context's method with the node's arguments: right for
    log(0) = -inf, wrong for take (whose method needs the axis), so take gets no kernel."""
    from scalarlab import scalars
    from scalarlab.experiments.cases import ieee_kernels
    nodes = [Node(0, [], "input", [3]),
             Node(1, [0], "log", [3]),
             Node(2, [], "const", [20, 2]),
             Node(3, [2, 0], OpKind("take", axis=0), [3, 2])]
    ctx = scalars.get("binary32")
    kernels = ieee_kernels(Graph(nodes), ctx)
    assert sorted(kernels) == [1]
    y = kernels[1]([ctx.convert(np.array([0.0, 1.0, -1.0]))], {}, None)
    got = ctx.to_float64(y)
    assert got[0] == -np.inf and got[1] == 0.0 and np.isnan(got[2])
