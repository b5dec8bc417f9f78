"""``scalarlab libm`` speed, side by side: inputs per second of the library call and of the
lab's check of it (correctly rounded reference + compiled compare + error estimates), their
ratio, and the time a 2^32 exhaustive binary32 run of each pair takes on one process,
projected from blocks of consecutive inputs at random places (CPU time of this process).

``--full`` runs the whole exhaustive numpy ``exp`` audit on ``--workers`` processes (wall
time; the issue asks <= 5 minutes on 2 processes).  ``--dask`` runs the same exhaustive
audit (default: ``exp`` of numpy over every binary32 input) as ``scalarlab libm`` commands
in fresh processes, alternately on ``--workers`` local processes and on a local Dask
cluster of as many workers, and prints the wall-time ratio with and without the cluster's
start (the issue asks <= 1.2).

    python bench/libm_exhaustive.py [--chunk-log2 20] [--chunks 16] [--full] [--dask]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
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


def _tree_cpu(root: int, seen: dict) -> None:
    """Record the CPU seconds so far of ``root`` and its descendants in ``seen`` (pid ->
    (depth below root, user + system)).  The workers are the forkserver's children and
    the forkserver is not waited for, so the command's own rusage misses them: /proc is
    read instead.  Depth 0 is the command (with a local Dask cluster: client, scheduler
    and nannies), 1 the forkserver and resource tracker, 2 the workers."""
    parent, cpu = {}, {}
    tick = os.sysconf("SC_CLK_TCK")
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(d)] = int(st[1])
        cpu[int(d)] = (int(st[11]) + int(st[12])) / tick
    for pid, c in cpu.items():
        p, depth = pid, 0
        while p and p != root:
            p, depth = parent.get(p, 0), depth + 1
        if p == root:
            seen[pid] = (depth, max(seen.get(pid, (0, 0.0))[1], c))


def _cli_run(argv):
    """One ``scalarlab libm`` command in a fresh interpreter, as a user runs it: wall time
    (imports, worker or cluster start and close included), the CPU seconds of its process
    tree (sampled each second, so a process's last second can be missing) and its meta."""
    import threading
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "scalarlab.experiments", "libm", *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: dict = {}
    stop = threading.Event()

    def sample():
        while not stop.wait(1.0):
            _tree_cpu(proc.pid, seen)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - t
    stop.set()
    th.join()
    if proc.returncode:
        raise SystemExit(f"libm {' '.join(argv)}: exit {proc.returncode}: "
                         f"{err.strip().splitlines()[-1:]}")
    by_depth = [sum(c for d, c in seen.values() if d == k) for k in range(3)]
    return wall, sum(c for _, c in seen.values()), by_depth, json.loads(out)["meta"]


def dask_vs_processes(a):
    argv = [a.dask_func, "--lib", a.dask_libs, "--format", "binary32", "--exhaustive",
            "--workers", str(a.workers), "--quiet", "--json"]
    if a.dask_range:
        argv += ["--range", a.dask_range]
    runs = {"processes": [], "dask": []}
    # alternated: the shared machine's load moves between runs
    for _ in range(a.dask_rounds):
        for how in ("processes", "dask"):
            load = os.getloadavg()[0]
            wall, cpu, depth, meta = _cli_run(argv + (["--dask"] if how == "dask" else []))
            start = meta.get("cluster_start_s", 0.0)
            chunks = meta.get("chunks_cpu_s", [0.0, 0.0])
            runs[how].append(dict(wall=wall, cpu=cpu, seconds=meta["seconds"], start=start,
                                  close=meta.get("cluster_close_s", 0.0), load=load,
                                  chunks=sum(chunks)))
            print(f"  {how:9s} wall {wall:6.1f} s, CPU {cpu:6.1f} s (command "
                  f"{depth[0]:.1f}, forkserver {depth[1]:.1f}, workers {depth[2]:.1f}; the "
                  f"chunks in their threads {chunks[0]:.1f} user + {chunks[1]:.1f} system), "
                  f"audit {meta['seconds']:6.1f} s"
                  + (f" (cluster start {start:.1f} s, close {meta['cluster_close_s']:.2f} s)"
                     if how == "dask" else "") + f", load average {load:.1f} at its start, "
                  f"{os.getloadavg()[0]:.1f} at its end", flush=True)
    p, d = (min(runs[k], key=lambda r: r["wall"]) for k in ("processes", "dask"))
    print(f"{a.dask_func} of {a.dask_libs}, exhaustive binary32"
          + (f" over [{a.dask_range}]" if a.dask_range else "")
          + f", {a.workers} workers, best of {a.dask_rounds} each (fresh commands): "
          f"processes {p['wall']:.1f} s, Dask {d['wall']:.1f} s, ratio "
          f"{d['wall'] / p['wall']:.2f} with the cluster's start; without it "
          f"(Dask's audit time less its cluster start, against the processes' audit time, "
          f"which includes their pool start) {d['seconds'] - d['start']:.1f} s vs "
          f"{p['seconds']:.1f} s, ratio {(d['seconds'] - d['start']) / p['seconds']:.2f}; "
          f"CPU of the process trees {d['cpu']:.1f} s vs {p['cpu']:.1f} s, ratio "
          f"{d['cpu'] / p['cpu']:.2f}; CPU of the chunks alone {d['chunks']:.1f} s vs "
          f"{p['chunks']:.1f} s, ratio {d['chunks'] / max(p['chunks'], 1e-9):.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunk-log2", type=int, default=20)
    ap.add_argument("--chunks", type=int, default=16)
    ap.add_argument("--funcs", default="exp,log,sin,cos,tanh")
    ap.add_argument("--libs", default="numpy,libm,torch")
    ap.add_argument("--full", action="store_true", help="exhaustive numpy exp, --workers")
    ap.add_argument("--dask", action="store_true",
                    help="--workers processes vs a local Dask cluster of --workers")
    ap.add_argument("--dask-range", default=None,
                    help="inputs of the Dask comparison, LO:HI (default: all binary32)")
    ap.add_argument("--dask-func", default="exp", help="function of the Dask comparison")
    ap.add_argument("--dask-libs", default="numpy", help="libraries of the Dask comparison")
    ap.add_argument("--dask-rounds", type=int, default=2,
                    help="alternated pairs of runs (processes, Dask) (default 2)")
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    print(f"{L.glibc_version()}; numpy {np.__version__} ({L.numpy_simd()}); "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if a.chunks:
        rates(a.funcs.split(","), a.libs.split(","), 1 << a.chunk_log2, a.chunks)
    if a.dask:
        dask_vs_processes(a)
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
