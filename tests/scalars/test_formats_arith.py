"""Every pair of e4m3 / e5m2 values under add sub mul div, every deterministic mode.

The computation under test is "exact operation in float64, then round_to_format once":
+ - * of these values are exact in float64, and a float64 quotient of two p-bit numbers
(p <= 4) is never closer than ~2^-2p relative to a format value or midpoint it does not
equal, so its one float64 rounding cannot change the final rounding in any mode.  The
oracle is the same operation done by MPFR under gmpy2_context (with ties-away and odd
derived as in test_formats_oracle).  The sign of an exact zero sum is a rule of the
operation (IEEE 754 6.3), applied to the float64 value before rounding.
"""
from __future__ import annotations

import numpy as np
import pytest

from scalarlab.scalars import formats as F
from test_formats_oracle import (DETERMINISTIC, MPFR_ROUND, assert_same, float_ties,
                                 mpfr_context, mpfr_exact, oracle)

OPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}


def every_value(fmt) -> np.ndarray:
    v = F.decode(np.arange(1 << fmt.total_bits), fmt)
    return v[~np.isnan(v)]  # both zeros, and ±inf for e5m2


# the default selection: add (signed zero sums) and div (the quotient's tie rule) in e4m3;
# -m slow: sub and mul too, and e5m2 (infinities)
@pytest.mark.parametrize("op, fmt", [
    pytest.param(op, fmt, marks=() if fmt is F.e4m3 and op in ("add", "div")
                 else pytest.mark.slow, id=f"{op}-{fmt.name}")
    for fmt in (F.e4m3, F.e5m2) for op in OPS])
def test_every_pair(fmt, op):
    v = every_value(fmt)
    a, b = (m.reshape(-1) for m in np.meshgrid(v, v, indexing="ij"))
    with np.errstate(all="ignore"):
        exact = OPS[op](a, b)
    ma, mb = mpfr_exact(a), mpfr_exact(b)
    rounded = {}
    for rnd in MPFR_ROUND:
        ctx = mpfr_context(fmt, rnd)
        with ctx:
            fn = getattr(ctx, op)
            rounded[rnd] = np.array(list(map(float, map(fn, ma, mb))), dtype=np.float64)
    rz, ra = rounded["toward_zero"], rounded["away"]
    if op == "div":
        with np.errstate(all="ignore"):
            tie = np.isfinite(ra) & (rz != ra) & (2 * a == (rz + ra) * b)
    else:
        tie = float_ties(exact, rounded)
    # Infinite exact results (an infinite operand, or division by zero) are not overflow:
    # they stay infinite, or become NaN in a format without infinities.
    exact_inf = np.isinf(exact) & (np.isinf(a) | np.isinf(b) | (b == 0))
    inf_image = np.where(exact > 0, np.inf, -np.inf) if fmt.has_inf else np.nan
    neg = np.signbit(exact)
    for mode in DETERMINISTIC:
        want = oracle(rounded, fmt, mode, tie, neg)
        want = np.where(exact_inf, inf_image, want)
        x = exact
        if mode == "down" and op in ("add", "sub"):
            # IEEE 754 6.3: an exact zero sum is -0 under roundTowardNegative unless both
            # addends are +0.  That is a rule of the operation, applied before rounding
            # (numpy computed the float64 sum in nearest-even).
            b_eff = b if op == "add" else -b
            plus_zeros = (a == 0) & (b_eff == 0) & ~np.signbit(a) & ~np.signbit(b_eff)
            x = np.where((exact == 0) & ~plus_zeros, -0.0, exact)
        got = F.round_to_format(x, fmt, mode)
        assert_same(got, want, [a, b], f"{fmt.name} {op} {mode}")
