"""Optimizers over named parameters in any point context: SGD (momentum) and Adam.

Hyperparameters are decimal strings converted into the run's context with one rounding
each, so ``rational`` training is exact (SGD; Adam needs ``sqrt``, which a context raises
on when it cannot compute it honestly).  The update rules and their rounding order follow
PyTorch's ``torch.optim.SGD`` / ``torch.optim.Adam`` (single-tensor path).

State (``state_dict``) is everything the next update needs: the kind, the
hyperparameters, the step count and the per-parameter slots (momentum buffers, first and
second moments), so a checkpoint can reproduce the next update bit for bit.
"""
from __future__ import annotations

from fractions import Fraction

from scalarlab.scalars.errors import ContextError

from ..errors import TapeError


def _hyper(name: str, value, lo=None, hi=None, lo_open=False, hi_open=False) -> str:
    try:
        q = Fraction(str(value))
    except (ValueError, ZeroDivisionError):
        raise TapeError(f"optimizer: {name} must be a number, got {value!r}") from None
    bad = (lo is not None and (q < lo or (lo_open and q == lo))) or \
          (hi is not None and (q > hi or (hi_open and q == hi)))
    if bad:
        lb = "(" if lo_open else "["
        rb = ")" if hi_open else "]"
        raise TapeError(f"optimizer: {name}={value} is outside {lb}{lo}, {hi}{rb}")
    return str(value)


class Optimizer:
    """Base class: ``update(ctx, params, grads)`` changes ``params`` (a dict) in place."""

    kind = "?"
    slot_names: tuple = ()

    def __init__(self):
        self.step_count = 0
        self.slots: dict = {s: {} for s in self.slot_names}

    def hyper(self) -> dict:
        raise NotImplementedError

    def update(self, ctx, params: dict, grads: dict) -> None:
        missing = [n for n in params if n not in grads]
        if missing:
            raise TapeError(f"{self.kind}: no gradient for parameter {missing[0]!r}")
        self.step_count += 1
        try:
            self._update(ctx, params, grads)
        except ContextError as exc:
            raise TapeError(f"{self.kind} update in context {ctx.name}: {exc}") from None

    def _update(self, ctx, params, grads):
        raise NotImplementedError

    # ------------------------------------------------------------------- state
    def state_dict(self) -> dict:
        return {"kind": self.kind, "hyper": self.hyper(), "step": self.step_count,
                "slots": {s: dict(v) for s, v in self.slots.items()}}

    def load_state_dict(self, state: dict) -> None:
        if state.get("kind") != self.kind:
            raise TapeError(f"optimizer: state is for {state.get('kind')!r}, this optimizer "
                            f"is {self.kind!r}")
        if state.get("hyper") != self.hyper():
            raise TapeError(f"optimizer {self.kind}: saved hyperparameters "
                            f"{state.get('hyper')} differ from {self.hyper()}")
        step = state.get("step")
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise TapeError(f"optimizer {self.kind}: bad step count {step!r}")
        slots = state.get("slots", {})
        if set(slots) != set(self.slot_names):
            raise TapeError(f"optimizer {self.kind}: slots {sorted(slots)} differ from "
                            f"{sorted(self.slot_names)}")
        self.step_count = step
        self.slots = {s: dict(slots[s]) for s in self.slot_names}


class SGD(Optimizer):
    """``buf <- momentum buf + (1 - dampening) g`` (``buf = g`` on its first step),
    ``p <- p - lr buf``; ``weight_decay`` adds ``wd p`` to ``g`` first (PyTorch)."""

    kind = "sgd"
    slot_names = ("momentum_buffer",)

    def __init__(self, lr="0.01", momentum="0", dampening="0", weight_decay="0"):
        self.lr = _hyper("lr", lr, lo=0)
        self.momentum = _hyper("momentum", momentum, lo=0)
        self.dampening = _hyper("dampening", dampening, lo=0, hi=1)
        self.weight_decay = _hyper("weight_decay", weight_decay, lo=0)
        super().__init__()

    def hyper(self):
        return {"lr": self.lr, "momentum": self.momentum, "dampening": self.dampening,
                "weight_decay": self.weight_decay}

    def _update(self, ctx, params, grads):
        lr = ctx.convert(self.lr)
        use_mom = Fraction(self.momentum) != 0
        mom = ctx.convert(self.momentum)
        damp = ctx.convert(str(1 - Fraction(self.dampening)))
        wd = ctx.convert(self.weight_decay) if Fraction(self.weight_decay) != 0 else None
        bufs = self.slots["momentum_buffer"]
        for name, p in params.items():
            g = grads[name]
            if wd is not None:
                g = ctx.add(g, ctx.mul(wd, p))
            if use_mom:
                buf = bufs.get(name)
                if buf is None:
                    buf = g
                elif Fraction(self.dampening) == 0:
                    buf = ctx.add(ctx.mul(mom, buf), g)
                else:
                    buf = ctx.add(ctx.mul(mom, buf), ctx.mul(damp, g))
                bufs[name] = buf
                g = buf
            params[name] = ctx.sub(p, ctx.mul(lr, g))


class Adam(Optimizer):
    """PyTorch's Adam: ``m, v`` moments, ``step = lr / (1 - b1^t)``,
    ``denom = sqrt(v) / sqrt(1 - b2^t) + eps``, ``p <- p - step m / denom``.  The bias
    corrections are the exact powers rounded once into the context."""

    kind = "adam"
    slot_names = ("exp_avg", "exp_avg_sq")

    def __init__(self, lr="0.001", beta1="0.9", beta2="0.999", eps="1e-8", weight_decay="0"):
        self.lr = _hyper("lr", lr, lo=0)
        self.beta1 = _hyper("beta1", beta1, lo=0, hi=1, hi_open=True)
        self.beta2 = _hyper("beta2", beta2, lo=0, hi=1, hi_open=True)
        self.eps = _hyper("eps", eps, lo=0)
        self.weight_decay = _hyper("weight_decay", weight_decay, lo=0)
        super().__init__()

    def hyper(self):
        return {"lr": self.lr, "beta1": self.beta1, "beta2": self.beta2, "eps": self.eps,
                "weight_decay": self.weight_decay}

    def _update(self, ctx, params, grads):
        t = self.step_count
        b1, b2 = Fraction(self.beta1), Fraction(self.beta2)
        cb2 = ctx.convert(self.beta2)
        ob1, ob2 = ctx.convert(str(1 - b1)), ctx.convert(str(1 - b2))
        bc1 = ctx.convert(1 - b1 ** t)
        bc2_sqrt = ctx.sqrt(ctx.convert(1 - b2 ** t))
        step = ctx.div(ctx.convert(self.lr), bc1)
        eps = ctx.convert(self.eps)
        wd = ctx.convert(self.weight_decay) if Fraction(self.weight_decay) != 0 else None
        ms, vs = self.slots["exp_avg"], self.slots["exp_avg_sq"]
        for name, p in params.items():
            g = grads[name]
            if wd is not None:
                g = ctx.add(g, ctx.mul(wd, p))
            m = ms.get(name)
            v = vs.get(name)
            # torch's lerp: m + (1-b1)(g - m) (weight < 1/2); on the first step m = 0
            m = ctx.mul(ob1, g) if m is None else ctx.add(m, ctx.mul(ob1, ctx.sub(g, m)))
            gg = ctx.mul(g, g)
            v = ctx.mul(ob2, gg) if v is None else ctx.add(ctx.mul(cb2, v), ctx.mul(ob2, gg))
            ms[name], vs[name] = m, v
            denom = ctx.add(ctx.div(ctx.sqrt(v), bc2_sqrt), eps)
            params[name] = ctx.sub(p, ctx.mul(step, ctx.div(m, denom)))


OPTIMIZERS = {"sgd": SGD, "adam": Adam}


def make(kind: str, **hyper) -> Optimizer:
    """An optimizer by kind (``sgd`` or ``adam``)."""
    if kind not in OPTIMIZERS:
        raise TapeError(f"unknown optimizer {kind!r} (known: {', '.join(OPTIMIZERS)})")
    return OPTIMIZERS[kind](**hyper)
