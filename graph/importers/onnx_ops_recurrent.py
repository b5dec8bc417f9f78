"""ONNX LSTM, GRU and RNN as IR ops, unrolled over the concrete sequence length.

With concrete shapes the sequence length is known at import, so each time step is a few
IR nodes: ``linear`` for the input and the recurrent products (bias folded in, one
rounding per operation in the context's arithmetic), gate slices, ``sigmoid``/``tanh``,
and the state update written as ONNX states it (``C = f * C' + i * g``, ``H = o *
tanh(C)``; GRU's ``H = (1 - z) * h + z * H'``).  Forward, reverse and bidirectional
directions, initial states, full-length ``sequence_lens``, LSTM peepholes and both
layouts are mapped; the default activations only, no clipping; the input must carry no
batch axis of the lab's (concrete shapes: ``scalarlab import --shape``).
"""
from __future__ import annotations

import numpy as np

from .interchange import Batched, PendingConst, Unsupported
from .onnx_ops import const_value, opt_input

_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
_DEFAULT_ACTS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"],
                 "RNN": ["Tanh"]}


def _linear(conv, v, W, b):
    s = conv.b.shape(v.id)
    return Batched(conv.b.add("linear", [v.id], out_shape=tuple(s[:-1]) + (W.shape[0],),
                              params={"W": W, "b": b}), v.nb)


def _gate(conv, v, k, H):
    """Gate ``k`` (columns ``k*H:(k+1)*H``) of a [batch, G*H] value."""
    return conv.b.apply("slice", [v], starts=[k * H], ends=[(k + 1) * H], axes=[1])


def _state0(conv, ins, k, d, Bm, H, what, layout=0):
    """Direction ``d``'s initial state [batch, H] ([dirs, batch, H], or [batch, dirs, H]
    with layout=1), None when absent."""
    v = opt_input(ins, k)
    if v is None:
        return None
    if isinstance(v, PendingConst):
        val = np.asarray(const_value(v, what), np.float64)
        return conv.materialize(PendingConst(val[:, d] if layout else val[d], what))
    x = conv.t(v)
    y = conv.b.apply("slice", [x], starts=[d], ends=[d + 1], axes=[1 if layout else 0])
    return conv.b.apply("reshape", [y], shape=[Bm, H])


def _recurrent(conv, node, ins, A):
    op = node.op_type
    x = conv.t(ins[0])
    if x.nb:
        raise Unsupported(f"{op} over a tensor with the lab's batch axis in front (its batch "
                          f"is axis 1): import with concrete shapes (--shape)")
    for key in ("clip", "input_forget"):
        if key in A and (key != "input_forget" or int(A[key])):
            raise Unsupported(f"{key}={A[key]}")
    layout = int(A.get("layout", 0))
    if layout:
        # batch-major [batch, seq, ...]: the same steps on the seq-major transpose
        x = conv.b.apply("permute", [x], perm=[1, 0, 2])
    acts = [a.decode() if isinstance(a, bytes) else a for a in A.get("activations", [])]
    ndir = 2 if A.get("direction", "forward") == "bidirectional" else 1
    if acts and acts != _DEFAULT_ACTS[op] * ndir:
        raise Unsupported(f"activations {acts} (the defaults are mapped)")
    P = opt_input(ins, 7) if op == "LSTM" else None
    if P is not None:
        P = np.asarray(const_value(P, "P"), np.float64)
    T, Bm, _ = conv.b.shape(x.id)
    W = np.asarray(const_value(ins[1], "W"), np.float64)
    R = np.asarray(const_value(ins[2], "R"), np.float64)
    G = _GATES[op]
    H = int(A.get("hidden_size", R.shape[-1]))
    B = opt_input(ins, 3)
    B = np.zeros((ndir, 2 * G * H)) if B is None else np.asarray(const_value(B, "B"), np.float64)
    lens = opt_input(ins, 4)
    if lens is not None:
        if not isinstance(lens, PendingConst):
            raise Unsupported("sequence_lens computed at run time")
        if np.any(np.asarray(lens.value) != T):
            raise Unsupported(f"sequence_lens {np.asarray(lens.value).tolist()} shorter than "
                              f"the sequence ({T}): padded steps are not mapped")
    lbr = int(A.get("linear_before_reset", 0))
    steps = [conv.b.apply("reshape", [conv.b.apply("slice", [x], starts=[t], ends=[t + 1],
                                                    axes=[0])], shape=[Bm, W.shape[-1]])
             for t in range(T)]
    direction = A.get("direction", "forward")
    ys, hs, cs = [], [], []
    for d in range(ndir):
        reverse = direction == "reverse" or d == 1
        order = range(T - 1, -1, -1) if reverse else range(T)
        Wb, Rb = B[d, :G * H], B[d, G * H:]
        h = _state0(conv, ins, 5, d, Bm, H, "initial_h", layout)
        c = _state0(conv, ins, 6, d, Bm, H, "initial_c", layout) if op == "LSTM" else None
        if h is None:
            h = conv.materialize(PendingConst(np.zeros((Bm, H)), "initial_h"))
        if op == "LSTM" and c is None:
            c = conv.materialize(PendingConst(np.zeros((Bm, H)), "initial_c"))
        out = [None] * T
        for t in order:
            gx = _linear(conv, steps[t], W[d], Wb)
            if op == "GRU":
                h = _gru_step(conv, gx, h, R[d], Rb, H, lbr)
            else:
                g = conv.b.apply("add", [gx, _linear(conv, h, R[d], Rb)])
                if op == "RNN":
                    h = conv.b.apply("tanh", [g])
                else:
                    i, o, f, cc = (_gate(conv, g, k, H) for k in range(4))
                    if P is not None:     # peepholes: i, f see C', o sees the new C
                        i = conv.b.apply("add", [i, _peep(conv, P[d, :H], c)])
                        f = conv.b.apply("add", [f, _peep(conv, P[d, 2 * H:], c)])
                    i, f = (conv.b.apply("sigmoid", [v]) for v in (i, f))
                    cc = conv.b.apply("tanh", [cc])
                    c = conv.b.apply("add", [conv.b.apply("mul", [f, c]),
                                             conv.b.apply("mul", [i, cc])])
                    if P is not None:
                        o = conv.b.apply("add", [o, _peep(conv, P[d, H:2 * H], c)])
                    o = conv.b.apply("sigmoid", [o])
                    h = conv.b.apply("mul", [o, conv.b.apply("tanh", [c])])
            out[t] = h
        ys.append(out)
        hs.append(h)
        cs.append(c)
    results = []
    for k, name in enumerate(node.output):
        if not name:
            results.append(None)
            continue
        if k == 0:       # Y: [T, dirs, batch, H] ([batch, T, dirs, H] with layout=1)
            per_t = [_stack(conv, [ys[d][t] for d in range(ndir)]) for t in range(T)]
            y = _stack(conv, per_t)
            results.append(conv.b.apply("permute", [y], perm=[2, 0, 1, 3]) if layout else y)
        else:            # Y_h / Y_c: [dirs, batch, H] ([batch, dirs, H] with layout=1)
            y = _stack(conv, hs if k == 1 else cs)
            results.append(conv.b.apply("permute", [y], perm=[1, 0, 2]) if layout else y)
    return results


def _peep(conv, p, c):
    return conv.b.apply("mul", [c, conv.materialize(PendingConst(p, "P"))])


def _stack(conv, parts):
    """Values of equal shape stacked along a new leading axis."""
    ups = [conv.b.apply("unsqueeze", [p], axes=[0]) for p in parts]
    return ups[0] if len(ups) == 1 else conv.b.apply("concat", ups, axis=0)


def _gru_step(conv, gx, h, R, Rb, H, lbr):
    one = conv.materialize(PendingConst(np.float64(1.0), "one"))
    Rzr, Rh = R[:2 * H], R[2 * H:]
    gh = _linear(conv, h, Rzr, Rb[:2 * H])
    z = conv.b.apply("sigmoid", [conv.b.apply("add", [_gate(conv, gx, 0, H),
                                                      _gate(conv, gh, 0, H)])])
    r = conv.b.apply("sigmoid", [conv.b.apply("add", [_gate(conv, gx, 1, H),
                                                      _gate(conv, gh, 1, H)])])
    if lbr:
        hh = conv.b.apply("mul", [r, _linear(conv, h, Rh, Rb[2 * H:])])
    else:
        hh = _linear(conv, conv.b.apply("mul", [r, h]), Rh, Rb[2 * H:])
    n = conv.b.apply("tanh", [conv.b.apply("add", [_gate(conv, gx, 2, H), hh])])
    return conv.b.apply("add", [conv.b.apply("mul", [conv.b.apply("sub", [one, z]), n]),
                                conv.b.apply("mul", [z, h])])


CONVERTERS = {"LSTM": _recurrent, "GRU": _recurrent, "RNN": _recurrent}
#: their extra outputs (Y_h, Y_c) are mapped
ALL_OUTPUTS = tuple(CONVERTERS)
