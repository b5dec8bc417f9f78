"""Benchmark: round 10^7 float64 values onto bfloat16 / binary16 / e4m3 (nearest-even).

Side by side in one process, single-threaded, interleaved (best of 5):
scalars.formats.round_to_format (Numba, parallel=False) against numpy's float16 cast,
ml_dtypes casts, a plain copy and pychop; the optional multithreaded path
(``parallel=True``) on its own row; then elementwise binary32 addition (float64 add + one
rounding) against numpy float32 add.  Floors of issue 16 (bfloat16, binary16; normal and
wide inputs): >= 1.2x the fastest peer cast and >= 0.6 of a plain copy's speed, judged on
CPU time (the machine is shared).  Prints a table
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

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
# Numba keeps its default thread count: only the parallel=True row uses threads.

import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from scalarlab.scalars import formats as F  # noqa: E402

REPEATS = 5


def best_time(fn, repeats: int = REPEATS):
    """((best wall time, best process CPU time) over ``repeats`` runs, last result).

    CPU time is reported beside wall time because a shared machine inflates wall time;
    every contender here is single-threaded, so on an idle machine the two agree.
    """
    best, best_cpu, out = float("inf"), float("inf"), None
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return (best, best_cpu), out


def interleaved(fns, repeats: int = REPEATS):
    """Best (wall, CPU) times of several functions called in turn, so that load changes on
    a shared machine hit all of them alike; and their last results."""
    best = [(float("inf"), float("inf"))] * len(fns)
    outs = [None] * len(fns)
    for _ in range(repeats):
        for k, f in enumerate(fns):
            c0, t0 = time.process_time(), time.perf_counter()
            outs[k] = f()
            w, c = time.perf_counter() - t0, time.process_time() - c0
            best[k] = (min(best[k][0], w), min(best[k][1], c))
    return best, outs


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
    samples = {
        # Typical activations: all in the normal range of bfloat16 and binary16.
        "normal": rng.standard_normal(n),
        # Magnitudes 1e-3..1e3 times a normal sample: reaches binary16's subnormals and
        # e4m3's underflow and overflow, so the special-value pass is exercised.
        "wide": rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3, n),
    }
    fmts = {"bfloat16": F.bfloat16, "binary16": F.binary16, "e4m3": F.e4m3}
    rows = []
    floors = []
    for dist, x in samples.items():
        comp = competitors(x)
        for name, fmt in fmts.items():
            F.round_to_format(x[:1000], fmt)  # compile / load the Numba cache
            F.round_to_format(x[:300_000], fmt, parallel=True)
            task = f"{name} ({dist})"
            fast = [(label, fn) for label, fn in comp[name] if not label.startswith("pychop")]
            # ours, every cast peer and a plain copy, interleaved, best of REPEATS each
            fns = [lambda: F.round_to_format(x, fmt), *[fn for _, fn in fast],
                   lambda: x.copy()]
            times, outs = interleaved(fns)
            t_ours, ours = times[0], outs[0]
            rows.append((task, "scalars.formats (numba, 1 thread)", t_ours, 0))
            for (label, _), t, theirs in zip(fast, times[1:-1], outs[1:-1]):
                rows.append((task, label, t, n_differ(theirs, ours), t_ours))
            rows.append((task, "plain copy x.copy() (no rounding)", times[-1], 0, t_ours))
            for label, fn in comp[name]:
                if label.startswith("pychop"):
                    t, theirs = best_time(fn, 1)
                    rows.append((task, label, t, n_differ(theirs, ours), t_ours))
                    ratio = t[1] / t_ours[1]
                    floors.append((f"{task}: >= 10x pychop (CPU time)", ratio >= 10,
                                   f"{ratio:.1f}x"))
            if name in ("bfloat16", "binary16") and fast:
                # issue 16: >= 1.2x the fastest peer cast, >= 0.6 of a plain copy
                best_peer = min(t[1] for t in times[1:-1])
                r_peer = best_peer / t_ours[1]
                r_copy = times[-1][1] / t_ours[1]
                floors.append((f"{task}: >= 1.2x fastest peer cast (CPU time)",
                               r_peer >= 1.2, f"{r_peer:.2f}x"))
                floors.append((f"{task}: >= 0.6 of a plain copy's speed (CPU time)",
                               r_copy >= 0.6, f"{r_copy:.2f}"))
            if name in ("bfloat16", "binary16"):
                tp, _ = best_time(lambda: F.round_to_format(x, fmt, parallel=True))
                rows.append((task, "scalars.formats parallel=True (threads)", tp, 0, t_ours))

    # Elementwise binary32 add: exact float64 sum then one rounding (2p+2 <= 53, so the
    # float64 sum followed by rounding equals the correctly rounded float32 sum).
    a32 = (rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3, n)).astype(np.float32)
    b32 = (rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3, n)).astype(np.float32)
    a, b = a32.astype(np.float64), b32.astype(np.float64)
    t_ours, ours = best_time(lambda: F.round_to_format(a + b, F.binary32))
    rows.append(("binary32 add", "round_to_format(a + b) (float64 in/out)", t_ours, 0))
    t_np, s32 = best_time(lambda: a32 + b32)
    rows.append(("binary32 add", "numpy float32 a + b (float32 in/out)", t_np,
                 n_differ(s32.astype(np.float64), ours), t_ours))

    print(f"\nN = {n:,} float64 values, single thread, best of {REPEATS} (pychop: 1 run).\n"
          f"ratio = their time / our time (> 1: we are faster), wall and CPU; differ = "
          f"results that differ from ours\n")
    head = (f"{'task':<20} {'implementation':<40} {'wall s':>7} {'M/s':>7} {'CPU s':>7} "
            f"{'M/s':>7} {'ratio':>7} {'rCPU':>7} {'differ':>9}")
    print(head)
    print("-" * len(head))
    last = None
    for task, label, t, diff, *ref in rows:
        if last is not None and task != last:
            print()
        last = task
        r = (t[0] / ref[0][0], t[1] / ref[0][1]) if ref else (1.0, 1.0)
        print(f"{task:<20} {label:<40} {t[0]:7.4f} {n / t[0] / 1e6:7.1f} {t[1]:7.4f} "
              f"{n / t[1] / 1e6:7.1f} {r[0]:7.2f} {r[1]:7.2f} {diff:9,}")
    print("\nfloors:")
    for what, ok, val in floors:
        print(f"  {'PASS' if ok else 'FAIL'}  {what}: {val}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
