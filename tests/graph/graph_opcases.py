"""Op test cases shared by the graph op tests: shapes, attributes, domains and an
independent reference per op (numpy / torch in float64; numpy on Fraction object arrays
for the exact ones).  Input values are binary32 numbers, so every context reads the SAME
real inputs exactly and differences come from the arithmetic alone."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import torch
import torch.nn.functional as F

from graph_opcases_networks import network_cases
from graph_opcases_functions import function_cases

T = lambda a: torch.tensor(np.asarray(a, dtype=np.float64))  # noqa: E731


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _naive_conv(x, w, b, stride, pad, dil, groups):
    """Direct-loop cross-correlation on object or float arrays (NCHW, one sample)."""
    C, H, W = x.shape
    O, Cg, KH, KW = w.shape
    xp = np.zeros((C, H + 2 * pad, W + 2 * pad), dtype=x.dtype)
    if x.dtype == object:
        xp[...] = Fraction(0)
    xp[:, pad:pad + H, pad:pad + W] = x
    OH = (H + 2 * pad - dil * (KH - 1) - 1) // stride + 1
    OW = (W + 2 * pad - dil * (KW - 1) - 1) // stride + 1
    out = np.empty((O, OH, OW), dtype=x.dtype)
    Og = O // groups
    for o in range(O):
        gi = o // Og
        for i in range(OH):
            for j in range(OW):
                acc = b[o]
                for c in range(Cg):
                    for u in range(KH):
                        for v in range(KW):
                            acc = acc + w[o, c, u, v] * xp[gi * Cg + c, i * stride + u * dil,
                                                           j * stride + v * dil]
                out[o, i, j] = acc
    return out


def _naive_pool(x, k, stride, pad, mode):
    C, H, W = x.shape
    OH = (H + 2 * pad - k) // stride + 1
    OW = (W + 2 * pad - k) // stride + 1
    out = np.empty((C, OH, OW), dtype=x.dtype)
    for c in range(C):
        for i in range(OH):
            for j in range(OW):
                vals = []
                for u in range(k):
                    for v in range(k):
                        h, w = i * stride + u - pad, j * stride + v - pad
                        if 0 <= h < H and 0 <= w < W:
                            vals.append(x[c, h, w])
                        elif mode == "avg":
                            vals.append(0 * x[0, 0, 0])
                if mode == "max":
                    out[c, i, j] = max(vals)
                else:
                    s = vals[0]
                    for t in vals[1:]:
                        s = s + t
                    out[c, i, j] = s / (k * k)
    return out


def case(op, parents, ref, *, attrs=None, params=None, domain=None, exact=False,
         smooth=True, per_sample=False, name=None, integer=()):
    """``exact``: the op is rational arithmetic (the rational context computes it exactly
    and ``ref`` works on Fraction object arrays).  References always see one sample.
    ``integer``: positions of parents holding exact integers (indices), which tests never
    perturb (no tangent, no box around them)."""
    return dict(op=op, parents=parents, ref=ref, attrs=attrs or {}, params=params or {},
                domain=domain or {}, exact=exact, smooth=smooth, per_sample=per_sample,
                name=name or op, integer=tuple(integer))


CONV_ATTRS = dict(kernel_size=3, out_channels=4, stride=2, padding=1, dilation=1, groups=2)

CASES = [
    case("add", [(3, 4), (4,)], lambda a, b: a + b, exact=True),
    case("sub", [(2, 1), (3,)], lambda a, b: a - b, exact=True),
    case("mul", [(3, 4), (3, 1)], lambda a, b: a * b, exact=True),
    case("div", [(3, 4), (4,)], lambda a, b: a / b, domain={1: "pos"}, exact=True),
    case("max", [(3, 4), (4,)], np.maximum, exact=True, smooth=False),
    case("min", [(3, 4), (3, 4)], np.minimum, exact=True, smooth=False),
    case("neg", [(2, 3)], lambda a: -a, exact=True),
    case("abs", [(2, 3)], np.abs, exact=True, smooth=False),
    case("sqrt", [(2, 3)], np.sqrt, domain={0: "pos"}),
    case("exp", [(2, 3)], np.exp),
    case("log", [(2, 3)], np.log, domain={0: "pos"}),
    case("safe_log", [(2, 3)], lambda a: np.log(np.maximum(a, 1e-12)), domain={0: "pos"}),
    case("relu", [(2, 3)], lambda a: np.maximum(a, 0), exact=True, smooth=False),
    case("tanh", [(2, 3)], np.tanh),
    case("sigmoid", [(2, 3)], lambda a: 1 / (1 + np.exp(-a))),
    case("softplus", [(2, 3)], lambda a: np.log1p(np.exp(a))),
    case("sin", [(2, 3)], np.sin),
    case("cos", [(2, 3)], np.cos),
    case("erf", [(2, 3)], lambda a: torch.erf(T(a)).numpy()),
    case("atan", [(2, 3)], np.arctan),
    case("gelu", [(2, 3)], lambda a: F.gelu(T(a)).numpy()),
    case("matmul", [(2, 3), (3, 4)], np.matmul, exact=True),
    case("matmul", [(3,), (3, 2)], np.matmul, exact=True, name="matmul-vec"),
    case("matmul", [(2, 2, 3), (3,)], np.matmul, exact=True, name="matmul-batched"),
    case("linear", [(2, 4)], lambda x, W, b: x @ W.T + b, params={"W": (3, 4), "b": (3,)},
         attrs={"out_features": 3}, exact=True),
    case("conv2d", [(4, 5, 5)],
         lambda x, w, b: _naive_conv(x, w, b, 2, 1, 1, 2),
         attrs=CONV_ATTRS, params={"weight": (4, 2, 3, 3), "bias": (4,)}, exact=True,
         per_sample=True),
    case("conv2d", [(2, 5, 6)],
         lambda x, w, b: F.conv2d(T(x)[None], T(w), T(b), stride=1, padding=0,
                                  dilation=2).numpy()[0],
         attrs=dict(kernel_size=[2, 3], dilation=2, out_channels=3), params={"weight": (3, 2, 2, 3), "bias": (3,)},
         per_sample=True, name="conv2d-dilated"),
    case("max_pool2d", [(2, 5, 5)], lambda x: _naive_pool(x, 3, 2, 1, "max"),
         attrs=dict(kernel_size=3, stride=2, padding=1), exact=True, smooth=False,
         per_sample=True),
    case("avg_pool2d", [(2, 5, 5)], lambda x: _naive_pool(x, 3, 2, 1, "avg"),
         attrs=dict(kernel_size=3, stride=2, padding=1), exact=True, per_sample=True),
    case("sum", [(2, 3)], lambda a: np.sum(a), exact=True, per_sample=True),
    case("reduce_sum", [(2, 3, 4)], lambda a: np.sum(a, axis=1), attrs={"axis": 1},
         exact=True, per_sample=True),
    case("reduce_mean", [(2, 3, 4)], lambda a: np.sum(a, axis=(0, 2), keepdims=True) / 8,
         attrs={"axis": [0, -1], "keepdims": True}, exact=True, per_sample=True),
    case("softmax", [(2, 3, 4)], lambda a: _softmax(a, 1), attrs={"axis": 1}, per_sample=True),
    case("log_softmax", [(3, 4)], lambda a: F.log_softmax(T(a), dim=0).numpy(),
         attrs={"axis": 0}, per_sample=True),
    case("layernorm", [(2, 3, 4)],
         lambda x, g, b, eps: F.layer_norm(T(x), (3, 4), T(g), T(b), float(eps)).numpy(),
         attrs={"axis": 1}, params={"gamma": (3, 4), "beta": (3, 4), "eps": ()},
         per_sample=True),
    case("batchnorm_eval", [(3, 4)],
         lambda x, m, v, g, b, eps: F.batch_norm(T(x)[None], T(m), T(v), T(g), T(b),
                                                 training=False, eps=float(eps)).numpy()[0],
         params={"mean": (3,), "var": (3,), "gamma": (3,), "beta": (3,), "eps": ()},
         domain={"var": "pos", "eps": "pos"}, per_sample=True),
    case("reshape", [(2, 6)], lambda a: a.reshape(3, 4), attrs={"shape": [3, -1]},
         exact=True, per_sample=True),
    case("flatten", [(2, 3, 2)], lambda a: a.reshape(2, 6), attrs={"start_axis": 1},
         exact=True, per_sample=True),
    case("permute", [(2, 3, 4)], lambda a: np.transpose(a, (2, 0, 1)),
         attrs={"perm": [2, 0, 1]}, exact=True, per_sample=True),
    case("concat", [(2, 3), (2, 2), (2, 1)], lambda a, b, c: np.concatenate([a, b, c], axis=1),
         attrs={"axis": -1}, exact=True, per_sample=True),
    case("broadcast_to", [(3,)], lambda a: np.broadcast_to(a, (2, 3)), attrs={"shape": [2, 3]},
         exact=True, per_sample=True),
    case("mse_loss", [(2, 3), (2, 3)], lambda p, t: np.sum((p - t) ** 2) / 6, exact=True,
         per_sample=True),
    case("detach", [(2, 3)], lambda a: a, exact=True),
]
CASES += network_cases(case)  # the ops of real networks (graph_opcases_networks.py)
CASES += function_cases(case)  # FPCore's functions and logic ops (graph_opcases_functions.py)


def draw(shape, rng, domain=None, eps=False):
    """binary32-representable values: in (-1, 1), or (0.25, 2) for positive domains."""
    if eps:
        return np.asarray(float(np.float32(1e-3)))
    if callable(domain):          # a case's own sampler (acosh: x > 1)
        v = np.asarray(domain(rng, shape))
    elif domain == "pos":
        v = rng.uniform(0.25, 2.0, size=shape)
    else:
        v = rng.uniform(-1.0, 1.0, size=shape)
    return np.asarray(v.astype(np.float32).astype(np.float64))


def make_args(c, rng, batch=()):
    """(parent arrays with leading ``batch`` axes, param arrays) as float64."""
    parents = [draw(tuple(batch) + tuple(s), rng, c["domain"].get(i)) for i, s in enumerate(c["parents"])]
    params = [draw(s, rng, c["domain"].get(n), eps=(n == "eps")) for n, s in c["params"].items()]
    return parents, params


def reference(c, parents, params, nb=0):
    """The reference output (float64 or Fraction object arrays), looping the batch if needed."""
    if nb == 0:
        return np.asarray(c["ref"](*parents, *params))
    bs = parents[0].shape[:nb]
    outs = [np.asarray(c["ref"](*[p[idx] for p in parents], *params)) for idx in np.ndindex(*bs)]
    return np.stack(outs).reshape(bs + outs[0].shape)


def to_fractions(a):
    a = np.asarray(a, dtype=np.float64)
    out = np.empty(a.shape, dtype=object)
    for idx in np.ndindex(*a.shape):
        out[idx] = Fraction(float(a[idx]))
    return out
