"""Numba-compiled elementwise helpers (float64 libm functions numpy lacks)."""
from __future__ import annotations

import math

import numba
import numpy as np


@numba.vectorize(["float64(float64)"], cache=True)
def erf_f64(x):
    return math.erf(x)
