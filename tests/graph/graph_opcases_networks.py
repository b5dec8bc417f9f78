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
        case("leaky_relu", [(2, 3)], exact_or_torch(_leaky_exact(0.01),
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


def network_cases(case):
    """Every case of this module, built with :func:`graph_opcases.case`."""
    return activation_cases(case)
