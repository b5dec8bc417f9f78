"""ULP distances between values of a binary format in one compiled pass.

A non-negative value of a format is numbered by its place among the format's non-negative
values (0 -> 0).  For a value at or above min_normal that number is linear in its float64
bit pattern: ``(bits(a) - bits(min_normal)) >> (52 - M)`` counts the format's significand
steps from min_normal (the float64 encoding is linear across binades), plus the number of
values below min_normal (``2^M`` with subnormals: 0 and the subnormals; 1 without: 0
only).  A subnormal is ``a / min_subnormal`` (exact: a power-of-two scaling).  +inf is one
past max_finite.  The distance of two values is the difference of their numbers on one
side of zero and their sum across it (+0 and -0 share number 0).

The kernel also checks that every finite entry is a value of the format (at most
max_finite, no significand bits below the format's quantum at its exponent, 0 or a
multiple of min_subnormal below min_normal, nothing but 0 below min_normal without
subnormals) and that no infinity is given to a format without one, and returns how many
entries fail; its caller refuses those with the entry named.  Every integer here stays
below 2^63, so uint64 never wraps.
"""
from __future__ import annotations

import numba
import numpy as np

_ABS = np.uint64(0x7FFFFFFFFFFFFFFF)


@numba.njit(cache=True, nogil=True, inline="always")
def _number(v, vb, shift, mask, mn, mn_bits, maxf, first_normal, min_sub, subnormals,
            has_inf, inf_ord):
    """``(number of |v|, 1 if v is not a value of the format else 0)`` for a non-NaN
    float64 ``v`` whose bit pattern without the sign is ``vb``."""
    av = abs(v)
    if av == np.inf:
        return inf_ord, 0 if has_inf else 1
    if av >= mn:
        bad = 1 if (av > maxf or (vb & mask) != np.uint64(0)) else 0
        return ((vb - mn_bits) >> np.uint64(shift)) + first_normal, bad
    if subnormals:
        q = av / min_sub                     # exact: a power-of-two scaling
        return np.uint64(q), 0 if q == np.floor(q) else 1
    return np.uint64(0), 0 if av == 0.0 else 1


@numba.njit(cache=True, nogil=True, inline="always")
def _apart(ix, iy, xbits, ybits):
    """How many format values apart two numbered values are: the difference of their
    numbers on one side of zero (sign bits ``xbits``/``ybits`` equal), the sum across it."""
    if (xbits >> np.uint64(63)) == (ybits >> np.uint64(63)):
        return ix - iy if ix >= iy else iy - ix
    return ix + iy


@numba.njit(cache=True, nogil=True)
def ulp_distance_flat(a, b, out, shift, mn, mn_bits, maxf, first_normal, min_sub,
                      subnormals, has_inf, inf_ord, full):
    """``out[i]`` = ordinal distance of ``a[i]`` and ``b[i]`` (flat float64 arrays of one
    length, ``out`` uint64); NaN vs NaN is 0, NaN vs a number ``full``.  Returns the
    number of entries holding a finite non-value of the format or an infinity the format
    lacks (their ``out`` is unspecified)."""
    ab = a.view(np.uint64)
    bb = b.view(np.uint64)
    bad = 0
    mask = (np.uint64(1) << np.uint64(shift)) - np.uint64(1)
    for i in range(a.size):
        x = a[i]
        y = b[i]
        nx = x != x
        ny = y != y
        if nx or ny:
            out[i] = np.uint64(0) if (nx and ny) else full
            continue
        ix, ex = _number(x, ab[i] & _ABS, shift, mask, mn, mn_bits, maxf, first_normal,
                         min_sub, subnormals, has_inf, inf_ord)
        iy, ey = _number(y, bb[i] & _ABS, shift, mask, mn, mn_bits, maxf, first_normal,
                         min_sub, subnormals, has_inf, inf_ord)
        bad += ex + ey
        out[i] = _apart(ix, iy, ab[i], bb[i])
    return bad


@numba.njit(cache=True, nogil=True)
def entry_errors_flat(v_hi, v_lo, r_hi, r_lo, target, abs_err, rel, ulps, use_ulps, shift,
                      mn, mn_bits, maxf, first_normal, min_sub, subnormals, has_inf, inf_ord,
                      full):
    """Per-entry errors of the double-double values ``v`` against the reference ``r`` in
    one pass (flat float64 arrays of one length): ``abs_err``, ``rel`` and, when
    ``use_ulps``, ``ulps`` (float64) = the ordinal distance of ``v_hi`` to ``target`` (the
    reference correctly rounded into the format).  The formulas are those of
    ``experiments.metrics.entry_errors``, entry by entry.

    Returns ``(nonfinite, v_not_values, target_not_values, worst)``: entries where exactly
    one side is NaN or infinite; entries of ``v`` that are not values of the format
    (``v_lo != 0``, a finite non-value, an infinity the format lacks: the caller then
    reports no ULPs); entries of ``target`` that are not (a caller's error); entries where
    ``v_hi`` is NaN or infinite and ``r_hi`` finite (Herbie's worst score)."""
    vb = v_hi.view(np.uint64)
    tb = target.view(np.uint64)
    mask = (np.uint64(1) << np.uint64(shift)) - np.uint64(1)
    broken_n = 0
    bad_v = 0
    bad_t = 0
    worst_n = 0
    for i in range(v_hi.size):
        vh = v_hi[i]
        vl = v_lo[i]
        rh = r_hi[i]
        rl = r_lo[i]
        vn = vh != vh
        rn = rh != rh
        vinf = abs(vh) == np.inf
        rinf = abs(rh) == np.inf
        broken = (vn != rn) or (vinf and not rinf) or ((not vinf) and rinf and not vn)
        both = vn and rn
        if vh == rh and vl == rl:
            diff = 0.0
        else:
            # exact whenever v_hi and r_hi are within a factor of 2 (Sterbenz); the low
            # parts recover differences below one float64 ulp
            diff = (vh - rh) + (vl - rl)
        a = abs(diff)
        if both:
            a = 0.0
        elif broken:
            a = np.inf
        ra = abs(rh + rl)
        if ra == 0.0:
            r = 0.0 if a == 0.0 else np.inf
        else:
            r = a / ra
        if both:
            r = 0.0
        elif broken:
            r = np.inf
        abs_err[i] = a
        rel[i] = r
        if broken:
            broken_n += 1
        if (vn or vinf) and not (rn or rinf):
            worst_n += 1
        if not use_ulps:
            continue
        if vl != 0.0:
            bad_v += 1
        d = 0.0
        if not vn:
            iv, ev = _number(vh, vb[i] & _ABS, shift, mask, mn, mn_bits, maxf,
                             first_normal, min_sub, subnormals, has_inf, inf_ord)
            bad_v += ev
            if not rn:
                t = target[i]
                if t != t:
                    d = float(full)
                else:
                    it, et = _number(t, tb[i] & _ABS, shift, mask, mn, mn_bits, maxf,
                                     first_normal, min_sub, subnormals, has_inf, inf_ord)
                    bad_t += et
                    d = float(_apart(iv, it, vb[i], tb[i]))
        if both:
            d = 0.0
        elif vn != rn:
            d = np.inf
        ulps[i] = d
    return broken_n, bad_v, bad_t, worst_n


@numba.njit(cache=True, nogil=True)
def round_to_odd_flat(hi, lo, out):
    """``out`` = the double-double ``hi + lo`` (``hi`` its nearest float64) rounded to
    float64 with round-to-odd: where ``lo != 0`` (NaN included) and ``hi`` is finite with
    an even last bit, its neighbour toward ``lo``'s side (the exact value lies between
    the two, and that neighbour is the odd one); ``hi`` elsewhere."""
    hb = hi.view(np.uint64)
    for i in range(hi.size):
        h = hi[i]
        lw = lo[i]
        if lw != 0.0 and (hb[i] & np.uint64(1)) == np.uint64(0) and abs(h) != np.inf \
                and h == h:
            out[i] = np.nextafter(h, np.inf if lw > 0.0 else -np.inf)
        else:
            out[i] = h
