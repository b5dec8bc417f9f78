"""Interval kernels enclose the exact result (checked with exact rationals and mpmath) and
are tight: exact directed rounding for add, at most one binary32 ulp of slack elsewhere."""
from fractions import Fraction

import mpmath
import numpy as np
import pytest

import scalarlab.scalars.formats as F
from scalarlab.cuda_kernels import host

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
B32 = F.get("binary32")


def fr(v):
    return Fraction(float(v))


def rd(q):
    return F.round_fraction(q, B32, "down")


def ru(q):
    return F.round_fraction(q, B32, "up")


def mpf_fraction(v):
    sign, man, exp, _ = v._mpf_
    return (-1) ** sign * Fraction(int(man)) * Fraction(2) ** int(exp)


def down1(v):
    """The binary32 below v (np.nextafter in float32 is exact)."""
    return np.nextafter(np.float32(v), np.float32(-np.inf))


def up1(v):
    return np.nextafter(np.float32(v), np.float32(np.inf))


def endpoints(rng, shape, scale=1.0, width=0.1):
    lo = (rng.standard_normal(shape) * scale).astype(np.float32)
    hi = (lo + np.abs(rng.standard_normal(shape)) * width * scale).astype(np.float32)
    return lo, np.maximum(lo, hi)


def test_interval_add_is_the_exact_directed_rounding():
    rng = np.random.default_rng(0)
    alo, ahi = endpoints(rng, 40, 1e3)
    blo, bhi = endpoints(rng, 40, 1e-4)          # misaligned exponents: inexact sums
    # exact ties and huge exponent gaps too
    alo[:3] = [1.0, 2.0 ** 100, -1.0]
    ahi[:3] = alo[:3]
    blo[:3] = [2.0 ** -24, 2.0 ** -100, -(2.0 ** -30)]
    bhi[:3] = blo[:3]
    lo, hi = host.interval_binary("add", alo, ahi, blo, bhi)
    for i in range(40):
        assert lo[i] == rd(fr(alo[i]) + fr(blo[i])), i
        assert hi[i] == ru(fr(ahi[i]) + fr(bhi[i])), i
    assert lo[0] == 1.0 and hi[0] == np.nextafter(np.float32(1), np.float32(2))


def test_interval_add_infinities_and_nan_widen():
    inf = np.float32(np.inf)
    lo, hi = host.interval_binary("add", np.array([-inf, np.nan, 1.0], np.float32),
                                  np.array([1.0, 1.0, inf], np.float32),
                                  np.array([0.0, 0.0, 3.4e38], np.float32),
                                  np.array([inf, 0.0, 3.4e38], np.float32))
    assert lo[0] == -inf and lo[1] == -inf         # NaN endpoint: the whole line
    assert hi[0] == inf and hi[1] == 1.0 and hi[2] == inf
    assert lo[2] == rd(fr(np.float32(1.0)) + fr(np.float32(3.4e38)))


def test_interval_relu_exact():
    lo, hi = host.interval_unary("relu", np.array([-2.0, -1.0, 0.5, np.nan], np.float32),
                                 np.array([-1.0, 3.0, 0.75, 2.0], np.float32))
    assert lo.tolist() == [0.0, 0.0, 0.5, 0.0] and hi.tolist() == [0.0, 3.0, 0.75, 2.0]


def test_interval_tanh_encloses_and_is_tight():
    rng = np.random.default_rng(1)
    lo_in, hi_in = endpoints(rng, 30, 3.0)
    lo_in[:4] = [0.0, -1e-30, 20.0, -np.inf]
    hi_in[:4] = [0.0, 1e-30, np.inf, -20.0]
    lo, hi = host.interval_unary("tanh", lo_in, hi_in)
    mpmath.mp.prec = 200
    for i in range(30):
        tl = mpmath.tanh(mpmath.mpf(float(lo_in[i]))) if np.isfinite(lo_in[i]) else mpmath.mpf(-1)
        th = mpmath.tanh(mpmath.mpf(float(hi_in[i]))) if np.isfinite(hi_in[i]) else mpmath.mpf(1)
        ql, qh = mpf_fraction(tl), mpf_fraction(th)
        assert Fraction(float(lo[i])) <= ql and Fraction(float(hi[i])) >= qh, i
        # tight: at most one ulp beyond the exact directed rounding
        assert lo[i] >= down1(rd(ql)), i
        assert hi[i] <= up1(ru(qh)), i
        assert -1 <= lo[i] <= hi[i] <= 1
    assert lo[0] == 0.0 and hi[0] == 0.0


def _exact_ilinear(xl, xh, Wl, Wh, bl, bh):
    M, K = xl.shape
    N = Wl.shape[0]
    lo = np.empty((M, N), dtype=object)
    hi = np.empty((M, N), dtype=object)
    for m in range(M):
        for n in range(N):
            sl = fr(bl[n])
            sh = fr(bh[n])
            for k in range(K):
                ps = [fr(a) * fr(w) for a in (xl[m, k], xh[m, k]) for w in (Wl[n, k], Wh[n, k])]
                sl += min(ps)
                sh += max(ps)
            lo[m, n], hi[m, n] = sl, sh
    return lo, hi


@pytest.mark.parametrize("M, K, N", [(2, 5, 3), (5, 9, 6)])
def test_interval_linear_encloses_the_exact_range(M, K, N):
    rng = np.random.default_rng(M + K)
    xl, xh = endpoints(rng, (M, K))
    Wl, Wh = endpoints(rng, (N, K), 1.0, 1e-3)
    bl, bh = endpoints(rng, N, 0.1, 0.0)
    lo, hi = host.interval_linear(xl, xh, Wl.T, Wh.T, bl, bh)
    elo, ehi = _exact_ilinear(xl, xh, Wl, Wh, bl, bh)
    for m in range(M):
        for n in range(N):
            assert fr(lo[m, n]) <= elo[m, n] and fr(hi[m, n]) >= ehi[m, n]
            # float64 accumulation: at most one binary32 ulp looser than exact rounding
            assert lo[m, n] >= down1(rd(elo[m, n]))
            assert hi[m, n] <= up1(ru(ehi[m, n]))


def test_interval_linear_point_inputs_bracket_the_exact_dot_product():
    # degenerate intervals: the box is [RD(exact), RU(exact)] up to one ulp
    x = np.array([[0.1, 0.2, 0.3]], np.float32)
    W = np.array([[1.0, -1.0, 1.0 / 3]], np.float32)
    b = np.array([0.0], np.float32)
    lo, hi = host.interval_linear(x, x, W.T, W.T, b, b)
    exact = sum(fr(a) * fr(w) for a, w in zip(x[0], W[0]))
    assert fr(lo[0, 0]) <= exact <= fr(hi[0, 0])
    assert lo[0, 0] == rd(exact) and hi[0, 0] == ru(exact)


def test_interval_linear_nan_and_zero_times_inf():
    inf = np.float32(np.inf)
    xl = np.array([[-inf, np.nan]], np.float32)
    xh = np.array([[inf, 1.0]], np.float32)
    W = np.array([[0.0, 2.0]], np.float32)   # 0 * [-inf, inf] contributes 0
    b = np.array([1.0], np.float32)
    lo, hi = host.interval_linear(xl, xh, W.T, W.T, b, b)
    assert lo[0, 0] == -inf and hi[0, 0] == 3.0


def random_f32_bits(rng, n):
    """Finite binary32 numbers with uniformly random bit patterns (subnormals, extremes)."""
    bits = rng.integers(0, 2 ** 32, size=4 * n, dtype=np.uint64).astype(np.uint32)
    v = bits.view(np.float32)
    return v[np.isfinite(v)][:n]


def test_interval_add_exact_on_random_bit_patterns():
    rng = np.random.default_rng(11)
    a, b = random_f32_bits(rng, 150), random_f32_bits(rng, 150)
    # mix in nearby magnitudes so that sums cancel and round in every way
    b[:50] = (-a[:50] * np.float32(1.0000001)).astype(np.float32)
    lo, hi = host.interval_binary("add", a, a, b, b)
    for i in range(150):
        q = fr(a[i]) + fr(b[i])
        assert lo[i] == rd(q) and hi[i] == ru(q), (a[i], b[i], lo[i], hi[i])
