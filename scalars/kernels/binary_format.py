"""Numba kernels of the binary-format contexts (:mod:`scalars.binary`).

Everything here rounds to nearest-even onto a binary format whose values are carried as
float64.  The format is described by the *spec* tuple ``Format.spec`` (scalars.formats); every
kernel takes it as a runtime argument, so each kernel has one compiled signature whatever
the format.

Rounding trick (:func:`rn`): for |x| in binade ``[2^e, 2^(e+1))`` let
``c = ±2^(max(e, emin) + 53 - p)`` (same sign as x).  Then ``x + c`` lies in c's binade,
whose float64 spacing is exactly the format's quantum at x, so the hardware addition rounds
x to p bits, nearest-even (c's significand is even), and ``(x + c) - c`` is exact.  Below
min_normal the clamp ``max(e, emin)`` gives the subnormal quantum (or, for formats without
subnormals, a quantum of min_normal itself, which is MPFR's "0 or min_normal" rule).  The
exponent is clamped above at emax + 1 so c stays finite: anything that large overflows
anyway (|x| >= 2^901 is scaled by 2^-200 first for formats with float64's exponent range).
A zero result gets x's sign back.  This needs p <= 52 and no fast-math (LLVM keeps
``(x + c) - c``).  :func:`rn_fast` is the same trick in vectorisable float operations.

Three arithmetic paths (``mode`` arguments):

* ``FAST``: p <= 25, subnormals, and an exponent range that keeps every product /
  quotient of format values inside float64's normal range.  Then computing + - * / sqrt
  in float64 and rounding once is correctly rounded: double rounding is innocuous when the
  intermediate precision is at least 2p + 2 bits (53 >= 2*25 + 2; Figueroa 1995, "When is
  double rounding innocuous?").  Products of two format values are exact in float64
  (2p <= 53), so fma = TwoSum(a*b, c) followed by round-to-odd and one rounding.
* ``NATIVE``: IEEE binary64 itself; hardware float64 (+ fma via LLVM's ``llvm.fma.f64``,
  a correctly rounded fused multiply-add on every target).
* ``STICKY``: every other format (p <= 52).  The float64 result ``r`` and the exact sign of
  the error ``t = exact - r`` come from error-free transformations (TwoSum, the fma
  product error, the division / square-root residual, Boldo-Muller's ErrFma).  Then
  round-to-odd at 53 bits followed by RN to p bits equals RN_p(exact) when 53 >= p + 2
  (Boldo & Melquiond 2008): nudge ``r`` one float64 ulp toward the exact value when the
  result is inexact and r's last bit is even.  The EFTs need no float64 underflow; elements
  whose float64 result is tiny (or p = 52, where round-to-odd is not enough) are flagged
  ``unsafe`` and the caller settles them with MPFR.

binary32 dot products additionally have :func:`matmul_hw`, hardware float32 arithmetic,
which is IEEE binary32 rounding itself.
"""
from __future__ import annotations

import math

import numba
import numpy as np

from .eft import err_fma, f2i, fma, i2f, to_odd, two_prod, two_sum

# IEEE semantics for x/0 (inf/NaN, no ZeroDivisionError); one compiled signature each.
_jit = numba.njit(cache=True, error_model="numpy")
_inline = numba.njit(inline="always", error_model="numpy")
_helper = numba.njit(cache=True, error_model="numpy")

FAST, NATIVE, STICKY = 0, 1, 2
ADD, SUB, MUL, DIV = 0, 1, 2, 3

_SIGN = -0x8000000000000000
_EXPM = 0x7FF0000000000000
_BIG = (900 + 1023) << 52          # |x| >= 2^901: rounding scales by 2^-200 first
_TINY = 2.0 ** -900                # float64 results below this may break the EFTs
_SCALE_DN = 2.0 ** -200
_SCALE_UP = 2.0 ** 200


@_inline
def _rn_core(x, spec):
    p53m, sub_shift, eminb, ecapb = spec[0], spec[1], spec[2], spec[3]
    b = f2i(x)
    e = b & _EXPM
    sh = p53m if e >= eminb else sub_shift
    e = min(max(e, eminb), ecapb)
    sg = b & _SIGN
    c = i2f((e + (sh << 52)) | sg)
    # A zero result of (x + c) - c is +0 in round-to-nearest: put x's sign back (a no-op
    # on nonzero results, which already carry it).
    return i2f(f2i((x + c) - c) | sg)


@_inline
def rn_fast(x, spec):
    """RN-even onto a FAST format (with subnormals; any float64 x).  The trick of
    :func:`rn` written with floating-point min/max/mul and bitwise ops only, which LLVM
    vectorises: c = clamp(2^e * 2^(53-p), 2^(emin+53-p), 2^(emax+1+53-p)) with the sign of
    x.  Overflow after rounding (with unbounded exponent) gives ±ovf."""
    b = f2i(x)
    sg = b & _SIGN
    c = max(min(i2f(b & _EXPM) * spec[7], spec[8]), spec[9])
    c = i2f(f2i(c) | sg)
    y = i2f(f2i((x + c) - c) | sg)    # keep the sign of a zero result
    return i2f(f2i(spec[5]) | sg) if abs(y) > spec[4] else y


@_helper
def rn(x, spec):
    """RN-even of any float64 onto the format.  Huge |x| (only formats with a float64-wide
    exponent range care) is scaled by 2^-200 so that the constant c stays finite."""
    big = (f2i(x) & _EXPM) >= _BIG
    xs = x * _SCALE_DN if big else x
    y = _rn_core(xs, spec)
    if big:
        y = y * _SCALE_UP
    if abs(y) > spec[4]:
        y = math.copysign(spec[5], x)
    return y


# ---------------------------------------------------------------- elementwise kernels
@numba.njit(inline="always", error_model="numpy")
def _binary_fast_loop(op, a, b, out, spec):
    """out = RN(a op b) for FAST formats: float64 op then one rounding (2p+2 rule); ``op``
    is a constant in each kernel below, its test folds away."""
    for i in range(out.size):
        x, y = a[i], b[i]
        if op == ADD:
            v = x + y
        elif op == SUB:
            v = x - y
        elif op == MUL:
            v = x * y
        else:
            v = x / y
        out[i] = rn_fast(v, spec)


# One kernel per op, so that a run compiles the operations it uses (one loop ~0.2 s cold;
# the four behind one op switch took 0.8 s).
@_jit
def binary_fast_add(a, b, out, spec):
    """:func:`binary_fast` for ADD."""
    _binary_fast_loop(ADD, a, b, out, spec)


@_jit
def binary_fast_sub(a, b, out, spec):
    """:func:`binary_fast` for SUB."""
    _binary_fast_loop(SUB, a, b, out, spec)


@_jit
def binary_fast_mul(a, b, out, spec):
    """:func:`binary_fast` for MUL."""
    _binary_fast_loop(MUL, a, b, out, spec)


@_jit
def binary_fast_div(a, b, out, spec):
    """:func:`binary_fast` for DIV."""
    _binary_fast_loop(DIV, a, b, out, spec)


_BINARY_FAST = (binary_fast_add, binary_fast_sub, binary_fast_mul, binary_fast_div)


def binary_fast(op, a, b, out, spec):
    """out = RN(a op b) for FAST formats (op in ADD SUB MUL DIV): float64 op then one
    rounding (2p+2 rule); the compiled kernel of this op."""
    _BINARY_FAST[op](a, b, out, spec)


@_helper
def _sqrt(x):
    # IEEE: sqrt(-0) = -0, sqrt(negative) = NaN, sqrt(NaN) = NaN.
    if x >= 0.0:
        return math.sqrt(x)
    return math.nan if x < 0.0 else x


@_jit
def sqrt_kernel(mode, a, out, unsafe, spec):
    """out = RN(sqrt(a)); STICKY formats use the residual a - s*s for the error sign."""
    p53m = spec[0]
    for i in range(out.size):
        x = a[i]
        s = _sqrt(x)
        if mode == FAST:
            out[i] = rn_fast(s, spec)
        elif mode == NATIVE:
            out[i] = s
        else:
            t = 0.0
            if s > 0.0 and s < math.inf:
                t = fma(-s, s, x)          # sign of x - s^2 = sign of sqrt(x) - s
                if x < _TINY or (p53m <= 1 and t != 0.0):
                    unsafe[i] = 1
            out[i] = rn(to_odd(s, t), spec)


@_jit
def binary_sticky(op, a, b, out, unsafe, spec):
    """out = RN(a op b) for STICKY formats (see the module docstring)."""
    p53m = spec[0]
    for i in range(out.size):
        x = a[i]
        y = b[i]
        t = 0.0
        if op == ADD or op == SUB:
            if op == SUB:
                y = -y
            r, t = two_sum(x, y)
            if not (abs(r) < math.inf):
                t = 0.0
        elif op == MUL:
            r, e = two_prod(x, y)
            if abs(r) < math.inf:
                t = e
                if abs(r) < _TINY and x != 0.0 and y != 0.0:
                    unsafe[i] = 1
        else:
            r = x / y
            if (abs(r) < math.inf and abs(x) < math.inf and abs(y) < math.inf
                    and y != 0.0 and x != 0.0):
                rem = fma(-r, y, x)        # x - r*y: exact when nothing underflows
                t = rem if y > 0.0 else -rem
                if abs(r) < _TINY or abs(x) < _TINY:
                    unsafe[i] = 1
        if p53m <= 1 and t != 0.0:
            unsafe[i] = 1
        out[i] = rn(to_odd(r, t), spec)


@_jit
def fma_kernel(mode, a, b, c, out, unsafe, spec):
    """out = RN(a*b + c), one rounding."""
    p53m = spec[0]
    for i in range(out.size):
        x = a[i]
        y = b[i]
        z = c[i]
        if mode == NATIVE:
            out[i] = fma(x, y, z)
        elif mode == FAST:
            # a*b is exact in float64 (2p <= 53, no under/overflow); TwoSum gives the exact
            # sum as s + t, round-to-odd then RN_p settles the single rounding.
            pr = x * y
            s, t = two_sum(pr, z)
            if not (abs(s) < math.inf):
                t = 0.0
            out[i] = rn_fast(to_odd(s, t), spec)
        else:
            r = fma(x, y, z)
            t = 0.0
            if abs(r) < math.inf:
                pr = x * y
                if x != 0.0 and y != 0.0 and abs(x) < math.inf and abs(y) < math.inf:
                    if abs(pr) < _TINY or abs(pr) > 2.0 ** 1000 or (
                            r != 0.0 and abs(r) < _TINY):
                        unsafe[i] = 1
                    else:
                        t = err_fma(x, y, z, r)
                        if t != t:
                            unsafe[i] = 1
                            t = 0.0
            if p53m <= 1 and t != 0.0:
                unsafe[i] = 1
            out[i] = rn(to_odd(r, t), spec)


# ---------------------------------------------------------------- functions
@_jit
def round_checked(mode, x, y, rel, abs_err, out, unsafe, spec):
    """out = RN(y), where y is a float64 value of f(x) with |y - f(x)| <= rel |y| + abs_err
    (the evaluator's declared bound, :mod:`scalars.functions`).  unsafe = 1 where that
    error interval straddles a rounding boundary, or y overflowed float64 at a finite x:
    the caller settles those with MPFR.  NATIVE (binary64) flags everything."""
    for i in range(x.size):
        yi = y[i]
        if abs(yi) < math.inf:
            d = abs(yi) * rel + abs_err
            lo = rn(yi - d, spec)
            hi = rn(yi + d, spec)
            if mode == NATIVE or not (lo == hi or (lo != lo and hi != hi)):
                unsafe[i] = 1
        elif yi == yi and abs(x[i]) < math.inf:
            unsafe[i] = 1   # e.g. exp overflowed float64, log(0) = -inf: MPFR decides (rare)
        out[i] = yi if mode == NATIVE else rn(yi, spec)


@_jit
def first_nonmember(mode, x, spec):
    """Index of the first entry of x (1-d) that is not a value of the format (NaN counts
    as a value), or -1.  Counts per chunk (a vectorisable reduction), scans only a chunk
    that has a bad entry."""
    n = x.size
    for c0 in range(0, n, 2048):
        c1 = min(n, c0 + 2048)
        bad = 0
        if mode == FAST:
            for i in range(c0, c1):
                v = x[i]
                r = rn_fast(v, spec)
                bad += 0 if (r == v or v != v) else 1
        else:
            for i in range(c0, c1):
                v = x[i]
                r = rn(v, spec)
                bad += 0 if (r == v or v != v) else 1
        if bad:
            for i in range(c0, c1):
                v = x[i]
                r = rn(v, spec)
                if not (r == v or v != v):
                    return i
    return -1


# ---------------------------------------------------------------- reductions
@_helper
def _add_step(mode, acc, v, spec):
    """One rounded addition acc + v; returns (result, unsafe-flag)."""
    if mode == FAST:
        return rn_fast(acc + v, spec), False
    if mode == NATIVE:
        return acc + v, False
    s, t = two_sum(acc, v)
    if not (abs(s) < math.inf):
        t = 0.0
    return rn(to_odd(s, t), spec), spec[0] <= 1 and t != 0.0


@_helper
def _mul_step(mode, x, y, spec):
    """One rounded product x*y; returns (result, unsafe-flag)."""
    if mode == FAST:
        return rn_fast(x * y, spec), False
    if mode == NATIVE:
        return x * y, False
    r, e = two_prod(x, y)
    t = 0.0
    bad = False
    if abs(r) < math.inf:
        t = e
        bad = abs(r) < _TINY and x != 0.0 and y != 0.0
    bad = bad or (spec[0] <= 1 and t != 0.0)
    return rn(to_odd(r, t), spec), bad


@_helper
def _fma_step(mode, x, y, acc, spec):
    """One fused multiply-add x*y + acc with one rounding; returns (result, unsafe)."""
    if mode == NATIVE:
        return fma(x, y, acc), False
    if mode == FAST:
        s, t = two_sum(x * y, acc)
        if not (abs(s) < math.inf):
            t = 0.0
        return rn_fast(to_odd(s, t), spec), False
    r = fma(x, y, acc)
    t = 0.0
    bad = False
    if abs(r) < math.inf and x != 0.0 and y != 0.0 and abs(x) < math.inf \
            and abs(y) < math.inf:
        pr = x * y
        if abs(pr) < _TINY or abs(pr) > 2.0 ** 1000 or (r != 0.0 and abs(r) < _TINY):
            bad = True
        else:
            t = err_fma(x, y, acc, r)
            if t != t:
                bad = True
                t = 0.0
    bad = bad or (spec[0] <= 1 and t != 0.0)
    return rn(to_odd(r, t), spec), bad


@numba.njit(inline="always", error_model="numpy")
def _sum_sequential_loop(mode, x, out, unsafe, spec):
    """Sequential sums down axis 0 of x (n, R) (see :func:`sum_sequential`); ``mode`` is a
    constant FAST in one kernel below (its other branch folds away)."""
    n, R = x.shape
    if n == 0:
        for r in range(R):
            out[r] = 0.0
        return
    for r in range(R):
        out[r] = x[0, r]
    for k in range(1, n):
        if mode == FAST:
            for r in range(R):
                out[r] = rn_fast(out[r] + x[k, r], spec)
        else:
            for r in range(R):
                v, bad = _add_step(mode, out[r], x[k, r], spec)
                out[r] = v
                if bad:
                    unsafe[r] = 1


# FAST apart from the other paths: a FAST run compiles neither _add_step nor its EFTs.
@_jit
def sum_sequential_fast(x, out, unsafe, spec):
    """:func:`sum_sequential` on the FAST path."""
    _sum_sequential_loop(FAST, x, out, unsafe, spec)


@_jit
def sum_sequential_steps(mode, x, out, unsafe, spec):
    """:func:`sum_sequential` on the NATIVE and STICKY paths (one :func:`_add_step` per
    addition)."""
    _sum_sequential_loop(mode, x, out, unsafe, spec)


def sum_sequential(mode, x, out, unsafe, spec):
    """Sequential sums down axis 0 of x (n, R): out[r] = (((x0 + x1) + x2) + ...) with one
    rounding per addition; the first entry starts the accumulator, n = 0 gives +0.  Looping
    r innermost keeps the R independent chains in SIMD lanes.  The compiled kernel of the
    path."""
    if mode == FAST:
        sum_sequential_fast(x, out, unsafe, spec)
    else:
        sum_sequential_steps(mode, x, out, unsafe, spec)


@numba.njit(inline="always")
def carry_odd(buf, m):
    """The end of one pairwise level over the first m rows of ``buf`` (the sums of adjacent
    pairs written to its first m // 2 rows): an odd last row is carried up unchanged.
    Returns the next level's row count (binary32_hw.sum32_pairwise uses it too)."""
    half = m // 2
    if m % 2 == 1:
        for r in range(buf.shape[1]):
            buf[half, r] = buf[m - 1, r]
    return half + m % 2


@_jit
def sum_pairwise(mode, x, out, unsafe, spec):
    """Pairwise sums down axis 0 of x (n, R), level by level: each level adds adjacent
    pairs (0,1), (2,3), ... with one rounding each and carries an odd last entry up
    unchanged, until one entry is left.  n = 0 gives +0."""
    n, R = x.shape
    if n == 0:
        for r in range(R):
            out[r] = 0.0
        return
    buf = x.copy()
    m = n
    # the level loop has a twin in matmul_pairwise (flags per (q, i, j) there): a shared
    # helper with its conditional flag store would stop the inner loops vectorising; and
    # one in binary32_hw.sum32_pairwise (float32 hardware adds, no rounding call)
    while m > 1:
        half = m // 2
        for i in range(half):
            if mode == FAST:
                dst, s1, s2 = buf[i], buf[2 * i], buf[2 * i + 1]
                for r in range(R):
                    dst[r] = rn_fast(s1[r] + s2[r], spec)
                continue
            for r in range(R):
                v, bad = _add_step(mode, buf[2 * i, r], buf[2 * i + 1, r], spec)
                buf[i, r] = v
                if bad:
                    unsafe[r] = 1
        m = carry_odd(buf, m)
    for r in range(R):
        out[r] = buf[0, r]


@_jit
def matmul_hw(fused, a, b, out):
    """Sequential dot products in hardware float32 for binary32 (IEEE binary32 add and mul
    round to nearest-even with subnormals and overflow to inf: exactly the format's
    rounding, in 8 SIMD lanes; float32 arrays in, float32 out).  acc = a0*b0,
    then acc = acc + a*b (two roundings; Numba does not contract them into an fma) or, with
    ``fused``, acc = fma(a, b, acc).  Four rows of a share each row of b; j innermost
    keeps independent chains in SIMD lanes while every chain keeps its k order."""
    nb, M, K = a.shape
    N = b.shape[2]
    acc = np.zeros((4, N), dtype=a.dtype)
    for q in range(nb):
        for i0 in range(0, M, 4):
            ih = min(4, M - i0)
            if K == 0:
                for r in range(ih):
                    for j in range(N):
                        out[q, i0 + r, j] = 0.0
                continue
            brow = b[q, 0]
            for r in range(ih):
                av = a[q, i0 + r, 0]
                accr = acc[r]
                for j in range(N):
                    accr[j] = av * brow[j]
            for k in range(1, K):
                brow = b[q, k]
                for r in range(ih):
                    av = a[q, i0 + r, k]
                    accr = acc[r]
                    if fused:
                        for j in range(N):
                            accr[j] = fma(av, brow[j], accr[j])
                    else:
                        for j in range(N):
                            accr[j] = accr[j] + av * brow[j]
            for r in range(ih):
                for j in range(N):
                    out[q, i0 + r, j] = acc[r, j]


@_inline
def _matmul_sequential_loop(mode, fused, a, b, out, unsafe, spec):
    """Batched dot products out[q, i, j] = sum_k a[q, i, k] * b[q, k, j] in sequential k
    order, emulated in float64.  ``fused=False``: acc = RN(acc + RN(a*b)); ``fused=True``:
    acc = RN(a*b + acc) (one rounding).  The first product RN(a0*b0) starts the
    accumulator; K = 0 gives +0.  Loop order i, k, j with j innermost: B's rows are
    contiguous and the independent chains of one output row fill the SIMD lanes; the k
    order of every chain is kept."""
    nb, M, K = a.shape
    N = b.shape[2]
    acc = np.empty(N)
    for q in range(nb):
        for i in range(M):
            if K == 0:
                for j in range(N):
                    out[q, i, j] = 0.0
                continue
            av = a[q, i, 0]
            brow = b[q, 0]
            if mode == FAST:
                for j in range(N):
                    acc[j] = rn_fast(av * brow[j], spec)
            else:
                for j in range(N):
                    v, bad = _mul_step(mode, av, brow[j], spec)
                    acc[j] = v
                    if bad:
                        unsafe[q, i, j] = 1
            for k in range(1, K):
                av = a[q, i, k]
                brow = b[q, k]
                if mode == FAST and not fused:
                    for j in range(N):
                        acc[j] = rn_fast(acc[j] + rn_fast(av * brow[j], spec), spec)
                elif mode == FAST:
                    for j in range(N):
                        s, t = two_sum(av * brow[j], acc[j])
                        if not (abs(s) < math.inf):
                            t = 0.0
                        acc[j] = rn_fast(to_odd(s, t), spec)
                elif mode == NATIVE and not fused:
                    for j in range(N):
                        acc[j] = acc[j] + av * brow[j]
                elif mode == NATIVE:
                    for j in range(N):
                        acc[j] = fma(av, brow[j], acc[j])
                elif not fused:
                    for j in range(N):
                        pv, bad1 = _mul_step(mode, av, brow[j], spec)
                        v, bad2 = _add_step(mode, acc[j], pv, spec)
                        acc[j] = v
                        if bad1 or bad2:
                            unsafe[q, i, j] = 1
                else:
                    for j in range(N):
                        v, bad = _fma_step(mode, av, brow[j], acc[j], spec)
                        acc[j] = v
                        if bad:
                            unsafe[q, i, j] = 1
            for j in range(N):
                out[q, i, j] = acc[j]


# One compiled kernel per (path, fused): with mode and fused as runtime arguments one
# kernel held all six loops and cost about 3 s of CPU to compile cold, while a run uses one
# or two of them (a default 'scalarlab compare': FAST unfused only).  Each calls the
# inlined loop with constants, so Numba prunes the other branches before typing them.
@_jit
def matmul_sequential_fast(a, b, out, unsafe, spec):
    """:func:`matmul_sequential` on the FAST path, unfused."""
    _matmul_sequential_loop(FAST, False, a, b, out, unsafe, spec)


@_jit
def matmul_sequential_fast_fused(a, b, out, unsafe, spec):
    """:func:`matmul_sequential` on the FAST path, fused."""
    _matmul_sequential_loop(FAST, True, a, b, out, unsafe, spec)


@_jit
def matmul_sequential_native(a, b, out, unsafe, spec):
    """:func:`matmul_sequential` on the NATIVE path (binary64), unfused."""
    _matmul_sequential_loop(NATIVE, False, a, b, out, unsafe, spec)


@_jit
def matmul_sequential_native_fused(a, b, out, unsafe, spec):
    """:func:`matmul_sequential` on the NATIVE path (binary64), fused."""
    _matmul_sequential_loop(NATIVE, True, a, b, out, unsafe, spec)


@_jit
def matmul_sequential_sticky(a, b, out, unsafe, spec):
    """:func:`matmul_sequential` on the STICKY path, unfused."""
    _matmul_sequential_loop(STICKY, False, a, b, out, unsafe, spec)


@_jit
def matmul_sequential_sticky_fused(a, b, out, unsafe, spec):
    """:func:`matmul_sequential` on the STICKY path, fused."""
    _matmul_sequential_loop(STICKY, True, a, b, out, unsafe, spec)


_MATMUL_SEQUENTIAL = {(FAST, False): matmul_sequential_fast,
                      (FAST, True): matmul_sequential_fast_fused,
                      (NATIVE, False): matmul_sequential_native,
                      (NATIVE, True): matmul_sequential_native_fused,
                      (STICKY, False): matmul_sequential_sticky,
                      (STICKY, True): matmul_sequential_sticky_fused}


def matmul_sequential(mode, fused, a, b, out, unsafe, spec):
    """Batched dot products out[q, i, j] = sum_k a[q, i, k] * b[q, k, j] in sequential k
    order, emulated in float64 (see :func:`_matmul_sequential_loop`); dispatches to the
    compiled kernel of ``(mode, fused)``, so a run compiles only the paths it uses."""
    _MATMUL_SEQUENTIAL[(int(mode), bool(fused))](a, b, out, unsafe, spec)


_JB = 64   # pairwise: column block of the K x _JB product buffer


@_jit
def matmul_pairwise(mode, a, b, out, unsafe, spec):
    """Batched dot products whose K rounded products are summed by the pairwise tree of
    :func:`sum_pairwise` (adjacent pairs level by level, odd last entry carried up)."""
    nb, M, K = a.shape
    N = b.shape[2]
    buf = np.empty((max(K, 1), _JB))
    for q in range(nb):
        for j0 in range(0, N, _JB):
            jw = min(_JB, N - j0)
            for i in range(M):
                if K == 0:
                    for j in range(jw):
                        out[q, i, j0 + j] = 0.0
                    continue
                for k in range(K):
                    av = a[q, i, k]
                    brow = b[q, k, j0:j0 + jw]
                    if mode == FAST:
                        bk = buf[k]
                        for j in range(jw):
                            bk[j] = rn_fast(av * brow[j], spec)
                        continue
                    for j in range(jw):
                        v, bad = _mul_step(mode, av, brow[j], spec)
                        buf[k, j] = v
                        if bad:
                            unsafe[q, i, j0 + j] = 1
                # sum_pairwise's level loop (its twin; kept in place so the loops vectorise)
                m = K
                while m > 1:
                    half = m // 2
                    for t in range(half):
                        if mode == FAST:
                            dst, s1, s2 = buf[t], buf[2 * t], buf[2 * t + 1]
                            for j in range(jw):
                                dst[j] = rn_fast(s1[j] + s2[j], spec)
                            continue
                        for j in range(jw):
                            v, bad = _add_step(mode, buf[2 * t, j], buf[2 * t + 1, j], spec)
                            buf[t, j] = v
                            if bad:
                                unsafe[q, i, j0 + j] = 1
                    if m % 2 == 1:
                        for j in range(jw):
                            buf[half, j] = buf[m - 1, j]
                    m = half + m % 2
                for j in range(jw):
                    out[q, i, j0 + j] = buf[0, j]
