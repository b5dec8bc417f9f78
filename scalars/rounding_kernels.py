"""Numba kernels that round float64 arrays onto a binary format by integer bit surgery.

Why bits: a positive float64 ``a`` is, within its binade, the integer ``bits(a)`` in units of
``2^(e-52)``, and the encoding stays linear across binade boundaries and through the float64
subnormals.  Rounding to a quantum of ``2^sh`` bit units is therefore an integer operation
on ``bits(a)`` whose carry moves into the exponent field by itself.  Results are built as
int64 bit patterns and viewed back as float64; no floating-point arithmetic is involved,
so no double rounding can happen.

The public entry point is :func:`scalars.formats.round_to_format`, which prepares the
per-format constants passed here.  Every kernel has exactly one compiled signature.
"""
from __future__ import annotations

import numba
import numpy as np

# Rounding-mode codes shared with scalars.formats.
NEAREST_EVEN, NEAREST_AWAY, TOWARD_ZERO, UP, DOWN, ODD, STOCHASTIC = range(7)

_ABS = 0x7FFFFFFFFFFFFFFF
_EXP_ALL = 0x7FF0000000000000
_FRAC = 0x000FFFFFFFFFFFFF
_IMPLICIT = 0x0010000000000000


@numba.njit(cache=True, nogil=True)
def _small_case_up(a, neg, mode, halfq_bits, q_exp, rand):
    """Decide ``0 < |x| < Q`` (the result is 0 or Q): True means round to Q.

    ``halfq_bits`` is the bit pattern of Q/2 and ``q_exp = log2 Q``.  ``rand`` is a
    uniform integer in [0, 2^63) (stochastic mode only).
    """
    if mode == NEAREST_EVEN:
        # Tie goes to 0: 0 is even; Q (one quantum, or min_normal without subnormals)
        # is odd or the MPFR choice respectively.
        return a > halfq_bits
    if mode == NEAREST_AWAY:
        return a >= halfq_bits
    if mode == TOWARD_ZERO:
        return False
    if mode == UP:
        return not neg
    if mode == DOWN:
        return neg
    if mode == ODD:
        return True  # inexact: the odd neighbour of 0 is Q
    # Stochastic: P(up) = |x| / Q exactly.  |x| = mant * 2^be; U uniform in [0, 2^s)
    # with s = q_exp - be, round up iff U < mant.  The top s of 63 random bits give U
    # exactly when s <= 63; beyond (|x| < 2^-10 Q) the comparison uses a 63-bit
    # fixed-point threshold, so P(up) is low by less than 2^-63.
    expf = a >> 52
    if expf == 0:
        mant = a
        be = -1074
    else:
        mant = (a & _FRAC) | _IMPLICIT
        be = expf - 1075
    s = q_exp - be
    if s <= 63:
        return (rand >> (63 - s)) < mant
    if s - 63 >= 63:
        return False
    return rand < (mant >> (s - 63))


@numba.njit(cache=True, nogil=True)
def round_bits(xb, out, rand, mode, sh0, emin_field, subnormals, halfq_bits, q_bits,
               q_exp, max_bits, over_pos, over_neg, inf_pos, inf_neg):
    """Round every float64 (given as int64 bits ``xb``) into ``out`` (int64 bits).

    sh0         52 - man_bits: the rounding shift inside the format's normal range
    emin_field  emin + 1023: float64 exponent field of the format's min_normal
    halfq_bits  bits of Q/2 and q_bits bits of Q, where Q is the smallest positive value
                (min_subnormal, or min_normal when the format has no subnormals)
    max_bits    bits of max_finite; a rounded magnitude above it overflows
    over_pos/over_neg  bits of the overflow result for positive / negative inputs
    inf_pos/inf_neg    bits of the result for +inf / -inf inputs
    """
    n = xb.shape[0]
    for i in range(n):
        b = xb[i]
        a = b & _ABS
        neg = b < 0
        sign = b - a  # 0 or the sign bit
        if a >= _EXP_ALL:
            if a > _EXP_ALL:
                out[i] = b  # NaN stays NaN
            elif neg:
                out[i] = inf_neg
            else:
                out[i] = inf_pos
            continue
        if a == 0:
            out[i] = b  # signed zero is exact
            continue
        expf = a >> 52
        if expf >= emin_field:
            sh = sh0
        elif not subnormals:
            # Below min_normal with no subnormals: the candidates are 0 and min_normal.
            r = q_bits if _small_case_up(a, neg, mode, halfq_bits, q_exp,
                                         rand[i] if mode == STOCHASTIC else 0) else 0
            out[i] = r | sign
            continue
        else:
            # Gradual underflow: the quantum stays at 2^(emin-M), i.e. the shift grows by
            # one per binade below min_normal (float64 subnormals count as exponent field 1).
            sh = sh0 + emin_field - (expf if expf > 0 else 1)
            if sh > 52:
                # |x| < one quantum: only 0 and min_subnormal are candidates.
                r = q_bits if _small_case_up(a, neg, mode, halfq_bits, q_exp,
                                             rand[i] if mode == STOCHASTIC else 0) else 0
                out[i] = r | sign
                continue
        mask = (np.int64(1) << sh) - 1
        rem = a & mask
        if rem == 0:
            r = a
        else:
            t = a - rem
            unit = np.int64(1) << sh
            # Last kept significand bit.  At sh == 52 the kept part is the implicit
            # leading 1 (bit 52 of the pattern is the exponent's low bit, not it).
            lsb = 1 if sh == 52 else (a >> sh) & 1
            half = unit >> 1
            if mode == NEAREST_EVEN:
                up = rem > half or (rem == half and lsb == 1)
            elif mode == NEAREST_AWAY:
                up = rem >= half
            elif mode == TOWARD_ZERO:
                up = False
            elif mode == UP:
                up = not neg
            elif mode == DOWN:
                up = neg
            elif mode == ODD:
                up = lsb == 0  # truncate, then force the last bit to 1
            else:
                # P(up) = rem / 2^sh exactly: compare the top sh of 63 random bits.
                up = (rand[i] >> (63 - sh)) < rem
            r = t + unit if up else t
        if r > max_bits:
            out[i] = over_neg if neg else over_pos
        else:
            out[i] = r | sign


@numba.njit(cache=True, nogil=True)
def round_bits_nearest_even(xb, out, sh0, emin_field, halfq_bits, q_bits, max_bits,
                            over_pos, over_neg, inf_pos, inf_neg):
    """Fast path of :func:`round_bits` for nearest-even on a format with subnormals.

    The normal range uses the branch-free carry trick
    ``(a + half - 1 + lsb) & ~mask``; everything else defers to the general logic.
    """
    n = xb.shape[0]
    mask0 = (np.int64(1) << sh0) - 1
    half0m1 = ((np.int64(1) << sh0) >> 1) - 1 if sh0 > 0 else np.int64(0)
    for i in range(n):
        b = xb[i]
        a = b & _ABS
        sign = b - a
        expf = a >> 52
        if expf >= emin_field and a < _EXP_ALL:
            if sh0 > 0:
                r = (a + half0m1 + ((a >> sh0) & 1)) & ~mask0
            else:
                r = a
            if r > max_bits:
                out[i] = over_neg if sign != 0 else over_pos
            else:
                out[i] = r | sign
            continue
        if a >= _EXP_ALL:
            if a > _EXP_ALL:
                out[i] = b
            elif sign != 0:
                out[i] = inf_neg
            else:
                out[i] = inf_pos
            continue
        if a == 0:
            out[i] = b
            continue
        sh = sh0 + emin_field - (expf if expf > 0 else 1)
        if sh > 52:
            out[i] = (q_bits if a > halfq_bits else 0) | sign
            continue
        unit = np.int64(1) << sh
        lsb = 1 if sh == 52 else (a >> sh) & 1
        r = (a + (unit >> 1) - 1 + lsb) & ~(unit - 1)
        out[i] = r | sign  # results below min_normal cannot overflow
