"""Benchmark: the CPU cost of ``scalarlab --help``, ``--version`` and every command's
``--help``, as a ratio to ``python -c "import numpy"`` (the issue's yardstick: at most 2x).

Each command line runs in fresh interpreters (``python -m scalarlab.experiments ...``),
``--repeats`` times, interleaved with the numpy yardstick so that all see the same machine
load; the best CPU time (user + system of the child) of each is printed, with the ratio
and the heavy modules the process had imported when it exited.

Usage: python bench/cli_startup.py [--repeats K]
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys

HEAVY = ("numpy", "numba", "torch", "onnx", "pandas", "scalarlab.graph", "scalarlab.scalars")

# The child prints the heavy modules it holds at exit on fd 3 (stdout is the help text).
CHILD = r"""
import atexit, os, sys
def _report():
    heavy = %r
    held = sorted(h for h in heavy if h in sys.modules)
    os.write(int(os.environ["CLI_STARTUP_FD"]), (" ".join(held) or "-").encode())
atexit.register(_report)
sys.argv = ["scalarlab"] + sys.argv[1:]
from scalarlab.experiments.__main__ import main
sys.exit(main())
""" % (HEAVY,)


def cpu_of(argv) -> tuple[float, str]:
    """(CPU seconds, heavy modules held) of one fresh interpreter running ``argv``."""
    r, w = os.pipe()
    env = dict(os.environ, CLI_STARTUP_FD=str(w))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(argv, env=env, pass_fds=(w,), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    os.close(w)
    with os.fdopen(r) as f:
        held = f.read()
    proc.wait()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), held


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args(argv)
    from scalarlab.experiments.commands import COMMANDS
    lines = [["--help"], ["--version"]] + [[name, "--help"] for name in COMMANDS]
    numpy = [sys.executable, "-c", "import numpy"]
    best = {}
    held = {}
    base = float("inf")
    for _ in range(args.repeats):
        base = min(base, cpu_of(numpy)[0])
        for line in lines:
            t, h = cpu_of([sys.executable, "-c", CHILD, *line])
            key = " ".join(line)
            best[key] = min(best.get(key, float("inf")), t)
            held[key] = h
    print(f"CPU seconds, best of {args.repeats}; load {os.getloadavg()[0]:.2f}; "
          f"python -c 'import numpy': {base:.3f} s")
    print(f"{'scalarlab ...':<28} {'CPU s':>6} {'ratio':>6}  heavy modules at exit")
    worst = 0.0
    for key, t in best.items():
        worst = max(worst, t / base)
        print(f"{key:<28} {t:6.3f} {t / base:6.2f}  {held[key]}")
    print(f"worst ratio {worst:.2f} (issue 27: <= 2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
