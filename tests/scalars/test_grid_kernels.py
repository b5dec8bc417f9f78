"""The compiled interval kernels on grids coarser than float64 (scalars.kernels.grid) give
bit-for-bit the endpoints of the numpy paths they replace (directed.*_dir + round_down /
round_up; function_endpoints.func_dir_numpy) and the correctly rounded directed values
MPFR gives (gmpy2), on random and adversarial operands: exact grid values, ties of the
grid, zeros of both signs, overflow to +-inf, saturated tails, formats without
subnormals."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.scalars.kernels import directed as D
from scalarlab.scalars import formats as FM
from scalarlab.scalars.kernels import function_endpoints as FE
from scalarlab.scalars.kernels import grid as GK
from scalarlab.scalars.functions import FUNCTIONS

NOSUB = FM.Format(exp_bits=8, man_bits=7, subnormals=False, label="bf16-nosub")
GRIDS = [FM.binary32, FM.bfloat16, FM.binary16, FM.e5m2, FM.e4m3, NOSUB]


def _bits_equal(x, y):
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    both_nan = np.isnan(x) & np.isnan(y)
    return bool(np.all(both_nan | (x.view(np.int64) == y.view(np.int64))))


def _values_equal(x, y):
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    return bool(np.all((np.isnan(x) & np.isnan(y)) | (x == y)))


def _on_grid(rng, n, fmt, scale):
    v = rng.standard_normal(n) * scale
    return D.round_down(v, fmt)


def _args(rng, name, n):
    x = rng.standard_normal(n) * 4.0 ** rng.integers(-3, 4, n)
    if name == "log":
        x = np.abs(x) + 1e-300
    extra = [0.0, -0.0, 1.0, 2.0, 0.5, 88.72, 89.0, -103.0, -746.0, 710.0, 1e-30, -1e-30,
             20.0, -20.0, 40.0, -40.0, 1e300, -1e300, np.inf, -np.inf, np.nan, 5e-324]
    if name == "log":
        extra = [t for t in extra if not t < 0 and not np.isnan(t)] + [np.e, 1e-320]
    # arguments whose image lies on or next to a grid value: f^-1 of grid values
    return np.concatenate([x, np.array(extra)])


@pytest.mark.parametrize("name", sorted(GK.FUNC_CODES))
def test_function_endpoints_equal_numpy_path_and_mpfr(name):
    fn = FUNCTIONS[name]
    rng = np.random.default_rng(5)
    x = _args(rng, name, 3000)
    for fmt in GRIDS:
        got = FE.func_dir(fn, x, fmt)
        want = FE.func_dir_numpy(fn, x, fmt)
        assert _bits_equal(got[0], want[0]) and _bits_equal(got[1], want[1]), (name, fmt)
        for i in range(0, x.size, 41):          # MPFR oracle on a slice
            if np.isnan(x[i]):
                continue
            lo, hi = FE.mpfr_func_dir(fn, float(x[i]), fmt)
            assert got[0][i] == lo and got[1][i] == hi, (name, fmt, x[i])


def test_function_pair_rounds_each_side_once():
    fn = FUNCTIONS["tanh"]
    rng = np.random.default_rng(9)
    xl = rng.standard_normal(500)
    xh = xl + np.abs(rng.standard_normal(500))
    lo, hi = GK.func_pair(fn, xl, xh, FM.binary32,
                          lambda t: FE.mpfr_func_dir(fn, t, FM.binary32))
    assert _bits_equal(lo, FE.func_dir_numpy(fn, xl, FM.binary32)[0])
    assert _bits_equal(hi, FE.func_dir_numpy(fn, xh, FM.binary32)[1])


def _operands(rng, n, fmt):
    a = _on_grid(rng, n, fmt, 1.0) * 2.0 ** rng.integers(-6, 7, n)
    b = _on_grid(rng, n, fmt, 1.0) * 2.0 ** rng.integers(-6, 7, n)
    a = D.round_down(a, fmt)
    b = D.round_down(b, fmt)
    a[:10] = 0.0
    a[10:20] = -0.0
    b[20:30] = a[20:30]                          # exact cancellation in a - b
    b[30:40] = -a[30:40]
    big = min(fmt.max_finite, 2.0 ** 400)        # binary64: inside the EFTs' safe range
    a[40:45] = big
    b[40:45] = big                               # overflow of the grid: +inf upper end
    a[45:50] = -big
    b[45:50] = big * 0.75
    return a, b


def _exact_dir(q: Fraction, fmt):
    d, u = D.exact_dir([q], fmt)
    return float(np.asarray(d).reshape(-1)[0]), float(np.asarray(u).reshape(-1)[0])


@pytest.mark.parametrize("fmt", GRIDS + [FM.binary64], ids=lambda f: str(f))
def test_arithmetic_equals_generic_path_and_exact(fmt, monkeypatch):
    rng = np.random.default_rng(11)
    n = 4000
    a, b = _operands(rng, n, fmt)
    w1 = np.abs(_on_grid(rng, n, fmt, 1.0)) * 2.0 ** rng.integers(-8, 1, n)
    w2 = np.abs(_on_grid(rng, n, fmt, 1.0)) * 2.0 ** rng.integers(-8, 1, n)
    alo, ahi = D.round_down(a, fmt), D.round_up(a + w1, fmt)
    blo, bhi = D.round_down(b, fmt), D.round_up(b + w2, fmt)
    ahi = np.where(np.isinf(ahi), alo, ahi)      # finite operands (results may overflow)
    bhi = np.where(np.isinf(bhi), blo, bhi)
    sh = (n,)
    cases = {
        "add": (GK.add_grid(alo, ahi, blo, bhi, sh, fmt),
                (D.add_dir(alo, blo, fmt)[0], D.add_dir(ahi, bhi, fmt)[1])),
        "sub": (GK.add_grid(alo, ahi, blo, bhi, sh, fmt, neg=True),
                (D.sub_dir(alo, bhi, fmt)[0], D.sub_dir(ahi, blo, fmt)[1])),
    }
    ps = [D.mul_dir(x, y, fmt) for x in (alo, ahi) for y in (blo, bhi)]
    zero = [(x == 0) | (y == 0) for x in (alo, ahi) for y in (blo, bhi)]
    cases["mul"] = (GK.mul_grid(alo, ahi, blo, bhi, sh, fmt),
                    (np.min([np.where(z, 0.0, p[0]) for p, z in zip(ps, zero)], axis=0),
                     np.max([np.where(z, 0.0, p[1]) for p, z in zip(ps, zero)], axis=0)))
    for op, (got, want) in cases.items():
        assert got is not None, (op, fmt)
        # min/max of +0 and -0 picks either sign (numpy's reductions too): values compared
        eq = _bits_equal if op != "mul" else _values_equal
        assert eq(got[0], want[0]) and eq(got[1], want[1]), (op, fmt)
    # division by intervals away from 0, square roots of non-negative intervals
    plo = np.abs(blo) + fmt.min_normal * 4
    plo = D.round_up(plo, fmt)
    plo = np.minimum(plo, fmt.max_finite)
    phi = np.minimum(D.round_up(plo + w2, fmt), fmt.max_finite)
    sgn = rng.random(n) < 0.5
    dlo, dhi = np.where(sgn, plo, -phi), np.where(sgn, phi, -plo)
    qs = [D.div_dir(x, y, fmt) for x in (alo, ahi) for y in (dlo, dhi)]
    got = GK.div_grid(alo, ahi, dlo, dhi, sh, fmt)
    assert got is not None
    fin = np.isfinite(alo) & np.isfinite(ahi)
    want = (np.min([q[0] for q in qs], axis=0), np.max([q[1] for q in qs], axis=0))
    assert _values_equal(got[0][fin], want[0][fin]) and _values_equal(got[1][fin], want[1][fin])
    got_s = GK.sqrt_grid(plo, phi, fmt)
    assert got_s is not None
    assert _bits_equal(got_s[0], D.sqrt_dir(plo, fmt)[0])
    assert _bits_equal(got_s[1], D.sqrt_dir(phi, fmt)[1])
    for i in range(50, n, 173):                 # exact rational oracle on a slice
        x, y = Fraction(float(alo[i])), Fraction(float(blo[i]))
        assert _exact_dir(x + y, fmt)[0] == cases["add"][0][0][i]
        corners = [Fraction(float(u)) * Fraction(float(v)) for u in (alo[i], ahi[i])
                   for v in (blo[i], bhi[i])]
        assert min(_exact_dir(c, fmt)[0] for c in corners) == cases["mul"][0][0][i]
        assert max(_exact_dir(c, fmt)[1] for c in corners) == cases["mul"][0][1][i]
        q = Fraction(float(alo[i])) / Fraction(float(dhi[i] if alo[i] >= 0 else dlo[i]))
        if dlo[i] > 0:
            assert _exact_dir(q, fmt)[0] == got[0][i]
        r = Fraction(float(got_s[1][i]))
        assert r * r >= Fraction(float(phi[i]))
        below = Fraction(float(FM.next_down(got_s[1][i], fmt)))
        assert below < 0 or below * below < Fraction(float(phi[i]))     # tight


def test_sum_equals_generic_loop():
    rng = np.random.default_rng(3)
    fmt = FM.binary32
    lo = D.round_down(rng.standard_normal(40 * 300), fmt).reshape(40, 300)
    hi = D.round_up(lo + np.abs(rng.standard_normal(lo.shape)) * 1e-3, fmt)
    got = GK.sum_grid(lo, hi, fmt)
    assert got is not None
    wl, wh = lo[:, 0].copy(), hi[:, 0].copy()
    for k in range(1, 300):
        wl = D.add_dir(wl, lo[:, k], fmt)[0]
        wh = D.add_dir(wh, hi[:, k], fmt)[1]
    assert _bits_equal(got[0], wl) and _bits_equal(got[1], wh)


def test_context_falls_back_on_non_finite_and_straddling_operands():
    iv = scalars.get("interval:binary32")
    a = iv.make(np.array([1.0, -np.inf, 2.0]), np.array([2.0, 1.0, np.inf]))
    b = iv.make(np.array([-1.0, 1.0, 1.0]), np.array([1.0, 2.0, 3.0]))
    q = iv.div(a, b)                               # divisor [-1, 1] straddles 0
    assert np.isinf(q.lo[0]) and np.isinf(q.hi[0])
    s = iv.add(a, b)
    assert s.lo[1] == -np.inf and s.hi[2] == np.inf and s.lo[0] == 0.0 and s.hi[0] == 3.0
    m = iv.mul(a, b)
    assert m.lo[1] == -np.inf and m.hi[2] == np.inf


@pytest.mark.parametrize("fmt", GRIDS, ids=lambda f: str(f))
def test_round_pair_equals_round_down_and_up(fmt):
    rng = np.random.default_rng(17)
    x = rng.standard_normal(5000) * 2.0 ** rng.integers(-160, 160, 5000)
    x = np.concatenate([x, [0.0, -0.0, np.inf, -np.inf, np.nan, fmt.max_finite,
                            -fmt.max_finite, fmt.min_normal, -fmt.min_normal, 5e-324,
                            -5e-324, 1.7976931348623157e308]])
    lo, hi = GK.round_pair(x, x, fmt)
    assert _bits_equal(lo, D.round_down(x, fmt)) and _bits_equal(hi, D.round_up(x, fmt))
