"""binary32 arithmetic on hardware float32: the IEEE rounding itself, at SIMD speed.

IEEE 754 binary32 ``+ - * / sqrt fma`` in hardware round to nearest-even with gradual
underflow and overflow to inf, which is exactly what the ``binary32`` context promises
(:mod:`scalars.binary`).  The context stores its values as float32 arrays
(:mod:`scalars.binary32_store`) and computes those operations here, in float32, with no
conversions.  Three things could still make this differ from the emulated path (float64
operation and one rounding, :mod:`scalars.kernels.binary_format`), and each is handled:

* **Flush-to-zero / denormals-are-zero.**  Some library in the process may set the MXCSR
  FTZ/DAZ bits (``torch.set_flush_denormal``, fast-math builds).  :func:`ftz`,
  :func:`flush_to_zero` (and ``_ftz_on`` inside compiled code) multiply two
  subnormal-range values held as data and compare with the IEEE answer; when it is on,
  the caller takes the emulated path, converting between float32 storage and float64
  bit by bit (:func:`widen_bits`, :func:`narrow_bits`), since under FTZ/DAZ even the
  hardware casts flush subnormals.
* **Membership.**  A float32 array holds binary32 values by construction.  A float64 array
  given as a value is checked: converting a float64 to float32 is exact exactly for
  binary32 values, so ``float64(float32(v))`` having v's bits checks membership in the same
  pass that narrows it (:func:`narrow`, :func:`nonmembers`).
* **NaN bits.**  A NaN result is recomputed as the emulated path computes it (the float64
  operation on the widened operands, whose NaN the rounding leaves alone, narrowed), so
  NaN payloads and signs do not depend on how LLVM orders commutative operands.  ``sqrt``
  of a negative number gives the emulated path's NaN.

Kernels take C-contiguous arrays; each has one compiled signature.
"""
from __future__ import annotations

import numba
import numpy as np

from .binary_format import carry_odd
from .eft import f2i, fma, i2f, two_sum

_jit = numba.njit(cache=True, error_model="numpy", nogil=True)

OK, FTZ = 0, 2
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


def flush_to_zero(probe=PROBE) -> bool:
    """True when this thread's float32 arithmetic flushes subnormals (FTZ or DAZ set): the
    product of the two float32 scalars of ``probe`` in numpy (the same SSE multiply that
    compiled code runs under the thread's MXCSR; no kernel to compile for it)."""
    return float(probe[0] * probe[1]) != _PROBE_WANT


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


# ---------------------------------------------------------------------- float32 storage
# The kernels below read and write float32 storage directly: no float64 round trip, 12
# bytes moved per element of a binary operation, as numpy float32.  They do not probe
# FTZ/DAZ themselves: the caller checks ``ftz()`` first (one scalar float32 product) and
# takes the emulated path when it is on.  The caller allocates ``out`` with numpy (whose
# allocator asks for transparent huge pages: a 40 MB result otherwise costs 10,000 page
# faults) and nothing is returned (boxing a returned array costs as much as the call).



# MXCSR's FTZ and DAZ bits govern float32 and float64 SSE arithmetic alike, so a Python
# float product (the same SSE multiply, about 20 ns) probes them: 2^-1073 * 0.5 is the
# least float64 subnormal with gradual underflow, 0 under FTZ (result) or DAZ (operand).
# Compared with 0.0, not with 2^-1074: under DAZ the comparison would read that as 0.
_T64, _HALF = 2.0 ** -1073, 0.5


def ftz() -> bool:
    """True when this thread's floating-point arithmetic flushes subnormals (FTZ or DAZ):
    a product of two Python floats computed at run time in this thread."""
    return _T64 * _HALF == 0.0


@numba.njit(inline="always")
def _op64(op, x, y):
    """The emulated path's value of x op y for float32 x, y: float64 operation (exact
    inputs; its NaN survives the rounding unchanged), narrowed."""
    return np.float32(_op(op, np.float64(x), np.float64(y)))


@numba.njit(inline="always")
def _binop_loop(op, a, b, out):
    """out = RN32(a op b) over float32 1-d arrays of one length; ``op`` is a constant in
    every kernel that inlines this, so its test folds away and the loop vectorises."""
    n = a.size
    nan = False
    for i in range(n):
        v = _op(op, a[i], b[i])
        nan |= v != v
        out[i] = v
    if nan:
        for i in range(n):
            if out[i] != out[i]:
                out[i] = _op64(op, a[i], b[i])


@numba.njit(inline="always")
def _binop_rows(op, a, b, out):
    """:func:`_binop_loop` per row of the (R, m) ``out``; ``a`` and ``b`` are (R, m) or
    (1, m) (one row repeated: a trailing-axes broadcast read in place)."""
    sa = 0 if a.shape[0] == 1 else 1
    sb = 0 if b.shape[0] == 1 else 1
    for r in range(out.shape[0]):
        _binop_loop(op, a[r * sa], b[r * sb], out[r])


# One kernel per operation (and per layout), so that a run compiles the operations it uses
# only: one loop compiles in about 0.25 s cold, the four behind an op switch took 0.8 s.
@_jit
def add32(a, b, out):
    """out = RN32(a + b) for float32 1-d arrays of one length."""
    _binop_loop(ADD, a, b, out)


@_jit
def sub32(a, b, out):
    """out = RN32(a - b) for float32 1-d arrays of one length."""
    _binop_loop(SUB, a, b, out)


@_jit
def mul32(a, b, out):
    """out = RN32(a * b) for float32 1-d arrays of one length."""
    _binop_loop(MUL, a, b, out)


@_jit
def div32(a, b, out):
    """out = RN32(a / b) for float32 1-d arrays of one length."""
    _binop_loop(DIV, a, b, out)


@_jit
def add32_rows(a, b, out):
    """:func:`add32` over the rows of 2-d float32 C arrays (see :func:`_binop_rows`)."""
    _binop_rows(ADD, a, b, out)


@_jit
def sub32_rows(a, b, out):
    """:func:`sub32` over the rows of 2-d float32 C arrays (see :func:`_binop_rows`)."""
    _binop_rows(SUB, a, b, out)


@_jit
def mul32_rows(a, b, out):
    """:func:`mul32` over the rows of 2-d float32 C arrays (see :func:`_binop_rows`)."""
    _binop_rows(MUL, a, b, out)


@_jit
def div32_rows(a, b, out):
    """:func:`div32` over the rows of 2-d float32 C arrays (see :func:`_binop_rows`)."""
    _binop_rows(DIV, a, b, out)


#: the elementwise kernels by op code (ADD SUB MUL DIV): 1-d, and rows
BINOP32 = (add32, sub32, mul32, div32)
BINOP32_ROWS = (add32_rows, sub32_rows, mul32_rows, div32_rows)


@_jit
def sqrt32(a, out):
    """out = RN32(sqrt(a)) on float32 1-d arrays; sqrt(-0) = -0, NaNs as the emulated
    path (a NaN operand quietened, sqrt of a negative number the float64 default NaN,
    narrowed)."""
    n = a.size
    nan = False
    for i in range(n):
        r = np.sqrt(a[i])
        nan |= r != r
        out[i] = r
    if nan:
        ua, uo = a.view(np.uint32), out.view(np.uint32)
        for i in range(n):
            if out[i] != out[i]:
                x = a[i]
                # the NaN operand quietened (as widening it does), or the float64 default
                # NaN narrowed (+, quiet); bit operations, which LLVM does not fold away
                uo[i] = ua[i] | 0x400000 if x != x else np.uint32(0x7FC00000)


@_jit
def fma32(a, b, c, out):
    """out = RN32(a*b + c) with one rounding (llvm.fma.f32) on float32 1-d arrays of one
    length; NaN results as the emulated FAST fma (TwoSum of the exact float64 product and
    c)."""
    n = a.size
    nan = False
    for i in range(n):
        r = fma(a[i], b[i], c[i])
        nan |= r != r
        out[i] = r
    if nan:
        for i in range(n):
            if out[i] != out[i]:
                x, y, z = np.float64(a[i]), np.float64(b[i]), np.float64(c[i])
                out[i] = np.float32(two_sum(x * y, z)[0])


# The emulated NaN of every chain whose float32 sum is NaN: float64 additions of the exact
# inputs, RN32 after each, in the chain's order (so the bits do not depend on LLVM's operand
# order).  One helper per order: a dead branch with an allocation still costs its compile.
@numba.njit(inline="always")
def _nan_sequential(x, out):
    """Redo the NaN chains of :func:`sum32_sequential` as the emulation does."""
    n, R = x.shape
    for r in range(R):
        if out[r] != out[r]:
            acc = np.float64(x[0, r])
            for k in range(1, n):
                acc = np.float64(np.float32(acc + np.float64(x[k, r])))
            out[r] = np.float32(acc)


@numba.njit(inline="always")
def _nan_pairwise(x, out):
    """Redo the NaN chains of :func:`sum32_pairwise` as the emulation does."""
    n, R = x.shape
    col = np.empty(n, np.float64)
    for r in range(R):
        if out[r] == out[r]:
            continue
        for k in range(n):
            col[k] = np.float64(x[k, r])
        m = n
        while m > 1:
            half = m // 2
            for i in range(half):
                col[i] = np.float64(np.float32(col[2 * i] + col[2 * i + 1]))
            if m % 2 == 1:
                col[half] = col[m - 1]
            m = half + m % 2
        out[r] = np.float32(col[0])


@numba.njit(inline="always")
def _any_nan(out):
    nan = False
    for r in range(out.size):
        nan |= out[r] != out[r]
    return nan


# sum32_sequential and sum32_pairwise: one kernel per order (a run compiles the one its
# context uses; together they took 0.9 s cold).  The caller gives a zeroed ``out`` (n = 0
# sums to +0).
@_jit
def sum32_sequential(x, out):
    """out = the sums down axis 0 of the float32 (n, R) array ``x`` in binary32 hardware,
    in the order of :func:`scalars.kernels.binary_format.sum_sequential` (left to right,
    the first entry starts the accumulator).  R independent chains run in SIMD lanes."""
    n, R = x.shape
    if n == 0:
        return
    for r in range(R):
        out[r] = x[0, r]
    for k in range(1, n):
        xk = x[k]
        for r in range(R):
            out[r] = out[r] + xk[r]
    if _any_nan(out):
        _nan_sequential(x, out)


@_jit
def sum32_pairwise(x, out):
    """As :func:`sum32_sequential` in the order of
    :func:`scalars.kernels.binary_format.sum_pairwise` (adjacent pairs level by level, an
    odd last entry carried up)."""
    n, R = x.shape
    if n == 0:
        return
    buf = x.copy()
    m = n
    # twin of binary_format.sum_pairwise's FAST levels: float32 hardware adds here, float64
    # adds + rn_fast there (a shared helper would need the rounding as an argument)
    while m > 1:
        half = m // 2
        for i in range(half):
            dst, s1, s2 = buf[i], buf[2 * i], buf[2 * i + 1]
            for r in range(R):
                dst[r] = s1[r] + s2[r]
        m = carry_odd(buf, m)
    for r in range(R):
        out[r] = buf[0, r]
    if _any_nan(out):
        _nan_pairwise(x, out)


@_jit
def narrow_rn(a):
    """float32 array of RN-even(a) for the float64 1-d array ``a`` by the hardware cast
    (one correct rounding, gradual underflow, overflow to inf, NaN quietened with its
    payload truncated) with FTZ off; no numpy cast warnings."""
    out = np.empty(a.size, np.float32)
    for i in range(a.size):
        out[i] = np.float32(a[i])
    return out


@_jit
def widen(a):
    """float64 copy of the float32 1-d array ``a`` by the hardware conversion (exact when
    DAZ is off; no numpy cast warnings for signalling NaNs, which it quietens)."""
    out = np.empty(a.size, np.float64)
    for i in range(a.size):
        out[i] = np.float64(a[i])
    return out


@_jit
def widen_bits(a):
    """float64 copy of the float32 1-d array ``a``, built from the bit patterns: exact also
    when DAZ would read subnormal inputs as zero (NaN quietened, payload kept, as the
    hardware conversion does)."""
    n = a.size
    u = a.view(np.uint32)
    out = np.empty(n, np.float64)
    for i in range(n):
        w = np.int64(u[i])
        s = (w >> 31) << 63
        e = (w >> 23) & 0xFF
        m = w & 0x7FFFFF
        if e == 0:
            # zero or subnormal: m * 2^-149 is a normal float64 product, exact
            v = np.float64(m) * 2.0 ** -149
            out[i] = -v if s else v
        elif e == 0xFF:
            q = (np.int64(1) << 51) if m else np.int64(0)
            out[i] = i2f(s | (np.int64(0x7FF) << 52) | (m << 29) | q)
        else:
            out[i] = i2f(s | ((e - 127 + 1023) << 52) | (m << 29))
    return out


@_jit
def narrow_bits(a):
    """float32 copy of the float64 1-d array ``a`` of binary32 values (membership checked
    by the caller), built from the bit patterns: exact also when FTZ would flush subnormal
    results (NaN: quietened, payload truncated, as the hardware conversion does)."""
    n = a.size
    out = np.empty(n, np.float32)
    o = out.view(np.uint32)
    for i in range(n):
        w = f2i(a[i])
        s = np.int64(0x80000000) if w < 0 else np.int64(0)
        e = (w >> 52) & 0x7FF
        m = w & 0xFFFFFFFFFFFFF
        if e == 0x7FF:
            mm = (m >> 29) | 0x400000 if m else 0
            o[i] = np.uint32(s | 0x7F800000 | mm)
        elif e == 0:
            o[i] = np.uint32(s)                 # float64 subnormals round to 0 in binary32
        else:
            E = e - 1023
            if E >= -126:
                o[i] = np.uint32(s | ((E + 127) << 23) | (m >> 29))
            elif E >= -150:
                o[i] = np.uint32(s | ((m | (np.int64(1) << 52)) >> (29 + (-126 - E))))
            else:
                o[i] = np.uint32(s)
    return out
