"""round_to_format against MPFR: midpoints, random sweeps, special values, flags."""
from __future__ import annotations

import math

import numpy as np
import pytest

from scalarlab.scalars import formats as F
from test_formats_oracle import (DETERMINISTIC, assert_same, check_against_mpfr, same)


def mid(a, b):
    """Exact midpoint of float64 values (halving first where the sum could overflow)."""
    with np.errstate(over="ignore"):
        return np.where(np.abs(a) > 1, a / 2 + b / 2, (a + b) / 2)


def all_finite_values(fmt) -> np.ndarray:
    """Every finite value of a format up to 16 bits, ascending (decode is tested in
    test_formats_spec against numpy/ml-dtype views)."""
    v = F.decode(np.arange(1 << fmt.total_bits), fmt)
    v = v[np.isfinite(v)]
    return np.unique(v)  # -0.0 and 0.0 collapse; fine for neighbour pairs


def midpoint_cases(fmt) -> np.ndarray:
    """All midpoints between neighbouring values (plus beyond max_finite) and the float64
    neighbours of each midpoint, plus the values themselves and their neighbours."""
    v = all_finite_values(fmt)
    mx = fmt.max_finite
    # Past max_finite the next step is the top-binade quantum (the unbounded-exponent
    # neighbour); its midpoint decides overflow in nearest modes.
    beyond = mx + F.ulp(mx, fmt)[()] if mx < 2.0 ** 1023 else 2.0 ** 1023 * 2 - 2.0 ** 970
    v = np.concatenate([[-beyond], v, [beyond]])
    mids = mid(v[:-1], v[1:])
    mids = mids[np.isfinite(mids)]
    pts = np.concatenate([mids, v])
    return np.concatenate([pts, np.nextafter(pts, np.inf), np.nextafter(pts, -np.inf)])


# every binary16 midpoint is 1.3 s CPU: -m slow; the default runs the 8-bit formats in
# full and binary16's midpoints next to sampled codes (below)
@pytest.mark.parametrize("fmt", [F.e4m3, F.e5m2,
                                 pytest.param(F.binary16, marks=pytest.mark.slow)],
                         ids=lambda f: f.name)
def test_all_midpoints_and_their_neighbours(fmt):
    check_against_mpfr(midpoint_cases(fmt), fmt)


# -m slow adds tf32 and binary(11,3) (wide exponent, narrow mantissa), whose paths the
# default's bfloat16 and binary(3,2) take
@pytest.mark.parametrize("fmt", [F.bfloat16, pytest.param(F.tf32, marks=pytest.mark.slow),
                                 F.Format(3, 2),
                                 pytest.param(F.Format(11, 3), marks=pytest.mark.slow),
                                 F.binary16], ids=lambda f: f.name)
def test_midpoints_sampled_codes(fmt):
    """Midpoints next to 20,000 random codes (and the extremes) of further formats."""
    rng = np.random.default_rng(5)
    v = F.decode(rng.integers(0, 1 << fmt.total_bits, 20000), fmt)
    v = np.concatenate([v[np.isfinite(v)], [0.0, fmt.min_subnormal, fmt.min_normal,
                                            fmt.max_finite, -fmt.max_finite]])
    up = F.next_up(v, fmt)
    v, up = v[np.isfinite(up)], up[np.isfinite(up)]
    mids = mid(v, up)
    pts = np.concatenate([mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf), v])
    check_against_mpfr(pts, fmt)


def random_cases(fmt, n: int, seed: int) -> np.ndarray:
    """Random float64 inputs over the whole range of a format: random bit patterns with
    exponents from below min_subnormal to above max_finite, format values, exact ties,
    near ties (one float64 ulp off), and overflow-threshold values."""
    rng = np.random.default_rng(seed)
    k = n // 5
    lo, hi = fmt.emin - fmt.man_bits - 3, fmt.emax + 3
    e = np.clip(rng.integers(lo, hi, k), -1022, 1023)
    frac = rng.integers(0, 1 << 52, k, dtype=np.int64)
    bits = ((e + 1023) << 52) | frac
    wide = bits.view(np.float64) * rng.choice([-1.0, 1.0], k)
    codes = rng.integers(0, 1 << fmt.total_bits, k)
    vals = F.decode(codes, fmt)
    vals = vals[np.isfinite(vals)]
    nxt = F.next_up(vals, fmt)
    ok = np.isfinite(nxt)
    ties = mid(vals[ok], nxt[ok])
    near = np.concatenate([np.nextafter(ties, np.inf), np.nextafter(ties, -np.inf)])
    mx = fmt.max_finite
    with np.errstate(over="ignore"):
        thresh = mx + F.ulp(mx, fmt) * rng.uniform(0, 1.5, k)
    thresh = thresh * rng.choice([-1.0, 1.0], k)
    sub = rng.uniform(-fmt.min_normal, fmt.min_normal, k)
    f64sub = rng.integers(1, 1 << 52, k // 10, dtype=np.int64).view(np.float64)
    out = np.concatenate([wide, vals, ties, near, thresh, sub, f64sub])
    out = out[np.isfinite(out)]
    return rng.permutation(out)[:n] if out.size > n else out


@pytest.mark.parametrize("fmt", [F.binary16, F.e4m3] + [
    pytest.param(f, marks=pytest.mark.slow) for f in (F.bfloat16, F.binary32, F.tf32, F.e5m2)],
    ids=lambda f: f.name)
def test_random_values_every_mode(fmt):
    check_against_mpfr(random_cases(fmt, 100_000, seed=fmt.total_bits), fmt)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", [F.binary16, F.bfloat16, F.binary32, F.tf32],
                         ids=lambda f: f.name)
def test_random_values_every_mode_large(fmt):
    for seed in range(5):
        check_against_mpfr(random_cases(fmt, 400_000, seed=100 + seed), fmt)


CUSTOM = [F.Format(5, 10, subnormals=False), F.Format(8, 7, subnormals=False),
          F.Format(4, 3, has_inf=False, nan_encoding="fn", saturate=True),
          F.Format(5, 2, saturate=True), F.Format(5, 2, has_inf=False),
          F.Format(4, 3, subnormals=False, has_inf=False, nan_encoding="fn"),
          F.Format(11, 20), F.Format(11, 51), F.Format(2, 1), F.Format(10, 40),
          F.Format(8, 52), F.Format(5, 52, subnormals=False)]


@pytest.mark.parametrize("fmt", CUSTOM, ids=lambda f: f.name)
def test_custom_formats_against_mpfr(fmt):
    check_against_mpfr(random_cases(fmt, 20_000, seed=7), fmt)
    if fmt.total_bits <= 8:
        check_against_mpfr(midpoint_cases(fmt), fmt)


def test_binary64_is_identity_in_every_mode():
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.standard_normal(1000) * 10.0 ** rng.integers(-300, 300, 1000),
                        [5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
                         -0.0, 0.0, np.inf, -np.inf]])
    for mode in F.MODES:
        assert_same(F.round_to_format(x, F.binary64, mode, rng=1), x, [x], mode)
    assert np.isnan(F.round_to_format(np.nan, F.binary64, "odd"))


@pytest.mark.parametrize("fmt", [F.binary16, F.binary32, F.e5m2], ids=lambda f: f.name)
def test_infinities_nan_and_signed_zero(fmt):
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, -1e-300, 1e-300])
    for mode in DETERMINISTIC + ("stochastic",):
        r = F.round_to_format(x, fmt, mode, rng=0)
        assert r[0] == np.inf and r[1] == -np.inf and np.isnan(r[2])
        assert same(r[3:5], [0.0, -0.0]).all()
        # Tiny values: zero of the right sign, or min_subnormal away from zero.
        tiny = {"up": [-0.0, fmt.min_subnormal], "down": [-fmt.min_subnormal, 0.0],
                "odd": [-fmt.min_subnormal, fmt.min_subnormal]}.get(mode, [-0.0, 0.0])
        if mode != "stochastic":
            assert same(r[5:], tiny).all(), (mode, r[5:])


def test_e4m3fn_has_no_infinity():
    f = F.e4m3
    assert (f.max_finite, f.emax, f.emin, f.bias, f.min_subnormal) == (448.0, 8, -6, 7, 2.0 ** -9)
    x = np.array([448.0, 460.0, 464.0, 464.5, 479.0, 480.0, 1e6, np.inf, -np.inf, -470.0])
    ne = F.round_to_format(x, f)
    assert same(ne, [448, 448, 448, np.nan, np.nan, np.nan, np.nan, np.nan, np.nan,
                     np.nan]).all()
    tz = F.round_to_format(x, f, "toward_zero")
    assert same(tz, [448] * 7 + [np.nan, np.nan, -448]).all()
    up = F.round_to_format(x, f, "up")
    assert same(up, [448] + [np.nan] * 8 + [-448]).all()
    down = F.round_to_format(x, f, "down")
    assert same(down, [448] * 7 + [np.nan, np.nan, np.nan]).all()
    sat = F.Format(4, 3, has_inf=False, nan_encoding="fn", saturate=True)
    assert same(F.round_to_format(x, sat), [448] * 6 + [448, 448, -448, -448]).all()


def test_e5m2_overflow_rules():
    f = F.e5m2
    assert f.max_finite == 57344.0
    x = np.array([57344.0, 61439.0, 61440.0, 1e9, -1e9])
    assert same(F.round_to_format(x, f), [57344, 57344, np.inf, np.inf, -np.inf]).all()
    assert same(F.round_to_format(x, f, "nearest_away"),
                [57344, 57344, np.inf, np.inf, -np.inf]).all()
    assert same(F.round_to_format(x, f, "toward_zero"), [57344] * 4 + [-57344]).all()
    assert same(F.round_to_format(x, f, "up"), [57344, np.inf, np.inf, np.inf, -57344]).all()
    assert same(F.round_to_format(x, f, "down"), [57344] * 4 + [-np.inf]).all()
    assert same(F.round_to_format(x, f, "odd"), [57344] * 4 + [-57344]).all()


def test_subnormals_false_rounds_onto_zero_or_min_normal():
    f = F.Format(5, 10, subnormals=False)
    mn = f.min_normal
    x = np.array([mn / 2, mn / 2 * (1 + 2 ** -40), mn * 0.75, -mn * 0.25, mn * (1 - 2 ** -20)])
    assert same(F.round_to_format(x, f), [0, mn, mn, -0.0, mn]).all()
    assert same(F.round_to_format(x, f, "nearest_away"), [mn, mn, mn, -0.0, mn]).all()
    assert same(F.round_to_format(x, f, "toward_zero"), [0, 0, 0, -0.0, 0]).all()
    assert same(F.round_to_format(x, f, "up"), [mn, mn, mn, -0.0, mn]).all()
    assert same(F.round_to_format(x, f, "odd"), [mn, mn, mn, -mn, mn]).all()
    assert f.min_subnormal == mn


def test_matches_numpy_casts_nearest_even():
    rng = np.random.default_rng(11)
    x = rng.standard_normal(200_000) * 10.0 ** rng.integers(-45, 40, 200_000)
    with np.errstate(over="ignore"):
        want32 = x.astype(np.float32).astype(np.float64)
        want16 = x.astype(np.float16).astype(np.float64)
    assert_same(F.round_to_format(x, F.binary32), want32, [x], "binary32 vs numpy")
    assert_same(F.round_to_format(x, F.binary16), want16, [x], "binary16 vs numpy")


def test_shapes_dtypes_and_errors():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7
    r = F.round_to_format(x, "bfloat16")
    assert r.shape == (2, 3, 4) and r.dtype == np.float64
    assert F.round_to_format(3.0, "e4m3").shape == ()
    xt = np.linspace(-3, 3, 30).reshape(5, 6).T  # non-contiguous
    assert_same(F.round_to_format(xt, F.binary16), xt.astype(np.float16).astype(float),
                [xt], "strided")
    assert same(F.round_to_format(np.array([1, 3, 17]), "e5m2"), [1, 3, 16]).all()
    with pytest.raises(F.FormatError, match="unknown rounding mode 'nearest'.*nearest_even"):
        F.round_to_format(x, "binary16", "nearest")
    with pytest.raises(F.FormatError, match="unknown format 'binary17'.*bfloat16"):
        F.round_to_format(x, "binary17")
    with pytest.raises(F.ContextError, match="complex128"):
        F.round_to_format(np.array([1j]), "binary16")
    with pytest.raises(F.ContextError, match="2\\^53"):
        F.round_to_format(np.array([2 ** 60 + 1]), "binary32")
    with pytest.raises(F.FormatError, match="rng must be"):
        F.round_to_format(x, "binary16", "stochastic", rng="seed")
