"""Kill loop: every writing command, killed (SIGKILL or SIGTERM) at chosen or random
points, leaves its output set old or new -- never a mix -- and no temporaries once the
next run has recovered (experiments.output_sets).

Each run is a forked child of the test process running ``cli.main`` (the modules are
imported and the kernels compiled once, so a run costs milliseconds).  A kill point is
either the k-th file-system operation of the run (rename, replace, mkdir, unlink, rmdir,
fsync, rmtree, directory exchange: every step of the commit protocol is hit) or a random
instant.  The expected sets are the outputs of complete runs of the same command lines in
a second directory (relative paths, so even the recorded command lines agree).
"""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import time
from pathlib import Path

import pytest

from scalarlab.experiments import output_sets
from scalarlab.experiments.cli import main

FPCORE = '(FPCore (x) :name "sub" :pre (<= 1 x 2) (- (sqrt (+ x 1)) (sqrt x)))\n'


def _sampled(seed):
    return ["--seed", str(seed), "--quiet"]


#: command -> (two command lines giving different sets, the set's members)
COMMANDS = {
    "compare": ([["compare", "--contexts", "binary32", "--samples", "8", *_sampled(s),
                  "--out", "c.csv", "--plot", "c.png"] for s in (1, 2)],
                ["c.csv", "c.csv.meta.json", "c.png"]),
    "gaps": ([["gaps", "--samples", "20", *_sampled(s), "--out", "g.md", "--plot", "g.png"]
              for s in (1, 2)], ["g.md", "g.png"]),
    "sweep": ([["sweep", "--radii", "0.01", "--samples", "10", "--contexts", "binary32",
                *_sampled(s), "--out", "s.csv"] for s in (1, 2)],
              ["s.csv", "s.csv.meta.json"]),
    "reduction-order": ([["reduction-order", "--samples", "8", *_sampled(s), "--out",
                          "r.json"] for s in (1, 2)], ["r.json"]),
    "fpbench": ([["fpbench", "p.fpcore", "--samples", "16", "--contexts", "binary32",
                  *_sampled(s), "--out", "f.csv"] for s in (1, 2)],
                ["f.csv", "f.csv.meta.json"]),
    "import": ([["import", m, "-o", "m.json", "--npz"] for m in ("ma.onnx", "mb.onnx")],
               ["m.npz", "m.json"]),
    "export": ([["export", "six-node", "-o", "e.onnx", "--dtype", d]
                for d in ("float32", "float64")], ["e.onnx"]),
    "report": ([["report", "--out", "rep", "--samples", "4", "--gap-samples", "4",
                 "--graphs", "concat-axis", "--tightness", "none", *_sampled(s)]
                for s in (1, 2)], ["rep"]),
    # the same where the file system cannot exchange two directories: two renames under
    # a journal (see _no_exchange)
    "report-renames": ([["report", "--out", "rep2", "--samples", "4", "--gap-samples", "4",
                         "--graphs", "concat-axis", "--tightness", "none", *_sampled(s)]
                        for s in (1, 2)], ["rep2"]),
}


def _setup_child(argv) -> None:
    """In a forked child: ``rep2`` is published as on a file system without
    ``RENAME_EXCHANGE``."""
    if "rep2" in argv:
        output_sets._exchange = lambda a, b: False

_FS_OPS = ("replace", "rename", "mkdir", "unlink", "rmdir", "fsync")


def _stub_build(rep, seed=0, **kw):
    """The report's sections replaced by a few files (the real report takes seconds; the
    directory is published the same way; test_experiments_report runs the real one)."""
    for name, text in (("report.md", f"report seed {seed}\n"),
                       ("t.csv", f"seed\n{seed}\n"), ("u.csv", "a\n1\n")):
        (rep.directory / name).write_text(text)
        rep.files.append(name)
    return rep


def _instrument(kill_at=None, sig=signal.SIGKILL, trace=None):
    """Count the file-system operations of this process; at the ``kill_at``-th one send
    ``sig`` to ourselves (before doing it).  Returns the function that undoes it."""
    count = [0]
    saved = [(os, n, getattr(os, n)) for n in _FS_OPS] + [
        (shutil, "rmtree", shutil.rmtree), (output_sets, "_exchange", output_sets._exchange)]

    def wrap(name, fn):
        def op(*a, **kw):
            count[0] += 1
            if trace is not None:
                trace.append(name)
            if count[0] == kill_at:
                os.kill(os.getpid(), sig)
            return fn(*a, **kw)
        return op
    for mod, name, fn in saved:
        setattr(mod, name, wrap(name, fn))

    def undo():
        for mod, name, fn in saved:
            setattr(mod, name, fn)
    return undo


def _fork_run(cwd, argv, *, kill_at=None, sig=signal.SIGKILL, after=None):
    """Run ``main(argv)`` in a forked child in ``cwd``; kill it at its ``kill_at``-th
    file operation or ``after`` seconds.  Returns (exit code or None, signal or None)."""
    pid = os.fork()
    if pid == 0:                                              # pragma: no cover (child)
        rc = 99
        try:
            os.chdir(cwd)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            # the default actions even under `nohup pytest` (the lab keeps a signal
            # that was ignored at start ignored, and the kills would not land)
            for n in (signal.SIGTERM, signal.SIGHUP):
                signal.signal(n, signal.SIG_DFL)
            _setup_child(argv)
            if kill_at is not None:
                _instrument(kill_at, sig)
            rc = main(list(argv))
        finally:
            os._exit(rc)
    if after is not None:
        time.sleep(after)
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 300
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:                       # pragma: no cover
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError(f"{argv} did not end within 300 s")
        time.sleep(0.005)
    if os.WIFSIGNALED(status):
        return None, os.WTERMSIG(status)
    return os.WEXITSTATUS(status), None


def _snapshot(d: Path, members) -> dict:
    """The set's contents: name -> bytes (None when absent); a directory member as the
    mapping of its files (the marker without its per-run token)."""
    snap = {}
    for m in members:
        p = d / m
        if p.is_dir():
            files = {}
            for f in sorted(p.rglob("*")):
                data = f.read_bytes() if f.is_file() else b"<dir>"
                if f.name == output_sets.MARKER:
                    doc = json.loads(data)
                    doc.pop("token", None)
                    data = json.dumps(doc).encode()
                files[str(f.relative_to(p))] = data
            snap[m] = files
        else:
            snap[m] = p.read_bytes() if p.exists() else None
    return snap


def _temporaries(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob(".*")
                  if output_sets.TEMP_NAME.match(p.name))


def _journals(d: Path) -> list[Path]:
    return [p for p in d.iterdir() if (m := output_sets.TEMP_NAME.match(p.name))
            and m["kind"] == "commit" and not m["partial"]]


def _quiet_run(cwd, argv) -> int:
    import contextlib
    import io
    here = os.getcwd()
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            return main(list(argv))
    finally:
        os.chdir(here)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """Inputs in two folders: ``live`` (killed runs) and ``ref`` (complete runs: the
    expected sets of the command lines, made on first use of each command: every command
    runs once in this process first, so that the forked children find its modules
    imported and its kernels compiled)."""
    from scalarlab.experiments import report as R
    real_build = R._build
    R._build = _stub_build
    try:
        yield _workspace(tmp_path_factory.mktemp("killloop"))
    finally:
        R._build = real_build


class _Expected(dict):
    """command -> the sets of its two command lines, each computed when first asked for
    (the default test kills a few commands; the slow one all of them)."""

    def __init__(self, root):
        super().__init__()
        self.root = root

    def __missing__(self, cmd):
        root = self.root
        argvs, members = COMMANDS[cmd]
        sets = []
        for argv in argvs:
            assert _quiet_run(root / "ref", argv) == 0, argv
            sets.append(_snapshot(root / "ref", members))
        assert sets[0] != sets[1] and all(all(v is not None for v in s.values())
                                          for s in sets), cmd
        # the same command line twice gives the same set (the check below needs it)
        assert _fork_run(root / "ref", argvs[0]) == (0, None)
        assert _snapshot(root / "ref", members) == sets[0], cmd
        self[cmd] = sets
        return sets


def _workspace(root):
    for sub in ("live", "ref"):
        d = root / sub
        d.mkdir()
        (d / "p.fpcore").write_text(FPCORE)
    cwd = os.getcwd()
    try:
        os.chdir(root / "live")
        for dtype, name in (("float32", "ma.onnx"), ("float64", "mb.onnx")):
            assert main(["export", "six-node", "-o", name, "--dtype", dtype]) == 0
            shutil.copy(name, root / "ref" / name)
    finally:
        os.chdir(cwd)
    return root, _Expected(root)


def _op_count(root: Path, argv) -> int:
    """How many counted file operations one complete run makes (counted in a child)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                              # pragma: no cover (child)
        os.close(r)
        n = 0
        try:
            os.chdir(root / "ref")
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            _setup_child(argv)
            # a first run warms the caches (numba's, matplotlib's) whose own file writes
            # would be counted once here and never in the killed runs, which then ended
            # before their kill point (the default test's kill count varied, 15 to 18)
            main(list(argv))
            trace = []
            _instrument(trace=trace)
            main(list(argv))
            n = len(trace)
        finally:
            os.write(w, str(n).encode())
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 64):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return int(data)


class Tally:
    def __init__(self):
        self.kills = self.mixed = self.mixed_before = self.leftovers = self.ended = 0
        self.rolled_forward = 0


def _one_kill(root, expected, cmd, i, tally, **kill):
    argvs, members = COMMANDS[cmd]
    live = root / "live"
    old = _snapshot(live, members)
    new = expected[cmd][i % 2]
    rc, sig = _fork_run(live, argvs[i % 2], **kill)
    if sig is None and rc == 0:
        tally.ended += 1                       # the kill came after the run had ended
    else:
        tally.kills += 1
        # ended by the signal itself (SIGKILL; or SIGTERM/SIGHUP at a random instant
        # before main() installed its handler or after it restored the default one: the
        # default action, nothing of the run in progress) or by main() with 128+n
        sent = kill.get("sig", signal.SIGKILL)
        assert (rc, sig) in ((None, sent), (128 + sent, None)), (rc, sig, sent)
    raw = _snapshot(live, members)
    journals = _journals(live)
    if raw not in (old, new) and not journals:
        tally.mixed_before += 1                # a mix visible without a journal to finish it
    notes = output_sets.recover(live)          # what the next run does first
    tally.rolled_forward += sum("completed" in n for n in notes)
    after = _snapshot(live, members)
    if after not in (old, new):
        tally.mixed += 1
    if _temporaries(live):
        tally.leftovers += 1
    return after


def _kill_points(root, cmd, count, rng):
    """``count`` (k, signal) pairs over the run's file operations: half anywhere, half in
    its last third (where the sets are published and cleaned up)."""
    n = _op_count(root, COMMANDS[cmd][0][0])
    assert n > 3, cmd
    ks = set(rng.sample(range(1, n + 1), count // 2))
    tail = [k for k in range(n - n // 3, n + 1) if k not in ks]
    ks |= set(rng.sample(tail, min(count - len(ks), len(tail))))
    return [(k, rng.choice((signal.SIGKILL, signal.SIGTERM))) for k in sorted(ks)]


def _report(tally, what):
    print(f"\n{what}: {tally.kills} kills (+{tally.ended} runs that ended first), "
          f"{tally.mixed} mixed sets after recovery, {tally.mixed_before} mixed without a "
          f"journal before it, {tally.leftovers} with leftovers; {tally.rolled_forward} "
          "sets rolled forward")


def _assert_clean(tally, root, expected):
    assert tally.mixed == 0 and tally.mixed_before == 0 and tally.leftovers == 0
    # the next complete run of every command killed: its set, no temporaries anywhere
    for cmd in list(expected):
        argvs, members = COMMANDS[cmd]
        assert _fork_run(root / "live", argvs[0]) == (0, None), cmd
        assert _snapshot(root / "live", members) == expected[cmd][0], cmd
    assert _temporaries(root / "live") == []


#: one command per way of publishing: a file set with a plot, two files of an import, a
#: directory swapped by RENAME_EXCHANGE and one renamed under a journal (the others
#: publish file sets the way compare does; the slow loop kills every command)
DEFAULT_COMMANDS = ("compare", "import", "report", "report-renames")


def test_kill_loop_every_way_of_publishing(workspace):
    """About 20 kills at file operations (SIGKILL and SIGTERM) of one command per way of
    publishing."""
    root, expected = workspace
    rng = random.Random(30)
    tally = Tally()
    for cmd in DEFAULT_COMMANDS:
        for i, (k, sig) in enumerate(_kill_points(root, cmd, 6, rng)):
            _one_kill(root, expected, cmd, i, tally, kill_at=k, sig=sig)
    _report(tally, "kill loop (default)")
    assert tally.kills >= 18
    _assert_clean(tally, root, expected)


@pytest.mark.slow
def test_kill_loop_every_writing_command(workspace):
    """~30 kills at file operations of every writing command (SIGKILL and SIGTERM)."""
    root, expected = workspace
    rng = random.Random(30)
    tally = Tally()
    for cmd in COMMANDS:
        for i, (k, sig) in enumerate(_kill_points(root, cmd, 4, rng)):
            _one_kill(root, expected, cmd, i, tally, kill_at=k, sig=sig)
    _report(tally, "kill loop (every command)")
    assert tally.kills >= 30
    _assert_clean(tally, root, expected)


@pytest.mark.slow
def test_kill_loop_every_operation_and_random_instants(workspace):
    """Every file operation of every command under SIGKILL and SIGTERM, then random
    instants (SIGKILL, SIGTERM, SIGHUP): >= 200 kills."""
    root, expected = workspace
    rng = random.Random(200)
    tally = Tally()
    for cmd in COMMANDS:
        n = _op_count(root, COMMANDS[cmd][0][0])
        i = 0
        for k in range(1, n + 1):
            for sig in (signal.SIGKILL, signal.SIGTERM):
                _one_kill(root, expected, cmd, i, tally, kill_at=k, sig=sig)
                i += 1
    for cmd in COMMANDS:
        argv = COMMANDS[cmd][0][0]
        t0 = time.monotonic()
        assert _fork_run(root / "live", argv) == (0, None)
        span = time.monotonic() - t0
        for i in range(8):
            _one_kill(root, expected, cmd, i + 1, tally, after=rng.uniform(0, span),
                      sig=rng.choice((signal.SIGKILL, signal.SIGTERM, signal.SIGHUP)))
    _report(tally, "kill loop (slow)")
    assert tally.kills >= 200
    _assert_clean(tally, root, expected)
