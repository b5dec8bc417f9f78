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

Kernels take C-contiguous float64 arrays and write a float64 ``out``; each has one
compiled signature.  Return codes: ``OK``, ``NONMEMBER``, ``FTZ``.
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


@numba.njit(inline="always")
def _op(op, x, y):
    if op == ADD:
        return x + y
    if op == SUB:
        return x - y
    if op == MUL:
        return x * y
    return x / y


@_jit
def binop(op, a, b, out, probe):
    """out = RN32(a op b) for op in ADD SUB MUL DIV.  2-d C arrays: ``out`` is (R, m); ``a``
    and ``b`` are (R, m) or (1, m) (one row repeated: a trailing-axes broadcast without a
    copy).  The op switch sits outside the contiguous inner loop, which vectorises;
    membership and NaN results are integer OR-reductions."""
    if _ftz_on(probe):
        return FTZ
    R, m = out.shape
    bad = 0
    nan = False
    for r in range(R):
        ar = a[0] if a.shape[0] == 1 else a[r]
        br = b[0] if b.shape[0] == 1 else b[r]
        orow = out[r]
        if op == ADD:
            for j in range(m):
                x, y = ar[j], br[j]
                fx, fy = np.float32(x), np.float32(y)
                bad |= _diff(x, fx) | _diff(y, fy)
                v = np.float64(fx + fy)
                nan |= v != v
                orow[j] = v
        elif op == SUB:
            for j in range(m):
                x, y = ar[j], br[j]
                fx, fy = np.float32(x), np.float32(y)
                bad |= _diff(x, fx) | _diff(y, fy)
                v = np.float64(fx - fy)
                nan |= v != v
                orow[j] = v
        elif op == MUL:
            for j in range(m):
                x, y = ar[j], br[j]
                fx, fy = np.float32(x), np.float32(y)
                bad |= _diff(x, fx) | _diff(y, fy)
                v = np.float64(fx * fy)
                nan |= v != v
                orow[j] = v
        else:
            for j in range(m):
                x, y = ar[j], br[j]
                fx, fy = np.float32(x), np.float32(y)
                bad |= _diff(x, fx) | _diff(y, fy)
                v = np.float64(fx / fy)
                nan |= v != v
                orow[j] = v
        if bad:
            return NONMEMBER
    if nan:
        # The emulated path's NaN: the float64 operation's own (its rounding leaves a NaN
        # alone), so NaN payloads and signs are the same bits.
        for r in range(R):
            ar = a[0] if a.shape[0] == 1 else a[r]
            br = b[0] if b.shape[0] == 1 else b[r]
            for j in range(m):
                if out[r, j] != out[r, j]:
                    out[r, j] = _op(op, ar[j], br[j])
    return OK


def add(a, b, out, probe):
    """out = RN32(a + b) on 1-d arrays of one length (see :func:`binop`)."""
    return binop(ADD, a.reshape(1, -1), b.reshape(1, -1), out.reshape(1, -1), probe)


def sub(a, b, out, probe):
    return binop(SUB, a.reshape(1, -1), b.reshape(1, -1), out.reshape(1, -1), probe)


def mul(a, b, out, probe):
    return binop(MUL, a.reshape(1, -1), b.reshape(1, -1), out.reshape(1, -1), probe)


def div(a, b, out, probe):
    return binop(DIV, a.reshape(1, -1), b.reshape(1, -1), out.reshape(1, -1), probe)


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


@_jit
def narrow(a, out):
    """out (float32) = a (float64, 1-d) where every entry is a binary32 value bit for bit;
    returns the number of entries that are not (then ``out`` is meaningless)."""
    bad = 0
    for i in range(a.size):
        x = a[i]
        f = np.float32(x)
        bad |= _diff(x, f)
        out[i] = f
    return bad


@_jit
def flush_to_zero(probe):
    """True when this thread's float32 arithmetic flushes subnormals (FTZ or DAZ set)."""
    return _ftz_on(probe)


@_jit
def nonmembers(a):
    """Nonzero when some entry of the float64 1-d array ``a`` is not bit for bit a binary32
    value (NaNs with payloads float32 cannot carry included): a vectorised pre-check; the
    emulated check then names the element (or accepts such a NaN)."""
    bad = 0
    for i in range(a.size):
        x = a[i]
        bad |= _diff(x, np.float32(x))
    return bad


@_jit
def round32(a, out, probe):
    """out = RN-even of the float64 ``a`` onto binary32 by the hardware conversion (one
    correct rounding, gradual underflow, overflow to inf); NaN keeps its bits, as
    scalars.formats.round_to_format does."""
    if _ftz_on(probe):
        return FTZ
    for i in range(a.size):
        x = a[i]
        r = np.float64(np.float32(x))
        out[i] = x if x != x else r
    return OK
