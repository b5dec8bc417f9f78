"""Graphs shared by the experiments tests."""
import numpy as np
import pytest

from scalarlab import graph


@pytest.fixture
def cancel_graph():
    """``(Graph, Payload)``: x -> [x0 + x1, x0] -> (x0 + x1) - x0, exact decimal weights.

    In exact arithmetic the output is x1; a format too narrow to hold x0 + x1 loses x1 in
    the sum and returns a cancelled difference (0 when x1 is below half an ulp of x0).
    """
    g = graph.Graph([graph.Node(0, [], "input", [2]),
                     graph.Node(1, [0], "linear", [2]),
                     graph.Node(2, [1], "linear", [1])])
    p = graph.Payload({1: {"linear": {"W": np.array([["1", "1"], ["1", "0"]], dtype=object),
                                      "b": np.array(["0", "0"], dtype=object)}},
                       2: {"linear": {"W": np.array([["1", "-1"]], dtype=object),
                                      "b": np.array(["0"], dtype=object)}}})
    return g, p
