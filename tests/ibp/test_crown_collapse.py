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
from gmpy2 import mpq

from scalarlab.ibp import Box
from scalarlab.ibp import crown as CR
from scalarlab.ibp.crown_kernels import collapse_rows

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
