"""Structural and shape op records: input, const, detach, reshape, flatten, permute,
concat, broadcast_to, and the ONNX-style slice, squeeze, unsqueeze, gather, pad, expand,
tile and where (see the section below for split).  None of them rounds: they only move
entries (ctx shape ops)."""
from __future__ import annotations

import numpy as np

from .axes import align, broadcast_shapes, is_int, norm_axis, sum_batch, unbroadcast
from .errors import ShapeRuleError
from .ops_activation import real_attr
from .oprecord import REQUIRED, OpRecord, register


def _declared(op):
    def shape(in_shapes, attrs, declared=None):
        if declared is None:
            raise ShapeRuleError(f"{op}: the out shape is the declared one; none was given")
        return tuple(declared)
    return shape


#: element types an input may declare besides the default ``"float"`` (real numbers):
#: integer and boolean inputs (token ids, positions, attention masks) hold integers, which
#: every context holds exactly up to 2^p; the lab's samplers and boxes never round or
#: widen them (experiments.cases, ibp.box)
INTEGER_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                  "uint64")


def _input_shape(in_shapes, attrs, declared=None):
    dtype = attrs.get("dtype", "float")
    if dtype != "float" and dtype not in INTEGER_DTYPES:
        raise ShapeRuleError(f"input: dtype must be 'float' or one of "
                             f"{', '.join(INTEGER_DTYPES)}, got {dtype!r}")
    return _declared("input")(in_shapes, attrs, declared)


def integer_input(node) -> bool:
    """Does this input node declare integer (or boolean) values?"""
    return node.kind.op == "input" and node.kind.attrs.get("dtype", "float") != "float"


register(OpRecord(name="input", arity=(0, 0), shape=_input_shape, forward=None,
                  attrs={"dtype": "float"}, capsule=None,
                  doc="the graph input; its declared shape is the per-example shape, its "
                      "dtype 'float' (real) or an integer type (exact integers)"))


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
    capsule=None, affine="any", doc="identity forward, no derivative (stop-gradient)"))


def _linear_jvp(forward):
    """JVP of an op linear in its one argument: its forward rule applied to the tangent."""
    return lambda ctx, args, tans, y, attrs, nb: (
        None if tans[0] is None else forward(ctx, [tans[0]], attrs, nb))


def _linear_op(name, shape, forward, vjp, attrs, doc):
    """Register a one-argument op that only moves or repeats entries (linear, so affine for
    CROWN; its JVP is the forward rule on the tangent; the reference capsule of its name)."""
    register(OpRecord(name=name, arity=(1, 1), shape=shape, forward=forward, vjp=vjp,
                      jvp=_linear_jvp(forward), attrs=attrs, capsule=f"reference.{name}",
                      affine="any", doc=doc))


def _unbroadcast_vjp(ctx, g, args, y, attrs, nb):
    """VJP of a broadcast: the gradient summed back onto the argument's shape."""
    return [unbroadcast(ctx, g, ctx.shape(args[0]), nb)]


def _distinct_axes(op, axes, r: int) -> list:
    """The ``axes`` attribute normalised to 0..r-1, refused when an axis repeats."""
    norm = [norm_axis(op, a, r, "axes") for a in axes]
    if len(set(norm)) != len(norm):
        raise ShapeRuleError(f"{op}: repeated axis in axes {list(axes)}")
    return norm


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
                  affine="any",
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
                  affine="any",
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


_linear_op("permute", _permute_shape, _permute_forward, _permute_vjp, {"perm": REQUIRED},
           "per-example axis permutation (torch.permute)")


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


def _broadcast_per_example(ctx, x, t, nb):
    """x (with nb leading batch axes) broadcast to the per-example shape t."""
    s = ctx.shape(x)
    x = ctx.reshape(x, tuple(s[:nb]) + (1,) * (len(t) - (len(s) - nb)) + tuple(s[nb:]))
    return ctx.broadcast_to(x, tuple(s[:nb]) + t)


def _bcast_forward(ctx, args, attrs, nb):
    return _broadcast_per_example(ctx, args[0], _bcast_shape([ctx.shape(args[0])[nb:]], attrs),
                                  nb)


_linear_op("broadcast_to", _bcast_shape, _bcast_forward, _unbroadcast_vjp, {"shape": REQUIRED},
           "numpy broadcasting of the per-example value to shape")


# ==================================================================================
# The shape ops of real networks: slice, squeeze, unsqueeze, gather (constant indices),
# pad (constant/reflect/edge/wrap), expand, tile, where (constant condition).
# Attribute names follow ONNX.  They only move entries (ctx.take/concat/reshape/
# broadcast_to/where), so every context runs them and none rounds; their adjoints are
# exact too: a gather whose indices are distinct is undone by another gather from the
# cotangent padded with one exact zero, and repeated indices (gather, reflect pad, tile)
# add their contributions with the context's own sum or dot product.
#
# Split: IR nodes have ONE output, so ONNX Split / torch.chunk become one ``slice`` node
# per output; :func:`split_slices` gives their attributes (the importers use it).
# ==================================================================================
def _ints(op, name, v, *, allow_none=False):
    if v is None and allow_none:
        return None
    if is_int(v):
        return (v,)
    if not isinstance(v, (list, tuple)) or not all(is_int(d) for d in v):
        raise ShapeRuleError(f"{op}: attribute {name} must be a list of ints, got {v!r}")
    return tuple(v)


def _move_last(ctx, x, axis):
    """Move ``axis`` to the end (for the selection-matrix adjoint)."""
    n = len(ctx.shape(x))
    perm = tuple(i for i in range(n) if i != axis) + (axis,)
    return ctx.transpose(x, perm), perm


def take_adjoint(ctx, g, idx, n: int, axis: int):
    """Adjoint of ``ctx.take(x, idx, axis)`` for an axis of length ``n``: the cotangent of
    x.  Distinct indices: a gather from ``g`` with one zero appended (no arithmetic);
    repeated ones: ``g`` times the 0/1 selection matrix ``[len(idx), n]``, i.e. the
    context's own dot product adds the contributions of each source entry."""
    idx = np.asarray(idx, dtype=np.int64).reshape(-1)
    if len(np.unique(idx)) == idx.size:
        inv = np.full(n, idx.size, dtype=np.int64)
        inv[idx] = np.arange(idx.size)
        s = list(ctx.shape(g))
        s[axis] = 1
        gz = ctx.concat([g, ctx.zeros(tuple(s))], axis=axis)
        return ctx.take(gz, inv, axis=axis)
    S = np.zeros((idx.size, n))
    S[np.arange(idx.size), idx] = 1.0
    gl, perm = _move_last(ctx, g, axis)
    out = ctx.matmul(gl, ctx.convert(S))
    return ctx.transpose(out, tuple(int(i) for i in np.argsort(perm)))


# -------------------------------------------------------------------------------- slice
def _slice_plan(op, shape, attrs):
    """[(axis, index array)] of a slice on per-example ``shape`` (ONNX Slice semantics:
    negative starts/ends count from the end, out-of-range values are clamped)."""
    starts = _ints(op, "starts", attrs["starts"])
    ends = _ints(op, "ends", attrs["ends"])
    r = len(shape)
    axes = _ints(op, "axes", attrs["axes"], allow_none=True)
    if axes is None:
        axes = tuple(range(len(starts)))
    steps = _ints(op, "steps", attrs["steps"], allow_none=True) or (1,) * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ShapeRuleError(f"{op}: starts {list(starts)}, ends {list(ends)}, axes "
                             f"{list(axes)} and steps {list(steps)} differ in length")
    norm = _distinct_axes(op, axes, r)
    plan = []
    for a, st, en, sp in zip(norm, starts, ends, steps):
        if sp == 0:
            raise ShapeRuleError(f"{op}: steps must be non-zero, got {list(steps)}")
        plan.append((a, np.arange(*slice(st, en, sp).indices(shape[a]), dtype=np.int64)))
    return plan


def _slice_shape(in_shapes, attrs, declared=None):
    s = list(in_shapes[0])
    for a, idx in _slice_plan("slice", s, attrs):
        s[a] = idx.size
    return tuple(s)


def _slice_apply(ctx, x, attrs, nb):
    s = ctx.shape(x)
    for a, idx in _slice_plan("slice", s[nb:], attrs):
        x = ctx.take(x, idx, axis=nb + a)
    return x


def _slice_vjp(ctx, g, args, y, attrs, nb):
    s = ctx.shape(args[0])
    for a, idx in reversed(_slice_plan("slice", s[nb:], attrs)):
        g = take_adjoint(ctx, g, idx, s[nb + a], nb + a)
    return [g]


register(OpRecord(name="slice", arity=(1, 1), shape=_slice_shape,
                  forward=lambda ctx, args, attrs, nb: _slice_apply(ctx, args[0], attrs, nb),
                  vjp=_slice_vjp,
                  jvp=lambda ctx, args, tans, y, attrs, nb: None if tans[0] is None
                  else _slice_apply(ctx, tans[0], attrs, nb),
                  attrs={"starts": REQUIRED, "ends": REQUIRED, "axes": None, "steps": None},
                  capsule="reference.slice",
                  affine="any",
                  doc="ONNX Slice on per-example axes (negative indices, clamping, steps)"))


def split_slices(shape, axis: int = 0, split=None, num_outputs=None) -> list:
    """The ``slice`` attributes of each output of ONNX ``Split`` / ``torch.split`` /
    ``torch.chunk`` along per-example ``axis`` of ``shape``: ``split`` = the sizes, or
    ``num_outputs`` parts of ceil(n / num_outputs) entries (the last one smaller, possibly
    empty, as ONNX opset 18; torch.chunk returns the non-empty ones).  The IR has no
    multi-output nodes: an importer emits one ``slice`` node per output with these
    attributes."""
    shape = tuple(shape)
    a = norm_axis("split", axis, len(shape))
    n = shape[a]
    if split is None:
        if not is_int(num_outputs) or num_outputs < 1:
            raise ShapeRuleError(f"split: give split sizes or a positive num_outputs, got "
                                 f"split={split!r}, num_outputs={num_outputs!r}")
        size = -(-n // num_outputs)
        split = [min(size, n - i * size) for i in range(num_outputs)]
        if any(k < 0 for k in split):
            raise ShapeRuleError(f"split: {num_outputs} outputs of ceil({n}/{num_outputs}) = "
                                 f"{size} entries overrun the axis of length {n}")
    split = list(_ints("split", "split", split))
    if any(k < 0 for k in split) or sum(split) != n:
        raise ShapeRuleError(f"split: sizes {split} do not add up to the axis length {n} "
                             f"of {list(shape)}")
    out, start = [], 0
    for k in split:
        out.append({"starts": [start], "ends": [start + k], "axes": [a]})
        start += k
    return out


# -------------------------------------------------------------------- squeeze/unsqueeze
def _squeeze_shape(in_shapes, attrs, declared=None):
    s = tuple(in_shapes[0])
    axes = _ints("squeeze", "axes", attrs["axes"], allow_none=True)
    if axes is None:
        return tuple(d for d in s if d != 1)
    norm = _distinct_axes("squeeze", axes, len(s))
    bad = [a for a in norm if s[a] != 1]
    if bad:
        raise ShapeRuleError(f"squeeze: axis {bad[0]} of {list(s)} has length {s[bad[0]]}, "
                             f"not 1")
    return tuple(d for i, d in enumerate(s) if i not in norm)


def _unsqueeze_shape(in_shapes, attrs, declared=None):
    s = tuple(in_shapes[0])
    axes = _ints("unsqueeze", "axes", attrs["axes"])
    r = len(s) + len(axes)
    norm = sorted(_distinct_axes("unsqueeze", axes, r))
    out, it = [], iter(s)
    for i in range(r):
        out.append(1 if i in norm else next(it))
    return tuple(out)


for _name, _rule, _attrs, _doc in (
        ("squeeze", _squeeze_shape, {"axes": None},
         "drop per-example axes of length 1 (all of them when axes is none)"),
        ("unsqueeze", _unsqueeze_shape, {"axes": REQUIRED},
         "insert per-example axes of length 1 (axes index the output, as ONNX)")):
    f, v, j = _reshape_to(_rule)
    register(OpRecord(name=_name, arity=(1, 1), shape=_rule, forward=f, vjp=v, jvp=j,
                      attrs=_attrs, capsule=f"reference.{_name}", affine="any", doc=_doc))


# ------------------------------------------------------------------------------- gather
def _gather_idx(op, shape, attrs):
    """(axis, flat index array, index shape); negative indices count from the end."""
    a = norm_axis(op, attrs["axis"], len(shape))
    raw = attrs["indices"]
    try:
        idx = np.asarray(raw)
    except (ValueError, TypeError):
        idx = None
    if idx is None or idx.dtype == object or (idx.size and idx.dtype.kind not in "iu") \
            or idx.dtype == bool:
        raise ShapeRuleError(f"{op}: attribute indices must be an int or a nested list of "
                             f"ints, got {raw!r}")
    idx = idx.astype(np.int64)
    n = shape[a]
    if idx.size and (idx.min() < -n or idx.max() >= n):
        bad = idx[(idx < -n) | (idx >= n)].reshape(-1)[0]
        raise ShapeRuleError(f"{op}: index {int(bad)} out of range for axis {a} of length "
                             f"{n} (shape {list(shape)})")
    return a, np.where(idx < 0, idx + n, idx).reshape(-1), idx.shape


def _gather_shape(in_shapes, attrs, declared=None):
    s = tuple(in_shapes[0])
    if not s:
        raise ShapeRuleError("gather: input must have rank >= 1, got []")
    a, _, ishape = _gather_idx("gather", s, attrs)
    return s[:a] + tuple(ishape) + s[a + 1:]


def _gather_apply(ctx, x, attrs, nb):
    s = ctx.shape(x)
    a, idx, ishape = _gather_idx("gather", s[nb:], attrs)
    y = ctx.take(x, idx, axis=nb + a)
    return ctx.reshape(y, tuple(s[:nb + a]) + tuple(ishape) + tuple(s[nb + a + 1:]))


def _gather_vjp(ctx, g, args, y, attrs, nb):
    s = ctx.shape(args[0])
    a, idx, ishape = _gather_idx("gather", s[nb:], attrs)
    g = ctx.reshape(g, tuple(s[:nb + a]) + (idx.size,) + tuple(s[nb + a + 1:]))
    return [take_adjoint(ctx, g, idx, s[nb + a], nb + a)]


register(OpRecord(name="gather", arity=(1, 1), shape=_gather_shape,
                  forward=lambda ctx, args, attrs, nb: _gather_apply(ctx, args[0], attrs, nb),
                  vjp=_gather_vjp,
                  jvp=lambda ctx, args, tans, y, attrs, nb: None if tans[0] is None
                  else _gather_apply(ctx, tans[0], attrs, nb),
                  attrs={"indices": REQUIRED, "axis": 0}, capsule="reference.gather",
                  affine="any",
                  doc="ONNX Gather with constant indices (any shape, negatives allowed) "
                      "along a per-example axis; repeated indices add their cotangents"))


# ---------------------------------------------------------------------------------- pad
PAD_MODES = ("constant", "reflect", "edge", "wrap")


def _pad_plan(op, shape, attrs):
    """[(axis, source index per output position, -1 = the constant)] for ONNX Pad: pads =
    [begin_0, ..., begin_k, end_0, ..., end_k] over ``axes`` (default all); negative pads
    crop."""
    r = len(shape)
    mode = attrs["mode"]
    if mode not in PAD_MODES:
        raise ShapeRuleError(f"{op}: mode must be one of {', '.join(PAD_MODES)}, got {mode!r}")
    pads = _ints(op, "pads", attrs["pads"])
    axes = _ints(op, "axes", attrs["axes"], allow_none=True)
    axes = tuple(range(r)) if axes is None else axes
    if len(pads) != 2 * len(axes):
        raise ShapeRuleError(f"{op}: pads {list(pads)} must hold a begin and an end for each "
                             f"of the {len(axes)} axes")
    norm = _distinct_axes(op, axes, r)
    plan = []
    for k, a in enumerate(norm):
        b, e = pads[k], pads[k + len(norm)]
        n = shape[a]
        if b == 0 and e == 0:
            continue
        if n + b + e < 0:
            raise ShapeRuleError(f"{op}: pads {[b, e]} crop more than axis {a} of length {n}")
        pos = np.arange(-b, n + e)
        inside = (pos >= 0) & (pos < n)
        if mode == "constant":
            src = np.where(inside, pos, -1)
        elif n == 0:
            raise ShapeRuleError(f"{op}: mode {mode} cannot pad the empty axis {a}")
        elif mode == "edge":
            src = np.clip(pos, 0, n - 1)
        elif mode == "wrap":
            src = np.mod(pos, n)
        else:                                   # reflect: ... 2 1 | 0 1 2 .. n-1 | n-2 ...
            if n == 1 or max(b, e) > n - 1:
                raise ShapeRuleError(f"{op}: reflect pads {[b, e]} need at most {n - 1} "
                                     f"(axis {a} has length {n})")
            src = np.abs(pos)
            src = np.where(src > n - 1, 2 * (n - 1) - src, src)
        plan.append((a, src.astype(np.int64)))
    return plan


def _pad_value(op, attrs):
    return real_attr(op, "value", attrs["value"])


def _pad_shape(in_shapes, attrs, declared=None):
    s = list(in_shapes[0])
    _pad_value("pad", attrs)
    for a, src in _pad_plan("pad", s, attrs):
        s[a] = src.size
    return tuple(s)


def _pad_apply(ctx, x, attrs, nb, value):
    s = ctx.shape(x)
    for a, src in _pad_plan("pad", s[nb:], attrs):
        ax = nb + a
        if (src < 0).any():
            cs = list(ctx.shape(x))
            cs[ax] = 1
            fill = ctx.zeros(tuple(cs)) if value is None else ctx.full(tuple(cs), value)
            x = ctx.concat([x, fill], axis=ax)
            src = np.where(src < 0, ctx.shape(x)[ax] - 1, src)
        x = ctx.take(x, src, axis=ax)
    return x


def _pad_vjp(ctx, g, args, y, attrs, nb):
    s = ctx.shape(args[0])
    plan = _pad_plan("pad", s[nb:], attrs)
    # shapes before each step, to undo the steps in reverse
    sizes, cur = [], list(s)
    for a, src in plan:
        sizes.append(cur[nb + a])
        cur[nb + a] = src.size
    for (a, src), n in zip(reversed(plan), reversed(sizes)):
        ax = nb + a
        if (src < 0).any():
            gx = take_adjoint(ctx, g, np.where(src < 0, n, src), n + 1, ax)
            g = ctx.take(gx, np.arange(n), axis=ax)      # the constant gets nothing
        else:
            g = take_adjoint(ctx, g, src, n, ax)
    return [g]


register(OpRecord(name="pad", arity=(1, 1), shape=_pad_shape,
                  forward=lambda ctx, args, attrs, nb: _pad_apply(
                      ctx, args[0], attrs, nb, _pad_value("pad", attrs)),
                  vjp=_pad_vjp,
                  jvp=lambda ctx, args, tans, y, attrs, nb: None if tans[0] is None
                  else _pad_apply(ctx, tans[0], attrs, nb, None),
                  attrs={"pads": REQUIRED, "mode": "constant", "value": 0, "axes": None},
                  capsule="reference.pad",
                  affine="any",
                  doc="ONNX Pad (pads = begins then ends; constant value / reflect / edge / "
                      "wrap; negative pads crop) on per-example axes"))


# ------------------------------------------------------------------------------- expand
def _expand_shape(in_shapes, attrs, declared=None):
    s = tuple(in_shapes[0])
    t = _shape_attr("expand", attrs["shape"])
    if any(d < 0 for d in t):
        raise ShapeRuleError(f"expand: shape {list(t)} has a negative extent")
    return broadcast_shapes("expand", s, t)


def _expand_forward(ctx, args, attrs, nb):
    return _broadcast_per_example(ctx, args[0],
                                  _expand_shape([ctx.shape(args[0])[nb:]], attrs), nb)


_linear_op("expand", _expand_shape, _expand_forward, _unbroadcast_vjp, {"shape": REQUIRED},
           "ONNX Expand: numpy broadcasting of the per-example value with shape (either side "
           "may be 1)")


# --------------------------------------------------------------------------------- tile
def _tile_reps(op, shape, attrs):
    reps = _ints(op, "repeats", attrs["repeats"])
    if len(reps) != len(shape) or any(k < 0 for k in reps):
        raise ShapeRuleError(f"{op}: repeats {list(reps)} must give one non-negative count "
                             f"per per-example axis of {list(shape)}")
    return reps


def _tile_shape(in_shapes, attrs, declared=None):
    s = tuple(in_shapes[0])
    return tuple(k * d for k, d in zip(_tile_reps("tile", s, attrs), s))


def _tile_forward(ctx, args, attrs, nb):
    # [.., d_i, ..] -> [.., 1, d_i, ..] -> broadcast [.., r_i, d_i, ..] -> [.., r_i d_i, ..]
    x = args[0]
    s = ctx.shape(x)
    B, e = tuple(s[:nb]), tuple(s[nb:])
    reps = _tile_reps("tile", e, attrs)
    x = ctx.reshape(x, B + tuple(t for d in e for t in (1, d)))
    x = ctx.broadcast_to(x, B + tuple(t for k, d in zip(reps, e) for t in (k, d)))
    return ctx.reshape(x, B + tuple(k * d for k, d in zip(reps, e)))


def _tile_vjp(ctx, g, args, y, attrs, nb):
    s = ctx.shape(args[0])
    B, e = tuple(s[:nb]), tuple(s[nb:])
    reps = _tile_reps("tile", e, attrs)
    g = ctx.reshape(g, B + tuple(t for k, d in zip(reps, e) for t in (k, d)))
    axes = tuple(nb + 2 * i for i, k in enumerate(reps) if k != 1)
    if axes:
        g = ctx.sum(g, axis=axes, keepdims=True)
    return [ctx.reshape(g, s)]


_linear_op("tile", _tile_shape, _tile_forward, _tile_vjp, {"repeats": REQUIRED},
           "ONNX Tile: repeat the per-example value repeats[i] times along axis i")


# -------------------------------------------------------------------------------- where
def _cond(op, attrs):
    c = attrs["condition"]
    try:
        arr = np.asarray(c)
    except (ValueError, TypeError):
        arr = None
    if arr is None or arr.dtype != bool:
        raise ShapeRuleError(f"{op}: attribute condition must be a boolean or a nested list "
                             f"of booleans, got {c!r}")
    return arr


def _where_shape(in_shapes, attrs, declared=None):
    return broadcast_shapes("where", _cond("where", attrs).shape, in_shapes[0], in_shapes[1])


# --------------------------------------------------------------------------------- take
# ONNX Gather whose indices are a run-time tensor (token ids into an embedding table).  The
# indices are values of the context: integers, which every format holds exactly up to
# 2^p, are read back through ``to_float64`` and checked (an index that is not an integer
# in range, or an interval box of positive width, is an error naming the values: a box
# would select several rows).  Each sample gathers with its own indices: the data is
# flattened so that one ``ctx.take`` serves every sample (no arithmetic, nothing rounds).
def _take_shape(in_shapes, attrs, declared=None):
    s, ishape = tuple(in_shapes[0]), tuple(in_shapes[1])
    if not s:
        raise ShapeRuleError("take: data must have rank >= 1, got []")
    a = norm_axis("take", attrs["axis"], len(s))
    return s[:a] + ishape + s[a + 1:]


def _take_indices(ctx, v, n: int):
    """The index tensor as int64 arrays ``(first, last)`` (negatives count from the end):
    equal in point contexts; an interval box covers the integers from ``first`` to
    ``last``.  GraphError for a value that is not an integer in range, or a box holding
    none or reaching out of range (the rows it selects would be undefined); ContextError
    for an axis whose indices the context's format does not hold exactly."""
    from scalarlab.scalars.errors import ContextError

    from .errors import GraphError
    fmt = ctx.fmt
    if fmt is not None and n - 1 > 2 ** (fmt.man_bits + 1):
        # the context rounded the index values when it read them: an index past 2^p may
        # have become another index, silently.  A limit of the context, not of the data
        # (ContextError): compare's partial fold marks that context as not evaluated
        raise ContextError(f"take: an axis of length {n} has indices beyond "
                         f"2^{fmt.man_bits + 1}, which the context's format "
                         f"({getattr(fmt, 'label', None) or fmt}) does not hold exactly")
    raw = ctx.to_float64(v)
    if hasattr(raw, "lo"):
        lo = np.ceil(np.asarray(raw.lo, dtype=np.float64))
        hi = np.floor(np.asarray(raw.hi, dtype=np.float64))
        bad = (lo > hi) | (lo < -n) | (hi >= n) | ((lo < 0) & (hi >= 0)) | \
            ~np.isfinite(lo) | ~np.isfinite(hi)
        if bad.any():
            k = int(np.flatnonzero(bad.reshape(-1))[0])
            raise GraphError(f"take: index {k} is the box [{np.asarray(raw.lo).reshape(-1)[k]}, "
                             f"{np.asarray(raw.hi).reshape(-1)[k]}]: it holds no integer, "
                             f"reaches beyond [-{n}, {n}) or straddles 0 (hold indices "
                             f"fixed: they are exact values)")
    else:
        lo = hi = np.asarray(getattr(raw, "primal", raw), dtype=np.float64)
        bad = (lo != np.round(lo)) | (lo < -n) | (lo >= n) | ~np.isfinite(lo)
        if bad.any():
            raise GraphError(f"take: index {float(lo[bad].reshape(-1)[0])} is not an integer in "
                             f"[-{n}, {n}) (the axis has length {n})")
    lo, hi = lo.astype(np.int64), hi.astype(np.int64)
    return np.where(lo < 0, lo + n, lo), np.where(hi < 0, hi + n, hi)


def _take_flat(ctx, x, idx, a: int, nb: int):
    """(x as [B*pre*n, post], flat row indices [B, pre, K]) for a take along per-example
    axis ``a`` with per-sample indices ``idx`` of shape ``batch + ishape``."""
    s = tuple(ctx.shape(x))
    batch, per = s[:nb], s[nb:]
    B, pre, n = _prod(batch), _prod(per[:a]), per[a]
    post = _prod(per[a + 1:])
    k = idx.reshape(B, 1, -1)
    rows = (np.arange(B).reshape(B, 1, 1) * pre + np.arange(pre).reshape(1, pre, 1)) * n + k
    return ctx.reshape(x, (B * pre * n, post)), rows.reshape(-1), B * pre * n


def _take_forward(ctx, args, attrs, nb, data=None):
    x = args[0] if data is None else data
    s = tuple(ctx.shape(args[0]))
    a = norm_axis("take", attrs["axis"], len(s) - nb)
    ishape = tuple(ctx.shape(args[1]))[nb:]
    first, last = _take_indices(ctx, args[1], s[nb + a])
    flat, rows, _ = _take_flat(ctx, x, first, a, nb)
    y = ctx.take(flat, rows, axis=0)
    # an index box covering several rows: the hull of those rows (data movement only)
    for j in range(1, int((last - first).max(initial=0)) + 1):
        _, rows, _ = _take_flat(ctx, x, np.minimum(first + j, last), a, nb)
        yj = ctx.take(flat, rows, axis=0)
        y = type(y)(ctx.minimum(y, yj).lo, ctx.maximum(y, yj).hi)
    return ctx.reshape(y, s[:nb + a] + ishape + s[nb + a + 1:])


def _take_vjp(ctx, g, args, y, attrs, nb):
    s = tuple(ctx.shape(args[0]))
    a = norm_axis("take", attrs["axis"], len(s) - nb)
    idx, _ = _take_indices(ctx, args[1], s[nb + a])
    _, rows, n = _take_flat(ctx, args[0], idx, a, nb)
    gflat = ctx.reshape(g, (rows.size, _prod(s[nb + a + 1:])))
    return [ctx.reshape(take_adjoint(ctx, gflat, rows, n, 0), s), None]


register(OpRecord(name="take", arity=(2, 2), shape=_take_shape, forward=_take_forward,
                  vjp=_take_vjp,
                  jvp=lambda ctx, args, tans, y, attrs, nb: None if tans[0] is None
                  else _take_forward(ctx, args, attrs, nb, data=tans[0]),
                  attrs={"axis": 0}, capsule="reference.take",
                  doc="ONNX Gather with run-time integer indices (the second parent: token "
                      "ids into an embedding table), per sample; the indices must be exact "
                      "integers in range and get no cotangent"))


def _where_aligned(ctx, args, attrs, nb):
    cond = _cond("where", attrs)
    out = _where_shape([ctx.shape(args[0])[nb:], ctx.shape(args[1])[nb:]], attrs)
    r = len(out)
    return cond, align(ctx, args[0], nb, r), align(ctx, args[1], nb, r)


def _where_forward(ctx, args, attrs, nb):
    cond, a, b = _where_aligned(ctx, args, attrs, nb)
    y = ctx.where(cond, a, b)
    batch = tuple(ctx.shape(args[0])[:nb])
    out = batch + _where_shape([ctx.shape(args[0])[nb:], ctx.shape(args[1])[nb:]], attrs)
    return y if tuple(ctx.shape(y)) == out else ctx.broadcast_to(y, out)


def _where_vjp(ctx, g, args, y, attrs, nb):
    cond = _cond("where", attrs)
    z = ctx.zeros(())
    return [unbroadcast(ctx, ctx.where(cond, g, z), ctx.shape(args[0]), nb),
            unbroadcast(ctx, ctx.where(cond, z, g), ctx.shape(args[1]), nb)]


def _where_jvp(ctx, args, tans, y, attrs, nb):
    if tans[0] is None and tans[1] is None:
        return None
    t = [ctx.zeros(ctx.shape(a)) if tt is None else tt for a, tt in zip(args, tans)]
    return _where_forward(ctx, t, attrs, nb)


register(OpRecord(name="where", arity=(2, 2), shape=_where_shape, forward=_where_forward,
                  vjp=_where_vjp, jvp=_where_jvp, attrs={"condition": REQUIRED},
                  capsule="reference.where",
                  doc="ONNX Where with a constant boolean condition (broadcast with both "
                      "parents): condition ? a : b"))
