"""The ``Ops`` interface: one program text, several interpreters (tagless final).

A program is a plain function ``program(ops, x, params)`` that only calls methods of
``ops``.  What a *reference* is depends on the interpreter: a value (plain evaluation), a
session :class:`~tape.session.Handle` (eager tape), a typed-graph variable (graph
recording) or an IR node id (lowering).  Each interpreter implements three primitives --
``apply`` (any op-table op), ``detach`` and ``const`` -- and inherits the convenience
names below, so the op table stays the single source of forward and derivative rules.
"""
from __future__ import annotations

from typing import Any

from scalarlab.graph.optable import OPS


class Ops:
    """Abstract operation interface; subclasses define ``apply``, ``detach``, ``const``."""

    #: interpreter label used in messages
    interpreter = "abstract"

    def apply(self, op: str, *refs, **attrs):
        raise NotImplementedError

    def detach(self, ref):
        raise NotImplementedError

    def const(self, value: Any, name: str = "const"):
        raise NotImplementedError

    def shape(self, ref) -> tuple:
        raise NotImplementedError

    # Convenience names: each is exactly one op-table op.
    def __getattr__(self, name):
        """Every other op-table op by its own name: ``ops.softmax(x, axis=0)``."""
        if name.startswith("_") or name not in OPS:
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r} (and the op "
                                 f"table has no op {name!r})")

        def op(*refs, **attrs):
            return self.apply(name, *refs, **attrs)
        return op

    def add(self, a, b): return self.apply("add", a, b)
    def sub(self, a, b): return self.apply("sub", a, b)
    def mul(self, a, b): return self.apply("mul", a, b)
    def div(self, a, b): return self.apply("div", a, b)
    def neg(self, a): return self.apply("neg", a)
    def relu(self, a): return self.apply("relu", a)
    def tanh(self, a): return self.apply("tanh", a)
    def exp(self, a): return self.apply("exp", a)
    def log(self, a): return self.apply("log", a)
    def sigmoid(self, a): return self.apply("sigmoid", a)
    def softplus(self, a): return self.apply("softplus", a)
    def matmul(self, a, b): return self.apply("matmul", a, b)
    def linear(self, x, w, b):
        """``x W^T + b``; ``out_features`` is read from ``W``'s shape ``[out, in]``."""
        return self.apply("linear", x, w, b, out_features=int(self.shape(w)[0]))
    def sum(self, a, **attrs): return self.apply("sum", a, **attrs)

    def mse(self, pred, target):
        """Mean squared error: the op table's ``mse_loss`` (shape ``[]``)."""
        return self.apply("mse_loss", pred, target)

    def square(self, a):
        """``a * a``: one mul node naming ``a`` twice."""
        return self.mul(a, a)
