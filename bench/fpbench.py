"""Benchmark of ``scalarlab fpbench`` (not a test): samples per second of the Arb oracle
and of the format runs, per stage, on the vendored FPBench files.

For each benchmark that translates, the same bit-pattern samples (drawn once, without the
precondition, so sampling is not timed) go through

* the oracle (``experiments.oracle.reference``: Arb balls, doubled precision for the
  undecided samples, per-node midpoints),
* the context's run (``fpbench.robust_values``: the fold in binary64 / binary32), and
* the whole measurement (``fpbench.run_benchmark`` with ``x=``: oracle, run, metrics),

and the script prints wall and CPU seconds and samples per second per stage, summed over
the benchmarks, plus the slowest benchmarks of the oracle.  The full command
(``scalarlab fpbench --samples 8000`` on all files, sampling included) is timed with
``--full``.

Run: ``python bench/fpbench.py [--samples N] [--full]``.
"""
from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import time


import benchlib  # noqa: E402,F401  (one thread per numeric library)
import numpy as np  # noqa: E402

from scalarlab.experiments import cases as CS
from scalarlab.experiments import fpbench as F  # noqa: E402
from scalarlab.experiments import oracle as O  # noqa: E402
from scalarlab.experiments import sampling as S  # noqa: E402
from scalarlab.scalars import formats, get  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def clock(fn):
    c, t = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t, time.process_time() - c


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--full", action="store_true",
                    help="also time the whole CLI run: fpbench --samples 8000 on all files")
    args = ap.parse_args()
    files = sorted(glob.glob(os.path.join(ROOT, "tests", "data", "fpbench", "*.fpcore")))
    progs = [p for p in F.load_programs(files) if p.graph is not None]
    n = args.samples
    for ctx_name in ("binary64", "binary32"):
        ctx, fmt = get(ctx_name), formats.get(ctx_name)
        rng = np.random.default_rng(0)
        tot = {"oracle": [0.0, 0.0], "run": [0.0, 0.0], "measure": [0.0, 0.0]}
        slow = []
        for p in progs:
            k = len(p.arguments)
            X = S.draw([S.Region()] * k, fmt, n, rng, "bitpattern")[0] if k else \
                np.zeros((1, 0))
            case = CS.GraphCase(p.name, p.graph, p.payload)
            _, w, c = clock(lambda: O.reference(p.graph, p.payload, X, fmt))
            tot["oracle"][0] += w
            tot["oracle"][1] += c
            slow.append((w, p.name))
            _, w, c = clock(lambda: F.robust_values(case, S.split_columns(case, X), ctx,
                                                    len(X)))
            tot["run"][0] += w
            tot["run"][1] += c
            _, w, c = clock(lambda: F.run_benchmark(p, ctx, x=X))
            tot["measure"][0] += w
            tot["measure"][1] += c
        total = n * len(progs)
        print(f"{ctx_name}: {len(progs)} benchmarks x {n} bit-pattern samples")
        for stage, (w, c) in tot.items():
            print(f"  {stage:8s} wall {w:7.2f} s  cpu {c:7.2f} s  {total / w:10.0f} samples/s")
        slow.sort(reverse=True)
        print("  slowest oracle: " + ", ".join(f"{nm} {w:.2f} s" for w, nm in slow[:4]))
    if args.full:
        cmd = [sys.executable, "-m", "scalarlab.experiments", "fpbench", *files,
               "--samples", "8000", "--quiet", "--out", "/tmp/fpbench-8000.csv"]
        c0 = os.times()
        t = time.perf_counter()
        rc = subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode
        w = time.perf_counter() - t
        c1 = os.times()
        cpu = (c1.children_user + c1.children_system) - (c0.children_user + c0.children_system)
        print(f"full CLI run, 8000 samples, binary64 + binary32, {len(files)} files: "
              f"wall {w:.1f} s, cpu {cpu:.1f} s (exit {rc})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
