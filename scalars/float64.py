"""Hardware float64: numpy's ufuncs, the platform libm, and a matmul in a fixed order.

This context makes no rounding promise beyond IEEE's for + - * / sqrt (numpy's ufuncs);
``exp`` and friends come from libm (faithful, not guaranteed correctly rounded), sums use
numpy's pairwise summation; matmul is fma chains over k blocks of 256 added in order
above a size threshold (:mod:`scalars.kernels.f64_matmul`, reproducible bit for bit) and numpy's
BLAS below it (order unspecified): ``reduction="native"``.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .arrayshape import NumpyArithmetic
from .base import as_object_array, check_broadcast, fixed_text, to_fraction
from .errors import ContextError
from .formats import binary64
from .kernels import literals
# The compiled kernels (scalars.kernels: eft's fma ufunc, the fixed-order matmul, the libm
# ufuncs) are imported where they are called: importing this context imports no Numba.


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
            pass
        q = literals.for_rounding(s)  # p/q, bounded (beyond 10^+-1000: a stand-in)
        try:
            return float(q)
        except OverflowError:  # beyond binary64 as text: inf, like float("1e999")
            return math.inf if q > 0 else -math.inf
    return float(to_fraction(x))  # Fraction.__float__ is correctly rounded


def float64_array(x, ctx_name: str = "float64") -> np.ndarray:
    """Convert anything the vocabulary accepts to a float64 ndarray, one rounding each."""
    if isinstance(x, np.ndarray) and x.dtype.kind in "fiub":
        return x.astype(np.float64, copy=False)
    if isinstance(x, (float, np.floating)):
        return np.asarray(x, dtype=np.float64)
    if type(x) is int and -2 ** 53 <= x <= 2 ** 53:
        return np.asarray(float(x))                     # exact in float64
    if hasattr(x, "lo") and hasattr(x, "hi"):
        raise ContextError(f"context {ctx_name}: convert: got an interval value; "
                           f"convert its endpoints explicitly")
    try:
        return as_object_array(x, _exact_to_float64).astype(np.float64)
    except OverflowError as exc:
        raise ContextError(f"context {ctx_name}: convert: value too large for float64: {exc}")


# The fused multiply-add is the hardware operation itself (``llvm.fma.f64``: the FMA
# instruction, or libm's correctly rounded fma), as a numpy ufunc: scalars.kernels.eft.fma_f64.

class Float64Context(NumpyArithmetic):
    name = "float64"
    kind = "hardware"
    # The values are binary64's; the context is hardware, not an emulation of the format
    # (reduction "native", libm functions): consumers read reduction/correctly_rounded.
    fmt = binary64
    reduction = "native"
    correctly_rounded = frozenset({"add", "sub", "mul", "div", "sqrt", "neg", "abs",
                                   "square", "fma", "maximum", "minimum"})
    # matmul in scalars.kernels.f64_matmul's fixed order (False: numpy's BLAS, for a subclass whose
    # meaning is BLAS's products, e.g. experiments' per-op rounding study)
    fixed_order_matmul = True
    description = ("hardware IEEE binary64 via numpy/libm (sums in native order; matmul: fma "
                   "chains over k blocks of 256, added in order, above a size threshold; BLAS "
                   "below)")

    def _arr(self, v, op: str) -> np.ndarray:
        """A float64 value of this context; other contexts' values are named and refused.

        numpy returns scalars for 0-d operands, so numpy float scalars count as 0-d
        arrays; integer/bool/narrower float arrays are widened to float64.
        """
        if isinstance(v, np.ndarray):
            if v.dtype == np.float64:
                return v
            if v.dtype.kind in "iub" or (v.dtype.kind == "f" and v.dtype.itemsize < 8):
                return v.astype(np.float64)  # (ints beyond 2^53: one rounding, as convert)
        elif isinstance(v, (np.floating, np.integer)) and not isinstance(v, np.longdouble):
            return np.asarray(v, dtype=np.float64)
        from .exact import describe_value
        raise ContextError(f"context {self.name}: {op}: got {describe_value(v)}, not a "
                           f"{self.name} value (expected a float64 ndarray; use "
                           f"scalars.get({self.name!r}).convert(...))")

    def convert(self, x):
        return float64_array(x, self.name)

    def to_float64(self, v):
        return np.asarray(self._arr(v, "to_float64"), dtype=np.float64)

    def format(self, v, digits: int = 6):
        return fixed_text(self.to_float64(v), digits)

    def zeros(self, shape): return np.zeros(tuple(shape))
    def ones(self, shape): return np.ones(tuple(shape))
    def full(self, shape, value): return np.full(tuple(shape), float(self.convert(value)))

    def _bin(self, op, f, a, b):
        a = self._arr(a, op); b = self._arr(b, op)
        try:
            with np.errstate(all="ignore"):
                return np.asarray(f(a, b))
        except ValueError:                       # numpy's broadcast error, said our way
            check_broadcast(self, op, a.shape, b.shape)
            raise

    def _un(self, op, f, a):
        a = self._arr(a, op)
        with np.errstate(all="ignore"):
            return np.asarray(f(a))

    # add sub mul div neg abs sqrt square: NumpyArithmetic's, through _bin/_un above
    def maximum(self, a, b): return self._bin("maximum", np.maximum, a, b)
    def minimum(self, a, b): return self._bin("minimum", np.minimum, a, b)

    def fma(self, a, b, c):
        """a*b + c with ONE rounding (IEEE fusedMultiplyAdd), vectorised (scalars.kernels.eft)."""
        a = self._arr(a, "fma"); b = self._arr(b, "fma"); c = self._arr(c, "fma")
        check_broadcast(self, "fma", a.shape, b.shape, c.shape)
        from .kernels.eft import fma_f64
        with np.errstate(all="ignore"):
            return np.asarray(fma_f64(a, b, c))

    def _function(self, fn, a):
        """exp, log, ...: the float64 evaluator of scalars.functions (libm, not correctly
        rounded; NaN outside the domain)."""
        return fn.eval_f64(self._arr(a, fn.name))

    def _function2(self, fn, a, b):
        """pow, atan2, ...: the float64 evaluator of scalars.functions_binary (C's semantics)."""
        a = self._arr(a, fn.name); b = self._arr(b, fn.name)
        check_broadcast(self, fn.name, a.shape, b.shape)
        return fn.eval_f64(a, b)

    def heaviside(self, a):
        from .kernels.f64_libm import heaviside_f64
        return np.asarray(heaviside_f64(self._arr(a, "heaviside")))

    def mul_heaviside(self, g, x):
        """``mul(g, heaviside(x))`` in one pass (the relu derivative's product)."""
        from .kernels.f64_libm import mul_heaviside_f64
        return self._bin("mul", mul_heaviside_f64, g, x)

    def sign(self, a): return np.asarray(np.sign(self._arr(a, "sign")))
    def less(self, a, b): return self._bin("less", np.less, a, b)

    def _reduce(self, op, f, a, **kw):
        a = self._arr(a, op)
        try:
            with np.errstate(all="ignore"):
                return np.asarray(f(a, **kw))
        except np.exceptions.AxisError as exc:
            raise ContextError(f"context {self.name}: {op}: {exc}") from None
        except ValueError as exc:  # e.g. max of an empty array
            raise ContextError(f"context {self.name}: {op} of shape {list(a.shape)}: "
                               f"{exc}") from None

    def sum(self, a, axis=None, keepdims=False):
        return self._reduce("sum", np.add.reduce, a, axis=axis, keepdims=keepdims)

    def amax(self, a, axis=None, keepdims=False):
        return self._reduce("amax", np.max, a, axis=axis, keepdims=keepdims)

    def argmax(self, a, axis):
        return self._reduce("argmax", np.argmax, a, axis=axis)

    def affine(self, x, W, b):
        """``x W^T + b`` (a dense layer) = ``add(matmul(x, transpose(W)), b)``, the bias
        added in place into the product's fresh array (same values, one array less)."""
        x = self._arr(x, "linear"); W = self._arr(W, "linear"); b = self._arr(b, "linear")
        cls = type(self)
        # a subclass that rounds in its own add/matmul (experiments' wide-accumulation
        # contexts) keeps the composition
        plain = cls.add is Float64Context.add and cls.matmul is Float64Context.matmul
        y = self.matmul(x, np.transpose(W)) if plain and W.ndim == 2 else None
        if y is None or y.ndim == 0 or np.broadcast_shapes(y.shape, b.shape) != y.shape:
            return self.add(self.matmul(x, self.transpose(W)), b)
        with np.errstate(all="ignore"):
            np.add(y, b, out=y)
        return y

    def matmul(self, a, b):
        """``a @ b``.  With ``fixed_order_matmul`` (this class), products of at least
        ``f64_matmul.MIN_FLOPS`` multiply-adds (and M, N >= 8) are fma chains over k blocks
        of 256 added in order (:mod:`scalars.kernels.f64_matmul`: bit-reproducible,
        oracle-checkable); smaller ones, and contexts without it, get numpy's BLAS."""
        a = self._arr(a, "matmul"); b = self._arr(b, "matmul")
        if self.fixed_order_matmul:
            from .kernels.f64_matmul import product as mm
        else:
            mm = np.matmul
        try:
            with np.errstate(all="ignore"):  # native: inf/NaN propagate as the FMA gives them
                return np.asarray(mm(a, b))
        except ValueError:
            raise ContextError(f"context {self.name}: matmul: shapes {list(a.shape)} and "
                               f"{list(b.shape)} do not contract") from None


# Registration data, read by scalars.registry (this module does not import the registry).
CONTEXT_NAMES = {"float64": lambda get: Float64Context()}
