"""The op records' ``affine`` fact (graph/oprecord.py), which CROWN reads to cross a node
with a linear form: every op that claims it is affine along a line in each parent it
names (the others and the payload fixed), evaluated in mpmath:200 on inputs placed
exactly on the line; the record refuses an unknown value."""
from __future__ import annotations

import numpy as np
import pytest

from scalarlab import graph
from scalarlab import scalars
from scalarlab.graph import Payload
from scalarlab.graph.oprecord import OpRecord, register
from scalarlab.graph.optable import OPS
from scalarlab.ibp import crown

from graph_opcases import CASES, make_args
from test_graph_ops_forward import build

AFFINE_CASES = [c for c in CASES if OPS[c["op"]].affine is not None]


def _grid(v):
    """``v`` on the grid of 2^-12 (|v| <= 1): then x0 + t*d is exact in float64."""
    return np.round(np.asarray(v, dtype=np.float64) * 4096.0) / 4096.0


@pytest.mark.parametrize("c", AFFINE_CASES, ids=lambda c: c["name"])
def test_an_op_marked_affine_is_affine_in_the_parents_it_names(c):
    ctx = scalars.get("mpmath:200")
    rec = OPS[c["op"]]
    parents, params = make_args(c, np.random.default_rng(11))
    other, _ = make_args(c, np.random.default_rng(12))
    g = build(c)
    k = len(parents)
    payload = Payload({k: dict(zip(c["params"], params))}) if params else Payload()
    varying = range(k) if rec.affine == "any" else [0]
    for j in varying:
        x0 = _grid(parents[j])
        d = _grid(other[j]) - x0
        # three points on the line x0 + t d (t = 0, 1, 2) as a batch of 3; the other
        # parents repeated: an affine map has second difference f(2) - 2 f(1) + f(0) = 0
        xs = {i: np.stack([x0 + t * d for t in (0.0, 1.0, 2.0)]) if i == j else
              np.stack([parents[i]] * 3) for i in range(k)}
        y = np.asarray(ctx.to_float64(graph.denote_all(g, payload, xs, ctx)[k]),
                       dtype=np.float64)
        second = y[2] - 2.0 * y[1] + y[0]
        scale = 1.0 + float(np.max(np.abs(y)))
        assert float(np.max(np.abs(second), initial=0.0)) <= 1e-12 * scale, \
            (c["name"], j)


def test_every_affine_fact_has_a_case_and_crown_reads_the_table():
    assert {c["op"] for c in AFFINE_CASES} == {n for n, r in OPS.items() if r.affine}
    assert crown.AFFINE_OPS == frozenset(n for n, r in OPS.items() if r.affine)
    assert OPS["div"].affine == "first" and OPS["relu"].affine is None
    assert OPS["linear"].affine == OPS["add"].affine == "any"


def test_register_refuses_an_unknown_affine_value():
    rec = OpRecord(name="__affine_probe", arity=(1, 1), shape=lambda s, a, declared=None: s[0],
                   forward=None, affine="yes")
    with pytest.raises(ValueError, match="affine must be None, 'any' or 'first'"):
        register(rec)
    assert "__affine_probe" not in OPS
