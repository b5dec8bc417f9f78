"""experiments.interrupts: which signals a run turns into a clean exit."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

_CHILD = r"""
import os, signal, sys
from scalarlab.experiments.interrupts import Terminated, setup_process
undo = setup_process()
os.kill(os.getpid(), signal.SIGHUP)          # ignored at start: must stay ignored
print("survived SIGHUP", flush=True)
try:
    os.kill(os.getpid(), signal.SIGTERM)     # not ignored: still ends the run like Ctrl-C
except Terminated as e:
    print("terminated", e.signum, flush=True)
undo()
print(signal.getsignal(signal.SIGHUP) is signal.SIG_IGN)
"""


def test_a_signal_ignored_at_start_stays_ignored():
    """Under ``nohup`` (SIGHUP ignored before exec) the run must survive SIGHUP, while
    SIGTERM, which was not ignored, still ends it with Terminated."""
    def ignore_hup():
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    p = subprocess.run([sys.executable, "-c", _CHILD], preexec_fn=ignore_hup, env=env,
                       capture_output=True, text=True, timeout=60)
    assert (p.returncode, p.stderr) == (0, "")
    assert p.stdout.split("\n") == ["survived SIGHUP", f"terminated {int(signal.SIGTERM)}",
                                    "True", ""]
