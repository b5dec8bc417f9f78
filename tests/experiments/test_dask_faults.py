"""Dask faults end cleanly: fake servers at ``--scheduler`` fail within
``--connect-timeout`` with one line; a killed worker, a killed scheduler and a worker
stopped by SIGTERM during a sweep end in one line and exit 1, or the run completes with
the serial table (Dask's retries); bad addresses are refused while parsing."""
from __future__ import annotations

import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from scalarlab.experiments.cli import main

FPCORE = ('(FPCore (x) :name "p" :pre (<= 1 x 2) (- (sqrt (+ x 1)) (sqrt x)))\n')


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _one_line(err: str, cmd: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"scalarlab {cmd}: error: "), err
    return lines[0]


def _fpbench(tmp_path, addr, capsys, timeout="2"):
    f = tmp_path / "p.fpcore"
    f.write_text(FPCORE)
    rc = main(["fpbench", str(f), "--samples", "4", "--quiet", "--scheduler", addr,
               "--connect-timeout", timeout])
    out, err = capsys.readouterr()
    return rc, out, err


# ------------------------------------------------------------------ fake servers
class _Server:
    """A localhost TCP server run by a thread: ``silent`` accepts and says nothing,
    ``garbage`` sends bytes that are not Dask's, ``close`` hangs up at once."""

    def __init__(self, kind: str):
        self.kind = kind
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.conns = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            if self.kind == "garbage":
                conn.sendall(b"SSH-2.0-OpenSSH_9.6 garbage that is no Dask frame\r\n")
            elif self.kind == "close":
                conn.close()

    def close(self):
        self.sock.close()
        for c in self.conns:
            c.close()


@pytest.mark.parametrize("kind,text", [
    ("silent", "no Dask handshake within 2 s"),
    ("garbage", "not a Dask scheduler (its first bytes b'SSH-2.0-' are not a Dask "
                "handshake)"),
    ("close", "closed the connection before a Dask handshake")])
def test_non_dask_servers_fail_within_the_connect_timeout(tmp_path, capsys, kind, text):
    server = _Server(kind)
    try:
        rc, out, err = _fpbench(tmp_path, f"tcp://127.0.0.1:{server.port}", capsys)
    finally:
        server.close()
    assert rc == 1 and out == ""
    assert text in _one_line(err, "fpbench")


def test_http_server_at_scheduler_fails_within_the_connect_timeout(tmp_path, capsys):
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                            http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        addr = f"tcp://127.0.0.1:{httpd.server_address[1]}"
        rc, out, err = _fpbench(tmp_path, addr, capsys)
        assert rc == 1 and "no Dask handshake within 2 s" in _one_line(err, "fpbench")
        # the same check guards sweep
        rc = main(["sweep", "--scheduler", addr, "--connect-timeout", "1", "--samples", "5",
                   "--radii", "0.1", "--contexts", "float64", "--quiet"])
        line = _one_line(capsys.readouterr().err, "sweep")
        assert rc == 1 and f"--scheduler {addr}: no Dask handshake within 1 s" in line
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_schemes_without_a_reachable_scheduler_are_one_line(tmp_path, capsys, monkeypatch):
    for var in [v for v in os.environ if v.startswith("DASK_DISTRIBUTED__COMM__TLS")]:
        monkeypatch.delenv(var)
    port = _free_port()
    for addr, text in [
            (f"tls://127.0.0.1:{port}", "tls:// needs Dask's TLS settings"),
            ("inproc://127.0.0.1/1/1", "an inproc:// scheduler lives inside one Python "
                                       "process"),
            (f"ucx://127.0.0.1:{port}", "ucx:// is not available here"),
            (f"tcp://127.0.0.1:{port}", "Dask cluster not reachable")]:
        rc, out, err = _fpbench(tmp_path, addr, capsys)
        assert rc == 1 and text in _one_line(err, "fpbench"), addr


@pytest.mark.parametrize("addr,text", [
    ("tcp://127.0.0.1:99999", "port '99999' is not a port number (1..65535)"),
    ("tcp://127.0.0.1:0", "port '0' is not a port number"),
    ("http://127.0.0.1:80", "scheme 'http' is not one of tcp, tls, inproc, ucx"),
    ("tcp://bad host:80", "'bad host' is not a host name"),
    ("tcp://300.1.1.1:80", "'300.1.1.1' is not an IPv4 address"),
    ("tcp://[::g]:80", "'[::g]' is not a bracketed IPv6 address"),
    ("127.0.0.1", "is not a Dask scheduler address (tcp://HOST:PORT)")])
def test_addresses_are_checked_while_parsing(addr, text, capsys):
    for cmd in ("fpbench", "sweep"):
        with pytest.raises(SystemExit) as info:
            main([cmd, "--scheduler", addr])
        assert info.value.code == 2
        assert text in _one_line(capsys.readouterr().err, cmd)


# ------------------------------------------------------------- a real cluster
def _dask_tool() -> str:
    dask = shutil.which("dask", path=os.path.dirname(sys.executable)) or shutil.which("dask")
    assert dask, "the dask command-line tool comes with dask[distributed] (test extra)"
    return dask


class _Cluster:
    """``dask scheduler`` and ``dask worker`` subprocesses on localhost."""

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.port = _free_port()
        self.addr = f"tcp://127.0.0.1:{self.port}"
        self.procs = {}
        self.logs = []
        self._start("scheduler", ["scheduler", "--host", "127.0.0.1", "--port",
                                  str(self.port), "--no-dashboard"])

    def _start(self, name, args):
        log = open(self.tmp / f"{name}.log", "w")
        self.logs.append(log)
        self.procs[name] = subprocess.Popen([_dask_tool(), *args], stdout=log,
                                            stderr=subprocess.STDOUT, cwd=self.tmp)
        return self.procs[name]

    def worker(self, name):
        return self._start(name, ["worker", self.addr, "--nthreads", "1", "--no-nanny",
                                  "--no-dashboard", "--host", "127.0.0.1",
                                  "--memory-limit", "0"])

    def client(self):
        from distributed import Client
        deadline = time.monotonic() + 120
        while True:
            try:
                return Client(self.addr, timeout="5s")
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)

    def close(self):
        for p in reversed(list(self.procs.values())):
            for step in (p.terminate, p.kill):
                if p.poll() is not None:
                    break
                step()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    continue
        for fh in self.logs:
            fh.close()


SWEEP = ["sweep", "six-node", "--samples", "30000", "--shard-size", "500", "--radii",
         "0.05", "--contexts", "float64", "--seed", "3", "--json", "--quiet"]


def _cli(args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "scalarlab.experiments", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _when_running(client, cli, done_at_least=2):
    """Wait until the CLI's shards are being computed (some finished, more pending)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert cli.poll() is None, cli.communicate()
        n = client.run_on_scheduler(
            lambda dask_scheduler: sum(ts.state == "memory" and str(ts.key).startswith(
                "_run_shard") for ts in dask_scheduler.tasks.values()))
        if n >= done_at_least:
            return
        time.sleep(0.05)
    raise AssertionError("the sweep never started on the cluster")


def _serial_rows(capsys):
    assert main(SWEEP) == 0
    return json.loads(capsys.readouterr().out)["rows"]


# each case starts a scheduler, workers and the CLI (10-30 s, 8 s CPU): under -m slow (the
# default selection's real cluster is tests/ibp/test_sweep_dask_scheduler.py; the faults
# before a cluster answers stay default above)
@pytest.mark.slow
@pytest.mark.parametrize("fault", ["kill-only-worker", "kill-scheduler"])
def test_losing_the_only_worker_or_the_scheduler_mid_sweep_is_one_line(tmp_path, fault):
    cluster = _Cluster(tmp_path)
    try:
        worker = cluster.worker("w1")
        with cluster.client() as c:
            c.wait_for_workers(1, timeout=60)
            cli = _cli([*SWEEP, "--scheduler", cluster.addr, "--connect-timeout", "3"])
            _when_running(c, cli)
            victim = worker if fault == "kill-only-worker" else cluster.procs["scheduler"]
            victim.send_signal(signal.SIGKILL)
            out, err = cli.communicate(timeout=120)
    finally:
        cluster.close()
    assert cli.returncode == 1 and out == "", (cli.returncode, out[-300:], err[-3000:])
    line = _one_line(err, "sweep")
    want = ("no worker in the cluster for 3 s" if fault == "kill-only-worker"
            else "lost the connection to the scheduler")
    assert f"--scheduler {cluster.addr}: {want}" in line and "tasks done" in line


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["sigkill-with-replacement", "sigterm-one-of-two"])
def test_worker_loss_with_another_worker_is_retried(tmp_path, capsys, fault):
    serial = _serial_rows(capsys)
    cluster = _Cluster(tmp_path)
    try:
        w1 = cluster.worker("w1")
        if fault == "sigterm-one-of-two":
            cluster.worker("w2")
        with cluster.client() as c:
            c.wait_for_workers(len(cluster.procs) - 1, timeout=60)
            cli = _cli([*SWEEP, "--scheduler", cluster.addr, "--connect-timeout", "20"])
            _when_running(c, cli)
            if fault == "sigkill-with-replacement":
                w1.send_signal(signal.SIGKILL)
                cluster.worker("w2")
            else:
                w1.send_signal(signal.SIGTERM)
            out, err = cli.communicate(timeout=180)
    finally:
        cluster.close()
    assert cli.returncode == 0, err
    assert json.loads(out)["rows"] == serial


@pytest.mark.slow
def test_sweep_on_a_local_cluster_equals_serial(capsys):
    serial = _serial_rows(capsys)
    assert main([*SWEEP, "--workers", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == serial


@pytest.mark.slow
def test_tls_scheduler_works_with_dask_tls_settings(tmp_path, capsys, monkeypatch):
    """A ``tls://`` scheduler and worker with a temporary CA: fpbench runs through it when
    Dask's TLS settings name the files, and gives the local table."""
    from distributed.security import Security
    sec = Security.temporary()            # needs the cryptography package (test extra)
    files = {}
    for name, pem in (("ca", sec.tls_ca_file), ("cert", sec.tls_client_cert),
                      ("key", sec.tls_client_key)):
        files[name] = tmp_path / f"{name}.pem"
        files[name].write_text(pem)
    tls = ["--tls-ca-file", str(files["ca"]), "--tls-cert", str(files["cert"]),
           "--tls-key", str(files["key"])]
    port = _free_port()
    addr = f"tls://127.0.0.1:{port}"
    cluster = _Cluster.__new__(_Cluster)
    cluster.tmp, cluster.port, cluster.addr, cluster.procs, cluster.logs = (
        tmp_path, port, addr, {}, [])
    try:
        cluster._start("scheduler", ["scheduler", "--host", "127.0.0.1", "--port", str(port),
                                     "--protocol", "tls", "--no-dashboard", *tls])
        cluster._start("w1", ["worker", addr, "--nthreads", "1", "--no-nanny",
                              "--no-dashboard", "--memory-limit", "0", *tls])
        monkeypatch.setenv("DASK_DISTRIBUTED__COMM__TLS__CA_FILE", str(files["ca"]))
        monkeypatch.setenv("DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT", str(files["cert"]))
        monkeypatch.setenv("DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY", str(files["key"]))
        import dask
        dask.config.refresh()
        from distributed import Client
        deadline = time.monotonic() + 120
        while True:
            try:
                with Client(addr, timeout="5s", security=Security()) as c:
                    c.wait_for_workers(1, timeout=60)
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.5)
        f = tmp_path / "p.fpcore"
        f.write_text(FPCORE)
        args = ["fpbench", str(f), "--samples", "6", "--quiet", "--json"]
        assert main(args) == 0
        local = json.loads(capsys.readouterr().out)["rows"]
        rc = main([*args, "--scheduler", addr, "--connect-timeout", "10"])
        out, err = capsys.readouterr()
        assert rc == 0, err
        assert json.loads(out)["rows"] == local
    finally:
        cluster.close()
        monkeypatch.undo()
        import dask
        dask.config.refresh()


def _slow_square(shared, i):
    time.sleep(0.3)
    return shared + i * i


@pytest.mark.slow   # an in-process cluster: ~2 s
def test_a_task_that_comes_back_cancelled_is_submitted_again():
    """A future that ends "cancelled" while the client and a worker are up (what a worker
    leaving with a finished result can give, SIGTERM above) is submitted again; the run's
    results are whole."""
    from distributed import Client, Future, LocalCluster

    from scalarlab.experiments import dask_cluster as D
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster, Client(cluster) as c:
        hit = []

        def cancel_one():
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not hit:
                keys = sorted(str(k) for k in c.futures if str(k).startswith("_slow_square"))
                if len(keys) == 4:
                    hit.append(keys[-1])
                    c.cancel([Future(keys[-1], c)])
                time.sleep(0.01)
        t = threading.Thread(target=cancel_one)
        t.start()
        out = D.run_tasks(c, "test", _slow_square, 10, [(i,) for i in range(4)],
                          inline_shared=True, wait_for_worker=5)
        t.join()
    assert hit and out == [10, 11, 14, 19]
