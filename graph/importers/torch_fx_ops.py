"""torch.fx -> IR mappings of the network ops: activations (ReLU6/Hardtanh, Hardswish,
Hardsigmoid, LeakyReLU, ELU, SELU, SiLU, Mish, tanh-GELU), rsqrt/erf/clamp, adaptive
pooling to 1 (global pools), amax/amin/prod, tensor indexing (``x[..., :8]``, ints,
``None``), ``chunk``/``split``, and ``nn.MultiheadAttention`` composed per example.

Each mapping is ``f(conv, n, env, m=None) -> value`` where ``conv`` is the converter of
:mod:`.torch_fx`; :func:`tables` gives the mapping of each FX target (functions, methods,
modules), which the converter merges over its own core rules.  A mapping is listed only
while its IR ops exist in the op table.
"""
from __future__ import annotations

import math

import numpy as np

from ..optable import OPS
from ..ops_shape import split_slices
from .interchange import Batched, Unsupported


class Refused:
    """A result the importer does not produce (MHA's attention weights); using it is an
    Unsupported naming why."""

    def __init__(self, why):
        self.why = why


def _x(conv, n, env, i=0, name="input"):
    return conv.tensor(conv.arg(n, env, i, name))


def _clip(conv, n, x, lo, hi):
    return conv.emit(n, "clip", [x], min=None if lo is None else float(lo),
                     max=None if hi is None else float(hi))


# ------------------------------------------------------------------ activations
def f_relu6(conv, n, env, m=None):
    return _clip(conv, n, _x(conv, n, env), 0.0, 6.0)


def f_hardtanh(conv, n, env, m=None):
    if m is not None:
        lo, hi = m.min_val, m.max_val
    else:
        lo, hi = conv.arg(n, env, 1, "min_val", -1.0), conv.arg(n, env, 2, "max_val", 1.0)
    return _clip(conv, n, _x(conv, n, env), lo, hi)


def f_clamp(conv, n, env, m=None):
    lo, hi = conv.arg(n, env, 1, "min"), conv.arg(n, env, 2, "max")
    for v in (lo, hi):
        if v is not None and not isinstance(v, (int, float)):
            raise Unsupported("clamp with tensor bounds (give numbers)")
    return _clip(conv, n, _x(conv, n, env), lo, hi)


def _simple(irop):
    def f(conv, n, env, m=None):
        return conv.emit(n, irop, [_x(conv, n, env)])
    f.needs = (irop,)
    return f


def f_hardsigmoid(conv, n, env, m=None):
    # torch: relu6(x + 3) / 6 = max(0, min(1, x/6 + 1/2)): alpha = 1/6 exactly
    return conv.emit(n, "hardsigmoid", [_x(conv, n, env)], alpha="1/6", beta="1/2")


def f_leaky_relu(conv, n, env, m=None):
    a = m.negative_slope if m is not None else conv.arg(n, env, 1, "negative_slope", 0.01)
    return conv.emit(n, "leaky_relu", [_x(conv, n, env)], alpha=float(a))


def f_elu(conv, n, env, m=None):
    a = m.alpha if m is not None else conv.arg(n, env, 1, "alpha", 1.0)
    return conv.emit(n, "elu", [_x(conv, n, env)], alpha=float(a))


def f_gelu_any(conv, n, env, m=None):
    approx = m.approximate if m is not None else conv.arg(n, env, 1, "approximate", "none")
    if approx == "tanh":
        return conv.emit(n, "gelu_tanh", [_x(conv, n, env)])
    if approx != "none":
        raise Unsupported(f"gelu(approximate={approx!r})")
    return conv.emit(n, "gelu", [_x(conv, n, env)])


def f_rsqrt(conv, n, env, m=None):
    x = _x(conv, n, env)
    s = conv.b.apply("sqrt", [x])
    one = Batched(conv.b.const(1.0), 0)
    return conv.emit(n, "div", [one, s])


# ------------------------------------------------------------------ pooling
def _one(out):
    return out in (1, (1, 1), [1, 1], (1,), [1], (1, 1, 1), [1, 1, 1])


def f_adaptive_avg(conv, n, env, m=None):
    size = m.output_size if m is not None else conv.arg(n, env, 1, "output_size")
    if not _one(size):
        raise Unsupported(f"adaptive pooling to {size} (only to 1: the global pool)")
    return conv.emit(n, "global_avg_pool", [_x(conv, n, env)])


def f_adaptive_max(conv, n, env, m=None):
    size = m.output_size if m is not None else conv.arg(n, env, 1, "output_size")
    if not _one(size) or (m is not None and m.return_indices):
        raise Unsupported(f"adaptive max pooling to {size} (only to 1, without indices)")
    return conv.emit(n, "global_max_pool", [_x(conv, n, env)])


# ------------------------------------------------------------------ reductions
def _reduce(irop):
    def f(conv, n, env, m=None):
        x = _x(conv, n, env)
        dim = conv.arg(n, env, 1, "dim")
        keep = bool(conv.arg(n, env, 2, "keepdim", False))
        if dim is None or dim == [] or dim == ():
            if x.nb:
                raise Unsupported("reduces over all axes, batch axes included (give dim=)")
            return conv.emit(n, irop, [x], keepdims=keep)
        dims = dim if isinstance(dim, (list, tuple)) else [dim]
        per = sorted(conv.axis(d, x) for d in dims)
        return conv.emit(n, irop, [x], axis=per, keepdims=keep)
    f.needs = (irop,)
    return f


# ------------------------------------------------------------------ chunk / split
def f_chunk(conv, n, env, m=None):
    x = _x(conv, n, env)
    k = conv.arg(n, env, 1, "chunks")
    a = conv.axis(conv.arg(n, env, 2, "dim", 0), x)
    parts = split_slices(conv.b.shape(x.id), a, num_outputs=int(k))
    parts = [p for p in parts if p["ends"][0] > p["starts"][0]]     # torch drops empty ones
    return tuple(conv.b.apply("slice", [x], **p) for p in parts)


def f_split(conv, n, env, m=None):
    x = _x(conv, n, env)
    size = conv.arg(n, env, 1, "split_size_or_sections")
    a = conv.axis(conv.arg(n, env, 2, "dim", 0), x)
    length = conv.b.shape(x.id)[a]
    if isinstance(size, int):
        sizes = [min(size, length - i) for i in range(0, length, size)]
    else:
        sizes = [int(s) for s in size]
    return tuple(conv.b.apply("slice", [x], **p)
                 for p in split_slices(conv.b.shape(x.id), a, split=sizes))


# ------------------------------------------------------------------ indexing
def getitem_tensor(conv, n, x: Batched, idx):
    """``x[idx]`` for ints, slices, ``None`` and one ``...``: slice, then squeeze the int
    axes, then unsqueeze the ``None`` ones; batch axes must be taken whole."""
    idx = idx if isinstance(idx, tuple) else (idx,)
    if sum(i is Ellipsis for i in idx) > 1:
        raise Unsupported("more than one ... in an index")
    r = conv.b.rank(x)
    used = sum(1 for i in idx if i is not None and i is not Ellipsis)
    if Ellipsis in idx:
        k = idx.index(Ellipsis)
        idx = idx[:k] + (slice(None),) * (r - used) + idx[k + 1:]
    idx = idx + (slice(None),) * (r - sum(1 for i in idx if i is not None))
    starts, ends, axes, steps, drop, new = [], [], [], [], [], []
    src = 0          # source axis of the input
    out = 0          # axis of the result before dropping ints
    for i in idx:
        if i is None:
            new.append(out)
            out += 1
            continue
        if isinstance(i, bool) or not isinstance(i, (int, slice)):
            raise Unsupported(f"index {i!r} (ints, slices, None and ... are mapped)")
        if src < x.nb:
            if i != slice(None):
                raise Unsupported(f"indexes batch axis {src} with {i!r}: the IR works per "
                                  f"example")
            src += 1
            out += 1
            continue
        a = src - x.nb
        if isinstance(i, int):
            starts.append(i), ends.append(i + 1 if i != -1 else 2 ** 62), axes.append(a)
            steps.append(1)
            drop.append(out)
        elif i != slice(None):
            st = 1 if i.step is None else int(i.step)
            if st <= 0:
                raise Unsupported(f"slice step {st} (torch allows positive steps only)")
            starts.append(0 if i.start is None else int(i.start))
            ends.append(2 ** 62 if i.stop is None else int(i.stop))
            axes.append(a), steps.append(st)
        src += 1
        out += 1
    y = x
    if axes:
        y = conv.b.apply("slice", [y], starts=starts, ends=ends, axes=axes, steps=steps)
    # int axes go, None axes come: both as a reshape to the propagated result shape
    if drop or new:
        y = conv.emit(n, "reshape", [y], shape=list(conv.out(n, x.nb)))
    return y


# ------------------------------------------------------------------ N-d conv / pool
def _tup(v, d):
    return [int(t) for t in v] if isinstance(v, (list, tuple)) else [int(v)] * d


def m_conv(conv, n, env, m):
    """nn.Conv1d/2d/3d: padding ints, 'valid', 'same' (stride 1: the larger half after,
    ONNX SAME_UPPER); padding_mode reflect/replicate/circular is an explicit pad first."""
    d = len(m.kernel_size)
    x = _x(conv, n, env)
    attrs = dict(kernel_size=list(m.kernel_size), out_channels=m.out_channels,
                 stride=list(m.stride), dilation=list(m.dilation), groups=m.groups)
    pad = m.padding
    if isinstance(pad, str):
        if pad == "same":
            attrs["auto_pad"] = "SAME_UPPER"
        pad = [0] * d
    pad = _tup(pad, d)
    if m.padding_mode != "zeros" and any(pad):
        mode = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[m.padding_mode]
        rank = len(conv.b.shape(x.id))
        pads = [0] * (rank - d) + pad
        x = conv.b.apply("pad", [x], pads=pads + pads, mode=mode)
        pad = [0] * d
    if "auto_pad" not in attrs:
        attrs["padding"] = pad
    params = conv.module_params(n.target + ".", weight=("weight", m.weight), bias=("bias", m.bias))
    return conv.emit(n, f"conv{d}d", [x], params=params, **attrs)


def m_pool(conv, n, env, m):
    """nn.MaxPool/AvgPool 1-3d with ceil_mode, dilation, count_include_pad."""
    name = type(m).__name__
    d = int(name[-2])
    x = _x(conv, n, env)
    attrs = dict(kernel_size=_tup(m.kernel_size, d),
                 stride=_tup(m.stride if m.stride else m.kernel_size, d),
                 padding=_tup(m.padding, d), ceil_mode=bool(m.ceil_mode))
    if name.startswith("Max"):
        if m.return_indices:
            raise Unsupported("return_indices=True")
        attrs["dilation"] = _tup(m.dilation, d)
        return conv.emit(n, f"max_pool{d}d", [x], **attrs)
    if getattr(m, "divisor_override", None) is not None:
        raise Unsupported("divisor_override is not in the IR")
    attrs["count_include_pad"] = bool(m.count_include_pad)
    return conv.emit(n, f"avg_pool{d}d", [x], **attrs)


m_conv.needs = ("conv1d", "conv2d", "conv3d")
m_pool.needs = ("max_pool1d", "avg_pool1d", "max_pool3d", "avg_pool3d")


# ------------------------------------------------------------------ attention
def m_multihead_attention(conv, n, env, m):
    """``nn.MultiheadAttention`` per example: in-projections, heads by reshape/permute,
    softmax(q k^T / sqrt(d)) v, out-projection.  Masks, bias_kv and zero-attn are refused;
    the attention weights (second result) are not produced."""
    if not m.batch_first and conv.nb:
        raise Unsupported("batch_first=False puts the batch axis second ([T, N, E]); the IR "
                          "keeps batch axes in front (use batch_first=True)")
    for key in ("key_padding_mask", "attn_mask"):
        v = n.kwargs.get(key)
        if v is not None:
            raise Unsupported(f"{key} is given (masks are not mapped)")
    if len(n.args) > 3:
        raise Unsupported("positional mask arguments")
    if m.bias_k is not None or m.add_zero_attn:
        raise Unsupported("add_bias_kv / add_zero_attn")
    if n.kwargs.get("is_causal"):
        raise Unsupported("is_causal=True")
    q_in, k_in, v_in = (conv.tensor(conv.arg(n, env, i, nm)) for i, nm in
                        enumerate(("query", "key", "value")))
    out = _attention(conv, m, q_in, k_in, v_in)
    return (out, Refused("the attention weights (second result) are not mapped; pass "
                         "need_weights=False or do not use them"))


def _np64(t):
    return t.detach().double().numpy().copy()


def _attention(conv, m, q_in, k_in, v_in):
    """The IR nodes of ``m`` (an nn.MultiheadAttention, batch_first) on per-example
    [T, E] query/key/value values."""
    if m.bias_k is not None or m.add_zero_attn:
        raise Unsupported("add_bias_kv / add_zero_attn")
    E, H = m.embed_dim, m.num_heads
    hd = E // H
    if m._qkv_same_embed_dim:
        W = m.in_proj_weight.detach().double().numpy()
        Ws = [W[:E], W[E:2 * E], W[2 * E:]]
    else:
        Ws = [t.detach().double().numpy() for t in (m.q_proj_weight, m.k_proj_weight,
                                                     m.v_proj_weight)]
    bs = [None] * 3 if m.in_proj_bias is None else \
        np.split(m.in_proj_bias.detach().double().numpy(), 3)

    def heads(x, W, b):
        p = {"W": W.copy()}
        if b is not None:
            p["b"] = b.copy()
        s = conv.b.shape(x.id)
        y = conv.b.apply("linear", [x], params=p, out_shape=s[:-1] + (W.shape[0],))
        T = s[-2]
        y = conv.b.apply("reshape", [y], shape=[T, H, hd])
        return conv.b.apply("permute", [y], perm=[1, 0, 2])            # [H, T, hd]

    q, k, v = heads(q_in, Ws[0], bs[0]), heads(k_in, Ws[1], bs[1]), heads(v_in, Ws[2], bs[2])
    kt = conv.b.apply("permute", [k], perm=[0, 2, 1])
    s = conv.b.apply("matmul", [q, kt])
    scale = Batched(conv.b.const(math.sqrt(hd)), 0)
    a = conv.b.apply("softmax", [conv.b.apply("div", [s, scale])], axis=2)
    o = conv.b.apply("matmul", [a, v])                                    # [H, T, hd]
    T = conv.b.shape(o.id)[1]
    o = conv.b.apply("reshape", [conv.b.apply("permute", [o], perm=[1, 0, 2])], shape=[T, E])
    op = {"W": m.out_proj.weight.detach().double().numpy().copy()}
    if m.out_proj.bias is not None:
        op["b"] = m.out_proj.bias.detach().double().numpy().copy()
    return conv.b.apply("linear", [o], params=op, out_shape=(T, E))


def m_transformer_encoder_layer(conv, n, env, m):
    """nn.TransformerEncoderLayer (eval, batch_first, relu or gelu, no masks): self-attention
    + feed-forward with residuals and LayerNorms, post-norm or norm_first, per example."""
    if m.training:
        raise Unsupported("TransformerEncoderLayer in training mode (dropout); call .eval()")
    if not m.self_attn.batch_first and conv.nb:
        raise Unsupported("batch_first=False puts the batch axis second; use batch_first=True")
    for key in ("src_mask", "src_key_padding_mask"):
        if n.kwargs.get(key) is not None:
            raise Unsupported(f"{key} is given (masks are not mapped)")
    if len(n.args) > 1 or n.kwargs.get("is_causal"):
        raise Unsupported("masks / is_causal")
    act = getattr(m, "activation_relu_or_gelu", 0)
    if act not in (1, 2):
        raise Unsupported("activation other than relu or gelu")
    x = _x(conv, n, env)
    b = conv.b

    def norm(v, ln):
        params = {"gamma": _np64(ln.weight), "beta": _np64(ln.bias), "eps": float(ln.eps)}
        return b.apply("layernorm", [v], params=params, axis=len(b.shape(v.id)) - 1)

    def lin(v, l):
        p = {"W": _np64(l.weight)}
        if l.bias is not None:
            p["b"] = _np64(l.bias)
        s = b.shape(v.id)
        return b.apply("linear", [v], params=p, out_shape=s[:-1] + (l.out_features,))

    def ff(v):
        h = lin(v, m.linear1)
        h = b.apply("relu" if act == 1 else "gelu", [h])
        return lin(h, m.linear2)

    def sa(v):
        return _attention(conv, m.self_attn, v, v, v)

    if m.norm_first:
        x = b.apply("add", [x, sa(norm(x, m.norm1))])
        return b.apply("add", [x, ff(norm(x, m.norm2))])
    x = norm(b.apply("add", [x, sa(x)]), m.norm1)
    return norm(b.apply("add", [x, ff(x)]), m.norm2)


# ------------------------------------------------------------------ tables
def tables(torch):
    """``(functions, methods, modules)``: FX target -> mapping, for the available ops."""
    F, nn = torch.nn.functional, torch.nn
    fn = {F.relu6: f_relu6, F.hardtanh: f_hardtanh, F.hardswish: _simple("hardswish"),
          F.hardsigmoid: f_hardsigmoid, F.leaky_relu: f_leaky_relu, F.elu: f_elu,
          F.selu: _simple("selu"), torch.selu: _simple("selu"), F.silu: _simple("silu"),
          F.mish: _simple("mish"), F.gelu: f_gelu_any, torch.rsqrt: f_rsqrt,
          torch.erf: _simple("erf"), torch.clamp: f_clamp, torch.clip: f_clamp,
          F.adaptive_avg_pool2d: f_adaptive_avg, F.adaptive_max_pool2d: f_adaptive_max,
          torch.amax: _reduce("reduce_max"), torch.amin: _reduce("reduce_min"),
          torch.prod: _reduce("reduce_prod"), torch.chunk: f_chunk, torch.split: f_split,
          torch.tan: _simple("tan"), torch.asin: _simple("asin"), torch.acos: _simple("acos"),
          torch.atan: _simple("atan"), torch.sinh: _simple("sinh"), torch.cosh: _simple("cosh"),
          torch.floor: _simple("floor"), torch.ceil: _simple("ceil")}
    methods = {"rsqrt": f_rsqrt, "erf": _simple("erf"), "clamp": f_clamp, "clip": f_clamp,
               "amax": _reduce("reduce_max"), "amin": _reduce("reduce_min"),
               "prod": _reduce("reduce_prod"), "chunk": f_chunk, "split": f_split,
               "tan": _simple("tan"), "floor": _simple("floor"), "ceil": _simple("ceil")}
    modules = {nn.ReLU6: f_relu6, nn.Hardtanh: f_hardtanh, nn.Hardswish: _simple("hardswish"),
               nn.Hardsigmoid: f_hardsigmoid, nn.LeakyReLU: f_leaky_relu, nn.ELU: f_elu,
               nn.SELU: _simple("selu"), nn.SiLU: _simple("silu"), nn.Mish: _simple("mish"),
               nn.GELU: f_gelu_any, nn.AdaptiveAvgPool2d: f_adaptive_avg,
               nn.AdaptiveMaxPool2d: f_adaptive_max,
               nn.MultiheadAttention: m_multihead_attention,
               nn.TransformerEncoderLayer: m_transformer_encoder_layer,
               nn.Conv1d: m_conv, nn.Conv2d: m_conv, nn.Conv3d: m_conv,
               nn.MaxPool1d: m_pool, nn.MaxPool2d: m_pool, nn.MaxPool3d: m_pool,
               nn.AvgPool1d: m_pool, nn.AvgPool2d: m_pool, nn.AvgPool3d: m_pool}
    needs = {f_relu6: ("clip",), f_hardtanh: ("clip",), f_clamp: ("clip",),
             f_hardsigmoid: ("hardsigmoid",), f_leaky_relu: ("leaky_relu",), f_elu: ("elu",),
             f_gelu_any: ("gelu", "gelu_tanh"), f_rsqrt: ("sqrt", "div"),
             f_adaptive_avg: ("global_avg_pool",), f_adaptive_max: ("global_max_pool",),
             f_chunk: ("slice",), f_split: ("slice",),
             m_multihead_attention: ("linear", "reshape", "permute", "matmul", "softmax"),
             m_transformer_encoder_layer: ("linear", "reshape", "permute", "matmul",
                                           "softmax", "layernorm", "relu", "gelu")}

    def ok(f):
        return all(op in OPS for op in getattr(f, "needs", None) or needs.get(f, ()))
    return ({k: v for k, v in fn.items() if ok(v)}, {k: v for k, v in methods.items() if ok(v)},
            {k: v for k, v in modules.items() if ok(v)})
