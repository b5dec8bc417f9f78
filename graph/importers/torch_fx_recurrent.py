"""torch.fx -> IR: ``nn.LSTM``, ``nn.GRU`` and ``nn.RNN`` unrolled over the concrete
sequence length, through the ONNX side's unrolling (:mod:`.onnx_ops_recurrent`).

Each layer's torch weights are rewritten in ONNX's layout (gate order: LSTM ``i f g o``
-> ``i o f c``, GRU ``r z n`` -> ``z r h`` with ``linear_before_reset=1``, which is how
torch's GRU applies the reset gate) and the layers are chained, so the gates are computed
in the context's arithmetic exactly as the ONNX import does.  Forward and bidirectional,
any number of layers, ``batch_first``, initial states (constants or inputs); the module's
output and its final states ``(h_n[, c_n])`` are mapped.  An input with the lab's batch
axis is one sequence per example (``batch_first``: per-example ``[T, F]``); its final
states, whose batch axis torch puts second, are then not mapped.  ``proj_size``, RNN's
``relu`` and training-mode dropout are refused."""
from __future__ import annotations

import types

import numpy as np

from .interchange import Batched, PendingConst, Unsupported
from .torch_fx_spatial import _Shim
from . import onnx_ops_recurrent as R

# torch's gate blocks -> ONNX's order (indices of torch's blocks)
_ORDER = {"LSTM": [0, 3, 1, 2], "GRU": [1, 0, 2], "RNN": [0]}


def _np(t):
    return t.detach().cpu().double().numpy()


def _reorder(w, cell, H):
    blocks = [w[k * H:(k + 1) * H] for k in range(len(_ORDER[cell]))]
    return np.concatenate([blocks[k] for k in _ORDER[cell]], axis=0)


def _layer_weights(m, cell, layer, dirs, H):
    W, Rr, B = [], [], []
    for d in range(dirs):
        sfx = f"_l{layer}" + ("_reverse" if d else "")
        wi, wh = _np(getattr(m, "weight_ih" + sfx)), _np(getattr(m, "weight_hh" + sfx))
        G = wi.shape[0] // H
        bi = _np(getattr(m, "bias_ih" + sfx)) if m.bias else np.zeros(G * H)
        bh = _np(getattr(m, "bias_hh" + sfx)) if m.bias else np.zeros(G * H)
        W.append(_reorder(wi, cell, H))
        Rr.append(_reorder(wh, cell, H))
        B.append(np.concatenate([_reorder(bi, cell, H), _reorder(bh, cell, H)]))
    return np.stack(W), np.stack(Rr), np.stack(B)


def _state_slice(conv, v, lo, hi, what):
    """Layer rows ``lo:hi`` of an initial state [L*dirs, batch, H] (a constant or a
    run-time value without the lab's batch axis)."""
    if v is None:
        return None
    if isinstance(v, PendingConst):
        return PendingConst(np.asarray(_np(v.value) if hasattr(v.value, "detach") else
                                       v.value, np.float64)[lo:hi], what)
    x = conv.tensor(v)
    if x.nb:
        raise Unsupported(f"{what} with the lab's batch axis (torch puts the batch second)")
    return conv.b.apply("slice", [x], starts=[lo], ends=[hi], axes=[0])


def m_recurrent(conv, n, env, m):
    cell = type(m).__name__
    if cell not in _ORDER:
        raise Unsupported(f"{cell} (LSTM, GRU and RNN are mapped)")
    if getattr(m, "proj_size", 0):
        raise Unsupported(f"proj_size={m.proj_size}")
    if cell == "RNN" and m.nonlinearity != "tanh":
        raise Unsupported(f"nonlinearity={m.nonlinearity!r} (tanh is mapped)")
    if m.training and m.dropout:
        raise Unsupported("dropout between layers in training mode (call .eval())")
    x = conv.tensor(conv.arg(n, env, 0, "input"))
    hx = conv.arg(n, env, 1, "hx")
    h0, c0 = (hx if isinstance(hx, tuple) else (hx, None)) if hx is not None else (None, None)
    s = list(conv.b.shape(x.id))
    H, L = m.hidden_size, m.num_layers
    dirs = 2 if m.bidirectional else 1
    per_example = x.nb == 1
    if per_example:
        if not m.batch_first or len(s) != 2:
            raise Unsupported("the lab's batch axis in front of a sequence-major input "
                              "(batch_first=False): import with batch_dims=0")
        T = s[0]
        # one sequence per example: [T, F] -> [T, 1, F], seq-major
        v = conv.b.apply("reshape", [x], shape=[T, 1, s[1]])
        Bm = 1
    elif x.nb == 0 and len(s) == 3:
        if m.batch_first:                       # [B, T, F] -> seq-major [T, B, F]
            v = conv.b.apply("permute", [x], perm=[1, 0, 2])
            Bm, T = s[0], s[1]
        else:
            v = x
            T, Bm = s[0], s[1]
    else:
        raise Unsupported(f"{cell} input of per-example shape {s} with {x.nb} batch axes "
                          f"(a batched [N, T, F] / [T, N, F] input)")
    node = types.SimpleNamespace(op_type=cell, output=["y", "h", "c"] if cell == "LSTM"
                                 else ["y", "h"])
    shim = _Shim(conv)
    hs, cs = [], []
    for layer in range(L):
        W, Rr, B = _layer_weights(m, cell, layer, dirs, H)
        ins = [Batched(v.id, 0),
               PendingConst(W, f"{n.target}.weight_ih_l{layer}"),
               PendingConst(Rr, f"{n.target}.weight_hh_l{layer}"),
               PendingConst(B, f"{n.target}.bias_l{layer}"), None,
               _state_slice(conv, h0, layer * dirs, (layer + 1) * dirs, "h0"),
               _state_slice(conv, c0, layer * dirs, (layer + 1) * dirs, "c0")]
        A = {"hidden_size": H, "direction": "bidirectional" if dirs == 2 else "forward"}
        if cell == "GRU":
            A["linear_before_reset"] = 1
        outs = R._recurrent(shim, node, ins, A)
        y = outs[0]                                        # [T, dirs, Bm, H]
        v = conv.b.apply("reshape", [conv.b.apply("permute", [y], perm=[0, 2, 1, 3])],
                         shape=[T, Bm, dirs * H])          # the next layer's input
        hs.append(outs[1])
        if cell == "LSTM":
            cs.append(outs[2])
    if per_example:
        out = Batched(conv.b.apply("reshape", [v], shape=[T, dirs * H]).id, 1)
        from .torch_fx_ops import Refused
        why = "the final states of a per-example sequence (torch puts their batch second)"
        states = Refused(why) if cell != "LSTM" else (Refused(why), Refused(why))
        return (out, states)
    out = conv.b.apply("permute", [v], perm=[1, 0, 2]) if m.batch_first else v
    h = hs[0] if L == 1 else conv.b.apply("concat", hs, axis=0)
    if cell != "LSTM":
        return (out, h)
    c = cs[0] if L == 1 else conv.b.apply("concat", cs, axis=0)
    return (out, (h, c))


def tables(torch):
    """``(functions, methods, modules)`` as :func:`.torch_fx_ops.tables`."""
    nn = torch.nn
    return {}, {}, {nn.LSTM: m_recurrent, nn.GRU: m_recurrent, nn.RNN: m_recurrent}
