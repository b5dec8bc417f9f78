"""The kernels' Numba ufuncs are built on first call (scalars.kernels.lazy_ufunc): once,
also when several threads call at the same moment, and with the eager ufunc's values;
the per-(path, fused) sequential matmul kernels equal the exact-rational oracle."""
from __future__ import annotations

import math
import threading
from fractions import Fraction

import numpy as np
import pytest

from scalarlab.scalars import formats
from scalarlab.scalars.kernels import binary_format as K
from scalarlab.scalars.kernels.lazy_ufunc import LazyUfunc, lazy_vectorize


def test_built_once_under_concurrent_first_calls():
    @lazy_vectorize("float64(float64)")
    def cube_plus_erf(x):
        return x * x * x + math.erf(x)

    assert isinstance(cube_plus_erf, LazyUfunc) and cube_plus_erf._ufunc is None
    x = np.linspace(-3.0, 3.0, 101)
    results, built = [None] * 8, [None] * 8
    barrier = threading.Barrier(8)

    def work(i):
        barrier.wait()
        results[i] = cube_plus_erf(x)
        built[i] = cube_plus_erf.ufunc()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(b is built[0] for b in built)            # one ufunc for every thread
    expect = np.array([v * v * v + math.erf(v) for v in x.tolist()])
    for r in results:
        assert r.tobytes() == expect.tobytes()
    assert cube_plus_erf.__name__ == "cube_plus_erf" and "built" in repr(cube_plus_erf)


def _rational_rn(q: Fraction, fmt) -> float:
    return formats.round_fraction(q, fmt)


@pytest.mark.parametrize("fmt_name,path", [("binary16", K.FAST), ("bfloat16", K.FAST),
                                           ("binary64", K.NATIVE), ("binary(11,40)", K.STICKY)])
@pytest.mark.parametrize("fused", [False, True])
def test_sequential_matmul_kernels_against_exact_rationals(fmt_name, path, fused):
    fmt = formats.get(fmt_name)          # binary(11,40): p = 41 > 25, the STICKY path
    rng = np.random.default_rng(7)
    a = formats.round_to_format(rng.uniform(-2, 2, (2, 3, 5)), fmt)
    b = formats.round_to_format(rng.uniform(-2, 2, (2, 5, 4)), fmt)
    out = np.empty((2, 3, 4))
    unsafe = np.zeros((2, 3, 4), dtype=np.uint8)
    K.matmul_sequential(path, fused, a, b, out, unsafe, fmt.spec)
    for q in range(2):
        for i in range(3):
            for j in range(4):
                if unsafe[q, i, j]:
                    continue
                terms = [Fraction(float(a[q, i, k])) * Fraction(float(b[q, k, j]))
                         for k in range(5)]
                if path == K.NATIVE:
                    fmt64 = formats.get("binary64")
                    rn = lambda v: _rational_rn(v, fmt64)     # noqa: E731
                else:
                    rn = lambda v: _rational_rn(v, fmt)       # noqa: E731
                acc = rn(terms[0])
                for t in terms[1:]:
                    acc = rn(t + Fraction(acc)) if fused else rn(Fraction(rn(t)) + Fraction(acc))
                assert out[q, i, j] == acc, (q, i, j)
