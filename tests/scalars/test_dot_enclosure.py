"""scalars/dot_enclosure: the long double midpoint-radius product encloses the exact
interval product (exact rationals) with about one float64 ulp of excess per endpoint, far
below the float64 a-priori bound at large fan-in."""
from __future__ import annotations

import gmpy2
import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.scalars.kernels import dot_enclosure as DE
from scalarlab.scalars.values import Interval

pytestmark = pytest.mark.skipif(not DE.AVAILABLE, reason="long double is not x87 extended")


def _exact(alo, ahi, blo, bhi):
    """Exact [lo, hi] of the interval product, per output, as mpq (endpoint products)."""
    m, n = alo.shape
    p = blo.shape[1]
    lo = np.empty((m, p), dtype=object)
    hi = np.empty((m, p), dtype=object)
    q = np.vectorize(lambda t: gmpy2.mpq(float(t)), otypes=[object])
    Al, Ah, Bl, Bh = q(alo), q(ahi), q(blo), q(bhi)
    for i in range(m):
        for j in range(p):
            s_lo = s_hi = gmpy2.mpq(0)
            for k in range(n):
                c = (Al[i, k] * Bl[k, j], Al[i, k] * Bh[k, j], Ah[i, k] * Bl[k, j],
                     Ah[i, k] * Bh[k, j])
                s_lo += min(c)
                s_hi += max(c)
            lo[i, j], hi[i, j] = s_lo, s_hi
    return lo, hi


def _ulps_outside(got, exact, side):
    """How many float64 steps the endpoint lies beyond the exact end (>= 0 when sound)."""
    out = []
    for g, e in zip(np.ravel(got), np.ravel(exact)):
        g = float(g)
        d = (e - gmpy2.mpq(g)) if side == "lo" else (gmpy2.mpq(g) - e)
        assert d >= 0
        out.append(float(d) / float(np.spacing(abs(g)) or 2.0 ** -1074))
    return np.array(out)


@pytest.mark.parametrize("n,point_b", [(1000, True), (100, True), (7, True), (300, False)])
def test_sound_and_far_tighter_than_float64_midrad(n, point_b):
    """Measured excess over the exact product (lower ends, float64 ulps): fan-in 10: 0.7
    vs 43, 100: 1.2 vs 1278, 1000: 11 vs 22,000 (the a-priori term is 2^11 smaller)."""
    rng = np.random.default_rng(n)
    mid = rng.normal(0, 1, (2, n))
    rad = np.abs(rng.normal(0, 1e-3, (2, n)))
    alo, ahi = mid - rad, mid + rad
    B = rng.normal(0, 1, (n, 4))
    blo, bhi = (B, B) if point_b else (B - 1e-4, B + 1e-4)
    lo, hi = DE.matmul_midrad_ld(alo, ahi, blo, bhi)
    elo, ehi = _exact(alo, ahi, blo, bhi)
    x_lo, x_hi = _ulps_outside(lo, elo, "lo"), _ulps_outside(hi, ehi, "hi")   # sound
    ictx = scalars.get("interval:float64")
    f = ictx.matmul_midrad(Interval(alo, ahi), Interval(blo, bhi))
    f_lo, f_hi = _ulps_outside(f.lo, elo, "lo"), _ulps_outside(f.hi, ehi, "hi")
    assert np.all(x_lo <= f_lo) and np.all(x_hi <= f_hi)
    if point_b:
        if n <= 100:
            assert x_lo.max() <= 3 and x_hi.max() <= 3
        if n >= 100:
            assert x_lo.mean() * 500 < f_lo.mean() and x_hi.mean() * 500 < f_hi.mean()


def test_context_matmul_uses_it_when_cheap_and_never_widens():
    ictx = scalars.get("interval:float64")
    rng = np.random.default_rng(0)
    a = ictx.make(rng.normal(0, 1, (3, 500)) - 1e-3, rng.normal(0, 1, (3, 500)) * 0 + 5)
    B = ictx.convert(rng.normal(0, 1, (500, 6)))
    got = ictx.matmul(a, B)
    ld = ictx.matmul_midrad_ld(a, B)
    assert np.array_equal(got.lo, ld.lo) and np.array_equal(got.hi, ld.hi)
    old = ictx.matmul_midrad(a, B)
    assert np.all(got.lo >= old.lo) and np.all(got.hi <= old.hi)
    assert DE.matmul_midrad_ld(np.array([[np.inf]]), np.array([[np.inf]]),
                               np.ones((1, 1)), np.ones((1, 1))) is None
