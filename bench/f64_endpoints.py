"""Cost of exactly directed interval:float64 function endpoints (not a test).

Side by side in one process, per function over N normal(0, 3) arguments: the former
enclosure (libm value widened by 4 ulps, ``func_widened_f64``) and the exactly directed
one (``func_dir_f64``: compiled double-double kernels for exp/log/tanh/sigmoid/softplus,
long double fast path for the others, MPFR near float64 boundaries); prints
times, the ratio, the share of arguments sent to MPFR and the mean width saved (ulps).

Run: ``python bench/f64_endpoints.py [--n 200000]``.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from scalarlab.scalars.kernels import function_endpoints as FE
from scalarlab.scalars.functions import FUNCTIONS


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200000)
    n = ap.parse_args().n
    x = np.random.default_rng(0).normal(0, 3, n)
    print(f"{'fn':9s} {'n':>7s} {'widened ms':>11s} {'exact ms':>9s} {'ratio':>6s} "
          f"{'to MPFR':>8s} {'ulps saved':>10s}")
    for name in ("exp", "tanh", "sigmoid", "softplus", "sin", "cos", "atan", "erf"):
        fn = FUNCTIONS[name]
        xx = x if name != "erf" else x[: max(1, n // 10)]
        t0 = time.perf_counter(); w = FE.func_widened_f64(fn, xx); t1 = time.perf_counter()
        calls = [0]
        real = FE.mpfr_func_dir

        def counting(*a):
            calls[0] += 1
            return real(*a)
        FE.mpfr_func_dir = counting
        try:
            t2 = time.perf_counter(); e = FE.func_dir_f64(fn, xx); t3 = time.perf_counter()
        finally:
            FE.mpfr_func_dir = real
        ulp = np.spacing(np.abs(e[1]))
        saved = np.mean(((w[1] - w[0]) - (e[1] - e[0])) / np.where(ulp > 0, ulp, 1))
        print(f"{name:9s} {xx.size:7d} {1e3 * (t1 - t0):11.1f} {1e3 * (t3 - t2):9.1f} "
              f"{(t3 - t2) / (t1 - t0):6.1f} {calls[0] / xx.size:8.2%} {saved:10.2f}")


if __name__ == "__main__":
    main()
