"""Soundness of IBP: random graphs, random boxes, every interval context, zero violations.

Each case draws a small random graph over the ops the interval contexts support, a random
box, and checks deterministic samples plus all box vertices in a point context that is
far more precise than the interval endpoints (float64 against binary32/bfloat16/binary16
endpoints; exact rationals or 300-bit mpmath against float64/rational/mpmath endpoints),
so any violation is a real enclosure failure, not point rounding.  Across the default run
more than 10^5 sampled points are checked.
"""
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scalarlab.graph import Graph, Node, Payload
from scalarlab.ibp import Box, check_containment, run_ibp

PIECEWISE_LINEAR_UNARY = ["relu", "abs", "neg"]
SMOOTH_UNARY = ["tanh", "sigmoid", "softplus", "exp"]
BINARY = ["add", "sub", "mul", "max", "min"]

# (interval context, point context, samples per case, allow transcendental ops)
CASES = [
    ("interval:binary32", "float64", 3000, True),
    ("interval:bfloat16", "float64", 3000, True),
    ("interval:binary16", "float64", 1000, True),
    ("interval:float64", "mpmath:300", 24, True),
    ("interval:float64", "rational", 200, False),
    ("interval:rational", "rational", 150, False),
    ("interval:mpmath:200", "mpmath:300", 16, True),
]


@st.composite
def random_graphs(draw, smooth: bool):
    """(Graph, Payload, centre, radius) with dyadic weights (exact in every format)."""
    d = draw(st.integers(1, 3))
    nodes = [Node(0, [], "input", [d])]
    shapes = [(d,)]
    payload = {}
    unary = PIECEWISE_LINEAR_UNARY + (SMOOTH_UNARY if smooth else [])
    for i in range(1, draw(st.integers(2, 6)) + 1):
        kind = draw(st.sampled_from(["unary", "binary", "linear", "sum"]))
        src = draw(st.integers(0, i - 1))
        if kind == "unary":
            op = draw(st.sampled_from(unary))
            nodes.append(Node(i, [src], op, list(shapes[src])))
            shapes.append(shapes[src])
        elif kind == "binary":
            same = [j for j in range(i) if shapes[j] == shapes[src]]
            other = draw(st.sampled_from(same))
            op = draw(st.sampled_from(BINARY))
            nodes.append(Node(i, [src, other], op, list(shapes[src])))
            shapes.append(shapes[src])
        elif kind == "linear" and len(shapes[src]) == 1:
            w = draw(st.integers(1, 3))
            k = shapes[src][0]
            ints = st.integers(-8, 8)
            W = [[Fraction(draw(ints), 8) for _ in range(k)] for _ in range(w)]
            b = [Fraction(draw(ints), 8) for _ in range(w)]
            payload[i] = {"W": np.array(W, dtype=object), "b": np.array(b, dtype=object)}
            nodes.append(Node(i, [src], "linear", [w]))
            shapes.append((w,))
        else:
            nodes.append(Node(i, [src], "sum", []))
            shapes.append(())
    centre = [Fraction(draw(st.integers(-16, 16)), 8) for _ in range(d)]
    radius = draw(st.sampled_from([Fraction(0), Fraction(1, 16), Fraction(1, 2), Fraction(2)]))
    return Graph(nodes), Payload(payload), centre, radius


MAX_EXAMPLES = 20


@pytest.mark.parametrize("ictx,pctx,samples,smooth", CASES,
                         ids=[f"{c[0]}-vs-{c[1]}" for c in CASES])
def test_random_graphs_are_enclosed(ictx, pctx, samples, smooth):
    """Every node of every drawn graph gets a box (the ops drawn all have interval rules
    that never give up on a bounded input), and no checked point leaves its box."""
    ran = {"examples": 0, "points": 0}

    @settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(random_graphs(smooth))
    def check(case):
        g, p, centre, radius = case
        box = Box.from_center_radius(centre, radius)
        boxes = run_ibp(g, p, box, ictx)
        gave_up = [f"node {n.id} ({n.kind.op})" for n, b in zip(g.nodes, boxes) if b is None]
        assert not gave_up, f"{ictx} gave no box for {', '.join(gave_up)}"
        rep = check_containment(g, p, box, samples=samples, point_ctx=pctx,
                                interval_ctx=ictx, seed=11, boxes=boxes)
        assert rep.unbounded == [] and rep.samples == samples
        assert rep.violation_count == 0, rep.first_counterexample()
        assert not rep.failures, rep.first_counterexample()
        ran["examples"] += 1
        ran["points"] += rep.checked

    check()
    # derandomized and without an example database: the same MAX_EXAMPLES graphs every run
    assert ran["examples"] >= MAX_EXAMPLES and ran["points"] >= samples * MAX_EXAMPLES, ran


def test_the_cases_check_more_than_1e5_points():
    """Each case above checks at least ``samples`` points in each of its MAX_EXAMPLES
    graphs (it asserts so itself); together that is more than 10^5 points."""
    assert sum(c[2] for c in CASES) * MAX_EXAMPLES >= 100_000
