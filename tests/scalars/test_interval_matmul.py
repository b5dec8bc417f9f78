"""Interval matmul: midpoint-radius (Rump) and the endpoint algorithm both enclose the
exact product of every pair of point matrices in the boxes; the exact interval product
(rational endpoints) is the reference for tightness."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.scalars import ContextError


def _exact_hull(alo, ahi, blo, bhi):
    """Exact interval matrix product (rational endpoints), 2-d operands."""
    m, n = alo.shape
    p = blo.shape[1]
    lo = np.empty((m, p), dtype=object); hi = np.empty((m, p), dtype=object)
    for i in range(m):
        for j in range(p):
            sl = sh = Fraction(0)
            for k in range(n):
                c = [Fraction(x) * Fraction(y) for x in (alo[i, k], ahi[i, k])
                     for y in (blo[k, j], bhi[k, j])]
                sl += min(c); sh += max(c)
            lo[i, j], hi[i, j] = sl, sh
    return lo, hi


def _boxes(rng, m, n, p, radius, scale=1.0):
    a = rng.standard_normal((m, n)) * scale
    b = rng.standard_normal((n, p)) * scale
    ra = rng.uniform(0, radius, (m, n)); rb = rng.uniform(0, radius, (n, p))
    return a - ra, a + ra, b - rb, b + rb


@pytest.mark.parametrize("base", ["float64", "binary32", "bfloat16"])
@pytest.mark.parametrize("radius", [0.0, 1e-6, 0.1])
def test_midrad_and_endpoint_enclose_exact_hull(base, radius):
    rng = np.random.default_rng(int(radius * 1e7) + len(base))
    ctx = scalars.get(f"interval:{base}")
    alo, ahi, blo, bhi = _boxes(rng, 4, 9, 3, radius)
    A, B = ctx.make(alo, ahi), ctx.make(blo, bhi)
    mr = ctx.matmul_midrad(A, B)
    ep = ctx.matmul_endpoint(A, B)
    assert mr.shape == ep.shape == (4, 3)
    hlo, hhi = _exact_hull(A.lo, A.hi, B.lo, B.hi)
    for r in (mr, ep):
        for i in range(4):
            for j in range(3):
                assert Fraction(r.lo[i, j]) <= hlo[i, j] and hhi[i, j] <= Fraction(r.hi[i, j])
    # tightness: midpoint-radius overestimates the exact hull by at most a factor 1.5
    # (Rump) plus rounding; the endpoint algorithm only by its roundings
    hw = np.array([[float(hhi[i, j] - hlo[i, j]) for j in range(3)] for i in range(4)])
    w_mr = mr.hi - mr.lo
    w_ep = ep.hi - ep.lo
    ulp = {"float64": 2.0 ** -52, "binary32": 2.0 ** -23, "bfloat16": 2.0 ** -7}[base]
    mag = np.abs(A.lo).max() * np.abs(B.lo).max() * 9 * 4
    assert (w_mr <= 1.5 * hw + 40 * ulp * mag).all()
    assert (w_ep <= hw + 40 * ulp * mag).all()
    if radius == 0.1:   # dominated by the box widths, not rounding: compare the two
        assert (w_ep <= w_mr * (1 + 1e-9) + 40 * ulp * mag).all()


def test_rational_endpoint_matmul_is_exact_hull():
    rng = np.random.default_rng(1)
    ctx = scalars.get("interval:rational")
    alo, ahi, blo, bhi = _boxes(rng, 3, 5, 2, 0.3)
    A, B = ctx.make(alo, ahi), ctx.make(blo, bhi)
    r = ctx.matmul(A, B)
    hlo, hhi = _exact_hull(alo, ahi, blo, bhi)
    assert all(r.lo[i, j] == hlo[i, j] and r.hi[i, j] == hhi[i, j]
               for i in range(3) for j in range(2))
    # midpoint-radius over exact endpoints is the endpoint algorithm
    m = ctx.matmul_midrad(A, B)
    assert (m.lo == r.lo).all() and (m.hi == r.hi).all()


def test_point_times_interval_and_sampled_points_inside():
    rng = np.random.default_rng(2)
    ctx = scalars.get("interval:binary32")
    W = rng.standard_normal((5, 4)).astype(np.float32).astype(np.float64)
    x = rng.standard_normal(4)
    box = ctx.make(x - 0.05, x + 0.05)
    y = ctx.matmul(ctx.convert(W), box)          # point matrix x interval vector
    assert y.shape == (5,)
    for _ in range(50):
        pt = x + rng.uniform(-0.05, 0.05, 4)
        pt = np.clip(pt, box.lo, box.hi)
        exact = [sum(Fraction(W[i, k]) * Fraction(pt[k]) for k in range(4)) for i in range(5)]
        assert all(Fraction(y.lo[i]) <= exact[i] <= Fraction(y.hi[i]) for i in range(5))
    z = ctx.matmul(box, ctx.convert(W.T))         # interval vector x point matrix
    assert z.shape == (5,)
    assert (z.lo <= y.hi).all() and (y.lo <= z.hi).all()


def test_batched_and_vector_shapes():
    ctx = scalars.get("interval:float64")
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 3, 4)); b = rng.standard_normal((4, 5))
    A, B = ctx.make(a, a + 0.01), ctx.make(b, b)
    for fn in (ctx.matmul_midrad, ctx.matmul_endpoint):
        r = fn(A, B)
        assert r.shape == (2, 3, 5)
        c = np.matmul(a, b)
        assert (r.lo <= c + 1e-12).all() and (c - 1e-12 <= r.hi).all()
    v = ctx.make(rng.standard_normal(4), rng.standard_normal(4) + 10)
    assert ctx.matmul(v, v).shape == ()
    assert ctx.matmul_endpoint(v, v).shape == ()
    with pytest.raises(ContextError, match=r"matmul: shapes \[2, 3, 4\] and \[5\]"):
        ctx.matmul(A, ctx.zeros((5,)))


def test_midrad_underflow_and_infinite_fallback():
    ctx = scalars.get("interval:float64")
    tiny = ctx.make(np.full((2, 3), 1e-200), np.full((2, 3), 2e-200))
    r = ctx.matmul(tiny, ctx.make(np.full((3, 2), 1e-200), np.full((3, 2), 1e-200)))
    exact_lo = 3 * Fraction(1e-200) * Fraction(1e-200)      # far below the subnormals
    exact_hi = 6 * Fraction(1e-200) * Fraction(1e-200)
    assert all(Fraction(t) <= exact_lo for t in r.lo.reshape(-1))
    assert all(Fraction(t) >= exact_hi for t in r.hi.reshape(-1))
    assert (r.hi - r.lo <= 1e-320).all()          # only the underflow term remains
    # the radius product underflows (1e-100 * 1e-300): the box must still enclose
    r = ctx.matmul(ctx.make(np.array([[1e-100]]), np.array([[1e-100]])),
                   ctx.make(np.array([[-1e-300]]), np.array([[1e-300]])))
    assert r.lo[0, 0] < 0 < r.hi[0, 0]
    # a partial sum overflows inside BLAS although the exact result is finite
    big = ctx.make(np.array([[1e308, 1e308, -1e308]]), np.array([[1e308, 1e308, -1e308]]))
    r = ctx.matmul(big, ctx.make(np.ones((3, 1)), np.ones((3, 1))))
    assert r.lo[0, 0] <= 1e308 <= r.hi[0, 0] and np.isfinite(r.lo[0, 0])
    inf = ctx.make(np.array([[1.0, -np.inf]]), np.array([[2.0, 0.0]]))
    r = ctx.matmul(inf, ctx.make(np.array([[1.0], [0.0]]), np.array([[1.0], [1.0]])))
    assert r.lo[0, 0] == -np.inf and r.hi[0, 0] == 2.0    # 0 * inf counts as 0


def test_zero_matrix_product_is_exact_zero():
    ctx = scalars.get("interval:binary32")
    r = ctx.matmul(ctx.zeros((3, 4)), ctx.make(-np.ones((4, 2)), np.ones((4, 2))))
    assert (r.lo == 0).all() and (r.hi == 0).all()


def test_mpmath_endpoint_matmul_encloses():
    ctx = scalars.get("interval:mpmath:200")
    A = ctx.make([["0.1", "0.2"], ["-0.3", "0.4"]], [["0.1", "0.25"], ["-0.3", "0.5"]])
    B = ctx.convert([["1/3"], ["2/3"]])
    r = ctx.matmul(A, B)
    hlo, hhi = _exact_hull(np.array([[Fraction("0.1"), Fraction("0.2")],
                                     [Fraction("-0.3"), Fraction("0.4")]], dtype=object),
                           np.array([[Fraction("0.1"), Fraction("0.25")],
                                     [Fraction("-0.3"), Fraction("0.5")]], dtype=object),
                           np.array([[Fraction(1, 3)], [Fraction(2, 3)]], dtype=object),
                           np.array([[Fraction(1, 3)], [Fraction(2, 3)]], dtype=object))
    for i in range(2):
        lo, hi = ctx.ends._exact(r.lo[i, 0]), ctx.ends._exact(r.hi[i, 0])
        assert lo <= hlo[i, 0] and hhi[i, 0] <= hi
        assert hlo[i, 0] - lo < Fraction(1, 2 ** 190) and hi - hhi[i, 0] < Fraction(1, 2 ** 190)
