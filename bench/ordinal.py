"""Benchmark: ``formats.ulp_distance`` (one compiled pass, scalars/kernels/ordinal.py)
against the usual numpy formulation on the same arrays, one thread, interleaved, best of
``--repeats`` (CPU time by default, ``--wall`` for wall-clock); prints the time ratios.

The numpy side is what a user would write for a native format: view the float32 (or
float64) values' bits as signed integers, fold negative patterns so the integers are
monotone in the value (``-0`` and ``+0`` both become 0), subtract.  It checks nothing: the
lab's pass also refuses entries that are not values of the format and handles NaN and the
formats numpy has no dtype for.  Both sides' results are compared entry by entry first.

Arrays: ``--size`` values of a relu-like activation (half zeros) and the same values moved
by a few ulps, in binary32 (values held as float64, as the lab's contexts hold them) and
in binary64.

Usage: python bench/ordinal.py [--size N] [--repeats K] [--wall]
"""
from __future__ import annotations

import os

import benchlib  # noqa: E402,F401  (first: one thread for every library)

import argparse  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402

sys.path = [q for q in sys.path
            if os.path.abspath(q or ".") != os.path.dirname(os.path.abspath(__file__))]

from benchlib import interleaved  # noqa: E402


def numpy_ulp_distance(a, b, dtype, itype):
    """|ordinal(a) - ordinal(b)| for values of a native float dtype, numpy only."""
    def ordinal(v):
        i = v.astype(dtype).view(itype).astype(np.int64)
        # a negative pattern counts down from -0: fold it below zero
        top = np.int64(np.iinfo(itype).min)
        return np.where(i < 0, top - i, i)
    return np.abs(ordinal(a) - ordinal(b)).astype(np.uint64)


def main(argv=None) -> int:
    from scalarlab.scalars import formats
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=2_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--wall", action="store_true", help="rank by wall time, not CPU time")
    args = ap.parse_args(argv)
    col = 0 if args.wall else 1
    rng = np.random.default_rng(0)
    print(f"formats.ulp_distance vs numpy bit-view ordinals, {args.size} entries, 1 thread, "
          f"best of {args.repeats} interleaved ({'wall' if args.wall else 'CPU'} time); "
          f"numpy {np.__version__}")
    x = np.maximum(rng.standard_normal(args.size), 0.0)
    for name, dtype, itype in (("binary32", np.float32, np.int32),
                               ("binary64", np.float64, np.int64)):
        fmt = formats.get(name)
        a = x.astype(dtype).astype(np.float64)
        b = a.astype(dtype)
        steps = rng.integers(-3, 4, size=args.size)
        for _ in range(3):                       # a few ulps either way, zeros crossed too
            b = np.where(steps > 0, np.nextafter(b, dtype(np.inf)), b)
            b = np.where(steps < 0, np.nextafter(b, dtype(-np.inf)), b)
            steps = steps - np.sign(steps)
        b = b.astype(np.float64)
        lab = formats.ulp_distance(a, b, fmt)
        ref = numpy_ulp_distance(a, b, dtype, itype)
        if not np.array_equal(lab.astype(np.uint64), ref):
            print(f"{name}: results differ at {int(np.sum(lab.astype(np.uint64) != ref))} "
                  f"entries", file=sys.stderr)
            return 1
        fns = [lambda: numpy_ulp_distance(a, b, dtype, itype),
               lambda: formats.ulp_distance(a, b, fmt)]
        t = interleaved(fns, args.repeats, warm=True)[col]
        print(f"{name}: numpy {t[0] * 1e3:8.2f} ms, lab {t[1] * 1e3:8.2f} ms, "
              f"numpy / lab {t[0] / t[1]:5.2f}  (equal on all {args.size} entries; the lab "
              f"also checks every entry is a value of the format)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
