"""Op test cases of the ops real networks need (activations, shape ops, reductions,
N-d convolution and pooling), in the format of :mod:`graph_opcases`; that module pulls
them into its shared ``CASES`` with one line (``network_cases(case)``).

References are independent of the op rules: torch in float64 for the float contexts,
numpy formulas on ``Fraction`` object arrays for the exact (rational) ones."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import torch
import torch.nn.functional as F

T = lambda a: torch.tensor(np.asarray(a, dtype=np.float64))  # noqa: E731


def exact_or_torch(exact_fn, torch_fn):
    """Reference: ``exact_fn`` on Fraction object arrays, torch (float64) otherwise."""
    def ref(*xs):
        if any(np.asarray(x).dtype == object for x in xs):
            return exact_fn(*xs)
        return torch_fn(*[T(x) for x in xs]).numpy()
    return ref


def _q(v):
    return Fraction(v)


def _clip_exact(lo, hi):
    return lambda a: np.minimum(np.maximum(a, _q(lo)), _q(hi))


def _leaky_exact(alpha):
    return lambda a: np.where(a > 0, a, a * _q(alpha))


def _hsig_exact(alpha, beta):
    return lambda a: np.maximum(_q(0), np.minimum(_q(1), a * _q(alpha) + _q(beta)))


def _hswish_exact(a):
    return a * np.minimum(np.maximum(a + 3, _q(0)), _q(6)) / 6


def activation_cases(case):
    return [
        case("clip", [(2, 3)], exact_or_torch(_clip_exact(-0.5, 0.5),
                                              lambda x: torch.clamp(x, -0.5, 0.5)),
             attrs={"min": -0.5, "max": 0.5}, exact=True, smooth=False),
        case("clip", [(2, 3)], exact_or_torch(lambda a: np.maximum(a, _q(0)),
                                              lambda x: torch.clamp(x, min=0.0)),
             attrs={"min": 0}, exact=True, smooth=False, name="clip-min-only"),
        case("leaky_relu", [(2, 3)], exact_or_torch(_leaky_exact("0.01"),
                                                    lambda x: F.leaky_relu(x, 0.01)),
             exact=True, smooth=False),
        case("leaky_relu", [(2, 3)], exact_or_torch(_leaky_exact(-1.5),
                                                    lambda x: F.leaky_relu(x, -1.5)),
             attrs={"alpha": -1.5}, exact=True, smooth=False, name="leaky_relu-negative"),
        case("hardsigmoid", [(2, 3)],
             exact_or_torch(_hsig_exact(1.5, 0.25),
                            lambda x: torch.clamp(1.5 * x + 0.25, 0.0, 1.0)),
             attrs={"alpha": 1.5, "beta": 0.25}, exact=True, smooth=False),
        case("hardswish", [(2, 3)], exact_or_torch(_hswish_exact, F.hardswish), exact=True),
        case("elu", [(2, 3)], lambda a: F.elu(T(a), 0.75).numpy(), attrs={"alpha": 0.75},
             smooth=False),
        case("selu", [(2, 3)], lambda a: F.selu(T(a)).numpy(), smooth=False),
        case("silu", [(2, 3)], lambda a: F.silu(T(a)).numpy()),
        case("mish", [(2, 3)], lambda a: F.mish(T(a)).numpy()),
        case("gelu_tanh", [(2, 3)], lambda a: F.gelu(T(a), approximate="tanh").numpy()),
    ]


COND = [[True, False, True], [False, False, True]]


def _np_pad(mode):
    return {"constant": "constant", "reflect": "reflect", "edge": "edge", "wrap": "wrap"}[mode]


def _pad_ref(pads, mode, value=0):
    def ref(a):
        if any(p < 0 for p in pads):                       # crop first, then pad
            k = len(pads) // 2
            sl = tuple(slice(max(-pads[i], 0), a.shape[i] - max(-pads[i + k], 0))
                       for i in range(k))
            a = a[sl]
            pads2 = [max(p, 0) for p in pads]
        else:
            pads2 = list(pads)
        k = len(pads2) // 2
        width = [(pads2[i], pads2[i + k]) for i in range(k)]
        if mode == "constant":
            fill = _q(value) if a.dtype == object else value
            return np.pad(a, width, mode="constant", constant_values=fill)
        return np.pad(a, width, mode=_np_pad(mode))
    return ref


def shape_cases(case):
    return [
        case("slice", [(4, 6)], lambda a: a[1:3, ::-2], attrs={"starts": [1, -1],
             "ends": [3, -100], "steps": [1, -2]}, exact=True),
        case("slice", [(3, 5, 4)], lambda a: a[:, 1:, :], attrs={"starts": [1], "ends": [99],
             "axes": [-2]}, exact=True, name="slice-axes"),
        case("squeeze", [(3, 1, 2, 1)], lambda a: a.reshape(3, 2, 1), attrs={"axes": [1]},
             exact=True),
        case("squeeze", [(1, 3, 1)], lambda a: a.reshape(3), exact=True, name="squeeze-all"),
        case("unsqueeze", [(3, 2)], lambda a: a.reshape(1, 3, 2, 1), attrs={"axes": [0, -1]},
             exact=True),
        case("gather", [(4, 3)], lambda a: a[:, [[2, 0], [-1, 2]]], attrs={"axis": 1,
             "indices": [[2, 0], [-1, 2]]}, exact=True),
        case("gather", [(4, 3)], lambda a: a[1], attrs={"indices": 1}, exact=True,
             name="gather-scalar"),
        # run-time indices (token ids): the second parent holds integers in [-3, 3)
        case("take", [(4, 3), (2, 2)], lambda a, i: a[:, np.asarray(i).astype(np.int64)],
             attrs={"axis": 1}, exact=True, smooth=False, integer=(1,),
             domain={1: lambda rng, shape: rng.integers(-3, 3, shape).astype(np.float64)}),
        case("pad", [(3, 4)], _pad_ref([1, 0, 2, 1], "constant", 0.5),
             attrs={"pads": [1, 0, 2, 1], "value": 0.5}, exact=True),
        case("pad", [(3, 4)], _pad_ref([2, 1, 1, 3], "reflect"),
             attrs={"pads": [2, 1, 1, 3], "mode": "reflect"}, exact=True, name="pad-reflect"),
        case("pad", [(3, 4)], _pad_ref([2, 1, 0, 3], "edge"),
             attrs={"pads": [2, 1, 0, 3], "mode": "edge"}, exact=True, name="pad-edge"),
        case("pad", [(3, 4)], _pad_ref([-1, 2, 1, -2], "constant"),
             attrs={"pads": [-1, 2, 1, -2]}, exact=True, name="pad-crop"),
        case("pad", [(2, 3, 4)], _pad_ref([0, 0, 5, 0, 0, 2], "wrap"),
             attrs={"pads": [0, 0, 5, 0, 0, 2], "mode": "wrap"}, exact=True, name="pad-wrap"),
        case("expand", [(3, 1)], lambda a: np.broadcast_to(a, (2, 3, 4)),
             attrs={"shape": [2, 1, 4]}, exact=True),
        case("tile", [(2, 3)], lambda a: np.tile(a, (3, 2)), attrs={"repeats": [3, 2]},
             exact=True),
        case("where", [(2, 3), (3,)], lambda a, b: np.where(np.array(COND), a, b),
             attrs={"condition": COND}, exact=True),
    ]


def _prod(a, axis):
    out = np.take(a, 0, axis=axis)
    for k in range(1, a.shape[axis]):
        out = out * np.take(a, k, axis=axis)
    return out


def reduce_cases(case):
    return [
        case("reduce_max", [(2, 3, 4)], lambda a: np.max(a, axis=(0, 2), keepdims=True),
             attrs={"axis": [0, -1], "keepdims": True}, exact=True, smooth=False),
        case("reduce_min", [(2, 3)], lambda a: np.min(a), exact=True, smooth=False),
        case("reduce_prod", [(2, 3, 2)], lambda a: _prod(a, 1), attrs={"axis": 1}, exact=True),
        case("reduce_sum_square", [(2, 3)], lambda a: np.sum(a * a, axis=1, keepdims=True),
             attrs={"axis": -1, "keepdims": True}, exact=True),
        case("global_avg_pool", [(2, 3, 4)], lambda a: np.sum(a, axis=(1, 2), keepdims=True) / 12,
             exact=True),
        case("global_max_pool", [(2, 3, 2, 2)], lambda a: np.max(a, axis=(1, 2, 3), keepdims=True),
             exact=True, smooth=False),
        # index outputs (ties and select_last_index: tests/graph/test_graph_select_ops.py)
        case("argmax", [(3, 4)], lambda a: np.argmax(a, axis=1), attrs={"axis": 1,
             "keepdims": False}, exact=True, smooth=False),
        case("argmin", [(2, 3, 4)], lambda a: np.argmin(a, axis=-1, keepdims=True),
             attrs={"axis": -1}, exact=True, smooth=False),
        case("topk", [(3, 5)], lambda a: -np.sort(-a, axis=1)[:, :3], attrs={"k": 3},
             exact=True, smooth=False),
        case("topk", [(4, 3)], lambda a: np.sort(a, axis=0)[:2], attrs={"k": 2, "axis": 0,
             "largest": False}, exact=True, smooth=False, name="topk-smallest"),
        case("topk_indices", [(3, 5)], lambda a: np.argsort(-a, axis=1)[:, :3],
             attrs={"k": 3}, exact=True, smooth=False),
    ]



def _torch1(fn, **kw):
    """Reference of a per-example [C, ...] op through torch's batched function."""
    return lambda x, *p: fn(T(x)[None], *[T(t) for t in p], **kw).numpy()[0]


def conv_cases(case):
    return [
        case("conv1d", [(4, 9)], _torch1(F.conv1d, stride=2, padding=2, dilation=2, groups=2),
             attrs=dict(kernel_size=3, out_channels=2, stride=2, padding=2, dilation=2, groups=2),
             params={"weight": (2, 2, 3), "bias": (2,)}),
        case("conv1d", [(2, 7)],
             lambda x, w, b: F.conv1d(F.pad(T(x)[None], (2, 1)), T(w), T(b)).numpy()[0],
             attrs=dict(kernel_size=4, padding=[2, 1], out_channels=3), params={"weight": (3, 2, 4), "bias": (3,)},
             name="conv1d-asymmetric"),
        case("conv3d", [(2, 3, 4, 3)], _torch1(F.conv3d, padding=(1, 0, 1)),
             attrs=dict(kernel_size=[2, 2, 3], out_channels=2, padding=[1, 0, 1]),
             params={"weight": (2, 2, 2, 2, 3), "bias": (2,)}),
        case("max_pool1d", [(2, 7)], _torch1(F.max_pool1d, kernel_size=3, stride=2, padding=1,
                                              ceil_mode=True),
             attrs=dict(kernel_size=3, stride=2, padding=1, ceil_mode=True), exact=True,
             smooth=False),
        case("avg_pool1d", [(2, 8)], _torch1(F.avg_pool1d, kernel_size=3, stride=2, padding=1,
                                              ceil_mode=True, count_include_pad=False),
             attrs=dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                        count_include_pad=False)),
        case("max_pool3d", [(2, 3, 4, 5)], _torch1(F.max_pool3d, kernel_size=2, stride=[1, 2, 2],
                                                    dilation=[2, 1, 1]),
             attrs=dict(kernel_size=2, stride=[1, 2, 2], dilation=[2, 1, 1]), exact=True,
             smooth=False),
        case("avg_pool3d", [(2, 3, 4, 5)], _torch1(F.avg_pool3d, kernel_size=[2, 3, 3], stride=2,
                                                    padding=1),
             attrs=dict(kernel_size=[2, 3, 3], stride=2, padding=1)),
    ]


def network_cases(case):
    """Every case of this module, built with :func:`graph_opcases.case`."""
    return activation_cases(case) + shape_cases(case) + reduce_cases(case) + conv_cases(case)
