"""Every box names its guarantee; checks say which guarantee they test.

``real``: the box holds the exact real result; ``execution``: also what the point context
of the interval context's format computes.  IBP boxes carry both; a box built from bounds
claims only ``real`` unless its producer says more; sweep and graph-semantics print what
the boxes claim and what the point runs check, and count separately the violations of
boxes that claim what was checked.
"""
from __future__ import annotations

import json
import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.graph import Graph, Node, OpKind, Payload, examples
from scalarlab.graph.optable import OPS
from scalarlab.experiments.cli import main
from scalarlab.graph.fileformat import dumps
from scalarlab.ibp import Box, check_containment, run_ibp, sweep
from scalarlab.ibp.box import BOTH, EXECUTION, REAL
from scalarlab.ibp.errors import IBPError


def test_box_guarantee_field():
    assert Box(np.zeros(2), np.ones(2)).guarantee == (REAL,)
    assert Box(np.zeros(2), np.ones(2), guarantee=BOTH).guarantee_text == "real+execution"
    assert Box(np.zeros(2), np.ones(2), guarantee="execution+real").guarantee == BOTH
    b = Box.from_center_radius(np.array([0.5, 1.0]), 0.25)
    assert b.guarantee == BOTH and b[0].guarantee == BOTH
    assert b.with_guarantee("real").guarantee == (REAL,)
    assert b.with_guarantee("real").ball is b.ball
    for bad in ("exact", (EXECUTION,), ()):
        with pytest.raises(IBPError, match="guarantee"):
            Box(np.zeros(2), np.ones(2), guarantee=bad)


@pytest.mark.parametrize("ctx", ["interval:float64", "interval:binary32", "interval:bfloat16",
                                 "interval:mpmath:60", "interval:rational"])
def test_ibp_boxes_carry_both_guarantees(ctx):
    g, p, x0 = examples.six_node_mlp()
    boxes = run_ibp(g, p, Box.from_center_radius(x0, "0.05"), ctx)
    assert all(b is None or b.guarantee == BOTH for b in boxes)
    assert any(b is not None for b in boxes)


def test_run_ibp_real_guarantee_is_tighter_and_says_so():
    """guarantee="real": the rules without the point-evaluation bound, the products as
    they are; every box claims real only and lies inside the execution box."""
    g, p, c = _softmax_graph()
    box = Box.from_center_radius(c, 0.3)
    for ctx in ("interval:bfloat16", "interval:float64"):
        ex = run_ibp(g, p, box, ctx)
        re = run_ibp(g, p, box, ctx, guarantee="real")
        assert all(b.guarantee == (REAL,) for b in re)
        for a, b in zip(re, ex):
            assert np.all(b.lo_float() <= a.lo_float()) and np.all(a.hi_float() <= b.hi_float())
        if ctx == "interval:bfloat16":
            assert np.sum(re[-1].width()) < np.sum(ex[-1].width())
        rep = check_containment(g, p, box, samples=20, point_ctx="mpmath:80",
                                interval_ctx=ctx, boxes=re)
        assert rep.checked_guarantee == REAL and rep.ok
    with pytest.raises(IBPError, match="guarantee"):
        run_ibp(g, p, box, "interval:float64", guarantee="exact")


def _softmax_graph():
    g = Graph([Node(0, [], "input", [6]), Node(1, [0], "relu", [6]),
               Node(2, [1], OpKind("softmax", axis=0), [6])])
    c = 2 * np.random.default_rng(5).standard_normal(6)
    return g, Payload({}), c


def test_a_real_only_box_missing_a_rounded_point_is_no_claimed_violation():
    """A box that claims only ``real`` (here: the real-sound softmax rule alone, which
    missed bfloat16's own softmax on this box before the execution bound) may miss
    point runs; the report counts them but not as claimed violations, and says why."""
    g, p, c = _softmax_graph()
    box = Box.from_center_radius(c, 0.3)
    ictx = "interval:bfloat16"
    boxes = run_ibp(g, p, box, ictx)
    ic = scalars.get(ictx)
    real = OPS["softmax"].interval.real(
        ic, [ic.make(np.asarray(boxes[1].lo), np.asarray(boxes[1].hi))], {"axis": 0}, 0)
    # shrink it to the real rule's box, claiming real only
    real_box = Box.from_interval(ic, real)
    assert real_box.guarantee == (REAL,)
    rep = check_containment(g, p, box, samples=1000, point_ctx="bfloat16", seed=6,
                            boxes=boxes[:2] + [real_box])
    assert rep.checked_guarantee == EXECUTION and rep.guarantee == "real"
    assert rep.violation_count > 0 and rep.claimed_violation_count == 0
    assert "claims real only" in rep.first_counterexample()
    # the IBP boxes themselves: both guarantees, no violation
    rep = check_containment(g, p, box, samples=1000, point_ctx="bfloat16", seed=6)
    assert rep.guarantee == "real+execution"
    assert rep.violation_count == 0 and rep.claimed_violation_count == 0
    # a more precise point context samples the real values: "real" is checked
    rep = check_containment(g, p, box, samples=20, point_ctx="mpmath:80",
                            interval_ctx=ictx)
    assert rep.checked_guarantee == REAL and rep.violation_count == 0


def test_sweep_rows_name_guarantee_and_check():
    g, p, c = _softmax_graph()
    df = sweep(g, p, c, ["0.3"], ["float64", "binary32", "bfloat16", "binary16"], [200])
    assert list(df["guarantee"]) == ["real+execution"] * 4
    assert list(df["checked"]) == ["execution"] * 4
    assert (df["violations"] == 0).all() and (df["claimed_violations"] == 0).all()


def test_cli_sweep_and_graph_semantics_say_which_guarantee(tmp_path, capsys):
    g, p, c = _softmax_graph()
    path = tmp_path / "relu_softmax.json"
    path.write_text(dumps(g, p))
    centre = ",".join(repr(float(t)) for t in c)
    assert main(["sweep", str(path), "--input", centre, "--radii", "0.3", "--samples",
                 "300", "--contexts", "bfloat16,binary16", "--quiet", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [(q["guarantee"], q["checked"], q["violations"]) for q in rows] == \
        [("real+execution", "execution", 0)] * 2
    assert main(["sweep", str(path), "--input", centre, "--radii", "0.3", "--samples",
                 "100", "--contexts", "bfloat16", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "guarantees: ibp boxes claim real+execution, point runs check execution" in out
    assert main(["graph-semantics", str(path), "--input", centre, "--radius", "0.3",
                 "--context", "bfloat16", "--samples", "200"]) == 0
    out = capsys.readouterr().out
    assert "the ibp boxes claim real+execution" in out
    assert "the point runs in bfloat16 check execution" in out
    assert main(["graph-semantics", str(path), "--input", centre, "--radius", "0.3",
                 "--context", "bfloat16", "--samples", "50", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"]["guarantee"] == "real+execution"
    assert doc["summary"]["checked"] == "execution"
    assert doc["summary"]["claimed_violations"] == 0
    assert {row["guarantee"] for row in doc["rows"]} == {"real+execution"}
