"""``scalarlab libm`` speed, side by side: inputs per second of the library call and of the
lab's check of it (correctly rounded reference + compiled compare + error estimates), their
ratio, and the time a 2^32 exhaustive binary32 run of each pair takes on one process,
projected from blocks of consecutive inputs at random places (CPU time of this process).

``--full`` runs the whole exhaustive numpy ``exp`` audit on ``--workers`` processes (wall
time; the issue asks <= 5 minutes on 2 processes).  ``--dask`` compares the same slice of
chunks on ``--workers`` local processes and on a local Dask cluster of as many workers
(wall time ratio; the issue asks <= 1.2).

    python bench/libm_exhaustive.py [--chunk-log2 20] [--chunks 16] [--full] [--dask]
"""
from __future__ import annotations

import argparse
import os
import time

import benchlib  # noqa: F401  (one thread per library; before numpy)
import numpy as np

from scalarlab.experiments import libm_audit as L


def rates(funcs, libs, n, chunks, seed=0):
    lo, hi = L.ordinal_range("binary32")
    starts = np.random.default_rng(seed).integers(lo, hi - n, size=chunks)
    print(f"{chunks} blocks of 2^{int(np.log2(n))} consecutive binary32 inputs at random places; "
          "CPU time of one process")
    print(f"{'function':8s} {'library':7s} {'call/s':>10s} {'check/s':>10s} {'check/call':>10s}"
          f" {'2^32, 1 proc':>13s}")
    for func in funcs:
        L.reference(func, "binary32", L.ordinal_span("binary32", 0, 100), 0)   # tails, jit
        xs = [L.ordinal_span("binary32", int(s), int(s) + n) for s in starts]
        t = time.process_time()
        refs = [L.reference(func, "binary32", x, int(s)) for x, s in zip(xs, starts)]
        t_ref = time.process_time() - t
        for lib in libs:
            call = L.library_function(lib, func, "binary32")
            if call is None:
                continue
            L.check_block(lib, func, "binary32", xs[0][:64], refs[0][:64])   # compile, warm
            t_call = t_chk = 0.0
            for x, r, s in zip(xs, refs, starts):
                t = time.process_time()
                with np.errstate(all="ignore"):
                    call(x)
                t_call += time.process_time() - t
                t = time.process_time()
                L.check_block(lib, func, "binary32", x, r, first=int(s), span=(lo, hi))
                t_chk += time.process_time() - t
            # check_block calls the library once more: the check alone is the rest, plus
            # the reference (computed once per function, charged to each library here)
            check = t_chk - t_call + t_ref
            total = chunks * n
            print(f"{func:8s} {lib:7s} {total / t_call:10.3g} {total / check:10.3g} "
                  f"{t_call and check / t_call:10.1f} {2 ** 32 / total * (t_chk + t_ref):11.0f} s",
                  flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunk-log2", type=int, default=20)
    ap.add_argument("--chunks", type=int, default=16)
    ap.add_argument("--funcs", default="exp,log,sin,cos,tanh")
    ap.add_argument("--libs", default="numpy,libm,torch")
    ap.add_argument("--full", action="store_true", help="exhaustive numpy exp, --workers")
    ap.add_argument("--dask", action="store_true",
                    help="--workers processes vs a local Dask cluster of --workers")
    ap.add_argument("--dask-range", default="1e-6:1e6",
                    help="inputs of the Dask comparison (default 1e-6:1e6, 2^28.3 inputs)")
    ap.add_argument("--dask-func", default="log", help="function of the Dask comparison")
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    print(f"{L.glibc_version()}; numpy {np.__version__} ({L.numpy_simd()}); "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if a.chunks:
        rates(a.funcs.split(","), a.libs.split(","), 1 << a.chunk_log2, a.chunks)
    if a.dask:
        lo, hi = (float(v) for v in a.dask_range.split(":"))
        walls = {}
        # alternated, best of two each: the shared machine's load moves between runs
        for how in ("processes", "dask", "processes", "dask"):
            t = time.perf_counter()
            L.libm_audit([a.dask_func], ["numpy", "libm"], "binary32", exhaustive=True,
                         range=(lo, hi), workers=a.workers, dask=how == "dask", quiet=True)
            walls.setdefault(how, []).append(time.perf_counter() - t)
        proc = min(walls["processes"])
        print(f"{a.dask_func}, numpy+libm, [{lo:g}, {hi:g}], chunks of 2^22: "
              f"{a.workers} processes {proc:.1f} s, local Dask {a.workers} workers "
              f"{min(walls['dask']):.1f} s (best of 2 each, cluster start included): ratio "
              f"{min(walls['dask']) / proc:.2f}; all runs {walls}; load average "
              f"{os.getloadavg()[0]:.1f}")
    if a.full:
        t, c = time.perf_counter(), os.times()
        df = L.libm_audit(["exp"], ["numpy"], "binary32", exhaustive=True,
                          workers=a.workers, quiet=False)
        c2 = os.times()
        print(df.drop(columns=["format", "bound"]).to_string())
        print(f"exhaustive binary32 exp, numpy, {a.workers} processes: "
              f"{time.perf_counter() - t:.0f} s wall, "
              f"{c2.children_user + c2.children_system - c.children_user - c.children_system:.0f}"
              f" s CPU in the workers; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
