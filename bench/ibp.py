"""IBP benchmarks (not a test): prints timings and ratios, competitor in the same process.

1. IBP through an MLP 784-1024-1024-10 (relu), batch 256, box from
   ``Box.from_center_radius``: ``interval:float64`` vs the float64 forward of the same graph
   (floor: ratio <= 2.5), and vs the unfused interval fold (the linear op's forward rule
   run in interval arithmetic, relu as two maximum passes: the path before the fused
   ``affine`` rule; same endpoints bitwise, checked here); ``interval:binary32`` reported
   against the same float64 forward.  Interleaved best of k, wall and process CPU time,
   one BLAS thread (benchlib).
2. Interval matmul, naive endpoint algorithm vs midpoint-radius: width and time.
3. Containment throughput on the six-node graph: samples/s in float64, batched
   (floor: >= 10^6 samples/s).

Run: ``python bench/ibp.py [--quick] [--repeats K]``.
"""
from __future__ import annotations

import os
import sys

import benchlib  # noqa: E402  (first: one thread for every library)

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import time  # noqa: E402

# this file is named like the package it measures: keep bench/ off the import path
sys.path = [q for q in sys.path if os.path.abspath(q or ".") != os.path.dirname(os.path.abspath(__file__))]

import numpy as np  # noqa: E402

from scalarlab import scalars  # noqa: E402
from scalarlab.graph import denote_all, examples  # noqa: E402
from scalarlab.graph.optable import OPS  # noqa: E402
from scalarlab.ibp import Box, check_containment, run_ibp  # noqa: E402
from scalarlab.ibp import propagate  # noqa: E402
from scalarlab.scalars import interval_linalg as interval_mod  # noqa: E402


def best_of(fn, repeat=3):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def run_unfused(g, p, box, iv):
    """run_ibp as before the fused dense-layer rule: linear's forward rule in interval
    arithmetic (matmul, then add), relu through two numpy maximum passes, no fused
    dense+relu kernels."""
    rec, relu, kern = OPS["linear"], interval_mod._relu_fast, propagate._dense_relu_kernels
    OPS["linear"] = dataclasses.replace(rec, interval=None)
    interval_mod._relu_fast = lambda a, b: None
    propagate._dense_relu_kernels = lambda g, c: {}
    try:
        return run_ibp(g, p, box, iv)
    finally:
        OPS["linear"] = rec
        interval_mod._relu_fast = relu
        propagate._dense_relu_kernels = kern


def same_boxes(xs, ys):
    return all(np.array_equal(a.lo.view(np.int64), b.lo.view(np.int64))
               and np.array_equal(a.hi.view(np.int64), b.hi.view(np.int64))
               for a, b in zip(xs, ys))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller sizes (smoke run)")
    ap.add_argument("--repeats", type=int, default=7, help="interleaved best of k")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    sizes = [784, 256, 256, 10] if args.quick else [784, 1024, 1024, 10]
    batch = 64 if args.quick else 256
    g, p = benchlib.mlp_graph(sizes, rng)
    x = rng.random((batch, sizes[0]))
    f64 = scalars.get("float64")
    iv = scalars.get("interval:float64")
    i32 = scalars.get("interval:binary32")
    box = Box.from_center_radius(x, 0.01)
    same = same_boxes(run_ibp(g, p, box, iv), run_unfused(g, p, box, iv))
    (t_f, t_i, t_u, t_b), (c_f, c_i, c_u, c_b) = benchlib.interleaved(
        [lambda: denote_all(g, p, x, f64), lambda: run_ibp(g, p, box, iv),
         lambda: run_unfused(g, p, box, iv), lambda: run_ibp(g, p, box, i32)],
        args.repeats, warm=True)
    print(f"MLP {'-'.join(map(str, sizes))} batch {batch}, box from_center_radius(x, 0.01); "
          f"best of {args.repeats} interleaved, 1 BLAS thread: wall ms (CPU ms)")
    print(f"  float64 forward              {t_f * 1e3:8.2f} ({c_f * 1e3:8.2f})")
    ok = c_i / c_f <= 2.5          # CPU time, as bench/tape_speed.py: the machine is shared
    print(f"  IBP interval:float64         {t_i * 1e3:8.2f} ({c_i * 1e3:8.2f})   ratio "
          f"{t_i / t_f:5.2f} wall, {c_i / c_f:5.2f} CPU  ({'PASS' if ok else 'FAIL'} (CPU): "
          f"floor <= 2.5)")
    print(f"  IBP interval:float64 unfused {t_u * 1e3:8.2f} ({c_u * 1e3:8.2f})   ratio "
          f"{t_u / t_f:5.2f} wall, {c_u / c_f:5.2f} CPU; fused/unfused {c_i / c_u:5.2f} CPU; "
          f"boxes bitwise identical: {same}")
    print(f"  IBP interval:binary32        {t_b * 1e3:8.2f} ({c_b * 1e3:8.2f})   ratio "
          f"{t_b / t_f:5.2f} wall, {c_b / c_f:5.2f} CPU  (reported, no floor)")
    out64, out32 = run_ibp(g, p, box, iv)[-1], run_ibp(g, p, box, i32)[-1]
    y = denote_all(g, p, x, f64)[-1]
    inside = all(bool(np.all((b.lo <= y) & (y <= b.hi))) for b in (out64, out32))
    print(f"  output box mean width: interval:float64 {np.mean(out64.hi - out64.lo):.6g}, "
          f"interval:binary32 {np.mean(out32.hi - out32.lo):.6g}; float64 forward of the "
          f"centres inside both: {inside}")

    # 2. endpoint vs midpoint-radius matmul on one layer
    n = 256 if args.quick else 512
    A = rng.standard_normal((64, n)); rA = rng.random((64, n)) * 1e-3
    Wm = rng.standard_normal((n, 128)) / np.sqrt(n)
    a = iv.make(A - rA, A + rA)
    w = iv.convert(Wm)
    t_mr = best_of(lambda: iv.matmul_midrad(a, w))
    t_ep = best_of(lambda: iv.matmul_endpoint(a, w), repeat=1)
    r_mr, r_ep = iv.matmul_midrad(a, w), iv.matmul_endpoint(a, w)
    w_mr = float(np.mean(r_mr.hi - r_mr.lo)); w_ep = float(np.mean(r_ep.hi - r_ep.lo))
    print(f"interval matmul (64x{n}) @ ({n}x128), radius 1e-3 inputs, point weights")
    print(f"  endpoint (sequential)    {t_ep * 1e3:9.2f} ms   mean width {w_ep:.6e}")
    print(f"  midpoint-radius (BLAS)   {t_mr * 1e3:9.2f} ms   mean width {w_mr:.6e}")
    print(f"  speed-up {t_ep / t_mr:7.1f}x, width ratio midrad/endpoint {w_mr / w_ep:.6f}")

    # 3. containment throughput
    g6, p6, x0 = examples.six_node_mlp()
    N = 200_000 if args.quick else 1_000_000
    box6 = Box.from_center_radius(x0, "0.05")
    boxes = run_ibp(g6, p6, box6, "interval:float64")
    check_containment(g6, p6, box6, samples=1000, point_ctx="float64", boxes=boxes)
    t_c = best_of(lambda: check_containment(g6, p6, box6, samples=N, point_ctx="float64",
                                            boxes=boxes, vertices=False), repeat=2)
    print(f"containment, six-node graph, {N} samples in float64 (batched)")
    print(f"  {N / t_c:,.0f} samples/s   (floor >= 1,000,000)")


if __name__ == "__main__":
    main()
