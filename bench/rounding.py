"""Benchmark: round 10^7 float64 values onto bfloat16 / binary16 / e4m3 (nearest-even).

Side by side in one process, single-threaded: scalars.formats.round_to_format (Numba,
parallel=False) against numpy's float16 cast, ml_dtypes casts and pychop; then elementwise
binary32 addition (float64 add + one rounding) against numpy float32 add.  Prints a table
with throughput, speed ratios (ours / theirs) and how many of the N results differ from
ours.  Not a test: run ``python bench/rounding.py [N]``.

Notes on the competitors:
* every competitor is timed as a float64 -> format -> float64 round trip, which is what
  round_to_format returns;
* ml_dtypes converts float64 -> bfloat16 / float8 through float32, i.e. it rounds twice;
  the "differ" column counts the values where that double rounding changes the result;
* pychop is run with ``chunk_size`` larger than the array, so it is plain vectorised NumPy
  (its default 800-element Dask chunking is much slower and multi-threaded); pychop's
  (4, 3) format is an IEEE-style E4M3 with infinities (max 240), not OCP E4M3FN, so its
  e4m3 "differ" count measures a different format, not an error.
"""
from __future__ import annotations

import os

for _var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from scalars import formats as F  # noqa: E402

REPEATS = 5


def best_time(fn, repeats: int = REPEATS):
    """(best wall time over ``repeats`` runs, result of the last run)."""
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def n_differ(a, b) -> int:
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    return int(np.count_nonzero(~same))


def competitors(x: np.ndarray):
    """{format name: [(label, callable returning float64 values)]}."""
    comp = {"bfloat16": [], "binary16": [("numpy float16 cast",
                                          lambda: x.astype(np.float16).astype(np.float64))],
            "e4m3": []}
    try:
        import ml_dtypes
        comp["bfloat16"].append(("ml_dtypes bfloat16 cast",
                                 lambda: x.astype(ml_dtypes.bfloat16).astype(np.float64)))
        comp["binary16"].append(("ml_dtypes float16 cast (numpy's half)",
                                 lambda: x.astype(ml_dtypes.finfo(np.float16).dtype)
                                 .astype(np.float64)))
        comp["e4m3"].append(("ml_dtypes float8_e4m3fn cast",
                             lambda: x.astype(ml_dtypes.float8_e4m3fn).astype(np.float64)))
    except ImportError:
        print("ml_dtypes not installed (pip install ml_dtypes): skipped")
    try:
        os.environ["chop_backend"] = "numpy"
        import pychop
        for name, (e, m) in (("bfloat16", (8, 7)), ("binary16", (5, 10)), ("e4m3", (4, 3))):
            ch = pychop.Chop(exp_bits=e, sig_bits=m, rmode=1, chunk_size=x.size + 1)
            comp[name].append((f"pychop Chop({e},{m}) numpy", lambda ch=ch: ch(x)))
    except ImportError:
        print("pychop not installed (pip install pychop): skipped")
    return comp


def main(argv) -> int:
    n = int(float(argv[1])) if len(argv) > 1 else 10_000_000
    rng = np.random.default_rng(2024)
    # Magnitudes from 1e-3 to 1e3 times a normal sample: normal range of all three
    # formats, plus e4m3 underflow and overflow.
    x = rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3, n)
    fmts = {"bfloat16": F.bfloat16, "binary16": F.binary16, "e4m3": F.e4m3}
    rows = []
    floors = []
    comp = competitors(x)
    for name, fmt in fmts.items():
        F.round_to_format(x[:1000], fmt)  # compile / load the Numba cache
        t_ours, ours = best_time(lambda: F.round_to_format(x, fmt))
        rows.append((f"round to {name}", "scalars.formats (numba, 1 thread)", t_ours, 1.0, 0))
        for label, fn in comp[name]:
            reps = 1 if label.startswith("pychop") else REPEATS
            t, theirs = best_time(fn, reps)
            rows.append((f"round to {name}", label, t, t / t_ours, n_differ(theirs, ours)))
            if label.startswith("pychop"):
                floors.append((f"{name}: >= 10x pychop", t / t_ours >= 10, f"{t / t_ours:.1f}x"))
        if name in ("bfloat16", "binary16"):
            mps = n / t_ours / 1e6
            floors.append((f"{name}: >= 150 M values/s", mps >= 150, f"{mps:.0f} M/s"))

    # Elementwise binary32 add: exact float64 sum then one rounding (2p+2 <= 53, so the
    # float64 sum followed by rounding equals the correctly rounded float32 sum).
    a32 = (rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3, n)).astype(np.float32)
    b32 = (rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3, n)).astype(np.float32)
    a, b = a32.astype(np.float64), b32.astype(np.float64)
    t_ours, ours = best_time(lambda: F.round_to_format(a + b, F.binary32))
    rows.append(("binary32 add", "round_to_format(a + b) (float64 in/out)", t_ours, 1.0, 0))
    t_np, s32 = best_time(lambda: a32 + b32)
    rows.append(("binary32 add", "numpy float32 a + b (float32 in/out)", t_np, t_np / t_ours,
                 n_differ(s32.astype(np.float64), ours)))

    print(f"\nN = {n:,} float64 values, single thread, best of {REPEATS} "
          f"(pychop: 1 run); ratio = their time / our time (> 1: we are faster)\n")
    head = f"{'task':<18} {'implementation':<42} {'time s':>8} {'M val/s':>9} " \
           f"{'ratio':>8} {'differ':>10}"
    print(head)
    print("-" * len(head))
    for task, label, t, ratio, diff in rows:
        print(f"{task:<18} {label:<42} {t:8.4f} {n / t / 1e6:9.1f} {ratio:8.2f} {diff:10,}")
    print("\nfloors:")
    for what, ok, val in floors:
        print(f"  {'PASS' if ok else 'FAIL'}  {what}: {val}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
