"""The first-run notice: one line on stderr when compiling Numba kernels has kept a command
waiting for over a second (a cold on-disk cache: the first run after installing or
upgrading), so that a silent minute does not look like a hang.

A daemon thread samples the main thread's stack a few times a second and adds up the
time it spends inside Numba's compiler; it imports nothing (numba included) and costs
nothing when no kernel compiles.  The notice is for a person waiting at a terminal: it is
shown only when stderr is one and ``--quiet`` was not given.
"""
from __future__ import annotations

import os
import sys
import threading
import time

NOTICE = ("compiling kernels for first use, once per install (Numba caches them on disk; "
          "later runs start at once)...")

#: how long compiling must have kept the command waiting before the notice shows
THRESHOLD_S = 1.0
#: the sampling period of the watcher
PERIOD_S = 0.1

# Numba's compiler pipeline (numba/core/compiler.py: compile_extra, compile_ir, ...): a
# kernel loaded from the on-disk cache never enters it, one being compiled always does.
_COMPILER = os.sep + os.path.join("numba", "core", "compiler.py")


def compiling(frame) -> bool:
    """Whether the stack from ``frame`` down is inside Numba's compiler pipeline."""
    while frame is not None:
        if frame.f_code.co_filename.endswith(_COMPILER):
            return True
        frame = frame.f_back
    return False


class Watcher:
    """Samples ``thread_id``'s stack every :data:`PERIOD_S`; after :data:`THRESHOLD_S` of
    compiling it calls ``say(NOTICE)`` once and stops."""

    def __init__(self, say, thread_id=None, threshold=THRESHOLD_S, period=PERIOD_S):
        self.say, self.threshold, self.period = say, threshold, period
        self.thread_id = threading.main_thread().ident if thread_id is None else thread_id
        self.compiled_s = 0.0
        self.shown = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scalarlab-first-run",
                                        daemon=True)

    def start(self) -> "Watcher":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(self.period):
            now = time.monotonic()
            frame = sys._current_frames().get(self.thread_id)
            if frame is not None and compiling(frame):
                self.compiled_s += now - last
            last = now
            if self.compiled_s >= self.threshold:
                self.shown = True
                self.say(NOTICE)
                return


def watch(say, quiet: bool) -> Watcher | None:
    """Start a :class:`Watcher` for a command run from a terminal (None otherwise)."""
    try:
        if quiet or not sys.stderr.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    return Watcher(say).start()
