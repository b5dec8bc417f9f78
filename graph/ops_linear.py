"""Contraction op records: ``matmul`` (numpy matmul rules) and ``linear`` (x W^T + b).

Both contract with ``ctx.matmul`` so the context decides the dot-product order and
rounding (BLAS in float64, sequential exact rounding in the binary formats, exact in
rational).
"""
from __future__ import annotations

from .axes import add_opt, align, broadcast_shapes, is_int, unbroadcast
from .errors import ShapeRuleError
from .oprecord import OpRecord, register


def _swap_last(ctx, v):
    n = len(ctx.shape(v))
    return ctx.transpose(v, tuple(range(n - 2)) + (n - 1, n - 2))


def _size(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


# ----------------------------------------------------------------------------- matmul
def _matmul_shape(in_shapes, attrs, declared=None):
    sa, sb = tuple(in_shapes[0]), tuple(in_shapes[1])
    if not sa or not sb:
        raise ShapeRuleError(f"matmul: operands must have rank >= 1, got {list(sa)} and {list(sb)}")
    a2 = (1,) + sa if len(sa) == 1 else sa
    b2 = sb + (1,) if len(sb) == 1 else sb
    if a2[-1] != b2[-2]:
        raise ShapeRuleError(f"matmul: contracted dimensions differ: {list(sa)} and {list(sb)}")
    lead = broadcast_shapes("matmul", a2[:-2], b2[:-2])
    out = lead + (a2[-2], b2[-1])
    if len(sa) == 1:
        out = out[:-2] + out[-1:]
    if len(sb) == 1:
        out = out[:-1]
    return out


def _mm_prep(ctx, a, b, nb):
    """Promote 1-d operands (per example) and align per-example batch ranks."""
    sa, sb = ctx.shape(a), ctx.shape(b)
    if len(sa) - nb == 1:
        a = ctx.reshape(a, tuple(sa[:nb]) + (1, sa[-1]))
    if len(sb) - nb == 1:
        b = ctx.reshape(b, tuple(sb) + (1,))
    r = max(len(ctx.shape(a)), len(ctx.shape(b))) - nb
    return align(ctx, a, nb, r), align(ctx, b, nb, r)


def _matmul_forward(ctx, args, attrs, nb):
    a, b = _mm_prep(ctx, args[0], args[1], nb)
    y = ctx.matmul(a, b)
    out = _matmul_shape([ctx.shape(args[0])[nb:], ctx.shape(args[1])[nb:]], attrs)
    return ctx.reshape(y, tuple(ctx.shape(args[0])[:nb]) + out)


def _matmul_vjp(ctx, g, args, y, attrs, nb, needs=None):
    a, b = _mm_prep(ctx, args[0], args[1], nb)
    ys = tuple(ctx.shape(a)[:-1]) + (ctx.shape(b)[-1],)
    lead = broadcast_shapes("matmul", ctx.shape(a)[:-2], ctx.shape(b)[:-2])
    g2 = ctx.reshape(g, lead + ys[-2:])
    out = [None, None]
    if needs is None or needs[0]:
        ga = unbroadcast(ctx, ctx.matmul(g2, _swap_last(ctx, b)), ctx.shape(a), nb)
        out[0] = ctx.reshape(ga, ctx.shape(args[0]))
    if needs is None or needs[1]:
        gb = unbroadcast(ctx, ctx.matmul(_swap_last(ctx, a), g2), ctx.shape(b), nb)
        out[1] = ctx.reshape(gb, ctx.shape(args[1]))
    return out


_matmul_vjp.takes_needs = True   # see oprecord: a rule may skip arguments not needed


def _matmul_jvp(ctx, args, tans, y, attrs, nb):
    if tans[0] is None and tans[1] is None:
        return None
    a, b = _mm_prep(ctx, args[0], args[1], nb)
    t = None
    if tans[0] is not None:
        ta, _ = _mm_prep(ctx, tans[0], args[1], nb)
        t = ctx.matmul(ta, b)
    if tans[1] is not None:
        _, tb = _mm_prep(ctx, args[0], tans[1], nb)
        t = add_opt(ctx, t, ctx.matmul(a, tb))
    return ctx.reshape(t, ctx.shape(y))


register(OpRecord(name="matmul", arity=(2, 2), shape=_matmul_shape, forward=_matmul_forward,
                  vjp=_matmul_vjp, jvp=_matmul_jvp, capsule="reference.matmul",
                  reduces=True, dot=True,
                  affine="any",
                  doc="numpy.matmul of two parent values (per-example shapes)"))


# ----------------------------------------------------------------------------- linear
def _linear_shape(in_shapes, attrs, declared=None):
    s = tuple(in_shapes[0])
    if not s:
        raise ShapeRuleError("linear: input must have rank >= 1, got []")
    of = attrs.get("out_features")
    if of is None:
        if declared is None or len(declared) == 0:
            raise ShapeRuleError(f"linear: out_features is neither an attribute nor readable "
                                 f"from the declared shape {list(declared or [])}")
        of = declared[-1]
    if not is_int(of) or of < 0:
        raise ShapeRuleError(f"linear: out_features must be a non-negative int, got {of!r}")
    return s[:-1] + (of,)


def _linear_params(in_shapes, attrs, out_shape):
    return {"W": (out_shape[-1], in_shapes[0][-1]), "b": (out_shape[-1],)}


def _linear_check(in_shapes, attrs, out_shape, given):
    W = given.get("W")
    if W is None:
        raise ShapeRuleError("missing payload W")
    if len(W) != 2:
        raise ShapeRuleError(f"payload W must be a matrix [out, in], got shape {list(W)}")
    s = tuple(in_shapes[0])
    expected = s[:-1] + (W[0],)
    if tuple(out_shape) != expected:
        raise ShapeRuleError(f"declared outShape mismatch: {list(out_shape)} vs expected "
                             f"{list(expected)}")
    if s[-1] != W[1]:
        raise ShapeRuleError(f"input shape mismatch: {list(s)} vs expected "
                             f"{list(s[:-1] + (W[1],))} (payload W is {list(W)})")
    b = given.get("b")
    if b is not None and tuple(b) != (W[0],):
        raise ShapeRuleError(f"payload b shape mismatch: {list(b)} vs expected [{W[0]}]")


def _linear_forward(ctx, args, attrs, nb):
    x, W, b = args
    # the context decides where b is added (Context.matmul_add: after the product's
    # rounding, or inside a mixed-precision accumulator) and may fuse the two
    return ctx.affine(x, W, b)


def _rows(ctx, v):
    s = ctx.shape(v)
    return ctx.reshape(v, (_size(s[:-1]), s[-1]))


def _linear_vjp(ctx, g, args, y, attrs, nb, needs=None):
    x, W, b = args
    # needs (tape): which of x, W, b want a gradient; the first layer's input does not,
    # and skipping it saves the largest product of the backward pass.
    g2 = _rows(ctx, g)
    # the bias gradient first, while g is still in cache (the products evict it)
    gb = ctx.sum(g2, axis=0) if needs is None or needs[2] else None
    gx = ctx.matmul(g, W) if needs is None or needs[0] else None
    gW = ctx.matmul(ctx.transpose(g2), _rows(ctx, x)) if needs is None or needs[1] else None
    return [gx, gW, gb]


_linear_vjp.takes_needs = True


def _linear_jvp(ctx, args, tans, y, attrs, nb):
    x, W, b = args
    tx, tW, tb = tans
    t = None
    if tx is not None:
        t = ctx.matmul(tx, ctx.transpose(W))
    if tW is not None:
        t = add_opt(ctx, t, ctx.matmul(x, ctx.transpose(tW)))
    if tb is not None:
        t = ctx.broadcast_to(tb, ctx.shape(y)) if t is None else ctx.add(t, tb)
    return t


register(OpRecord(name="linear", arity=(1, 1), shape=_linear_shape, forward=_linear_forward,
                  vjp=_linear_vjp, jvp=_linear_jvp, attrs={"out_features": None},
                  params=("W", "b"), param_shapes=_linear_params,
                  param_defaults={"b": "zeros"}, check_payload=_linear_check,
                  capsule="reference.linear", reduces=True, dot=True,
                  affine="any",
                  doc="y = x W^T + b, payload W [out, in], b [out] (PyTorch nn.Linear)"))
