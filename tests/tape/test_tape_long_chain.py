"""A 100,000-node tape: recorded and differentiated by loops, no recursion."""
import sys

import numpy as np
import pytest

from scalarlab.tape import TapeBuilder, backward


@pytest.mark.slow   # 2.6 s CPU; the fold's 100k chain (test_graph_properties) stays default
def test_100k_node_chain_backward():
    n = 100_000
    b = TapeBuilder("float64")
    x = b.leaf(np.array([0.5, -2.0]), name="x")
    v = x
    for _ in range(n - 2):
        v = b.neg(v)                      # an even number of negations: d v / d x = 1
    out = b.sum(v)
    assert len(b.tape) == n
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(200)            # any recursion over the chain would fail here
    try:
        g = backward(b.tape, out)
    finally:
        sys.setrecursionlimit(old)
    np.testing.assert_array_equal(g[x], [1.0, 1.0])
    assert g.reached == list(range(n))
    assert float(b.tape.value(out)) == 0.5 - 2.0
