"""Numba kernels that round float64 arrays onto a binary format by integer bit surgery.

Why bits: a positive float64 ``a`` is, within its binade, the integer ``bits(a)`` in units of
``2^(e-52)``, and the encoding stays linear across binade boundaries and through the float64
subnormals.  Rounding to a quantum of ``2^sh`` bit units is therefore an integer operation
on ``bits(a)`` whose carry moves into the exponent field by itself.  Results are built as
int64 bit patterns and viewed back as float64.

Nearest-even onto a format with subnormals (every named format) takes one branch-free
pass instead, :func:`_round_ne_float`: the hardware adder rounds ``x + c`` once at the
format's quantum (c a power of two chosen by bit operations), which vectorises well;
overflow, inf and NaN are selected bitwise afterwards.  Directed modes and formats without
subnormals use the integer carry trick over blocks, and :func:`_round_sel` (selects only,
every range) for a block that holds anything outside the normal range.

The public entry point is :func:`scalars.formats.round_to_format`, which prepares the
per-format constants passed here, through :mod:`scalars.kernels.rounding` (the mode codes
and the choice of kernel, without Numba: this module, and Numba with it, is imported when
a rounding first runs).  Every kernel has exactly one compiled signature.
"""
from __future__ import annotations

import numba
import numpy as np

from .eft import f2i, i2f
from .rounding import (DOWN, NEAREST_AWAY, NEAREST_EVEN, ODD, STOCHASTIC, TOWARD_ZERO, UP,
                       float_path)

_ABS = 0x7FFFFFFFFFFFFFFF
_EXP_ALL = 0x7FF0000000000000
_FRAC = 0x000FFFFFFFFFFFFF
_IMPLICIT = 0x0010000000000000
# Block length of the two-pass kernels: the branch-free pass runs over a block, and only a
# block holding some special value (subnormal range, overflow, inf/NaN) is revisited,
# while it is still in L1 cache.
_BLOCK = 256


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
def _round_one(b, mode, rand_i, sh0, emin_field, subnormals, halfq_bits, q_bits, q_exp,
               max_bits, over_pos, over_neg, inf_pos, inf_neg):
    """The complete rounding of one float64 (int64 bits ``b``): result bits.

    Handles everything: NaN, infinities, zeros, gradual underflow, the no-subnormal set,
    overflow, every mode.  The array kernels call it only where their fast pass cannot.
    """
    a = b & _ABS
    neg = b < 0
    sign = b - a  # 0 or the sign bit
    if a >= _EXP_ALL:
        if a > _EXP_ALL:
            return b  # NaN stays NaN
        return inf_neg if neg else inf_pos
    if a == 0:
        return b  # signed zero is exact
    expf = a >> 52
    if expf >= emin_field:
        sh = sh0
    elif not subnormals:
        # Below min_normal with no subnormals: the candidates are 0 and min_normal.
        r = q_bits if _small_case_up(a, neg, mode, halfq_bits, q_exp, rand_i) else 0
        return r | sign
    else:
        # Gradual underflow: the quantum stays at 2^(emin-M), i.e. the shift grows by one
        # per binade below min_normal (float64 subnormals count as exponent field 1).
        sh = sh0 + emin_field - (expf if expf > 0 else 1)
        if sh > 52:
            # |x| < one quantum: only 0 and min_subnormal are candidates.
            r = q_bits if _small_case_up(a, neg, mode, halfq_bits, q_exp, rand_i) else 0
            return r | sign
    mask = (np.int64(1) << sh) - 1
    rem = a & mask
    if rem == 0:
        r = a
    else:
        t = a - rem
        unit = np.int64(1) << sh
        # Last kept significand bit.  At sh == 52 the kept part is the implicit leading 1
        # (bit 52 of the pattern is the exponent's low bit, not it).
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
            up = (rand_i >> (63 - sh)) < rem
        r = t + unit if up else t
    if r > max_bits:
        return over_neg if neg else over_pos
    return r | sign


@numba.njit(cache=True, nogil=True, inline="always")
def _normal_range_round(a, neg, mode, sh0):
    """Round a positive pattern ``a`` in the format's normal range (quantum 2^sh0 bit units)
    with selects only, so that the loop calling it vectorises.  sh0 < 52 here."""
    unit = np.int64(1) << sh0
    rem = a & (unit - 1)
    half = unit >> 1
    lsb = (a >> sh0) & 1
    inexact = rem != 0
    # (``inexact &`` matters only when sh0 == 0, i.e. man_bits = 52, where half is 0.)
    if mode == NEAREST_EVEN:
        up = inexact & ((rem > half) | ((rem == half) & (lsb == 1)))
    elif mode == NEAREST_AWAY:
        up = inexact & (rem >= half)
    elif mode == TOWARD_ZERO:
        up = False
    elif mode == UP:
        up = inexact & (not neg)
    elif mode == DOWN:
        up = inexact & neg
    else:  # ODD
        up = inexact & (lsb == 0)
    return (a - rem) + (unit if up else 0)


@numba.njit(cache=True, nogil=True, inline="always")
def _round_sel(b, mode, sh0, emin_field, subnormals, halfq_bits, q_bits, max_bits,
               over_pos, over_neg, inf_pos, inf_neg):
    """The complete rounding of one float64 (int64 bits ``b``) in a deterministic mode,
    written with selects only (no branch depends on the value), so that a loop calling it
    vectorises: the same result as :func:`_round_one`, in every range at once.

    The quantum's shift grows by one per binade below min_normal (gradual underflow:
    ``sh = sh0 + max(0, emin_field - max(expf, 1))``); past 52 (|x| below one quantum), or
    below min_normal without subnormals, the candidates are 0 and Q.  The carry of the
    integer rounding moves into the exponent field by itself.  At sh == 52 the kept part is
    the implicit leading 1, whose "last bit" is odd.
    """
    a = b & _ABS
    neg = b < 0
    sign = b ^ a
    expf = a >> 52
    e1 = max(expf, np.int64(1))
    sh = sh0 + max(emin_field - e1, np.int64(0))
    shc = min(sh, np.int64(52))
    unit = np.int64(1) << shc
    rem = a & (unit - 1)
    half = unit >> 1
    lsb = ((a >> shc) & 1) | np.int64(shc == 52)
    inexact = rem != 0
    nz = a != 0
    if mode == NEAREST_EVEN:
        up = inexact & ((rem > half) | ((rem == half) & (lsb == 1)))
        up_small = a > halfq_bits
    elif mode == NEAREST_AWAY:
        up = inexact & (rem >= half)
        up_small = a >= halfq_bits
    elif mode == TOWARD_ZERO:
        up = False
        up_small = False
    elif mode == UP:
        up = inexact & (not neg)
        up_small = nz & (not neg)
    elif mode == DOWN:
        up = inexact & neg
        up_small = nz & neg
    else:  # ODD
        up = inexact & (lsb == 0)
        up_small = nz
    r = (a - rem) + (unit if up else np.int64(0))
    small = (sh > 52) | ((not subnormals) & (a < (np.int64(emin_field) << 52)))
    r = (q_bits if up_small else np.int64(0)) if small else r
    res = r | sign
    res = (over_neg if neg else over_pos) if r > max_bits else res
    special = (b if a > _EXP_ALL else (inf_neg if neg else inf_pos))
    return special if a >= _EXP_ALL else res


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
    rand        63-bit uniform integers, one per element (stochastic mode only)

    Deterministic modes: one branch-free loop (:func:`_round_sel`; the mode test is loop
    invariant and hoisted out by LLVM), whatever mix of normal, subnormal, overflowing and
    special values the input holds.  Stochastic: :func:`_round_one` per element.
    """
    n = xb.shape[0]
    if mode == STOCHASTIC:
        for i in range(n):
            out[i] = _round_one(xb[i], mode, rand[i], sh0, emin_field, subnormals,
                                halfq_bits, q_bits, q_exp, max_bits, over_pos, over_neg,
                                inf_pos, inf_neg)
        return
    # Six calls that differ only in the mode, a constant in each: every inlined copy of _loop
    # is compiled for one mode with its mode tests folded away (not one loop for all modes).
    if mode == NEAREST_EVEN:
        _loop(xb, out, NEAREST_EVEN, sh0, emin_field, subnormals, halfq_bits, q_bits,
              max_bits, over_pos, over_neg, inf_pos, inf_neg)
    elif mode == NEAREST_AWAY:
        _loop(xb, out, NEAREST_AWAY, sh0, emin_field, subnormals, halfq_bits, q_bits,
              max_bits, over_pos, over_neg, inf_pos, inf_neg)
    elif mode == TOWARD_ZERO:
        _loop(xb, out, TOWARD_ZERO, sh0, emin_field, subnormals, halfq_bits, q_bits,
              max_bits, over_pos, over_neg, inf_pos, inf_neg)
    elif mode == UP:
        _loop(xb, out, UP, sh0, emin_field, subnormals, halfq_bits, q_bits,
              max_bits, over_pos, over_neg, inf_pos, inf_neg)
    elif mode == DOWN:
        _loop(xb, out, DOWN, sh0, emin_field, subnormals, halfq_bits, q_bits,
              max_bits, over_pos, over_neg, inf_pos, inf_neg)
    else:
        _loop(xb, out, ODD, sh0, emin_field, subnormals, halfq_bits, q_bits,
              max_bits, over_pos, over_neg, inf_pos, inf_neg)


@numba.njit(cache=True, nogil=True, inline="always")
def _round_ne_float(b, sh0, lo_bits, hi_bits, max_bits, over_pos, over_neg, inf_pos,
                    inf_neg):
    """Nearest-even by the hardware adder, branch-free, for formats with subnormals whose
    constants below are normal float64s: with c = ±2^(e + sh0) for x in binade e (clamped
    to [min_normal's binade, emax + 1]), x + c lies in c's binade, whose float64 spacing is
    the format's quantum at x, so the addition rounds x once, nearest-even (c's significand
    is even), and (x + c) - c is exact.  A zero result gets x's sign back; overflow, inf
    and NaN are selected afterwards as in :func:`_round_one`."""
    a = b & _ABS
    sg = b ^ a
    cb = min(max((a & _EXP_ALL) + (sh0 << 52), lo_bits), hi_bits)
    c = i2f(cb | sg)
    x = i2f(b)
    yb = f2i((x + c) - c) | sg
    res = (over_neg if sg != 0 else over_pos) if (yb & _ABS) > max_bits else yb
    special = b if a > _EXP_ALL else (inf_neg if sg != 0 else inf_pos)
    return special if a >= _EXP_ALL else res


# float_path (scalars.kernels.rounding) inlined into compiled code
_float_path = numba.njit(inline="always")(float_path)


@numba.njit(nogil=True, inline="always")
def _float_loop(xb, out, sh0, emin_field, max_bits, over_pos, over_neg, inf_pos, inf_neg):
    """Nearest-even by :func:`_round_ne_float` over every element (formats where
    :func:`float_path` holds): one branch-free pass whatever the values."""
    # _round_ne_float's clamp constants: exponent fields of 2^(emin + sh0) and of
    # 2^(emax + 1 + sh0).
    lo_bits = (np.int64(emin_field) + sh0) << 52
    hi_bits = ((max_bits >> 52) + 1 + sh0) << 52
    for i in range(xb.shape[0]):
        out[i] = _round_ne_float(xb[i], sh0, lo_bits, hi_bits, max_bits, over_pos,
                                 over_neg, inf_pos, inf_neg)


@numba.njit(nogil=True, inline="always")
def _block_loop(xb, out, mode, sh0, emin_field, subnormals, halfq_bits, q_bits, max_bits,
                over_pos, over_neg, inf_pos, inf_neg):
    """Blocks of _BLOCK: a cheap branch-free pass for the common case (zero, or the normal
    range without overflow); a block that holds anything else is redone whole, still branch
    free, by :func:`_round_sel` while it is in L1 cache."""
    n = xb.shape[0]
    mn_bits = np.int64(emin_field) << 52
    if mode == NEAREST_EVEN:
        mask0 = (np.int64(1) << sh0) - 1
        # With sh0 == 0 (man_bits = 52) nothing is rounded in the normal range.
        half0m1 = ((np.int64(1) << sh0) >> 1) - 1 if sh0 > 0 else np.int64(0)
        lsb1 = np.int64(1) if sh0 > 0 else np.int64(0)
    for start in range(0, n, _BLOCK):
        stop = min(start + _BLOCK, n)
        nbad = 0
        for i in range(start, stop):
            b = xb[i]
            a = b & _ABS
            if mode == NEAREST_EVEN:
                r = (a + half0m1 + ((a >> sh0) & lsb1)) & ~mask0
            else:
                r = _normal_range_round(a, b < 0, mode, sh0)
            ok = ((a >= mn_bits) | (a == 0)) & (r <= max_bits)
            out[i] = r | (b ^ a)
            nbad += 0 if ok else 1
        if nbad:
            for i in range(start, stop):
                out[i] = _round_sel(xb[i], mode, sh0, emin_field, subnormals, halfq_bits,
                                    q_bits, max_bits, over_pos, over_neg, inf_pos, inf_neg)


@numba.njit(nogil=True, inline="always")
def _loop(xb, out, mode, sh0, emin_field, subnormals, halfq_bits, q_bits, max_bits,
          over_pos, over_neg, inf_pos, inf_neg):
    """One deterministic mode over ``xb``: the float pass where :func:`float_path` holds
    (nearest-even only), the blocks otherwise."""
    if _float_path(mode, sh0, subnormals, max_bits):
        _float_loop(xb, out, sh0, emin_field, max_bits, over_pos, over_neg, inf_pos, inf_neg)
    else:
        _block_loop(xb, out, mode, sh0, emin_field, subnormals, halfq_bits, q_bits,
                    max_bits, over_pos, over_neg, inf_pos, inf_neg)


# Nearest-even is two kernels, chosen per call by float_path (plain Python): the float pass
# alone compiles in about 0.25 s cold, the pair of loops together took 1.6 s, and a run
# with the named formats (all on the float pass) compiles only the first.
@numba.njit(cache=True, nogil=True)
def round_bits_nearest_even_float(xb, out, sh0, emin_field, subnormals, halfq_bits, q_bits,
                                  q_exp, max_bits, over_pos, over_neg, inf_pos, inf_neg):
    """:func:`round_bits` in nearest-even for formats where :func:`float_path` holds (every
    named format): the hardware adder's rounding, one branch-free pass."""
    _float_loop(xb, out, sh0, emin_field, max_bits, over_pos, over_neg, inf_pos, inf_neg)


@numba.njit(cache=True, nogil=True)
def round_bits_nearest_even_blocks(xb, out, sh0, emin_field, subnormals, halfq_bits,
                                   q_bits, q_exp, max_bits, over_pos, over_neg, inf_pos,
                                   inf_neg):
    """:func:`round_bits` in nearest-even for the other formats (no subnormals, 52-bit
    significands, float64-wide exponents): the carry trick ``(a + half - 1 + lsb) & ~mask``
    in the normal range, anything else by :func:`_round_sel`; no branch on a value."""
    _block_loop(xb, out, NEAREST_EVEN, sh0, emin_field, subnormals, halfq_bits, q_bits,
                max_bits, over_pos, over_neg, inf_pos, inf_neg)


# One kernel per mode, so that a run compiles only the modes it uses: round_bits holds
# all seven loops and costs about 13 s of CPU to compile cold, one mode about a seventh.
# Each is round_bits with the mode fixed (the same inlined loop, bit for bit).
@numba.njit(cache=True, nogil=True)
def round_bits_nearest_away(xb, out, sh0, emin_field, subnormals, halfq_bits, q_bits,
                            q_exp, max_bits, over_pos, over_neg, inf_pos, inf_neg):
    """:func:`round_bits` in mode nearest-away."""
    _loop(xb, out, NEAREST_AWAY, sh0, emin_field, subnormals, halfq_bits, q_bits,
          max_bits, over_pos, over_neg, inf_pos, inf_neg)


@numba.njit(cache=True, nogil=True)
def round_bits_toward_zero(xb, out, sh0, emin_field, subnormals, halfq_bits, q_bits,
                           q_exp, max_bits, over_pos, over_neg, inf_pos, inf_neg):
    """:func:`round_bits` in mode toward-zero."""
    _loop(xb, out, TOWARD_ZERO, sh0, emin_field, subnormals, halfq_bits, q_bits,
          max_bits, over_pos, over_neg, inf_pos, inf_neg)


@numba.njit(cache=True, nogil=True)
def round_bits_up(xb, out, sh0, emin_field, subnormals, halfq_bits, q_bits,
                  q_exp, max_bits, over_pos, over_neg, inf_pos, inf_neg):
    """:func:`round_bits` in mode up (toward +inf)."""
    _loop(xb, out, UP, sh0, emin_field, subnormals, halfq_bits, q_bits,
          max_bits, over_pos, over_neg, inf_pos, inf_neg)


@numba.njit(cache=True, nogil=True)
def round_bits_down(xb, out, sh0, emin_field, subnormals, halfq_bits, q_bits,
                    q_exp, max_bits, over_pos, over_neg, inf_pos, inf_neg):
    """:func:`round_bits` in mode down (toward -inf)."""
    _loop(xb, out, DOWN, sh0, emin_field, subnormals, halfq_bits, q_bits,
          max_bits, over_pos, over_neg, inf_pos, inf_neg)


@numba.njit(cache=True, nogil=True)
def round_bits_odd(xb, out, sh0, emin_field, subnormals, halfq_bits, q_bits,
                   q_exp, max_bits, over_pos, over_neg, inf_pos, inf_neg):
    """:func:`round_bits` in mode round-to-odd."""
    _loop(xb, out, ODD, sh0, emin_field, subnormals, halfq_bits, q_bits,
          max_bits, over_pos, over_neg, inf_pos, inf_neg)


@numba.njit(cache=True, nogil=True)
def round_bits_stochastic(xb, out, rand, sh0, emin_field, subnormals, halfq_bits, q_bits,
                          q_exp, max_bits, over_pos, over_neg, inf_pos, inf_neg):
    """:func:`round_bits` in mode stochastic (``rand``: one 63-bit integer per element)."""
    for i in range(xb.shape[0]):
        out[i] = _round_one(xb[i], STOCHASTIC, rand[i], sh0, emin_field, subnormals,
                            halfq_bits, q_bits, q_exp, max_bits, over_pos, over_neg,
                            inf_pos, inf_neg)


#: the deterministic modes' kernels other than nearest-even, by mode code
ROUND_BITS_BY_MODE = {NEAREST_AWAY: round_bits_nearest_away,
                      TOWARD_ZERO: round_bits_toward_zero, UP: round_bits_up,
                      DOWN: round_bits_down, ODD: round_bits_odd}


@numba.njit(cache=True, nogil=True, parallel=True)
def round_bits_nearest_even_parallel(xb, out, sh0, emin_field, subnormals, halfq_bits,
                                     q_bits, q_exp, max_bits, over_pos, over_neg, inf_pos,
                                     inf_neg):
    """:func:`round_bits_nearest_even` over Numba's thread pool (chunks of 2^16)."""
    n = xb.shape[0]
    nchunks = (n + 65535) >> 16
    for c in numba.prange(nchunks):
        lo = c << 16
        hi = min(lo + 65536, n)
        _loop(xb[lo:hi], out[lo:hi], NEAREST_EVEN, sh0, emin_field, subnormals,
              halfq_bits, q_bits, max_bits, over_pos, over_neg, inf_pos, inf_neg)
