"""Running the lab's tasks on Dask (``--scheduler ADDRESS`` or ``--workers N``) so that
every fault ends in one line.

Dask's ``Client`` bounds only the TCP connect by its timeout: a peer that accepts and
stays silent (an HTTP server waits for a request) hangs it, and a peer that sends bytes
has them read as a frame length (a few letters make an exabyte allocation).  So
:func:`probe` speaks the first step of Dask's protocol itself, with a raw socket and a
hard deadline, before any ``Client`` exists: a Dask scheduler sends its handshake first
(an 8-byte frame-block length, then msgpack frames naming ``python`` and ``compression``).

:func:`run_tasks` submits with ``retries`` and watches the run: a task whose worker died
is retried by Dask (on the workers that remain, or on one that joins), a finished one whose
result left with its worker and came back "cancelled" is submitted again; the shared input
is a task, not scattered data, so the scheduler recomputes it when the worker holding it
dies; with no worker left for ``wait_for_worker`` seconds, or with the scheduler gone,
the run ends with a one-line :class:`ExperimentError` saying how far it got.
"""
from __future__ import annotations

import contextlib
import socket
import struct
import time

from .errors import ExperimentError

# A Dask handshake is under a hundred bytes; more than this is not one.
HANDSHAKE_MAX_BYTES = 1 << 16
DEFAULT_RETRIES = 3
POLL_SECONDS = 0.5


def split_address(address: str) -> tuple:
    """``(scheme, host, port)`` of an address the argument type accepted."""
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    host, _, port = rest.rstrip("/").rpartition(":")
    return scheme, host.strip("[]"), int(port)


def _security(scheme: str, where: str):
    """Dask's ``Security`` for a ``tls://`` address (from Dask's configuration)."""
    if scheme != "tls":
        return None
    from distributed.security import Security
    try:
        sec = Security()
        ctx = sec.get_connection_args("client").get("ssl_context")
    except (OSError, ValueError, TypeError) as exc:
        raise ExperimentError(f"{where}: Dask's TLS settings are not usable: "
                              f"{' '.join(str(exc).split())[:200]}") from None
    if ctx is None:
        raise ExperimentError(f"{where}: tls:// needs Dask's TLS settings "
                              "(distributed.comm.tls.ca-file, .client.cert, .client.key in "
                              "the Dask configuration, e.g. DASK_DISTRIBUTED__COMM__TLS__"
                              "CA_FILE); none are set")
    return sec, ctx


def probe(address: str, timeout: float, where: str | None = None) -> None:
    """Check within ``timeout`` seconds that ``address`` answers as a Dask scheduler."""
    where = where or f"--scheduler {address}"
    scheme = address.partition("://")[0] if "://" in address else "tcp"
    if scheme == "inproc":
        raise ExperimentError(f"{where}: an inproc:// scheduler lives inside one Python "
                              "process; a command cannot reach one (use tcp:// or tls://)")
    if scheme == "ucx":
        import importlib.util
        if not any(importlib.util.find_spec(m) for m in ("ucp", "distributed_ucxx")):
            raise ExperimentError(f"{where}: ucx:// is not available here (it needs the "
                                  "ucx-py or distributed-ucxx package)")
        return                          # UCX has no socket to probe; Client's timeout holds
    tls = _security(scheme, where)
    _, host, port = split_address(address)
    deadline = time.monotonic() + timeout

    def left() -> float:
        t = deadline - time.monotonic()
        if t <= 0:
            raise socket.timeout()
        return t

    try:
        sock = socket.create_connection((host, port), timeout=left())
    except socket.timeout:
        raise ExperimentError(f"{where}: Dask cluster not reachable: no connection within "
                              f"{timeout:g} s") from None
    except OSError as exc:
        raise ExperimentError(f"{where}: Dask cluster not reachable: "
                              f"{exc.strerror or exc}") from None
    try:
        if tls is not None:
            import ssl
            try:
                sock.settimeout(left())
                sock = tls[1].wrap_socket(sock, server_hostname=host)
            except (ssl.SSLError, ssl.CertificateError) as exc:
                raise ExperimentError(f"{where}: TLS handshake failed: "
                                      f"{' '.join(str(exc).split())[:200]}") from None
        head = _read(sock, 8, left)
        (n,) = struct.unpack("<Q", head)
        if not 8 <= n <= HANDSHAKE_MAX_BYTES:
            raise ExperimentError(f"{where}: not a Dask scheduler (its first bytes "
                                  f"{head!r} are not a Dask handshake)")
        body = _read(sock, n, left)
        if not _is_handshake(body):
            raise ExperimentError(f"{where}: not a Dask scheduler (it sent {n + 8} bytes "
                                  f"that are not a Dask handshake: {(head + body)[:24]!r})")
    except socket.timeout:
        raise ExperimentError(f"{where}: no Dask handshake within {timeout:g} s (a silent "
                              "port, or a server that is not a Dask scheduler, e.g. "
                              "HTTP)") from None
    except ConnectionError as exc:
        raise ExperimentError(f"{where}: the server closed the connection before a Dask "
                              f"handshake ({exc.strerror or type(exc).__name__}): not a "
                              "Dask scheduler?") from None
    except OSError as exc:
        raise ExperimentError(f"{where}: reading the handshake failed: "
                              f"{exc.strerror or exc}") from None
    finally:
        sock.close()


def _read(sock, n: int, left) -> bytes:
    buf = b""
    while len(buf) < n:
        sock.settimeout(left())
        part = sock.recv(n - len(buf))
        if not part:
            raise ConnectionResetError(0, "connection closed")
        buf += part
    return buf


def _is_handshake(body: bytes) -> bool:
    """Whether ``body`` unpacks as Dask frames holding a handshake mapping."""
    try:
        from distributed.protocol.core import loads
        from distributed.protocol.utils import unpack_frames
        frames, missing = unpack_frames(body, partial=True)
        if missing:
            return False
        msg = loads(frames, deserialize=False)
    except Exception:                        # noqa: BLE001 -- any failure: not Dask
        return False
    return isinstance(msg, dict) and "python" in msg and "compression" in msg


@contextlib.contextmanager
def client_for(*, scheduler: str | None = None, workers: int | None = None,
               timeout: float = 10.0):
    """A connected ``(client, where)``: an existing scheduler (probed first) or a local
    cluster of ``workers`` processes; closed on exit, whatever happened."""
    import dask
    import distributed
    where = f"--scheduler {scheduler}" if scheduler else f"--workers {workers}"
    cluster = client = None
    # the connect timeout also bounds Client's reconnection attempts when the scheduler
    # goes away mid-run
    with dask.config.set({"distributed.comm.timeouts.connect": f"{timeout}s"}), \
            _quiet_dask_logs():
        try:
            if scheduler:
                probe(scheduler, timeout, where)
                sec = _security(scheduler.partition("://")[0], where)
                client = distributed.Client(scheduler, timeout=f"{timeout}s",
                                            security=sec[0] if sec else None)
            else:
                cluster = distributed.LocalCluster(n_workers=int(workers),
                                                   threads_per_worker=1, processes=True,
                                                   dashboard_address=None)
                client = distributed.Client(cluster, timeout=f"{timeout}s")
        except (OSError, TimeoutError, TypeError, ValueError) as exc:
            _close(client, cluster)
            raise ExperimentError(f"{where}: Dask cluster not reachable: "
                                  f"{' '.join(str(exc).split())[:200] or type(exc).__name__}"
                                  ) from None
        try:
            yield client, where
        finally:
            _close(client, cluster)


@contextlib.contextmanager
def _quiet_dask_logs():
    """Dask logs a lost scheduler or worker with tracebacks on stderr; the command says
    it in one line instead, so those loggers are silenced while it runs."""
    import logging
    # tornado and asyncio log the failures of Dask's background tasks (a result fetch
    # cut by the lost scheduler) with tracebacks too
    roots = ("distributed", "tornado", "asyncio")
    names = list(roots) + [n for n in logging.root.manager.loggerDict
                           if n.startswith(tuple(r + "." for r in roots))]
    saved = {n: logging.getLogger(n).level for n in names}
    for n in names:
        logging.getLogger(n).setLevel(logging.CRITICAL + 1)
    yield
    # restored after a clean run only: after a fault, the client's background tasks and
    # finalizers keep logging the lost connection until the process ends
    for n, level in saved.items():
        logging.getLogger(n).setLevel(level)


def _close(client, cluster) -> None:
    """Close without letting a dead scheduler turn a clean error into a traceback."""
    for thing in (client, cluster):
        if thing is None:
            continue
        with contextlib.suppress(Exception):
            thing.close(timeout=2) if thing is client else thing.close()


def run_tasks(client, where: str, fn, shared, arg_lists: list, *, retries: int =
              DEFAULT_RETRIES, progress=None, wait_for_worker: float = 10.0,
              on_result=None, inline_shared: bool = False) -> list:
    """``[fn(shared, *args) for args in arg_lists]`` on the cluster, in order.

    ``shared`` travels once, as the result of a task (recomputed if its worker dies);
    with ``inline_shared`` it travels inside every task instead, for a few hundred bytes
    of arguments: then no task depends on another, and the scheduler hands them to
    whichever worker is free (a shared task lives on one worker, and Dask places its
    dependants there unless work stealing moves them).  A task's own exception is
    raised as it is; Dask faults are one-line ExperimentErrors.  ``on_result(i,
    result)`` sees each result as it arrives (a resume file records it)."""
    from distributed import as_completed
    # toolz (a dependency of dask) is importable on every scheduler and worker, whatever
    # version of this lab they run: the scheduler unpickles the task graph
    from toolz import identity
    from distributed.scheduler import KilledWorker

    total = len(arg_lists)
    try:
        doc = shared if inline_shared else client.submit(identity, shared, pure=False,
                                                         retries=retries)
        # one map call: one graph update for all the tasks, not one per task
        futures = client.map(fn, [doc] * total, *zip(*arg_lists), pure=False,
                             retries=retries) if arg_lists else []
    except (OSError, TimeoutError) as exc:
        raise ExperimentError(f"{where}: lost the scheduler while submitting: "
                              f"{' '.join(str(exc).split())[:200]}") from None
    # as_completed hands over each future once with its result fetched (so a result is
    # safe here before its worker can die), whatever its end: finished, error, cancelled.
    # Polling it without blocking leaves time for the watchdog below.
    index = {f.key: i for i, f in enumerate(futures)}
    results = [None] * total
    queue = as_completed(futures, with_results=True, raise_errors=False)
    pending = total
    done = 0
    resubmitted = [0] * total
    workerless_since = None
    next_check = time.monotonic()
    while pending:
        finished = queue.next_batch(block=False)
        if not finished:
            time.sleep(POLL_SECONDS / 10)
        cancelled = []
        for f, res in finished:
            pending -= 1
            if f.status == "finished":
                results[index[f.key]] = res
                done += 1
                if on_result:
                    on_result(index[f.key], res)
                if progress:
                    progress(1)
                continue
            if f.status == "error":
                exc = res[1] if isinstance(res, tuple) else res
                if isinstance(exc, KilledWorker):
                    raise ExperimentError(
                        f"{where}: a task failed {retries + 1} times because its workers "
                        f"died while running it ({done} of {total} tasks done)") from None
                if isinstance(exc, BaseException):
                    raise exc
                raise ExperimentError(_lost(client, where, done, total,
                                            str(getattr(res, "reason", "") or ""),
                                            wait_for_worker))
            cancelled.append((index[f.key], str(getattr(res, "reason", "") or "")))
        if cancelled:
            # A worker that leaves takes the results it holds; the scheduler recomputes
            # them, but a future whose result had not reached the client yet can end
            # "cancelled" (SIGTERM of one of two workers under load).  While the client is
            # connected and a worker is there, such tasks are submitted again, at most
            # `retries` times each; otherwise the cause is named.
            reason = cancelled[0][1]
            if all(resubmitted[i] < retries for i, _ in cancelled) \
                    and _still_up(client, reason, wait_for_worker):
                for i, _ in cancelled:
                    resubmitted[i] += 1
                    f = client.submit(fn, doc, *arg_lists[i], pure=False, retries=retries)
                    index[f.key] = i
                    queue.add(f)
                    pending += 1
            else:
                raise ExperimentError(_lost(client, where, done, total, reason,
                                            wait_for_worker))
        if pending and time.monotonic() >= next_check:
            next_check = time.monotonic() + 2 * POLL_SECONDS
            if client.status != "running":
                raise ExperimentError(_lost(client, where, done, total))
            try:
                workers = len(client.nthreads())
            except Exception:               # noqa: BLE001 -- a closing client raises
                raise ExperimentError(_lost(client, where, done, total)) from None
            if workers:
                workerless_since = None
            elif workerless_since is None:
                workerless_since = time.monotonic()
            elif time.monotonic() - workerless_since > wait_for_worker:
                raise ExperimentError(f"{where}: no worker in the cluster for "
                                      f"{wait_for_worker:g} s ({done} of {total} tasks "
                                      "done)")
    return results


def _lost(client, where, done, total, reason="", wait_for_worker=None) -> str:
    why = f", Dask's reason: {reason}" if reason and reason != "unknown" else ""
    # a dead scheduler's futures can be cancelled a moment before the client notices the
    # broken connection: give it that moment before blaming the scheduler
    deadline = time.monotonic() + 2.0
    while client.status == "running" and "connection-lost" not in reason \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    if client.status != "running" or "connection-lost" in reason:
        return (f"{where}: lost the connection to the scheduler ({done} of {total} tasks "
                f"done{why})")
    if wait_for_worker is not None and _workerless_for(client, wait_for_worker):
        # the scheduler cancels the tasks of a cluster whose last worker died: that, not
        # the cancellation, is the cause to name
        return (f"{where}: no worker in the cluster for {wait_for_worker:g} s (the "
                f"scheduler cancelled the run's tasks; {done} of {total} tasks done{why})")
    return (f"{where}: the scheduler cancelled the run's tasks ({done} of {total} tasks "
            f"done{why})")


def _still_up(client, reason: str, wait_for_worker: float) -> bool:
    """Whether cancelled tasks can be submitted again: the client is still connected (a
    dead scheduler's futures are cancelled a moment before the client notices: that moment
    is waited for) and a worker is there or joins within ``wait_for_worker`` seconds."""
    if "connection-lost" in reason:
        return False
    deadline = time.monotonic() + 2.0
    while client.status == "running" and time.monotonic() < deadline:
        time.sleep(0.05)
    return client.status == "running" and not _workerless_for(client, wait_for_worker)


def _workerless_for(client, seconds: float) -> bool:
    """Whether the cluster has no worker now and none joins within ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            if client.status != "running" or len(client.nthreads()):
                return False
        except Exception:                   # noqa: BLE001 -- a closing client raises
            return False
        if time.monotonic() >= deadline:
            return True
        time.sleep(0.1)
