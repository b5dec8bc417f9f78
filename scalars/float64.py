"""Hardware float64: numpy, BLAS and the platform libm exactly as they are.

This context makes no rounding promise beyond IEEE's for + - * / sqrt (numpy's ufuncs);
``exp`` and friends come from libm (faithful, not guaranteed correctly rounded), sums and
matmul use numpy's pairwise summation and BLAS (order unspecified): ``reduction="native"``.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .arrayshape import ArrayShapeOps
from .base import as_object_array, check_broadcast, to_fraction
from .errors import ContextError


def _exact_to_float64(x) -> float:
    """One correct rounding (nearest-even) of an exact number or decimal string to float64."""
    if isinstance(x, (float, np.floating)):
        return float(x)
    if isinstance(x, (int, np.integer, bool, np.bool_)):
        return float(Fraction(int(x)))  # correctly rounded, raises OverflowError when huge
    if isinstance(x, str):
        s = x.strip()
        try:
            return float(s)  # Python's float() of a decimal string is correctly rounded
        except ValueError:
            return float(to_fraction(s))
    return float(to_fraction(x))  # Fraction.__float__ is correctly rounded


def float64_array(x, ctx_name: str = "float64") -> np.ndarray:
    """Convert anything the vocabulary accepts to a float64 ndarray, one rounding each."""
    if isinstance(x, np.ndarray) and x.dtype.kind in "fiub":
        return x.astype(np.float64, copy=False)
    if isinstance(x, (float, np.floating)):
        return np.asarray(x, dtype=np.float64)
    if hasattr(x, "lo") and hasattr(x, "hi"):
        raise ContextError(f"context {ctx_name}: convert: got an interval value; "
                           f"convert its endpoints explicitly")
    try:
        return as_object_array(x, _exact_to_float64).astype(np.float64)
    except OverflowError as exc:
        raise ContextError(f"context {ctx_name}: convert: value too large for float64: {exc}")


class Float64Context(ArrayShapeOps):
    name = "float64"
    kind = "hardware"
    reduction = "native"
    correctly_rounded = frozenset({"add", "sub", "mul", "div", "sqrt", "neg", "abs",
                                   "maximum", "minimum"})
    description = "hardware IEEE binary64 via numpy/BLAS/libm (sums and matmul in native order)"

    def convert(self, x):
        return float64_array(x, self.name)

    def to_float64(self, v):
        return np.asarray(self._arr(v, "to_float64"), dtype=np.float64)

    def format(self, v, digits: int = 6):
        a = np.asarray(self.to_float64(v))
        if a.ndim == 0:
            return f"{float(a):.{digits}f}"
        return "[" + ", ".join(f"{float(t):.{digits}f}" for t in a.reshape(-1)) + "]"

    def zeros(self, shape): return np.zeros(tuple(shape))
    def ones(self, shape): return np.ones(tuple(shape))
    def full(self, shape, value): return np.full(tuple(shape), float(self.convert(value)))

    def _bin(self, op, f, a, b):
        a = self._arr(a, op); b = self._arr(b, op)
        check_broadcast(self, op, a.shape, b.shape)
        with np.errstate(all="ignore"):
            return f(a, b)

    def _un(self, op, f, a):
        a = self._arr(a, op)
        with np.errstate(all="ignore"):
            return f(a)

    def add(self, a, b): return self._bin("add", np.add, a, b)
    def sub(self, a, b): return self._bin("sub", np.subtract, a, b)
    def mul(self, a, b): return self._bin("mul", np.multiply, a, b)
    def div(self, a, b): return self._bin("div", np.divide, a, b)
    def maximum(self, a, b): return self._bin("maximum", np.maximum, a, b)
    def minimum(self, a, b): return self._bin("minimum", np.minimum, a, b)

    def fma(self, a, b, c):
        # numpy has no fused multiply-add; compute exactly with rationals per element is
        # too slow, so use the error-free product (Dekker) + one final rounding via
        # Fraction only where the cheap result could be wrong.  Hardware float64 is
        # "native": we document that fma here is correctly rounded via exact rationals.
        a = self._arr(a, "fma"); b = self._arr(b, "fma"); c = self._arr(c, "fma")
        shape = check_broadcast(self, "fma", a.shape, b.shape, c.shape)
        a, b, c = (np.broadcast_to(t, shape).reshape(-1) for t in (a, b, c))
        out = np.empty(a.shape[0])
        for i in range(out.size):
            ai, bi, ci = float(a[i]), float(b[i]), float(c[i])
            if all(math.isfinite(t) for t in (ai, bi, ci)):
                out[i] = float(Fraction(ai) * Fraction(bi) + Fraction(ci))
            else:
                out[i] = ai * bi + ci
        return out.reshape(shape)

    def neg(self, a): return self._un("neg", np.negative, a)
    def abs(self, a): return self._un("abs", np.abs, a)
    def sqrt(self, a): return self._un("sqrt", np.sqrt, a)
    def square(self, a): return self._un("square", np.square, a)
    def exp(self, a): return self._un("exp", np.exp, a)
    def log(self, a): return self._un("log", np.log, a)
    def tanh(self, a): return self._un("tanh", np.tanh, a)
    def sin(self, a): return self._un("sin", np.sin, a)
    def cos(self, a): return self._un("cos", np.cos, a)

    def sigmoid(self, a):
        a = self._arr(a, "sigmoid")
        with np.errstate(all="ignore"):
            # 1/(1+e^-x) for x >= 0 and e^x/(1+e^x) for x < 0: no overflow either side.
            e = np.exp(-np.abs(a))
            return np.where(a >= 0, 1.0 / (1.0 + e), e / (1.0 + e))

    def softplus(self, a):
        a = self._arr(a, "softplus")
        with np.errstate(all="ignore"):
            return np.maximum(a, 0.0) + np.log1p(np.exp(-np.abs(a)))

    def erf(self, a):
        from .kernels import erf_f64
        return erf_f64(self._arr(a, "erf"))

    def heaviside(self, a): return (self._arr(a, "heaviside") > 0).astype(np.float64)
    def sign(self, a): return np.sign(self._arr(a, "sign"))
    def less(self, a, b): return self._bin("less", np.less, a, b)

    def sum(self, a, axis=None, keepdims=False):
        return np.sum(self._arr(a, "sum"), axis=axis, keepdims=keepdims)

    def amax(self, a, axis=None, keepdims=False):
        return np.max(self._arr(a, "amax"), axis=axis, keepdims=keepdims)

    def argmax(self, a, axis):
        return np.argmax(self._arr(a, "argmax"), axis=axis)

    def matmul(self, a, b):
        a = self._arr(a, "matmul"); b = self._arr(b, "matmul")
        try:
            return np.matmul(a, b)
        except ValueError:
            raise ContextError(f"context {self.name}: matmul: shapes {list(a.shape)} and "
                               f"{list(b.shape)} do not contract") from None
