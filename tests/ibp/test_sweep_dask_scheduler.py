"""``sweep --scheduler`` against a real ``dask scheduler`` and a ``dask worker --nthreads 4``
started as subprocesses on localhost: the worker's registry is cold and four threads make
their first context lookups at once (the failure mode of a registry that published its
tables before they were filled); the table must equal the serial one."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

from scalarlab.experiments.cli import main


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc, grace=2.0):
    """Stop a process we started: it was asked to shut down; SIGTERM, then SIGKILL."""
    for signal_it in (lambda: None, proc.terminate, proc.kill):
        if proc.poll() is not None:
            return
        signal_it()
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture
def dask_cluster(tmp_path):
    """``(address, worker log path)`` of a scheduler + one 4-thread worker; torn down after."""
    dask = shutil.which("dask", path=os.path.dirname(sys.executable)) or shutil.which("dask")
    assert dask, "the dask command-line tool comes with dask[distributed] (test extra)"
    port = _free_port()
    addr = f"tcp://127.0.0.1:{port}"
    env = dict(os.environ)
    logs = {n: open(tmp_path / f"{n}.log", "w") for n in ("scheduler", "worker")}
    procs = []
    try:
        procs.append(subprocess.Popen(
            [dask, "scheduler", "--host", "127.0.0.1", "--port", str(port),
             "--no-dashboard"], stdout=logs["scheduler"], stderr=subprocess.STDOUT, env=env,
            cwd=tmp_path))
        procs.append(subprocess.Popen(
            [dask, "worker", addr, "--nthreads", "4", "--no-nanny", "--no-dashboard",
             "--host", "127.0.0.1", "--memory-limit", "0"],
            stdout=logs["worker"], stderr=subprocess.STDOUT, env=env, cwd=tmp_path))
        from distributed import Client
        deadline = time.monotonic() + 120
        while True:
            try:
                with Client(addr, timeout="5s") as c:
                    c.wait_for_workers(1, timeout=60)
                    assert list(c.nthreads().values()) == [4]
                break
            except OSError:
                if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                    raise
                time.sleep(0.5)
        yield addr, tmp_path / "worker.log"
    finally:
        try:                               # ask the scheduler to close itself and the worker
            from distributed import Client
            with Client(addr, timeout="2s") as c:
                c.shutdown()
        except Exception:                                       # pragma: no cover
            pass
        for p in reversed(procs):
            _stop(p)
        for fh in logs.values():
            fh.close()


def test_sweep_on_external_scheduler_with_a_four_thread_worker_equals_serial(dask_cluster,
                                                                             capsys):
    addr, worker_log = dask_cluster
    args = ["sweep", "six-node", "--radii", "0.05,0.5", "--samples", "100",
            "--contexts", "binary32,bfloat16,binary16", "--shard-size", "25", "--seed", "4", "--quiet", "--json"]
    assert main(args) == 0
    serial = json.loads(capsys.readouterr().out)
    assert main([*args, "--scheduler", addr]) == 0, capsys.readouterr().err
    dist = json.loads(capsys.readouterr().out)
    assert dist["meta"]["execution"] == f"dask scheduler {addr}"
    assert dist["rows"] == serial["rows"]
    assert len(dist["rows"]) == 6 and all(r["violations"] == 0 for r in dist["rows"])
    assert all(r["vertices"] == 16 and r["samples"] == 100 for r in dist["rows"])
    log = worker_log.read_text()
    assert "unknown context" not in log and "ContextError" not in log
