"""Soundness stress test (slow selection): both guarantees on random graphs of every
interval-ruled op x every binary format x random boxes.

Each graph puts one op under test behind a random linear layer (or directly on the input
where the op needs a domain: tgamma, pow); each (graph, format, box) is checked twice with
the same IBP boxes and all box vertices:

* execution — point runs in the format itself (``check_containment(point_ctx=fmt)``):
  every value the lab's point context computes lies in its node's box;
* real — 100-bit mpmath runs (the exact values up to 2^-100, far below any of these
  formats' ulps) lie in the boxes.

Zero violations and zero failed evaluations for both; the counts are printed (``-s``).
e4m3 has no infinity: its point runs give NaN where a value overflows (448); a box
cannot hold NaN, so those are counted apart (``nan_overflows``) and allowed only where the
box reaches +-inf, announcing the overflow.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from scalarlab.graph import Graph, Node, OpKind, Payload
from scalarlab.ibp import Box, check_containment, run_ibp

pytestmark = pytest.mark.slow

FORMATS = ["binary16", "bfloat16", "binary32", "float64", "e5m2", "e4m3"]
ELEMENTWISE = ["gelu", "silu", "mish", "gelu_tanh", "hardswish", "tanh", "sigmoid", "exp",
               "softplus", "relu", "erf"]
AXIS_OPS = ["softmax", "log_softmax", "layernorm"]
OTHER = ["max_pool1d", "avg_pool1d", "conv1d", "matmul", "tgamma", "pow", "reduce_sum",
         "reduce_mean", "global_avg_pool"]
OPS_UNDER_TEST = AXIS_OPS + ELEMENTWISE + OTHER


def _layer(rng, i, parent, d, k, scale):
    W = rng.standard_normal((k, d)) * scale / np.sqrt(d)
    b = rng.standard_normal(k) * scale / 4
    return Node(i, [parent], "linear", [k]), {"W": W, "b": b}


def build(op, seed):
    """(graph, payload, centre, radius) with ``op`` at the output."""
    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, 6))
    nodes = [Node(0, [], "input", [d])]
    pay = {}
    centre = rng.uniform(-1.5, 1.5, d)
    radius = float(rng.choice([0.01, 0.1, 0.3, 0.6]))
    if op in ("tgamma", "pow"):
        # inside the domain: tgamma on (0.3, 4.5) or between the poles -3 and -2; pow as
        # x ** x on (0.2, 3)
        if op == "tgamma" and seed % 2:
            centre = rng.uniform(-2.7, -2.3, d)
            radius = 0.05
        else:
            centre = rng.uniform(0.8, 2.5, d)
            radius = min(radius, 0.4)
        parents = [0] if op == "tgamma" else [0, 0]
        nodes.append(Node(1, parents, op, [d]))
        return Graph(nodes), Payload(pay), centre, radius
    k = int(rng.integers(3, 7))
    node, pay[1] = _layer(rng, 1, 0, d, k, 2.0)
    nodes.append(node)
    if op in AXIS_OPS:
        nodes.append(Node(2, [1], OpKind(op, axis=0), [k]))
    elif op in ELEMENTWISE:
        nodes.append(Node(2, [1], op, [k]))
    elif op in ("max_pool1d", "avg_pool1d"):
        nodes.append(Node(2, [1], OpKind("reshape", shape=[1, k]), [1, k]))
        ks, st = int(rng.integers(2, 4)), int(rng.integers(1, 3))
        ks = min(ks, k)
        out = (k - ks) // st + 1
        nodes.append(Node(3, [2], OpKind(op, kernel_size=[ks], stride=[st]), [1, out]))
    elif op == "conv1d":
        nodes.append(Node(2, [1], OpKind("reshape", shape=[1, k]), [1, k]))
        ks = min(int(rng.integers(2, 4)), k)
        nodes.append(Node(3, [2], OpKind("conv1d", kernel_size=[ks], out_channels=2),
                          [2, k - ks + 1]))
        pay[3] = {"weight": rng.standard_normal((2, 1, ks)), "bias": rng.standard_normal(2)}
    elif op == "matmul":
        nodes.append(Node(2, [1], OpKind("reshape", shape=[1, k]), [1, k]))
        nodes.append(Node(3, [], "const", [k, 2]))
        pay[3] = {"value": rng.standard_normal((k, 2))}
        nodes.append(Node(4, [2, 3], "matmul", [1, 2]))
    elif op == "reduce_sum" or op == "reduce_mean":
        nodes.append(Node(2, [1], OpKind(op, axis=0), []))
    elif op == "global_avg_pool":
        nodes.append(Node(2, [1], OpKind("reshape", shape=[1, k]), [1, k]))
        nodes.append(Node(3, [2], "global_avg_pool", [1, 1]))
    return Graph(nodes), Payload(pay), centre, radius


BOXES_PER_CASE = 8


def _announced_overflows(rep) -> int:
    """Point values that are NaN because the format has no infinity (e4m3: an overflow
    is NaN) at a node whose box reaches +-inf, i.e. says the value may overflow.  A box
    cannot hold NaN; these are counted apart, every other miss is a violation."""
    assert len(rep.violations) == rep.violation_count      # all stored, none unseen
    return sum(1 for v in rep.violations
               if math.isnan(v.value) and (v.hi == math.inf or v.lo == -math.inf))


@pytest.mark.parametrize("fmt", FORMATS)
def test_both_guarantees_on_random_graphs(fmt):
    counts = dict(graphs=0, boxes=0, execution_points=0, real_points=0,
                  execution_violations=0, real_violations=0, unbounded=0, nan_overflows=0)
    unbounded = []
    ictx = f"interval:{fmt}"
    for j, op in enumerate(OPS_UNDER_TEST):
        for k in range(BOXES_PER_CASE):
            seed = 1000 * FORMATS.index(fmt) + 10 * j + k
            g, p, c, r = build(op, seed)
            box = Box.from_center_radius(c, r)
            boxes = run_ibp(g, p, box, ictx)
            out = boxes[g.output]
            if out is None:                      # a rule gave up: nothing to check there
                counts["unbounded"] += 1
                unbounded.append(op)
            assert all(b is None or b.guarantee == ("real", "execution") for b in boxes)
            ex = check_containment(g, p, box, samples=300, point_ctx=fmt, seed=seed,
                                   boxes=boxes)
            assert ex.checked_guarantee == "execution"
            overflow = _announced_overflows(ex)
            counts["nan_overflows"] += overflow
            assert ex.violation_count == overflow and not ex.failures, \
                (op, fmt, seed, ex.first_counterexample())
            real = check_containment(g, p, box, samples=16, point_ctx="mpmath:100",
                                     interval_ctx=ictx, seed=seed, boxes=boxes)
            assert real.checked_guarantee == "real"
            assert real.violation_count == 0 and not real.failures, \
                (op, fmt, seed, real.first_counterexample())
            counts["graphs"] += 1
            counts["boxes"] += 1
            counts["execution_points"] += ex.checked
            counts["real_points"] += real.checked
            counts["execution_violations"] += ex.violation_count - overflow
            counts["real_violations"] += real.violation_count
    print(f"\nsoundness stress {fmt}: {counts} (no output box: {unbounded})")
    assert counts["unbounded"] <= counts["graphs"] // 20
    assert counts["execution_points"] >= 300 * len(OPS_UNDER_TEST) * BOXES_PER_CASE
