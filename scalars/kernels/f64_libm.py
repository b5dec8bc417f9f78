"""Numba-compiled elementwise helpers of the float64 context (libm functions numpy lacks,
one-pass heaviside and relu-derivative product).

Each helper is a numpy ufunc built by ``numba.vectorize`` on its first call, not at import:
importing this module imports no Numba and compiles nothing (six eager ufuncs cost about
0.85 s of CPU per process even with a warm cache), so a command that never evaluates erf,
gamma or heaviside in float64 pays nothing for them (:mod:`scalars.kernels.lazy_ufunc`)."""
from __future__ import annotations

import math

from .lazy_ufunc import lazy_vectorize

# One ufunc per libm function (the twins below): numba.vectorize compiles a function, and a
# function handed in as an argument would be called un-inlined.

@lazy_vectorize("float64(float64)")
def erf_f64(x):
    return math.erf(x)


@lazy_vectorize("float64(float64)")
def erfc_f64(x):
    return math.erfc(x)


@lazy_vectorize("float64(float64)")
def gamma_f64(x):
    return math.gamma(x)


@lazy_vectorize("float64(float64)")
def lgamma_f64(x):
    return math.lgamma(x)


@lazy_vectorize("float64(float64)")
def heaviside_f64(x):
    """1.0 where x > 0, else 0.0 (NaN -> 0.0): the float64 context's heaviside, one pass
    (numpy's comparison cast to float64 output takes its slower buffered loop)."""
    return 1.0 if x > 0.0 else 0.0


@lazy_vectorize("float64(float64, float64)")
def mul_heaviside_f64(g, x):
    """g * heaviside(x), the same product as numpy's ``g * heaviside_f64(x)`` (a 1.0 or
    0.0 factor: inf * 0 is NaN, a quiet NaN keeps its payload), in one pass.  (LLVM folds
    the multiplication by 1.0, so a signaling NaN g passes through unquieted.)"""
    return g * (1.0 if x > 0.0 else 0.0)
