"""ibp/crown.py: Lambda collapsed to a float matrix at every node crossed.

An interval Lambda carried through a deep net grows its radius with the product of the
layers' |M| while its midpoint follows M (the wrapping effect): a 12 x 64 relu MLP's
CROWN bounds were 1.3e-7 of the scale wider than float64 CROWN, a resnet18-shaped net of
width 32 5e-5 wider than auto_LiRPA.  Collapsing Lambda to its midpoint at each node and
charging the radius once over the node's box keeps the bounds within rounding of the
float64 reference (tested to 1e-11 here) and sound: the charge is checked against exact
rationals, the bounds against exact (mpmath) values and float64 point runs."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from gmpy2 import mpq

from scalarlab import scalars
from scalarlab.graph import Graph, Node, OpKind
from scalarlab.graph.fold import node_args
from scalarlab.graph.payload import as_payload
from scalarlab.ibp import Box, crown_ops
from scalarlab.ibp import crown as CR
from scalarlab.ibp.crown_kernels import collapse_rows
from scalarlab.scalars.values import Interval

from test_crown_ops import _exact_conv_adjoint  # noqa: E402  (tests/ibp on sys.path)
from test_ibp_crown import mlp_graph, random_mlp, ref_crown  # noqa: E402


def test_collapse_charge_bounds_the_exact_remainder():
    rng = np.random.default_rng(5)
    lo = rng.normal(0, 1, (3, 40))
    hi = lo + np.abs(rng.normal(0, 1e-12, (3, 40)))
    lo[1, :8] *= 2.0 ** -1060                     # subnormal range: absolute roundings
    hi[1, :8] = lo[1, :8] + 2.0 ** -1074 * np.arange(1, 9)
    hi[:, ::4] = lo[:, ::4]                       # points stay points, radius 0
    mag = np.abs(rng.normal(0, 3, 40))
    mag[5] = 0.0
    P, s, ok = collapse_rows(lo, hi, mag)
    assert ok
    assert np.array_equal(P[:, ::4], lo[:, ::4])
    for r in range(3):
        assert lo[r].min() <= P[r].min() and P[r].max() <= hi[r].max()
        # the largest |(Lambda - P) z| over Lambda in [lo, hi] and |z| <= mag, exactly
        worst = sum(max(Fraction(hi[r, k]) - Fraction(P[r, k]),
                        Fraction(P[r, k]) - Fraction(lo[r, k])) * Fraction(mag[k])
                    for k in range(40))
        assert worst <= Fraction(s[r]) <= worst * (1 + Fraction(1, 10 ** 12)) + \
            Fraction(2.0 ** -1000)
    # a point Lambda costs nothing; a non-finite magnitude: no collapse
    assert not np.any(collapse_rows(lo, lo.copy(), mag)[1])
    assert not collapse_rows(lo, hi, np.full(40, np.inf))[2]


def test_deep_mlp_equals_float64_crown_and_stays_sound(monkeypatch):
    widths = [8] + [64] * 12 + [4]
    layers = random_mlp(7, widths, ["relu"])
    g, payload = mlp_graph(layers, widths[0])
    x0 = np.random.default_rng(1).normal(0, 1, 8)
    lo0, hi0 = x0 - 0.003, x0 + 0.003
    (rlo, rhi), _ = ref_crown(layers, lo0, hi0, "crown")
    scale = np.max(np.abs([rlo, rhi]))
    real = CR.run_crown(g, payload, Box(lo0, hi0), method="crown", guarantee="real")
    out = real[-1]
    diff = max(np.max(np.abs(out.lo - rlo)), np.max(np.abs(out.hi - rhi))) / scale
    assert diff <= 1e-11, diff
    rng = np.random.default_rng(2)
    xs = np.concatenate([np.where(rng.random((30, 8)) < 0.5, lo0, hi0),
                         lo0 + rng.random((30, 8)) * (hi0 - lo0)])
    # every node's box holds the exact values (rationals) at 4 vertices, 2 inner points
    h = np.vectorize(mpq, otypes=[object])(xs[[0, 1, 2, 3, 30, 31]].T)
    for i, lay in enumerate(layers, start=1):
        if lay[0] == "affine":
            W = np.vectorize(mpq, otypes=[object])(lay[1])
            h = W.dot(h) + np.vectorize(mpq, otypes=[object])(lay[2])[:, None]
        else:
            h = np.maximum(h, mpq(0))
        b = real[i]
        assert all(mpq(a) <= v <= mpq(c) for a, c, row in zip(b.lo, b.hi, h) for v in row)
    # the execution guarantee holds float64 point runs (30 vertices, 30 inner points)
    ex = CR.run_crown(g, payload, Box(lo0, hi0), method="crown")[-1]
    assert np.all(ex.lo <= out.lo) and np.all(ex.hi >= out.hi)
    h = xs.T
    for lay in layers:
        h = lay[1] @ h + lay[2][:, None] if lay[0] == "affine" else np.maximum(h, 0.0)
    assert np.all(ex.lo[:, None] <= h) and np.all(h <= ex.hi[:, None])
    # interval Lambda throughout (the old pass): sound, but wider by the wrapping
    monkeypatch.setattr(CR, "COLLAPSE", False)
    old = CR.run_crown(g, payload, Box(lo0, hi0), method="crown", guarantee="real")[-1]
    assert np.all(old.lo <= out.lo) and np.all(old.hi >= out.hi)
    assert max(np.max(out.lo - old.lo), np.max(old.hi - out.hi)) / scale > 1e-9


@pytest.mark.parametrize("win", [None, (1, 3, 0, 2)])
def test_point_lambda_through_conv_charges_its_rounding(win):
    """A float Lambda through conv2d: one float product P is the new Lambda, and the
    charge (plus Lambda b) holds the exact remainder Lambda (M z + b) - P z at vertices
    of the input box (rationals), whole layout and a spatial window."""
    rng = np.random.default_rng(11)
    g = Graph([Node(0, [], "input", [2, 5, 5]),
               Node(1, [0], OpKind("conv2d", kernel_size=3, padding=1), [3, 5, 5])])
    W, b = rng.normal(0, 1, (3, 2, 3, 3)), rng.normal(0, 1, 3)
    payload = as_payload({1: {"conv2d": {"weight": W, "bias": b}}})
    ictx = scalars.get("interval:float64")
    st = CR._State(g, payload, ictx, [True, True], [None, "affine"], [None, None], None)
    st.collapse = True
    x0 = rng.normal(0, 1, (2, 5, 5))
    vals = [Box(x0 - 0.25, x0 + 0.25).to_interval(ictx), None]
    y0, y1, x0_, x1 = (0, 5, 0, 5) if win is None else win
    G = np.zeros((2, 3, 5, 5))
    G[:, :, y0:y1, x0_:x1] = rng.normal(0, 1, (2, 3, y1 - y0, x1 - x0_))
    L = G[:, :, y0:y1, x0_:x1].reshape(2, -1)
    local = list(vals)
    local[0] = None
    args, attrs = node_args(g, payload, ictx, g.nodes[1], local)
    offset = Interval(np.repeat(b, 25), np.repeat(b, 25))
    lam_u, cb, win_u = crown_ops._point_affine(st, g.nodes[1], vals, 0, Interval(L, L), W,
                                               args, attrs, offset, win)
    lam0, ch, _ = crown_ops._point_affine(st, g.nodes[1], vals, 0, Interval(L, L), W,
                                          args, attrs, None, win)
    assert np.array_equal(lam_u.lo, lam_u.hi) and np.array_equal(lam0.lo, lam_u.lo)
    assert np.all(ch.lo == -ch.hi) and np.all(ch.hi < 1e-10)   # the charge alone: tiny
    a0, a1, b0, b1 = (0, 5, 0, 5) if win_u is None else win_u
    q = crown_ops._conv_geom("conv2d", 2, [(2, 5, 5)],
                             dict(kernel_size=3, out_channels=3, stride=1, padding=1,
                                  dilation=1, groups=1, auto_pad="NOTSET"))
    exact_LM = _exact_conv_adjoint(G, W, q)
    exact_Lb = [sum(Fraction(G[r, o, y, x]) * Fraction(b[o]) for o in range(3)
                    for y in range(5) for x in range(5)) for r in range(2)]
    P = lam_u.lo.reshape(2, 2, a1 - a0, b1 - b0)
    lo_box, hi_box = np.asarray(vals[0].lo), np.asarray(vals[0].hi)
    rounded = 0
    for _ in range(6):
        z = np.where(rng.random((2, 5, 5)) < 0.5, lo_box, hi_box)
        for r in range(2):
            exact = sum(exact_LM[r][c][y][x] * Fraction(z[c, y, x])
                        for c in range(2) for y in range(5) for x in range(5))
            got = sum(Fraction(P[r, c, y - a0, x - b0]) * Fraction(z[c, y, x])
                      for c in range(2) for y in range(a0, a1) for x in range(b0, b1))
            rounded += exact != got                 # P is not the exact product ...
            assert abs(exact - got) <= Fraction(ch.hi[r])   # ... the charge covers it
            assert Fraction(cb.lo[r]) <= exact + exact_Lb[r] - got <= Fraction(cb.hi[r])
    assert rounded
