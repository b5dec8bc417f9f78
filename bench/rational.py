"""Benchmark: ``rational`` context add (gmpy2 mpq object arrays, one numpy C loop) beside
``fractions.Fraction`` added in a Python loop, same data, same process.  Prints ratios.

    python bench/rational.py [--sizes 100000 1000000] [--repeat 3]

Two data sets: random p/q with |p|, q < 10^6 (gcd work on every add) and float64 values
converted exactly (power-of-two denominators, as when float weights enter the lab).
Timings are the best of ``--repeat`` runs, in process CPU time (the lab's machines are
shared); the floor asked for is a ratio >= 10.
"""
from __future__ import annotations

import argparse
import gc
import time
from fractions import Fraction

import numpy as np

from scalarlab import scalars


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.process_time()  # CPU time: robust when other jobs share the cores
        out = fn()
        times.append(time.process_time() - t0)
        del out
    return min(times)


def datasets(n: int, rng):
    p = rng.integers(-10**6, 10**6, n)
    q = rng.integers(1, 10**6, n)
    small = [Fraction(int(a), int(b)) for a, b in zip(p, q)]
    floats = [Fraction(x) for x in (rng.standard_normal(n) * 2.0 ** rng.integers(-20, 20, n)).tolist()]
    return {"random p/q": small, "float64-derived": floats}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    R = scalars.get("rational")
    rng = np.random.default_rng(0)
    print(f"{'n':>9} {'data':<16} {'Fraction loop s':>15} {'rational.add s':>14} {'ratio':>7}")
    worst = None
    for n in args.sizes:
        for label, fa in datasets(n, rng).items():
            fb = fa[::-1]
            a = R.convert(np.array(fa, dtype=object))
            b = R.convert(np.array(fb, dtype=object))
            check = R.add(a, b)
            assert all(int(x.numerator) * y.denominator == y.numerator * int(x.denominator)
                       for x, y in zip(check[:1000], (u + v for u, v in zip(fa[:1000], fb[:1000]))))
            t_frac = best_of(lambda: [x + y for x, y in zip(fa, fb)], args.repeat)
            t_ctx = best_of(lambda: R.add(a, b), args.repeat)
            ratio = t_frac / t_ctx
            worst = ratio if worst is None else min(worst, ratio)
            print(f"{n:>9} {label:<16} {t_frac:>15.4f} {t_ctx:>14.4f} {ratio:>6.1f}x")
    print(f"worst ratio {worst:.1f}x (floor: 10x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
