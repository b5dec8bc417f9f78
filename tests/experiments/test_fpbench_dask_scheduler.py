"""``fpbench --scheduler`` against a real ``dask scheduler`` and a two-thread ``dask worker``
started as subprocesses on localhost: the table equals the local run's, row for row."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scalarlab.experiments.cli import main

DATA = Path(__file__).resolve().parents[1] / "data" / "fpbench"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc, grace=2.0):
    """End a process this test started: SIGTERM, then SIGKILL."""
    for step in (proc.terminate, proc.kill):
        if proc.poll() is not None:
            return
        step()
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue


@pytest.mark.slow   # a scheduler and worker as subprocesses (7 s CPU); the sweep's twin stays
def test_fpbench_on_a_dask_scheduler_equals_the_local_run(tmp_path, capsys):
    dask = shutil.which("dask", path=os.path.dirname(sys.executable)) or shutil.which("dask")
    assert dask, "the dask command-line tool comes with dask[distributed] (test extra)"
    f = tmp_path / "b.fpcore"
    f.write_text((DATA / "hamming-ch3.fpcore").read_text()
                 + '\n(FPCore (x) :name "qlog" :pre (<= (fabs x) 1) '
                   '(/ (log (- 1 x)) (log (+ 1 x))))\n')
    port = _free_port()
    addr = f"tcp://127.0.0.1:{port}"
    logs = [open(tmp_path / f"{n}.log", "w") for n in ("scheduler", "worker")]
    procs = []
    try:
        procs.append(subprocess.Popen(
            [dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
            stdout=logs[0], stderr=subprocess.STDOUT, cwd=tmp_path))
        procs.append(subprocess.Popen(
            [dask, "worker", addr, "--nthreads", "2", "--no-nanny", "--no-dashboard",
             "--host", "127.0.0.1", "--memory-limit", "0"],
            stdout=logs[1], stderr=subprocess.STDOUT, cwd=tmp_path))
        from distributed import Client
        deadline = time.monotonic() + 120
        while True:
            try:
                with Client(addr, timeout="5s") as c:
                    c.wait_for_workers(1, timeout=60)
                break
            except OSError:
                if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                    raise
                time.sleep(0.5)
        args = ["fpbench", str(f), "--only", "3.4", "--samples", "24", "--seed", "5",
                "--contexts", "binary64,binary32", "--quiet", "--json"]
        assert main(args) == 0
        local = json.loads(capsys.readouterr().out)
        out = tmp_path / "d.csv"
        assert main([*args, "--scheduler", addr, "--out", str(out)]) == 0, \
            capsys.readouterr().err
        dist = json.loads(capsys.readouterr().out)
        assert dist["meta"]["execution"] == f"dask scheduler {addr}"
        assert local["meta"]["execution"] == "local"
        assert len(dist["rows"]) == len(local["rows"]) >= 8
        assert dist["rows"] == local["rows"]
        assert out.exists()
    finally:
        try:
            from distributed import Client
            with Client(addr, timeout="2s") as c:
                c.shutdown()
        except Exception:                                       # pragma: no cover
            pass
        for p in reversed(procs):
            _stop(p)
        for fh in logs:
            fh.close()


def test_fpbench_unreachable_scheduler_is_a_one_line_error(capsys):
    port = _free_port()                       # nothing listens there
    rc = main(["fpbench", str(DATA / "rump.fpcore"), "--quiet", "--samples", "4",
               "--scheduler", f"tcp://127.0.0.1:{port}", "--connect-timeout", "1"])
    err = capsys.readouterr().err
    assert rc == 1 and err.startswith("scalarlab fpbench: error: --scheduler")
    assert err.count("\n") == 1
