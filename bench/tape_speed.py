"""Benchmark: tape forward+backward of MLP 784-256-10 (relu, mse), batch 128, against
PyTorch CPU in the same process: float64 vs torch float64 (issue 16 floor <= 1.1) and
binary32 (exact sequential rounding) vs torch float32 (floor <= 2.5).  Interleaved, best
of k, 1 BLAS thread for both; process CPU times beside wall (shared machine).  Also the
BLAS part alone: numpy's, torch's and the float64 context's own (blocked fma chains,
scalars/kernels/f64_matmul.py) float64 GEMMs on the two large products of the step.

Usage: python bench/tape_speed.py [--repeats K]
"""
from __future__ import annotations

import os

import benchlib  # noqa: E402,F401  (first: one thread for every library)

import argparse  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402

sys.path = [q for q in sys.path
            if os.path.abspath(q or ".") != os.path.dirname(os.path.abspath(__file__))]

from benchlib import interleaved, mlp_tape, mlp_torch  # noqa: E402


def main(argv=None) -> int:
    import torch
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    p64 = [rng.standard_normal((256, 784)) / 28, rng.standard_normal(256) * 0.1,
           rng.standard_normal((10, 256)) / 16, rng.standard_normal(10) * 0.1]
    x = rng.standard_normal((128, 784))
    y = rng.standard_normal((128, 10))
    print(f"MLP 784-256-10 relu+mse, batch 128, fwd+bwd; torch {torch.__version__}, 1 thread, "
          f"best of {args.repeats}, interleaved")
    for ctx, dt, floor in (("float64", torch.float64, 1.1), ("binary32", torch.float32, 2.5)):
        # binary32 values are float32 arrays (the context's storage), as torch's
        ps = [p.astype(np.float32) for p in p64] if dt == torch.float32 else p64
        xs = x.astype(np.float32) if dt == torch.float32 else x
        ys = y.astype(np.float32) if dt == torch.float32 else y
        tp = [torch.tensor(p, dtype=dt) for p in ps]
        tx, ty = torch.tensor(xs, dtype=dt), torch.tensor(ys, dtype=dt)
        lv, _ = mlp_tape(ctx, ps, xs, ys)
        tv, _ = mlp_torch(torch, tp, tx, ty)
        (w0, w1), (c0, c1) = interleaved([lambda: mlp_tape(ctx, ps, xs, ys),
                                          lambda: mlp_torch(torch, tp, tx, ty)], args.repeats,
                                         warm=True)
        print(f"{ctx:>9} vs torch {str(dt)[6:]}: tape {w0 * 1e3:.2f} ms, torch {w1 * 1e3:.2f} "
              f"ms, ratio {w0 / w1:.2f} (CPU {c0 / c1:.2f}); floor <= {floor:g}: "
              f"{'PASS' if c0 / c1 <= floor else 'FAIL'} (CPU); loss {float(lv):.6g} "
              f"vs {float(tv.detach()):.6g}")
    from scalarlab.scalars.kernels.f64_matmul import matmul_f64
    g = rng.standard_normal((128, 256))
    W = p64[0]
    tx, tW, tg = (torch.tensor(v) for v in (x, W, g))
    (a, b, c), _ = interleaved([lambda: (x @ W.T, g.T @ x),
                                lambda: (torch.nn.functional.linear(tx, tW), tg.T @ tx),
                                lambda: (matmul_f64(x, W.T), matmul_f64(g.T, x))],
                               args.repeats)
    print(f"BLAS alone (float64 x@W1.T and g.T@x): numpy {a * 1e3:.2f} ms, torch "
          f"{b * 1e3:.2f} ms, ours (blocked fma chains, scalars/kernels/f64_matmul.py, what the float64 "
          f"context runs) {c * 1e3:.2f} ms; ratios numpy/torch {a / b:.2f}, ours/torch "
          f"{c / b:.2f}, ours/numpy {c / a:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
