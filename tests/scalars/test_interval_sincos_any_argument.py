"""sin/cos interval endpoints at any argument (MPFR argument reduction beyond 2^40).

Point intervals are correctly rounded down/up in every binary base (gmpy2 in the format's
context is the oracle); narrow intervals at huge arguments get the exact range (an
extremum inside, decided here by mpmath at 3000 bits, gives the value 1 / -1; otherwise
the endpoint values) rounded outward."""
from __future__ import annotations

import math

import gmpy2
import mpmath
import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.scalars import formats
from scalarlab.scalars.kernels.function_endpoints import extremum_inside

BASES = ["binary32", "bfloat16", "binary(11,52)"]


def _huge_points(fmt, n, seed):
    """Representable values of the format with |x| from 2^40 up to near its max."""
    rng = np.random.default_rng(seed)
    top = min(1000, formats.get(fmt).emax if hasattr(formats.get(fmt), "emax") else 127)
    e = rng.integers(40, top, n)
    x = np.ldexp(1 + rng.random(n), e) * np.where(rng.random(n) < 0.5, -1, 1)
    ctx = scalars.get(fmt)
    return np.asarray(ctx.convert(x), dtype=np.float64)


def _oracle(fmt, fname, x, mode):
    c = formats.gmpy2_context(formats.get(fmt))
    c.round = gmpy2.RoundDown if mode == "down" else gmpy2.RoundUp
    with c:
        return float(getattr(gmpy2, fname)(gmpy2.mpfr(float(x), 53)))


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("fname", ["sin", "cos"])
def test_point_intervals_at_huge_arguments_are_correctly_rounded(base, fname):
    x = _huge_points(base, 40, sum(map(ord, base + fname)))
    ictx = scalars.get(f"interval:{base}")
    got = getattr(ictx, fname)(ictx.make(x, x))
    for k, t in enumerate(x):
        assert got.lo[k] == _oracle(base, fname, t, "down"), (base, fname, t)
        assert got.hi[k] == _oracle(base, fname, t, "up"), (base, fname, t)


def _exact_range(fname, a, b):
    with mpmath.workprec(3000):
        A, B = mpmath.mpf(a), mpmath.mpf(b)
        f = getattr(mpmath, fname)
        vals = [f(A), f(B)]
        phases = (mpmath.pi / 2, -mpmath.pi / 2) if fname == "sin" else (0, mpmath.pi)
        inside = [mpmath.ceil((A - p) / (2 * mpmath.pi)) * 2 * mpmath.pi + p <= B for p in phases]
        hi = mpmath.mpf(1) if inside[0] else max(vals)
        lo = mpmath.mpf(-1) if inside[1] else min(vals)
        return lo, hi, inside


@pytest.mark.parametrize("fname", ["sin", "cos"])
def test_narrow_intervals_at_huge_float64_arguments(fname):
    """float64 / binary(11,52) bases: [x, x + m ulps] of width < 6 at 2^40..2^54."""
    rng = np.random.default_rng(7)
    n_inside = 0
    for base in ("float64", "binary(11,52)"):
        ictx = scalars.get(f"interval:{base}")
        e = rng.integers(40, 54, 30)
        a = np.ldexp(1 + rng.random(30), e)
        ulp = np.spacing(a)
        b = a + np.floor(rng.random(30) * (5.5 / ulp)) * ulp
        got = getattr(ictx, fname)(ictx.make(a, b))
        for k in range(30):
            lo, hi, inside = _exact_range(fname, a[k], b[k])
            n_inside += inside[0] or inside[1]
            assert mpmath.mpf(got.lo[k]) <= lo and hi <= mpmath.mpf(got.hi[k])
            if base != "float64":      # exactly directed: the tightest enclosure
                assert got.lo[k] == _round(lo, "down") and got.hi[k] == _round(hi, "up")
            else:
                assert got.hi[k] - got.lo[k] <= float(hi - lo) + 16 * 2.0 ** -53
            assert (got.hi[k] == 1.0) == bool(inside[0] or hi == 1)
    assert n_inside > 10


def _round(v, mode):
    with gmpy2.context(precision=53, emin=-1073, emax=1024, subnormalize=True,
                       round=gmpy2.RoundDown if mode == "down" else gmpy2.RoundUp):
        return float(gmpy2.mpfr(str(mpmath.nstr(v, 900, strip_zeros=False)), 3000) * 1)


def test_extremum_inside_against_mpmath():
    rng = np.random.default_rng(3)
    a = np.ldexp(1 + rng.random(200), rng.integers(0, 1000, 200)) * np.where(
        rng.random(200) < 0.5, -1, 1)
    b = a + np.spacing(a) * np.floor(rng.random(200) * np.maximum(1, 3.0 / np.spacing(a)))
    for ph, fname, which in ((math.pi / 2, "sin", 0), (0.0, "cos", 0), (math.pi, "cos", 1)):
        got = extremum_inside(ph, a, b)
        for k in range(200):
            assert got[k] == _exact_range(fname, a[k], b[k])[2][which]
    with pytest.raises(ValueError, match="multiple of pi/2"):
        extremum_inside(1.0, a, b)
