"""Benchmark of the correctly rounded scalar functions (not a test): elements per second
of ``binary32``'s functions (float64 evaluator + MPFR near rounding boundaries) side by
side with numpy's float32 functions (not correctly rounded) and with MPFR on every element
(gmpy2, the oracle the tests use), in this process, on the same inputs.

Run: ``python bench/functions.py [--quick]``.  Prints one row per function with the
ratios binary32 / numpy-float32 time and MPFR / binary32 time.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

# keep bench/ off the import path (this file is named like nothing in the package, but
# the other benches do the same)
sys.path = [q for q in sys.path if os.path.abspath(q or ".") != os.path.dirname(os.path.abspath(__file__))]

import gmpy2  # noqa: E402
import numpy as np  # noqa: E402

from scalarlab import scalars  # noqa: E402
from scalarlab.scalars import formats  # noqa: E402

UNARY = {"exp2": (np.exp2, "exp2", (-20, 20)), "expm1": (np.expm1, "expm1", (-5, 5)),
         "log1p": (np.log1p, "log1p", (-0.9, 10)), "tan": (np.tan, "tan", (-1.5, 1.5)),
         "asin": (np.arcsin, "asin", (-1, 1)), "cosh": (np.cosh, "cosh", (-10, 10)),
         "cbrt": (np.cbrt, "cbrt", (-100, 100)), "tgamma": (None, "gamma", (0.1, 20))}
BINARY = {"pow": (np.power, "pow"), "atan2": (np.arctan2, "atan2"), "hypot": (np.hypot, "hypot")}


def best(fn, reps=3):
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t.append(time.perf_counter() - t0)
    return min(t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n = 20_000 if args.quick else 200_000
    m = 2_000 if args.quick else 20_000          # MPFR on every element: a subset, scaled
    ctx = scalars.get("binary32")
    g = formats.gmpy2_context(formats.binary32, "nearest_even")
    rng = np.random.default_rng(0)
    print(f"{'function':10s} {'binary32 Me/s':>14s} {'np.float32 Me/s':>16s} {'MPFR Me/s':>10s}"
          f" {'b32/np32':>9s} {'MPFR/b32':>9s}")
    rows = [(k, v[0], v[1], v[2], 1) for k, v in UNARY.items()] + \
           [(k, v[0], v[1], (0.1, 5), 2) for k, v in BINARY.items()]
    for name, npf, mp, (lo, hi), arity in rows:
        xs = [formats.round_to_format(rng.uniform(lo, hi, n), formats.binary32)
              for _ in range(arity)]
        f = getattr(ctx, name)
        f(*[x[:100] for x in xs])                                    # warm-up
        t_b32 = best(lambda: f(*xs))
        x32 = [x.astype(np.float32) for x in xs]
        t_np = best(lambda: npf(*x32)) if npf is not None else float("nan")
        mf = getattr(g, mp)
        sub = [[gmpy2.mpfr(float(t)) for t in x[:m]] for x in xs]
        t_mp = best(lambda: [mf(*a) for a in zip(*sub)], reps=1) * n / m
        me = lambda t: n / t / 1e6  # noqa: E731
        print(f"{name:10s} {me(t_b32):14.2f} {me(t_np):16.2f} {me(t_mp):10.2f} "
              f"{t_b32 / t_np:9.1f} {t_mp / t_b32:9.1f}")


if __name__ == "__main__":
    main()
