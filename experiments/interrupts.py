"""How a ``scalarlab`` run ends when the outside world stops it: SIGTERM and SIGHUP end it
like Ctrl-C (every temporary removed, one line, exit 128+n), and a standard stream closed
before the start (``>&-``) fails on write like a closed descriptor instead of crashing."""
from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
import threading


#: the output files this run has published (experiments.output_sets appends; kept here,
#: in a module of the standard library only, so that --help/--version load no numerics)
PUBLISHED: list = []


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the program is so that every ``finally`` and
    temporary-file cleanup runs as for Ctrl-C."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _on_signal(signum, frame):
    raise Terminated(signum)


class _ClosedStream:
    """Stands for a standard output closed before the start: writing fails with EBADF,
    as coreutils report it ("write error: Bad file descriptor", exit 1)."""

    def write(self, text):
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))

    def flush(self):
        pass

    def isatty(self):
        return False

    def fileno(self):
        return 1


def setup_process():
    """SIGTERM/SIGHUP end the run like Ctrl-C (unless ignored at start, as under
    ``nohup``: they stay ignored); a closed descriptor 1 or 2 gets /dev/null
    (so no file the run opens lands on it) and a closed stdout a stream whose writes fail
    with EBADF.  Returns the function that undoes it (``main`` runs in tests too)."""
    PUBLISHED.clear()
    saved = {}
    if threading.current_thread() is threading.main_thread():
        for name in ("SIGTERM", "SIGHUP"):
            n = getattr(signal, name, None)
            # a signal ignored at start (nohup, a parent's choice) stays ignored: the
            # caller asked the run to survive it, so we must not turn it into an exit
            if n is not None and signal.getsignal(n) is not signal.SIG_IGN:
                saved[n] = signal.signal(n, _on_signal)
    streams = (sys.stdout, sys.stderr)
    for fd in (1, 2):
        try:
            os.fstat(fd)
        except OSError:
            with contextlib.suppress(OSError):
                null = os.open(os.devnull, os.O_WRONLY)
                if null != fd:
                    os.dup2(null, fd)
                    os.close(null)
    if sys.stdout is None:
        sys.stdout = _ClosedStream()

    def undo():
        for n, h in saved.items():
            signal.signal(n, h)
        sys.stdout, sys.stderr = streams
    return undo


def exit_status(exc) -> int:
    """128 + the signal's number (130 for Ctrl-C)."""
    return 128 + int(getattr(exc, "signum", signal.SIGINT))


def message(exc) -> str:
    """The one line of a run ended by a signal: which outputs were already published."""
    n = getattr(exc, "signum", signal.SIGINT)
    what = "interrupted" if n == signal.SIGINT else f"terminated by {signal.Signals(n).name}"
    if not PUBLISHED:
        return f"{what} (outputs not replaced)"
    return f"{what} after writing {', '.join(PUBLISHED)} (later outputs not written)"
