"""Constant folding for the ONNX importer: shape arithmetic becomes constants.

Exporters compute reshape targets at run time: ``x.view(x.size(0), -1)`` becomes
``Shape -> Gather -> Unsqueeze -> Concat -> Reshape``, attention blocks read head counts
and sizes off ``Shape`` and scale by ``Sqrt(Cast(...))``.  The IR has fixed per-example
shapes, so every such value is known at import time except the batch extents.  This
module evaluates those subgraphs:

* :class:`BatchDim` is the extent of batch axis ``k`` (times a rational factor, so
  ``N * heads`` and ``N*heads / heads`` stay exact); ``Shape`` of a batched tensor is an
  object array holding them in front of the per-example extents;
* :func:`fold_symbolic` runs the data-movement and integer ops on such arrays (Gather,
  Slice, Concat, Unsqueeze, Squeeze, Reshape, Identity, Cast, Mul/Div/Add/Sub, Equal, Where);
* :func:`fold_constant` evaluates a node whose inputs are all constants with onnx's
  reference evaluator, but only where that is exact: integer/boolean computations (shapes,
  indices) and pure data movement.  Float arithmetic on constants stays in the graph, so
  each scalar context evaluates it in its own arithmetic.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from .interchange import Unsupported


class BatchDim:
    """The extent of batch axis ``k`` times ``coef`` (a Fraction)."""

    __slots__ = ("k", "coef")

    def __init__(self, k: int, coef=Fraction(1)):
        self.k = k
        self.coef = Fraction(coef)

    def __repr__(self):
        return f"N{self.k}" if self.coef == 1 else f"{self.coef}*N{self.k}"

    def __eq__(self, other):
        return isinstance(other, BatchDim) and (self.k, self.coef) == (other.k, other.coef)

    def __hash__(self):
        return hash((self.k, self.coef))

    def scaled(self, f) -> "BatchDim":
        return BatchDim(self.k, self.coef * Fraction(f))


def is_symbolic(a) -> bool:
    return isinstance(a, np.ndarray) and a.dtype == object and \
        any(isinstance(t, BatchDim) for t in a.reshape(-1))


def shape_value(batch_axes: int, per_example, start=0, end=None):
    """``Shape`` of a tensor with ``batch_axes`` batch axes: an object array of
    :class:`BatchDim` and ints, sliced as ONNX's ``start``/``end`` say."""
    full = [BatchDim(k) for k in range(batch_axes)] + [int(d) for d in per_example]
    full = full[slice(start, end)]
    if not any(isinstance(t, BatchDim) for t in full):
        return np.asarray(full, dtype=np.int64)
    out = np.empty(len(full), dtype=object)
    out[:] = full
    return out


# ops that only move, select or retype data: folding them is exact whatever the dtype
MOVE_OPS = {"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Gather", "Slice", "Concat",
            "Identity", "Cast", "Expand", "Flatten", "Tile", "ConstantOfShape", "Shape", "Size",
            "Range", "Split", "Equal", "Where", "Not", "And", "Or", "Less", "Greater",
            "LessOrEqual", "GreaterOrEqual", "Xor", "Trilu"}


def fold_constant(onnx, node, values, opset):
    """Outputs of ``node`` from constant inputs (numpy arrays, ``None`` for absent ones),
    or ``None`` when folding would change the meaning of a float computation."""
    present = [v for v in values if v is not None]
    floats = [v for v in present if np.asarray(v).dtype.kind == "f"]
    if node.op_type not in MOVE_OPS and floats:
        return None
    if node.op_type in ("Cast", "CastLike") and floats:
        return None      # a float rounding: the graph keeps it (no IR cast today)
    from onnx import helper
    from onnx.reference import ReferenceEvaluator
    names = [f"i{k}" if v is not None else "" for k, v in enumerate(values)]
    n = helper.make_node(node.op_type, names, [f"o{k}" for k in range(len(node.output))])
    n.attribute.extend(node.attribute)
    ins = [helper.make_tensor_value_info(nm, helper.np_dtype_to_tensor_dtype(np.asarray(v).dtype),
                                         list(np.asarray(v).shape))
           for nm, v in zip(names, values) if v is not None]
    outs = [helper.make_tensor_value_info(o, 0, None) for o in n.output]
    g = helper.make_graph([n], "fold", ins, outs)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    try:
        res = ReferenceEvaluator(model).run(
            None, {nm: np.asarray(v) for nm, v in zip(names, values) if v is not None})
    except Exception as exc:   # the reference evaluator's own message names the problem
        raise Unsupported(f"constant folding failed: {type(exc).__name__}: {exc}") from None
    return [np.asarray(r) for r in res]


def _ints(a):
    flat = list(np.asarray(a).reshape(-1))
    if any(isinstance(t, BatchDim) for t in flat):
        raise Unsupported(f"uses the batch extent in {flat} as an index, axis or shape "
                          f"(the IR works per example)")
    return [int(t) for t in flat]


def _obj(seq, shape=None):
    out = np.empty(len(seq), dtype=object)
    out[:] = list(seq)
    out = out.reshape(shape) if shape is not None else out
    return out if any(isinstance(t, BatchDim) for t in out.reshape(-1)) else \
        np.asarray(out.tolist(), dtype=np.int64)


def _arith(op, a, b):
    if isinstance(a, BatchDim) and isinstance(b, BatchDim):
        if op == "Div" and a.k == b.k:
            return int(a.coef / b.coef) if (a.coef / b.coef).denominator == 1 else None
        return None
    if isinstance(b, BatchDim):
        if op == "Mul":
            return b.scaled(a)
        return None
    if isinstance(a, BatchDim):
        if op == "Mul":
            return a.scaled(b)
        if op == "Div" and b:
            return a.scaled(Fraction(1, int(b)))
        return None
    a, b = int(a), int(b)
    return {"Mul": a * b, "Add": a + b, "Sub": a - b,
            "Div": (a // b if b else None), "Mod": (a % b if b else None)}[op]


def fold_symbolic(op, A, values):
    """``op`` over inputs some of which hold :class:`BatchDim` entries; the result array
    (object dtype while a batch extent remains), or Unsupported naming why not."""
    x = values[0]
    if op in ("Identity", "Cast"):
        if op == "Cast" and A.get("to") not in (6, 7):        # int32, int64
            raise Unsupported("casts a batch extent to a non-integer type (the IR works "
                              "per example and cannot use N as a number)")
        return x
    if op == "Gather":
        idx = np.asarray(values[1])
        axis = int(A.get("axis", 0))
        if axis != 0 or x.ndim != 1:
            raise Unsupported("Gather on a shape value of rank > 1")
        n = x.shape[0]
        flat = [x[int(i) + n if int(i) < 0 else int(i)] for i in idx.reshape(-1)]
        r = _obj(flat, idx.shape)
        return r
    if op == "Unsqueeze":
        axes = _ints(values[1]) if len(values) > 1 and values[1] is not None else _ints(A["axes"])
        out = x
        for a in sorted(a + x.ndim + len(axes) if a < 0 else a for a in axes):
            out = np.expand_dims(out, a)
        return out
    if op == "Squeeze":
        axes = _ints(values[1]) if len(values) > 1 and values[1] is not None else \
            _ints(A.get("axes", [])) or [i for i, d in enumerate(x.shape) if d == 1]
        return np.squeeze(x, axis=tuple(a + x.ndim if a < 0 else a for a in axes))
    if op == "Concat":
        parts = [np.asarray(v).astype(object) if not is_symbolic(v) else v for v in values]
        r = np.concatenate([np.atleast_1d(p) for p in parts], axis=int(A.get("axis", 0)))
        return _obj(r.reshape(-1).tolist(), r.shape)
    if op == "Slice":
        starts, ends = _ints(values[1]), _ints(values[2])
        axes = _ints(values[3]) if len(values) > 3 and values[3] is not None else list(range(len(starts)))
        steps = _ints(values[4]) if len(values) > 4 and values[4] is not None else [1] * len(starts)
        sl = [slice(None)] * x.ndim
        for s, e, a, st in zip(starts, ends, axes, steps):
            sl[a] = slice(s, e, st)
        r = x[tuple(sl)]
        return _obj(r.reshape(-1).tolist(), r.shape)
    if op == "Reshape":
        shape = _ints(values[1])
        r = x.reshape([x.shape[i] if s == 0 else s for i, s in enumerate(shape)])
        return _obj(r.reshape(-1).tolist(), r.shape)
    if op in ("Mul", "Div", "Add", "Sub", "Mod"):
        a, b = np.broadcast_arrays(np.asarray(values[0], dtype=object),
                                   np.asarray(values[1], dtype=object))
        res = [_arith(op, s, t) for s, t in zip(a.reshape(-1), b.reshape(-1))]
        if any(r is None for r in res):
            raise Unsupported(f"{op} of a batch extent the IR cannot express (it works per "
                              f"example)")
        return _obj(res, a.shape)
    if op == "Equal":
        a, b = np.broadcast_arrays(np.asarray(values[0], dtype=object),
                                   np.asarray(values[1], dtype=object))
        res = []
        for s, t in zip(a.reshape(-1), b.reshape(-1)):
            if isinstance(s, BatchDim) == isinstance(t, BatchDim):
                res.append(bool(s == t))
                continue
            lit = t if isinstance(s, BatchDim) else s
            # a batch extent is >= 1: only a comparison with 0 or -1 is decided
            if int(lit) > 0:
                raise Unsupported(f"compares a batch extent with {int(lit)} (the IR works "
                                  f"per example)")
            res.append(False)
        return np.asarray(res, dtype=bool).reshape(a.shape)
    if op == "Where":
        c = np.asarray(values[0], dtype=bool)
        a, b = np.asarray(values[1], dtype=object), np.asarray(values[2], dtype=object)
        c, a, b = np.broadcast_arrays(c, a, b)
        r = [s if cc else t for cc, s, t in zip(c.reshape(-1), a.reshape(-1), b.reshape(-1))]
        return _obj(r, c.shape)
    raise Unsupported(f"{op} of a shape value holding a batch extent (the IR works per "
                      f"example)")
