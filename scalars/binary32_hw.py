"""binary32 arithmetic on hardware float32: the IEEE rounding itself, at SIMD speed.

IEEE 754 binary32 ``+ - * / sqrt fma`` in hardware round to nearest-even with gradual
underflow and overflow to inf, which is exactly what the ``binary32`` context promises
(:mod:`scalars.binary`).  So the context may compute them in float32 and convert back to
float64 (exact: every float32 is a float64) instead of emulating the rounding.  Three things
could still make the two paths differ, and each is handled here:

* **Flush-to-zero / denormals-are-zero.**  Some library in the process may set the MXCSR
  FTZ/DAZ bits (``torch.set_flush_denormal``, fast-math builds).  Every kernel first
  multiplies two subnormal-range float32 values passed in as data (so LLVM cannot fold it)
  and compares with the IEEE answer; on a mismatch it computes nothing and returns
  ``FTZ``: the caller takes the emulated path.
* **Membership.**  Operands must be binary32 values (the context's contract).  Converting a
  float64 to float32 is exact exactly for those, so ``float64(float32(v))`` having v's bits
  checks membership in the same pass; a non-member (or a NaN whose payload float32 cannot
  carry) makes the kernel return ``NONMEMBER`` and the caller's emulated path takes over
  (raising its error naming the element, or computing with that NaN).
* **NaN bits.**  A NaN result is recomputed as the emulated path computes it (the float64
  operation, whose NaN the rounding leaves alone), so even NaN payloads and signs are the
  same bits.  ``sqrt`` of a negative number uses the emulated path's IEEE rule.

Kernels take 1-d float64 arrays and write a float64 ``out``; each has one compiled
signature.  Return codes: ``OK``, ``NONMEMBER``, ``FTZ``.
"""
from __future__ import annotations

import math

import numba
import numpy as np

from .eft import f2i, fma, two_sum

_jit = numba.njit(cache=True, error_model="numpy", nogil=True)

OK, NONMEMBER, FTZ = 0, 1, 2
ADD, SUB, MUL, DIV = 0, 1, 2, 3

# 2^-148 * 0.5 = 2^-149 (the least positive binary32 subnormal) with gradual underflow;
# 0 with FTZ or DAZ.  Kept as arrays so that the product is computed at run time.
PROBE = np.array([2.0 ** -148, 0.5], dtype=np.float32)
_PROBE_WANT = 2.0 ** -149


@numba.njit(inline="always")
def _ftz_on(probe):
    return np.float64(probe[0] * probe[1]) != _PROBE_WANT


@numba.njit(inline="always")
def _diff(v, f):
    """Nonzero unless the float64 v is the float32 f exactly (bit for bit: a NaN whose
    payload float32 cannot carry counts as a non-member here, and the emulated path, which
    accepts it, takes over)."""
    return f2i(np.float64(f)) ^ f2i(v)


@_jit
def _nan_fix(op, a, b, out):
    """The emulated path's NaN where out is NaN: the float64 operation's own (its rounding
    leaves a NaN alone)."""
    for i in range(out.size):
        if out[i] != out[i]:
            x, y = a[i], b[i]
            if op == ADD:
                out[i] = x + y
            elif op == SUB:
                out[i] = x - y
            elif op == MUL:
                out[i] = x * y
            else:
                out[i] = x / y


# One kernel per operation (a switch inside the loop would stop LLVM's vectoriser):
# convert, check membership, operate in float32, widen; membership and NaN results are
# integer OR-reductions, which vectorise.
@_jit
def add(a, b, out, probe):
    """out = RN32(a + b) (a, b, out: same length)."""
    if _ftz_on(probe):
        return FTZ
    bad = 0
    nan = False
    for i in range(out.size):
        x, y = a[i], b[i]
        fx, fy = np.float32(x), np.float32(y)
        bad |= _diff(x, fx) | _diff(y, fy)
        r = np.float64(fx + fy)
        nan |= r != r
        out[i] = r
    if bad:
        return NONMEMBER
    if nan:
        _nan_fix(ADD, a, b, out)
    return OK


@_jit
def sub(a, b, out, probe):
    """out = RN32(a - b)."""
    if _ftz_on(probe):
        return FTZ
    bad = 0
    nan = False
    for i in range(out.size):
        x, y = a[i], b[i]
        fx, fy = np.float32(x), np.float32(y)
        bad |= _diff(x, fx) | _diff(y, fy)
        r = np.float64(fx - fy)
        nan |= r != r
        out[i] = r
    if bad:
        return NONMEMBER
    if nan:
        _nan_fix(SUB, a, b, out)
    return OK


@_jit
def mul(a, b, out, probe):
    """out = RN32(a * b)."""
    if _ftz_on(probe):
        return FTZ
    bad = 0
    nan = False
    for i in range(out.size):
        x, y = a[i], b[i]
        fx, fy = np.float32(x), np.float32(y)
        bad |= _diff(x, fx) | _diff(y, fy)
        r = np.float64(fx * fy)
        nan |= r != r
        out[i] = r
    if bad:
        return NONMEMBER
    if nan:
        _nan_fix(MUL, a, b, out)
    return OK


@_jit
def div(a, b, out, probe):
    """out = RN32(a / b) (x/0 gives inf or NaN as IEEE says)."""
    if _ftz_on(probe):
        return FTZ
    bad = 0
    nan = False
    for i in range(out.size):
        x, y = a[i], b[i]
        fx, fy = np.float32(x), np.float32(y)
        bad |= _diff(x, fx) | _diff(y, fy)
        r = np.float64(fx / fy)
        nan |= r != r
        out[i] = r
    if bad:
        return NONMEMBER
    if nan:
        _nan_fix(DIV, a, b, out)
    return OK


@_jit
def sqrt(a, out, probe):
    """out = RN32(sqrt(a)); sqrt(-0) = -0, sqrt(negative) = NaN as the emulated path."""
    if _ftz_on(probe):
        return FTZ
    bad = 0
    nan = False
    for i in range(out.size):
        x = a[i]
        fx = np.float32(x)
        bad |= _diff(x, fx)
        r = np.float64(np.sqrt(fx))
        nan |= r != r
        out[i] = r
    if bad:
        return NONMEMBER
    if nan:
        for i in range(out.size):
            if out[i] != out[i]:
                x = a[i]
                out[i] = x if x != x else math.nan     # binary_kernels._sqrt's NaNs
    return OK


@_jit
def fused(a, b, c, out, probe):
    """out = RN32(a*b + c), one rounding (LLVM's llvm.fma.f32)."""
    if _ftz_on(probe):
        return FTZ
    bad = 0
    nan = False
    for i in range(out.size):
        x, y, z = a[i], b[i], c[i]
        fx, fy, fz = np.float32(x), np.float32(y), np.float32(z)
        bad |= _diff(x, fx) | _diff(y, fy) | _diff(z, fz)
        r = np.float64(fma(fx, fy, fz))
        nan |= r != r
        out[i] = r
    if bad:
        return NONMEMBER
    if nan:
        for i in range(out.size):
            if out[i] != out[i]:
                # The emulated FAST fma: TwoSum of the exact float64 product and c; a NaN
                # sum is returned as it is.
                out[i] = two_sum(a[i] * b[i], c[i])[0]
    return OK
