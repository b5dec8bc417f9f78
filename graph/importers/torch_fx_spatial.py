"""torch.fx -> IR mappings of the modules the ONNX side composes in
:mod:`.onnx_ops_spatial`: ``nn.ConvTranspose1d/2d/3d``, ``nn.Upsample`` and
``F.interpolate`` (nearest, nearest-exact, linear/bilinear/trilinear with or without
``align_corners``), ``nn.InstanceNorm1d/2d/3d`` (GroupNorm with one channel per group),
``torch.tril``/``triu``, ``cumsum`` and ``einsum``.

A torch call is translated to the attributes of the ONNX op that means the same and the
ONNX side's composition builds the IR, through :class:`_Shim` (the few converter methods
those compositions read), so each op's arithmetic is written once: ConvTranspose as a
convolution of the zero-inserted input with the flipped kernel, resizing as constant
gathers and ``a * (1 - t) + b * t`` per axis, CumSum as the running sum in order.  Every
mapping's result shape is checked against torch's (ShapeProp)."""
from __future__ import annotations

import types

import numpy as np

from ..optable import OPS
from .interchange import Batched, PendingConst, Unsupported, ir_shape
from . import onnx_ops_spatial as S


class _Shim:
    """The converter methods the ONNX compositions call, over the torch converter."""

    opset = 17

    def __init__(self, conv, spatial=None):
        self.conv = conv
        self.b = conv.b
        self.spatial = spatial              # spatial rank of a channels-first op

    def t(self, v):
        if isinstance(v, PendingConst) and isinstance(v.value, (np.ndarray, np.generic)):
            if v.id is None:              # the compositions' own constants (numpy)
                v.id = self.b.const(np.asarray(v.value, dtype=np.float64))
            return Batched(v.id, 0)
        return self.conv.tensor(v)

    materialize = t

    def aligned(self, a, b, matmul=False):
        return [self.t(a), self.t(b)]

    def _ir_shape(self, op, s, attrs):
        return ir_shape(op, s, attrs)

    def with_channels_first(self, x, fn, what):
        """``fn`` over a per-example [C, spatial...] value: ``x`` with one batch axis, an
        unbatched [C, spatial...] example, or one example [1, C, spatial...]."""
        s = list(self.b.shape(x.id))
        d = self.spatial
        if len(s) == d + 1 and x.nb <= 1:
            return fn(x)
        if len(s) == d + 2 and x.nb == 0 and s[0] == 1:
            y = fn(self.b.apply("reshape", [x], shape=s[1:]))
            return self.b.apply("reshape", [y], shape=[1] + list(self.b.shape(y.id)))
        raise Unsupported(f"{what} of a value of per-example shape {s} with {x.nb} batch axes")


def _x(conv, n, env, i=0, name="input"):
    return conv.tensor(conv.arg(n, env, i, name))


def _checked(conv, n, y):
    """``y`` after checking its per-example shape against torch's."""
    want = conv.out(n, y.nb)
    got = tuple(conv.b.shape(y.id))
    if tuple(want) != got:
        raise Unsupported(f"the IR composition gives shape {list(got)}, torch {list(want)}")
    return y


def _np(t):
    return t.detach().cpu().double().numpy()


def _ints(v, d):
    return [int(t) for t in v] if isinstance(v, (list, tuple)) else [int(v)] * d


# ------------------------------------------------------------------------- ConvTranspose
def m_conv_transpose(conv, n, env, m):
    """nn.ConvTranspose1d/2d/3d: stride, padding, output_padding, dilation, groups."""
    if len(n.args) > 1 or n.kwargs.get("output_size") is not None:
        raise Unsupported("output_size= at call time (give output_padding)")
    if m.padding_mode != "zeros":
        raise Unsupported(f"padding_mode={m.padding_mode!r}")
    d = len(m.kernel_size)
    x = _x(conv, n, env)
    ins = [x, PendingConst(_np(m.weight), n.target + ".weight"),
           None if m.bias is None else PendingConst(_np(m.bias), n.target + ".bias")]
    A = {"kernel_shape": list(m.kernel_size), "strides": list(m.stride),
         "dilations": list(m.dilation), "group": int(m.groups),
         "pads": _ints(m.padding, d) * 2, "output_padding": _ints(m.output_padding, d)}
    y, = S._conv_transpose(_Shim(conv, d), None, ins, A)
    return _checked(conv, n, y)


# ------------------------------------------------------------------------- resizing
_LINEAR = {"linear": 1, "bilinear": 2, "trilinear": 3}


def _resize(conv, n, x, size, scale_factor, mode, align_corners, recompute):
    full = conv.meta_shape(n)
    s = list(conv.b.shape(x.id))
    rank = x.nb + len(s)
    d = rank - 2
    if d < 1:
        raise Unsupported(f"interpolate of a rank-{rank} tensor (N, C and spatial axes)")
    if mode in _LINEAR and _LINEAR[mode] != d:
        raise Unsupported(f"mode {mode!r} on {d} spatial axes")
    if mode not in ("nearest", "nearest-exact") and mode not in _LINEAR:
        raise Unsupported(f"mode {mode!r} (nearest, nearest-exact, linear, bilinear and "
                          f"trilinear are mapped)")
    sf = None if scale_factor is None or recompute else _ints_or_floats(scale_factor, d)
    y = x
    for j in range(d):
        pa = 2 + j - x.nb                   # the per-example axis of spatial axis j
        if pa < 0:
            raise Unsupported("a spatial axis is a batch axis")
        n_in, n_out = s[pa], int(full[2 + j])
        scale = n_out / n_in if sf is None else float(sf[j])
        if mode == "nearest":
            # torch: floor(dst * (1 / scale)), ONNX asymmetric + floor
            y = S._resize_axis(conv_shim(conv), y, pa, n_in, n_out, scale, "nearest",
                               "asymmetric", "floor", _PLAIN)
        elif mode == "nearest-exact":
            # floor((dst + 0.5) / scale) = half_pixel rounded with ties up
            y = S._resize_axis(conv_shim(conv), y, pa, n_in, n_out, scale, "nearest",
                               "half_pixel", "round_prefer_ceil", _PLAIN)
        elif align_corners:
            # (in - 1) / (out - 1) whatever the scale factor: ONNX align_corners on sizes
            y = S._resize_axis(conv_shim(conv), y, pa, n_in, n_out, n_out / n_in, "linear",
                               "align_corners", None, _PLAIN)
        else:
            # max((dst + 0.5) / scale - 0.5, 0): pytorch_half_pixel, clipped
            y = S._resize_axis(conv_shim(conv), y, pa, n_in, n_out, scale, "linear",
                               "pytorch_half_pixel", None, _PLAIN)
    return _checked(conv, n, y)


#: ONNX Resize's cubic facts (coefficient a, exclude_outside, antialias) for the plain
#: nearest/linear modes torch's interpolate maps to: no antialiasing
_PLAIN = (-0.75, False, False)


def conv_shim(conv):
    return _Shim(conv)


def _ints_or_floats(v, d):
    return [float(t) for t in v] if isinstance(v, (list, tuple)) else [float(v)] * d


def f_interpolate(conv, n, env, m=None):
    """F.interpolate / F.upsample(x, size, scale_factor, mode, align_corners, ...)."""
    def a(i, name, default=None):
        return conv.arg(n, env, i, name, default)
    if a(6, "antialias", False):
        raise Unsupported("antialias=True")
    return _resize(conv, n, _x(conv, n, env), a(1, "size"), a(2, "scale_factor"),
                   a(3, "mode", "nearest"), a(4, "align_corners"),
                   a(5, "recompute_scale_factor"))


def m_upsample(conv, n, env, m):
    """nn.Upsample (and nn.UpsamplingNearest2d / UpsamplingBilinear2d)."""
    align = bool(m.align_corners) if m.align_corners is not None else False
    return _resize(conv, n, _x(conv, n, env), m.size, m.scale_factor, m.mode, align,
                   getattr(m, "recompute_scale_factor", None))


# --------------------------------------------------------------------- InstanceNorm
def m_instance_norm(conv, n, env, m):
    """nn.InstanceNorm1d/2d/3d without running statistics: GroupNorm with one channel
    per group (per example and channel, the spatial mean and biased variance)."""
    if m.track_running_stats:
        raise Unsupported("track_running_stats=True (the running statistics replace the "
                          "per-example ones in eval mode)")
    groupnorm = conv.modules.get(conv.torch.nn.GroupNorm)      # the converter's own rule
    if groupnorm is None:
        raise Unsupported("GroupNorm has no mapping")
    x = _x(conv, n, env)
    s = list(conv.b.shape(x.id))
    ca = 1 - x.nb
    if ca < 0 or len(s) < ca + 2:
        raise Unsupported(f"InstanceNorm of a value of per-example shape {s}")
    gn = types.SimpleNamespace(num_groups=s[ca], eps=m.eps, affine=m.affine,
                               weight=m.weight, bias=m.bias)
    return _checked(conv, n, groupnorm(conv, n, env, gn))


# ---------------------------------------------------------------- tril, cumsum, einsum
def _trilu(upper):
    def f(conv, n, env, m=None):
        k = int(conv.arg(n, env, 1, "diagonal", 0))
        y, = S._trilu(_Shim(conv), None, [_x(conv, n, env), PendingConst(np.array([k]), "k")],
                      {"upper": upper})
        return _checked(conv, n, y)
    return f


def f_cumsum(conv, n, env, m=None):
    if n.kwargs.get("dtype") is not None:
        raise Unsupported("dtype= conversion")
    dim = int(conv.arg(n, env, 1, "dim"))
    y, = S._cumsum(_Shim(conv), None, [_x(conv, n, env), PendingConst(np.array([dim]), "dim")],
                   {})
    return _checked(conv, n, y)


def f_einsum(conv, n, env, m=None):
    eq = conv.arg(n, env, 0, "equation")
    ops = [conv.val(t, env) for t in n.args[1:]]
    if len(ops) == 1 and isinstance(ops[0], (list, tuple)):
        ops = list(ops[0])
    if not isinstance(eq, str):
        raise Unsupported("the equation must be a string")
    y, = S._einsum(_Shim(conv), None, ops, {"equation": eq})
    return _checked(conv, n, y)


def tables(torch):
    """``(functions, methods, modules)``: FX target -> mapping, for the available ops."""
    F, nn = torch.nn.functional, torch.nn
    fn = {F.interpolate: f_interpolate, torch.tril: _trilu(0), torch.triu: _trilu(1),
          torch.cumsum: f_cumsum, torch.einsum: f_einsum}
    if hasattr(F, "upsample"):
        fn[F.upsample] = f_interpolate
    methods = {"tril": _trilu(0), "triu": _trilu(1), "cumsum": f_cumsum}
    modules = {nn.ConvTranspose1d: m_conv_transpose, nn.ConvTranspose2d: m_conv_transpose,
               nn.ConvTranspose3d: m_conv_transpose, nn.Upsample: m_upsample,
               nn.UpsamplingNearest2d: m_upsample, nn.UpsamplingBilinear2d: m_upsample,
               nn.InstanceNorm1d: m_instance_norm, nn.InstanceNorm2d: m_instance_norm,
               nn.InstanceNorm3d: m_instance_norm}
    needs = ("reshape", "pad", "unsqueeze", "gather", "slice", "where", "add", "mul",
             "matmul", "conv1d", "conv2d", "conv3d", "reduce_mean", "sqrt", "div", "sub")
    if not all(op in OPS for op in needs):
        return {}, {}, {}
    return fn, methods, modules
