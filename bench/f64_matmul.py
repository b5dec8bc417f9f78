"""Benchmark: the float64 context's sequential-fma matmul (scalars/kernels/f64_matmul.py) against
numpy (OpenBLAS) and torch (MKL) float64, one thread each, interleaved in one process, best
of k; GFLOP/s (2MNK / wall) and the ratios ours/numpy and ours/torch (time, < 1 = faster).

Shapes: the two GEMMs of the tape MLP step (784-256-10, batch 128): forward ``x @ W1.T``
(W1 read transposed) and the weight gradient ``g.T @ x`` (A an F-order view), and 1024^3.

Usage: python bench/f64_matmul.py [--repeats K] [--cpu]
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


def cases(rng):
    x = rng.standard_normal((128, 784))
    W = rng.standard_normal((256, 784))
    g = rng.standard_normal((128, 256))
    a = rng.standard_normal((1024, 1024))
    b = rng.standard_normal((1024, 1024))
    return [("(128x784) @ (256x784).T", x, W.T), ("(128x256).T @ (128x784)", g.T, x),
            ("1024^3", a, b)]


def main(argv=None) -> int:
    import torch
    from scalarlab.scalars.kernels.f64_matmul import matmul_f64
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--cpu", action="store_true", help="rank by process CPU time, not wall")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    k = 1 if args.cpu else 0
    print(f"float64 GEMM, 1 thread, best of {args.repeats} interleaved "
          f"({'CPU' if args.cpu else 'wall'} time); numpy {np.__version__}, torch "
          f"{torch.__version__}")
    for name, a, b in cases(rng):
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        ours = matmul_f64(a, b)
        if ours is None:
            print(f"{name}: left to numpy by matmul_f64")
            continue
        scale = np.abs(a) @ np.abs(b)
        rel = float(np.max(np.abs(ours - a @ b) / np.where(scale > 0, scale, 1)))
        reps = max(3, args.repeats // 6) if a.shape[0] >= 1024 else args.repeats
        t = interleaved([lambda: a @ b, lambda: ta @ tb, lambda: matmul_f64(a, b)], reps,
                        warm=True)[k]
        fl = 2.0 * a.shape[0] * a.shape[1] * b.shape[1]
        print(f"{name:>26}: numpy {fl / t[0] / 1e9:5.1f}  torch {fl / t[1] / 1e9:5.1f}  "
              f"ours {fl / t[2] / 1e9:5.1f} GFLOP/s ({t[2] * 1e3:.3f} ms); time ratio "
              f"ours/numpy {t[2] / t[0]:.2f}, ours/torch {t[2] / t[1]:.2f}; "
              f"max |ours - numpy| / (|a||b|) = {rel:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
