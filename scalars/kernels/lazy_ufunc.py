"""Numba ufuncs built on first call instead of at import.

``numba.vectorize`` with signatures compiles (or loads from the on-disk cache) when the
module defining it is imported: about 0.15 s of CPU per ufunc even with a warm cache, and
the Numba import itself.  :func:`lazy_vectorize` defers both to the first call, so a
process that never calls the ufunc pays nothing."""
from __future__ import annotations

import threading

# One lock for every lazy ufunc: each is built once, and Dask workers may call the same
# ufunc from several threads at the same moment.
_BUILD_LOCK = threading.Lock()


class LazyUfunc:
    """The ``numba.vectorize(signatures, cache=True)`` ufunc of ``py_func``, built on the
    first call (thread-safe) and called directly after that.  Not callable from compiled
    code: call :meth:`ufunc` outside it."""

    def __init__(self, py_func, signatures):
        self.py_func = py_func
        self.signatures = list(signatures)
        self._ufunc = None
        self.__name__ = py_func.__name__
        self.__qualname__ = py_func.__qualname__
        self.__module__ = py_func.__module__
        self.__doc__ = py_func.__doc__

    def ufunc(self):
        """The compiled numpy ufunc, built now if it is not yet."""
        uf = self._ufunc
        if uf is None:
            with _BUILD_LOCK:
                uf = self._ufunc
                if uf is None:        # another thread may have built it while we waited
                    import numba
                    uf = numba.vectorize(self.signatures, cache=True)(self.py_func)
                    self._ufunc = uf
        return uf

    def __call__(self, *args, **kwargs):
        return self.ufunc()(*args, **kwargs)

    def __repr__(self) -> str:
        state = "built" if self._ufunc is not None else "not built yet"
        return f"<lazy ufunc {self.__module__}.{self.__name__} ({state})>"


def lazy_vectorize(*signatures):
    """Decorator: a :class:`LazyUfunc` of the function with these Numba signatures."""
    return lambda py_func: LazyUfunc(py_func, signatures)
