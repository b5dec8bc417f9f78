"""Convolution and pooling op records (NCHW, per-example value [C, H, W]).

conv2d is im2col + ``ctx.matmul``: windows are gathered with ``ctx.take`` (no arithmetic),
so the context's own dot product does all rounding and every context (object arrays,
intervals, duals) works.  The adjoint of the gather (needed by VJPs) is a product with a
0/1 selection matrix: each output entry adds one non-zero term to exact zeros, so it rounds
nothing that the scatter-add would not.
"""
from __future__ import annotations

import numpy as np

from .axes import add_opt, is_int, pair
from .errors import ShapeRuleError
from .oprecord import REQUIRED, OpRecord, register


def _size(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _out_len(op, axis_name, size, k, s, p, d):
    n = (size + 2 * p - d * (k - 1) - 1) // s + 1
    if n <= 0:
        raise ShapeRuleError(f"{op}: kernel extent {d * (k - 1) + 1} exceeds padded {axis_name} "
                             f"{size + 2 * p}")
    return n


def _window_index(n_out, k, s, d, offset=0):
    """[n_out, k] index table: position of tap ``j`` of window ``i`` (minus ``offset``)."""
    return np.arange(n_out)[:, None] * s + np.arange(k)[None, :] * d - offset


def _flat_batch(ctx, x, nb):
    s = ctx.shape(x)
    return ctx.reshape(x, (_size(s[:nb]),) + tuple(s[nb:])), tuple(s[:nb])


def _pad2(ctx, x4, ph, pw):
    """Zero padding of the last two axes (concat with context zeros: no rounding)."""
    if ph:
        s = ctx.shape(x4)
        z = ctx.zeros(tuple(s[:-2]) + (ph, s[-1]))
        x4 = ctx.concat([z, x4, z], axis=len(s) - 2)
    if pw:
        s = ctx.shape(x4)
        z = ctx.zeros(tuple(s[:-1]) + (pw,))
        x4 = ctx.concat([z, x4, z], axis=len(s) - 1)
    return x4


def _unpad2(ctx, x4, ph, pw, H, W):
    if ph:
        x4 = ctx.take(x4, np.arange(ph, ph + H), axis=2)
    if pw:
        x4 = ctx.take(x4, np.arange(pw, pw + W), axis=3)
    return x4


def _gather2d(ctx, x4, ih, iw):
    """[N, C, H, W] -> windows [N, C, OH, KH, OW, KW]."""
    t = ctx.take(x4, ih, axis=2)
    return ctx.take(t, iw, axis=4)


def _selection(ctx, idx, size):
    """0/1 matrix [n_out*k, size] mapping each window tap to its source position."""
    S = np.zeros((idx.size, size))
    S[np.arange(idx.size), idx.reshape(-1)] = 1.0
    return ctx.convert(S)


def _scatter2d(ctx, g6, ih, iw, H, W):
    """Adjoint of :func:`_gather2d`: [N, C, OH, KH, OW, KW] -> [N, C, H, W] (adds overlaps)."""
    N, C, OH, KH, OW, KW = ctx.shape(g6)
    t = ctx.matmul(ctx.reshape(g6, (N, C, OH, KH, OW * KW)), _selection(ctx, iw, W))
    t = ctx.transpose(t, (0, 1, 4, 2, 3))                       # [N, C, W, OH, KH]
    t = ctx.matmul(ctx.reshape(t, (N, C, W, OH * KH)), _selection(ctx, ih, H))
    return ctx.transpose(t, (0, 1, 3, 2))                       # [N, C, H, W]


# ----------------------------------------------------------------------------- conv2d
def _conv_geom(in_shapes, attrs, declared=None):
    s = tuple(in_shapes[0])
    if len(s) != 3:
        raise ShapeRuleError(f"conv2d: input must be [C, H, W] per example, got {list(s)}")
    C, H, W = s
    kh, kw = pair("conv2d", "kernel_size", attrs["kernel_size"], 1)
    sh, sw = pair("conv2d", "stride", attrs["stride"], 1)
    ph, pw = pair("conv2d", "padding", attrs["padding"], 0)
    dh, dw = pair("conv2d", "dilation", attrs["dilation"], 1)
    g = attrs["groups"]
    if not is_int(g) or g < 1:
        raise ShapeRuleError(f"conv2d: attribute groups must be a positive int, got {g!r}")
    O = attrs["out_channels"]
    if O is None:
        if declared is None or len(declared) != 3:
            raise ShapeRuleError(f"conv2d: out_channels is neither an attribute nor readable "
                                 f"from the declared shape {list(declared or [])}")
        O = declared[0]
    if not is_int(O) or O < 1:
        raise ShapeRuleError(f"conv2d: out_channels must be a positive int, got {O!r}")
    if C % g or O % g:
        raise ShapeRuleError(f"conv2d: groups={g} must divide in channels {C} and out "
                             f"channels {O}")
    OH = _out_len("conv2d", "height", H, kh, sh, ph, dh)
    OW = _out_len("conv2d", "width", W, kw, sw, pw, dw)
    return dict(C=C, H=H, W=W, O=O, G=g, kh=kh, kw=kw, sh=sh, sw=sw, ph=ph, pw=pw,
                dh=dh, dw=dw, OH=OH, OW=OW)


def _conv_shape(in_shapes, attrs, declared=None):
    q = _conv_geom(in_shapes, attrs, declared)
    return (q["O"], q["OH"], q["OW"])


def _conv_params(in_shapes, attrs, out_shape):
    q = _conv_geom(in_shapes, attrs, out_shape)
    return {"weight": (q["O"], q["C"] // q["G"], q["kh"], q["kw"]), "bias": (q["O"],)}


def _geom_of(ctx, x, w, attrs, nb):
    # inside a rule the weight gives out_channels when the attribute is absent
    attrs = dict(attrs, out_channels=ctx.shape(w)[0])
    return _conv_geom([ctx.shape(x)[nb:]], attrs)


def _cols(ctx, x, q, nb):
    """im2col: [B.., C, H, W] -> [N, G, P, K] with P = OH*OW, K = C/G*KH*KW."""
    x4, B = _flat_batch(ctx, x, nb)
    x4 = _pad2(ctx, x4, q["ph"], q["pw"])
    ih = _window_index(q["OH"], q["kh"], q["sh"], q["dh"])
    iw = _window_index(q["OW"], q["kw"], q["sw"], q["dw"])
    w6 = _gather2d(ctx, x4, ih, iw)                              # [N, C, OH, KH, OW, KW]
    N = ctx.shape(w6)[0]
    t = ctx.transpose(w6, (0, 2, 4, 1, 3, 5))                    # [N, OH, OW, C, KH, KW]
    G = q["G"]
    K = q["C"] // G * q["kh"] * q["kw"]
    t = ctx.reshape(t, (N, q["OH"] * q["OW"], G, K))
    return ctx.transpose(t, (0, 2, 1, 3)), B, (ih, iw)


def _wmat(ctx, w, q):
    """weight [O, C/G, KH, KW] -> [G, K, O/G]."""
    G = q["G"]
    w3 = ctx.reshape(w, (G, q["O"] // G, q["C"] // G * q["kh"] * q["kw"]))
    return ctx.transpose(w3, (0, 2, 1))


def _conv_core(ctx, x, w, q, nb):
    cols, B, _ = _cols(ctx, x, q, nb)
    y = ctx.matmul(cols, _wmat(ctx, w, q))                       # [N, G, P, O/G]
    N = ctx.shape(y)[0]
    y = ctx.transpose(y, (0, 1, 3, 2))
    return ctx.reshape(y, B + (q["O"], q["OH"], q["OW"])), N


def _bias_b(ctx, b):
    return ctx.reshape(b, (ctx.shape(b)[0], 1, 1))


def _conv_forward(ctx, args, attrs, nb):
    x, w, b = args
    q = _geom_of(ctx, x, w, attrs, nb)
    y, _ = _conv_core(ctx, x, w, q, nb)
    return ctx.add(y, _bias_b(ctx, b))


def _conv_vjp(ctx, g, args, y, attrs, nb):
    x, w, b = args
    q = _geom_of(ctx, x, w, attrs, nb)
    cols, B, (ih, iw) = _cols(ctx, x, q, nb)
    N = ctx.shape(cols)[0]
    G, O, P = q["G"], q["O"], q["OH"] * q["OW"]
    gy = ctx.reshape(g, (N, G, O // G, P))
    gyT = ctx.transpose(gy, (0, 1, 3, 2))                        # [N, G, P, O/G]
    # weight: sum over samples and positions of cols^T gy
    colsT = ctx.reshape(ctx.transpose(cols, (1, 3, 0, 2)), (G, ctx.shape(cols)[3], N * P))
    gyr = ctx.reshape(ctx.transpose(gyT, (1, 0, 2, 3)), (G, N * P, O // G))
    gw = ctx.matmul(colsT, gyr)                                  # [G, K, O/G]
    gw = ctx.reshape(ctx.transpose(gw, (0, 2, 1)), ctx.shape(w))
    gb = ctx.sum(ctx.reshape(g, (N, O, P)), axis=(0, 2))
    # input: gcols = gy W, then the adjoint of im2col
    w3 = ctx.transpose(_wmat(ctx, w, q), (0, 2, 1))              # [G, O/G, K]
    gcols = ctx.matmul(gyT, w3)                                  # [N, G, P, K]
    t = ctx.transpose(gcols, (0, 2, 1, 3))
    t = ctx.reshape(t, (N, q["OH"], q["OW"], q["C"], q["kh"], q["kw"]))
    t = ctx.transpose(t, (0, 3, 1, 4, 2, 5))                     # [N, C, OH, KH, OW, KW]
    Hp, Wp = q["H"] + 2 * q["ph"], q["W"] + 2 * q["pw"]
    gx = _unpad2(ctx, _scatter2d(ctx, t, ih, iw, Hp, Wp), q["ph"], q["pw"], q["H"], q["W"])
    gx = ctx.reshape(gx, B + (q["C"], q["H"], q["W"]))
    return [gx, gw, gb]


def _conv_jvp(ctx, args, tans, y, attrs, nb):
    x, w, b = args
    tx, tw, tb = tans
    q = _geom_of(ctx, x, w, attrs, nb)
    t = None
    if tx is not None:
        t = _conv_core(ctx, tx, w, q, nb)[0]
    if tw is not None:
        t = add_opt(ctx, t, _conv_core(ctx, x, tw, q, nb)[0])
    if tb is not None:
        tbb = ctx.broadcast_to(_bias_b(ctx, tb), ctx.shape(y))
        t = tbb if t is None else ctx.add(t, tbb)
    return t


register(OpRecord(
    name="conv2d", arity=(1, 1), shape=_conv_shape, forward=_conv_forward, vjp=_conv_vjp,
    jvp=_conv_jvp,
    attrs={"kernel_size": REQUIRED, "out_channels": None, "stride": 1, "padding": 0,
           "dilation": 1, "groups": 1},
    params=("weight", "bias"), param_shapes=_conv_params, param_defaults={"bias": "zeros"},
    capsule="reference.conv2d", reduces=True, dot=True,
    doc="2-d convolution (cross-correlation, as torch), payload weight [O, C/groups, KH, KW], "
        "bias [O]; zero padding"))


# ---------------------------------------------------------------------------- pooling
def _pool_geom(op, in_shapes, attrs):
    s = tuple(in_shapes[0])
    if len(s) != 3:
        raise ShapeRuleError(f"{op}: input must be [C, H, W] per example, got {list(s)}")
    C, H, W = s
    kh, kw = pair(op, "kernel_size", attrs["kernel_size"], 1)
    stride = attrs["stride"] if attrs["stride"] is not None else attrs["kernel_size"]
    sh, sw = pair(op, "stride", stride, 1)
    ph, pw = pair(op, "padding", attrs["padding"], 0)
    dh, dw = pair(op, "dilation", attrs.get("dilation", 1), 1)
    if ph > kh // 2 or pw > kw // 2:
        raise ShapeRuleError(f"{op}: padding {[ph, pw]} must be at most half the kernel "
                             f"{[kh, kw]}")
    OH = _out_len(op, "height", H, kh, sh, ph, dh)
    OW = _out_len(op, "width", W, kw, sw, pw, dw)
    return dict(C=C, H=H, W=W, kh=kh, kw=kw, sh=sh, sw=sw, ph=ph, pw=pw, dh=dh, dw=dw,
                OH=OH, OW=OW)


def _clamped_index(op, n_out, k, s, d, p, size):
    """Max-pool taps in the padding are redirected to an in-range tap of the SAME window
    (implicit -inf padding never wins a max, and a duplicate of a window member does not
    change it), so no infinities are needed: rational and interval contexts work too."""
    idx = _window_index(n_out, k, s, d, offset=p)
    valid = (idx >= 0) & (idx < size)
    if not valid.any(axis=1).all():
        raise ShapeRuleError(f"{op}: a pooling window lies entirely in the padding")
    first = idx[np.arange(n_out), valid.argmax(axis=1)]
    return np.where(valid, idx, first[:, None])


def _maxpool_shape(in_shapes, attrs, declared=None):
    q = _pool_geom("max_pool2d", in_shapes, attrs)
    _clamped_index("max_pool2d", q["OH"], q["kh"], q["sh"], q["dh"], q["ph"], q["H"])
    _clamped_index("max_pool2d", q["OW"], q["kw"], q["sw"], q["dw"], q["pw"], q["W"])
    return (q["C"], q["OH"], q["OW"])


def _max_windows(ctx, x, attrs, nb):
    q = _pool_geom("max_pool2d", [ctx.shape(x)[nb:]], attrs)
    ih = _clamped_index("max_pool2d", q["OH"], q["kh"], q["sh"], q["dh"], q["ph"], q["H"])
    iw = _clamped_index("max_pool2d", q["OW"], q["kw"], q["sw"], q["dw"], q["pw"], q["W"])
    x4, B = _flat_batch(ctx, x, nb)
    w6 = _gather2d(ctx, x4, ih, iw)
    N = ctx.shape(w6)[0]
    w5 = ctx.reshape(ctx.transpose(w6, (0, 1, 2, 4, 3, 5)),
                     (N, q["C"], q["OH"], q["OW"], q["kh"] * q["kw"]))
    return w5, q, B, ih, iw


def _maxpool_forward(ctx, args, attrs, nb):
    w5, q, B, _, _ = _max_windows(ctx, args[0], attrs, nb)
    return ctx.reshape(ctx.amax(w5, axis=4), B + (q["C"], q["OH"], q["OW"]))


def _argmax_mask(ctx, w5):
    am = np.asarray(ctx.argmax(w5, axis=4))
    return np.arange(ctx.shape(w5)[4]) == am[..., None]


def _maxpool_vjp(ctx, g, args, y, attrs, nb):
    w5, q, B, ih, iw = _max_windows(ctx, args[0], attrs, nb)
    mask = _argmax_mask(ctx, w5)
    s5 = ctx.shape(w5)
    gb = ctx.broadcast_to(ctx.reshape(g, tuple(s5[:4]) + (1,)), s5)
    gw = ctx.where(mask, gb, ctx.zeros(s5))
    g6 = ctx.transpose(ctx.reshape(gw, tuple(s5[:4]) + (q["kh"], q["kw"])), (0, 1, 2, 4, 3, 5))
    gx = _scatter2d(ctx, g6, ih, iw, q["H"], q["W"])
    return [ctx.reshape(gx, B + (q["C"], q["H"], q["W"]))]


def _maxpool_jvp(ctx, args, tans, y, attrs, nb):
    if tans[0] is None:
        return None
    w5, q, B, _, _ = _max_windows(ctx, args[0], attrs, nb)
    t5 = _max_windows(ctx, tans[0], attrs, nb)[0]
    mask = _argmax_mask(ctx, w5)
    t = ctx.sum(ctx.where(mask, t5, ctx.zeros(ctx.shape(t5))), axis=4)
    return ctx.reshape(t, ctx.shape(y))


register(OpRecord(
    name="max_pool2d", arity=(1, 1), shape=_maxpool_shape, forward=_maxpool_forward,
    vjp=_maxpool_vjp, jvp=_maxpool_jvp,
    attrs={"kernel_size": REQUIRED, "stride": None, "padding": 0, "dilation": 1},
    capsule="reference.max_pool2d",
    doc="max over KHxKW windows (stride defaults to the kernel); the derivative follows "
        "the first maximal tap (ctx.argmax), so VJP/JVP need a point context"))


def _avg_geom(ctx, x, attrs, nb):
    return _pool_geom("avg_pool2d", [ctx.shape(x)[nb:]], attrs)


def _avgpool_shape(in_shapes, attrs, declared=None):
    q = _pool_geom("avg_pool2d", in_shapes, attrs)
    return (q["C"], q["OH"], q["OW"])


def _avg_core(ctx, x, q, nb):
    x4, B = _flat_batch(ctx, x, nb)
    x4 = _pad2(ctx, x4, q["ph"], q["pw"])
    ih = _window_index(q["OH"], q["kh"], q["sh"], 1)
    iw = _window_index(q["OW"], q["kw"], q["sw"], 1)
    w6 = _gather2d(ctx, x4, ih, iw)
    s = ctx.sum(w6, axis=(3, 5))
    # divisor = KH*KW (count_include_pad=True, torch's default)
    return ctx.reshape(ctx.div(s, ctx.convert(q["kh"] * q["kw"])),
                       B + (q["C"], q["OH"], q["OW"])), ih, iw, B


def _avgpool_forward(ctx, args, attrs, nb):
    return _avg_core(ctx, args[0], _avg_geom(ctx, args[0], attrs, nb), nb)[0]


def _avgpool_vjp(ctx, g, args, y, attrs, nb):
    q = _avg_geom(ctx, args[0], attrs, nb)
    g4, B = _flat_batch(ctx, g, nb)
    N = ctx.shape(g4)[0]
    gk = ctx.div(g4, ctx.convert(q["kh"] * q["kw"]))
    g6 = ctx.broadcast_to(ctx.reshape(gk, (N, q["C"], q["OH"], 1, q["OW"], 1)),
                          (N, q["C"], q["OH"], q["kh"], q["OW"], q["kw"]))
    ih = _window_index(q["OH"], q["kh"], q["sh"], 1)
    iw = _window_index(q["OW"], q["kw"], q["sw"], 1)
    Hp, Wp = q["H"] + 2 * q["ph"], q["W"] + 2 * q["pw"]
    gx = _unpad2(ctx, _scatter2d(ctx, g6, ih, iw, Hp, Wp), q["ph"], q["pw"], q["H"], q["W"])
    return [ctx.reshape(gx, B + (q["C"], q["H"], q["W"]))]


def _avgpool_jvp(ctx, args, tans, y, attrs, nb):
    if tans[0] is None:
        return None
    return _avg_core(ctx, tans[0], _avg_geom(ctx, args[0], attrs, nb), nb)[0]


register(OpRecord(
    name="avg_pool2d", arity=(1, 1), shape=_avgpool_shape, forward=_avgpool_forward,
    vjp=_avgpool_vjp, jvp=_avgpool_jvp,
    attrs={"kernel_size": REQUIRED, "stride": None, "padding": 0},
    capsule="reference.avg_pool2d", reduces=True,
    doc="mean over KHxKW windows, zero padding counted (torch count_include_pad=True)"))
