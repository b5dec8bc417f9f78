"""Built-in example graphs: the seed's six-node MLP and the axis-operation graphs.

Weights and inputs are exact decimal strings, so every context reads the same real
numbers with its own single rounding (rational reads them exactly).
``get(name)`` returns ``(Graph, Payload, default_input)``; :func:`resolve` also accepts a
graph-file path, for CLI commands that take a GRAPH argument.
"""
from __future__ import annotations

import os

import numpy as np

from .errors import GraphError
from .node import Graph, Node, OpKind
from .payload import Payload


def _dec(rows):
    return np.asarray(rows, dtype=object)


# The seed's weights (PyTorch snippet), spelled as exact decimals.
W1 = [[".15", "-.12", ".08", ".05"], [".02", ".11", "-.09", ".07"],
      ["-.04", ".06", ".10", "-.03"], [".09", ".01", ".04", ".13"],
      ["-.07", ".03", ".12", "-.02"]]
B1 = [".01", "-.02", ".03", "0", ".02"]
W2 = [[".05", ".08", "-.06", ".03", ".07"],
      ["-.04", ".02", ".09", "-.01", ".06"],
      [".10", "-.03", ".04", ".05", "-.08"]]
B2 = [".02", "-.01", "0"]
X0 = ["0.3", "-0.2", "0.1", "0.4"]


def six_node_graph() -> Graph:
    return Graph([
        Node(0, [], "input", [4]),
        Node(1, [0], "linear", [5]),
        Node(2, [1], "relu", [5]),
        Node(3, [2], "linear", [3]),
        Node(4, [3], "sum", []),
        Node(5, [4], "tanh", []),
    ])


def six_node_payload() -> Payload:
    return Payload({1: {"linear": {"W": _dec(W1), "b": _dec(B1)}},
                    3: {"linear": {"W": _dec(W2), "b": _dec(B2)}}})


def six_node_mlp():
    """``(Graph, Payload, x0)``: tanh(sum(W2 relu(W1 x + b1) + b2)) at x0 = (0.3, -0.2, 0.1, 0.4)."""
    return six_node_graph(), six_node_payload(), _dec(X0)


def _ramp(shape, mult=7, mod=11):
    """Deterministic decimal-string tensor: entry k = ((k*mult) mod mod - mod//2) / 10."""
    n = int(np.prod(shape))
    vals = [f"{((k * mult) % mod) - mod // 2}e-1" for k in range(n)]
    return np.asarray(vals, dtype=object).reshape(shape)


def softmax_axis():
    g = Graph([Node(0, [], "input", [2, 3, 4]),
               Node(1, [0], OpKind("softmax", axis=1), [2, 3, 4])])
    return g, Payload(), _ramp((2, 3, 4))


def layernorm_axis():
    g = Graph([Node(0, [], "input", [2, 3, 4]),
               Node(1, [0], OpKind("layernorm", axis=1), [2, 3, 4])])
    gamma = np.asarray([f"{1 + k / 20:.2f}" for k in range(12)], dtype=object).reshape(3, 4)
    beta = np.asarray([f"{(k % 3 - 1) / 10:.1f}" for k in range(12)], dtype=object).reshape(3, 4)
    p = Payload({1: {"layernorm": {"gamma": gamma, "beta": beta, "eps": "1e-5"}}})
    return g, p, _ramp((2, 3, 4))


def concat_axis(axis: int = 1):
    g = Graph([Node(0, [], "input", [2, 3, 4]),
               Node(1, [], "input", [2, 5, 4]),
               Node(2, [0, 1], OpKind("concat", axis=axis), [2, 8, 4])])
    return g, Payload(), {0: _ramp((2, 3, 4)), 1: _ramp((2, 5, 4), mult=5, mod=13)}


BUILTINS = {
    "six-node": six_node_mlp,
    "softmax-axis": softmax_axis,
    "layernorm-axis": layernorm_axis,
    "concat-axis": concat_axis,
}


def names() -> list:
    return list(BUILTINS)


def get(name: str):
    """``(Graph, Payload, default_input)`` of a built-in example."""
    try:
        return BUILTINS[name]()
    except KeyError:
        raise GraphError(f"unknown built-in graph {name!r}; built-ins: {', '.join(BUILTINS)}") from None


def resolve(arg: str):
    """A CLI GRAPH argument: a built-in name, a JSON graph file, an ONNX model (imported
    as ``scalarlab import`` does: batch axes inferred, the model's one output) or an FPCore
    file (``FILE.fpcore`` = its first FPCore, ``FILE.fpcore#N`` the N-th); default input
    None."""
    if arg in BUILTINS:
        return get(arg)
    base, sep, num = arg.rpartition("#")
    if base.endswith(".fpcore") and sep and num.isdigit() and os.path.exists(base):
        arg, index = base, int(num) - 1          # FILE.fpcore#N: the N-th FPCore
    else:
        index = 0
    if arg.endswith(".fpcore") and os.path.exists(arg):
        from .importers.fpcore import read_fpcore_file
        g, p = read_fpcore_file(arg, index)
        return g, p, None
    if arg.endswith(".onnx") and os.path.exists(arg):
        from .importers.element_types import load_onnx_typed   # batch axes inferred,
        g, p = load_onnx_typed(arg)                             # one output, input dtypes
        return g, p, None
    if os.path.exists(arg):
        from .fileformat import load
        g, p = load(arg)
        return g, p, None
    raise GraphError(f"GRAPH {arg!r} is neither a built-in ({', '.join(BUILTINS)}) nor an "
                     f"existing file")
