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
        xs = [self._arr(x, "concat") for x in xs]
        try:
            return np.concatenate(xs, axis=axis)
        except (ValueError, np.exceptions.AxisError) as exc:
            shapes = ", ".join(str(list(x.shape)) for x in xs)
            raise ContextError(f"context {self.name}: concat axis={axis}: incompatible "
                               f"shapes {shapes}") from exc

    def stack(self, xs, axis: int = 0):
        xs = [self._arr(x, "stack") for x in xs]
        try:
            return np.stack(xs, axis=axis)
        except (ValueError, np.exceptions.AxisError) as exc:
            shapes = ", ".join(str(list(x.shape)) for x in xs)
            raise ContextError(f"context {self.name}: stack axis={axis}: incompatible "
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
