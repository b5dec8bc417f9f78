"""Kernel arguments in one array type.

Numba compiles one specialization per argument type, and an array's type includes its
read-only flag: a read-only view (``np.broadcast_to`` at the target shape, a frozen box
end) and a writable array of the same dtype and layout are two types, so a kernel fed
both compiles twice (about 0.3-1.6 s of CPU each on a cold cache).  The entry points pass
their inputs through :func:`flat_f64`, which copies only a read-only input (values are
unchanged; the kernels never write to their inputs)."""
from __future__ import annotations

import numpy as np


def writable(a: np.ndarray) -> np.ndarray:
    """``a`` itself when it is writable, else a copy (same values, layout C)."""
    return a if a.flags.writeable else a.copy()


def flat_f64(x, shape=None) -> np.ndarray:
    """``x`` as a writable C-contiguous 1-d float64 array, broadcast to ``shape`` first
    when given (a view of ``x`` when it already is one)."""
    a = np.asarray(x, dtype=np.float64)
    if shape is not None and a.shape != tuple(shape):
        a = np.broadcast_to(a, shape)
    return writable(np.ascontiguousarray(a).reshape(-1))
