"""``fp32-real`` against MPFR oracles.

* binary32 oracle: gmpy2 context(precision=24, emin=-148, emax=128, subnormalize=True).
  fp32-real must agree with it everywhere except exactly where binary32 overflows.
* correct rounding of sigmoid/softplus: mpmath at 300 bits, rounded once onto the
  fp32-real grid by an independent gmpy2 context.
"""
from fractions import Fraction

import gmpy2
import mpmath
import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.scalars.exact import mpf_parts
from scalarlab.scalars import ContextError

F = scalars.get("fp32-real")
B32 = gmpy2.context(precision=24, emin=-148, emax=128, subnormalize=True)
UNBOUNDED = gmpy2.context(precision=24, emin=-148, emax=(1 << 30) - 1, subnormalize=True)
MAX32 = gmpy2.mpfr(np.finfo(np.float32).max.item())


def random_float32(rng, n, lo_exp=-149, hi_exp=127):
    """float32 values with log-uniform magnitudes (subnormals and near-overflow included)."""
    sig = rng.uniform(1, 2, n) * np.where(rng.random(n) < 0.5, -1, 1)
    x = sig * 2.0 ** rng.integers(lo_exp, hi_exp + 1, n)
    return x.astype(np.float32).astype(np.float64)  # round to binary32, exactly widened


def oracle(ctx, fn, *cols):
    out = []
    with ctx:
        for args in zip(*cols):
            out.append(fn(*(gmpy2.mpfr(float(t)) for t in args)))
    return out


def check_against_binary32(got, want):
    """Equal wherever binary32 is finite; where binary32 overflowed, fp32-real is finite
    and beyond binary32's largest value with the same sign.  Returns the overflow count."""
    overflow = 0
    for g, w in zip(got.reshape(-1), want):
        assert gmpy2.is_finite(g)
        if gmpy2.is_infinite(w):
            overflow += 1
            assert abs(g) > MAX32 and (g > 0) == (w > 0), (g, w)
        else:
            assert g == w and gmpy2.is_signed(g) == gmpy2.is_signed(w), (g, w)
    return overflow


N = 3000


@pytest.mark.parametrize("op,fn", [("add", lambda a, b: a + b), ("sub", lambda a, b: a - b),
                                   ("mul", lambda a, b: a * b), ("div", lambda a, b: a / b)])
def test_binary_ops_match_binary32_except_overflow(op, fn):
    rng = np.random.default_rng(sum(map(ord, op)))
    a = random_float32(rng, N)
    b = random_float32(rng, N)
    if op in ("add", "sub"):  # make cancellations, tiny addends and overflowing sums common
        b[: N // 3] = a[: N // 3] * np.float32(1 + 2**-20)
        m = N // 2 - N // 3  # pairs near binary32's top binade: sums overflow there
        big = rng.uniform(1, 1.9, (2, m)) * 2.0**127 * np.where(rng.random(m) < 0.5, -1, 1)
        a[N // 3: N // 2], b[N // 3: N // 2] = big.astype(np.float32).astype(np.float64)
        if op == "sub":
            b[N // 3: N // 2] *= -1
    got = getattr(F, op)(F.convert(a), F.convert(b))
    overflow = check_against_binary32(got, oracle(B32, fn, a, b))
    assert overflow > 0  # the sample does reach binary32's overflow


def test_fma_sqrt_match_binary32():
    rng = np.random.default_rng(11)
    a, b, c = (random_float32(rng, N) for _ in range(3))
    p = a[: N // 2] * b[: N // 2]
    c[: N // 2] = np.where(np.abs(p) < 3e38, -np.clip(p, -3e38, 3e38).astype(np.float32),
                           c[: N // 2])  # cancellation: the hard cases
    got = F.fma(F.convert(a), F.convert(b), F.convert(c))
    overflow = check_against_binary32(got, oracle(B32, gmpy2.fma, a, b, c))
    assert overflow > 0
    x = np.abs(a)
    check_against_binary32(F.sqrt(F.convert(x)), oracle(B32, gmpy2.sqrt, x))


@pytest.mark.parametrize("op", ["exp", "log", "tanh", "sin", "cos", "erf"])
def test_functions_match_binary32(op):
    rng = np.random.default_rng(len(op))
    if op == "exp":
        x = np.concatenate([rng.uniform(-110, 100, N), random_float32(rng, 200, -149, 0)])
        x = x.astype(np.float32).astype(np.float64)
    elif op == "log":
        x = np.abs(random_float32(rng, N))
    else:
        x = random_float32(rng, N, -149, 10)
    got = getattr(F, op)(F.convert(x))
    overflow = check_against_binary32(got, oracle(B32, getattr(gmpy2, op), x))
    assert (overflow > 0) == (op == "exp")


def hi_prec_rounded(values_mpf):
    """Round 300-bit mpmath values once onto the fp32-real grid (independent oracle)."""
    out = []
    with UNBOUNDED:
        for v in values_mpf:
            man, exp = mpf_parts(v)
            if exp + man.bit_length() < -400:  # far below 2^-150: rounds to zero
                out.append(gmpy2.mpfr(0))
                continue
            q = gmpy2.mpq(man << exp) if exp >= 0 else gmpy2.mpq(man, 1 << -exp)
            out.append(gmpy2.mpfr(q))
    return out


@pytest.mark.parametrize("op", ["sigmoid", "softplus"])
def test_sigmoid_softplus_correctly_rounded(op):
    rng = np.random.default_rng(7 if op == "sigmoid" else 8)
    x = np.concatenate([rng.uniform(-120, 60, 1500), random_float32(rng, 500, -149, 3),
                        random_float32(rng, 100, 60, 127), [0.0, -0.0, 1.0, -1.0]])
    x = x.astype(np.float32).astype(np.float64)
    got = getattr(F, op)(F.convert(x))
    with mpmath.workprec(300):
        if op == "sigmoid":
            ref = [1 / (1 + mpmath.exp(-mpmath.mpf(t))) for t in x.tolist()]
        else:
            ref = [mpmath.log1p(mpmath.exp(mpmath.mpf(t))) if t <= 0 else
                   mpmath.mpf(t) + mpmath.log1p(mpmath.exp(-mpmath.mpf(t))) for t in x.tolist()]
    want = hi_prec_rounded(ref)
    assert [g == w for g, w in zip(got, want)] == [True] * len(want)
    # results on the subnormal grid occur (sigmoid(-100) ~ 3.7e-44)
    assert any(0 < abs(w) < 2.0**-126 for w in want)


def test_no_overflow_where_binary32_overflows():
    big = F.convert(np.float32(3e38).item())
    s = F.add(big, big)
    assert F.to_float64(s)[()] == 2 * np.float32(3e38).item()
    with B32:
        assert gmpy2.is_infinite(gmpy2.mpfr(np.float32(3e38).item()) * 2)
    e = F.exp(F.convert(1000.0))[()]
    with mpmath.workprec(100):
        assert abs(mpmath.mpf(gmpy2.mpq(e).numerator) / mpmath.mpf(gmpy2.mpq(e).denominator)
                   / mpmath.exp(1000) - 1) < 2.0**-24
    # far beyond binary32's range, yet a finite 24-bit value
    huge = F.mul(F.convert(1e300), F.convert(1e300))[()]
    assert gmpy2.is_finite(huge) and huge.precision == 24
    assert F.to_float64(F.convert(1e300))[()] != 1e300  # 1e300 rounded to 24 bits


def test_sequential_sum_and_matmul_round_each_step():
    t = 2.0**-24
    v = F.convert([1.0, t, t])  # 1 + 2^-24 is a tie -> 1, twice; pairwise would give 1+2^-23
    assert F.to_float64(F.sum(v))[()] == 1.0
    assert F.to_float64(F.sum(F.convert([t, t, 1.0])))[()] == 1.0 + 2.0**-23
    m = F.matmul(F.convert([[1.0, 1.0, 1.0]]), F.convert([[1.0], [t], [t]]))
    assert F.to_float64(m)[0, 0] == 1.0
    m2 = F.sum(F.convert([[1.0, t, t], [t, t, 1.0]]), axis=1)
    assert F.to_float64(m2).tolist() == [1.0, 1.0 + 2.0**-23]
    # a reversed-stride view is still summed left to right
    assert F.to_float64(F.sum(F.convert([1.0, t, t])[::-1]))[()] == 1.0 + 2.0**-23


def test_convert_rounds_once_including_subnormals():
    # 2^-150 + 2^-200: rounding to 24 bits first would give the tie 2^-150 -> 0; one
    # rounding onto the subnormal grid gives 2^-149.
    q = Fraction(1, 2**150) + Fraction(1, 2**200)
    assert F.to_float64(F.convert(q))[()] == 2.0**-149
    assert F.to_float64(F.convert("1e-46"))[()] == 0.0
    assert F.to_float64(F.convert([Fraction(1, 3)]))[0] == float(np.float32(1 / 3))
    assert F.to_float64(F.convert(np.array([0.1])))[0] == float(np.float32(0.1))


def test_errors_name_op_context_and_values():
    x = F.convert([1.0, 0.0])
    with pytest.raises(ContextError, match=r"fp32-real: log\(0\) at index \[1\]"):
        F.log(x)
    with pytest.raises(ContextError, match=r"fp32-real: div\(1, 0\) at index \[1\]"):
        F.div(F.convert([1.0, 1.0]), x)
    with pytest.raises(ContextError, match=r"sqrt\(-2\)"):
        F.sqrt(F.convert([-2.0]))
    with pytest.raises(ContextError, match="not a real number"):
        F.convert(np.array([np.inf]))
    with pytest.raises(ContextError, match=r"fp32-real: add: got an object ndarray of mpq"):
        F.add(x, scalars.get("rational").convert([1, 2]))
    with pytest.raises(ContextError, match="exponent range"):
        F.exp(F.convert(2.0**40))


def test_format_matches_float64_layout():
    v = F.convert([0.1, -2.0])
    assert F.format(v, 9) == "[0.100000001, -2.000000000]"
    assert F.format(F.convert(0.5), 3) == "0.500"


def test_every_result_is_a_24_bit_mpfr():
    x = F.convert([-1.5, 0.25, 3.0])
    y = F.convert([2.0, -0.5, 0.75])
    results = [F.neg(x), F.abs(x), F.add(x, y), F.sub(x, y), F.mul(x, y), F.div(x, y),
               F.fma(x, y, x), F.square(x), F.maximum(x, y), F.minimum(x, y), F.exp(x),
               F.tanh(x), F.sigmoid(x), F.softplus(x), F.sin(x), F.cos(x), F.erf(x),
               F.heaviside(x), F.sign(x), F.sum(x), F.matmul(x, y), F.amax(x),
               F.where(np.array([True, False, True]), x, y), F.zeros(2), F.ones(2),
               F.full((2,), "0.1"), F.sqrt(F.abs(x)), F.log(F.abs(x))]
    for r in results:
        assert isinstance(r, np.ndarray) and r.dtype == object
        assert all(isinstance(t, type(gmpy2.mpfr(0))) and t.precision == 24 for t in r.reshape(-1))
    assert F.to_float64(F.sign(x)).tolist() == [-1.0, 1.0, 1.0]
    assert F.to_float64(F.heaviside(x)).tolist() == [0.0, 1.0, 1.0]


@pytest.mark.slow
@pytest.mark.parametrize("op", ["add", "mul", "div", "fma", "exp", "sigmoid"])
def test_sweep_100k_against_binary32(op):
    """Exhaustive-style sweep (deselected by default): 10^5 cases per op."""
    rng = np.random.default_rng(100 + len(op))
    n = 100_000
    a, b, c = (random_float32(rng, n) for _ in range(3))
    if op == "exp":
        a = rng.uniform(-110, 100, n).astype(np.float32).astype(np.float64)
    if op == "sigmoid":
        x = rng.uniform(-110, 40, n).astype(np.float32).astype(np.float64)
        got = F.sigmoid(F.convert(x))
        with mpmath.workprec(300):
            ref = [1 / (1 + mpmath.exp(-mpmath.mpf(t))) for t in x.tolist()]
        assert [g == w for g, w in zip(got, hi_prec_rounded(ref))] == [True] * n
        return
    fn = {"add": lambda x, y: x + y, "mul": lambda x, y: x * y, "div": lambda x, y: x / y,
          "fma": gmpy2.fma, "exp": gmpy2.exp}[op]
    cols = {"add": (a, b), "mul": (a, b), "div": (a, b), "fma": (a, b, c), "exp": (a,)}[op]
    got = getattr(F, op)(*(F.convert(col) for col in cols))
    check_against_binary32(got, oracle(B32, fn, *cols))
