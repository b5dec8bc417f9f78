"""Tape engine vs PyTorch CPU, side by side in one process (float64).

1. Forward + backward of an MLP 784-256-10 (relu, mean squared error), batch 128: the
   floor ratio (best-of-N time of the tape / best-of-N time of torch) should be <= 1.5.
2. Per-op overhead on tiny tensors: a chain of 10^4 elementwise ops on shape [4], recorded
   and differentiated, microseconds per op for both engines.

Run: ``python bench/tape.py [--repeat N]``.  Prints numbers and ratios; asserts nothing.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path


def _threads_from_argv(default: int = 1) -> int:
    for i, tok in enumerate(sys.argv):
        if tok.startswith("--threads="):
            return int(tok.split("=", 1)[1])
        if tok == "--threads" and i + 1 < len(sys.argv):
            return int(sys.argv[i + 1])
    return default


# Both engines get the same number of BLAS threads (default 1: spinning BLAS threads on a
# shared machine make multi-threaded timings meaningless).  Must be set before numpy loads.
if __name__ == "__main__":
    # (NUMBA_NUM_THREADS: the float64 context's matmul threads, scalars/kernels/f64_matmul.py)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                "NUMBA_NUM_THREADS"):
        os.environ[var] = str(_threads_from_argv())

import numpy as np  # noqa: E402

# Run as a script, this file's folder comes first on sys.path and its own name would
# shadow the ``tape`` package: put the repository root in front.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import mlp_tape, mlp_torch  # noqa: E402  (the thread settings above stay)


def best_of_pair(ours, theirs, repeat: int) -> tuple:
    """Best-of-``repeat`` times of two callables, run interleaved (ours, theirs, ours, ...)
    so that both see the same machine load; the floor ratio is robust to load drift."""
    ours(), theirs()                       # warm-up (BLAS threads, allocations)
    a, b = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        ours()
        t1 = time.perf_counter()
        theirs()
        t2 = time.perf_counter()
        a.append(t1 - t0)
        b.append(t2 - t1)
    return min(a), min(b)


def chain_tape(x0, n):
    from scalarlab.tape import TapeBuilder, backward
    b = TapeBuilder("float64")
    x = b.leaf(x0, name="x")
    c = b.const(np.full(x0.shape, 0.5), name="c")
    v = x
    for i in range(n):
        v = b.mul(v, c) if i % 2 else b.add(v, c)
    backward(b.tape, b.sum(v))


def chain_torch(torch, x0, n):
    x = torch.tensor(x0, requires_grad=True)
    c = torch.full(x0.shape, 0.5, dtype=torch.float64)
    v = x
    for i in range(n):
        v = v * c if i % 2 else v + c
    v.sum().backward()


def main(argv=None) -> int:
    import torch
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--ops", type=int, default=10_000)
    ap.add_argument("--threads", type=int, default=1, help="BLAS/torch threads for both")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    params = [rng.standard_normal((256, 784)) / 28, rng.standard_normal(256) * 0.1,
              rng.standard_normal((10, 256)) / 16, rng.standard_normal(10) * 0.1]
    x = rng.standard_normal((128, 784))
    y = rng.standard_normal((128, 10))
    tparams = [torch.tensor(p) for p in params]
    tx, ty = torch.tensor(x), torch.tensor(y)

    # correctness first: the two engines must agree before their times mean anything
    lv, lg = mlp_tape("float64", params, x, y)
    tv, tg = mlp_torch(torch, tparams, tx, ty)
    # norm-wise relative difference per tensor (max |a - b| / max |b|)
    err = max(float(np.max(np.abs(a - b.numpy())) / max(float(np.max(np.abs(b.numpy()))), 1e-300))
              for a, b in zip([lv] + lg, [tv.detach()] + tg))
    print(f"torch {torch.__version__}, threads={torch.get_num_threads()}, numpy {np.__version__}")
    print(f"MLP 784-256-10 relu+mse, batch 128, float64: max rel diff vs torch = {err:.2e}")

    t_ours, t_torch = best_of_pair(lambda: mlp_tape("float64", params, x, y),
                                   lambda: mlp_torch(torch, tparams, tx, ty), args.repeat)
    print(f"  forward+backward: tape {t_ours * 1e3:.3f} ms, torch {t_torch * 1e3:.3f} ms, "
          f"floor ratio {t_ours / t_torch:.2f} (target <= 1.5)")

    n = args.ops
    x0 = rng.standard_normal(4)
    reps = max(3, args.repeat // 5)
    c_ours, c_torch = best_of_pair(lambda: chain_tape(x0, n),
                                   lambda: chain_torch(torch, x0, n), reps)
    print(f"per-op overhead, {n} tiny ops (shape [4]) recorded + backward:")
    print(f"  tape {c_ours / n * 1e6:.2f} us/op, torch {c_torch / n * 1e6:.2f} us/op, "
          f"ratio {c_ours / c_torch:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
