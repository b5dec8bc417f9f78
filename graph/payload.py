"""Payload: tensors keyed by node id (linear W/b, conv weight/bias, layernorm, batchnorm,
const values), kept apart from the graph so one graph runs with any parameters.

Entries may hold float64 arrays, ``Fraction``/``mpq`` values, decimal strings (object
arrays of ``str``), nested lists of these, or values already in some context (intervals,
duals).  Nothing is rounded here: :meth:`Payload.converted` converts an entry into a
context with that context's single correct rounding per value.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from scalarlab.scalars.errors import ContextError

from .errors import GraphError


def _is_ctx_value(v) -> bool:
    return (hasattr(v, "lo") and hasattr(v, "hi")) or (hasattr(v, "primal") and hasattr(v, "tangent"))


def normalize_value(v, where: str = "payload"):
    """Arrays stay arrays; Fractions/strings/nested lists become object arrays."""
    if _is_ctx_value(v):
        return v
    if isinstance(v, np.ndarray):
        if v.dtype.kind in "fiub":
            return v.astype(np.float64, copy=False)
        if v.dtype.kind == "U":
            return v.astype(object)
        if v.dtype == object:
            return v
        raise GraphError(f"{where}: unsupported array dtype {v.dtype}")
    if isinstance(v, (float, int, np.floating, np.integer)) and not isinstance(v, bool):
        return np.asarray(v, dtype=np.float64)
    try:
        arr = np.asarray(v, dtype=object)
    except (ValueError, TypeError) as exc:
        raise GraphError(f"{where}: cannot read value as a tensor: {exc}") from None
    if arr.dtype == object and arr.ndim and any(isinstance(t, (list, tuple)) for t in arr.reshape(-1)):
        raise GraphError(f"{where}: ragged nested lists")
    return arr


def value_shape(v) -> tuple:
    if hasattr(v, "lo") and hasattr(v, "hi"):
        return tuple(np.shape(v.lo))
    if hasattr(v, "primal") and hasattr(v, "tangent"):
        return tuple(np.shape(v.primal))
    return tuple(np.shape(v))


def convert_value(ctx, v):
    """``v`` in context ``ctx``: already-context values pass, the rest via ``ctx.convert``."""
    if _is_ctx_value(v):
        if (ctx.is_interval and hasattr(v, "lo")) or (ctx.is_dual and hasattr(v, "primal")):
            return v
        raise ContextError(f"context {ctx.name}: convert: got a {type(v).__name__} value")
    if isinstance(v, np.ndarray) and v.dtype == object and v.size:
        # Already a value of this object-array context (mpq / mpf / mpfr entries)?
        z = ctx.zeros(())
        if isinstance(z, np.ndarray) and z.dtype == object:
            first = v.reshape(-1)[0]
            if type(first) is type(z.reshape(-1)[0]) and not isinstance(first, (str, Fraction)):
                return v
    return ctx.convert(v)


class Payload:
    """``Payload({1: {"W": W1, "b": b1}, 3: {...}})`` — params per node id.

    An entry may also be given with its op tag, ``{1: {"linear": {"W": ..., "b": ...}}}``
    (the JSON file form); the tag is then checked against the node's op.
    """

    def __init__(self, entries=None):
        self._params: dict[int, dict] = {}
        self._ops: dict[int, str] = {}
        if isinstance(entries, Payload):
            self._params = {k: dict(v) for k, v in entries._params.items()}
            self._ops = dict(entries._ops)
            return
        if entries is None:
            return
        if not isinstance(entries, dict):
            raise GraphError(f"payload must be a dict keyed by node id, got {type(entries).__name__}")
        for k, v in entries.items():
            self.set(k, v)

    def set(self, node_id, params, op=None) -> None:
        """Store the params of node ``node_id`` (``{"W": ..., "b": ...}`` or ``{op: {...}}``)."""
        try:
            key = int(node_id)
        except (TypeError, ValueError):
            raise GraphError(f"payload key {node_id!r} is not a node id") from None
        if isinstance(node_id, float) or (isinstance(node_id, str) and str(key) != node_id.strip()):
            raise GraphError(f"payload key {node_id!r} is not a node id")
        if not isinstance(params, dict):
            raise GraphError(f"payload entry {key}: expected a dict of named tensors, got "
                             f"{type(params).__name__}")
        if op is None and len(params) == 1:
            (tag, inner), = params.items()
            if isinstance(inner, dict):
                op, params = tag, inner
        if op is not None and not isinstance(op, str):
            raise GraphError(f"payload entry {key}: op tag must be a string, got {op!r}")
        vals = {}
        for name, v in params.items():
            if not isinstance(name, str):
                raise GraphError(f"payload entry {key}: field name {name!r} is not a string")
            vals[name] = normalize_value(v, f"payload entry {key} field {name!r}")
        self._params[key] = vals
        if op is not None:
            self._ops[key] = op
        else:
            self._ops.pop(key, None)

    def get(self, node_id):
        return self._params.get(node_id)

    def op_of(self, node_id):
        return self._ops.get(node_id)

    def ids(self) -> list:
        return sorted(self._params)

    def items(self):
        return [(k, self._params[k]) for k in self.ids()]

    def __contains__(self, node_id):
        return node_id in self._params

    def __len__(self):
        return len(self._params)

    def swapped(self, a: int, b: int) -> "Payload":
        """A copy with the entries of nodes ``a`` and ``b`` exchanged (seed variation 2)."""
        p = Payload(self)
        pa, pb = p._params.pop(a, None), p._params.pop(b, None)
        oa, ob = p._ops.pop(a, None), p._ops.pop(b, None)
        if pb is not None:
            p._params[a] = pb
        if pa is not None:
            p._params[b] = pa
        if ob is not None:
            p._ops[a] = ob
        if oa is not None:
            p._ops[b] = oa
        return p

    def converted(self, ctx, node_id) -> dict:
        """The params of ``node_id`` converted into ``ctx`` (one rounding per value)."""
        return {k: convert_value(ctx, v) for k, v in self._params.get(node_id, {}).items()}

    def __repr__(self):
        inner = ", ".join(f"{k}: {{{', '.join(f'{n}{list(value_shape(v))}' for n, v in d.items())}}}"
                          for k, d in self.items())
        return f"Payload({{{inner}}})"


def as_payload(p) -> Payload:
    if isinstance(p, Payload):
        return p
    return Payload(p)
