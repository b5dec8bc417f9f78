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

NETWORK_CASES = {**ACTIVATION_CASES}
