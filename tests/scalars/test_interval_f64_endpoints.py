"""interval:float64 function endpoints are exactly directed: [RD f(x), RU f(x)] from
gmpy2 (MPFR) in a binary64 context, on random and hard arguments -- 0 ulps of excess over
the tightest enclosure -- and the long double fast path's error bound holds."""
from __future__ import annotations

import math

import gmpy2
import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.scalars.kernels import function_endpoints as FE
from scalarlab.scalars.functions import FUNCTIONS

IV = scalars.get("interval:float64")


def _rd_ru(name, x):
    out = []
    for mode in (gmpy2.RoundDown, gmpy2.RoundUp):
        if name == "nearbyint":     # MPFR's rint rounds to an integer in the context's
            mode = gmpy2.RoundToNearest     # mode; nearbyint's integer is exact, halves even
        with gmpy2.context(precision=53, emin=-1073, emax=1024, subnormalize=True, round=mode):
            fn = FUNCTIONS[name]
            if fn.mpfr is not None:
                v = getattr(gmpy2, fn.mpfr)(gmpy2.mpfr(x, 53))
            else:      # compositions: MPFR bounds at 400 bits, then one directed rounding
                L, U = fn.bounds(gmpy2.mpfr(x, 53), 400)
                v = +(L if mode == gmpy2.RoundDown else U)
            out.append(float(v))
    return out


def _args(name, n, seed):
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.normal(0, 3, n), rng.normal(0, 40, n // 4),
                        np.ldexp(rng.random(n // 4), rng.integers(-80, 20, n // 4))])
    if name in ("sin", "cos", "atan", "tanh"):
        x = np.concatenate([x, np.ldexp(1 + rng.random(n // 4), rng.integers(30, 1000, n // 4)),
                            np.array([math.pi * k for k in (1, 2, 3, 10, 1000, 355, 103993)]),
                            np.ldexp(1 + rng.random(n // 4), rng.integers(20, 40, n // 4)),
                            np.array([math.pi / 2 * k for k in (1, 3, 5, 7)])])
    if name == "log":
        x = np.abs(x) + 2.0 ** -1070
    fn = FUNCTIONS[name]
    dom = fn.interval_domain if fn.interval_domain is not None else fn.domain
    if dom is not None and not fn.negative_branches:   # defined on part of the line
        x = np.concatenate([x, dom.lo + np.abs(x)]) if math.isfinite(dom.lo) else x
        x = x[~dom.outside(x)]
    if fn.negative_branches:                  # point intervals away from the Gamma poles
        x = x[(x > 0) | (np.abs(x - np.round(x)) > 1e-3)]
    return x


HARD = {   # exact values, saturation, under/overflow, subnormal results, near-ties
    "exp": [0.0, -0.0, 1e-300, -1e-300, 709.78, 709.8, -745.1, -746.0, -708.4, 1e-17],
    "log": [1.0, 2.0 ** -1074, 1.0 + 2.0 ** -52, 1.0 - 2.0 ** -53, 1e308],
    "tanh": [0.0, 1e-300, 19.0, 20.0, 25.0, 400.0, -25.0, 2.0 ** -30],
    "sigmoid": [0.0, 36.0, 40.0, -700.0, -745.0, -800.0, 1e-20],
    "softplus": [0.0, -700.0, -750.0, 40.0, 800.0, 1e-20],
    "sin": [0.0, 1e-300, 2.0 ** -30, 1.0, 3.0, 1e22, 2.0 ** 1023, 6381956970095103 * 2.0 ** 797],
    "cos": [0.0, 1e-300, 2.0 ** -30, 1.5707963267948966, 1e22, 2.0 ** 1023],
    "atan": [0.0, 1e-300, 1e300, -1e300, 2.0 ** 60, 1.0],
    "erf": [0.0, 1e-300, 6.0, 5.9, -27.0, 0.5],
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_point_endpoints_are_exactly_directed(name):
    """0 ulps excess: the endpoints ARE RD and RU of the exact value (MPFR)."""
    n = 60 if name == "erf" else 400
    x = np.concatenate([_args(name, n, sum(map(ord, name))), HARD.get(name, [])])
    got = getattr(IV, name)(IV.make(x, x))
    for k, t in enumerate(x):
        d, u = _rd_ru(name, float(t))
        assert (got.lo[k], got.hi[k]) == (d, u), (name, float(t), got.lo[k], got.hi[k], d, u)


def test_wide_intervals_of_monotone_functions_are_tightest():
    """[a, b] of a monotone function: exactly [RD f(a), RU f(b)] (the tightest enclosure)."""
    rng = np.random.default_rng(2)
    a = rng.normal(0, 2, 100)
    b = a + rng.random(100)
    for name in ("exp", "tanh", "sigmoid", "atan", "softplus"):
        got = getattr(IV, name)(IV.make(a, b))
        for k in range(100):
            assert got.lo[k] == _rd_ru(name, a[k])[0] and got.hi[k] == _rd_ru(name, b[k])[1]


def test_long_double_error_bound_holds():
    """The fast path trusts the long double value to LD_REL relative: measured margin."""
    if not FE.LONG_DOUBLE_OK:
        pytest.skip("long double is not x87 extended precision on this platform")
    worst = 0.0
    for name in sorted(FE._LD_FUNCS):
        fn = FUNCTIONS[name]
        x = _args(name, 300, 11)
        with np.errstate(all="ignore"):
            v = np.asarray(fn.f64(x.astype(np.longdouble)))
        for t, w in zip(x, v):
            if not np.isfinite(w) or w == 0:
                continue
            with gmpy2.context(precision=300):
                L, _ = fn.bounds(gmpy2.mpfr(float(t), 53), 300)
                exact_w = gmpy2.mpfr(np.format_float_scientific(w, unique=True))
                if L == 0:
                    continue
                worst = max(worst, float(abs((exact_w - L) / L)))
    assert worst < FE.LD_REL / 2, worst


def test_fast_path_settles_most_arguments(monkeypatch):
    """Cost: MPFR runs only for the arguments the long double value cannot settle."""
    if not FE.LONG_DOUBLE_OK:
        pytest.skip("long double is not x87 extended precision on this platform")
    calls = []
    real = FE.mpfr_func_dir
    monkeypatch.setattr(FE, "mpfr_func_dir", lambda *a: calls.append(1) or real(*a))
    x = np.random.default_rng(4).normal(0, 3, 20000)
    FE.func_dir_f64(FUNCTIONS["tanh"], x)
    assert len(calls) < 0.04 * x.size
