"""Benchmark of ``scalarlab bound`` (not a test): FPTaylor's binary64 suite, our bound
beside FPTaylor's published one, the sampled maximum and the time.

For each benchmark of :data:`experiments.bound.FPTAYLOR_BINARY64` the script runs
``bound`` twice in binary64: with the arguments real numbers rounded into binary64 (the
model of FPTaylor's table: compare these) and with the arguments binary64 values (the
lab's execution, what the sampled maximum measures).  It prints one Markdown row per
benchmark (the table of docs/bound.md) and the summary: how many are within 2x of
FPTaylor, how many are tighter, the largest time.

Run: ``python bench/bound.py [--samples N] [--budget SEC]``.
"""
from __future__ import annotations

import argparse
import glob
import os
import sys

import benchlib  # noqa: E402,F401  (one thread per numeric library)

from scalarlab.experiments import bound as B  # noqa: E402
from scalarlab.graph.importers.fpcore import read_fpcore  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                    "fpbench")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=1024)
    ap.add_argument("--budget", type=float, default=B.DEFAULT_BUDGET_S)
    ap.add_argument("--formats", default="",
                    help="also a table of these formats (e.g. binary32,bfloat16): bound, "
                         "sampled max, ratio, time per benchmark")
    args = ap.parse_args(argv)
    progs = {p.name: p for f in sorted(glob.glob(os.path.join(DATA, "*.fpcore")))
             for p in read_fpcore(f)}
    print("| benchmark | bound, real inputs | FPTaylor | ratio | bound, binary64 inputs | "
          "sampled max | bound / sampled | time (s) |")
    print("|---|---|---|---|---|---|---|---|")
    within = tighter = equal = 0
    worst_t = 0.0
    for name in sorted(B.FPTAYLOR_BINARY64, key=str.lower):
        p = B.program_of_fpcore(progs[name])
        real = B.bound_one(p, "binary64", samples=0, real_inputs=True,
                           budget_s=args.budget)
        fmt = B.bound_one(p, "binary64", samples=args.samples, budget_s=args.budget)
        ratio = real["bound_abs"] / B.FPTAYLOR_BINARY64[name]
        within += ratio <= 2
        tighter += ratio < 0.995            # by more than half a percent
        equal += 0.995 <= ratio <= 1.0
        t = max(real["time_s"], fmt["time_s"])
        worst_t = max(worst_t, t)
        print(f"| {name} | {real['bound_abs']:.3e} | {B.FPTAYLOR_BINARY64[name]:.3e} | "
              f"{ratio:.2f} | {fmt['bound_abs']:.3e} | {fmt['sampled_max']:.3e} | "
              f"{fmt['ratio']:.2f} | {t:.2f} |")
        if fmt["violations"]:
            print(f"  {name}: {fmt['violations']} samples above the bound", file=sys.stderr)
    n = len(B.FPTAYLOR_BINARY64)
    print(f"\nwithin 2x of FPTaylor: {within} of {n}; tighter by > 0.5%: {tighter}; "
          f"equal to 0.5% or below: {equal}; largest time {worst_t:.2f} s")
    fmts = [f for f in args.formats.split(",") if f]
    if fmts:
        print("\n| benchmark | " + " | ".join(f"{f} bound | sampled max | ratio | time (s)"
                                            for f in fmts) + " |")
        print("|---|" + "---|---|---|---|" * len(fmts))
        for name in sorted(B.FPTAYLOR_BINARY64, key=str.lower):
            p = B.program_of_fpcore(progs[name])
            cells = []
            for f in fmts:
                r = B.bound_one(p, f, samples=args.samples, budget_s=args.budget)
                cells.append(f"{r['bound_abs']:.3e} | {r['sampled_max']:.3e} | "
                             f"{r['ratio']:.2f} | {r['time_s']:.2f}")
                if r["violations"]:
                    print(f"  {name} {f}: {r['violations']} samples above the bound",
                          file=sys.stderr)
            print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
