"""CROWN (ibp/crown.py): sound, equal to a plain float64 CROWN, tighter than IBP.

* sound: random networks (linear/conv/avg-pool/relu/tanh/sigmoid) and boxes; every vertex
  (or, in high dimension, random vertices) and seeded interior points are evaluated in
  ``mpmath:120`` from the exact float inputs and must lie in the CROWN box of every node
  (bounds never narrower than the sampled range);
* the same numbers as CROWN: a plain float64 implementation written here from Zhang et
  al. 2018 (dense matrices, separate lower/upper passes, the same relaxation choices)
  agrees to 1e-9 relative at the output and at every pre-activation node;
* crown-ibp: IBP intermediate bounds, CROWN at the output, against the same reference.
"""
from __future__ import annotations

import itertools

import mpmath
import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.graph import Graph, Node, OpKind, denote_all, examples
from scalarlab.ibp import Box, run_ibp
from scalarlab.ibp.crown import CrownError, run_crown

EXACT = scalars.get("mpmath:120")


# ----------------------------------------------------------- the reference (plain float64)
def _sig(z):
    return 1.0 / (1.0 + np.exp(-z))


ACTS = {"relu": (lambda z: np.maximum(z, 0.0), None),
        "tanh": (np.tanh, lambda s: 1.0 - s * s),
        "sigmoid": (_sig, lambda s: s * (1.0 - s))}


def ref_relax(act, l, u):
    """(al, bl, au, bu) of the relaxation described in ibp/crown.py, in float64: CROWN's
    lines, or the mean-value lines through s(d) with slope s'(d) where their gap is
    smaller."""
    al, bl, au, bu = (np.zeros_like(l) for _ in range(4))
    if act == "relu":
        alive, cross = l >= 0, (l < 0) & (u > 0)
        al[alive] = au[alive] = 1.0
        au[cross] = u[cross] / (u[cross] - l[cross])
        bu[cross] = -l[cross] * au[cross]
        al[cross & (u >= -l)] = 1.0
        return al, bl, au, bu
    f, df = ACTS[act]
    for k in range(len(l)):
        lo, hi = l[k], u[k]
        if lo == hi:
            bl[k] = bu[k] = f(lo)
            continue
        d = lo * 0.5 + hi * 0.5
        t_a, t_b = df(f(d)), f(d) - df(f(d)) * d
        c_a = (f(hi) - f(lo)) / (hi - lo)
        c_b = f(lo) - c_a * lo
        if hi <= 0:
            al[k], bl[k], au[k], bu[k] = t_a, t_b, c_a, c_b
        elif lo >= 0:
            al[k], bl[k], au[k], bu[k] = c_a, c_b, t_a, t_b
        else:
            au[k], bu[k] = ref_straddle_upper(act, lo, hi)
            a2, b2 = ref_straddle_upper(act, -hi, -lo)
            al[k], bl[k] = a2, (-b2 if act == "tanh" else 1.0 - b2)
        # mean-value lines: s'(Z) over the box as interval arithmetic gives it
        sl, su = f(lo), f(hi)
        if act == "tanh":
            sq = (0.0 if lo <= 0 <= hi else min(sl * sl, su * su), max(sl * sl, su * su))
            dz = (1.0 - sq[1], 1.0 - sq[0])
        else:
            dz = (sl * (1.0 - su), su * (1.0 - sl))
        half = max(d - lo, hi - d)
        spread = half * max(abs(dz[0] - t_a), abs(dz[1] - t_a))
        gap = max(au[k] * z + bu[k] - al[k] * z - bl[k] for z in (lo, hi))
        if 2 * spread < gap:
            al[k] = au[k] = t_a
            bl[k], bu[k] = t_b - spread, t_b + spread
    return al, bl, au, bu


def ref_straddle_upper(act, l, u):
    """Zhang et al. 2018, l < 0 < u: the chord if s'(u) >= its slope, else the tangent at
    the d in [0, u] whose tangent passes through (l, s(l)) (bisection)."""
    f, df = ACTS[act]
    k = (f(u) - f(l)) / (u - l)
    if df(f(u)) >= k:
        return k, f(l) - k * l
    a, b = 0.0, u
    for _ in range(60):
        d = (a + b) / 2
        if f(d) + df(f(d)) * (l - d) >= f(l):
            b = d
        else:
            a = d
    return df(f(b)), f(b) - df(f(b)) * b


def ref_crown(layers, l0, u0, method="crown"):
    """Float64 CROWN over ``layers`` = [("affine", W, b) | (act,)]: returns the output
    bounds and {layer index of each activation: bounds of its input}."""
    pre = {}
    lows, highs = [l0], [u0]           # IBP bounds after each layer (for crown-ibp)
    ibp = _ref_ibp(layers, l0, u0)     # plain IBP: every CROWN box is cut to it

    def backward(k_end):
        n = layers[k_end - 1][1].shape[0]
        assert layers[k_end - 1][0] == "affine"
        AL, AU = np.eye(n), np.eye(n)
        cL, cU = np.zeros(n), np.zeros(n)
        for k in range(k_end - 1, -1, -1):
            lay = layers[k]
            if lay[0] == "affine":
                W, b = lay[1], lay[2]
                cL, cU = cL + AL @ b, cU + AU @ b
                AL, AU = AL @ W, AU @ W
            elif lay[0] == "maxpool":
                SL, SU, bU = ref_maxpool(lay[1], *pre[k])
                P, N = np.maximum(AL, 0), np.minimum(AL, 0)
                cL = cL + N @ bU
                AL = P @ SL + N @ SU
                P, N = np.maximum(AU, 0), np.minimum(AU, 0)
                cU = cU + P @ bU
                AU = P @ SU + N @ SL
            else:
                al, bl, au, bu = ref_relax(lay[0], *pre[k])
                P, N = np.maximum(AL, 0), np.minimum(AL, 0)
                cL = cL + P @ bl + N @ bu
                AL = P * al + N * au
                P, N = np.maximum(AU, 0), np.minimum(AU, 0)
                cU = cU + P @ bu + N @ bl
                AU = P * au + N * al
        lo = np.maximum(AL, 0) @ l0 + np.minimum(AL, 0) @ u0 + cL
        hi = np.maximum(AU, 0) @ u0 + np.minimum(AU, 0) @ l0 + cU
        return lo, hi

    for k, lay in enumerate(layers):
        if lay[0] == "affine":
            W, b = lay[1], lay[2]
            m, r = (lows[-1] + highs[-1]) / 2, (highs[-1] - lows[-1]) / 2
            lows.append(W @ m - np.abs(W) @ r + b)
            highs.append(W @ m + np.abs(W) @ r + b)
        else:
            if method == "crown" and layers[k - 1][0] == "affine":
                pl, ph = backward(k)
                pre[k] = (np.maximum(pl, ibp[k][0]), np.minimum(ph, ibp[k][1]))
            elif method == "crown":      # maxpool right after an activation: its IBP box
                pre[k] = (lows[-1], highs[-1])
            else:
                pre[k] = (lows[-1], highs[-1])
            if lay[0] == "maxpool":
                lows.append(np.array([pre[k][0][r].max() for r in lay[1]]))
                highs.append(np.array([pre[k][1][r].max() for r in lay[1]]))
                continue
            f = ACTS[lay[0]][0]
            lows.append(f(pre[k][0]))
            highs.append(f(pre[k][1]))
    lo, hi = backward(len(layers))
    return (np.maximum(lo, ibp[-1][0]), np.minimum(hi, ibp[-1][1])), pre


def _ref_ibp(layers, l0, u0):
    """[(lo, hi) of the input of layer k] + [the output's], plain float64 IBP."""
    out = [(l0, u0)]
    for lay in layers:
        lo, hi = out[-1]
        if lay[0] == "affine":
            m, r = (lo + hi) / 2, (hi - lo) / 2
            c = lay[1] @ m + lay[2]
            out.append((c - np.abs(lay[1]) @ r, c + np.abs(lay[1]) @ r))
        elif lay[0] == "maxpool":
            out.append((np.array([lo[w].max() for w in lay[1]]),
                        np.array([hi[w].max() for w in lay[1]])))
        else:
            f = ACTS[lay[0]][0]
            out.append((f(lo), f(hi)))
    return out


# --------------------------------------------------------------- random networks / graphs
def random_mlp(seed, widths, acts):
    rng = np.random.default_rng(seed)
    layers = []
    for k in range(len(widths) - 1):
        W = rng.normal(0, 1 / np.sqrt(widths[k]), (widths[k + 1], widths[k]))
        layers.append(("affine", W, rng.normal(0, 0.1, widths[k + 1])))
        if k < len(widths) - 2:
            layers.append((acts[k % len(acts)],))
    return layers


def mlp_graph(layers, n_in):
    nodes, payload, width = [Node(0, [], "input", [n_in])], {}, n_in
    for lay in layers:
        i = len(nodes)
        if lay[0] == "affine":
            width = lay[1].shape[0]
            nodes.append(Node(i, [i - 1], "linear", [width]))
            payload[i] = {"linear": {"W": lay[1], "b": lay[2]}}
        else:
            nodes.append(Node(i, [i - 1], lay[0], [width]))
    return Graph(nodes), payload


def conv_matrix(w, b, C, H, W):
    """Dense matrix of a stride-1, unpadded conv2d (written out with loops)."""
    O, _, kh, kw = w.shape
    OH, OW = H - kh + 1, W - kw + 1
    M = np.zeros((O * OH * OW, C * H * W))
    for o, y, x, c, i, j in itertools.product(range(O), range(OH), range(OW), range(C),
                                              range(kh), range(kw)):
        M[(o * OH + y) * OW + x, (c * H + y + i) * W + x + j] += w[o, c, i, j]
    return M, np.repeat(b, OH * OW)


def pool_matrix(C, H, W, k):
    OH, OW = H // k, W // k
    M = np.zeros((C * OH * OW, C * H * W))
    for c, y, x, i, j in itertools.product(range(C), range(OH), range(OW), range(k), range(k)):
        M[(c * OH + y) * OW + x, (c * H + k * y + i) * W + k * x + j] = 1.0 / (k * k)
    return M


def member_matrix(C, H, W, k):
    OH, OW = H // k, W // k
    M = np.zeros((C * OH * OW, C * H * W), dtype=bool)
    for c, y, x, i, j in itertools.product(range(C), range(OH), range(OW), range(k), range(k)):
        M[(c * OH + y) * OW + x, (c * H + k * y + i) * W + k * x + j] = True
    return M


def ref_maxpool(member, l, u):
    """(S_L, S_U, b_U) of the max-pool relaxation described in ibp/crown.py."""
    n_v = member.shape[0]
    SL, SU, bU = np.zeros(member.shape), np.zeros(member.shape), np.zeros(n_v)
    for o in range(n_v):
        idx = np.flatnonzero(member[o])
        j = idx[np.argmax(l[idx])]
        rest = [t for t in idx if t != j]
        SL[o, j] = 1.0
        if not rest or l[j] >= max(u[t] for t in rest):
            SU[o, j] = 1.0
        else:
            bU[o] = max(u[idx])
    return SL, SU, bU


def small_cnn(seed, act="relu", pool="avg"):
    """conv(1->2, 3x3) -> act -> avg_pool 2 -> flatten -> linear(8->5) -> tanh -> linear(5->3)
    on a 1x6x6 input; the graph and the equivalent dense layer list."""
    rng = np.random.default_rng(seed)
    w, b = rng.normal(0, 0.5, (2, 1, 3, 3)), rng.normal(0, 0.1, 2)
    W1, b1 = rng.normal(0, 0.5, (5, 8)), rng.normal(0, 0.1, 5)
    W2, b2 = rng.normal(0, 0.5, (3, 5)), rng.normal(0, 0.1, 3)
    g = Graph([Node(0, [], "input", [1, 6, 6]),
               Node(1, [0], OpKind("conv2d", kernel_size=3), [2, 4, 4]),
               Node(2, [1], act, [2, 4, 4]),
               Node(3, [2], OpKind(f"{pool}_pool2d", kernel_size=2), [2, 2, 2]),
               Node(4, [3], "flatten", [8]),
               Node(5, [4], "linear", [5]),
               Node(6, [5], "tanh", [5]),
               Node(7, [6], "linear", [3])])
    payload = {1: {"conv2d": {"weight": w, "bias": b}}, 5: {"linear": {"W": W1, "b": b1}},
               7: {"linear": {"W": W2, "b": b2}}}
    Mc, bc = conv_matrix(w, b, 1, 6, 6)
    P = pool_matrix(2, 4, 4, 2)
    layers = [("affine", Mc, bc), (act,), ("affine", W1 @ P, b1), ("tanh",),
              ("affine", W2, b2)]
    if pool == "max":
        layers[2:3] = [("maxpool", member_matrix(2, 4, 4, 2)), ("affine", W1, b1)]
    # W1 @ P folds the pool into the next linear layer: the same network
    return g, payload, layers


# ------------------------------------------------------------------------------ checks
def _exact_values(g, payload, xs):
    """Every node's value at the float points xs, in mpmath at 120 bits (exact inputs)."""
    vals = denote_all(g, payload, EXACT.convert(xs), EXACT)
    return vals


def _check_sound(g, payload, box_lo, box_hi, boxes, n_random, seed, max_vertices=256):
    rng = np.random.default_rng(seed)
    d = box_lo.size
    flo, fhi = box_lo.reshape(-1), box_hi.reshape(-1)
    if 2 ** d <= max_vertices:
        bits = np.array(list(itertools.product((0, 1), repeat=d)), dtype=bool)
    else:
        bits = rng.random((max_vertices, d)) < 0.5
    verts = np.where(bits, fhi, flo)
    inner = flo + rng.random((n_random, d)) * (fhi - flo)
    xs = np.concatenate([verts, inner]).reshape((-1,) + box_lo.shape)
    vals = _exact_values(g, payload, xs)
    checked = 0
    for nid, (b, v) in enumerate(zip(boxes, vals)):
        if b is None or v is None:
            continue
        lo = np.asarray(b.lo_float()).astype(object)
        hi = np.asarray(b.hi_float()).astype(object)
        v = np.asarray(v)
        ok = np.vectorize(lambda t, a, c: mpmath.mpf(a) <= t <= mpmath.mpf(c),
                          otypes=[bool])(v, lo, hi)
        assert ok.all(), (nid, int((~ok).sum()))
        checked += ok.size
    return checked


def _close(got_lo, got_hi, ref_lo, ref_hi, rel=1e-9):
    scale = np.maximum(np.maximum(np.abs(ref_lo), np.abs(ref_hi)), ref_hi - ref_lo)
    assert np.all(np.abs(got_lo - ref_lo) <= rel * scale), np.max(np.abs(got_lo - ref_lo) / scale)
    assert np.all(np.abs(got_hi - ref_hi) <= rel * scale), np.max(np.abs(got_hi - ref_hi) / scale)


MLP_CASES = [  # (seed, widths, activations, radius)
    (0, [3, 6, 5, 2], ["relu"], 0.3),
    (1, [4, 8, 8, 3], ["tanh"], 0.5),
    (2, [3, 7, 6, 4, 2], ["sigmoid", "relu", "tanh"], 0.8),
    (3, [5, 10, 10, 1], ["relu", "tanh"], 0.05),
    (4, [2, 6, 1], ["tanh"], 3.0),
]


@pytest.mark.parametrize("case", range(len(MLP_CASES)))
@pytest.mark.parametrize("method", ["crown", "crown-ibp"])
def test_crown_mlp_sound_and_equal_to_float_reference(case, method):
    seed, widths, acts, radius = MLP_CASES[case]
    layers = random_mlp(seed, widths, acts)
    g, payload = mlp_graph(layers, widths[0])
    rng = np.random.default_rng(100 + seed)
    x0 = rng.normal(0, 1, widths[0])
    lo0, hi0 = x0 - radius, x0 + radius
    boxes = run_crown(g, payload, Box(lo0, hi0), "interval:float64", method=method,
                      rows="all")
    assert _check_sound(g, payload, lo0, hi0, boxes, 150, seed) > 0
    (rlo, rhi), pre = ref_crown(layers, lo0, hi0, method)
    out = boxes[-1]
    _close(out.lo_float(), out.hi_float(), rlo, rhi)
    if method == "crown":
        for k, (pl, ph) in pre.items():        # layer k's input is node k (node = layer + 1 - 1)
            b = boxes[k]
            _close(b.lo_float(), b.hi_float(), pl, ph)
    # rows="unstable" (the default) bounds by CROWN only the relu inputs whose box
    # straddles 0: the same output bounds; a skipped coordinate keeps its IBP box, whose
    # sign (the relu's relaxation) is the same as CROWN's
    sparse = run_crown(g, payload, Box(lo0, hi0), "interval:float64", method=method)
    _close(sparse[-1].lo_float(), sparse[-1].hi_float(), rlo, rhi)
    for k in pre:
        a, b = sparse[k], boxes[k]
        assert np.all(a.lo_float() <= b.lo_float()) and np.all(a.hi_float() >= b.hi_float())
        assert np.array_equal(a.lo_float() >= 0, b.lo_float() >= 0)
        assert np.array_equal(a.hi_float() <= 0, b.hi_float() <= 0)


@pytest.mark.parametrize("seed,act,pool", [(0, "relu", "avg"), (1, "sigmoid", "avg"),
                                           (2, "relu", "max")])
def test_crown_cnn_sound_and_equal_to_float_reference(seed, act, pool):
    g, payload, layers = small_cnn(seed, act, pool)
    rng = np.random.default_rng(seed)
    x0 = rng.normal(0, 1, (1, 6, 6))
    lo0, hi0 = x0 - 0.1, x0 + 0.1
    boxes = run_crown(g, payload, Box(lo0, hi0), "interval:float64")
    assert _check_sound(g, payload, lo0, hi0, boxes, 100, seed, max_vertices=128) > 0
    (rlo, rhi), pre = ref_crown(layers, lo0.reshape(-1), hi0.reshape(-1))
    _close(boxes[-1].lo_float(), boxes[-1].hi_float(), rlo, rhi)
    _close(boxes[1].lo_float().reshape(-1), boxes[1].hi_float().reshape(-1), *pre[1])
    _close(boxes[5].lo_float(), boxes[5].hi_float(), *pre[3 if pool == "avg" else 4])
    if pool == "max":      # the max-pool's input box: relu of the conv's CROWN box
        _close(boxes[2].lo_float().reshape(-1), boxes[2].hi_float().reshape(-1), *pre[2])
    ibp = run_ibp(g, payload, Box(lo0, hi0), "interval:float64")
    assert np.all(boxes[-1].width() <= ibp[-1].width() * (1 + 1e-12))


def test_crown_six_node_tighter_than_ibp_and_binary32_sound():
    g, payload, x0 = examples.six_node_mlp()
    box = Box.from_center_radius(x0, "0.5")
    ibp = run_ibp(g, payload, box, "interval:float64")
    for method in ("crown", "crown-ibp"):
        cr = run_crown(g, payload, box, "interval:float64", method=method)
        assert float(cr[5].width()) < 0.7 * float(ibp[5].width())
        _check_sound(g, payload, box.lo_float(), box.hi_float(), cr, 200, 1)
    c32 = run_crown(g, payload, box, "interval:binary32")
    c64 = run_crown(g, payload, box, "interval:float64")
    _check_sound(g, payload, box.lo_float(), box.hi_float(), c32, 200, 2)
    assert c32[5].lo_float() <= c64[5].lo_float() and c32[5].hi_float() >= c64[5].hi_float()


def test_crown_batch_of_boxes_equals_single_calls():
    g, payload, x0 = examples.six_node_mlp()
    c = np.array([[0.3, -0.2, 0.1, 0.4], [0.0, 0.5, -0.5, 1.0]])
    both = run_crown(g, payload, Box(c - 0.2, c + 0.2))
    for k in range(2):
        one = run_crown(g, payload, Box(c[k] - 0.2, c[k] + 0.2))
        assert np.array_equal(both[5].lo[k], one[5].lo)
        assert np.array_equal(both[3].hi[k], one[3].hi)


def test_crown_stops_at_ops_without_linear_form_soundly():
    """softmax, a product of two activations and layernorm are boxes CROWN stops at; the
    rest of the graph still gets CROWN bounds, and every node stays sound."""
    rng = np.random.default_rng(5)
    W1, W2 = rng.normal(0, 1, (4, 3)), rng.normal(0, 1, (2, 4))
    g = Graph([Node(0, [], "input", [3]), Node(1, [0], "linear", [4]),
               Node(2, [1], "tanh", [4]), Node(3, [2, 1], "mul", [4]),
               Node(4, [3], OpKind("layernorm", axis=0), [4]),
               Node(5, [4], "linear", [2]), Node(6, [5], OpKind("softmax", axis=0), [2])])
    payload = {1: {"linear": {"W": W1, "b": np.zeros(4)}},
               5: {"linear": {"W": W2, "b": np.zeros(2)}}}
    lo, hi = np.array([-0.3, 0.1, 0.0]), np.array([0.2, 0.4, 0.25])
    for method in ("crown", "crown-ibp"):
        boxes = run_crown(g, payload, Box(lo, hi), method=method)
        _check_sound(g, payload, lo, hi, boxes, 100, 3)
        assert np.all(boxes[6].lo_float() >= 0) and np.all(boxes[6].hi_float() <= 1)


def test_crown_errors():
    g2, p2, x0 = examples.six_node_mlp()
    with pytest.raises(Exception, match="unknown method 'deeppoly'"):
        run_crown(g2, p2, Box.from_center_radius(x0, "0.1"), method="deeppoly")
    with pytest.raises(CrownError, match="box shape"):
        run_crown(g2, p2, Box(np.zeros(3), np.ones(3)))


def test_crown_gives_no_box_where_a_rule_gives_up():
    """As run_ibp: log of a box reaching below 0 has no box, nor does anything after it;
    tanh over rationals is not bounded, the nodes before it are."""
    g = Graph([Node(0, [], "input", [2]), Node(1, [0], "log", [2]), Node(2, [1], "relu", [2]),
               Node(3, [2], "sum", [])])
    boxes = run_crown(g, {}, Box(np.array([-1.0, 1.0]), np.array([1.0, 2.0])))
    assert boxes[0] is not None and boxes[1:] == [None, None, None]
    g2, p2, x0 = examples.six_node_mlp()
    rb = run_crown(g2, p2, Box.from_center_radius(x0, "0.5"), "interval:rational")
    fb = run_crown(g2, p2, Box.from_center_radius(x0, "0.5"), "interval:float64")
    assert rb[5] is None and rb[4] is not None
    assert rb[4].lo_float() >= fb[4].lo_float() and rb[4].hi_float() <= fb[4].hi_float()
