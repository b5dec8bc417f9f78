"""Benchmark: the Ozaki multi-float product (scalars/kernels/multifloat.py) at k = 2, 3, 4
against a plain float64 numpy matmul of the same shapes, one thread, interleaved, best of
``--repeats`` (CPU time by default, ``--wall`` for wall-clock); prints the time ratios.

Shapes are resnet-like im2col products (weight (m, n) on the left, data (n, p)): a 3x3
conv of 64 channels at 56x56, (64, 576) @ (576, 3136), and one of 512 channels at 7x7,
(512, 4608) @ (4608, 49); the data is a k-component multi-float of relu-like values.  The
weight's slices are made once (``split_rows``) and reused, as the ball context does.
Also printed: the slice products the plan computes and the largest err / (|A||X|).

Usage: python bench/multifloat.py [--repeats K] [--wall] [--ks 2,3,4]
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

SHAPES = [(64, 576, 3136), (512, 4608, 49)]


def multi(rng, x, k, mf):
    """A k-component multi-float around x (lower components random, renormalised)."""
    parts = [x] + [x * 2.0 ** (-55 * t) * rng.standard_normal(x.shape) for t in range(1, k)]
    return mf.renorm(parts, k)[0]


def main(argv=None) -> int:
    from scalarlab.scalars.kernels import multifloat as mf
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--wall", action="store_true", help="rank by wall time, not CPU time")
    ap.add_argument("--ks", default="2,3,4")
    args = ap.parse_args(argv)
    ks = [int(v) for v in args.ks.split(",")]
    col = 0 if args.wall else 1
    rng = np.random.default_rng(0)
    print(f"multifloat.matmul vs numpy float64 matmul, 1 thread, best of {args.repeats} "
          f"interleaved ({'wall' if args.wall else 'CPU'} time); numpy {np.__version__}")
    for m, n, p in SHAPES:
        A = rng.standard_normal((m, n)) / np.sqrt(n)
        x = np.maximum(rng.standard_normal((n, p)), 0.0)
        S = mf.split_rows(A)
        for k in ks:
            X = multi(rng, x, k, mf)
            fns = [lambda: A @ X[0], lambda: mf.matmul(None, X, k, A_slices=S)]
            t = interleaved(fns, args.repeats, warm=True)[col]
            M, err = mf.matmul(None, X, k, A_slices=S)
            scale = np.abs(A) @ np.abs(X.sum(axis=0))
            rel = float(np.max(err / scale))
            plan = mf._plan(S, mf.bits_kept(k), n, k)
            nprod = sum(plan.J) + sum(plan.tail)
            print(f"({m}, {n}) @ ({n}, {p}) k={k}: float64 {t[0] * 1e3:7.2f} ms, multifloat "
                  f"{t[1] * 1e3:8.2f} ms, ratio {t[1] / t[0]:5.1f}  ({nprod} slice products "
                  f"over {plan.sa} weight slices, beta {plan.beta}; max err/(|A||X|) "
                  f"2^{np.log2(rel):.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
