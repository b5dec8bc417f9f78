"""binary32 values stored as float32 arrays: the storage layer of the binary32 contexts.

A float32 array *is* an array of binary32 values, bit for bit, so the ``binary32``,
``binary32+fma`` and ``binary32/pairwise`` contexts keep their values as float32 ndarrays
(every other binary format keeps float64 arrays of format values; see
:mod:`scalars.binary`).  That halves the memory traffic of every operation against float64
storage and lets ``+ - * / sqrt fma`` run on the float32 hardware with no conversions:
IEEE binary32 arithmetic rounds to nearest-even with gradual underflow and overflow to
inf, which is the context's rounding exactly (:mod:`scalars.kernels.binary32_hw`).

The boundary:

* a float32 array needs no membership check; it is used as it is (no copy);
* a float64 array (or a Python/numpy float) is accepted where a value is expected if every
  entry is a binary32 value, checked exactly as the float64-storage contexts check
  membership (a non-member is a ContextError naming op, context, value and index), and
  narrowed once; ``convert`` rounds float64 arrays once instead (that is its job);
* ``to_float64`` widens (exactly).

Flush-to-zero: a library in the process may set FTZ/DAZ (``torch.set_flush_denormal``).
Then float32 hardware would flush subnormals, and even the float32 <-> float64 casts
would; so every fast path first asks :func:`scalars.kernels.binary32_hw.ftz` (one float32 scalar
product), and when it is on the operation takes the emulated float64 path of
:class:`scalars.binary.BinaryContext` on operands widened bit by bit, its result narrowed
bit by bit (``widen_bits``/``narrow_bits``): the same values, slower.

Everything that is not a hardware fast path here (exp, log, ..., pow, heaviside, sign,
argmax, the emulated fallbacks) is the float64 implementation of BinaryContext on widened
operands, its result narrowed: those results are binary32 values, so narrowing is exact.
"""
from __future__ import annotations

import math

import numpy as np

from .kernels import binary32_hw as H
from .kernels.flat import writable
from .base import check_broadcast
from .errors import ContextError

_ND = np.ndarray
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_CODES = {"add": H.ADD, "sub": H.SUB, "mul": H.MUL, "div": H.DIV}
_empty = np.empty
_T64, _HALF = H._T64, H._HALF           # not H.ftz(): _T64 * _HALF != 0.0, inline


def _flat(a: np.ndarray, shape) -> np.ndarray:
    """``a`` broadcast to ``shape`` as a C-contiguous 1-d array (a view when it is one)."""
    if a.shape != tuple(shape):
        a = np.broadcast_to(a, shape)
    return np.ascontiguousarray(a).reshape(-1)


def _trailing(small, shape) -> bool:
    """Whether ``small`` broadcasts to ``shape`` by repeating it whole (after its leading
    1s it equals the trailing axes of ``shape``)."""
    small = tuple(small)
    while small and small[0] == 1:
        small = small[1:]
    return len(small) <= len(shape) and tuple(shape[len(shape) - len(small):]) == small


def _fast_binop(op: str):
    """The method ``op`` (add sub mul div) of :class:`Float32Storage`: float32 operands
    of one shape go straight to the kernel (the test and call inline, no further Python
    frame), anything else through ``_binary``."""
    kernel = H.BINOP32[_CODES[op]]

    def method(self, a, b):
        if type(a) is _ND and type(b) is _ND and a.dtype is _F32 and b.dtype is _F32 \
                and a.shape == b.shape and _T64 * _HALF != 0.0:
            out = _empty(a.shape, _F32)
            # ravel: a view of C-contiguous storage, a C-order copy of anything else
            kernel(a.ravel(), b.ravel(), out if a.ndim == 1 else out.reshape(-1))
            return out
        return self._binary(op, a, b)

    method.__name__ = op
    method.__qualname__ = "Float32Storage." + op
    return method


class Float32Storage:
    """Mixin over :class:`scalars.binary.BinaryContext` for the binary32 format: values are
    float32 ndarrays.  ``_val`` (the float64 view the inherited emulated code works on)
    widens; the public methods return float32."""

    storage = "float32"

    # ------------------------------------------------------------------ boundary
    def _store(self, v, op: str, which: str = "operand") -> np.ndarray:
        """The float32 storage of a value: float32 arrays as they are, float64 arrays and
        floats checked for membership and narrowed once, anything else an error."""
        if isinstance(v, _ND) and v.dtype == _F32:
            return v if type(v) is _ND else np.asarray(v)
        if isinstance(v, np.float32):
            return np.asarray(v)
        if isinstance(v, _ND) and v.dtype != _F64:
            raise ContextError(f"context {self.name}: {op}: {which}: expected a float32 "
                               f"array (or a float64 array of binary32 values), got dtype "
                               f"{v.dtype} (a value of another context? convert it first)")
        if not isinstance(v, (_ND, float, np.floating)):
            raise ContextError(f"context {self.name}: {op}: {which}: expected a float32 "
                               f"array of binary32 values, got {type(v).__name__}")
        v = np.asarray(v, dtype=np.float64)
        out = np.empty(v.shape, dtype=np.float32)
        if v.size == 0:
            return out
        flat = np.ascontiguousarray(v).reshape(-1)
        if not H.narrow(flat, out.reshape(-1)):
            return out                           # every entry binary32, narrowed exactly
        # Some entry did not survive the hardware cast: a non-member (the inherited check
        # names it), a NaN payload float32 cannot carry, or FTZ/DAZ on: narrow bit by bit.
        super()._val(v, op, which)
        return H.narrow_bits(flat).reshape(v.shape)

    def _wide(self, x: np.ndarray) -> np.ndarray:
        """float64 copy of float32 storage (exact; bit by bit when DAZ is on)."""
        flat = np.ascontiguousarray(x).reshape(-1)
        return (H.widen_bits(flat) if H.ftz() else H.widen(flat)).reshape(x.shape)

    def _out(self, r):
        """A result of the inherited float64 code as float32 storage (the entries are
        binary32 values: exact, bit by bit when FTZ is on)."""
        if not isinstance(r, _ND) or r.dtype != _F64:
            return r
        flat = np.ascontiguousarray(r).reshape(-1)
        if H.ftz():
            return H.narrow_bits(flat).reshape(r.shape)
        out = np.empty(r.shape, dtype=np.float32)
        H.narrow(flat, out.reshape(-1))       # members: the cast is exact (NaN truncated)
        return out

    def _val(self, v, op: str, which: str = "operand") -> np.ndarray:
        """float64 view for the inherited emulated code: float32 storage widened, float64
        arrays checked for membership as they are."""
        if isinstance(v, _ND) and v.dtype == _F32 or isinstance(v, np.float32):
            return self._wide(np.asarray(v))
        if isinstance(v, _ND) and v.dtype != _F64:
            self._store(v, op, which)           # raises, naming the dtype
        return super()._val(v, op, which)

    def _arr(self, v, op: str) -> np.ndarray:
        """Shape operations: values of this context as float32 storage."""
        if isinstance(v, _ND) and v.dtype == _F32:
            return v
        return self._store(v, op)

    def shape(self, v) -> tuple:
        if isinstance(v, _ND):
            return v.shape                       # no conversion just to read a shape
        return super().shape(v)

    def _narrow32(self, v):
        """matmul's float32 operand: float32 storage as it is (a transposed C array stays
        a view), float64 arrays narrowed after the membership check (None if it fails:
        the emulated path then names the element)."""
        if isinstance(v, _ND) and v.dtype == _F32:
            v = np.asarray(v)
            if v.flags.c_contiguous or v.T.flags.c_contiguous:
                return v
            return np.ascontiguousarray(v)
        return super()._narrow32(v)

    # ------------------------------------------------------------------ conversion
    def convert(self, x):
        """float32 arrays are binary32 values (returned as they are); float64 arrays: one
        nearest-even rounding each (the hardware cast); ints, Fractions, decimal strings:
        one correct rounding of the exact value (never through float64)."""
        if isinstance(x, _ND) and x.dtype == _F32:
            return x if type(x) is _ND else np.asarray(x)   # no copy, as float64's convert
        if isinstance(x, _ND) and x.dtype == _F64 and not H.ftz():
            # the cast float64 -> float32 rounds once, nearest-even, with gradual
            # underflow and overflow to inf: the format's rounding (NaN: truncated payload)
            return H.narrow_rn(writable(np.ascontiguousarray(x).reshape(-1))).reshape(x.shape)
        return self._out(super().convert(x))

    def to_float64(self, v):
        return self._wide(self._store(v, "to_float64"))

    def zeros(self, shape): return np.zeros(tuple(shape), dtype=np.float32)
    def ones(self, shape): return np.ones(tuple(shape), dtype=np.float32)

    def full(self, shape, value):
        v = self.convert(value)
        if np.ndim(v) != 0:
            raise ContextError(f"context {self.name}: full: fill value must be a scalar, got "
                               f"shape {list(np.shape(v))}")
        return np.full(tuple(shape), v, dtype=np.float32)    # a copy of v's bits

    # ------------------------------------------------------------------ arithmetic
    def _binary(self, op, a, b):
        x = self._store(a, op, "first operand")
        y = self._store(b, op, "second operand")
        shape = x.shape if x.shape == y.shape else check_broadcast(self, op, x.shape, y.shape)
        if H.ftz():
            return self._out(super()._binary(op, x, y))
        n = math.prod(shape)
        if n == 0:
            return np.empty(shape, dtype=np.float32)
        if x.shape == y.shape:
            out = np.empty(shape, dtype=np.float32)
            H.BINOP32[_CODES[op]](x.ravel(), y.ravel(), out.reshape(-1))
            return out
        # A bias row or a scalar repeated along leading axes is read in place.
        m = n
        for v in (x, y):
            if v.shape != shape and _trailing(v.shape, shape):
                m = min(m, v.size)
        if m < 16:
            m = n        # a scalar or tiny row: copying it is cheaper than short loops
        rows = []
        for v in (x, y):
            if v.shape != shape and v.size == m and _trailing(v.shape, shape):
                rows.append(np.ascontiguousarray(v).reshape(1, m))
            else:
                rows.append(_flat(v, shape).reshape(n // m, m))
        out = np.empty(shape, dtype=np.float32)
        if m == n:       # copied whole: one row, the 1-d kernel (no rows kernel to compile)
            H.BINOP32[_CODES[op]](rows[0].reshape(-1), rows[1].reshape(-1), out.reshape(-1))
        else:
            H.BINOP32_ROWS[_CODES[op]](rows[0], rows[1], out.reshape(n // m, m))
        return out

    # The common case, float32 operands of one shape, inline (see _fast_binop): at 10^4
    # elements the Python around the kernel is a third of the time.
    add = _fast_binop("add")
    sub = _fast_binop("sub")
    mul = _fast_binop("mul")
    div = _fast_binop("div")

    def square(self, a): return self._binary("mul", a, a)

    def fma(self, a, b, c):
        x = self._store(a, "fma", "first operand")
        y = self._store(b, "fma", "second operand")
        z = self._store(c, "fma", "third operand")
        shape = check_broadcast(self, "fma", x.shape, y.shape, z.shape)
        if H.ftz():
            return self._out(super().fma(x, y, z))
        out = np.empty(shape, dtype=np.float32)
        H.fma32(_flat(x, shape), _flat(y, shape), _flat(z, shape), out.reshape(-1))
        return out

    def sqrt(self, a):
        x = a if type(a) is _ND and a.dtype is _F32 else self._store(a, "sqrt")
        if _T64 * _HALF == 0.0:
            return self._out(super().sqrt(x))
        out = np.empty(x.shape, dtype=np.float32)
        H.sqrt32(x.ravel(), out.reshape(-1))
        return out

    def _function(self, fn, a):
        return self._out(super()._function(fn, a))

    def _function2(self, fn, a, b):
        return self._out(super()._function2(fn, a, b))

    # Exact operations: sign-bit operations are exact under FTZ too; comparisons are not
    # (DAZ reads a subnormal operand as 0), so those take the widened path then.
    def neg(self, a): return np.asarray(np.negative(self._store(a, "neg")))
    def abs(self, a): return np.asarray(np.abs(self._store(a, "abs")))

    def _compare2(self, op, ufunc, a, b):
        x = self._store(a, op, "first operand")
        y = self._store(b, op, "second operand")
        shape = check_broadcast(self, op, x.shape, y.shape)
        if H.ftz():
            return None, x, y
        return np.asarray(ufunc(x, y)).reshape(shape), x, y

    def maximum(self, a, b):
        r, x, y = self._compare2("maximum", np.maximum, a, b)
        return r if r is not None else self._out(super().maximum(x, y))

    def minimum(self, a, b):
        r, x, y = self._compare2("minimum", np.minimum, a, b)
        return r if r is not None else self._out(super().minimum(x, y))

    def less(self, a, b):
        r, x, y = self._compare2("less", np.less, a, b)
        return r if r is not None else super().less(x, y)

    def heaviside(self, a):
        x = self._store(a, "heaviside")
        if H.ftz():
            return self._out(super().heaviside(x))
        return (x > 0).astype(np.float32)

    def sign(self, a):
        x = self._store(a, "sign")
        if H.ftz():
            return self._out(super().sign(x))
        return np.asarray(np.sign(x), dtype=np.float32)

    def where(self, cond, a, b):
        """Selection only: no arithmetic, exact under FTZ too."""
        x = self._store(a, "where", "second operand")
        y = self._store(b, "where", "third operand")
        cond = np.asarray(cond, dtype=bool)
        check_broadcast(self, "where", cond.shape, x.shape, y.shape)
        return np.where(cond, x, y)

    def concat(self, xs, axis: int = 0):
        return super().concat([self._arr(x, "concat") for x in xs], axis)

    def stack(self, xs, axis: int = 0):
        return super().stack([self._arr(x, "stack") for x in xs], axis)

    # ------------------------------------------------------------------ reductions
    def sum(self, a, axis=None, keepdims: bool = False):
        x = self._store(a, "sum")
        if H.ftz():
            return self._out(super().sum(x, axis, keepdims))
        axes = self._axes("sum", x.ndim, axis)
        keep = [d for d in range(x.ndim) if d not in axes]
        n = math.prod(x.shape[d] for d in axes)
        rshape = tuple(x.shape[d] for d in keep)
        x2 = np.ascontiguousarray(np.transpose(x, list(axes) + keep)).reshape(
            n, math.prod(rshape))
        res = np.zeros(x2.shape[1], dtype=np.float32)
        (H.sum32_pairwise if self.reduction == "pairwise" else H.sum32_sequential)(x2, res)
        res = res.reshape(rshape)
        if keepdims:
            res = res.reshape(tuple(1 if d in axes else x.shape[d] for d in range(x.ndim)))
        return res

    def amax(self, a, axis=None, keepdims: bool = False):
        x = self._store(a, "amax")
        if H.ftz():
            return self._out(super().amax(x, axis, keepdims))
        return self._amax(x, axis, keepdims)

    def matmul(self, a, b):
        return self._out(super().matmul(a, b))

    def properties(self) -> dict:
        d = super().properties()
        d["storage"] = "float32 ndarray"
        d["arithmetic"] = ("hardware float32 on the float32 storage (IEEE binary32 is the "
                           "format); under FTZ/DAZ float64 then one rounding (p <= 25, "
                           "2p+2 rule)")
        return d
