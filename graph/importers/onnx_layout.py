"""ONNX nodes on tensors whose batch axis a Transpose/Reshape moved or merged
(``nn.MultiheadAttention`` exports: [N, L, E] -> [L, N, E] -> [L, N*H, hd] -> [N*H, L, hd]
and back).  The IR value keeps its batch axis in front; :class:`graph.batch_layout.Layout`
records how the source tensor is a transpose/merge of it, so a source Transpose is
bookkeeping and a source Reshape is at most one IR permute + one IR reshape.

:func:`moved` maps the nodes such models use between the moves (MatMul, Gemm, the
elementwise arithmetic, Softmax, Gather, Squeeze/Unsqueeze, unary maps); any other op on a
moved tensor, and whatever the layout algebra refuses (an op along a source axis that
holds the batch axis, a reshape splitting it), is Unsupported with the reason.

Reshape targets computed from ``Shape`` hold symbolic batch extents; the layout algebra
works on sizes, so they are instantiated with a stand-in batch size :data:`STAND_IN`
(prime, so a factor merged with the batch axis is never mistaken for part of it).
"""
from __future__ import annotations

import numpy as np

from ..batch_layout import Layout
from ..errors import ShapeRuleError
from .interchange import Batched, PendingConst, Unsupported
from .onnx_fold import BatchDim
from .onnx_ops import UNARY

STAND_IN = 1009

_ELEMENTWISE = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div"}


def layout_of(conv, v: Batched) -> Layout:
    return v.layout if getattr(v, "layout", None) is not None else \
        Layout.leading(v.nb, conv.b.shape(v.id))


def wrap(conv, i, lay: Layout) -> Batched:
    """An IR node with its layout; a plain (leading) layout is a plain Batched."""
    return Batched(i, lay.nb) if lay.is_leading() else Batched(i, lay.nb, lay)


def canon(conv, v: Batched):
    """``(node id, layout)`` with the IR per-example axes in source order."""
    perm, lay = layout_of(conv, v).canonical()
    i = v.id if perm is None else conv.b.add("permute", [v.id], perm=perm)
    return i, lay


def shape_of(conv, v: Batched):
    """``Shape`` of a moved tensor: batch extents (times the per-example factors merged
    with them) as :class:`BatchDim`, the rest as ints."""
    lay = layout_of(conv, v)
    out = []
    for g in lay.groups:
        ks = [a[1] for a in g if a[0] == "b"]
        p = int(np.prod([lay.eshape[a[1]] for a in g if a[0] == "e"], dtype=np.int64))
        out.append(BatchDim(ks[0], p) if len(ks) == 1 else p if not ks else None)
    if any(t is None for t in out):
        raise Unsupported("Shape of a tensor merging two batch axes")
    arr = np.empty(len(out), dtype=object)
    arr[:] = out
    return arr if any(isinstance(t, BatchDim) for t in out) else np.asarray(out, np.int64)


def _ints(target):
    out = []
    for t in np.asarray(target).reshape(-1):
        if isinstance(t, BatchDim):
            n = t.coef * STAND_IN
            if n.denominator != 1:
                raise Unsupported(f"reshape target entry {t!r} is not a whole number")
            out.append(int(n))
        else:
            out.append(int(t))
    return out


def _const_ints(v, what):
    if not isinstance(v, PendingConst):
        raise Unsupported(f"{what} must be a constant")
    return [int(t) for t in np.asarray(v.value).reshape(-1)]


def moved(conv, node, ins, A):
    """The outputs of ``node`` when an input is a moved tensor (or a Transpose moves one)."""
    op = node.op_type
    try:
        return _moved(conv, op, node, ins, A)
    except ShapeRuleError as exc:
        raise Unsupported(str(exc)) from None


def _moved(conv, op, node, ins, A):
    b = conv.b
    x = ins[0]
    if op == "Transpose":
        lay = layout_of(conv, x)
        perm = A.get("perm", list(range(lay.rank - 1, -1, -1)))
        return [wrap(conv, x.id, lay.transpose(perm))]
    if op == "Reshape":
        if not isinstance(ins[1], PendingConst):
            raise Unsupported("shape input computed at run time")
        lay = layout_of(conv, x)
        steps, new = lay.reshape(_ints(ins[1].value), [STAND_IN] * lay.nb)
        i = x.id
        for o, attrs in steps:
            i = b.add(o, [i], **attrs)
        return [wrap(conv, i, new)]
    if op in ("Identity", "Dropout"):
        return [x]
    if op in ("Unsqueeze", "Squeeze"):
        axes = _const_ints(ins[1], "axes") if len(ins) > 1 and ins[1] is not None else \
            [int(a) for a in A.get("axes", [])]
        lay = layout_of(conv, x)
        r = lay.rank + (len(axes) if op == "Unsqueeze" else 0)
        axes = sorted(a + r if a < 0 else a for a in axes)
        src = list(lay.source_shape([STAND_IN] * lay.nb))
        if op == "Unsqueeze":
            for a in axes:
                src.insert(a, 1)
        else:
            if not axes:
                raise Unsupported("Squeeze without axes on a moved tensor")
            src = [d for k, d in enumerate(src) if k not in axes]
        steps, new = lay.reshape(src, [STAND_IN] * lay.nb)
        i = x.id
        for o, attrs in steps:
            i = b.add(o, [i], **attrs)
        return [wrap(conv, i, new)]
    if op == "Gather":
        idx = np.asarray(_const_value(ins[1], "indices"))
        lay = layout_of(conv, x)
        a = int(A.get("axis", 0))
        j = lay.axis(a, "Gather")
        y = b.add("gather", [x.id], indices=idx.astype(np.int64).tolist(), axis=j)
        if idx.ndim == 0:
            return [wrap(conv, y, lay.remove_axis(a, "Gather"))]
        if idx.ndim == 1:
            return [wrap(conv, y, lay.resize(a, idx.shape[0], "Gather"))]
        raise Unsupported("Gather with an index array of rank > 1 on a moved tensor")
    if op == "Softmax" or op == "LogSoftmax":
        lay = layout_of(conv, x)
        j = lay.axis(int(A.get("axis", -1)), op)
        return [wrap(conv, b.add("softmax" if op == "Softmax" else "log_softmax", [x.id], axis=j),
                     lay)]
    if op in _ELEMENTWISE:
        return [_binary(conv, _ELEMENTWISE[op], ins[0], ins[1])]
    if op == "MatMul":
        a, c = ins
        if isinstance(c, PendingConst):
            i, lay = canon(conv, a)
            W = np.asarray(c.value, np.float64)
            if W.ndim != 2:
                raise Unsupported(f"MatMul with a constant of rank {W.ndim} on a moved tensor")
            lay.axis(-1, "MatMul")
            y = b.add("matmul", [i, conv.b.const(W)])
            return [wrap(conv, y, lay.resize(-1, W.shape[1], "MatMul"))]
        if isinstance(a, PendingConst):
            raise Unsupported("MatMul of a constant by a moved tensor")
        pa, pc, lay = layout_of(conv, a).matmul(layout_of(conv, c))
        ia = a.id if pa is None else b.add("permute", [a.id], perm=pa)
        ic = c.id if pc is None else b.add("permute", [c.id], perm=pc)
        return [wrap(conv, b.add("matmul", [ia, ic]), lay)]
    if op == "Gemm":
        if int(A.get("transA", 0)):
            raise Unsupported("Gemm transA=1 on a moved tensor")
        B = np.asarray(_const_value(ins[1], "B"), np.float64)
        if int(A.get("transB", 0)):
            B = B.T
        alpha, beta = float(A.get("alpha", 1.0)), float(A.get("beta", 1.0))
        i, lay = canon(conv, x)
        lay.axis(-1, "Gemm")
        y = b.add("matmul", [i, conv.b.const(B)])
        lay = lay.resize(-1, B.shape[1], "Gemm")
        if alpha != 1.0:
            y = b.add("mul", [y, conv.b.const(np.float64(np.float32(alpha)))])
        out = wrap(conv, y, lay)
        if len(ins) > 2 and ins[2] is not None:
            C = np.asarray(_const_value(ins[2], "C"), np.float64)
            if beta != 1.0:
                C = C * np.float64(np.float32(beta))
            out = _binary(conv, "add", out, PendingConst(C, "C"))
        return [out]
    if op in conv.unary or op in UNARY:
        irop = conv.unary.get(op) or UNARY[op]
        return [wrap(conv, b.add(irop, [x.id]), layout_of(conv, x))]
    raise Unsupported(f"{op} on a tensor whose batch axis a Transpose/Reshape moved "
                      f"(layout {layout_of(conv, x)}): not mapped in a moved layout")


def _const_value(v, what):
    if not isinstance(v, PendingConst):
        raise Unsupported(f"{what} must be a constant on a moved tensor")
    return v.value


def _binary(conv, irop, a, c):
    b = conv.b
    if isinstance(a, PendingConst) or isinstance(c, PendingConst):
        t, k, first = (c, a, False) if isinstance(a, PendingConst) else (a, c, True)
        i, lay = canon(conv, t)
        ir_shape, to_ir = lay.const_shape(np.shape(k.value))
        kc = conv.b.const(to_ir(np.asarray(k.value, np.float64)))
        y = b.add(irop, [i, kc] if first else [kc, i])
        return wrap(conv, y, lay)
    pa, pc, lay = layout_of(conv, a).binary(layout_of(conv, c), irop)
    ia = a.id if pa is None else b.add("permute", [a.id], perm=pa)
    ic = c.id if pc is None else b.add("permute", [c.id], perm=pc)
    return wrap(conv, b.add(irop, [ia, ic]), lay)
