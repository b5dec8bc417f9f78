"""Benchmark of ``scalarlab gaps`` (not a test): output-gap samples per second.

The six-node graph in binary32, with (a) the mpmath:200 oracle for every sample
(floor >= 2,000 samples/s) and (b) the float64 reference, admitted only after it matched
the oracle on a checked subset (floor >= 10^5 samples/s).  Both runs happen in this
process, one after the other, and the figures below include sampling, both evaluations
and the metric computation.

Run: ``python bench/experiments.py [--quick]``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

# keep bench/ off the import path (this file is named like the package it measures)
sys.path = [q for q in sys.path if os.path.abspath(q or ".") != os.path.dirname(os.path.abspath(__file__))]

from scalarlab import scalars
from scalarlab.experiments import cases as CS
from scalarlab.experiments.gaps import gaps  # noqa: E402


def timed(fn):
    t0 = time.perf_counter()
    res = fn()
    return res, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    case = CS.load_case("six-node")
    ctx = scalars.get("binary32")
    n_oracle = 2_000 if args.quick else 10_000
    n_cheap = 50_000 if args.quick else 500_000
    gaps(case, ctx, samples=200, seed=1)  # warm-up (numba caches, imports)
    res_o, t_o = timed(lambda: gaps(case, ctx, samples=n_oracle, seed=2,
                                    oracle_limit=10 ** 9))
    res_c, t_c = timed(lambda: gaps(case, ctx, samples=n_cheap, seed=3, oracle_limit=1000))
    print("scalarlab gaps, six-node graph, binary32, box sampling radius 0.05")
    print(f"  oracle reference  : {res_o.reference.label}")
    print(f"     {n_oracle} samples in {t_o:.2f} s = {n_oracle / t_o:,.0f} samples/s "
          f"(floor >= 2,000/s); max gap {res_o.ulps.max():.0f} ULP")
    print(f"  cheap reference   : {res_c.reference.label}")
    print(f"     {n_cheap} samples in {t_c:.2f} s = {n_cheap / t_c:,.0f} samples/s "
          f"(floor >= 100,000/s); max gap {res_c.ulps.max():.0f} ULP")
    print(f"  ratio cheap/oracle throughput: {(n_cheap / t_c) / (n_oracle / t_o):.1f}x")


if __name__ == "__main__":
    main()
