"""Benchmark: IBP from Box.from_center_radius vs from a float-array box, and the box
construction itself (issue 16), side by side in one process, interleaved, best of k.

1. ``Box.from_center_radius(c, r)`` on 200,000 entries, float radius (vectorised ball) and
   decimal radius "0.01" (vectorised with exact fallback), against building the float box
   ``Box(c - r, c + r)`` (which is not exact; the peer).  Floor: < 50 ms for float bases.
2. ``run_ibp`` of MLP 784-1024-1024-10 (relu), batch 256, over interval:float64 and
   interval:binary32, from the ball vs from the float-array box.  Floor: ratio <= 1.1.
3. The same IBP (interval:float64, ball) vs the float64 forward of the graph.  Floor:
   <= 2.5.

Usage: python bench/ibp_box.py [--repeats K]
"""
from __future__ import annotations

import os

import benchlib  # noqa: E402  (first: one thread for every library)

import argparse  # noqa: E402
import sys  # noqa: E402

# this directory holds ibp.py: keep it off the import path
sys.path = [q for q in sys.path
            if os.path.abspath(q or ".") != os.path.dirname(os.path.abspath(__file__))]

import numpy as np  # noqa: E402

from scalarlab import scalars  # noqa: E402
from scalarlab.graph import denote_all  # noqa: E402
from scalarlab.ibp import Box, run_ibp  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    print("process CPU times (shared machine), best of", args.repeats, "interleaved\n")

    c = rng.standard_normal(200_000)
    _, (t_ball, t_dec, t_arr) = benchlib.interleaved([lambda: Box.from_center_radius(c, 0.01),
        lambda: Box.from_center_radius(c, "0.01"),
        lambda: Box(c - 0.01, c + 0.01)], args.repeats)
    print(f"1. box of 200,000 entries: from_center_radius(c, 0.01) {t_ball * 1e3:.1f} ms "
          f"({'PASS' if t_ball < 0.05 else 'FAIL'} < 50 ms), (c, '0.01') {t_dec * 1e3:.1f} "
          f"ms; float-array Box(c - r, c + r) {t_arr * 1e3:.1f} ms (ratio "
          f"{t_ball / t_arr:.2f})")

    g, p = benchlib.mlp_graph([784, 1024, 1024, 10], rng)
    x = rng.random((256, 784))
    f64 = scalars.get("float64")
    for name in ("interval:float64", "interval:binary32"):
        iv = scalars.get(name)
        ball = Box.from_center_radius(x, 0.01)
        arr = Box(x - 0.01, x + 0.01)
        run_ibp(g, p, ball, iv)
        _, (t_b, t_a, t_f) = benchlib.interleaved([lambda: run_ibp(g, p, ball, iv),
                                                   lambda: run_ibp(g, p, arr, iv),
                                                   lambda: denote_all(g, p, x, f64)],
                                                  args.repeats)
        print(f"2. run_ibp MLP 784-1024-1024-10 batch 256 {name}: from ball "
              f"{t_b * 1e3:.1f} ms, from float-array box {t_a * 1e3:.1f} ms, ratio "
              f"{t_b / t_a:.2f} ({'PASS' if t_b / t_a <= 1.1 else 'FAIL'} <= 1.1)")
        print(f"3.   vs float64 forward {t_f * 1e3:.1f} ms: ratio {t_b / t_f:.2f}"
              + (f" ({'PASS' if t_b / t_f <= 2.5 else 'FAIL'} <= 2.5)"
                 if name == "interval:float64" else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
