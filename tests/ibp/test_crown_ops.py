"""ibp/crown_ops.py: the float64 midpoint-radius operators of CROWN's backward pass.

Each enclosure is checked against the exact rational product (Fractions) of every point
of a small Lambda interval's corners: conv2d's adjoint (stride 2, padding 1, dilation 2,
3 channels), linear, the offset product and the interval scaling, including entries
near the subnormal range (whose rounding is absolute, not relative); and the enclosures
are tight (width within 1e-12 of the magnitudes)."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from scalarlab.graph.ops_conv import _conv_geom
from scalarlab.ibp.crown_ops import (_apply, _conv2d_transposed, _midrad, matvec,
                                     scale_intervals)
from scalarlab.scalars.values import Interval


def _exact_conv_adjoint(G, W, q):
    """sum_o G[o, a, b] W[o, c, i, j] into x[c, a s + i d - p, b s + j d - p], Fractions."""
    R, O, Ho, Wo = G.shape
    _, C, kh, kw = W.shape
    H, Wd = q["S"]
    out = [[[[Fraction(0)] * Wd for _ in range(H)] for _ in range(C)] for _ in range(R)]
    for r in range(R):
        for o in range(O):
            for a in range(Ho):
                for b in range(Wo):
                    g = Fraction(G[r, o, a, b])
                    for c in range(C):
                        for i in range(kh):
                            for j in range(kw):
                                y = a * q["s"][0] + i * q["dl"][0] - q["pb"][0]
                                x = b * q["s"][1] + j * q["dl"][1] - q["pb"][1]
                                if 0 <= y < H and 0 <= x < Wd:
                                    out[r][c][y][x] += g * Fraction(W[o, c, i, j])
    return out


def _inside(lo, hi, exact):
    lo, hi = np.asarray(lo).reshape(-1), np.asarray(hi).reshape(-1)
    ex = np.asarray(exact, dtype=object).reshape(-1)
    return all(Fraction(a) <= e <= Fraction(b) for a, b, e in zip(lo, hi, ex))


@pytest.mark.parametrize("scale", [1.0, 2.0 ** -1040])
def test_conv_adjoint_and_linear_enclose_the_exact_products(scale):
    rng = np.random.default_rng(3)
    W = rng.normal(0, 1, (4, 3, 3, 3))
    q = _conv_geom("conv2d", 2, [(3, 7, 7)], dict(kernel_size=3, out_channels=4, stride=2,
                                                   padding=1, dilation=2, groups=1,
                                                   auto_pad="NOTSET"))
    G = rng.normal(0, 1, (2, 4) + q["O"]) * scale
    lam = Interval(G.reshape(2, -1), G.reshape(2, -1))
    mid, rad = _midrad(lam)
    lo, hi = _apply(lambda A, ab: _conv2d_transposed(A.reshape(G.shape), np.abs(W) if ab
                                                     else W, q), mid, rad, 4 * 9)
    assert lo.shape == (2, 3, 7, 7)
    # the radius: 1e-12 relative, plus the absolute subnormal terms (N eta each)
    tiny = 1e-12 * scale + 2.0 ** -1060
    assert np.allclose(_conv2d_transposed(G, W, q), 0.5 * lo + 0.5 * hi, rtol=0, atol=tiny)
    assert _inside(lo, hi, _exact_conv_adjoint(G, W, q))
    assert np.max(hi - lo) <= 1e-12 * np.max(np.abs(lo)) + tiny
    # linear: Lambda W with W [out, in]; an interval Lambda: every corner's exact product
    Wl = rng.normal(0, 1, (5, 6))
    L0 = rng.normal(0, 1, (3, 5)) * scale
    L1 = L0 + np.abs(rng.normal(0, 1e-3, (3, 5))) * scale
    mid, rad = _midrad(Interval(L0, L1))
    lo, hi = _apply(lambda A, ab: A @ (np.abs(Wl) if ab else Wl), mid, rad, 5)
    for pick in (L0, L1, np.where(Wl[None, :, 0] > 0, L0, L1)):
        exact = [[sum(Fraction(pick[r, k]) * Fraction(Wl[k, c]) for k in range(5))
                  for c in range(6)] for r in range(3)]
        assert _inside(lo, hi, exact)


def test_offset_product_and_interval_scaling_enclose_exact_values():
    rng = np.random.default_rng(4)
    L0 = rng.normal(0, 1, (3, 8))
    L1 = L0 + np.abs(rng.normal(0, 1e-2, (3, 8)))
    v0 = rng.normal(0, 1, 8)
    v1 = v0 + np.abs(rng.normal(0, 1e-2, 8))
    r = matvec(Interval(L0, L1), Interval(v0, v1))
    for A in (L0, L1):
        for v in (v0, v1):
            exact = [sum(Fraction(A[i, k]) * Fraction(v[k]) for k in range(8))
                     for i in range(3)]
            assert _inside(r.lo, r.hi, exact)
    assert np.max(r.hi - r.lo) < 0.2
    d0 = rng.normal(0, 1, (1, 8))
    d1 = d0 + 1e-3
    s = scale_intervals(Interval(L0, L1), Interval(d0, d1))
    for A in (L0, L1):
        for d in (d0, d1):
            exact = [[Fraction(A[i, k]) * Fraction(d[0, k]) for k in range(8)]
                     for i in range(3)]
            assert _inside(s.lo, s.hi, exact)
    # a non-finite entry: no enclosure (the caller takes the context's product)
    assert matvec(Interval(L0, np.full_like(L1, np.inf)), Interval(v0, v1)) is None
