"""MPFR (gmpy2) settlement of the few results the float64 fast paths cannot decide.

The binary contexts compute almost everything in float64 (:mod:`scalars.kernels.binary_format`)
and flag the rare elements where that is not provably correct: transcendental values too
close to a rounding boundary, error-free transformations that would underflow, formats
with 52-bit significands.  Those elements are recomputed here, one by one, in MPFR with
the format's precision, exponent range and subnormals (``formats.gmpy2_context``), so
the result is the correctly rounded one by MPFR's own guarantee.  Functions MPFR lacks
(sigmoid, softplus) are bracketed with directed rounding at increasing precision (Ziv's
strategy) until both ends round to the same format value; which functions MPFR has is
declared in :mod:`scalars.functions`.
"""
from __future__ import annotations

import math

import gmpy2
import numpy as np

from .. import formats

# MPFR's one-call correctly rounded arithmetic; the vocabulary's functions come from
# scalars.functions (fn.mpfr, or Ziv's loop on fn.bounds).
_ARITH = ("add", "sub", "mul", "div", "sqrt", "fma")
_MAX_PREC = 1 << 16


def _mp(x: float):
    """The exact MPFR value of a float64 (53 bits, no rounding)."""
    return gmpy2.mpfr(float(x), 53)


# Operands handed to MPFR below are values of the format, so gmpy2's conversion of a
# Python float at the format context's precision is exact; passing floats directly
# saves building an mpfr per operand.


def overflow_fix(values: np.ndarray, fmt) -> np.ndarray:
    """Apply the format's overflow / no-infinity rule to MPFR results (exact on format
    values, so a no-op for IEEE formats; E4M3FN's 480 or inf becomes NaN)."""
    return formats.round_to_format(np.asarray(values, dtype=np.float64), fmt)


def ziv(fn, x, fctx, start_prec: int):
    """Correct rounding in the gmpy2 context ``fctx`` of a function MPFR lacks, by
    bracketing (Ziv): raise the working precision until both directed bounds
    ``fn.bounds`` round to the same value.  For the compositions of scalars.functions the
    value at a nonzero finite float is transcendental (Lindemann-Weierstrass), never a
    rounding midpoint, so the loop ends; at their rational points the bounds are exact.
    The cap only guards against a bug."""
    prec = start_prec
    while True:
        lo, hi = fn.bounds(x, prec)
        a, b = fctx.plus(lo), fctx.plus(hi)
        if a == b or prec >= _MAX_PREC:
            return a
        prec *= 2


def settle(op, fmt, args, idx: np.ndarray) -> np.ndarray:
    """Correctly rounded ``op`` of the flat float64 operand arrays ``args`` at positions
    ``idx`` (1-d int array), computed in MPFR; returns float64 values for those positions.
    ``op`` is an arithmetic name (``"add"`` ... ``"fma"``), a ScalarFunction or a
    BinaryFunction (scalars.functions_binary; two operand arrays).
    """
    fmt = formats.get(fmt)
    fctx = formats.gmpy2_context(fmt, "nearest_even")
    out = np.empty(idx.size, dtype=np.float64)
    cols = [np.asarray(a, dtype=np.float64)[idx].tolist() for a in args]
    name = op if isinstance(op, str) else op.mpfr
    if name is None and getattr(op, "mpfr2", None) is not None:   # scalars.functions_binary
        fn = op.mpfr_in(fctx)
        out[:] = np.fromiter(map(float, map(fn, *cols)), np.float64, idx.size)
    elif name is not None:
        fn = getattr(fctx, name)
        out[:] = np.fromiter(map(float, map(fn, *cols)), np.float64, idx.size)
    else:
        start = fmt.precision + 40
        for n in range(idx.size):
            xv = cols[0][n]
            out[n] = xv if math.isnan(xv) else float(ziv(op, _mp(xv), fctx, start))
    return overflow_fix(out, fmt)


def emulate_reduction(fmt, terms_a, terms_b, *, fused: bool, pairwise: bool) -> float:
    """One sum (``terms_b is None``) or dot product, emulated step by step in MPFR in the
    exact order the kernels use: sequential (first term starts the accumulator) or the
    pairwise level-by-level tree; products rounded then summed, or fused (one rounding
    per multiply-add).  Used for outputs whose fast kernel flagged an EFT precondition."""
    fmt = formats.get(fmt)
    fctx = formats.gmpy2_context(fmt, "nearest_even")

    def fix(v):
        return float(overflow_fix(np.array([float(v)]), fmt)[0])

    a = [float(t) for t in terms_a]
    n = len(a)
    if n == 0:
        return 0.0
    if terms_b is None:
        vals = a
    elif pairwise or not fused:
        b = [float(t) for t in terms_b]
        vals = [fix(fctx.mul(_mp(x), _mp(y))) for x, y in zip(a, b)]
    else:
        b = [float(t) for t in terms_b]
        acc = fix(fctx.mul(_mp(a[0]), _mp(b[0])))
        for x, y in zip(a[1:], b[1:]):
            acc = fix(fctx.fma(_mp(x), _mp(y), _mp(acc)))
        return acc
    if not pairwise:
        acc = vals[0]
        for v in vals[1:]:
            acc = fix(fctx.add(_mp(acc), _mp(v)))
        return acc
    level = list(vals)
    while len(level) > 1:
        nxt = [fix(fctx.add(_mp(level[2 * i]), _mp(level[2 * i + 1])))
               for i in range(len(level) // 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]
