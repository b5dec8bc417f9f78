"""A tensor graph as a scalar graph in the binary contexts' evaluation order (for bounds).

:func:`roundoff.roundoff_bound` models one rounding per scalar node.  A small network
(an MLP from ONNX or PyTorch: ``linear``, activations, elementwise ops, ``sum``) becomes
one scalar node per rounding its point execution makes, in the order the binary contexts
make them (``ctx.reduction == "sequential"``, no fused multiply-add): a ``linear`` row is
``((x0 w0 + x1 w1) + x2 w2) + ... + b`` -- each product rounded, then each partial sum,
then the bias -- and ``sum`` adds left to right.  The scalar graph's point run equals the
tensor graph's bit for bit (a test checks it), so its bound is the tensor graph's.

Every input entry becomes one scalar input (row-major order); payload weights become
exact scalar constants (a float64 weight as its exact binary fraction, a decimal string
as itself), converted by each context with one rounding, as the tensor graph does.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from scalarlab.graph import Graph, Node, Payload
from scalarlab.graph.node import OpKind

from .roundoff import BoundError, FUNCTION_OPS

__all__ = ["ScalarGraph", "scalarize", "SCALARIZED_OPS"]

_UNARY = frozenset({"neg", "abs", "sqrt", "relu"}) | FUNCTION_OPS
_BINARY = frozenset({"add", "sub", "mul", "div"})
SCALARIZED_OPS = frozenset({"input", "const", "linear", "sum"}) | _UNARY | _BINARY


class ScalarGraph:
    """``graph``/``payload``: the scalar graph; ``inputs``: per scalar input, (tensor
    input id, flat index); ``outputs``: the scalar node of each entry of the tensor
    output (row-major); ``input_shapes``: per tensor input id, its per-example shape."""

    def __init__(self, graph, payload, inputs, outputs, input_shapes):
        self.graph, self.payload = graph, payload
        self.inputs, self.outputs, self.input_shapes = inputs, outputs, input_shapes

    def for_output(self, j: int):
        """The scalar graph whose output is entry ``j`` of the tensor output."""
        return Graph(self.graph.nodes, output=self.outputs[j])

    def oracle_for_output(self, j: int):
        """The same graph with ``relu(x)`` spelled ``fmax(x, 0)`` (node 0 is the constant
        0): the same real function, in the ops the Arb oracle knows."""
        nodes = [Node(n.id, [n.parents[0], 0], "fmax", []) if n.kind.op == "relu" else n
                 for n in self.graph.nodes]
        return Graph(nodes, output=self.outputs[j])


def _exact_text(v) -> str:
    """An exact decimal/fraction text of a payload entry (float -> its binary value)."""
    if isinstance(v, str):
        Fraction(v)                               # refuse what is not a number
        return v
    q = Fraction(float(v)) if isinstance(v, (float, np.floating)) else Fraction(v)
    return f"{q.numerator}/{q.denominator}"


class _Builder:
    def __init__(self):
        self.nodes: list = []
        self.consts: dict = {}

    def add(self, op, parents=(), **attrs) -> int:
        i = len(self.nodes)
        kind = OpKind(op, **attrs) if attrs else op
        self.nodes.append(Node(i, list(parents), kind, []))
        return i

    def const(self, value) -> int:
        i = self.add("const")
        self.consts[i] = {"const": {"value": np.array(_exact_text(value), dtype=object)}}
        return i


def scalarize(graph, payload) -> ScalarGraph:
    """The scalar graph of ``graph`` (see the module docstring); an op outside
    :data:`SCALARIZED_OPS` (or a shape it does not cover) is a BoundError naming it."""
    b = _Builder()
    b.const("0")                                 # node 0: the oracle graph's relu floor
    ids: dict = {}                               # tensor node id -> array of scalar ids
    inputs, shapes = [], {}
    out_id = graph.output if graph.output is not None else len(graph.nodes) - 1
    for node in graph.nodes:
        i, op = node.id, node.kind.op
        shape = tuple(int(s) for s in node.out_shape)
        where = f"bound: node {i} ({op}, shape {list(shape)})"
        if op not in SCALARIZED_OPS:
            raise BoundError(f"{where}: op {op} is not supported for bounds (supported: "
                             f"{', '.join(sorted(SCALARIZED_OPS))})")
        if node.kind.attrs and op not in ("sum",):
            raise BoundError(f"{where}: attributes {dict(node.kind.attrs)} not supported")
        ps = [ids[p] for p in node.parents]
        if op == "input":
            shapes[i] = shape
            flat = []
            for k in range(int(np.prod(shape, dtype=np.int64))):
                flat.append(b.add("input"))
                inputs.append((i, k))
            ids[i] = np.array(flat, dtype=np.int64).reshape(shape)
        elif op == "const":
            val = np.asarray(payload.get(i)["value"], dtype=object)
            ids[i] = np.vectorize(b.const, otypes=[np.int64])(val).reshape(shape) \
                if val.size else np.empty(shape, dtype=np.int64)
        elif op in _UNARY:
            ids[i] = np.vectorize(lambda s: b.add(op, [int(s)]), otypes=[np.int64])(ps[0])
        elif op in _BINARY:
            a, c = np.broadcast_arrays(ps[0], ps[1])
            if a.shape != shape:
                raise BoundError(f"{where}: operand shapes {list(ps[0].shape)}, "
                                 f"{list(ps[1].shape)} do not give the node's shape")
            out = np.empty(shape, dtype=np.int64)
            for idx in np.ndindex(*shape) if shape else [()]:
                out[idx] = b.add(op, [int(a[idx]), int(c[idx])])
            ids[i] = out
        elif op == "sum":
            axis = dict(node.kind.attrs).get("axis")
            if axis is not None or shape != ():
                raise BoundError(f"{where}: only the full sum to a scalar is supported")
            flat = ps[0].reshape(-1)
            s = int(flat[0])
            for k in flat[1:]:
                s = b.add("add", [s, int(k)])      # left to right, one rounding each
            ids[i] = np.array(s, dtype=np.int64)
        elif op == "linear":
            x = ps[0]
            if x.ndim != 1:
                raise BoundError(f"{where}: linear of a {x.ndim}-d input is not supported")
            params = payload.get(i)
            W = np.asarray(params["W"], dtype=object)
            bias = params.get("b")
            rows = []
            for j in range(W.shape[0]):
                s = None
                for k in range(W.shape[1]):
                    p = b.add("mul", [int(x[k]), b.const(W[j, k])])
                    s = p if s is None else b.add("add", [s, p])
                if bias is not None:
                    s = b.add("add", [s, b.const(np.asarray(bias, dtype=object)[j])])
                rows.append(s)
            ids[i] = np.array(rows, dtype=np.int64)
        if i == out_id:
            break
    outs = [int(v) for v in np.asarray(ids[out_id]).reshape(-1)]
    return ScalarGraph(Graph(b.nodes, output=outs[-1]), Payload(b.consts), inputs, outs,
                       shapes)
