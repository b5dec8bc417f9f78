"""The compiled float64 interval division (scalars.kernels.interval_f64) gives the generic
algorithm's endpoints (four directed quotients, min and max) and encloses the exact
quotient set: sampled against exact rationals, with signs mixed, zeros, huge/tiny operands
(which fall back) and straddling divisors (which take the generic path)."""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from scalarlab import scalars
from scalarlab.scalars.kernels import directed as D
from scalarlab.scalars.kernels import interval_f64 as IK
def _generic(alo, ahi, blo, bhi):
    qs = [D.div_dir(x, y) for x in (alo, ahi) for y in (blo, bhi)]
    return (np.minimum.reduce([q[0] for q in qs]), np.maximum.reduce([q[1] for q in qs]))


def _intervals(rng, n, positive=None):
    a = rng.standard_normal(n) * 10.0 ** rng.integers(-6, 6, n)
    w = np.abs(rng.standard_normal(n)) * 10.0 ** rng.integers(-8, 2, n)
    lo, hi = a - w, a + w
    lo[:20] = 0.0
    hi[20:40] = 0.0
    if positive is not None:
        lo, hi = np.abs(lo) + 1e-3, np.abs(lo) + 1e-3 + np.abs(w)
        if not positive:
            lo, hi = -hi, -lo
    return np.minimum(lo, hi), np.maximum(lo, hi)


def test_compiled_division_equals_the_generic_endpoints_and_encloses():
    rng = np.random.default_rng(8)
    n = 20_000
    alo, ahi = _intervals(rng, n)
    sign = rng.random(n) < 0.5
    plo, phi = _intervals(rng, n, True)
    blo, bhi = np.where(sign, plo, -phi), np.where(sign, phi, -plo)
    got = IK.div_f64(alo, ahi, blo, bhi, (n,))
    assert got is not None
    want = _generic(alo, ahi, blo, bhi)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    for i in range(0, n, 97):                       # exact enclosure of the corner quotients
        for x in (alo[i], ahi[i]):
            for y in (blo[i], bhi[i]):
                q = Fraction(float(x)) / Fraction(float(y))
                assert Fraction(float(got[0][i])) <= q <= Fraction(float(got[1][i]))


def test_context_uses_it_and_falls_back_where_it_must():
    iv = scalars.get("interval:float64")
    a = iv.make(np.array([1.0, -2.0, 1e-300, 3.0]), np.array([2.0, -1.0, 2e-300, 4.0]))
    b = iv.make(np.array([3.0, 0.5, 1e300, -2.0]), np.array([4.0, 0.75, 2e300, -1.0]))
    r = iv.div(a, b)                               # 1e-300/1e300 underflows: generic path
    for i in range(4):
        for x in (a.lo[i], a.hi[i]):
            for y in (b.lo[i], b.hi[i]):
                q = Fraction(float(x)) / Fraction(float(y))
                assert Fraction(float(r.lo[i])) <= q <= Fraction(float(r.hi[i]))
    assert IK.div_f64(a.lo, a.hi, b.lo, b.hi, (4,)) is None
    s = iv.div(a, iv.make(np.array([-1.0] * 4), np.array([1.0] * 4)))   # straddles 0
    assert np.all(np.isinf(s.lo)) and np.all(np.isinf(s.hi))


def test_compiled_sum_equals_the_generic_loop():
    rng = np.random.default_rng(12)
    lo, hi = _intervals(rng, 6 * 500)
    lo2, hi2 = lo.reshape(6, 500), hi.reshape(6, 500)
    got = IK.sum_f64(lo2, hi2)
    assert got is not None
    want_lo, want_hi = lo2[:, 0].copy(), hi2[:, 0].copy()
    for k in range(1, 500):
        want_lo = D.add_dir(want_lo, lo2[:, k])[0]
        want_hi = D.add_dir(want_hi, hi2[:, k])[1]
    assert np.array_equal(got[0], want_lo) and np.array_equal(got[1], want_hi)
    q = [sum(Fraction(float(v)) for v in row) for row in lo2]
    assert all(Fraction(float(g)) <= t for g, t in zip(got[0], q))
    iv = scalars.get("interval:float64")
    s = iv.sum(iv.make(lo2, hi2), axis=1)
    assert np.array_equal(s.lo, want_lo) and np.array_equal(s.hi, want_hi)
    big = lo2.copy()
    big[0, 3] = 1e305
    assert IK.sum_f64(big, np.maximum(hi2, big)) is None      # generic loop there


def test_compiled_sqrt_equals_the_directed_roots():
    rng = np.random.default_rng(21)
    x = np.abs(rng.standard_normal(20_000)) * 10.0 ** rng.integers(-200, 200, 20_000)
    squares = (np.floor(rng.random(2000) * 2 ** 26) + 1) ** 2        # exact squares
    lo = np.concatenate([x, squares, [0.0, 4.0, 2.0]])
    hi = lo * (1 + rng.random(lo.size) * 1e-3)
    got = IK.sqrt_f64(lo, hi)
    assert got is not None
    assert np.array_equal(got[0], D.sqrt_dir(lo)[0]) and np.array_equal(got[1], D.sqrt_dir(hi)[1])
    assert np.array_equal(got[0][20_000:22_000], np.sqrt(squares))   # exact roots
    iv = scalars.get("interval:float64")
    r = iv.sqrt(iv.make(lo, hi))
    assert np.array_equal(r.lo, got[0]) and np.array_equal(r.hi, got[1])
    assert IK.sqrt_f64(np.array([1e-310]), np.array([1.0])) is None
