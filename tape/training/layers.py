"""Layers written once against the :class:`~tape.ops_interface.Ops` interface.

A layer's forward is ``layer(f, x, prefix)`` where ``f`` is a :class:`Forward`: the
interpreter (``f.ops``), the references of the named state (``f.ref(name)``), the mode
(``f.training``) and two hooks -- ``f.random(name, shape, p)`` for a dropout mask and
``f.side(name, ref)`` for values the trainer reads back after the pass (batch statistics).
The eager trainer and the typed-graph trainer run this same text; only what a reference
is differs.

State is named and ordered: parameters in module order (``0.weight``, ``0.bias``, ...),
then buffers (``1.running_mean``, ...).  Every op used is an op-table op, so forward and
reverse rules come from :mod:`graph.optable` and work in every point context.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from ..errors import TapeError


class Forward:
    """What a layer sees during one forward pass (see the module docstring)."""

    def __init__(self, ops, refs: dict, training: bool, random, side: dict | None = None):
        self.ops = ops
        self.refs = refs
        self.training = bool(training)
        self._random = random
        self.sides = {} if side is None else side

    def ref(self, name: str):
        try:
            return self.refs[name]
        except KeyError:
            raise TapeError(f"forward: no state entry named {name!r} (have: "
                            f"{', '.join(self.refs) or 'none'})") from None

    def random(self, name: str, shape: tuple, p: Fraction):
        """A dropout mask reference of ``shape``: entries 0 or 1/(1-p)."""
        return self._random(name, tuple(shape), p)

    def side(self, name: str, ref) -> None:
        self.sides[name] = ref


# ------------------------------------------------------------------------------ modules
class Module:
    """Base class: named parameters, buffers and children; ``forward(f, x, prefix)``."""

    def children(self) -> list:
        """``[(name, module), ...]`` in forward order."""
        return []

    def local_params(self) -> list:
        """``[(name, shape), ...]`` of this module's own parameters."""
        return []

    def local_buffers(self) -> list:
        """``[(name, shape, initial value as decimal string), ...]``."""
        return []

    def init_param(self, name: str, shape: tuple, rng) -> np.ndarray:
        raise TapeError(f"{type(self).__name__}: no initialiser for parameter {name!r}")

    def forward(self, f: Forward, x, prefix: str):
        raise NotImplementedError

    def __call__(self, f: Forward, x, prefix: str = ""):
        return self.forward(f, x, prefix)

    # --------------------------------------------------------------- the state tree
    def modules(self) -> list:
        """``[(prefix, module), ...]`` in pre-order (iterative: no recursion)."""
        out, stack = [], [("", self)]
        while stack:
            prefix, m = stack.pop()
            out.append((prefix, m))
            kids = m.children()
            for name, c in reversed(kids):
                stack.append((f"{prefix}{name}.", c))
        return out

    def named_parameters(self) -> list:
        """``[(full name, shape, module, local name), ...]`` in module order."""
        return [(prefix + n, tuple(s), m, n) for prefix, m in self.modules()
                for n, s in m.local_params()]

    def named_buffers(self) -> list:
        """``[(full name, shape, initial decimal string), ...]`` in module order."""
        return [(prefix + n, tuple(s), init) for prefix, m in self.modules()
                for n, s, init in m.local_buffers()]

    def init_parameters(self, rng) -> dict:
        """``{name: float64 array}`` drawn from ``rng`` in parameter order."""
        return {name: np.asarray(m.init_param(local, shape, rng), dtype=np.float64)
                for name, shape, m, local in self.named_parameters()}


def _uniform(rng, shape, bound: float) -> np.ndarray:
    return rng.uniform(-bound, bound, size=shape)


class Linear(Module):
    """``y = x W^T + b`` with ``W`` [out, in], ``b`` [out] (the op table's ``linear``).

    Initialised as PyTorch's nn.Linear: both U(-1/sqrt(in), 1/sqrt(in))."""

    def __init__(self, in_features: int, out_features: int):
        for what, v in (("in_features", in_features), ("out_features", out_features)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise TapeError(f"Linear: {what} must be a positive int, got {v!r}")
        self.in_features, self.out_features = int(in_features), int(out_features)

    def local_params(self):
        return [("weight", (self.out_features, self.in_features)), ("bias", (self.out_features,))]

    def init_param(self, name, shape, rng):
        return _uniform(rng, shape, 1.0 / math.sqrt(self.in_features))

    def forward(self, f, x, prefix):
        return f.ops.linear(x, f.ref(prefix + "weight"), f.ref(prefix + "bias"))

    def __repr__(self):
        return f"Linear({self.in_features}, {self.out_features})"


class _Activation(Module):
    op = ""

    def forward(self, f, x, prefix):
        return f.ops.apply(self.op, x)

    def __repr__(self):
        return f"{type(self).__name__}()"


class ReLU(_Activation):
    op = "relu"


class Tanh(_Activation):
    op = "tanh"


class Sigmoid(_Activation):
    op = "sigmoid"


class Dropout(Module):
    """Training: ``x * mask`` with a mask of 0 and 1/(1-p) drawn from the trainer's seeded
    generator; the mask is a recorded value (a constant on the tape, an input of the typed
    graph), so the reverse pass differentiates exactly the function evaluated.
    Evaluation: the identity."""

    def __init__(self, p="0.5"):
        try:
            q = Fraction(str(p))
        except (ValueError, ZeroDivisionError):
            raise TapeError(f"Dropout: p must be a number in [0, 1), got {p!r}") from None
        if not 0 <= q < 1:
            raise TapeError(f"Dropout: p must be in [0, 1), got {p}")
        self.p = q

    def forward(self, f, x, prefix):
        if not f.training or self.p == 0:
            return x
        mask = f.random(prefix + "mask", f.ops.shape(x), self.p)
        return f.ops.mul(x, mask)

    def __repr__(self):
        return f"Dropout(p={self.p})"


class BatchNorm1d(Module):
    """Batch normalisation over the batch axis of ``[N, C]`` inputs.

    Training: batch mean and biased batch variance, composed of op-table ops so the tape
    differentiates through them; the running statistics are updated by the trainer from
    the side values ``mean``/``var`` as ``r <- (1 - m) r + m s`` with the unbiased variance
    (PyTorch's rule).  Evaluation: the op table's ``batchnorm_eval`` on the running stats.
    """

    def __init__(self, num_features: int, eps="1e-5", momentum="0.1"):
        if isinstance(num_features, bool) or not isinstance(num_features, (int, np.integer)) \
                or num_features < 1:
            raise TapeError(f"BatchNorm1d: num_features must be a positive int, got "
                            f"{num_features!r}")
        self.num_features = int(num_features)
        self.eps, self.momentum = str(eps), str(momentum)

    def local_params(self):
        c = (self.num_features,)
        return [("weight", c), ("bias", c)]

    def local_buffers(self):
        c = (self.num_features,)
        return [("running_mean", c, "0"), ("running_var", c, "1")]

    def init_param(self, name, shape, rng):
        return np.ones(shape) if name == "weight" else np.zeros(shape)

    def _check(self, f, x):
        s = f.ops.shape(x)
        if len(s) != 2 or s[1] != self.num_features:
            raise TapeError(f"BatchNorm1d({self.num_features}): expected input [N, "
                            f"{self.num_features}], got {list(s)}")
        return s

    def forward(self, f, x, prefix):
        ops = f.ops
        s = self._check(f, x)
        gamma, beta = f.ref(prefix + "weight"), f.ref(prefix + "bias")
        if not f.training:
            return ops.apply("batchnorm_eval", x, f.ref(prefix + "running_mean"),
                             f.ref(prefix + "running_var"), gamma, beta,
                             ops.const(self.eps, name="eps"), axis=1)
        if s[0] < 2:
            raise TapeError(f"BatchNorm1d: training needs more than one value per channel, "
                            f"got input {list(s)}")
        mean = ops.apply("reduce_mean", x, axis=0)
        d = ops.sub(x, mean)
        var = ops.apply("reduce_mean", ops.mul(d, d), axis=0)      # biased, as torch
        inv = ops.div(ops.const("1", name="one"),
                      ops.sqrt(ops.add(var, ops.const(self.eps, name="eps"))))
        f.side(prefix + "mean", mean)
        f.side(prefix + "var", var)
        return ops.add(ops.mul(ops.mul(d, inv), gamma), beta)

    def update_running(self, ctx, prefix: str, buffers: dict, sides: dict, n: int) -> None:
        """The running-statistic update from one training pass over ``n`` samples."""
        m = ctx.convert(self.momentum)
        keep = ctx.sub(ctx.ones(()), m)
        mean, var = sides[prefix + "mean"], sides[prefix + "var"]
        unbiased = ctx.mul(var, ctx.div(ctx.convert(n), ctx.convert(n - 1)))
        for name, stat in (("running_mean", mean), ("running_var", unbiased)):
            key = prefix + name
            buffers[key] = ctx.add(ctx.mul(keep, buffers[key]), ctx.mul(m, stat))

    def __repr__(self):
        return f"BatchNorm1d({self.num_features})"


class LayerNorm(Module):
    """Layer normalisation over the last axis (the op table's ``layernorm``)."""

    def __init__(self, normalized_shape: int, eps="1e-5"):
        if isinstance(normalized_shape, bool) or not isinstance(normalized_shape, (int, np.integer)) \
                or normalized_shape < 1:
            raise TapeError(f"LayerNorm: normalized_shape must be a positive int, got "
                            f"{normalized_shape!r}")
        self.n = int(normalized_shape)
        self.eps = str(eps)

    def local_params(self):
        return [("weight", (self.n,)), ("bias", (self.n,))]

    def init_param(self, name, shape, rng):
        return np.ones(shape) if name == "weight" else np.zeros(shape)

    def forward(self, f, x, prefix):
        ops = f.ops
        s = ops.shape(x)
        if not s or s[-1] != self.n:
            raise TapeError(f"LayerNorm({self.n}): input's last axis must be {self.n}, got "
                            f"{list(s)}")
        return ops.apply("layernorm", x, f.ref(prefix + "weight"), f.ref(prefix + "bias"),
                         ops.const(self.eps, name="eps"), axis=len(s) - 1)

    def __repr__(self):
        return f"LayerNorm({self.n})"


class Sequential(Module):
    """Children applied in order; they are named ``0``, ``1``, ... as in PyTorch."""

    def __init__(self, *layers):
        for i, m in enumerate(layers):
            if not isinstance(m, Module):
                raise TapeError(f"Sequential: layer {i} is a {type(m).__name__}, not a Module")
        self.layers = list(layers)

    def children(self):
        return [(str(i), m) for i, m in enumerate(self.layers)]

    def forward(self, f, x, prefix):
        for name, m in self.children():
            x = m(f, x, f"{prefix}{name}.")
        return x

    def __repr__(self):
        return "Sequential(" + ", ".join(repr(m) for m in self.layers) + ")"


def mlp(sizes, activation: str = "tanh") -> Sequential:
    """``Linear(s0, s1), act, Linear(s1, s2), act, ..., Linear`` (no final activation)."""
    acts = {"relu": ReLU, "tanh": Tanh, "sigmoid": Sigmoid}
    if activation not in acts:
        raise TapeError(f"mlp: unknown activation {activation!r} (known: {', '.join(acts)})")
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(acts[activation]())
    return Sequential(*layers)
