"""Benchmark: what a command's first run compiles, and what it costs.

Runs ``scalarlab ARGS`` twice in fresh interpreters sharing one new, empty Numba cache
directory (``NUMBA_CACHE_DIR``): the first run compiles every kernel it uses (a fresh
install), the second loads them from the cache (every later run).  For each it prints the
process CPU seconds (user + system, children included) and, for the cold run, the CPU
seconds Numba spent compiling each kernel: ``self`` excludes the compiles of the kernels it
calls (which are listed on their own rows), ``total`` includes them.

Usage: python bench/first_run.py [--keep DIR] [-- compare --quiet]
(the default command is ``compare --quiet``)
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile

# The child: run the command with a listener on Numba's compile events, then write the
# per-kernel CPU seconds as JSON on the pipe FIRST_RUN_FD (stdout and stderr belong to the command).
CHILD = r"""
import json, os, sys, time
sys.argv = ["scalarlab"] + json.loads(os.environ["FIRST_RUN_ARGV"])
try:
    import numba.core.event as ev
except ImportError:
    ev = None
rows, stack = {}, []
if ev is not None:
    class Timer(ev.Listener):
        def on_start(self, event):
            stack.append([time.process_time(), 0.0])
        def on_end(self, event):
            t0, inner = stack.pop()
            spent = time.process_time() - t0
            if stack:
                stack[-1][1] += spent
            d = event.data["dispatcher"]
            name = getattr(d, "py_func", d).__module__ + "." + getattr(
                getattr(d, "py_func", d), "__qualname__", str(d))
            sig = ",".join(str(a) for a in event.data["args"])
            r = rows.setdefault(name, {"self": 0.0, "total": 0.0, "sigs": []})
            r["self"] += spent - inner
            r["total"] += spent
            r["sigs"].append(sig)
    ev.register("numba:compile", Timer())
from scalarlab.experiments.cli import main
try:
    rc = main(sys.argv[1:])
except SystemExit as e:
    rc = e.code
with os.fdopen(int(os.environ["FIRST_RUN_FD"]), "w") as f:
    json.dump({"rc": rc, "rows": rows}, f)
"""


def run_once(argv, cache_dir):
    """``(cpu_s, maxrss_kB, {kernel: row})`` of one fresh interpreter running ``argv``."""
    r, w = os.pipe()
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir, FIRST_RUN_ARGV=json.dumps(argv),
               FIRST_RUN_FD=str(w))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen([sys.executable, "-c", CHILD], env=env, pass_fds=(w,),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    os.close(w)
    with os.fdopen(r) as f:
        data = f.read()
    err = proc.stderr.read().decode()
    proc.wait()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if not data:
        sys.exit(f"first_run: the command failed: {err.strip()[-400:]}")
    doc = json.loads(data)
    return cpu, after.ru_maxrss, doc["rows"], doc["rc"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--keep", help="use (and keep) this cache directory instead of a new one")
    p.add_argument("command", nargs="*", default=["compare", "--quiet"])
    args = p.parse_args(argv)
    cmd = args.command or ["compare", "--quiet"]
    with tempfile.TemporaryDirectory(prefix="scalarlab-numba-") as tmp:
        cache = args.keep or tmp
        cold, rss, rows, rc = run_once(cmd, cache)
        warm, rss_w, rows_w, rc_w = run_once(cmd, cache)
    print(f"scalarlab {' '.join(cmd)}  (load {os.getloadavg()[0]:.2f}, exit {rc}/{rc_w})")
    print(f"cold: {cold:6.2f} s CPU  max RSS {rss / 1024:.0f} MB")
    print(f"warm: {warm:6.2f} s CPU  ({len(rows_w)} kernels compiled on the warm run)")
    total_self = sum(r["self"] for r in rows.values())
    print(f"compiling on the cold run: {total_self:.2f} s CPU in {len(rows)} kernels")
    print(f"{'self s':>7} {'total s':>7}  kernel [signatures]")
    for name, r in sorted(rows.items(), key=lambda kv: -kv[1]["self"]):
        sigs = "; ".join(sorted(set(r["sigs"])))
        if len(sigs) > 70:
            sigs = sigs[:67] + "..."
        print(f"{r['self']:7.2f} {r['total']:7.2f}  {name.replace('scalarlab.', '')}"
              f" [{sigs}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
