"""Benchmark: exact binary32 folds of MLP 784-1024-1024-10 (batch 1024) vs numpy float32.

The IR fold (graph.denote) in the contexts ``binary32`` (sequential dot products, one
rounding per product and per addition), ``binary32+fma`` (one rounding per multiply-add)
and ``binary32/pairwise``, against the same forward in numpy float32 (BLAS, its own
summation order), side by side in one process, single-threaded, interleaved, best of k.
``ratio`` = fold time / numpy time (floor of issue 16: <= 4 for each of the three folds;
the pairwise one runs :mod:`scalars.kernels.binary32_pairwise`).
Wall and process-CPU times are both shown: on a shared machine CPU time is the steadier.

Usage: python bench/binary32_fold.py [--repeats K] [--batch B]
"""
from __future__ import annotations

import os

import benchlib  # noqa: E402  (first: one thread for every library)

import argparse  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fold import mlp, numpy_mlp  # noqa: E402

from scalarlab import graph, scalars  # noqa: E402
from scalarlab.scalars.kernels import binary32_matmul as BM  # noqa: E402
from scalarlab.scalars.kernels import binary32_pairwise as PW  # noqa: E402

FLOOR = 4.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--batch", type=int, default=1024)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    g, p, params = mlp([784, 1024, 1024, 10], rng)
    x = rng.standard_normal((args.batch, 784)).astype(np.float32).astype(np.float64)
    x32 = x.astype(np.float32)
    p32 = [(W.astype(np.float32), b.astype(np.float32)) for W, b in params]
    print(f"binary32 folds of MLP 784-1024-1024-10, batch {args.batch}, vs numpy float32 "
          f"forward; 1 thread, best of {args.repeats}, interleaved")
    print(f"{'context':<20} {'fold ms':>9} {'numpy ms':>9} {'ratio':>6} {'fold CPU':>9} "
          f"{'numpy CPU':>9} {'rCPU':>6}  max|fold - numpy32|")
    verdict = []
    for name in ("binary32", "binary32+fma", "binary32/pairwise"):
        ctx = scalars.get(name)
        graph.denote(g, p, x[:8], ctx)                   # compile / load caches
        y = graph.denote(g, p, x, ctx)
        ref = numpy_mlp(x32, p32)
        err = float(np.max(np.abs(np.asarray(y) - ref.astype(np.float64))))
        (tf, tn), (cf, cn) = benchlib.interleaved([lambda: graph.denote(g, p, x, ctx),
                                          lambda: numpy_mlp(x32, p32)], args.repeats)
        print(f"{name:<20} {tf * 1e3:9.1f} {tn * 1e3:9.1f} {tf / tn:6.2f} {cf * 1e3:9.1f} "
              f"{cn * 1e3:9.1f} {cf / cn:6.2f}  {err:.2e}")
        verdict.append(f"floor <= {FLOOR:g}x numpy float32 ({name}): "
                       f"{'PASS' if min(tf / tn, cf / cn) <= FLOOR else 'FAIL'} "
                       f"(wall {tf / tn:.2f}x, CPU {cf / cn:.2f}x)")
    print("\n".join(verdict))
    # The dot-product kernels alone on the first layer (x @ W.T, W read transposed), float32
    # in and out, against numpy float32's sgemm: what the folds above spend outside them is
    # conversion, bias and relu.
    W32 = p32[0][0]
    o32 = np.empty((1, x32.shape[0], W32.shape[0]), dtype=np.float32)
    o64 = np.empty(o32.shape)
    kernels = [("sequential", lambda: BM.matmul32(False, x32[None], W32[None], o64, True)),
               ("fma", lambda: BM.matmul32(True, x32[None], W32[None], o64, True)),
               ("pairwise", lambda: PW.matmul32_pairwise(x32[None], W32[None], o32, True))]
    for _, f in kernels:
        f()
    times = benchlib.interleaved([f for _, f in kernels] + [lambda: x32 @ W32.T],
                                 args.repeats)
    print(f"\nkernels alone, {x32.shape[0]}x{W32.shape[1]} @ {W32.shape[1]}x{W32.shape[0]} "
          f"vs numpy float32 matmul ({times[0][-1] * 1e3:.1f} ms wall, "
          f"{times[1][-1] * 1e3:.1f} ms CPU)")
    for k, (label, _) in enumerate(kernels):
        print(f"  {label:<11} {times[0][k] * 1e3:8.1f} ms  ratio {times[0][k] / times[0][-1]:5.2f}"
              f"  rCPU {times[1][k] / times[1][-1]:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
