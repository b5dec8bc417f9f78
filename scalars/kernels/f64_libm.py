"""Numba-compiled elementwise helpers of the float64 context (libm functions numpy lacks,
one-pass heaviside and relu-derivative product)."""
from __future__ import annotations

import math

import numba

# One ufunc per libm function (the twins below): numba.vectorize compiles a function, and a
# function handed in as an argument would be called un-inlined.

@numba.vectorize(["float64(float64)"], cache=True)
def erf_f64(x):
    return math.erf(x)


@numba.vectorize(["float64(float64)"], cache=True)
def erfc_f64(x):
    return math.erfc(x)


@numba.vectorize(["float64(float64)"], cache=True)
def gamma_f64(x):
    return math.gamma(x)


@numba.vectorize(["float64(float64)"], cache=True)
def lgamma_f64(x):
    return math.lgamma(x)


@numba.vectorize(["float64(float64)"], cache=True)
def heaviside_f64(x):
    """1.0 where x > 0, else 0.0 (NaN -> 0.0): the float64 context's heaviside, one pass
    (numpy's comparison cast to float64 output takes its slower buffered loop)."""
    return 1.0 if x > 0.0 else 0.0


@numba.vectorize(["float64(float64, float64)"], cache=True)
def mul_heaviside_f64(g, x):
    """g * heaviside(x), the same product as numpy's ``g * heaviside_f64(x)`` (a 1.0 or
    0.0 factor: inf * 0 is NaN, a quiet NaN keeps its payload), in one pass.  (LLVM folds
    the multiplication by 1.0, so a signaling NaN g passes through unquieted.)"""
    return g * (1.0 if x > 0.0 else 0.0)
