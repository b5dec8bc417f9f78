"""A tighter enclosure of float64 interval matrix products: midpoint-radius in long double.

The midpoint-radius product (``IntervalContext.matmul_midrad``) bounds the rounding of the
float64 midpoint product a priori, gamma_n |mA||mB| with gamma_n ~ n 2^-53: at fan-in 1000
that term is ~1000 float64 ulps of each output, on top of the true radius.  Here the same
products run in x87 long double (64-bit significand, exponent range far beyond float64's):

* every product of two float64 values is finite and normal in long double (no underflow
  term, no overflow), so for any summation order |C - mA mB| <= gamma_n |mA||mB| with
  gamma_n = n u / (1 - n u), u = 2^-64 -- 2^11 times smaller than in float64;
* the radius R = (gamma_n |mA| + rA)(|mB| + rB) + |mA| rB is evaluated in long double,
  its own rounding covered by the factor 1 + (n + 10) 2^-63;
* [C - R, C + R] (each end moved 2^-62 relatively outward for its own long double
  rounding) is rounded outward to float64 (exact comparisons in long double).

So the excess over the exact interval product is about one float64 ulp per endpoint.
Cost: numpy's long double matmul is not BLAS (~10 ns per multiply-add, measured in
bench/dot_enclosure.py), which is why callers use it only below a size threshold.
Needs long double = x87 extended precision (``AVAILABLE``).
"""
from __future__ import annotations

import numpy as np

__all__ = ["AVAILABLE", "matmul_midrad_ld", "CHEAP_MACS"]

AVAILABLE = np.finfo(np.longdouble).nmant >= 63
#: multiply-adds up to which ``matmul`` uses the long double product (a few ms at most:
#: numpy's long double matmul costs 40-170 ns per multiply-add, bench/dot_enclosure.py)
CHEAP_MACS = 1 << 15

_LD = np.longdouble


def _rd64(a):
    f = a.astype(np.float64)
    return np.where(f.astype(_LD) > a, np.nextafter(f, -np.inf), f)


def _ru64(a):
    f = a.astype(np.float64)
    return np.where(f.astype(_LD) < a, np.nextafter(f, np.inf), f)


def _mid_rad(lo, hi):
    lo, hi = np.asarray(lo).astype(_LD), np.asarray(hi).astype(_LD)
    if lo.shape == hi.shape and np.array_equal(lo, hi):
        return lo, None
    m = lo * _LD(0.5) + hi * _LD(0.5)
    r = np.maximum(hi - m, m - lo) * (_LD(1) + _LD(2.0 ** -62))    # each difference <= 1/2 ulp off
    return m, r


def matmul_midrad_ld(alo, ahi, blo, bhi):
    """(lo, hi) float64 arrays enclosing {A B : A in [alo, ahi], B in [blo, bhi]} for finite
    float64 operands of shapes (m, n) / (n,) and (n, p) / (n,) (numpy matmul rules);
    ``None`` when long double is not extended precision or an operand is not finite."""
    if not AVAILABLE:
        return None
    for t in (alo, ahi, blo, bhi):
        if not np.all(np.isfinite(t)):
            return None
    n = np.shape(alo)[-1]
    mA, rA = _mid_rad(alo, ahi)
    mB, rB = _mid_rad(blo, bhi)
    u = _LD(2.0 ** -64)
    gamma = (n * u) / (1 - n * u) * (1 + _LD(2.0 ** -60))
    with np.errstate(all="ignore"):
        C = np.matmul(mA, mB)
        aA, aB = np.abs(mA), np.abs(mB)
        left = gamma * aA if rA is None else gamma * aA + rA
        R = np.matmul(left, aB if rB is None else aB + rB)
        if rB is not None:
            R = R + np.matmul(aA, rB)
        R = R * (1 + (n + 10) * _LD(2.0 ** -63))
        lo = C - R
        hi = C + R
        lo = lo - np.abs(lo) * _LD(2.0 ** -62)
        hi = hi + np.abs(hi) * _LD(2.0 ** -62)
    return _rd64(lo), _ru64(hi)
