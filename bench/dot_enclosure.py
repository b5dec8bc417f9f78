"""Cost and tightness of the long double midpoint-radius product (not a test).

Side by side in one process: ``interval:float64``'s float64 midpoint-radius product
(BLAS) and ``matmul_midrad_ld`` (numpy long double), interval activations (m x n) times
point weights (n x p): time, ratio, and the median excess width over the float64 midrad
box in float64 ulps saved per endpoint (the exact product is in between).

Run: ``python bench/dot_enclosure.py``.
"""
from __future__ import annotations

import time

import numpy as np

from scalarlab import scalars
from scalarlab.scalars.values import Interval


def best(fn, k=3):
    ts = []
    for _ in range(k):
        t = time.perf_counter(); r = fn(); ts.append(time.perf_counter() - t)
    return min(ts), r


def main():
    ictx = scalars.get("interval:float64")
    rng = np.random.default_rng(0)
    print(f"{'m':>4s} {'n':>5s} {'p':>5s} {'f64 ms':>8s} {'ld ms':>8s} {'ratio':>6s} "
          f"{'ulps saved/end':>14s}")
    for m, n, p in [(1, 100, 256), (1, 1000, 256), (16, 784, 256), (1, 4096, 1024),
                    (64, 1024, 1024)]:
        mid = rng.normal(0, 1, (m, n))
        a = Interval(mid - 1e-3, mid + 1e-3)
        B = rng.normal(0, 1 / np.sqrt(n), (n, p))
        b = Interval(B, B)
        t1, f = best(lambda: ictx.matmul_midrad(a, b))
        t2, g = best(lambda: ictx.matmul_midrad_ld(a, b))
        saved = np.median(((g.lo - f.lo) + (f.hi - g.hi)) / 2 / np.spacing(np.abs(f.lo)))
        print(f"{m:4d} {n:5d} {p:5d} {1e3 * t1:8.2f} {1e3 * t2:8.2f} {t2 / t1:6.1f} "
              f"{saved:14.1f}")


if __name__ == "__main__":
    main()
