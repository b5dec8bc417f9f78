"""Named parameter exchange: a PyTorch ``state_dict`` <-> an IR payload, by name.

A names map ``{state_dict_key: (node_id, param)}`` (what :func:`import_torch` returns, or
written by hand for a graph built elsewhere) ties each key to one payload field.  Loading a
checkpoint replaces those fields and keeps the rest of a base payload (eps values, Python
constants), so the node array is never rebuilt.  A missing, extra or mis-shaped tensor is a
:class:`GraphError` naming the key, the node and both shapes.
"""
from __future__ import annotations

import numpy as np

from ..errors import GraphError
from ..node import Graph, fmt_shape
from ..optable import OPS
from ..payload import Payload
from ..validate import check_payload, check_shapes
from .interchange import Unsupported, param_shape, payload_field, require


def _expected(g: Graph, node_id: int, param: str, key: str) -> tuple:
    if not isinstance(node_id, int) or not 0 <= node_id < len(g.nodes):
        raise GraphError(f"state_dict: name {key!r} maps to node {node_id!r}, not a node id "
                         f"(graph has {len(g.nodes)} nodes)")
    n = g.nodes[node_id]
    rec = OPS[n.kind.op]
    if param not in rec.params:
        raise GraphError(f"state_dict: name {key!r} maps to {n.kind.op} {node_id} field "
                         f"{param!r}; the op's payload fields are {', '.join(rec.params) or 'none'}")
    return param_shape(g, n, param)


def _check_names(g: Graph, names: dict) -> dict:
    check_shapes(g)
    if not isinstance(names, dict):
        raise GraphError(f"state_dict: names map must be a dict, got {type(names).__name__}")
    seen = {}
    out = {}
    for key, target in names.items():
        if not (isinstance(target, (tuple, list)) and len(target) == 2):
            raise GraphError(f"state_dict: name {key!r} must map to (node_id, param), got {target!r}")
        node_id, param = int(target[0]), target[1]
        if (node_id, param) in seen:
            raise GraphError(f"state_dict: names {seen[(node_id, param)]!r} and {key!r} both "
                             f"map to node {node_id} field {param!r}")
        seen[(node_id, param)] = key
        out[key] = (node_id, param, _expected(g, node_id, param, key))
    return out


def _to_array(v, key):
    if hasattr(v, "detach"):            # a torch tensor (no torch import needed)
        return v.detach().cpu().double().numpy().copy()
    try:
        a = np.asarray(v)
    except Exception:
        raise GraphError(f"state_dict: entry {key!r} is not a tensor") from None
    if a.dtype.kind not in "fiu":
        raise GraphError(f"state_dict: entry {key!r} has dtype {a.dtype}, not a number array")
    return a.astype(np.float64)


def payload_from_state_dict(g: Graph, names: dict, state_dict, *, base=None,
                            ignore=()) -> Payload:
    """The payload of ``g`` with every named field read from ``state_dict``.

    ``base``: a payload whose other fields (eps, constants) are kept.  ``ignore``: keys
    that may be present without an IR use (BatchNorm ``num_batches_tracked``).  A key of
    ``names`` absent from ``state_dict``, a key of ``state_dict`` absent from ``names``
    (and not ignored), or a tensor of the wrong shape raises GraphError naming it.
    """
    plan = _check_names(g, names)
    keys = list(state_dict.keys())
    missing = [k for k in plan if k not in state_dict]
    extra = [k for k in keys if k not in plan and k not in set(ignore)]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing {', '.join(repr(k) for k in missing)}")
        if extra:
            parts.append(f"unexpected {', '.join(repr(k) for k in extra)}")
        raise GraphError(f"state_dict does not match the graph's names: {'; '.join(parts)}")
    p = Payload(base) if base is not None else Payload()
    per_node: dict = {}
    for key, (node_id, param, shape) in plan.items():
        a = _to_array(state_dict[key], key)
        if tuple(a.shape) != shape:
            op = g.nodes[node_id].kind.op
            raise GraphError(f"state_dict: entry {key!r} ({op} {node_id} field {param!r}) has "
                             f"shape {fmt_shape(a.shape)}, expected {fmt_shape(shape)}")
        per_node.setdefault(node_id, {})[param] = a
    for node_id, fields in per_node.items():
        merged = dict(p.get(node_id) or {})
        merged.update(fields)
        p.set(node_id, merged, op=g.nodes[node_id].kind.op)
    check_payload(g, p)
    return p


def state_dict_from_payload(g: Graph, payload, names: dict, *, dtype=None, numpy: bool = False):
    """``{key: tensor}`` for every name (torch tensors of ``dtype``, default float32; or
    float64 numpy arrays with ``numpy=True``).  Payload entries in exact forms (decimal
    strings, rationals) are read with ONE correct rounding to float64; an omitted optional
    field (e.g. a zero bias) is written as its default.  A field absent without a default
    raises GraphError naming it."""
    from scalarlab import scalars
    f64 = scalars.get("float64")
    plan = _check_names(g, names)
    payload = payload if isinstance(payload, Payload) else Payload(payload)
    check_payload(g, payload)
    out = {}
    for key, (node_id, param, _) in plan.items():
        try:
            out[key] = payload_field(g, payload, g.nodes[node_id], param, f64)
        except Unsupported as exc:
            raise GraphError(f"state_dict: {exc} (name {key!r})") from None
    if numpy:
        return out
    torch = require("torch", "torch")
    dt = torch.float32 if dtype is None else dtype
    return {k: torch.as_tensor(v).to(dt) for k, v in out.items()}
