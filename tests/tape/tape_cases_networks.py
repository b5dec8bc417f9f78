"""Gradient cases (tape VJP vs torch autograd and vs 200-bit central differences) of the
ops real networks need; ``test_tape_op_gradients.CASES`` pulls them in with one line.

Format: op -> (argument generators, attrs, torch function of the args)."""
import numpy as np
import torch
import torch.nn.functional as F


def wide(shape, scale=4.0):
    """Normal values spread over the kinks of the activations (+-3, 6)."""
    return lambda r: scale * r.standard_normal(shape)


def anyv(shape):
    return lambda r: r.standard_normal(shape)


ACTIVATION_CASES = {
    "clip": ([wide((3, 4))], {"min": 0, "max": 6}, F.relu6),
    "leaky_relu": ([wide((3, 4))], {"alpha": 0.2}, lambda x: F.leaky_relu(x, 0.2)),
    "hardsigmoid": ([wide((3, 4))], {"alpha": 0.2, "beta": 0.5},
                    lambda x: torch.clamp(0.2 * x + 0.5, 0.0, 1.0)),
    "hardswish": ([wide((3, 4))], {}, F.hardswish),
    "elu": ([wide((3, 4))], {"alpha": 0.5}, lambda x: F.elu(x, 0.5)),
    "selu": ([wide((3, 4))], {}, F.selu),
    "silu": ([wide((3, 4))], {}, F.silu),
    "mish": ([wide((3, 4))], {}, F.mish),
    "gelu_tanh": ([wide((3, 4))], {}, lambda x: F.gelu(x, approximate="tanh")),
}

COND = [[True, False, True, True], [False, False, True, False], [True, True, False, False]]


def _gather(x):
    return x[:, torch.tensor([[2, 0, 2], [-1, 1, 0]]) % 4]


SHAPE_CASES = {
    "slice": ([anyv((4, 6))], {"starts": [3, 1], "ends": [0, 6], "steps": [-1, 2]},
              lambda x: torch.flip(x, [0])[0:3, 1::2]),
    "squeeze": ([anyv((3, 1, 4))], {"axes": [1]}, lambda x: x.squeeze(1)),
    "unsqueeze": ([anyv((3, 4))], {"axes": [1]}, lambda x: x.unsqueeze(1)),
    "gather": ([anyv((3, 4))], {"axis": 1, "indices": [[2, 0, 2], [-1, 1, 0]]}, _gather),
    "pad": ([anyv((3, 4))], {"pads": [1, 2, 2, 3], "mode": "reflect"},
            lambda x: F.pad(x[None], (2, 3, 1, 2), mode="reflect")[0]),
    "expand": ([anyv((3, 1))], {"shape": [2, 3, 4]}, lambda x: x.expand(2, 3, 4)),
    "tile": ([anyv((2, 3))], {"repeats": [2, 3]}, lambda x: x.repeat(2, 3)),
    "where": ([anyv((3, 4)), anyv((4,))], {"condition": COND},
              lambda a, b: torch.where(torch.tensor(COND), a, b)),
}

REDUCE_CASES = {
    "reduce_max": ([anyv((3, 4, 2))], {"axis": [0, 2], "keepdims": True},
                   lambda x: torch.amax(x, dim=(0, 2), keepdim=True)),
    "reduce_min": ([anyv((3, 4))], {"axis": 1}, lambda x: torch.amin(x, dim=1)),
    "reduce_prod": ([anyv((3, 4))], {"axis": 1}, lambda x: torch.prod(x, dim=1)),
    "reduce_sum_square": ([anyv((3, 4))], {}, lambda x: torch.sum(x * x)),
    "global_avg_pool": ([anyv((2, 3, 4))], {}, lambda x: torch.mean(x, dim=(1, 2), keepdim=True)),
    "global_max_pool": ([anyv((2, 3, 4))], {}, lambda x: torch.amax(x, dim=(1, 2), keepdim=True)),
    # indices are piecewise constant: a zero gradient (the 0 * sum keeps torch's graph)
    "argmax": ([anyv((3, 4))], {"axis": 1},
               lambda x: torch.argmax(x, dim=1, keepdim=True).double() + 0.0 * x.sum()),
    "argmin": ([anyv((3, 4))], {"keepdims": False},
               lambda x: torch.argmin(x, dim=0).double() + 0.0 * x.sum()),
    "topk": ([anyv((3, 5))], {"k": 2, "axis": 0, "largest": False},
             lambda x: torch.topk(x, 2, dim=0, largest=False).values),
    "topk_indices": ([anyv((3, 5))], {"k": 3},
                     lambda x: torch.topk(x, 3, dim=-1).indices.double() + 0.0 * x.sum()),
}

CONV_CASES = {
    "conv1d": ([anyv((3, 8)), anyv((4, 3, 3)), anyv((4,))],
               {"kernel_size": 3, "padding": 1, "stride": 2, "out_channels": 4},
               lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1)),
    "conv3d": ([anyv((2, 3, 3, 4)), anyv((4, 1, 2, 2, 3)), anyv((4,))],
               {"kernel_size": [2, 2, 3], "groups": 2, "padding": [1, 0, 1], "dilation": [1, 1, 2],
                "out_channels": 4},
               lambda x, w, b: F.conv3d(x, w, b, groups=2, padding=(1, 0, 1), dilation=(1, 1, 2))),
    "max_pool1d": ([anyv((3, 9))], {"kernel_size": 3, "stride": 2, "ceil_mode": True},
                   lambda x: F.max_pool1d(x, 3, 2, ceil_mode=True)),
    "max_pool3d": ([anyv((2, 3, 4, 4))], {"kernel_size": 2, "padding": 1},
                   lambda x: F.max_pool3d(x, 2, padding=1)),
    "avg_pool1d": ([anyv((3, 9))], {"kernel_size": 4, "stride": 2, "padding": 2,
                                        "ceil_mode": True, "count_include_pad": False},
                   lambda x: F.avg_pool1d(x, 4, 2, 2, ceil_mode=True, count_include_pad=False)),
    "avg_pool3d": ([anyv((2, 3, 4, 5))], {"kernel_size": [2, 2, 3], "stride": 2, "padding": 1},
                   lambda x: F.avg_pool3d(x, (2, 2, 3), 2, 1)),
}

NETWORK_CASES = {**ACTIVATION_CASES, **SHAPE_CASES, **REDUCE_CASES, **CONV_CASES}
