"""Helper of ``test_train_checkpoint_faults.py``: a checkpoint saver the test kills.

As a script (``python checkpoint_kill_child.py PATH STEPS``) it builds the session of
:func:`build`, saves it once, prints ``ready`` and serves lines on stdin: ``go`` forks a
child that trains and saves ``PATH`` after every step (the test SIGKILLs it at a random
moment) and prints the child's pid; ``reap PID`` waits for that child; ``full`` saves
in a child whose files may not pass 4 KiB (a full disk) and prints the error.  Forking from this
single-threaded server makes a kill cost milliseconds instead of an interpreter start.
"""
from __future__ import annotations

import os
import sys

from scalarlab.tape.training import checkpoint_io
from scalarlab.tape.training.data import Loader, regression25
from scalarlab.tape.training.layers import BatchNorm1d, Dropout, Linear, ReLU, Sequential
from scalarlab.tape.training.optim import Adam
from scalarlab.tape.training.trainer import TrainingSession


def build(seed: int = 5):
    """A small model with every kind of state: parameters, batch-norm buffers, dropout
    draws, Adam's two slots and a shuffling loader."""
    model = Sequential(Linear(2, 12), BatchNorm1d(12), ReLU(), Dropout("0.25"), Linear(12, 1))
    sess = TrainingSession(model, "float64", Adam("0.01"), seed=seed)
    X, Y = regression25()
    return sess, Loader(sess.ctx.convert(X), sess.ctx.convert(Y), 5, seed=5)


def serve(path: str, steps: int) -> None:
    sess, loader = build()
    checkpoint_io.save(path, sess, loader)
    print("ready", flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if cmd[:1] == ["go"]:
            pid = os.fork()
            if pid == 0:                       # the saver: train and save until killed
                code = 1
                try:
                    for _ in range(steps):
                        sess.step(*loader.next())
                        checkpoint_io.save(path, sess, loader)
                    code = 0
                finally:
                    os._exit(code)
            print(pid, flush=True)
        elif cmd[:1] == ["full"]:               # a save on a "full disk": files <= 4 KiB
            pid = os.fork()
            if pid == 0:
                try:
                    import resource
                    import signal
                    from scalarlab.tape.errors import TapeError
                    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # EFBIG, not a kill
                    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
                    sess.step(*loader.next())
                    try:
                        checkpoint_io.save(path, sess, loader)
                        print("saved", flush=True)
                    except TapeError as exc:
                        print(f"error {exc}", flush=True)
                finally:
                    os._exit(0)
            os.waitpid(pid, 0)
            print("reaped", flush=True)
        elif cmd[:1] == ["reap"]:
            _, status = os.waitpid(int(cmd[1]), 0)
            print(f"reaped {status}", flush=True)


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]))
