"""Numba-compiled elementwise helpers (float64 libm functions numpy lacks)."""
from __future__ import annotations

import math

import numba
import numpy as np


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
