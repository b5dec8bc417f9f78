"""Shape operations shared by every context whose values are plain numpy arrays.

Shape operations never round, so float64, binary-format and object-dtype (rational,
mpmath, fp32-real) contexts share them.  Interval and dual contexts apply them to both
components.
"""
from __future__ import annotations

import math

import numpy as np

from .base import Context, check_broadcast
from .errors import ContextError


class ArrayShapeOps(Context):
    """Mixin: reshape/transpose/concat/stack/take/broadcast_to on ndarray values."""

    def _arr(self, v, op: str) -> np.ndarray:
        if not isinstance(v, np.ndarray):
            raise ContextError(f"context {self.name}: {op}: expected an array of this "
                               f"context, got {type(v).__name__}")
        return v

    def shape(self, v) -> tuple:
        if type(v) is np.ndarray:          # the common case, without the value check
            return v.shape
        return tuple(self._arr(v, "shape").shape)

    def reshape(self, a, shape):
        a = self._arr(a, "reshape")
        shape = tuple(int(s) for s in shape)
        if math.prod(shape) != a.size:
            raise ContextError(f"context {self.name}: reshape: cannot reshape {list(a.shape)} "
                               f"({a.size} entries) to {list(shape)}")
        return a.reshape(shape)

    def transpose(self, a, axes=None):
        a = self._arr(a, "transpose")
        if axes is not None and sorted(int(p) for p in axes) != list(range(a.ndim)):
            raise ContextError(f"context {self.name}: transpose: perm {list(axes)} is not a "
                               f"permutation of the {a.ndim} axes of {list(a.shape)}")
        return np.transpose(a, axes)

    def concat(self, xs, axis: int = 0):
        return self._join("concat", np.concatenate, xs, axis)

    def stack(self, xs, axis: int = 0):
        return self._join("stack", np.stack, xs, axis)

    def _join(self, op, join, xs, axis):
        """concat/stack: numpy's join, its shape errors named with op, context and shapes."""
        xs = [self._arr(x, op) for x in xs]
        try:
            return join(xs, axis=axis)
        except (ValueError, np.exceptions.AxisError) as exc:
            shapes = ", ".join(str(list(x.shape)) for x in xs)
            raise ContextError(f"context {self.name}: {op} axis={axis}: incompatible "
                               f"shapes {shapes}") from exc

    def take(self, a, indices, axis: int):
        a = self._arr(a, "take")
        try:
            return np.take(a, np.asarray(indices), axis=axis)
        except (IndexError, np.exceptions.AxisError) as exc:
            raise ContextError(f"context {self.name}: take axis={axis}: {exc}") from exc

    def broadcast_to(self, a, shape):
        a = self._arr(a, "broadcast_to")
        check_broadcast(self, "broadcast_to", a.shape, shape)
        try:
            return np.broadcast_to(a, tuple(shape)).copy()
        except ValueError:
            raise ContextError(f"context {self.name}: broadcast_to: cannot broadcast "
                               f"{list(a.shape)} to {list(shape)}") from None

    def where(self, cond, a, b):
        cond = np.asarray(cond, dtype=bool)
        a = self._arr(a, "where"); b = self._arr(b, "where")
        check_broadcast(self, "where", cond.shape, a.shape, b.shape)
        return np.where(cond, a, b)


class NumpyArithmetic(ArrayShapeOps):
    """add sub mul div neg abs sqrt square as numpy's ufuncs on the hardware dtype
    (float64, complex128: one IEEE rounding each), through the subclass's ``_bin`` and
    ``_un`` (operand checks, broadcasting errors, the result's wrapping)."""

    def add(self, a, b): return self._bin("add", np.add, a, b)
    def sub(self, a, b): return self._bin("sub", np.subtract, a, b)
    def mul(self, a, b): return self._bin("mul", np.multiply, a, b)
    def div(self, a, b): return self._bin("div", np.divide, a, b)
    def neg(self, a): return self._un("neg", np.negative, a)
    def abs(self, a): return self._un("abs", np.abs, a)       # complex: |z| as a complex value
    def sqrt(self, a): return self._un("sqrt", np.sqrt, a)    # complex: the principal branch
    def square(self, a): return self._un("square", np.square, a)
