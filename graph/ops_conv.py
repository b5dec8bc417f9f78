"""Convolution and pooling op records in 1, 2 and 3 spatial dimensions (channels first:
the per-example value is [C, S1, ..., Sd]): conv1d/conv2d/conv3d, max_pool1d/2d/3d,
avg_pool1d/2d/3d.  ONE implementation serves every d; the records differ only in d.

Geometry attributes (ints, or one int per spatial axis): ``kernel_size``, ``stride``
(pools: default = the kernel), ``dilation``; ``padding`` is an int, one int per axis
(symmetric, as torch) or 2d ints ``[begin_1..begin_d, end_1..end_d]`` (ONNX ``pads``,
asymmetric); ``auto_pad`` is ONNX's ``NOTSET`` / ``SAME_UPPER`` / ``SAME_LOWER`` /
``VALID`` (then ``padding`` must stay 0; :func:`auto_pads` gives the pads it means).
Pools take ``ceil_mode`` (torch's rule: the last window must start inside the input or
its leading padding), avg pools ``count_include_pad`` (true: the divisor counts the taps
inside the padded input, as torch; false: only the taps inside the input).

conv is im2col + ``ctx.matmul``: windows are gathered with ``ctx.take`` (no arithmetic),
so the context's own dot product does all rounding, in the order (channel of the group,
kernel position row-major) the planner reports as the context's reduction order; every
context (object arrays, intervals, duals) works.  avg pools sum each window with
``ctx.sum`` over the kernel axes and divide once.  The adjoint of the window gather
(needed by VJPs) is :func:`ops_shape.take_adjoint` per spatial axis: a gather from the
zero-padded cotangent where windows do not overlap, a product with a 0/1 selection
matrix where they do (each output entry adds one non-zero term per window it lies in).
"""
from __future__ import annotations

import numpy as np

from .axes import add_opt, is_int
from .errors import ShapeRuleError
from .ops_shape import take_adjoint
from .oprecord import REQUIRED, OpRecord, register

AUTO_PAD = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
_AXIS_NAMES = {1: ("length",), 2: ("height", "width"), 3: ("depth", "height", "width")}
_SHAPE_NAMES = {1: "[C, L]", 2: "[C, H, W]", 3: "[C, D, H, W]"}


def _size(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def tup(op: str, name: str, v, d: int, minimum: int) -> tuple:
    """An int or ``d`` ints, each >= ``minimum``, as a ``d``-tuple."""
    vals = [v] * d if is_int(v) else (list(v) if isinstance(v, (list, tuple)) else None)
    if vals is None or len(vals) != d or not all(is_int(t) for t in vals):
        raise ShapeRuleError(f"{op}: attribute {name} must be an int or {d} ints, got {v!r}")
    if any(t < minimum for t in vals):
        raise ShapeRuleError(f"{op}: attribute {name}={v!r} must be >= {minimum}")
    return tuple(vals)


def auto_pads(mode: str, sizes, kernel, stride, dilation) -> tuple:
    """(begins, ends) of ONNX ``auto_pad``: SAME_* keeps ceil(S / stride) outputs with
    the odd padding entry at the end (UPPER) or the beginning (LOWER); VALID pads none."""
    begins, ends = [], []
    for S, k, s, dl in zip(sizes, kernel, stride, dilation):
        if mode == "VALID":
            begins.append(0), ends.append(0)
            continue
        n = -(-S // s)
        total = max(0, (n - 1) * s + dl * (k - 1) + 1 - S)
        small = total // 2
        if mode == "SAME_UPPER":
            begins.append(small), ends.append(total - small)
        else:
            begins.append(total - small), ends.append(small)
    return tuple(begins), tuple(ends)


def _padding(op, attrs, d, sizes, kernel, stride, dilation):
    mode = attrs["auto_pad"]
    if mode not in AUTO_PAD:
        raise ShapeRuleError(f"{op}: auto_pad must be one of {', '.join(AUTO_PAD)}, got {mode!r}")
    v = attrs["padding"]
    if mode != "NOTSET":
        if v not in (0, [0] * d, (0,) * d, (0,) * 2 * d):
            raise ShapeRuleError(f"{op}: padding {v!r} with auto_pad={mode} (give one or the "
                                 f"other)")
        return auto_pads(mode, sizes, kernel, stride, dilation)
    if isinstance(v, (list, tuple)) and len(v) == 2 * d and d > 0:
        if not all(is_int(t) and t >= 0 for t in v):
            raise ShapeRuleError(f"{op}: attribute padding must hold non-negative ints, got {v!r}")
        return tuple(v[:d]), tuple(v[d:])
    try:
        p = tup(op, "padding", v, d, 0)
    except ShapeRuleError:
        raise ShapeRuleError(f"{op}: attribute padding must be an int, {d} ints or {2 * d} "
                             f"ints (begins then ends), got {v!r}") from None
    return p, p


def _geom(op, d, in_shape, attrs, *, pool):
    s = tuple(in_shape)
    if len(s) != d + 1:
        raise ShapeRuleError(f"{op}: input must be {_SHAPE_NAMES[d]} per example, got {list(s)}")
    C, sizes = s[0], s[1:]
    k = tup(op, "kernel_size", attrs["kernel_size"], d, 1)
    st = attrs["stride"]
    if st is None:
        st = attrs["kernel_size"]
    st = tup(op, "stride", st, d, 1)
    dl = tup(op, "dilation", attrs["dilation"], d, 1)
    pb, pe = _padding(op, attrs, d, sizes, k, st, dl)
    ceil = attrs.get("ceil_mode", False)
    if not isinstance(ceil, bool):
        raise ShapeRuleError(f"{op}: attribute ceil_mode must be true or false, got {ceil!r}")
    outs, over = [], []
    for i in range(d):
        ext = dl[i] * (k[i] - 1) + 1
        span = sizes[i] + pb[i] + pe[i] - ext
        if span < 0:
            raise ShapeRuleError(f"{op}: kernel extent {ext} exceeds padded "
                                 f"{_AXIS_NAMES[d][i]} {sizes[i] + pb[i] + pe[i]}")
        n = (-(-span // st[i]) if ceil else span // st[i]) + 1
        if ceil and (n - 1) * st[i] >= sizes[i] + pb[i]:
            n -= 1                          # torch: the last window starts inside
        outs.append(n)
        over.append(max(0, (n - 1) * st[i] + ext - (sizes[i] + pb[i] + pe[i])))
    return dict(d=d, C=C, S=sizes, k=k, s=st, dl=dl, pb=pb, pe=pe, O=tuple(outs),
                over=tuple(over))


def _window_index(n_out, k, s, dl, offset=0):
    """[n_out, k] index table: position of tap ``j`` of window ``i`` (minus ``offset``)."""
    return np.arange(n_out)[:, None] * s + np.arange(k)[None, :] * dl - offset


def _flat_batch(ctx, x, nb):
    s = ctx.shape(x)
    return ctx.reshape(x, (_size(s[:nb]),) + tuple(s[nb:])), tuple(s[:nb])


def _pad(ctx, x, begins, ends):
    """Zero padding of the spatial axes 2.. (concat with context zeros: no rounding)."""
    for i, (b, e) in enumerate(zip(begins, ends)):
        ax = 2 + i
        parts = []
        for n in (b, e):
            s = list(ctx.shape(x))
            s[ax] = n
            parts.append(ctx.zeros(tuple(s)) if n else None)
        if parts[0] is None and parts[1] is None:
            continue
        x = ctx.concat([p for p in (parts[0], x, parts[1]) if p is not None], axis=ax)
    return x


def _unpad(ctx, x, begins, sizes):
    for i, (b, S) in enumerate(zip(begins, sizes)):
        if ctx.shape(x)[2 + i] != S:
            x = ctx.take(x, np.arange(b, b + S), axis=2 + i)
    return x


def _gather(ctx, x, idxs):
    """[N, C, S1..Sd] -> windows [N, C, O1, K1, ..., Od, Kd]."""
    for j, idx in enumerate(idxs):
        x = ctx.take(x, idx, axis=2 + 2 * j)
    return x


def _scatter(ctx, g, idxs, sizes):
    """Adjoint of :func:`_gather`: [N, C, O1, K1, ..., Od, Kd] -> [N, C, S1..Sd]."""
    for j in reversed(range(len(idxs))):
        ax = 2 + 2 * j
        s = tuple(ctx.shape(g))
        g = ctx.reshape(g, s[:ax] + (s[ax] * s[ax + 1],) + s[ax + 2:])
        g = take_adjoint(ctx, g, idxs[j].reshape(-1), sizes[j], ax)
    return g


def _taps_last(ctx, w, q, N):
    """[N, C, O1, K1, ..., Od, Kd] -> [N, C, O1..Od, K1*...*Kd]."""
    d = q["d"]
    perm = (0, 1) + tuple(2 + 2 * j for j in range(d)) + tuple(3 + 2 * j for j in range(d))
    return ctx.reshape(ctx.transpose(w, perm), (N, q["C"]) + q["O"] + (_size(q["k"]),))


def _from_taps(ctx, t, q, N):
    """Inverse of :func:`_taps_last`."""
    d = q["d"]
    t = ctx.reshape(t, (N, q["C"]) + q["O"] + q["k"])
    perm = (0, 1) + tuple(v for j in range(d) for v in (2 + j, 2 + d + j))
    return ctx.transpose(t, perm)


# ---------------------------------------------------------------------------- conv
def _conv_geom(op, d, in_shapes, attrs, declared=None):
    q = _geom(op, d, in_shapes[0], attrs, pool=False)
    g = attrs["groups"]
    if not is_int(g) or g < 1:
        raise ShapeRuleError(f"{op}: attribute groups must be a positive int, got {g!r}")
    O = attrs["out_channels"]
    if O is None:
        if declared is None or len(declared) != d + 1:
            raise ShapeRuleError(f"{op}: out_channels is neither an attribute nor readable "
                                 f"from the declared shape {list(declared or [])}")
        O = declared[0]
    if not is_int(O) or O < 1:
        raise ShapeRuleError(f"{op}: out_channels must be a positive int, got {O!r}")
    if q["C"] % g or O % g:
        raise ShapeRuleError(f"{op}: groups={g} must divide in channels {q['C']} and out "
                             f"channels {O}")
    q.update(OC=O, G=g)
    return q


def _conv_cols(ctx, x, q, nb):
    """im2col: [B.., C, S..] -> [N, G, P, K] with P = prod O, K = C/G * prod k."""
    x, B = _flat_batch(ctx, x, nb)
    x = _pad(ctx, x, q["pb"], q["pe"])
    idxs = [_window_index(q["O"][j], q["k"][j], q["s"][j], q["dl"][j]) for j in range(q["d"])]
    w = _gather(ctx, x, idxs)
    N, d = ctx.shape(w)[0], q["d"]
    perm = (0,) + tuple(2 + 2 * j for j in range(d)) + (1,) + tuple(3 + 2 * j for j in range(d))
    t = ctx.transpose(w, perm)                                   # [N, O.., C, K..]
    G = q["G"]
    K = q["C"] // G * _size(q["k"])
    t = ctx.reshape(t, (N, _size(q["O"]), G, K))
    return ctx.transpose(t, (0, 2, 1, 3)), B, idxs


def _wmat(ctx, w, q):
    """weight [O, C/G, k..] -> [G, K, O/G]."""
    G = q["G"]
    w3 = ctx.reshape(w, (G, q["OC"] // G, q["C"] // G * _size(q["k"])))
    return ctx.transpose(w3, (0, 2, 1))


def _conv_core(ctx, x, w, q, nb, bias=None):
    """The convolution as one product of im2col columns and the weight matrix; ``bias``
    goes to the context with that product (``Context.matmul_add``: a mixed-precision
    context adds it inside its accumulator, the others after the product's rounding)."""
    cols, B, _ = _conv_cols(ctx, x, q, nb)
    if bias is None:
        y = ctx.matmul(cols, _wmat(ctx, w, q))                   # [N, G, P, O/G]
    else:
        G = q["G"]
        y = ctx.matmul_add(cols, _wmat(ctx, w, q), ctx.reshape(bias, (G, 1, q["OC"] // G)))
    y = ctx.transpose(y, (0, 1, 3, 2))
    return ctx.reshape(y, B + (q["OC"],) + q["O"])


def _bias_b(ctx, b, d):
    return ctx.reshape(b, (ctx.shape(b)[0],) + (1,) * d)


def _conv_record(d):
    op = f"conv{d}d"

    def shape(in_shapes, attrs, declared=None):
        q = _conv_geom(op, d, in_shapes, attrs, declared)
        return (q["OC"],) + q["O"]

    def params(in_shapes, attrs, out_shape):
        q = _conv_geom(op, d, in_shapes, attrs, out_shape)
        return {"weight": (q["OC"], q["C"] // q["G"]) + q["k"], "bias": (q["OC"],)}

    def geom_of(ctx, x, w, attrs, nb):
        # inside a rule the weight gives out_channels when the attribute is absent
        return _conv_geom(op, d, [ctx.shape(x)[nb:]], dict(attrs, out_channels=ctx.shape(w)[0]))

    def forward(ctx, args, attrs, nb):
        x, w, b = args
        q = geom_of(ctx, x, w, attrs, nb)
        return _conv_core(ctx, x, w, q, nb, bias=b)

    def vjp(ctx, g, args, y, attrs, nb, needs=None):
        x, w, b = args
        q = geom_of(ctx, x, w, attrs, nb)
        B = tuple(ctx.shape(x)[:nb])
        N, K = _size(B), q["C"] // q["G"] * _size(q["k"])
        G, O, P = q["G"], q["OC"], _size(q["O"])
        gy = ctx.reshape(g, (N, G, O // G, P))
        gyT = ctx.transpose(gy, (0, 1, 3, 2))                    # [N, G, P, O/G]
        gw = gb = None
        if needs is None or needs[1]:
            # weight: sum over samples and positions of cols^T gy (im2col of x: skipped
            # when only the input's cotangent is wanted, e.g. CROWN's backward pass)
            cols = _conv_cols(ctx, x, q, nb)[0]
            colsT = ctx.reshape(ctx.transpose(cols, (1, 3, 0, 2)), (G, K, N * P))
            gyr = ctx.reshape(ctx.transpose(gyT, (1, 0, 2, 3)), (G, N * P, O // G))
            gw = ctx.matmul(colsT, gyr)                          # [G, K, O/G]
            gw = ctx.reshape(ctx.transpose(gw, (0, 2, 1)), ctx.shape(w))
        if needs is None or needs[2]:
            gb = ctx.sum(ctx.reshape(g, (N, O, P)), axis=(0, 2))
        if needs is not None and not needs[0]:
            return [None, gw, gb]
        idxs = [_window_index(q["O"][j], q["k"][j], q["s"][j], q["dl"][j]) for j in range(q["d"])]
        # input: gcols = gy W, then the adjoint of im2col
        w3 = ctx.transpose(_wmat(ctx, w, q), (0, 2, 1))          # [G, O/G, K]
        gcols = ctx.matmul(gyT, w3)                              # [N, G, P, K]
        t = ctx.reshape(ctx.transpose(gcols, (0, 2, 1, 3)), (N,) + q["O"] + (q["C"],) + q["k"])
        perm = (0, 1 + d) + tuple(v for j in range(d) for v in (1 + j, 2 + d + j))
        t = ctx.transpose(t, perm)                               # [N, C, O1, K1, ...]
        padded = tuple(S + b0 + e0 for S, b0, e0 in zip(q["S"], q["pb"], q["pe"]))
        gx = _unpad(ctx, _scatter(ctx, t, idxs, padded), q["pb"], q["S"])
        return [ctx.reshape(gx, B + (q["C"],) + q["S"]), gw, gb]

    vjp.takes_needs = True       # see oprecord: skip the cotangents nobody asked for

    def jvp(ctx, args, tans, y, attrs, nb):
        x, w, b = args
        tx, tw, tb = tans
        q = geom_of(ctx, x, w, attrs, nb)
        t = None
        if tx is not None:
            t = _conv_core(ctx, tx, w, q, nb)
        if tw is not None:
            t = add_opt(ctx, t, _conv_core(ctx, x, tw, q, nb))
        if tb is not None:
            tbb = ctx.broadcast_to(_bias_b(ctx, tb, d), ctx.shape(y))
            t = tbb if t is None else ctx.add(t, tbb)
        return t

    register(OpRecord(
        name=op, arity=(1, 1), shape=shape, forward=forward, vjp=vjp, jvp=jvp,
        attrs={"kernel_size": REQUIRED, "out_channels": None, "stride": 1, "padding": 0,
               "dilation": 1, "groups": 1, "auto_pad": "NOTSET"},
        params=("weight", "bias"), param_shapes=params, param_defaults={"bias": "zeros"},
        capsule=f"reference.{op}", reduces=True, dot=True,
        affine="any",
        doc=f"{d}-d convolution (cross-correlation, as torch) of {_SHAPE_NAMES[d]}, payload "
            f"weight [O, C/groups, kernel..], bias [O]; zero padding (symmetric, asymmetric "
            f"or auto_pad), dilation, groups"))


# ---------------------------------------------------------------------------- pooling
def _pool_attrs(avg):
    a = {"kernel_size": REQUIRED, "stride": None, "padding": 0, "dilation": 1,
         "ceil_mode": False, "auto_pad": "NOTSET"}
    if avg:
        a["count_include_pad"] = True
    return a


def _clamped_index(op, n_out, k, s, dl, p, size):
    """Max-pool taps in the padding are redirected to an in-range tap of the SAME window
    (implicit -inf padding never wins a max, and a duplicate of a window member does not
    change it), so no infinities are needed: rational and interval contexts work too."""
    idx = _window_index(n_out, k, s, dl, offset=p)
    valid = (idx >= 0) & (idx < size)
    if not valid.any(axis=1).all():
        raise ShapeRuleError(f"{op}: a pooling window lies entirely in the padding")
    first = idx[np.arange(n_out), valid.argmax(axis=1)]
    return np.where(valid, idx, first[:, None])


def _max_idxs(op, q):
    return [_clamped_index(op, q["O"][j], q["k"][j], q["s"][j], q["dl"][j], q["pb"][j], q["S"][j])
            for j in range(q["d"])]


def _avg_counts(op, q):
    """Divisor per output position [O1..Od] (as float64 of small ints, exact)."""
    c = np.ones((), dtype=np.int64)
    for j in range(q["d"]):
        pos = _window_index(q["O"][j], q["k"][j], q["s"][j], q["dl"][j], offset=q["pb"][j])
        if q["cip"]:
            inside = (pos < q["S"][j] + q["pe"][j])          # taps inside the padded input
        else:
            inside = (pos >= 0) & (pos < q["S"][j])
        n = inside.sum(axis=1)
        if (n == 0).any():
            raise ShapeRuleError(f"{op}: a pooling window lies entirely in the padding "
                                 f"(count_include_pad=false divides by zero)")
        c = np.multiply.outer(c, n)
    return c


def _pool_record(d, avg):
    op = f"{'avg' if avg else 'max'}_pool{d}d"

    def geom(in_shape, attrs):
        q = _geom(op, d, in_shape, attrs, pool=True)
        if avg:
            cip = attrs["count_include_pad"]
            if not isinstance(cip, bool):
                raise ShapeRuleError(f"{op}: attribute count_include_pad must be true or "
                                     f"false, got {cip!r}")
            q["cip"] = cip
        return q

    def shape(in_shapes, attrs, declared=None):
        q = geom(in_shapes[0], attrs)
        if avg:
            _avg_counts(op, q)
        else:
            _max_idxs(op, q)
        return (q["C"],) + q["O"]

    # ------------------------------------------------------------------ max
    def max_windows(ctx, x, attrs, nb):
        q = geom(ctx.shape(x)[nb:], attrs)
        idxs = _max_idxs(op, q)
        x, B = _flat_batch(ctx, x, nb)
        N = ctx.shape(x)[0]
        return _taps_last(ctx, _gather(ctx, x, idxs), q, N), q, B, idxs, N

    def argmax_mask(ctx, w):
        am = np.asarray(ctx.argmax(w, axis=len(ctx.shape(w)) - 1))
        return np.arange(ctx.shape(w)[-1]) == am[..., None]

    def max_forward(ctx, args, attrs, nb):
        w, q, B, _, _ = max_windows(ctx, args[0], attrs, nb)
        return ctx.reshape(ctx.amax(w, axis=len(ctx.shape(w)) - 1), B + (q["C"],) + q["O"])

    def max_vjp(ctx, g, args, y, attrs, nb):
        w, q, B, idxs, N = max_windows(ctx, args[0], attrs, nb)
        mask = argmax_mask(ctx, w)
        s = ctx.shape(w)
        gb = ctx.broadcast_to(ctx.reshape(g, tuple(s[:-1]) + (1,)), s)
        gw = _from_taps(ctx, ctx.where(mask, gb, ctx.zeros(s)), q, N)
        gx = _scatter(ctx, gw, idxs, q["S"])
        return [ctx.reshape(gx, B + (q["C"],) + q["S"])]

    def max_jvp(ctx, args, tans, y, attrs, nb):
        if tans[0] is None:
            return None
        w = max_windows(ctx, args[0], attrs, nb)[0]
        t = max_windows(ctx, tans[0], attrs, nb)[0]
        mask = argmax_mask(ctx, w)
        r = ctx.sum(ctx.where(mask, t, ctx.zeros(ctx.shape(t))), axis=len(ctx.shape(t)) - 1)
        return ctx.reshape(r, ctx.shape(y))

    # ------------------------------------------------------------------ avg
    def avg_core(ctx, x, q, nb):
        x, B = _flat_batch(ctx, x, nb)
        x = _pad(ctx, x, q["pb"], tuple(e + o for e, o in zip(q["pe"], q["over"])))
        idxs = [_window_index(q["O"][j], q["k"][j], q["s"][j], q["dl"][j]) for j in range(d)]
        w = _gather(ctx, x, idxs)
        s = ctx.sum(w, axis=tuple(3 + 2 * j for j in range(d)))   # [N, C, O..]
        return ctx.reshape(ctx.div(s, ctx.convert(_avg_counts(op, q))), B + (q["C"],) + q["O"])

    def avg_forward(ctx, args, attrs, nb):
        return avg_core(ctx, args[0], geom(ctx.shape(args[0])[nb:], attrs), nb)

    def avg_vjp(ctx, g, args, y, attrs, nb):
        q = geom(ctx.shape(args[0])[nb:], attrs)
        g, B = _flat_batch(ctx, g, nb)
        N = ctx.shape(g)[0]
        gk = ctx.div(g, ctx.convert(_avg_counts(op, q)))
        keep = (N, q["C"]) + tuple(v for o in q["O"] for v in (o, 1))
        full = (N, q["C"]) + tuple(v for o, k in zip(q["O"], q["k"]) for v in (o, k))
        gw = ctx.broadcast_to(ctx.reshape(gk, keep), full)
        idxs = [_window_index(q["O"][j], q["k"][j], q["s"][j], q["dl"][j]) for j in range(d)]
        padded = tuple(S + b0 + e0 + o for S, b0, e0, o in zip(q["S"], q["pb"], q["pe"], q["over"]))
        gx = _unpad(ctx, _scatter(ctx, gw, idxs, padded), q["pb"], q["S"])
        return [ctx.reshape(gx, B + (q["C"],) + q["S"])]

    def avg_jvp(ctx, args, tans, y, attrs, nb):
        if tans[0] is None:
            return None
        return avg_core(ctx, tans[0], geom(ctx.shape(args[0])[nb:], attrs), nb)

    if avg:
        register(OpRecord(
            name=op, arity=(1, 1), shape=shape, forward=avg_forward, vjp=avg_vjp,
            jvp=avg_jvp, attrs=_pool_attrs(True), capsule=f"reference.{op}", reduces=True,
            affine="any",
            doc=f"mean over {d}-d windows of {_SHAPE_NAMES[d]} (stride defaults to the "
                f"kernel); zero padding counted unless count_include_pad=false; ceil_mode, "
                f"dilation, asymmetric or auto padding"))
    else:
        register(OpRecord(
            name=op, arity=(1, 1), shape=shape, forward=max_forward, vjp=max_vjp,
            jvp=max_jvp, attrs=_pool_attrs(False), capsule=f"reference.{op}",
            doc=f"max over {d}-d windows of {_SHAPE_NAMES[d]} (stride defaults to the "
                f"kernel); the derivative follows the first maximal tap (ctx.argmax), so "
                f"VJP/JVP need a point context"))


for _d in (1, 2, 3):
    _conv_record(_d)
    _pool_record(_d, avg=False)
    _pool_record(_d, avg=True)


def onnx_geometry(op: str, in_shape, attrs) -> dict:
    """The ONNX attributes (``Conv``/``MaxPool``/``AveragePool``) of a conv/pool node
    of per-example input shape ``in_shape``: explicit ``pads`` (auto_pad resolved),
    ``kernel_shape``, ``strides``, ``dilations``, and ``ceil_mode`` /
    ``count_include_pad`` for the pools (the exporter writes these)."""
    d = int(op[-2])
    pool = "pool" in op
    q = _geom(op, d, in_shape, attrs, pool=pool)
    out = dict(kernel_shape=list(q["k"]), strides=list(q["s"]), pads=list(q["pb"] + q["pe"]),
               dilations=list(q["dl"]))
    if pool:
        out["ceil_mode"] = int(bool(attrs["ceil_mode"]))
        if op.startswith("avg"):
            out["count_include_pad"] = int(bool(attrs["count_include_pad"]))
            if set(q["dl"]) == {1}:
                del out["dilations"]          # AveragePool has dilations from opset 19 only
    return out
