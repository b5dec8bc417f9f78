"""Reduction and normalisation op records: sum, reduce_sum/mean, softmax, log_softmax,
layernorm, batchnorm_eval, and (section at the end) reduce_max/min/prod/sum_square and the
global average/max pools.

Sums go through ``ctx.sum`` so the context's reduction order (sequential, pairwise,
native) is the one used.  softmax subtracts ``ctx.amax`` first (stable; an interval
context's endpointwise amax keeps the result an enclosure), and has its own, tighter
interval rule.
"""
from __future__ import annotations

import numpy as np

from scalarlab.scalars.values import Interval

from .axes import add_opt, norm_axes, norm_axis
from .errors import ShapeRuleError
from .ops_elementwise import _over_duals
from .oprecord import REQUIRED, OpRecord, register


def _b(nb, axes):
    return tuple(nb + a for a in axes)


def _count(shape, axes) -> int:
    n = 1
    for a in axes:
        n *= int(shape[a])
    return n


def _expand_back(ctx, g, x_shape, axes_full):
    """Broadcast a reduced (keepdims=False) cotangent back over the reduced axes."""
    keep = tuple(1 if i in axes_full else d for i, d in enumerate(x_shape))
    return ctx.broadcast_to(ctx.reshape(g, keep), tuple(x_shape))


def _keep_flag(op, attrs):
    k = attrs["keepdims"]
    if not isinstance(k, bool):
        raise ShapeRuleError(f"{op}: attribute keepdims must be true or false, got {k!r}")
    return k


# ------------------------------------------------------------------------- full / axis sums
def _sum_shape(in_shapes, attrs, declared=None):
    return ()


def _sum_all(ctx, x, nb):
    r = len(ctx.shape(x)) - nb
    if r == 0:
        return x
    return ctx.sum(x, axis=tuple(range(nb, nb + r)))


def _sum_vjp(ctx, g, args, y, attrs, nb):
    xs = ctx.shape(args[0])
    return [_expand_back(ctx, g, xs, set(range(nb, len(xs))))]


register(OpRecord(
    name="sum", arity=(1, 1), shape=_sum_shape,
    forward=lambda ctx, args, attrs, nb: _sum_all(ctx, args[0], nb), vjp=_sum_vjp,
    jvp=lambda ctx, args, tans, y, attrs, nb: None if tans[0] is None else _sum_all(ctx, tans[0], nb),
    capsule="reference.reduce_sum", reduces=True,
    affine="any",
    doc="sum of all per-example entries -> shape []"))


def _axis_red_shape(op):
    def shape(in_shapes, attrs, declared=None):
        s = tuple(in_shapes[0])
        axes = norm_axes(op, attrs["axis"], len(s))
        if _keep_flag(op, attrs):
            return tuple(1 if i in axes else d for i, d in enumerate(s))
        return tuple(d for i, d in enumerate(s) if i not in axes)
    return shape


def _axis_red(op, mean):
    def axes_of(ctx, x, attrs, nb):
        r = len(ctx.shape(x)) - nb
        return _b(nb, norm_axes(op, attrs["axis"], r))

    def forward(ctx, args, attrs, nb):
        x = args[0]
        ax = axes_of(ctx, x, attrs, nb)
        if not ax:
            return x
        y = ctx.sum(x, axis=ax, keepdims=attrs["keepdims"])
        if mean:
            y = ctx.div(y, ctx.convert(_count(ctx.shape(x), ax)))
        return y

    def vjp(ctx, g, args, y, attrs, nb):
        x = args[0]
        ax = axes_of(ctx, x, attrs, nb)
        if mean and ax:
            g = ctx.div(g, ctx.convert(_count(ctx.shape(x), ax)))
        return [_expand_back(ctx, g, ctx.shape(x), set(ax))]

    def jvp(ctx, args, tans, y, attrs, nb):
        return None if tans[0] is None else forward(ctx, [tans[0]], attrs, nb)

    register(OpRecord(name=op, arity=(1, 1), shape=_axis_red_shape(op), forward=forward,
                      vjp=vjp, jvp=jvp, attrs={"axis": REQUIRED, "keepdims": False},
                      capsule=f"reference.{op}", reduces=True,
                      affine="any",
                      doc=f"{'mean' if mean else 'sum'} over per-example axis (int or list)"))


_axis_red("reduce_sum", mean=False)
_axis_red("reduce_mean", mean=True)


# ------------------------------------------------------------------------------- softmax
def _axis_shape(op):
    def shape(in_shapes, attrs, declared=None):
        s = tuple(in_shapes[0])
        if not s:
            raise ShapeRuleError(f"{op}: input must have rank >= 1, got []")
        norm_axis(op, attrs["axis"], len(s))
        return s
    return shape


def _ax(op, ctx, x, attrs, nb):
    return nb + norm_axis(op, attrs["axis"], len(ctx.shape(x)) - nb)


def _shifted(ctx, x, a):
    return ctx.sub(x, ctx.amax(x, axis=a, keepdims=True))


def _softmax_forward(ctx, args, attrs, nb):
    a = _ax("softmax", ctx, args[0], attrs, nb)
    e = ctx.exp(_shifted(ctx, args[0], a))
    return ctx.div(e, ctx.sum(e, axis=a, keepdims=True))


def _softmax_vjp(ctx, g, args, y, attrs, nb):
    a = _ax("softmax", ctx, args[0], attrs, nb)
    dot = ctx.sum(ctx.mul(g, y), axis=a, keepdims=True)
    return [ctx.mul(y, ctx.sub(g, dot))]


def _softmax_jvp(ctx, args, tans, y, attrs, nb):
    if tans[0] is None:
        return None
    return _softmax_vjp(ctx, tans[0], args, y, attrs, nb)[0]   # the Jacobian is symmetric


def _softmax_interval(ctx, args, attrs, nb):
    """softmax over an interval context, coordinate i as ``1 / sum_j exp(x_j - x_i)``
    with the j = i term exactly 1.

    Why tighter: coordinate i increases in x_i and decreases in every other x_j.  In this
    form each x_j (j != i) occurs once, and x_i occurs in every term with the same
    (decreasing) effect on the sum, so interval arithmetic yields the exact range of the
    coordinate over the box (lower end at x_i = lo_i, x_j = hi_j; upper end the other way),
    up to the outward rounding of each operation.  The generic rule exp(x - max) / sum
    uses every entry in the numerator, the max and the sum, and loses those correlations
    (its boxes can even exceed [0, 1]).  The result is intersected with the generic rule's
    box: both enclose the true range, so the intersection does, and it is never looser.
    Cost: an n x n table per softmax row.
    """
    x = args[0]
    a = _ax("softmax", ctx, x, attrs, nb)
    s = tuple(ctx.shape(x))
    n = s[a]
    xi = ctx.reshape(x, s[:a + 1] + (1,) + s[a + 1:])     # i along axis a
    xj = ctx.reshape(x, s[:a] + (1,) + s[a:])             # j along axis a + 1
    terms = ctx.exp(ctx.sub(xj, xi))                      # exp(x_j - x_i)
    diagonal = np.eye(n, dtype=bool).reshape((n, n) + (1,) * (len(s) - a - 1))
    terms = ctx.where(diagonal, ctx.ones(()), terms)      # exp(x_i - x_i) = 1 exactly
    tight = ctx.div(ctx.ones(()), ctx.sum(terms, axis=a + 1))
    generic = _softmax_forward(ctx, args, attrs, nb)
    # intersection: endpointwise max of the lower ends, min of the upper ends (exact)
    return Interval(ctx.maximum(tight, generic).lo, ctx.minimum(tight, generic).hi)


register(OpRecord(name="softmax", arity=(1, 1), shape=_axis_shape("softmax"),
                  forward=_softmax_forward, vjp=_softmax_vjp, jvp=_softmax_jvp,
                  interval=_softmax_interval,
                  attrs={"axis": REQUIRED}, capsule="reference.softmax", reduces=True,
                  doc="exp(x - max) / sum exp(x - max) along a per-example axis"))


def _log_softmax_forward(ctx, args, attrs, nb):
    a = _ax("log_softmax", ctx, args[0], attrs, nb)
    z = _shifted(ctx, args[0], a)
    return ctx.sub(z, ctx.log(ctx.sum(ctx.exp(z), axis=a, keepdims=True)))


def _log_softmax_vjp(ctx, g, args, y, attrs, nb):
    a = _ax("log_softmax", ctx, args[0], attrs, nb)
    return [ctx.sub(g, ctx.mul(ctx.exp(y), ctx.sum(g, axis=a, keepdims=True)))]


def _log_softmax_jvp(ctx, args, tans, y, attrs, nb):
    if tans[0] is None:
        return None
    a = _ax("log_softmax", ctx, args[0], attrs, nb)
    return ctx.sub(tans[0], ctx.sum(ctx.mul(ctx.exp(y), tans[0]), axis=a, keepdims=True))


register(OpRecord(name="log_softmax", arity=(1, 1), shape=_axis_shape("log_softmax"),
                  forward=_log_softmax_forward, vjp=_log_softmax_vjp, jvp=_log_softmax_jvp,
                  attrs={"axis": REQUIRED}, capsule="reference.log_softmax", reduces=True,
                  doc="(x - max) - log sum exp(x - max) along a per-example axis"))


# ----------------------------------------------------------------------------- layernorm
LAYERNORM_EPS = "1e-5"   # torch's default, used when the payload has no eps


def _ln_params(in_shapes, attrs, out_shape):
    s = tuple(in_shapes[0])
    a = norm_axis("layernorm", attrs["axis"], len(s))
    return {"gamma": s[a:], "beta": s[a:], "eps": ()}


def _ln_stats(ctx, x, eps, attrs, nb):
    r = len(ctx.shape(x)) - nb
    a = norm_axis("layernorm", attrs["axis"], r)
    axes = tuple(range(nb + a, nb + r))
    n = ctx.convert(_count(ctx.shape(x), axes))
    mu = ctx.div(ctx.sum(x, axis=axes, keepdims=True), n)
    d = ctx.sub(x, mu)
    var = ctx.div(ctx.sum(ctx.square(d), axis=axes, keepdims=True), n)   # biased, as torch
    inv = ctx.div(ctx.ones(()), ctx.sqrt(ctx.add(var, eps)))
    return axes, n, d, inv, ctx.mul(d, inv)


def _ln_forward(ctx, args, attrs, nb):
    x, gamma, beta, eps = args
    _, _, _, _, xhat = _ln_stats(ctx, x, eps, attrs, nb)
    return ctx.add(ctx.mul(xhat, gamma), beta)


def _ln_vjp(ctx, g, args, y, attrs, nb):
    x, gamma, beta, eps = args
    axes, n, d, inv, xhat = _ln_stats(ctx, x, eps, attrs, nb)
    gx_hat = ctx.mul(g, gamma)
    m1 = ctx.div(ctx.sum(gx_hat, axis=axes, keepdims=True), n)
    m2 = ctx.div(ctx.sum(ctx.mul(gx_hat, xhat), axis=axes, keepdims=True), n)
    gx = ctx.mul(inv, ctx.sub(ctx.sub(gx_hat, m1), ctx.mul(xhat, m2)))
    lead = tuple(range(axes[0]))
    ggamma = ctx.mul(g, xhat)
    gbeta = g
    if lead:
        ggamma = ctx.sum(ggamma, axis=lead)
        gbeta = ctx.sum(gbeta, axis=lead)
    return [gx, ggamma, gbeta, None]


def _ln_jvp(ctx, args, tans, y, attrs, nb):
    x, gamma, beta, eps = args
    tx, tg, tbeta, _ = tans
    axes, n, d, inv, xhat = _ln_stats(ctx, x, eps, attrs, nb)
    t = None
    if tx is not None:
        td = ctx.sub(tx, ctx.div(ctx.sum(tx, axis=axes, keepdims=True), n))
        tvar = ctx.div(ctx.mul(ctx.convert(2), ctx.sum(ctx.mul(d, td), axis=axes, keepdims=True)), n)
        # d(inv) = -inv^3 * tvar / 2
        tinv = ctx.neg(ctx.mul(ctx.mul(ctx.convert("0.5"), tvar), ctx.mul(inv, ctx.square(inv))))
        txhat = ctx.add(ctx.mul(td, inv), ctx.mul(d, tinv))
        t = ctx.mul(txhat, gamma)
    if tg is not None:
        t = add_opt(ctx, t, ctx.mul(xhat, tg))
    if tbeta is not None:
        t = ctx.broadcast_to(tbeta, ctx.shape(y)) if t is None else ctx.add(t, tbeta)
    return t


register(OpRecord(
    name="layernorm", arity=(1, 1), shape=_axis_shape("layernorm"), forward=_ln_forward,
    vjp=_ln_vjp, jvp=_ln_jvp, attrs={"axis": REQUIRED},
    params=("gamma", "beta", "eps"), param_shapes=_ln_params,
    param_defaults={"gamma": "ones", "beta": "zeros", "eps": LAYERNORM_EPS},
    capsule="reference.layernorm", reduces=True,
    doc="normalise over per-example axes axis.. (torch normalized_shape = shape[axis:]), "
        "payload gamma/beta of that shape and eps (default 1e-5)"))


# ------------------------------------------------------------------------ batchnorm_eval
def _bn_params(in_shapes, attrs, out_shape):
    s = tuple(in_shapes[0])
    a = norm_axis("batchnorm_eval", attrs["axis"], len(s))
    c = (s[a],)
    return {"mean": c, "var": c, "gamma": c, "beta": c, "eps": ()}


def _bn_prep(ctx, x, args, attrs, nb):
    r = len(ctx.shape(x)) - nb
    a = norm_axis("batchnorm_eval", attrs["axis"], r)
    tail = (1,) * (r - a - 1)

    def chan(v):
        return ctx.reshape(v, (ctx.shape(v)[0],) + tail)

    mean, var, gamma, beta, eps = args[1:]
    inv = ctx.div(ctx.ones(()), ctx.sqrt(ctx.add(var, eps)))
    others = tuple(i for i in range(len(ctx.shape(x))) if i != nb + a)
    return chan, inv, others


def _bn_forward(ctx, args, attrs, nb):
    x, mean, var, gamma, beta, eps = args
    chan, inv, _ = _bn_prep(ctx, x, args, attrs, nb)
    xhat = ctx.mul(ctx.sub(x, chan(mean)), chan(inv))
    return ctx.add(ctx.mul(xhat, chan(gamma)), chan(beta))


def _bn_vjp(ctx, g, args, y, attrs, nb):
    x, mean, var, gamma, beta, eps = args
    chan, inv, others = _bn_prep(ctx, x, args, attrs, nb)
    s = ctx.mul(gamma, inv)
    gx = ctx.mul(g, chan(s))
    d = ctx.sub(x, chan(mean))
    gbeta = ctx.sum(g, axis=others)
    gd = ctx.sum(ctx.mul(g, d), axis=others)            # sum g (x - mean) per channel
    ggamma = ctx.mul(gd, inv)
    gmean = ctx.neg(ctx.mul(gbeta, s))
    # d/dvar (var+eps)^(-1/2) = -inv^3 / 2
    gvar = ctx.neg(ctx.mul(ctx.mul(gd, gamma),
                           ctx.mul(ctx.convert("0.5"), ctx.mul(inv, ctx.square(inv)))))
    return [gx, gmean, gvar, ggamma, gbeta, None]


def _bn_jvp(ctx, args, tans, y, attrs, nb):
    x, mean, var, gamma, beta, eps = args
    tx, tmean, tvar, tgamma, tbeta, _ = tans
    chan, inv, _ = _bn_prep(ctx, x, args, attrs, nb)
    s = ctx.mul(gamma, inv)
    d = ctx.sub(x, chan(mean))
    t = None
    if tx is not None:
        t = ctx.mul(tx, chan(s))
    if tmean is not None:
        t = add_opt(ctx, t, ctx.neg(ctx.mul(ctx.broadcast_to(chan(ctx.mul(tmean, s)), ctx.shape(y)),
                                            ctx.ones(()))))
    if tvar is not None:
        k = ctx.neg(ctx.mul(ctx.mul(tvar, gamma),
                            ctx.mul(ctx.convert("0.5"), ctx.mul(inv, ctx.square(inv)))))
        t = add_opt(ctx, t, ctx.mul(d, chan(k)))
    if tgamma is not None:
        t = add_opt(ctx, t, ctx.mul(ctx.mul(d, chan(inv)), chan(tgamma)))
    if tbeta is not None:
        tb = ctx.broadcast_to(chan(tbeta), ctx.shape(y))
        t = add_opt(ctx, t, tb)
    return t


register(OpRecord(
    name="batchnorm_eval", arity=(1, 1), shape=_axis_shape("batchnorm_eval"),
    forward=_bn_forward, vjp=_bn_vjp, jvp=_bn_jvp, attrs={"axis": 0},
    params=("mean", "var", "gamma", "beta", "eps"), param_shapes=_bn_params,
    param_defaults={"gamma": "ones", "beta": "zeros", "eps": LAYERNORM_EPS},
    capsule="reference.batchnorm_eval",
    affine="any",
    doc="eval-mode BatchNorm on a per-example channel axis (default 0 of [C, ...]): "
        "(x - mean)/sqrt(var + eps) * gamma + beta"))


# ==================================================================================
# Reductions of real networks: reduce_max, reduce_min, reduce_prod, reduce_sum_square
# (attribute axis: int, list or none = every per-example axis; keepdims), and the global
# pools over the spatial axes of [C, spatial...] (ONNX GlobalAveragePool/GlobalMaxPool:
# the spatial axes are kept with length 1).
#
# max/min: the derivative splits ties equally between the maximal entries (torch.amax and
# the binary max record's rule), so it needs comparisons (a point or dual context); over
# a dual context the tangent comes from the record's JVP.  prod multiplies left to right,
# one rounding per product, in every context (not the context's summation order); its
# derivative uses prefix and suffix products, so zeros need no division.
# ==================================================================================


def _opt_axes(op, attrs, r):
    return norm_axes(op, attrs["axis"], r)


def _red_shape(op):
    def shape(in_shapes, attrs, declared=None):
        s = tuple(in_shapes[0])
        axes = _opt_axes(op, attrs, len(s))
        if op in ("reduce_max", "reduce_min") and any(s[a] == 0 for a in axes):
            raise ShapeRuleError(f"{op}: cannot reduce the empty axis of {list(s)}")
        if _keep_flag(op, attrs):
            return tuple(1 if i in axes else d for i, d in enumerate(s))
        return tuple(d for i, d in enumerate(s) if i not in axes)
    return shape


def _full_axes(op, ctx, x, attrs, nb):
    return _b(nb, _opt_axes(op, attrs, len(ctx.shape(x)) - nb))


def _kept(ctx, v, x_shape, axes):
    """``v`` reduced over ``axes`` (with or without keepdims) as the keepdims shape."""
    return ctx.reshape(v, tuple(1 if i in axes else d for i, d in enumerate(x_shape)))


def _extreme(sign):
    def value(ctx, x, axes, keepdims):
        if not axes:
            return x
        if sign > 0:
            return ctx.amax(x, axis=axes, keepdims=keepdims)
        return ctx.neg(ctx.amax(ctx.neg(x), axis=axes, keepdims=keepdims))

    def weights(ctx, x, y, axes):
        """1/k on the k entries equal to the extreme of their group, 0 elsewhere."""
        xs = ctx.shape(x)
        yk = ctx.broadcast_to(_kept(ctx, y, xs, axes), xs)
        lt = np.asarray(ctx.less(x, yk) if sign > 0 else ctx.less(yk, x), dtype=bool)
        hit = ~lt
        k = np.broadcast_to(hit.sum(axis=axes, keepdims=True), xs)
        return ctx.div(ctx.convert(hit.astype(np.int64)), ctx.convert(k.astype(np.int64)))
    return value, weights


def _extreme_record(op, sign, doc):
    value, weights = _extreme(sign)

    def forward(ctx, args, attrs, nb):
        return value(ctx, args[0], _full_axes(op, ctx, args[0], attrs, nb), attrs["keepdims"])

    def vjp(ctx, g, args, y, attrs, nb):
        x = args[0]
        axes = _full_axes(op, ctx, x, attrs, nb)
        if not axes:
            return [g]
        xs = ctx.shape(x)
        gb = ctx.broadcast_to(_kept(ctx, g, xs, axes), xs)
        return [ctx.mul(gb, weights(ctx, x, y, axes))]

    def jvp(ctx, args, tans, y, attrs, nb):
        if tans[0] is None:
            return None
        x = args[0]
        axes = _full_axes(op, ctx, x, attrs, nb)
        if not axes:
            return tans[0]
        return ctx.sum(ctx.mul(tans[0], weights(ctx, x, y, axes)), axis=axes,
                       keepdims=attrs["keepdims"])

    register(OpRecord(name=op, arity=(1, 1), shape=_red_shape(op),
                      forward=_over_duals(forward, jvp), vjp=vjp, jvp=jvp,
                      attrs={"axis": None, "keepdims": False}, capsule=f"reference.{op}",
                      doc=doc))


_extreme_record("reduce_max", 1, "max over per-example axes (none = all); the derivative "
                "splits ties equally (torch.amax)")
_extreme_record("reduce_min", -1, "min over per-example axes (none = all); the derivative "
                "splits ties equally (torch.amin)")


# --------------------------------------------------------------------------- reduce_prod
def _to_last(ctx, x, axes):
    """x with the reduced axes moved last and merged: ([..., n], kept shape)."""
    xs = ctx.shape(x)
    keep = [i for i in range(len(xs)) if i not in axes]
    t = ctx.transpose(x, tuple(keep) + tuple(axes))
    kshape = tuple(xs[i] for i in keep)
    return ctx.reshape(t, kshape + (_count(xs, axes),)), kshape


def _from_last(ctx, v, xs, axes):
    """Inverse of :func:`_to_last` for a [..., n] array of x's size."""
    keep = [i for i in range(len(xs)) if i not in axes]
    perm = tuple(keep) + tuple(axes)
    t = ctx.reshape(v, tuple(xs[i] for i in perm))
    return ctx.transpose(t, tuple(int(i) for i in np.argsort(perm)))


def _cumprods(ctx, m):
    """Left-to-right products of m [..., n]: (prefix products P_1..P_n as a list)."""
    n = ctx.shape(m)[-1]
    last = len(ctx.shape(m)) - 1
    cols = [ctx.reshape(ctx.take(m, [k], axis=last), ctx.shape(m)[:-1]) for k in range(n)]
    out, acc = [], None
    for c in cols:
        acc = c if acc is None else ctx.mul(acc, c)
        out.append(acc)
    return cols, out


def _prod_forward(ctx, args, attrs, nb):
    x = args[0]
    axes = _full_axes("reduce_prod", ctx, x, attrs, nb)
    if not axes:
        return x
    xs = ctx.shape(x)
    m, kshape = _to_last(ctx, x, axes)
    if ctx.shape(m)[-1] == 0:
        y = ctx.ones(kshape)
    else:
        y = _cumprods(ctx, m)[1][-1]
    return _kept(ctx, y, xs, axes) if attrs["keepdims"] else y


def _prod_partials(ctx, x, axes):
    """d prod / d x_i = prod_{j<i} x_j * prod_{j>i} x_j (prefix and suffix products)."""
    xs = ctx.shape(x)
    m, kshape = _to_last(ctx, x, axes)
    n = ctx.shape(m)[-1]
    cols, pre = _cumprods(ctx, m)
    suf = [None] * n
    acc = None
    for k in range(n - 1, -1, -1):
        suf[k] = acc
        acc = cols[k] if acc is None else ctx.mul(cols[k], acc)
    parts = []
    for k in range(n):
        left = pre[k - 1] if k > 0 else None
        right = suf[k]
        if left is None and right is None:
            parts.append(ctx.ones(kshape))
        elif left is None:
            parts.append(right)
        elif right is None:
            parts.append(left)
        else:
            parts.append(ctx.mul(left, right))
    d = ctx.stack(parts, axis=len(kshape))
    return _from_last(ctx, d, xs, axes)


def _prod_vjp(ctx, g, args, y, attrs, nb):
    x = args[0]
    axes = _full_axes("reduce_prod", ctx, x, attrs, nb)
    if not axes:
        return [g]
    xs = ctx.shape(x)
    return [ctx.mul(ctx.broadcast_to(_kept(ctx, g, xs, axes), xs), _prod_partials(ctx, x, axes))]


def _prod_jvp(ctx, args, tans, y, attrs, nb):
    if tans[0] is None:
        return None
    x = args[0]
    axes = _full_axes("reduce_prod", ctx, x, attrs, nb)
    if not axes:
        return tans[0]
    return ctx.sum(ctx.mul(tans[0], _prod_partials(ctx, x, axes)), axis=axes,
                   keepdims=attrs["keepdims"])


register(OpRecord(name="reduce_prod", arity=(1, 1), shape=_red_shape("reduce_prod"),
                  forward=_prod_forward, vjp=_prod_vjp, jvp=_prod_jvp,
                  attrs={"axis": None, "keepdims": False}, capsule="reference.reduce_prod",
                  doc="product over per-example axes (none = all), left to right with one "
                      "rounding per multiplication in every context"))


# --------------------------------------------------------------------- reduce_sum_square
def _ssq_forward(ctx, args, attrs, nb):
    x = args[0]
    axes = _full_axes("reduce_sum_square", ctx, x, attrs, nb)
    sq = ctx.square(x)
    return ctx.sum(sq, axis=axes, keepdims=attrs["keepdims"]) if axes else sq


def _ssq_vjp(ctx, g, args, y, attrs, nb):
    x = args[0]
    axes = _full_axes("reduce_sum_square", ctx, x, attrs, nb)
    xs = ctx.shape(x)
    gb = ctx.broadcast_to(_kept(ctx, g, xs, axes), xs) if axes else g
    return [ctx.mul(gb, ctx.mul(ctx.convert(2), x))]


def _ssq_jvp(ctx, args, tans, y, attrs, nb):
    if tans[0] is None:
        return None
    x = args[0]
    axes = _full_axes("reduce_sum_square", ctx, x, attrs, nb)
    t = ctx.mul(ctx.mul(ctx.convert(2), x), tans[0])
    return ctx.sum(t, axis=axes, keepdims=attrs["keepdims"]) if axes else t


register(OpRecord(name="reduce_sum_square", arity=(1, 1),
                  shape=_red_shape("reduce_sum_square"), forward=_ssq_forward,
                  vjp=_ssq_vjp, jvp=_ssq_jvp, attrs={"axis": None, "keepdims": False},
                  capsule="reference.reduce_sum_square", reduces=True,
                  doc="sum of squares over per-example axes (none = all); ctx.square is "
                      "tight over intervals"))


# --------------------------------------------------------------------------- global pools
def _global_shape(op):
    def shape(in_shapes, attrs, declared=None):
        s = tuple(in_shapes[0])
        if len(s) < 2:
            raise ShapeRuleError(f"{op}: input must be [C, spatial...] per example (rank >= "
                                 f"2), got {list(s)}")
        if op == "global_max_pool" and any(d == 0 for d in s[1:]):
            raise ShapeRuleError(f"{op}: empty spatial axes in {list(s)}")
        return (s[0],) + (1,) * (len(s) - 1)
    return shape


def _spatial(ctx, x, nb):
    return tuple(range(nb + 1, len(ctx.shape(x))))


def _gap_forward(ctx, args, attrs, nb):
    x = args[0]
    ax = _spatial(ctx, x, nb)
    return ctx.div(ctx.sum(x, axis=ax, keepdims=True), ctx.convert(_count(ctx.shape(x), ax)))


def _gap_vjp(ctx, g, args, y, attrs, nb):
    x = args[0]
    ax = _spatial(ctx, x, nb)
    xs = ctx.shape(x)
    return [ctx.broadcast_to(ctx.div(g, ctx.convert(_count(xs, ax))), xs)]


register(OpRecord(name="global_avg_pool", arity=(1, 1), shape=_global_shape("global_avg_pool"),
                  forward=_gap_forward, vjp=_gap_vjp,
                  jvp=lambda ctx, args, tans, y, attrs, nb: None if tans[0] is None
                  else _gap_forward(ctx, [tans[0]], attrs, nb),
                  capsule="reference.global_avg_pool", reduces=True,
                  affine="any",
                  doc="mean over the spatial axes of [C, spatial...] -> [C, 1, ...] (ONNX "
                      "GlobalAveragePool, torch AdaptiveAvgPool to 1)"))

_gmax_value, _gmax_weights = _extreme(1)


def _gmp_forward(ctx, args, attrs, nb):
    return _gmax_value(ctx, args[0], _spatial(ctx, args[0], nb), True)


def _gmp_vjp(ctx, g, args, y, attrs, nb):
    x = args[0]
    xs = ctx.shape(x)
    return [ctx.mul(ctx.broadcast_to(g, xs), _gmax_weights(ctx, x, y, _spatial(ctx, x, nb)))]


def _gmp_jvp(ctx, args, tans, y, attrs, nb):
    if tans[0] is None:
        return None
    x = args[0]
    ax = _spatial(ctx, x, nb)
    return ctx.sum(ctx.mul(tans[0], _gmax_weights(ctx, x, y, ax)), axis=ax, keepdims=True)


register(OpRecord(name="global_max_pool", arity=(1, 1), shape=_global_shape("global_max_pool"),
                  forward=_over_duals(_gmp_forward, _gmp_jvp), vjp=_gmp_vjp, jvp=_gmp_jvp,
                  capsule="reference.global_max_pool",
                  doc="max over the spatial axes of [C, spatial...] -> [C, 1, ...] (ONNX "
                      "GlobalMaxPool); ties split the derivative equally"))
