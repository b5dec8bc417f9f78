"""Loss op records: ``mse_loss(pred, target)`` = mean of squared differences -> shape []."""
from __future__ import annotations

from .errors import ShapeRuleError
from .oprecord import OpRecord, register


def _mse_shape(in_shapes, attrs, declared=None):
    a, b = tuple(in_shapes[0]), tuple(in_shapes[1])
    if a != b:
        raise ShapeRuleError(f"mse_loss: prediction and target shapes differ: {list(a)} vs {list(b)}")
    return ()


def _axes_n(ctx, v, nb):
    s = ctx.shape(v)
    n = 1
    for d in s[nb:]:
        n *= int(d)
    return tuple(range(nb, len(s))), n


def _mse_forward(ctx, args, attrs, nb):
    p, t = args
    axes, n = _axes_n(ctx, p, nb)
    sq = ctx.square(ctx.sub(p, t))
    s = ctx.sum(sq, axis=axes) if axes else sq
    return ctx.div(s, ctx.convert(n))


def _mse_vjp(ctx, g, args, y, attrs, nb, needs=None):
    p, t = args
    axes, n = _axes_n(ctx, p, nb)
    s = ctx.shape(p)
    gb = ctx.reshape(g, tuple(s[:nb]) + (1,) * len(axes))
    # d/dp = 2 (p - t) / n
    gp = ctx.mul(ctx.div(ctx.mul(ctx.convert(2), ctx.sub(p, t)), ctx.convert(n)), gb)
    # a target that wants no gradient (a constant) gets none
    return [gp, ctx.neg(gp) if needs is None or needs[1] else None]


_mse_vjp.takes_needs = True   # see graph.oprecord


def _mse_jvp(ctx, args, tans, y, attrs, nb):
    p, t = args
    tp, tt = tans
    if tp is None and tt is None:
        return None
    dt = tp if tt is None else (ctx.neg(tt) if tp is None else ctx.sub(tp, tt))
    axes, n = _axes_n(ctx, p, nb)
    prod = ctx.mul(ctx.sub(p, t), dt)
    s = ctx.sum(prod, axis=axes) if axes else prod
    return ctx.div(ctx.mul(ctx.convert(2), s), ctx.convert(n))


register(OpRecord(name="mse_loss", arity=(2, 2), shape=_mse_shape, forward=_mse_forward,
                  vjp=_mse_vjp, jvp=_mse_jvp, capsule="reference.mse_loss", reduces=True,
                  doc="mean((pred - target)^2) over the per-example entries (torch reduction='mean')"))
