"""IBP benchmarks (not a test): prints timings and ratios, competitor in the same process.

1. IBP through an MLP 784-1024-1024-10 (relu), batch 256, ``interval:float64`` vs the
   float64 forward of the same graph (floor: ratio <= 3).
2. Interval matmul, naive endpoint algorithm vs midpoint-radius: width and time.
3. Containment throughput on the six-node graph: samples/s in float64, batched
   (floor: >= 10^6 samples/s).

Run: ``python bench/ibp.py [--quick]``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

# this file is named like the package it measures: keep bench/ off the import path
sys.path = [q for q in sys.path if os.path.abspath(q or ".") != os.path.dirname(os.path.abspath(__file__))]

import numpy as np  # noqa: E402

from scalarlab import scalars
from scalarlab.graph import Graph, Node, Payload, denote_all, examples
from scalarlab.ibp import Box, check_containment, run_ibp


def best_of(fn, repeat=3):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def mlp(sizes, rng):
    nodes = [Node(0, [], "input", [sizes[0]])]
    payload = {}
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        nid = len(nodes)
        nodes.append(Node(nid, [nid - 1], "linear", [b]))
        payload[nid] = {"W": rng.standard_normal((b, a)) / np.sqrt(a),
                        "b": rng.standard_normal(b) * 0.01}
        if i < len(sizes) - 2:
            nodes.append(Node(nid + 1, [nid], "relu", [b]))
    return Graph(nodes), Payload(payload)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller sizes (smoke run)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    sizes = [784, 256, 256, 10] if args.quick else [784, 1024, 1024, 10]
    batch = 64 if args.quick else 256
    g, p = mlp(sizes, rng)
    x = rng.random((batch, sizes[0]))
    f64 = scalars.get("float64")
    iv = scalars.get("interval:float64")
    box = Box(x - 0.01, x + 0.01)
    denote_all(g, p, x, f64); run_ibp(g, p, box, iv)  # warm-up
    t_f = best_of(lambda: denote_all(g, p, x, f64))
    t_i = best_of(lambda: run_ibp(g, p, box, iv))
    print(f"MLP {'-'.join(map(str, sizes))} batch {batch}")
    print(f"  float64 forward          {t_f * 1e3:9.2f} ms")
    print(f"  IBP interval:float64     {t_i * 1e3:9.2f} ms   ratio {t_i / t_f:5.2f}  (floor <= 3)")

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
