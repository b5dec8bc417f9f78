"""Structural and shape op records: input, const, detach, reshape, flatten, permute,
concat, broadcast_to.  None of them rounds: they only move entries (ctx shape ops)."""
from __future__ import annotations

import numpy as np

from .axes import broadcast_shapes, is_int, norm_axis, sum_batch, unbroadcast
from .errors import ShapeRuleError
from .oprecord import REQUIRED, OpRecord, register


def _declared(op):
    def shape(in_shapes, attrs, declared=None):
        if declared is None:
            raise ShapeRuleError(f"{op}: the out shape is the declared one; none was given")
        return tuple(declared)
    return shape


register(OpRecord(name="input", arity=(0, 0), shape=_declared("input"), forward=None,
                  capsule=None, doc="the graph input; its declared shape is the per-example shape"))


def _const_vjp(ctx, g, args, y, attrs, nb):
    return [sum_batch(ctx, g, nb)]


register(OpRecord(
    name="const", arity=(0, 0), shape=_declared("const"),
    forward=lambda ctx, args, attrs, nb: args[0],
    vjp=_const_vjp, jvp=lambda ctx, args, tans, y, attrs, nb: tans[0],
    params=("value",), param_shapes=lambda in_shapes, attrs, out: {"value": tuple(out)},
    capsule=None, doc="a payload tensor (no batch axes; the fold broadcasts it)"))

register(OpRecord(
    name="detach", arity=(1, 1), shape=lambda s, a, declared=None: tuple(s[0]),
    forward=lambda ctx, args, attrs, nb: args[0],
    vjp=lambda ctx, g, args, y, attrs, nb: [None],
    jvp=lambda ctx, args, tans, y, attrs, nb: None,
    capsule=None, doc="identity forward, no derivative (stop-gradient)"))


def _prod(s) -> int:
    n = 1
    for d in s:
        n *= int(d)
    return n


def _shape_attr(op, v):
    if not isinstance(v, (list, tuple)) or not all(is_int(d) for d in v):
        raise ShapeRuleError(f"{op}: attribute shape must be a list of ints, got {v!r}")
    return tuple(v)


# ------------------------------------------------------------------------------ reshape
def _reshape_shape(in_shapes, attrs, declared=None):
    s = tuple(in_shapes[0])
    t = _shape_attr("reshape", attrs["shape"])
    if sum(1 for d in t if d == -1) > 1 or any(d < -1 for d in t):
        raise ShapeRuleError(f"reshape: shape {list(t)} may hold one -1 and no other negatives")
    n = _prod(s)
    if -1 in t:
        rest = _prod(d for d in t if d != -1)
        if rest == 0 or n % rest:
            raise ShapeRuleError(f"reshape: cannot reshape {list(s)} ({n} entries) to {list(t)}")
        t = tuple(n // rest if d == -1 else d for d in t)
    if _prod(t) != n:
        raise ShapeRuleError(f"reshape: cannot reshape {list(s)} ({n} entries) to {list(t)}")
    return t


def _reshape_to(shape_rule):
    def forward(ctx, args, attrs, nb):
        s = ctx.shape(args[0])
        return ctx.reshape(args[0], tuple(s[:nb]) + shape_rule([s[nb:]], attrs))

    def vjp(ctx, g, args, y, attrs, nb):
        return [ctx.reshape(g, ctx.shape(args[0]))]

    def jvp(ctx, args, tans, y, attrs, nb):
        return None if tans[0] is None else ctx.reshape(tans[0], ctx.shape(y))
    return forward, vjp, jvp


f, v, j = _reshape_to(_reshape_shape)
register(OpRecord(name="reshape", arity=(1, 1), shape=_reshape_shape, forward=f, vjp=v, jvp=j,
                  attrs={"shape": REQUIRED}, capsule="reference.reshape",
                  doc="per-example reshape (row-major), one -1 allowed"))


def _flatten_shape(in_shapes, attrs, declared=None):
    s = tuple(in_shapes[0])
    if not s:
        return (1,)
    a = norm_axis("flatten", attrs["start_axis"], len(s), "start_axis")
    b = norm_axis("flatten", attrs["end_axis"], len(s), "end_axis")
    if b < a:
        raise ShapeRuleError(f"flatten: end_axis {attrs['end_axis']} is before start_axis "
                             f"{attrs['start_axis']}")
    return s[:a] + (_prod(s[a:b + 1]),) + s[b + 1:]


f, v, j = _reshape_to(_flatten_shape)
register(OpRecord(name="flatten", arity=(1, 1), shape=_flatten_shape, forward=f, vjp=v, jvp=j,
                  attrs={"start_axis": 0, "end_axis": -1}, capsule="reference.reshape",
                  doc="merge per-example axes start_axis..end_axis (torch.flatten)"))


# ------------------------------------------------------------------------------ permute
def _perm(op, attrs, rank):
    p = attrs["perm"]
    if not isinstance(p, (list, tuple)) or not all(is_int(d) for d in p) \
            or sorted(p) != list(range(rank)):
        raise ShapeRuleError(f"{op}: perm {p!r} is not a permutation of the {rank} "
                             f"per-example axes")
    return tuple(p)


def _permute_shape(in_shapes, attrs, declared=None):
    s = tuple(in_shapes[0])
    return tuple(s[i] for i in _perm("permute", attrs, len(s)))


def _full_perm(p, nb):
    return tuple(range(nb)) + tuple(nb + i for i in p)


def _permute_forward(ctx, args, attrs, nb):
    p = _perm("permute", attrs, len(ctx.shape(args[0])) - nb)
    return ctx.transpose(args[0], _full_perm(p, nb))


def _permute_vjp(ctx, g, args, y, attrs, nb):
    p = _perm("permute", attrs, len(ctx.shape(args[0])) - nb)
    inv = tuple(int(i) for i in np.argsort(p))
    return [ctx.transpose(g, _full_perm(inv, nb))]


register(OpRecord(name="permute", arity=(1, 1), shape=_permute_shape, forward=_permute_forward,
                  vjp=_permute_vjp,
                  jvp=lambda ctx, args, tans, y, attrs, nb: None if tans[0] is None
                  else _permute_forward(ctx, [tans[0]], attrs, nb),
                  attrs={"perm": REQUIRED}, capsule="reference.permute",
                  doc="per-example axis permutation (torch.permute)"))


# ------------------------------------------------------------------------------- concat
def _concat_shape(in_shapes, attrs, declared=None):
    shapes = [tuple(s) for s in in_shapes]
    r = len(shapes[0])
    if r == 0:
        raise ShapeRuleError("concat: parents must have rank >= 1, got []")
    a = norm_axis("concat", attrs["axis"], r)
    for s in shapes[1:]:
        if len(s) != r or any(s[i] != shapes[0][i] for i in range(r) if i != a):
            shown = ", ".join(str(list(t)) for t in shapes)
            raise ShapeRuleError(f"concat: axis={attrs['axis']}: parent shapes differ outside "
                                 f"the axis: {shown}")
    return shapes[0][:a] + (sum(s[a] for s in shapes),) + shapes[0][a + 1:]


def _concat_axis(ctx, x, attrs, nb):
    return nb + norm_axis("concat", attrs["axis"], len(ctx.shape(x)) - nb)


def _concat_vjp(ctx, g, args, y, attrs, nb):
    a = _concat_axis(ctx, args[0], attrs, nb)
    out, start = [], 0
    for x in args:
        n = ctx.shape(x)[a]
        out.append(ctx.take(g, np.arange(start, start + n), axis=a))
        start += n
    return out


def _concat_jvp(ctx, args, tans, y, attrs, nb):
    if all(t is None for t in tans):
        return None
    a = _concat_axis(ctx, args[0], attrs, nb)
    parts = [ctx.zeros(ctx.shape(x)) if t is None else t for x, t in zip(args, tans)]
    return ctx.concat(parts, axis=a)


register(OpRecord(name="concat", arity=(2, None), shape=_concat_shape,
                  forward=lambda ctx, args, attrs, nb: ctx.concat(
                      list(args), axis=_concat_axis(ctx, args[0], attrs, nb)),
                  vjp=_concat_vjp, jvp=_concat_jvp, attrs={"axis": REQUIRED},
                  capsule="reference.concat",
                  doc="join >= 2 parents along a per-example axis"))


# -------------------------------------------------------------------------- broadcast_to
def _bcast_shape(in_shapes, attrs, declared=None):
    s = tuple(in_shapes[0])
    t = _shape_attr("broadcast_to", attrs["shape"])
    if len(t) < len(s) or broadcast_shapes("broadcast_to", s, t) != t:
        raise ShapeRuleError(f"broadcast_to: cannot broadcast {list(s)} to {list(t)}")
    return t


def _bcast_forward(ctx, args, attrs, nb):
    x = args[0]
    s = ctx.shape(x)
    t = _bcast_shape([s[nb:]], attrs)
    x = ctx.reshape(x, tuple(s[:nb]) + (1,) * (len(t) - (len(s) - nb)) + tuple(s[nb:]))
    return ctx.broadcast_to(x, tuple(s[:nb]) + t)


register(OpRecord(name="broadcast_to", arity=(1, 1), shape=_bcast_shape, forward=_bcast_forward,
                  vjp=lambda ctx, g, args, y, attrs, nb: [unbroadcast(ctx, g, ctx.shape(args[0]), nb)],
                  jvp=lambda ctx, args, tans, y, attrs, nb: None if tans[0] is None
                  else _bcast_forward(ctx, [tans[0]], attrs, nb),
                  attrs={"shape": REQUIRED}, capsule="reference.broadcast_to",
                  doc="numpy broadcasting of the per-example value to shape"))
