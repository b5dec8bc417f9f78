"""``complex128``: numpy complex arithmetic as it is (native), for the ops that make sense.

Values are complex128 ndarrays.  Elementwise arithmetic, ``sum``, ``matmul`` and the
analytic functions (``exp log sqrt tanh sin cos``, and ``sigmoid softplus`` through their
defining formulas) are numpy's.  Complex numbers have no order, so ``maximum``,
``heaviside``, ``less``, ``argmax`` and friends raise a ContextError naming the op.
Only ``add sub neg`` are correctly rounded (componentwise); ``mul div`` and the functions
are numpy's native formulas.  NaN/inf follow numpy, as in ``float64``.
"""
from __future__ import annotations


import numpy as np

from .arrayshape import NumpyArithmetic
from .base import as_object_array, check_broadcast, to_fraction
from .errors import ContextError
from .exact import describe_value


def _complex_leaf(x) -> complex:
    """One entry as a Python complex: real parts through one correct rounding."""
    if isinstance(x, (complex, np.complexfloating)):
        return complex(x)
    if isinstance(x, (float, np.floating)):
        return complex(float(x))
    if isinstance(x, str):
        s = x.strip()
        try:
            return complex(float(s))
        except ValueError:
            pass
        try:
            return complex(s.replace(" ", ""))
        except ValueError:
            pass
        from .float64 import _exact_to_float64  # p/q text: bounded, rounded like float64
        return complex(_exact_to_float64(s))
    try:
        return complex(float(to_fraction(x)))  # Fraction.__float__ rounds correctly
    except OverflowError:
        raise ContextError(f"context complex128: convert: {x!r} is too large for float64")


def _wrap(r) -> np.ndarray:
    """numpy returns scalars for 0-d operands; values stay complex ndarrays."""
    return np.asarray(r, dtype=np.complex128)


class Complex128Context(NumpyArithmetic):
    name = "complex128"
    kind = "hardware"
    reduction = "native"
    correctly_rounded = frozenset({"add", "sub", "neg"})
    description = ("numpy complex128 (native formulas; BLAS matmul); no order, so "
                   "max/compare/sign/heaviside/argmax raise")

    def properties(self) -> dict:
        p = super().properties()
        p["format"] = "complex128 (two binary64)"
        return p

    def _arr(self, v, op):
        if isinstance(v, np.complexfloating):
            return np.asarray(v)
        if isinstance(v, np.ndarray) and v.dtype == np.complex128:
            return v
        raise ContextError(f"context {self.name}: {op}: got {describe_value(v)}, not a "
                           f"complex128 value (use scalars.get('complex128').convert(...))")

    def _unordered(self, op):
        return ContextError(f"context complex128 cannot compute {op} honestly: complex "
                            f"numbers are not ordered")

    # ------------------------------------------------------------ conversion
    def convert(self, x):
        if isinstance(x, np.ndarray) and x.dtype.kind in "fiubc":
            return x.astype(np.complex128)
        if isinstance(x, (complex, float, int, np.number)) and not isinstance(x, bool):
            return np.asarray(x, dtype=np.complex128)
        if hasattr(x, "lo") and hasattr(x, "hi") or hasattr(x, "primal"):
            raise ContextError(f"context {self.name}: convert: got {describe_value(x)}; "
                               f"convert its components explicitly")
        return as_object_array(x, _complex_leaf).astype(np.complex128)

    def to_float64(self, v):
        a = self._arr(v, "to_float64")
        imag = a.imag != 0
        if imag.any():
            z = a[imag].reshape(-1)[0]
            raise ContextError(f"context complex128: to_float64: {z} has a non-zero "
                               f"imaginary part")
        return np.ascontiguousarray(a.real)

    def format(self, v, digits: int = 6):
        a = self._arr(v, "format")
        d = int(digits)
        texts = [f"({z.real:.{d}f}{z.imag:+.{d}f}j)" for z in a.reshape(-1).tolist()]
        return texts[0] if a.ndim == 0 else "[" + ", ".join(texts) + "]"

    def zeros(self, shape): return np.zeros(shape, dtype=np.complex128)
    def ones(self, shape): return np.ones(shape, dtype=np.complex128)

    def full(self, shape, value):
        v = self.convert(value)
        if v.shape != ():
            raise ContextError(f"context {self.name}: full: fill value must be a scalar")
        return np.full(shape, v[()], dtype=np.complex128)

    # ------------------------------------------------------------ arithmetic
    def _bin(self, op, f, a, b):
        a = self._arr(a, op); b = self._arr(b, op)
        check_broadcast(self, op, a.shape, b.shape)
        with np.errstate(all="ignore"):
            return _wrap(f(a, b))

    def _un(self, op, f, a):
        a = self._arr(a, op)
        with np.errstate(all="ignore"):
            return _wrap(f(a))

    # add sub mul div neg abs sqrt square: NumpyArithmetic's, through _bin/_un above
    def fma(self, a, b, c):
        a = self._arr(a, "fma"); b = self._arr(b, "fma"); c = self._arr(c, "fma")
        check_broadcast(self, "fma", a.shape, b.shape, c.shape)
        with np.errstate(all="ignore"):
            return _wrap(a * b + c)  # native: product rounded, then the sum

    def _function2(self, fn, a, b):
        """pow: numpy's complex function; the others are not defined on complex numbers."""
        if fn.complex is None:
            raise self.unsupported(fn.name, fn.complex_why)
        return self._bin(fn.name, fn.complex, a, b)

    def _function(self, fn, a):
        """exp, log, ...: the entry's numpy complex function (principal branches)."""
        self._arr(a, fn.name)
        if fn.complex is None:
            raise self.unsupported(fn.name, fn.complex_why)
        return self._un(fn.name, fn.complex, a)

    # order-based ops: complex numbers are not ordered
    def maximum(self, a, b): raise self._unordered("maximum")
    def minimum(self, a, b): raise self._unordered("minimum")
    def heaviside(self, a): raise self._unordered("heaviside")
    def sign(self, a): raise self._unordered("sign")
    def less(self, a, b): raise self._unordered("less")
    def amax(self, a, axis=None, keepdims=False): raise self._unordered("amax")
    def argmax(self, a, axis): raise self._unordered("argmax")

    def where(self, cond, a, b):
        return _wrap(super().where(cond, a, b))

    # ------------------------------------------------------------ reductions
    def sum(self, a, axis=None, keepdims=False):
        a = self._arr(a, "sum")
        try:
            return _wrap(np.sum(a, axis=axis, keepdims=keepdims))
        except np.exceptions.AxisError as exc:
            raise ContextError(f"context {self.name}: sum axis={axis}: {exc}") from None

    def matmul(self, a, b):
        a = self._arr(a, "matmul"); b = self._arr(b, "matmul")
        try:
            return _wrap(np.matmul(a, b))
        except ValueError:
            raise ContextError(f"context {self.name}: matmul: shapes {list(a.shape)} and "
                               f"{list(b.shape)} do not contract") from None


# Registration data, read by scalars.registry (this module does not import the registry).
CONTEXT_NAMES = {"complex128": lambda get: Complex128Context()}
