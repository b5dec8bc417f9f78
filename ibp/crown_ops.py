"""Fast, sound float64 operators for CROWN's backward pass (``interval:float64`` work).

CROWN maps its coefficient matrix Lambda (an interval (rows, n_v) of float64 endpoints)
through each affine node: ``Lambda -> Lambda M``.  The op table's VJP rules do that in
any interval context, but generically (windows gathered and scattered through interval
products with 0/1 matrices).  Here the common ops are applied directly with numpy/BLAS
in midpoint-radius form, with an a-priori rounding bound instead of directed rounding:

* ``Lambda = mid +- rad`` (mid the rounded midpoint, rad rounded up so that the interval
  is inside ``[mid - rad, mid + rad]``);
* ``Lambda M`` lies in ``mid M +- rad |M|``; the float product ``P = fl(mid M)`` is a sum
  of at most N products per entry in some order, so ``|P - mid M| <= gamma_N |mid| |M|
  + N eta`` (Higham, Thm 3.1 / Lemma 3.1, any order, with or without FMA; eta = 2^-1074
  bounds the underflow of each product and sum); both terms are summed as one product
  ``|M|`` applied to ``Z = gamma_N |mid| + rad`` (rounded up), whose float result T of
  non-negative terms satisfies exact <= T / (1 - gamma_N) <= T (1 + 2 gamma_N);
* so the exact ``Lambda M`` lies in ``P +- R`` with ``R = T (1 + 2 gamma_N) + 2 N eta``,
  every step rounded up (np.nextafter after each round-to-nearest operation), and the
  endpoints ``P -+ R`` are rounded outward.

Two passes of the plain float operator (on mid and on Z with |M|) replace the interval
product: the cost is about twice a float64 VJP.  Ops: linear (``Lambda W``), conv2d with
groups 1 (the transposed convolution as one BLAS product per kernel offset, added into a
zero-padded buffer: memory rows x padded input), elementwise affine ops and batchnorm
(Lambda scaled per column by the diagonal ``f(1) - f(0)``, an interval from the op's own
forward rule).  Anything else -- and weights that are not float64 values, non-finite
Lambda entries -- returns None and the caller takes the generic VJP."""
from __future__ import annotations

import numpy as np

from scalarlab.graph.fold import node_args
from scalarlab.graph.ops_conv import _conv_geom
from scalarlab.graph.optable import OPS
from scalarlab.scalars.values import Interval

from . import crown_kernels

__all__ = ["fast_affine", "fast_supported", "scale_intervals", "window_index",
           "conv2d_input_window"]

#: arrays from this many entries take the fused Numba loops of ibp/crown_kernels.py (the
#: same bounds; below it numpy's per-call cost is smaller than a kernel's dispatch)
_FUSED_MIN = 4096

_U = 2.0 ** -53
_ETA = 2.0 ** -1074
_INF = np.inf


def _up(v):
    """A float >= v, > v unless v is +-inf (nan for -inf: the callers check finiteness).
    Cheaper than np.nextafter: |v| 2^-52 is exact or rounds within the subnormals, and
    is >= ulp(v) for normal v, so the rounded sum is >= the next float above v; adding
    the smallest subnormal moves a zero or subnormal sum up (exactly) and leaves a
    normal one >= where it was (rounding to nearest is monotone)."""
    return (v + np.abs(v) * 2.0 ** -52) + _ETA


def _dn(v):
    """A float <= v (the mirror image of :func:`_up`)."""
    return (v - np.abs(v) * 2.0 ** -52) - _ETA


def _gamma(n: int) -> float:
    """gamma_n = n u / (1 - n u), rounded up (n u < 1/2 for every size here)."""
    nu = n * _U
    return float(_up(_up(nu) / _dn(1.0 - nu)))


def fast_supported(st, node) -> bool:
    """Whether :func:`fast_affine` handles the node (work context interval:float64)."""
    if not getattr(st.wctx, "float64_endpoints", False):
        return False
    op = node.kind.op
    if op == "linear":
        return True
    if op == "conv2d":
        return node.kind.attrs.get("groups", 1) == 1
    var = [p for p in node.parents if st.dep[p]]
    if len(var) != 1:
        return False
    shp_u = tuple(st.graph.nodes[var[0]].out_shape)
    if op == "batchnorm_eval" or (OPS[op].elementwise and tuple(node.out_shape) == shp_u):
        return True
    return op in ("flatten", "reshape")


def _exact_param(a):
    """A payload parameter (interval of the work context) as its float64 value when it
    is a point (lo == hi), else None (a decimal weight: the generic path encloses it)."""
    lo, hi = np.asarray(a.lo), np.asarray(a.hi)
    if lo.dtype != np.float64 or not np.array_equal(lo, hi):
        return None
    return lo


def _midrad(lam: Interval):
    """(mid, rad) float64 arrays with [lo, hi] inside [mid - rad, mid + rad], or None
    where an entry is not finite.  mid = fl(lo/2 + hi/2) is within u |mid| (+ a
    subnormal spacing) of the exact centre, and
    rad = fl(fl(hi - lo) (1/2 + 2^-50) + |mid| 2^-51) + 8 eta
    is at least (hi - lo)/2 + u |mid| + 2 eta: the factors' excess (2^-49 relative and
    4u |mid|) covers the three roundings of the computation (each <= u relative), and
    8 eta the subnormal ones (two in mid, three here).  Five array passes instead of
    np.nextafter's slow loop."""
    lo, hi = np.asarray(lam.lo, dtype=np.float64), np.asarray(lam.hi, dtype=np.float64)
    if lo.size >= _FUSED_MIN:                       # the same formulas, one pass
        mid, rad, ok = crown_kernels.midrad(np.ascontiguousarray(lo).reshape(-1),
                                            np.ascontiguousarray(hi).reshape(-1))
        return (mid.reshape(lo.shape), rad.reshape(lo.shape)) if ok else None
    with np.errstate(all="ignore"):
        mid = 0.5 * lo + 0.5 * hi
        rad = ((hi - lo) * (0.5 + 2.0 ** -50) + np.abs(mid) * 2.0 ** -51) + 8 * _ETA
    if not (np.all(np.isfinite(mid)) and np.all(np.isfinite(rad))):
        return None
    return mid, rad


def _apply(op_float, mid, rad, n_terms):
    """Enclosure (lo, hi) of ``op(Lambda)`` for a linear ``op`` given by ``op_float(A,
    absolute)`` (A's product with M, or with |M| when ``absolute``), every output a sum
    of at most ``n_terms`` products; None when a result is not finite."""
    g = _gamma(n_terms)
    if mid.size >= _FUSED_MIN:                      # the same formulas, fused loops
        P = op_float(mid, False)
        Z = crown_kernels.apply_z(np.ascontiguousarray(mid).reshape(-1),
                                  np.ascontiguousarray(rad).reshape(-1), g)
        T = op_float(Z.reshape(mid.shape), True)
        lo, hi, ok = crown_kernels.apply_ends(
            np.ascontiguousarray(P).reshape(-1), np.ascontiguousarray(T).reshape(-1),
            float(_up(1.0 + 2.0 * g)), 2.0 * n_terms * _ETA)
        return (lo.reshape(P.shape), hi.reshape(P.shape)) if ok else None
    with np.errstate(all="ignore"):
        P = op_float(mid, False)
        Z = _up(_up(g * np.abs(mid)) + rad)
        T = op_float(Z, True)
        R = _up(_up(T * _up(1.0 + 2.0 * g)) + 2.0 * n_terms * _ETA)
        lo, hi = _dn(P - R), _up(P + R)
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
        return None
    return lo, hi


def scale_intervals(lam: Interval, d: Interval) -> Interval:
    """Entrywise product of two float64 intervals (d broadcast over lam's rows), each of
    the four endpoint products rounded to nearest and moved one ulp outward (an exact
    zero stays 0), their min / max taken."""
    a, b = np.asarray(lam.lo), np.asarray(lam.hi)
    c, e = np.asarray(d.lo), np.asarray(d.hi)
    if a.ndim == 2 and a.size >= _FUSED_MIN and c.shape == (1, a.shape[1]) \
            and a.dtype == np.float64 and c.dtype == np.float64:
        lo, hi, ok = crown_kernels.scale_diag(np.ascontiguousarray(a), np.ascontiguousarray(b),
                                              np.ascontiguousarray(c[0]),
                                              np.ascontiguousarray(e[0]))
        if ok:
            return Interval(lo, hi)
    with np.errstate(all="ignore"):
        ps = [a * c, a * e, b * c, b * e]
        lo = _dn(np.minimum(np.minimum(ps[0], ps[1]), np.minimum(ps[2], ps[3])))
        hi = _up(np.maximum(np.maximum(ps[0], ps[1]), np.maximum(ps[2], ps[3])))
    return Interval(lo, hi)


def fast_affine(st, node, vals, lam: Interval, offset=None, win=None):
    """(variable parent u, Lambda M as an Interval (rows, n_u), Lambda offset or None) of
    an affine node, or None when the fast path does not apply (the caller takes the op's
    VJP).  ``offset`` (an interval (n_v,)): its product with Lambda is formed from the
    same midpoint-radius split (linear and conv2d), else left to the caller (None).

    ``win`` (a spatial window (y0, y1, x0, x1) of the node's [C, H, W] output, see
    :mod:`ibp.crown_window`): Lambda's columns are that window's entries only (the
    others are zero), and the result is a 4-tuple whose last item is the parent's
    window holding every non-zero column of Lambda M (conv2d: the receptive field of
    the window; diagonal ops: the same window); ``offset`` is then the full (n_v,)
    offset, cropped here.  Without ``win`` the result is the 3-tuple above."""
    if not fast_supported(st, node):
        return None
    graph, w = st.graph, st.wctx
    u = next(p for p in node.parents if st.dep[p])
    op = node.kind.op
    R = np.shape(lam.lo)[0]
    shp_u, shp_v = tuple(graph.nodes[u].out_shape), tuple(node.out_shape)
    n_u = int(np.prod(shp_u, dtype=np.int64))

    def done(lam_u, cb, win_u):
        return (u, lam_u, cb) if win is None else (u, lam_u, cb, win_u)

    if op in ("flatten", "reshape"):
        if win is not None:
            return None
        # the flat (row-major) order is the same on both sides: Lambda is unchanged
        return done(Interval(np.asarray(lam.lo).reshape(R, n_u),
                             np.asarray(lam.hi).reshape(R, n_u)), None, None)
    if op not in ("linear", "conv2d"):
        # diagonal: M = diag(f(1) - f(0)) for an elementwise affine op (exact affine:
        # the difference of the two enclosures encloses the exact diagonal)
        key = ("diag", node.id)
        if key not in st.off:
            local = [None if v is None else st.w(v) for v in vals]
            out = []
            for fill in (w.zeros(shp_u), w.ones(shp_u)):
                local[u] = fill
                args, attrs = node_args(graph, st.payload, w, node, local)
                out.append(OPS[op].forward(w, args, attrs, 0))
            D = w.sub(out[1], out[0])
            st.off[key] = Interval(np.asarray(D.lo, dtype=np.float64).reshape(1, n_u),
                                   np.asarray(D.hi, dtype=np.float64).reshape(1, n_u))
        D = st.off[key]
        if not (np.all(np.isfinite(D.lo)) and np.all(np.isfinite(D.hi))):
            return None
        if win is not None:
            if len(shp_u) != 3:
                return None
            k = window_index(shp_u, win)
            D = Interval(D.lo[:, k], D.hi[:, k])
        res = scale_intervals(lam, D)
        if not (np.all(np.isfinite(res.lo)) and np.all(np.isfinite(res.hi))):
            return None
        return done(res, None, win)
    if win is not None and op != "conv2d":
        return None
    local = list(vals)
    local[u] = None                  # only the parameters and attributes are read
    args, attrs = node_args(graph, st.payload, w, node, local)
    W = _exact_param(args[1])
    if W is None:
        return None
    if getattr(st, "collapse", False) and vals[u] is not None and (
            lam.lo is lam.hi or np.array_equal(lam.lo, lam.hi)):
        pt = _point_affine(st, node, vals, u, lam, W, args, attrs, offset, win)
        if pt is not None:
            return done(*pt)
    mr = _midrad(lam)
    if mr is None:
        return None
    mid, rad = mr
    win_u = None
    if op == "linear":
        Wabs = np.abs(W)                          # W [out, in]: Lambda W

        def f(A, absolute):
            return A @ (Wabs if absolute else W)
        r = _apply(f, mid, rad, int(W.shape[0]))
    else:
        q = _conv_geom(op, 2, [shp_u], dict(attrs, out_channels=W.shape[0]))
        wv = (0, q["O"][0], 0, q["O"][1]) if win is None else win
        win_u = conv2d_input_window(q, wv)
        shp_w = (shp_v[0], wv[1] - wv[0], wv[3] - wv[2])
        r = _apply(lambda A, absolute: _conv2d_transposed(
            A.reshape((R,) + shp_w), np.abs(W) if absolute else W, q, wv, win_u),
            mid, rad, int(W.shape[0] * W.shape[2] * W.shape[3]))
        if win is None:
            r = None if r is None else tuple(
                _embed(a, (shp_u[0], win_u), shp_u) for a in r)
    if r is None:
        return None
    lo, hi = r
    if offset is not None and win is not None:
        k = window_index(shp_v, win)
        offset = Interval(np.asarray(offset.lo)[k], np.asarray(offset.hi)[k])
    cb = None if offset is None else matvec(None, offset, mr)
    n_out = n_u if win is None else shp_u[0] * (win_u[1] - win_u[0]) * (win_u[3] - win_u[2])
    return done(Interval(lo.reshape(R, n_out), hi.reshape(R, n_out)), cb, win_u)


def _point_affine(st, node, vals, u, lam: Interval, W, args, attrs, offset, win):
    """(Lambda_u, charge + Lambda b, win_u) for a float (point) Lambda through linear or
    conv2d: one float product ``P = fl(Lambda M)`` is Lambda_u (a point again), and its
    rounding is charged to the offset over the parent's box instead of carried as a
    radius: ``|Lambda M - P| <= gamma_N |Lambda| |M| + N eta`` entrywise (N the products
    per entry, any order), so for z_u in its box (|z_u| <= m)
    ``|(Lambda M - P) z_u| <= gamma_N |Lambda| (|M| m) + N eta sum(m)``, where ``|M| m``
    is bounded once per node by the width of the op's interval image of [0, m] (the
    exact width is sum_j |M_ij| m_j).  Half the work of the midpoint-radius product (no
    second product with |M|).  None where a value is not finite (the caller falls back)."""
    graph, w, op = st.graph, st.wctx, node.kind.op
    R = np.shape(lam.lo)[0]
    shp_u, shp_v = tuple(graph.nodes[u].out_shape), tuple(node.out_shape)
    L = np.asarray(lam.lo, dtype=np.float64)
    key = ("absimg", node.id)
    if key not in st.off:
        box = st.w(vals[u])
        m = np.maximum(np.abs(np.asarray(box.lo, dtype=np.float64)),
                       np.abs(np.asarray(box.hi, dtype=np.float64))).reshape(shp_u)
        if not np.all(np.isfinite(m)):
            st.off[key] = None
        else:
            local = [None if v is None else st.w(v) for v in vals]
            local[u] = w.make(np.zeros(shp_u), m)
            a2, at2 = node_args(graph, st.payload, w, node, local)
            Y = w.to_float64(OPS[op].forward(w, a2, at2, 0))
            with np.errstate(all="ignore"):
                width = _up(np.asarray(Y.hi, dtype=np.float64).reshape(-1)
                            - np.asarray(Y.lo, dtype=np.float64).reshape(-1))
                msum = _up(float(np.sum(m)) * _up(1.0 + 2.0 * _gamma(m.size)))
            st.off[key] = (width, msum) if np.all(np.isfinite(width)) else None
    if st.off[key] is None:
        return None
    width, msum = st.off[key]
    win_u = None
    with np.errstate(all="ignore"):
        if op == "linear":
            n_terms = int(W.shape[0])
            P = L @ W
        else:
            n_terms = int(W.shape[0] * W.shape[2] * W.shape[3])
            q = _conv_geom(op, 2, [shp_u], dict(attrs, out_channels=W.shape[0]))
            wv = (0, q["O"][0], 0, q["O"][1]) if win is None else win
            win_u = conv2d_input_window(q, wv)
            shp_w = (shp_v[0], wv[1] - wv[0], wv[3] - wv[2])
            P = _conv2d_transposed(L.reshape((R,) + shp_w), W, q, wv, win_u)
            if win is None:
                P = _embed(P, (shp_u[0], win_u), shp_u)
        if win is not None:
            width = width[window_index(shp_v, win)]
        g = _gamma(n_terms)
        t = np.abs(L) @ width                 # n_v non-negative terms per row
        t = _up(t * _up(1.0 + 2.0 * _gamma(width.size)))
        charge = _up(_up(g * t) + _up(n_terms * _ETA * msum))
    if not (np.all(np.isfinite(P)) and np.all(np.isfinite(charge))):
        return None
    P = P.reshape(R, -1)
    cb = Interval(-charge, charge)
    if offset is not None:
        if win is not None:
            k = window_index(shp_v, win)
            offset = Interval(np.asarray(offset.lo)[k], np.asarray(offset.hi)[k])
        ob = matvec(lam, offset)
        if ob is None:
            return None
        cb = Interval(_dn(ob.lo - charge), _up(ob.hi + charge))
    return Interval(P, P), cb, win_u


def window_index(shape, win) -> np.ndarray:
    """Flat (row-major) indices into a [C, H, W] array of the entries of the spatial
    window (y0, y1, x0, x1), channel-major as Lambda's windowed columns are laid out."""
    C, H, W = shape
    y0, y1, x0, x1 = win
    ys = np.arange(y0, y1)[:, None] * W + np.arange(x0, x1)[None, :]
    return (np.arange(C)[:, None, None] * (H * W) + ys[None]).reshape(-1)


def conv2d_input_window(q, win):
    """The window of a conv2d's input that the output window ``win`` reads: the rows
    ``y0 s - p`` to ``(y1 - 1) s - p + (k - 1) d`` (and columns alike), clipped to the
    input; at least one entry (a window reading only padding gets a zero column)."""
    (sh, sw), (dh, dw), (ph, pw) = q["s"], q["dl"], q["pb"]
    (kh, kw), (H, W) = q["k"], q["S"]
    y0, y1, x0, x1 = win
    a0, a1 = y0 * sh - ph, (y1 - 1) * sh - ph + (kh - 1) * dh + 1
    b0, b1 = x0 * sw - pw, (x1 - 1) * sw - pw + (kw - 1) * dw + 1
    a0, a1 = min(max(a0, 0), H - 1), max(min(a1, H), 1)
    b0, b1 = min(max(b0, 0), W - 1), max(min(b1, W), 1)
    return (a0, max(a1, a0 + 1), b0, max(b1, b0 + 1))


def _embed(a, inner, shape):
    """A (rows, C*h*w) array over the window ``inner = (C, win)`` placed in zeros of the
    (rows, C*H*W) layout of ``shape``."""
    C, (y0, y1, x0, x1) = inner
    R = a.shape[0]
    if (y0, y1, x0, x1) == (0, shape[1], 0, shape[2]):
        return a.reshape(R, -1)
    out = np.zeros((R,) + tuple(shape))
    out[:, :, y0:y1, x0:x1] = a.reshape(R, C, y1 - y0, x1 - x0)
    return out.reshape(R, -1)


def _conv2d_transposed(G, W, q, win=None, win_u=None):
    """The adjoint of conv2d (groups 1) applied to G [R, O, h, w] in float64: one BLAS
    product per group of kernel offsets (positions x O times O x C g), added into a
    zero-padded channels-last buffer, cropped to the input [R, C, H, W] -- or, with the
    output window ``win`` (G's positions) and the input window ``win_u`` it reads
    (:func:`conv2d_input_window`), to [R, C, h_u, w_u] over that window."""
    R = G.shape[0]
    O, C, kh, kw = W.shape
    sh, sw = q["s"]
    dh, dw = q["dl"]
    ph, pw = q["pb"]
    H, Wd = q["S"]
    if win is None:
        win = (0, q["O"][0], 0, q["O"][1])
    if win_u is None:
        win_u = (0, H, 0, Wd)
    y0, y1, x0, x1 = win
    Ho, Wo = y1 - y0, x1 - x0
    # the buffer spans the padded rows y0 s .. (y1 - 1) s + (kh - 1) dh (and columns)
    Hb, Wb = (Ho - 1) * sh + (kh - 1) * dh + 1, (Wo - 1) * sw + (kw - 1) * dw + 1
    ay, ax = y0 * sh - ph, x0 * sw - pw             # its first row/column, input coords
    # rows/columns of the requested input window outside the buffer stay zero
    oy, ox = max(0, ay - win_u[0]), max(0, ax - win_u[2])
    Hbig = max(Hb + oy, win_u[1] - win_u[0] + max(0, win_u[0] - ay))
    Wbig = max(Wb + ox, win_u[3] - win_u[2] + max(0, win_u[2] - ax))
    Gt = np.ascontiguousarray(G.transpose(0, 2, 3, 1))          # [R, h, w, O]
    buf = np.zeros((R, Hbig, Wbig, C))
    # kernel offsets in groups of about 64 / C, one BLAS product per group (a product
    # with C = 3 columns per offset runs far below BLAS speed): memory ~ the input's size
    # offsets whose every write falls outside the input window (padding only: a 3 x 3
    # kernel on a 1 x 1 map reads 8 padded entries) contribute nothing: skipped
    rows_ok = [any(win_u[0] <= ay + i * dh + y * sh < win_u[1] for y in range(Ho))
               for i in range(kh)]
    cols_ok = [any(win_u[2] <= ax + j * dw + x * sw < win_u[3] for x in range(Wo))
               for j in range(kw)]
    offs = [(i, j) for i in range(kh) for j in range(kw) if rows_ok[i] and cols_ok[j]]
    size = max(1, min(len(offs), -(-64 // C)))
    for a in range(0, len(offs), size):
        grp = offs[a: a + size]
        Wg = np.stack([W[:, :, i, j] for i, j in grp], axis=2).reshape(O, C * len(grp))
        T = (Gt @ Wg).reshape(R, Ho, Wo, C, len(grp))            # [R, h, w, C, g]
        for t, (i, j) in enumerate(grp):
            buf[:, oy + i * dh: oy + i * dh + (Ho - 1) * sh + 1: sh,
                ox + j * dw: ox + j * dw + (Wo - 1) * sw + 1: sw, :] += T[..., t]
    # buffer row r holds input row ay - oy + r: crop the window's rows
    r0, c0 = win_u[0] - (ay - oy), win_u[2] - (ax - ox)
    out = buf[:, r0: r0 + win_u[1] - win_u[0], c0: c0 + win_u[3] - win_u[2], :]
    return np.ascontiguousarray(out.transpose(0, 3, 1, 2))


def matvec(lam: Interval, v: Interval, lam_midrad=None):
    """Enclosure of ``Lambda v`` (Lambda an interval (rows, n), v an interval (n,)), both
    float64 intervals, as an Interval (rows,), or None where an entry is not finite.
    Midpoint-radius: the exact product of any Lambda in mid_L +- rad_L and v in mid_v +-
    rad_v is within ``|mid_L| (rad_v + gamma |mid_v|) + rad_L (|mid_v| + rad_v)`` of
    ``fl(mid_L mid_v)`` (gamma = gamma_k, k the row's non-zero terms), sums of
    non-negative products computed in float and widened as in :func:`_apply`."""
    a, b = lam_midrad if lam_midrad is not None else _midrad(lam), _midrad(v)
    if a is None or b is None:
        return None
    (ml, rl), (mv, rv) = a, b
    n = int(mv.shape[0])
    # a zero product adds exactly (its subtree of the sum is an exact 0 in any order),
    # so the rounding of fl(mid_L mid_v) in row r is gamma_k with k <= the row's count
    # of non-zero mid_L entries (CROWN's rows at the input: a receptive field, e.g. 147
    # of 3072 entries, not the whole input); per row, so a row's bound does not depend
    # on the other rows of its chunk
    k = (np.count_nonzero(ml, axis=-1) if ml.ndim == 2 else np.int64(n)).astype(np.float64)
    g2 = _gamma(2 * n + 1)
    with np.errstate(all="ignore"):
        g = _up(_up(np.maximum(k, 1.0) * _U) / _dn(1.0 - np.maximum(k, 1.0) * _U))
        P = ml @ mv
        aml, amv = np.abs(ml), np.abs(mv)
        # three sums of non-negative products, each within gamma_n of its float value,
        # covered with the final sum's roundings by the factor 1 + 2 gamma_(2n+1)
        T = _up(_up(aml @ rv + _up(g * (aml @ amv))) + rl @ _up(amv + rv))
        R = _up(_up(T * _up(1.0 + 2.0 * g2)) + 2.0 * (2 * n + 1) * _ETA)
        lo, hi = _dn(P - R), _up(P + R)
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
        return None
    return Interval(lo, hi)
