"""The one compiled sequential interval-sum loop (scalars.kernels.grid._sum_rows, blocks of
rows transposed into lanes) against the generic directed loop (scalars.kernels.directed.add_dir,
one partial sum at a time) on every grid: row counts around and across the lane width,
short and long rows, wide-range operands, and the hand-off to the generic loop."""
from __future__ import annotations

import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.scalars.kernels import directed as D
from scalarlab.scalars import formats as FM
from scalarlab.scalars.kernels import grid as GK
from scalarlab.scalars.kernels import interval_f64 as IK
GRIDS = [FM.binary64, FM.binary32, FM.bfloat16, FM.binary16]


def _generic(lo2, hi2, fmt):
    wl, wh = lo2[:, 0].copy(), hi2[:, 0].copy()
    for k in range(1, lo2.shape[1]):
        wl = D.add_dir(wl, lo2[:, k], fmt)[0]
        wh = D.add_dir(wh, hi2[:, k], fmt)[1]
    return wl, wh


def _boxes(rng, R, n, fmt, wide):
    x = rng.standard_normal((R, n))
    if wide:
        e = 8 if fmt.max_finite < 1e6 else 30           # binary16 tops out at 65504
        x = x * 2.0 ** rng.integers(-e, e, (R, n)).astype(float)
    lo = D.round_down(x, fmt)
    hi = D.round_up(x + np.abs(rng.standard_normal((R, n))) * 1e-3, fmt)
    return lo, hi


@pytest.mark.parametrize("fmt", GRIDS, ids=str)
def test_sum_rows_equal_generic_loop(fmt):
    rng = np.random.default_rng(5)
    lanes = GK._LANES
    for R, n in [(1, 1), (1, 7), (lanes - 1, 3), (lanes, 5), (lanes + 1, 40),
                 (3 * lanes + 5, 17), (2, 300)]:
        for wide in (False, True):
            lo, hi = _boxes(rng, R, n, fmt, wide)
            got = GK.sum_grid(lo, hi, fmt)
            assert got is not None, (R, n)
            want = _generic(lo, hi, fmt)
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), (R, n)
            assert np.array_equal(np.signbit(got[0]), np.signbit(want[0]))


def test_float64_entry_point_is_the_shared_loop():
    rng = np.random.default_rng(6)
    lo, hi = _boxes(rng, 37, 64, FM.binary64, True)
    a = IK.sum_f64(lo, hi)
    b = GK.sum_grid(lo, hi, FM.binary64)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


@pytest.mark.parametrize("fmt", [FM.binary64, FM.binary32], ids=str)
def test_out_of_range_in_a_later_block_hands_off(fmt):
    """An operand beyond 2^900 in the second block of rows: None (generic loop), and the
    interval context's sum then still equals the generic loop."""
    rng = np.random.default_rng(7)
    R = 2 * GK._LANES + 3
    lo, hi = _boxes(rng, R, 9, fmt, False)
    if fmt is FM.binary64:
        lo[GK._LANES + 2, 4] = -1e305
    else:
        lo[GK._LANES + 2, 4] = -np.inf
    assert GK.sum_grid(lo, hi, fmt) is None
    iv = scalars.get("interval:" + ("float64" if fmt is FM.binary64 else "binary32"))
    s = iv.sum(iv.make(lo, hi), axis=1)
    want = _generic(lo, hi, fmt)
    assert np.array_equal(s.lo, want[0]) and np.array_equal(s.hi, want[1])


@pytest.mark.parametrize("fmt", GRIDS[1:], ids=str)
def test_mul_kernel_two_roundings_equal_min_max_of_eight(fmt):
    """mul_kernel rounds only the least and greatest exact products: the same values as the
    least RD and greatest RU of all four (zeros, sign changes, tiny products included)."""
    rng = np.random.default_rng(9)
    n = 4000
    v = rng.standard_normal((4, n)) * 2.0 ** rng.integers(-12, 6, (4, n)).astype(float)
    v[:, rng.random(n) < 0.2] = 0.0
    v = np.where(rng.random((4, n)) < 0.1, 0.0, v)
    a0, a1 = np.minimum(v[0], v[1]), np.maximum(v[0], v[1])
    b0, b1 = np.minimum(v[2], v[3]), np.maximum(v[2], v[3])
    a0, a1 = D.round_down(a0, fmt), D.round_up(a1, fmt)
    b0, b1 = D.round_down(b0, fmt), D.round_up(b1, fmt)
    got = GK.mul_grid(a0, a1, b0, b1, (n,), fmt)
    assert got is not None
    ds, us = [], []
    for x, y in ((a0, b0), (a0, b1), (a1, b0), (a1, b1)):
        d, u = D.mul_dir(x, y, fmt)
        z = (x == 0) | (y == 0)
        ds.append(np.where(z, 0.0, d))
        us.append(np.where(z, 0.0, u))
    assert np.array_equal(got[0], np.min(ds, axis=0))
    assert np.array_equal(got[1], np.max(us, axis=0))


@pytest.mark.parametrize("fmt", [FM.binary64, FM.binary32], ids=str)
def test_grid_rounding_of_subnormal_results(fmt):
    """Sums and differences landing in the grid's subnormal range (float64's own for
    binary64, where every float64 is on the grid) round exactly: against Fractions."""
    from fractions import Fraction
    tiny = 2.0 ** (fmt.emin - fmt.man_bits)
    a = np.array([1e-310, -3e-320, 5e-324, 1.0, 3 * tiny, -7 * tiny, 2.0 ** fmt.emin])
    b = np.array([0.0, 1e-321, 0.0, 2.0 ** -1070, tiny, 2 * tiny, 0.5 * 2.0 ** fmt.emin])
    a = D.round_down(a, fmt)
    b = D.round_down(b, fmt)
    for neg in (False, True):
        got = GK.add_grid(a, a, b, b, a.shape, fmt, neg=neg)
        assert got is not None
        for i in range(a.size):
            t = Fraction(float(a[i])) + (-1 if neg else 1) * Fraction(float(b[i]))
            d, u = D.exact_dir([t], fmt)
            assert (got[0][i], got[1][i]) == (d[0], u[0]), (fmt, neg, a[i], b[i])
    iv = scalars.get("interval:" + ("float64" if fmt is FM.binary64 else "binary32"))
    s = iv.sub(iv.make(a, a), iv.make(b, b))
    for i in range(a.size):
        t = Fraction(float(a[i])) - Fraction(float(b[i]))
        assert Fraction(float(s.lo[i])) <= t <= Fraction(float(s.hi[i]))
