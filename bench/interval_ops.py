"""Benchmark: interval ops vs the float64 op, side by side in one process (issue 16: each
compiled interval op within 10x the float op).  10^6 intervals of radius ~1e-3 around
standard normal values; interval:float64 and interval:binary32; interleaved, best of k,
process CPU time (shared machine), wall time beside it.  The peer of exp/tanh/sigmoid/softplus is numpy's exp /
tanh on float64, of log numpy's log, of div/sqrt/sum the numpy float64 op.

Usage: python bench/interval_ops.py [--repeats K] [--n N]
"""
from __future__ import annotations

import benchlib  # noqa: E402  (first: one thread for every library)

import argparse  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402

from scalarlab import scalars  # noqa: E402

FLOOR = 10.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--n", type=int, default=1_000_000)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    n = args.n
    x = rng.standard_normal(n)
    r = np.abs(rng.standard_normal(n)) * 1e-3
    xp = np.abs(x) + 0.1
    rows = int(np.sqrt(n))
    print(f"{n:,} intervals, CPU time best of {args.repeats}, interleaved; ratio = interval "
          f"/ float64 op (floor <= {FLOOR:g})")
    for name in ("interval:float64", "interval:binary32"):
        iv = scalars.get(name)
        a = iv.make(x - r, x + r)
        ap_ = iv.make(xp - r, xp + r)
        a2 = iv.make((x - r)[:rows * rows].reshape(rows, rows),
                     (x + r)[:rows * rows].reshape(rows, rows))
        x2 = x[:rows * rows].reshape(rows, rows)
        cases = [("exp", lambda: iv.exp(a), lambda: np.exp(x)),
                 ("log", lambda: iv.log(ap_), lambda: np.log(xp)),
                 ("tanh", lambda: iv.tanh(a), lambda: np.tanh(x)),
                 ("sigmoid", lambda: iv.sigmoid(a), lambda: 1 / (1 + np.exp(-x))),
                 ("softplus", lambda: iv.softplus(a), lambda: np.logaddexp(0, x)),
                 ("add", lambda: iv.add(a, ap_), lambda: x + xp),
                 ("sub", lambda: iv.sub(a, ap_), lambda: x - xp),
                 ("mul", lambda: iv.mul(a, ap_), lambda: x * xp),
                 ("div", lambda: iv.div(a, ap_), lambda: x / xp),
                 ("sqrt", lambda: iv.sqrt(ap_), lambda: np.sqrt(xp)),
                 ("sum", lambda: iv.sum(a2, axis=1), lambda: x2.sum(axis=1))]
        for op, ours, peer in cases:
            (w_i, w_f), (t_i, t_f) = benchlib.interleaved([ours, peer], args.repeats, warm=True)
            ratio = t_i / t_f
            print(f"{name:<18} {op:<9} {t_i * 1e3:8.1f} ms  float64 {t_f * 1e3:7.2f} ms  "
                  f"ratio {ratio:6.1f} (wall {w_i / w_f:6.1f})  "
                  f"{'PASS' if ratio <= FLOOR else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
