"""The first-run notice: one line when compiling Numba kernels keeps a command waiting,
nothing when the kernels come from the on-disk cache."""
from __future__ import annotations

import threading
import time

import numba
import numpy as np
import pytest

from scalarlab.experiments import first_run


def _fresh_kernel():
    """A kernel no cache holds (a new closure constant each time): calling it compiles."""
    k = float(time.monotonic_ns() % 1000)

    @numba.njit(cache=False)
    def f(x):
        s = 0.0
        for i in range(x.size):
            s += np.tanh(x[i] * k) + np.sin(x[i]) * np.exp(-x[i])
        return s
    return f


def test_compiling_for_over_a_second_says_so_once():
    said = []
    w = first_run.Watcher(said.append, thread_id=threading.get_ident(), threshold=0.05,
                          period=0.01).start()
    try:
        deadline = time.monotonic() + 60
        while not w.shown and time.monotonic() < deadline:
            _fresh_kernel()(np.arange(3.0))        # each call compiles a new function
    finally:
        w.stop()
    assert said == [first_run.NOTICE] and w.compiled_s >= 0.05


def test_running_compiled_code_says_nothing():
    f = _fresh_kernel()
    x = np.arange(1e6)
    f(x)                                             # compiled before the watcher starts
    said = []
    w = first_run.Watcher(said.append, thread_id=threading.get_ident(), threshold=0.05,
                          period=0.01).start()
    try:
        t = time.monotonic()
        while time.monotonic() - t < 0.5:
            f(x)
            sum(range(10000))
    finally:
        w.stop()
    assert said == [] and w.compiled_s == 0.0


def test_no_watcher_without_a_terminal_or_with_quiet():
    assert first_run.watch(print, quiet=False) is None   # pytest's stderr is not a tty
    assert first_run.watch(print, quiet=True) is None


def _stderr_at_a_terminal(argv, env) -> str:
    """What ``scalarlab ARGV`` writes to stderr when stderr is a terminal (a pty)."""
    import os
    import pty
    import subprocess
    import sys
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "scalarlab.experiments", *argv],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=slave, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:                  # EIO: the child closed its end
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=600) == 0
    return b"".join(chunks).decode(errors="replace")


@pytest.mark.slow
def test_a_cold_compare_at_a_terminal_says_so_once_and_a_warm_one_not(tmp_path):
    """End to end: the first compare on an empty Numba cache (a fresh install) shows the
    notice once on stderr, the second (the kernels on disk) does not."""
    import os
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba-cache"))
    cold = _stderr_at_a_terminal(["compare"], env)
    assert cold.count(first_run.NOTICE) == 1, cold[-2000:]
    line = next(t for t in cold.replace("\r", "\n").splitlines() if first_run.NOTICE in t)
    assert line.strip() == f"scalarlab compare: {first_run.NOTICE}"
    warm = _stderr_at_a_terminal(["compare"], env)
    assert first_run.NOTICE not in warm, warm[-2000:]
