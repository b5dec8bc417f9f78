"""The MPFR oracle used by the formats tests, and tests that the oracle is what it claims.

MPFR (through gmpy2) rounds correctly in nearest-even, toward-zero, up, down and away;
ties-away and round-to-odd are derived from those (ties-away = nearest unless the value is a
midpoint, then away; odd = the exact value, else whichever of the truncation and the away
rounding has an odd last significand bit: adjacent format values alternate parity).
Overflow for formats MPFR cannot express (E4M3FN's partly used top binade, saturation) is
applied by the rule table below, written from IEEE 754 section 7.4, not from the code
under test.
"""
from __future__ import annotations

import math

import gmpy2
import numpy as np
import pytest

from scalarlab.scalars import formats as F

MPFR_ROUND = {"nearest_even": gmpy2.RoundToNearest, "toward_zero": gmpy2.RoundToZero,
              "up": gmpy2.RoundUp, "down": gmpy2.RoundDown, "away": gmpy2.RoundAwayZero}
DETERMINISTIC = ("nearest_even", "nearest_away", "toward_zero", "down", "up", "odd")


def mpfr_context(fmt, rnd: str):
    """gmpy2_context(fmt) with MPFR rounding ``rnd`` (one of MPFR_ROUND, incl. 'away')."""
    ctx = F.gmpy2_context(fmt, "nearest_even")
    ctx.round = MPFR_ROUND[rnd]
    return ctx


def mpfr_exact(values):
    """float64 values as exact 53-bit mpfr (outside any format context)."""
    with gmpy2.context(precision=53, emin=-1073, emax=1024, subnormalize=True):
        return [gmpy2.mpfr(float(v)) for v in values]


def mpfr_round_all(exact, fmt):
    """{rnd: float64 array} of every MPFR rounding of the exact mpfr/mpq values."""
    out = {}
    for rnd in MPFR_ROUND:
        ctx = mpfr_context(fmt, rnd)
        with ctx:
            out[rnd] = np.array(list(map(float, map(ctx.plus, exact))), dtype=np.float64)
    return out


def odd_significand(v: np.ndarray, fmt) -> np.ndarray:
    """True where the finite non-zero v has an odd last significand bit in ``fmt``."""
    a = np.abs(v)
    ok = np.isfinite(a) & (a > 0)
    safe = np.where(ok, a, 1.0)
    _, e = np.frexp(safe)
    qe = np.maximum(e - 1, fmt.emin) - fmt.man_bits
    k = np.ldexp(safe, (-qe).astype(np.int32))
    return ok & (np.mod(k, 2.0) == 1.0)


def overflow_value(neg: np.ndarray, fmt, mode: str) -> np.ndarray:
    """IEEE 754 7.4 overflow results, with NaN for 'infinity' in formats without it and
    max_finite for saturating formats."""
    mx = fmt.max_finite
    big = mx if fmt.saturate else (math.inf if fmt.has_inf else math.nan)
    table = {"nearest_even": (big, big), "nearest_away": (big, big), "stochastic": (big, big),
             "toward_zero": (mx, mx), "odd": (mx, mx), "up": (big, mx), "down": (mx, big)}
    pos, negv = table[mode]
    return np.where(neg, -negv, pos)


def oracle(rounded: dict, fmt, mode: str, tie: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """The correctly rounded result in ``mode`` from the MPFR roundings of finite values.

    ``tie`` marks exact midpoints, ``neg`` negative exact values.
    """
    rz, ra = rounded["toward_zero"], rounded["away"]
    if mode == "nearest_away":
        r = np.where(tie, ra, rounded["nearest_even"])
    elif mode == "odd":
        r = np.where(rz == ra, rz, np.where(odd_significand(rz, fmt), rz, ra))
    else:
        r = rounded[mode].copy()
    over = ~np.isnan(r) & (np.abs(r) > fmt.max_finite)
    return np.where(over, overflow_value(neg, fmt, mode), r)


def float_ties(x: np.ndarray, rounded: dict) -> np.ndarray:
    """Exact midpoints among float64 inputs x (rz, ra and their mean are exact here)."""
    rz, ra = rounded["toward_zero"], rounded["away"]
    with np.errstate(invalid="ignore", over="ignore"):
        # Halve first for large values (the sum could overflow), last for tiny ones.
        mid = np.where(np.abs(rz) > 1, rz / 2 + ra / 2, (rz + ra) / 2)
        return np.isfinite(ra) & (rz != ra) & (x == mid)


def same(a, b) -> np.ndarray:
    """Elementwise identity of float64 values: equal with the same sign of zero, or both NaN."""
    a, b = np.asarray(a), np.asarray(b)
    return (np.isnan(a) & np.isnan(b)) | ((a == b) & (np.signbit(a) == np.signbit(b)))


def assert_same(got, want, inputs, what: str) -> None:
    ok = same(got, want)
    if not ok.all():
        bad = np.nonzero(~ok.reshape(-1))[0][:5]
        flat = [np.asarray(v, dtype=object).reshape(-1) for v in inputs]
        rows = [f"inputs={[str(v[i]) for v in flat]} got={got.reshape(-1)[i]!r} "
                f"want={want.reshape(-1)[i]!r}" for i in bad]
        raise AssertionError(f"{what}: {int((~ok).sum())} mismatches, e.g.\n" + "\n".join(rows))


def check_against_mpfr(x: np.ndarray, fmt, modes=DETERMINISTIC) -> None:
    """round_to_format(x) == the MPFR oracle for finite float64 x in every mode."""
    x = np.asarray(x, dtype=np.float64)
    rounded = mpfr_round_all(mpfr_exact(x), fmt)
    tie = float_ties(x, rounded)
    neg = np.signbit(x)
    for mode in modes:
        want = oracle(rounded, fmt, mode, tie, neg)
        assert_same(F.round_to_format(x, fmt, mode), want, [x], f"{fmt.name} {mode}")


# ---------------------------------------------------------------------- oracle self-tests
@pytest.mark.parametrize("fmt,prec,emin,emax", [
    (F.binary32, 24, -148, 128), (F.binary64, 53, -1073, 1024), (F.binary16, 11, -23, 16),
    (F.bfloat16, 8, -132, 128), (F.e5m2, 3, -15, 16), (F.e4m3, 4, -8, 9)])
def test_gmpy2_context_parameters(fmt, prec, emin, emax):
    ctx = F.gmpy2_context(fmt, "toward_zero")
    assert (ctx.precision, ctx.emin, ctx.emax) == (prec, emin, emax)
    assert ctx.subnormalize and ctx.round == gmpy2.RoundToZero


@pytest.mark.parametrize("fmt,dtype", [(F.binary16, np.float16), (F.binary32, np.float32)])
def test_gmpy2_context_reproduces_numpy_format_extremes(fmt, dtype):
    """The derived emin/emax reproduce numpy's own binary16/binary32 extremes."""
    fi = np.finfo(dtype)
    ctx = F.gmpy2_context(fmt)
    with ctx:
        tiny = gmpy2.next_above(gmpy2.mpfr(0))
        big = gmpy2.next_below(gmpy2.mpfr("inf"))
        assert float(tiny) == float(fi.smallest_subnormal)
        assert float(big) == float(fi.max)
        assert gmpy2.is_infinite(ctx.plus(gmpy2.mpfr(float(fi.max)) * 2))
        assert float(ctx.plus(gmpy2.mpfr(float(fi.smallest_subnormal)) * 0.75)) == \
            float(fi.smallest_subnormal)


def test_gmpy2_context_bfloat16_extremes():
    ctx = F.gmpy2_context(F.bfloat16)
    with ctx:
        assert float(gmpy2.next_above(gmpy2.mpfr(0))) == 2.0 ** -133
        assert float(gmpy2.next_below(gmpy2.mpfr("inf"))) == (2 - 2.0 ** -7) * 2.0 ** 127


def test_gmpy2_context_rejects_modes_mpfr_lacks():
    for mode in ("nearest_away", "odd", "stochastic"):
        with pytest.raises(F.FormatError, match="MPFR has no"):
            F.gmpy2_context(F.binary32, mode)


def test_oracle_odd_and_ties_on_hand_cases():
    """The derived modes on binary16 cases worked out by hand."""
    one = 1.0
    u = 2.0 ** -10
    x = np.array([one + u / 2, one + 3 * u / 2, one + u / 4, -(one + u / 2), 2048 + 1.0])
    rounded = mpfr_round_all(mpfr_exact(x), F.binary16)
    tie = float_ties(x, rounded)
    assert tie.tolist() == [True, True, False, True, True]
    neg = np.signbit(x)
    assert oracle(rounded, F.binary16, "nearest_away", tie, neg).tolist() == \
        [one + u, one + 2 * u, one, -(one + u), 2050.0]
    assert oracle(rounded, F.binary16, "nearest_even", tie, neg).tolist() == \
        [one, one + 2 * u, one, -one, 2048.0]
    assert oracle(rounded, F.binary16, "odd", tie, neg).tolist() == \
        [one + u, one + u, one + u, -(one + u), 2050.0]
