"""The fast path of ``scalarlab libm``: compiled comparison of a library's results with the
correctly rounded ones, and the saturated input ranges decided once, exactly.

* :func:`compare` is one compiled pass over a block: bitwise equality (any NaN equal to any
  NaN), the C99 Annex F disagreement kinds, and the indices of the results scored in ulps.
  The numpy version it replaces made eight whole-array passes and ran 3-20x slower than
  the library calls it checks.
* :func:`score` turns the scored results into errors in ulps from a float64 value of f(x)
  (the lab's evaluator, a few float64 ulps: ~2^-28 ulps of a 24-bit format), keeps the
  worst few per block and the worst per bin of the run's input range (the plot's envelope).
* :func:`saturation` finds, per half line, the inputs where a monotone function's correctly
  rounded result no longer changes (exp overflows to +inf from 88.72, tanh is 1 from 9.01,
  exp rounds to 0 below -103.97, ...): bisection over the format's values on the
  correctly rounded result itself (the lab's binary context, MPFR where float64 cannot
  decide), so the thresholds are exact.  Inputs beyond them get that value without any
  evaluation; in particular exp's float64 evaluator overflows from x = 709.78, which sent a
  quarter of all binary32 inputs through MPFR one by one.
"""
from __future__ import annotations

import math

import numba
import numpy as np

#: Functions whose correctly rounded result is monotone on each half line although the
#: function is not declared monotone (even functions increasing on [0, inf)).
HALF_MONOTONE = {"cosh"}
#: A saturated tail shorter than this many values is not worth a mask.
MIN_TAIL = 1 << 12

_jit = numba.njit(cache=True, error_model="numpy", nogil=True)


@_jit
def _compare(y, r, min_normal, n_examples, kind_count, kind_first, scored):
    """kind_count[k] / kind_first[k, :] for the Annex F kinds (1 nan, 2 overflow/inf,
    3 signed zero, 4 underflow to zero; index k - 1), scored[:m] the indices of the
    finite disagreements; returns m."""
    m = 0
    for i in range(y.size):
        a = np.float64(y[i])
        b = np.float64(r[i])
        an = a != a
        bn = b != b
        if an and bn:
            continue
        if not an and not bn and a == b and math.copysign(1.0, a) == math.copysign(1.0, b):
            continue
        k = 0
        if an != bn:
            k = 1
        elif (abs(a) == math.inf or abs(b) == math.inf) and a != b:
            k = 2
        elif a == 0.0 and b == 0.0:
            k = 3
        elif a == 0.0 and abs(b) < min_normal:
            k = 4
        if k == 0:
            scored[m] = i
            m += 1
        else:
            c = kind_count[k - 1]
            if c < n_examples:
                kind_first[k - 1, c] = i
            kind_count[k - 1] = c + 1
    return m


def compare(y: np.ndarray, r: np.ndarray, min_normal: float, n_examples: int):
    """(scored indices, {kind code: (count, first indices)}) for library results ``y``
    against correctly rounded ``r`` (same carrier; float16 is widened exactly)."""
    if y.dtype == np.float16:
        y, r = y.astype(np.float32), r.astype(np.float32)
    r = r.astype(y.dtype, copy=False)
    kind_count = np.zeros(4, dtype=np.int64)
    kind_first = np.zeros((4, max(n_examples, 1)), dtype=np.int64)
    scored = np.empty(y.size, dtype=np.int64)
    m = _compare(y, r, float(min_normal), n_examples, kind_count, kind_first, scored)
    kinds = {k + 1: (int(kind_count[k]), kind_first[k, :min(int(kind_count[k]),
                                                              n_examples)])
             for k in range(4) if kind_count[k]}
    return scored[:m], kinds


@_jit
def _errors(y, ex, emin, emax, p, err):
    """err = |y - ex| / ulp(ex), ulp the format's at ex (subnormal ulp below the normal
    range, the top binade's above it; NaN estimates count as infinite)."""
    for j in range(y.size):
        e_x = ex[j]
        if e_x == 0.0 or e_x != e_x:
            e = emin
        elif abs(e_x) == math.inf:
            e = emax
        else:
            e = math.frexp(e_x)[1] - 1           # floor(log2 |ex|), exact
            e = min(max(e, emin), emax)
        v = abs(np.float64(y[j]) - e_x) / math.ldexp(1.0, e - p + 1)
        err[j] = math.inf if v != v else v


def errors(y, ex, fmt) -> np.ndarray:
    """Errors in ulps of ``fmt`` of results ``y`` against float64 values ``ex`` of f(x)."""
    if y.dtype == np.float16:
        y = y.astype(np.float32)
    err = np.empty(y.size)
    _errors(np.ascontiguousarray(y).reshape(-1), np.asarray(ex, dtype=np.float64).reshape(-1),
            int(fmt.emin), int(fmt.emax), int(fmt.precision), err)
    return err.reshape(np.shape(y))


@_jit
def _bin_top(err, ords, lo, span, bin_err, bin_at, top_err, top_at):
    """Per bin of the ordinal span the first maximum; the ``top_err.size`` largest
    errors (first ones on ties), descending."""
    k = top_err.size
    nb = bin_err.size
    for j in range(err.size):
        v = err[j]
        # in float64: binary64's ordinal span does not fit an int64 (a plot's bins)
        b = min(max(int((np.float64(ords[j]) - lo) * nb / span), 0), nb - 1)
        if v > bin_err[b]:
            bin_err[b] = v
            bin_at[b] = j
        if v > top_err[k - 1]:
            t = k - 1
            while t > 0 and v > top_err[t - 1]:
                top_err[t] = top_err[t - 1]
                top_at[t] = top_at[t - 1]
                t -= 1
            top_err[t] = v
            top_at[t] = j


def bin_top(err, ords, lo: int, hi: int, bins: int, k: int):
    """(top errors, their positions, {bin: position of its worst}) of ``err`` at input
    ordinals ``ords``; the bins split the ordinal span [lo, hi] evenly."""
    bin_err = np.full(bins, -1.0)
    bin_at = np.full(bins, -1, dtype=np.int64)
    top_err = np.full(k, -1.0)
    top_at = np.full(k, -1, dtype=np.int64)
    _bin_top(np.asarray(err, dtype=np.float64), np.asarray(ords, dtype=np.int64), float(lo),
             max(float(hi) - float(lo) + 1.0, 1.0), bin_err, bin_at, top_err, top_at)
    keep = top_at >= 0
    hit = np.flatnonzero(bin_at >= 0)
    return top_err[keep], top_at[keep], dict(zip(hit.tolist(), bin_at[hit].tolist()))


# ---------------------------------------------------------------------- saturated tails
def _same_value(a: float, b: float) -> bool:
    return (a != a and b != b) or (a == b and math.copysign(1, a) == math.copysign(1, b))


def saturation(cr_at, top: int, monotone_halves: bool):
    """Saturated tails of a function whose correctly rounded result is monotone on each
    half line: ``[(lo_ord, hi_ord, value), ...]`` with every finite input of ordinal in
    [lo_ord, hi_ord] rounding to ``value``.  ``cr_at(ordinals) -> values`` is the correctly
    rounded result; ``top`` the ordinal of +inf.  Bisection on "equals the value at the
    largest finite input": that set is one run at the end of the half line (monotone
    results; a NaN region from the domain lies at one end of it)."""
    if not monotone_halves:
        return []
    tails = []
    for sign in (1, -1):
        far = sign * (top - 1)
        v_far = float(cr_at(np.array([far]))[0])
        # a = ordinal magnitude known not to equal v_far (or the start), b = known equal
        a, b = 0, top - 1
        if _same_value(float(cr_at(np.array([sign * 1]))[0]), v_far):
            b = 1               # constant on the whole half line (log below 0: NaN)
        while b - a > 1:
            c = (a + b) // 2
            if _same_value(float(cr_at(np.array([sign * c]))[0]), v_far):
                b = c
            else:
                a = c
        if top - 1 - b >= MIN_TAIL:
            lo, hi = (b, top - 1) if sign > 0 else (-(top - 1), -b)
            tails.append((lo, hi, v_far))
    return tails
