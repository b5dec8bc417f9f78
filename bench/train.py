"""Training-step throughput beside PyTorch, and the memory saved by ``checkpoint``.

Part 1: steps/s of one SGD-momentum training step (forward, MSE loss, reverse pass,
update) in float64 for the quickstart model (2-8-1, batch 5) and an MLP 784-256-256-10
(batch 128), eager and typed-graph, beside PyTorch (CPU, float64) doing the same step in
the same process.  Ratio = torch steps/s / ours (lower is better; the goal for the large
model is <= 1.5).  Timings are best-of-N CPU time with one BLAS thread on both
sides (the machine is shared).

Part 2: peak traced memory (tracemalloc) of forward + backward through a deep MLP with
and without ``tape.training.checkpoint`` segments, plus a check that gradients agree.

Run: ``python bench/train.py [--quick]``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc
from pathlib import Path

# One BLAS thread on both sides: CPU time then measures work, not idle spinning threads
# (set before numpy is imported; torch gets torch.set_num_threads(1)); Numba's thread
# count is the float64 matmul chain's (scalars/kernels/f64_matmul.py).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scalarlab.tape import EagerOps, Session as TapeSession            # noqa: E402
from scalarlab.tape.training import (Linear, ReLU, SGD, Sequential,     # noqa: E402
                                     TrainingSession, checkpoint)


def _best(fn, reps: int, inner: int) -> float:
    """Best CPU seconds per call over ``reps`` runs of ``inner`` calls."""
    best = float("inf")
    for _ in range(reps):
        t = time.process_time()
        for _ in range(inner):
            fn()
        best = min(best, (time.process_time() - t) / inner)
    return best


def _mlp(sizes):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(ReLU())
    return Sequential(*layers)


def throughput(sizes, batch, reps, inner):
    import torch
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(batch, sizes[0]))
    y = rng.normal(size=(batch, sizes[-1]))
    row = {"model": "-".join(map(str, sizes)), "batch": batch}
    for ex in ("eager", "typed-graph"):
        sess = TrainingSession(_mlp(sizes), "float64", SGD("0.01", "0.9"), execution=ex, seed=0)
        sess.step(x, y)                                  # records the graph / warms up
        row[ex] = 1.0 / _best(lambda: sess.step(x, y), reps, inner)
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    tm = torch.nn.Sequential(*layers).double()
    opt = torch.optim.SGD(tm.parameters(), lr=0.01, momentum=0.9)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)

    def tstep():
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(tm(tx), ty)
        loss.backward()
        opt.step()
    tstep()
    row["torch"] = 1.0 / _best(tstep, reps, inner)
    return row


def memory(depth, width, batch, seg):
    rng = np.random.default_rng(1)
    Ws = [rng.normal(size=(width, width)) / np.sqrt(width) for _ in range(depth)]
    bs = [rng.normal(size=width) * 0.1 for _ in range(depth)]
    x0 = rng.normal(size=(batch, width))

    def block(ops, h, *wb):
        for w, b in zip(wb[0::2], wb[1::2]):
            h = ops.tanh(ops.linear(h, w, b))
        return h

    def run(use_ck):
        s = TapeSession("float64")
        ops = EagerOps(s)
        W = [s.leaf(w, "W") for w in Ws]
        B = [s.leaf(b, "b") for b in bs]
        h = s.const(x0, "x")
        for i in range(0, depth, seg):
            args = [a for j in range(i, min(i + seg, depth)) for a in (W[j], B[j])]
            h = checkpoint(ops, block, h, *args) if use_ck else block(ops, h, *args)
        g = s.backward(ops.sum(ops.mul(h, h)))
        return [g[s.resolve(w)] for w in W], len(s.tape)

    out = {}
    for use_ck in (False, True):
        tracemalloc.start()
        grads, n = run(use_ck)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        out[use_ck] = (peak, n, grads)
    same = all(np.array_equal(a, b) for a, b in zip(out[False][2], out[True][2]))
    return out, same


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    a = ap.parse_args(argv)
    reps = 3 if a.quick else 5
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"== training step throughput, float64, SGD momentum (steps/s, best CPU time, "
          f"1 thread, load {load:.1f}) ==")
    print(f"{'model':>16} {'batch':>5} {'eager':>9} {'graph':>9} {'torch':>9} "
          f"{'torch/eager':>11} {'torch/graph':>11}")
    for sizes, batch, inner in (((2, 8, 1), 5, 50), ((784, 256, 256, 10), 128, 5)):
        r = throughput(sizes, batch, reps, inner)
        print(f"{r['model']:>16} {r['batch']:>5} {r['eager']:9.1f} {r['typed-graph']:9.1f} "
              f"{r['torch']:9.1f} {r['torch'] / r['eager']:11.2f} "
              f"{r['torch'] / r['typed-graph']:11.2f}")
    print()
    depth, width, batch, seg = 32, 256, 256, 8
    out, same = memory(depth, width, batch, seg)
    print(f"== peak memory, deep MLP {depth} x tanh(linear {width}), batch {batch}, "
          f"checkpoint every {seg} layers (tracemalloc) ==")
    for use_ck, label in ((False, "plain tape"), (True, "checkpoint")):
        peak, n, _ = out[use_ck]
        print(f"{label:>12}: peak {peak / 2**20:8.1f} MiB, tape nodes {n}")
    print(f"saving: {out[False][0] / out[True][0]:.2f}x; gradients identical: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
