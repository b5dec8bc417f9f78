"""ONNX -> IR mappings composed from existing IR ops: InstanceNormalization (and so
GroupNorm's export), ConvTranspose, Resize/Upsample (nearest, linear, cubic), Trilu, CumSum
and Einsum.  Each converter is ``f(conv, node, ins, A) -> list of outputs``, as in
:mod:`.onnx_ops`.

The compositions only add exact zeros or move entries where the ONNX op does no
arithmetic, so each context rounds what the op itself computes:

* ConvTranspose is the convolution of the input with zeros inserted between entries
  (``stride - 1`` per gap), padded by ``dilation * (k - 1) - pad`` and convolved with the
  flipped kernel, channels swapped per group: the extra terms are products with exact
  zeros, which change no rounded sum;
* InstanceNormalization is ``(x - mean) / sqrt(var + eps) * scale + B`` with mean and
  variance over the spatial axes (the biased variance of ``x - mean``), as ONNX states it;
* Resize/Upsample: every output coordinate is known at import (concrete shapes), so
  nearest is a gather with constant indices and linear is, axis by axis,
  ``a * (1 - t) + b * t`` with the float64 weights of each output coordinate; cubic is
  four such gathers times Keys' weights (``cubic_coeff_a``, ``exclude_outside``), added
  in tap order;
* Trilu keeps or zeroes entries (a constant ``where``), CumSum is the running sum in
  order (one rounding per addition, as the sequential reference), Einsum of two operands
  is transposes, reshapes and one ``matmul``.
"""
from __future__ import annotations

import math

import numpy as np

from .interchange import PendingConst, Unsupported
from .onnx_ops import const_ints, const_value, f32, opt_input


def _const(conv, value, name):
    return conv.materialize(PendingConst(np.asarray(value, dtype=np.float64), name))


# ------------------------------------------------------------------ InstanceNormalization
def _instance_norm(conv, node, ins, A):
    x = conv.t(ins[0])
    r = conv.b.rank(x)
    if r < 3:
        raise Unsupported(f"input of rank {r} (N, C and at least one spatial axis)")
    axes = [conv.b.axis(a, x) for a in range(2, r)]
    ax = axes if len(axes) > 1 else axes[0]
    eps = _const(conv, f32(A.get("epsilon", 1e-5)), "epsilon")
    mean = conv.b.apply("reduce_mean", [x], axis=ax, keepdims=True)
    d = conv.b.apply("sub", [x, mean])
    var = conv.b.apply("reduce_mean", [conv.b.apply("mul", [d, d])], axis=ax, keepdims=True)
    y = conv.b.apply("div", [d, conv.b.apply("sqrt", [conv.b.apply("add", [var, eps])])])
    tail = [1] * (r - 2)
    scale = np.asarray(const_value(ins[1], "scale"), np.float64).reshape([-1] + tail)
    bias = np.asarray(const_value(ins[2], "B"), np.float64).reshape([-1] + tail)
    y = conv.b.apply("mul", [y, _const(conv, scale, "scale")])
    return [conv.b.apply("add", [y, _const(conv, bias, "B")])]


def _group_norm(conv, node, ins, A):
    """GroupNormalization: each group of C/G channels normalised over its channels and the
    spatial axes (mean, then the biased variance of x - mean, as InstanceNormalization),
    then the per-channel scale and bias (opset 18's per-group ones repeated per channel)."""
    x = conv.t(ins[0])
    r = conv.b.rank(x)
    if r < 3:
        raise Unsupported(f"input of rank {r} (N, C and at least one spatial axis)")
    pc = conv.b.axis(1, x, "the channel axis")
    s = list(conv.b.shape(x.id))
    G = int(A["num_groups"])
    C = s[pc]
    if G < 1 or C % G:
        raise Unsupported(f"num_groups={G} does not divide the {C} channels")
    rest = int(np.prod(s[pc + 1:], dtype=np.int64)) * (C // G)
    g = conv.b.apply("reshape", [x], shape=s[:pc] + [G, rest])
    ax = pc + 1
    eps = _const(conv, f32(A.get("epsilon", 1e-5)), "epsilon")
    mean = conv.b.apply("reduce_mean", [g], axis=ax, keepdims=True)
    d = conv.b.apply("sub", [g, mean])
    var = conv.b.apply("reduce_mean", [conv.b.apply("mul", [d, d])], axis=ax, keepdims=True)
    y = conv.b.apply("div", [d, conv.b.apply("sqrt", [conv.b.apply("add", [var, eps])])])
    y = conv.b.apply("reshape", [y], shape=s)
    tail = [1] * (len(s) - pc - 1)
    out = []
    for k, name in ((1, "scale"), (2, "bias")):
        v = np.asarray(const_value(ins[k], name), np.float64).reshape(-1)
        if v.size == G and G != C:
            v = np.repeat(v, C // G)             # opset 18: one value per group
        if v.size != C:
            raise Unsupported(f"{name} holds {v.size} values for {C} channels")
        out.append(_const(conv, v.reshape([C] + tail), name))
    y = conv.b.apply("mul", [y, out[0]])
    return [conv.b.apply("add", [y, out[1]])]


# ------------------------------------------------------------------------- ConvTranspose
def _zero_insert(conv, v, axis, s):
    """``s - 1`` zeros after every entry of per-example axis ``axis`` of ``v`` (length
    L -> L * s; the trailing zeros are accounted for in the padding)."""
    shape = list(conv.b.shape(v.id))
    u = conv.b.apply("unsqueeze", [v], axes=[axis + 1])
    pads = [0] * (len(shape) + 1) * 2
    pads[len(shape) + 1 + axis + 1] = s - 1
    u = conv.b.apply("pad", [u], pads=pads, mode="constant", value=0.0)
    shape[axis] *= s
    return conv.b.apply("reshape", [u], shape=shape)


def _conv_transpose(conv, node, ins, A):
    w = np.asarray(const_value(ins[1], "weight W"), np.float64)
    d = w.ndim - 2
    op = {1: "conv1d", 2: "conv2d", 3: "conv3d"}.get(d)
    from ..optable import OPS
    if op is None or op not in OPS:
        raise Unsupported(f"weight of rank {w.ndim}: {d}-d convolution is not in the IR")
    ap = A.get("auto_pad", "NOTSET")
    if ap not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise Unsupported(f"auto_pad={ap!r}")
    G = int(A.get("group", 1))
    k = [int(t) for t in A.get("kernel_shape", w.shape[2:])]
    s = [int(t) for t in A.get("strides", [1] * d)]
    dil = [int(t) for t in A.get("dilations", [1] * d)]
    pads = [int(t) for t in A.get("pads", [0] * (2 * d))] if ap == "NOTSET" else [0] * (2 * d)
    op_pad = [int(t) for t in A.get("output_padding", [0] * d)]
    if "output_shape" in A or ap.startswith("SAME"):
        # the padding that gives the requested output extent, split as ONNX states it
        x_full = [None] * ins[0].nb + list(conv.b.shape(conv.t(ins[0]).id)) \
            if not isinstance(ins[0], PendingConst) else list(ins[0].value.shape)
        L = x_full[-d:]
        want = [int(t) for t in A["output_shape"]][-d:] if "output_shape" in A else \
            [L[j] * s[j] for j in range(d)]
        for j in range(d):
            total = s[j] * (L[j] - 1) + op_pad[j] + (k[j] - 1) * dil[j] + 1 - want[j]
            if ap == "SAME_UPPER":
                pads[j], pads[d + j] = total // 2, total - total // 2
            else:
                pads[j], pads[d + j] = total - total // 2, total // 2
    C, Mg = w.shape[0], w.shape[1]
    Cg = C // G
    # the equivalent convolution's kernel: [G * Mg, Cg, k...], each spatially flipped
    flip = w[(slice(None), slice(None)) + (slice(None, None, -1),) * d]
    wc = flip.reshape((G, Cg, Mg) + tuple(k)).transpose((0, 2, 1) + tuple(range(3, 3 + d)))
    wc = np.ascontiguousarray(wc.reshape((G * Mg, Cg) + tuple(k)))
    params = {"weight": wc}
    if len(ins) > 2 and ins[2] is not None:
        params["bias"] = np.asarray(const_value(ins[2], "bias B"), np.float64)
    begins = [dil[j] * (k[j] - 1) - pads[j] for j in range(d)]
    # the zero insertion leaves s - 1 trailing zeros: they count toward the end padding
    ends = [dil[j] * (k[j] - 1) - pads[d + j] + op_pad[j] - (s[j] - 1) for j in range(d)]
    # pads beyond dilation * (kernel - 1) crop the result: slices after the convolution
    crop_b = [max(0, -b) for b in begins]
    crop_e = [max(0, -e) for e in ends]
    begins = [max(0, b) for b in begins]
    ends = [max(0, e) for e in ends]

    def fn(v):
        for j in range(d):
            if s[j] > 1:
                v = _zero_insert(conv, v, 1 + j, s[j])
        attrs = dict(kernel_size=k, out_channels=G * Mg, groups=G, stride=[1] * d,
                     dilation=dil, padding=begins + ends, auto_pad="NOTSET")
        out = conv._ir_shape(op, conv.b.shape(v.id), attrs)
        from .interchange import Batched
        y = Batched(conv.b.add(op, [v.id], out_shape=out, params=params, **attrs), v.nb)
        if any(crop_b) or any(crop_e):
            y = conv.b.apply("slice", [y], starts=crop_b,
                             ends=[out[1 + j] - crop_e[j] for j in range(d)],
                             axes=[1 + j for j in range(d)])
        return y
    return [conv.with_channels_first(conv.t(ins[0]), fn, "ConvTranspose")]


# -------------------------------------------------------------------------- Resize
_MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
          "half_pixel_symmetric")


def _source_coords(mode, n_in, n_out, scale):
    """The input coordinate of each output coordinate (float64), as ONNX defines it."""
    x = np.arange(n_out, dtype=np.float64)
    if mode == "half_pixel":
        return (x + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        # half_pixel about the centre of the unfloored resized length n_in * scale
        adjustment = n_out / (n_in * scale)
        return n_in / 2 * (1 - adjustment) + (x + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (x + 0.5) / scale - 0.5 if n_out > 1 else np.zeros(n_out)
    if mode == "align_corners":
        # ONNX divides by the unfloored resized length n_in * scale minus 1
        span = n_in * scale - 1
        return np.zeros(n_out) if span == 0 else x * (n_in - 1) / span
    return x / scale


def _nearest(coords, rule, n_in):
    fl = np.floor(coords)
    frac = coords - fl
    if rule == "floor":
        idx = fl
    elif rule == "ceil":
        idx = np.ceil(coords)
    elif rule == "round_prefer_floor":
        idx = np.where(frac == 0.5, fl, np.round(coords))
    elif rule == "round_prefer_ceil":
        idx = np.where(frac == 0.5, fl + 1, np.round(coords))
    else:
        raise Unsupported(f"nearest_mode={rule!r}")
    return np.clip(idx, 0, n_in - 1).astype(np.int64)


def _keys(t, a):
    """Keys' cubic kernel with coefficient ``a`` at distances ``t`` (float64)."""
    t = np.abs(t)
    return np.where(t <= 1, ((a + 2) * t - (a + 3)) * t * t + 1,
                    np.where(t < 2, ((a * t - 5 * a) * t + 8 * a) * t - 4 * a, 0.0))


def _filter_taps(coords, n_in, mode, scale, a, exclude, antialias):
    """The source indices (``[n_out, n]``, clamped: ONNX pads the edge) and float64 weights
    of cubic or antialiased linear/cubic interpolation at each coordinate, as ONNX's
    reference computes them: the ``n`` taps nearest the coordinate, ``ceil(x) - n/2 ..
    ceil(x) + n/2 - 1``, at ratio ``r`` in (0, 1] past the tap before the coordinate.
    Plain cubic is Keys' kernel at the four taps; antialiasing (downscaling) stretches the
    kernel by 1/scale over more taps and normalises the weights to sum 1.  ``exclude``
    zeroes the taps outside the input and renormalises the rest."""
    base = np.ceil(coords) - 1
    r = (coords - base)[:, None]
    if not antialias:
        s = 1 - r
        # ONNX's reference writes each of the four weights as its own polynomial
        w = np.concatenate([((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
                            ((a + 2) * r - (a + 3)) * r * r + 1,
                            ((a + 2) * s - (a + 3)) * s * s + 1,
                            ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a], 1)
        start = -1
    else:
        sc = min(scale, 1.0)
        start = int(np.floor((-2 if mode == "cubic" else -1) / sc) + 1)
        t = (np.arange(start, 2 - start)[None, :] - r) * sc
        w = _keys(t, a) if mode == "cubic" else np.clip(1 - np.abs(t), 0, 1)
        w = w / w.sum(axis=1, keepdims=True)
    idx = base[:, None].astype(np.int64) + np.arange(start, start + w.shape[1])
    if exclude:
        w = np.where((idx < 0) | (idx >= n_in), 0.0, w)
        w = w / w.sum(axis=1, keepdims=True)
    return np.clip(idx, 0, n_in - 1), w


def _resize_filter(conv, x, pa, n_in, n_out, coords, taps):
    """Resize along ``pa`` by a filter: one constant-index gather per tap times the tap's
    constant weights, added in tap order (one rounding per product and per addition)."""
    idx, w = taps
    r = len(conv.b.shape(x.id))
    wshape = [n_out] + [1] * (r - pa - 1)
    out = None
    for j in range(idx.shape[1]):
        t = conv.b.apply("gather", [x], indices=idx[:, j].tolist(), axis=pa)
        t = conv.b.apply("mul", [t, _const(conv, w[:, j].reshape(wshape), f"resize_c{j}")])
        out = t if out is None else conv.b.apply("add", [out, t])
    return out


def _crop_coords(n_in, n_out, scale, start, end):
    """tf_crop_and_resize's source coordinates over the region [start, end] (fractions of
    the axis), as ONNX's reference computes them."""
    x = np.arange(n_out, dtype=np.float64)
    width = scale * n_in
    if width == 1:
        c = np.full(n_out, (end - start) * (n_in - 1) / 2)
    else:
        c = x * (end - start) * (n_in - 1) / (width - 1)
    return c + start * (n_in - 1)


def _resize_axis(conv, x, pa, n_in, n_out, scale, mode, ctm, nearest_mode, cubic, crop=None):
    """``x`` resized along per-example axis ``pa``; ``crop`` = (start, end, value) for
    tf_crop_and_resize: output coordinates whose source lies outside the input take the
    extrapolation value (a constant ``where``)."""
    if crop is None:
        return _interpolate_axis(conv, x, pa, n_in, n_out, scale, mode, ctm, nearest_mode,
                                 cubic, _source_coords(ctm, n_in, n_out, scale))
    coords = _crop_coords(n_in, n_out, scale, crop[0], crop[1])
    inside = (coords >= 0) & (coords <= n_in - 1)
    y = _interpolate_axis(conv, x, pa, n_in, n_out, scale, mode, ctm, nearest_mode, cubic,
                          np.clip(coords, 0, n_in - 1))
    if inside.all():
        return y
    r = len(conv.b.shape(x.id))
    s = list(conv.b.shape(y.id))
    fill = _const(conv, np.full([1] * r, crop[2]), "extrapolation_value")
    keep = np.broadcast_to(inside.reshape([n_out] + [1] * (r - pa - 1)), s[pa:])
    return conv.b.apply("where", [y, fill], condition=keep.reshape([1] * pa + list(
        keep.shape)).tolist())


def _interpolate_axis(conv, x, pa, n_in, n_out, scale, mode, ctm, nearest_mode, cubic,
                      coords):
    """``x`` resampled along per-example axis ``pa`` at source coordinates ``coords``."""
    a, exclude, antialias = cubic
    if mode == "cubic" or (antialias and mode == "linear"):
        if ctm == "pytorch_half_pixel" and n_out == 1:
            coords = np.full(1, -0.5)          # ONNX's reference: -0.5, not 0, here
        taps = _filter_taps(coords, n_in, mode, scale, a, exclude, antialias)
        return _resize_filter(conv, x, pa, n_in, n_out, coords, taps)
    if mode == "nearest":
        idx = _nearest(coords, nearest_mode, n_in)
        if n_in == n_out and np.array_equal(idx, np.arange(n_in)):
            return x
        return conv.b.apply("gather", [x], indices=idx.tolist(), axis=pa)
    coords = np.clip(coords, 0, n_in - 1)
    lo = np.floor(coords).astype(np.int64)
    hi = np.minimum(lo + 1, n_in - 1)
    t = coords - lo
    if n_in == n_out and not t.any() and np.array_equal(lo, np.arange(n_in)):
        return x
    r = len(conv.b.shape(x.id))
    wshape = [n_out] + [1] * (r - pa - 1)
    a = conv.b.apply("gather", [x], indices=lo.tolist(), axis=pa)
    b = conv.b.apply("gather", [x], indices=hi.tolist(), axis=pa)
    a = conv.b.apply("mul", [a, _const(conv, (1.0 - t).reshape(wshape), "resize_w0")])
    b = conv.b.apply("mul", [b, _const(conv, t.reshape(wshape), "resize_w1")])
    return conv.b.apply("add", [a, b])


def _resize_common(conv, node, x, scales, sizes, A, opset_mode, roi=None):
    mode = A.get("mode", "nearest")
    if mode not in ("nearest", "linear", "cubic"):
        raise Unsupported(f"mode={mode!r} (nearest, linear and cubic are mapped)")
    antialias = bool(int(A.get("antialias", 0)))
    if antialias and mode == "nearest":
        raise Unsupported("antialias=1 with mode='nearest' (ONNX defines it for linear and "
                          "cubic)")
    cubic = (f32(A.get("cubic_coeff_a", -0.75)), bool(int(A.get("exclude_outside", 0))),
             antialias)
    ctm = A.get("coordinate_transformation_mode", opset_mode)
    if ctm == "tf_crop_and_resize" and roi is None:
        raise Unsupported("tf_crop_and_resize without a constant roi input")
    if ctm not in _MODES and ctm != "tf_crop_and_resize":
        raise Unsupported(f"coordinate_transformation_mode={ctm!r}")
    policy = A.get("keep_aspect_ratio_policy", "stretch")
    if policy not in ("stretch", "not_larger", "not_smaller"):
        raise Unsupported(f"keep_aspect_ratio_policy={policy!r}")
    nearest_mode = A.get("nearest_mode", "round_prefer_floor")
    r = conv.b.rank(x)
    full = [None] * x.nb + list(conv.b.shape(x.id))
    axes = [int(a) % r for a in A.get("axes", range(r))]
    if sizes is not None and policy != "stretch":
        # one scale for every resized axis, the smallest (not_larger) or largest of the
        # sizes' ratios (a batch extent's is 1); the sizes become round-half-up(scale * n)
        ratios = [1.0 if t is None else int(t) / full[a] for t, a in zip(sizes, axes)]
        one = min(ratios) if policy == "not_larger" else max(ratios)
        sizes = [None if t is None else int(one * full[a] + 0.5) for t, a in zip(sizes, axes)]
        sizes = [None if t is None else (t, one) for t in sizes]
    for j, a in enumerate(axes):
        n_in = full[a]
        if sizes is not None and sizes[j] is None:      # a batch extent: unchanged
            continue
        if sizes is not None and isinstance(sizes[j], tuple):     # an aspect-ratio policy
            n_out, sc = sizes[j]
        elif sizes is not None:
            n_out = int(sizes[j])
            sc = n_out / n_in if n_in is not None else None
        else:
            sc = float(scales[j])
            n_out = int(math.floor(n_in * sc)) if n_in is not None else None
        if a < x.nb:
            if sc != 1.0:
                raise Unsupported(f"resizes batch axis {a}")
            continue
        if n_out == n_in and sc == 1.0:
            continue
        crop = None if ctm != "tf_crop_and_resize" else (
            float(roi[j]), float(roi[len(axes) + j]), f32(A.get("extrapolation_value", 0.0)))
        x = _resize_axis(conv, x, a - x.nb, n_in, n_out, sc, mode, ctm, nearest_mode, cubic,
                         crop)
    return x


def _resize(conv, node, ins, A):
    x = conv.t(ins[0])
    if conv.opset < 11:
        scales = const_value(ins[1], "scales").reshape(-1)
        return [_resize_common(conv, node, x, scales, None, A, "asymmetric")]
    sc, sz = opt_input(ins, 2), opt_input(ins, 3)
    scales = None if sc is None else const_value(sc, "scales").reshape(-1)
    sizes = None if sz is None else _sizes(sz, x)
    if scales is not None and scales.size == 0:
        scales = None
    if scales is None and sizes is None:
        raise Unsupported("neither scales nor sizes given")
    roi = opt_input(ins, 1)
    roi = None if roi is None else const_value(roi, "roi").reshape(-1)
    return [_resize_common(conv, node, x, scales, sizes, A, "half_pixel",
                           None if roi is None or roi.size == 0 else roi)]


def _sizes(v, x):
    """Resize's ``sizes``; exporters write ``Concat(Shape(x)[:2], [H, W])``, whose batch
    extent (a :class:`.onnx_fold.BatchDim` at its own axis) means "unchanged"."""
    from .onnx_fold import BatchDim, is_symbolic
    if not isinstance(v, PendingConst) or not is_symbolic(v.value):
        return const_ints(v, "sizes")
    out = []
    for k, t in enumerate(np.asarray(v.value).reshape(-1)):
        if isinstance(t, BatchDim):
            if k >= x.nb or t != BatchDim(k):
                raise Unsupported(f"sizes {v.value.tolist()}: a batch extent at axis {k}")
            out.append(None)
        else:
            out.append(int(t))
    return out


def _upsample(conv, node, ins, A):
    x = conv.t(ins[0])
    scales = np.asarray(A["scales"]) if "scales" in A else \
        const_value(ins[1], "scales").reshape(-1)
    B = dict(A)
    if B.get("mode", "nearest") == "nearest":
        B["nearest_mode"] = "floor"        # Upsample's nearest: floor(x_out / scale)
    return [_resize_common(conv, node, x, scales, None, B, "asymmetric")]


# ------------------------------------------------------------------- Trilu, CumSum
def _trilu(conv, node, ins, A):
    x = conv.t(ins[0])
    k = const_ints(opt_input(ins, 1), "k")
    k = 0 if not k else k[0]
    s = list(conv.b.shape(x.id))
    if len(s) < 2:
        raise Unsupported("Trilu of a per-example value of rank < 2")
    n, m = s[-2], s[-1]
    i, j = np.arange(n).reshape(-1, 1), np.arange(m).reshape(1, -1)
    keep = (j - i >= k) if int(A.get("upper", 1)) else (j - i <= k)
    zero = _const(conv, np.zeros((n, m)), "zero")
    return [conv.b.apply("where", [x, zero], condition=keep.tolist())]


def _slice_axis(conv, x, a, i):
    return conv.b.apply("slice", [x], starts=[i], ends=[i + 1], axes=[a])


def cumulative(conv, ins, A, op, identity):
    """CumSum (``add``, 0) and CumProd (``mul``, 1): the running ``op`` along the axis in
    order (one rounding per step, as the sequential reference); ``exclusive`` starts from
    ``identity``, ``reverse`` runs from the end."""
    x = conv.t(ins[0])
    a = conv.b.axis(const_ints(ins[1], "axis")[0], x)
    n = conv.b.shape(x.id)[a]
    order = range(n - 1, -1, -1) if int(A.get("reverse", 0)) else range(n)
    exclusive = int(A.get("exclusive", 0))
    parts, acc = {}, None
    for i in order:
        xi = _slice_axis(conv, x, a, i)
        if exclusive:
            parts[i] = acc
        acc = xi if acc is None else conv.b.apply(op, [acc, xi])
        if not exclusive:
            parts[i] = acc
    if exclusive:
        parts[next(iter(order))] = _constant_slice(conv, x, a, identity)
    return [conv.b.concat([parts[i] for i in range(n)], a + x.nb)]


def _cumsum(conv, node, ins, A):
    return cumulative(conv, ins, A, "add", 0.0)


def _constant_slice(conv, x, a, value):
    """``value`` in the shape of one slice of axis ``a`` (an exclusive scan's first entry):
    a constant broadcast over the batch, never ``0 * x`` (inf * 0 is NaN)."""
    s = list(conv.b.shape(x.id))
    s[a] = 1
    z = _const(conv, np.full(s, value), "identity")
    from .interchange import Batched
    if x.nb:
        return Batched(conv.b.add("broadcast_to", [z.id], shape=s), x.nb)
    return z


# ------------------------------------------------------------------------- Einsum
def _einsum(conv, node, ins, A):
    eq = A["equation"].replace(" ", "")
    if "..." in eq:
        raise Unsupported(f"equation {eq!r} (an ellipsis)")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if not arrow:             # implicit output: the indices seen once, in order
        seen = "".join(terms)
        out = "".join(sorted(c for c in set(seen) if seen.count(c) == 1))
    if any(len(set(t)) != len(t) for t in terms) or len(set(out)) != len(out):
        raise Unsupported(f"equation {eq!r} repeats an index within a term (a diagonal)")
    if len(terms) == 1 and len(ins) == 1:
        return [_einsum_one(conv, conv.t(ins[0]), terms[0], out)]
    if len(terms) != 2 or len(ins) != 2:
        raise Unsupported(f"equation {eq!r}: {len(terms)} operands (one or two are mapped)")
    ta, tb = terms
    a, b = conv.aligned(ins[0], ins[1], matmul=True)
    if a.nb or b.nb:
        ra, rb = conv.b.rank(a), conv.b.rank(b)
        if ra != len(ta) or rb != len(tb):
            raise Unsupported("ranks do not match the equation")
    batch = [c for c in ta if c in tb and c in out]
    contract = [c for c in ta if c in tb and c not in out]
    free_a = [c for c in ta if c not in tb]
    free_b = [c for c in tb if c not in ta]
    if any(c not in out for c in free_a + free_b):
        raise Unsupported(f"equation {eq!r} sums an index of one operand only")
    if a.nb or b.nb:
        if not batch or ta[0] != batch[0] or tb[0] != batch[0] or out[0] != batch[0]:
            raise Unsupported(f"equation {eq!r} moves the batch axis")
    sa = dict(zip(ta, _full_shape(conv, a)))
    sb = dict(zip(tb, _full_shape(conv, b)))
    for c in batch + contract:
        if sa[c] != sb[c] and None not in (sa[c], sb[c]):
            raise Unsupported(f"index {c!r}: extents {sa[c]} and {sb[c]} differ")
    prod = lambda cs, s: int(np.prod([s[c] for c in cs], dtype=np.int64))  # noqa: E731
    # a -> [batch..., free_a, contract], b -> [batch..., contract, free_b]
    a = _permute_to(conv, a, ta, batch + free_a + contract)
    b = _permute_to(conv, b, tb, batch + contract + free_b)
    bshape = [sa[c] for c in batch][1 if a.nb else 0:]
    a = conv.b.apply("reshape", [a], shape=bshape + [prod(free_a, sa), prod(contract, sa)])
    b = conv.b.apply("reshape", [b], shape=bshape + [prod(contract, sb), prod(free_b, sb)])
    y = conv.b.apply("matmul", [a, b])
    y = conv.b.apply("reshape", [y], shape=bshape + [sa[c] for c in free_a] +
                     [sb[c] for c in free_b])
    return [_permute_to(conv, y, batch + free_a + free_b, list(out))]


def _einsum_one(conv, x, t, out):
    """One operand: a sum over the indices the output drops, then a transpose."""
    drop = [k for k, c in enumerate(t) if c not in out]
    if drop:
        if len(drop) == len(t):
            if x.nb:
                raise Unsupported("sums over every axis, the batch axis included")
            return conv.b.apply("sum", [x]) if t else x
        x = conv.b.reduce("reduce_sum", x, drop, False)
        t = "".join(c for c in t if c in out)
    return _permute_to(conv, x, list(t), list(out))


def _full_shape(conv, v):
    return [None] * v.nb + list(conv.b.shape(v.id))


def _permute_to(conv, v, have, want):
    perm = [have.index(c) for c in want]
    if perm == list(range(len(perm))):
        return v
    return conv.b.permute(v, perm)


CONVERTERS = {
    "InstanceNormalization": _instance_norm,
    "GroupNormalization": _group_norm,
    "ConvTranspose": _conv_transpose,
    "Resize": _resize,
    "Upsample": _upsample,
    "Trilu": _trilu,
    "CumSum": _cumsum,
    "Einsum": _einsum,
}
