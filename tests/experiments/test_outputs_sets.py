"""Output sets (experiments.output_sets): what ``--out`` may replace, outputs that are
inputs, stale temporaries, signals, closed or full standard output, a full disk."""
from __future__ import annotations

import builtins
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from scalarlab.experiments import output_sets
from scalarlab.experiments.cli import main


def _usage_error(capsys, argv, cmd):
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1, err
    assert err[0].startswith(f"scalarlab {cmd}: error: ")
    return err[0]


def _never(monkeypatch):
    """Make the work itself fail loudly: a refused command must not get there."""
    from scalarlab.experiments import compare as C
    from scalarlab.experiments import report as R

    def never(*a, **kw):                                       # pragma: no cover
        raise AssertionError("the work started before the outputs were checked")
    monkeypatch.setattr(C, "compare", never)
    monkeypatch.setattr(R, "_build", never)


def _tree(d):
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


# ------------------------------------------------------------------ --out DIR rules
def test_report_out_never_deletes_what_the_lab_did_not_write(tmp_path, monkeypatch,
                                                             capsys):
    """Issue 27: `report --out .` in a folder holding notes.txt and src/ deleted both."""
    _never(monkeypatch)
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("x = 1")
    monkeypatch.chdir(tmp_path)
    before = _tree(tmp_path)
    msg = _usage_error(capsys, ["report", "--out", ".", "--quiet"], "report")
    assert "is the current directory" in msg
    msg = _usage_error(capsys, ["report", "--out", "src", "--quiet"], "report")
    assert "src: exists and was not written by scalarlab (holds a.py" in msg
    # a directory the lab wrote, to which someone added a file, is not replaced either
    d = tmp_path / "rep"
    d.mkdir()
    (d / "report.md").write_text("old")
    (d / output_sets.MARKER).write_text(json.dumps(
        {"format": output_sets.MARKER_FORMAT, "files": ["report.md"]}))
    (d / "notes.txt").write_text("added by the user")
    msg = _usage_error(capsys, ["report", "--out", "rep", "--quiet"], "report")
    assert "rep: holds notes.txt, which scalarlab did not write" in msg
    # a file where the directory should go, and a directory where a file should go
    (tmp_path / "afile").write_text("x")
    msg = _usage_error(capsys, ["report", "--out", "afile", "--quiet"], "report")
    assert "exists and is not a directory" in msg
    (tmp_path / "t.csv").mkdir()
    msg = _usage_error(capsys, ["compare", "--out", "t.csv", "--quiet"], "compare")
    assert "t.csv: is a directory" in msg
    assert _tree(tmp_path) == sorted(before + ["afile", "rep", "rep/notes.txt",
                                               "rep/report.md", f"rep/{output_sets.MARKER}",
                                               "t.csv"])


def test_report_into_an_empty_or_new_directory(tmp_path, monkeypatch, capsys):
    from scalarlab.experiments import report as R

    def tiny(rep, **kw):
        (rep.directory / R.REPORT_NAME).write_text("stub")
        rep.files.append(R.REPORT_NAME)
        return rep
    monkeypatch.setattr(R, "_build", tiny)
    (tmp_path / "empty").mkdir()
    for d in ("empty", "new"):
        assert main(["report", "--out", str(tmp_path / d), "--quiet"]) == 0
        assert output_sets.read_marker(tmp_path / d) == ["report.md"]
        assert (tmp_path / d / "report.md").read_text() == "stub"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_sidecar_and_payload_paths_checked_before_the_work(tmp_path, monkeypatch, capsys):
    _never(monkeypatch)
    (tmp_path / "c.csv.meta.json").mkdir()
    msg = _usage_error(capsys, ["compare", "--quiet", "--out", str(tmp_path / "c.csv")],
                       "compare")
    assert f"--out {tmp_path / 'c.csv.meta.json'}: is a directory" in msg
    assert not (tmp_path / "c.csv").exists()
    # import -o m.json --npz: m.npz a directory is refused before the model is read
    (tmp_path / "m.npz").mkdir()
    (tmp_path / "model.onnx").write_bytes(b"not read")
    msg = _usage_error(capsys, ["import", str(tmp_path / "model.onnx"), "-o",
                                str(tmp_path / "m.json"), "--npz"], "import")
    assert "m.npz: is a directory" in msg


# ------------------------------------------------------------------ outputs = inputs
def test_an_output_that_is_an_input_is_refused(tmp_path, monkeypatch, capsys):
    """Issue 30: `--out` equal to the graph, to `--box box.json`, to `./sub/../g.json`
    or to a symlink of an input overwrote the input with exit 0."""
    from scalarlab import graph
    from scalarlab.graph import examples
    g, p, _ = examples.six_node_mlp()
    graph.save(tmp_path / "g.json", g, p)
    (tmp_path / "sub").mkdir()
    (tmp_path / "box.json").write_text("[[0, 1], [0, 1], [0, 1], [0, 1]]")
    os.symlink(tmp_path / "g.json", tmp_path / "link.json")
    os.link(tmp_path / "g.json", tmp_path / "hard.json")
    monkeypatch.chdir(tmp_path)
    before = {f.name: f.read_bytes() for f in tmp_path.iterdir() if f.is_file()}
    cases = [
        (["compare", "g.json", "--out", "g.json"], "--out g.json: is the input g.json"),
        (["compare", "./sub/../g.json", "--out", "g.json"], "is the input ./sub/../g.json"),
        (["compare", "link.json", "--out", "g.json"], "is the input link.json"),
        (["compare", "g.json", "--out", "link.json"], "is the input g.json"),
        (["compare", "g.json", "--out", "hard.json"], "is the input g.json"),
        (["sweep", "--box", "box.json", "--out", "box.json"], "is the input box.json"),
        (["gaps", "g.json", "--input", "0.1,0.2,0.3,0.4", "--plot", "g.json"],
         "unknown file type"),
        (["export", "g.json", "-o", "g.json"], "unknown file type"),
    ]
    for argv, want in cases:
        msg = _usage_error(capsys, [*argv, "--quiet"] if argv[0] != "export" else argv,
                           argv[0])
        assert want in msg, (argv, msg)
    assert {f.name: f.read_bytes() for f in tmp_path.iterdir() if f.is_file()} == before
    # a report directory that holds an input of the report
    rep = tmp_path / "rep"
    rep.mkdir()
    (rep / "g.json").write_bytes(before["g.json"])
    (rep / output_sets.MARKER).write_text(json.dumps(
        {"format": output_sets.MARKER_FORMAT, "files": ["g.json"]}))
    msg = _usage_error(capsys, ["report", "--out", "rep", "--graph", "rep/g.json",
                                "--input", "0.1,0.2,0.3,0.4", "--quiet"], "report")
    assert "--out rep: holds the input rep/g.json" in msg


# --------------------------------------------------------------- stale temporaries
def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_stale_temporaries_of_dead_writers_are_rolled_back_or_forward(tmp_path, capsys):
    dead = _dead_pid()
    # a set staged but never committed (killed before its journal): removed
    stage = tmp_path / f".c.csv.new-{dead}-0123456789ab"
    stage.mkdir()
    (stage / "c.csv").write_text("half")
    (tmp_path / "c.csv").write_text("old table")
    # a committed set whose publishing was cut: finished from its journal
    s2 = tmp_path / f".t.csv.new-{dead}-abcdefabcdef"
    s2.mkdir()
    (s2 / "t.csv.meta.json").write_text("new side")
    (tmp_path / "t.csv").write_text("new table")            # already moved
    (tmp_path / "t.csv.meta.json").write_text("old side")
    journal = tmp_path / f".t.csv.commit-{dead}-abcdefabcdef"
    journal.write_text(json.dumps({
        "format": "scalarlab-commit", "version": 1, "pid": dead, "token": "abcdefabcdef",
        "members": [{"target": str(tmp_path / "t.csv"), "staged": str(s2 / "t.csv"),
                     "dir": False},
                    {"target": str(tmp_path / "t.csv.meta.json"),
                     "staged": str(s2 / "t.csv.meta.json"), "dir": False}],
        "stages": [str(s2)]}))
    # a journal never finished (no commit) and a temporary of a live process: the first
    # goes, the second stays
    (tmp_path / f".x.csv.commit-{dead}-000000000000.tmp").write_text("{")
    live = tmp_path / f".y.csv.new-{os.getppid()}-111111111111"
    live.mkdir()
    # not the lab's naming: never touched
    (tmp_path / ".c.csv.new-notapid").mkdir()
    assert main(["sweep", "--radii", "0.01", "--samples", "4", "--contexts", "binary32",
                 "--quiet", "--out", str(tmp_path / "s.csv")]) == 0
    err = capsys.readouterr().err
    assert f"completed the interrupted write of t.csv.meta.json (process {dead})" in err
    assert f"removed {stage.name}, left by an interrupted run (process {dead}); nothing " \
           "there was published" in err
    assert (tmp_path / "c.csv").read_text() == "old table"
    assert (tmp_path / "t.csv").read_text() == "new table"
    assert (tmp_path / "t.csv.meta.json").read_text() == "new side"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == \
        sorted([".c.csv.new-notapid", live.name])


# ------------------------------------------------------------------------- signals
def _fork(fn):
    """Run ``fn()`` in a forked child with stdout/stderr on pipes; returns (exit code or
    -signal, stdout, stderr)."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:                                              # pragma: no cover (child)
        rc = 99
        try:
            os.close(out_r)
            os.close(err_r)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            sys.stdout = open(1, "w", closefd=False)
            sys.stderr = open(2, "w", closefd=False)
            rc = fn()
        finally:
            with open(2, "w", closefd=False) as fh:
                fh.flush()
            os._exit(rc if isinstance(rc, int) else 98)
    os.close(out_w)
    os.close(err_w)
    outs = []
    for fd in (out_r, err_r):
        data = b""
        while chunk := os.read(fd, 65536):
            data += chunk
        os.close(fd)
        outs.append(data.decode())
    _, status = os.waitpid(pid, 0)
    rc = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)
    return rc, outs[0], outs[1]


@pytest.mark.parametrize("sig, rc, name", [(signal.SIGTERM, 143, "SIGTERM"),
                                           (signal.SIGHUP, 129, "SIGHUP"),
                                           (signal.SIGINT, 130, None)])
def test_sigterm_and_sighup_end_like_ctrl_c(tmp_path, sig, rc, name):
    """A signal in the middle of the work: one line, exit 128+n, the previous output and
    no temporaries left."""
    from scalarlab.experiments import compare as C
    out = tmp_path / "t.csv"
    out.write_text("previous run\n")

    def child():
        def slow(*a, **kw):               # the work: the parent signals us from here
            os.kill(os.getpid(), sig)
            time.sleep(30)
            raise AssertionError("the signal did not end the run")
        C.compare = slow
        # Ctrl-C as in an interactive start: pytest run as a background job of a
        # non-interactive shell inherits SIGINT ignored, and so would this child
        signal.signal(signal.SIGINT, signal.default_int_handler)
        # likewise SIGHUP under `nohup pytest`: the lab keeps a signal ignored at start
        # ignored, so the child starts with the default action
        for n in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(n, signal.SIG_DFL)
        return main(["compare", "--quiet", "--out", str(out)])
    code, stdout, stderr = _fork(child)
    what = f"terminated by {name}" if name else "interrupted"
    assert (code, stderr.strip()) == (rc, f"scalarlab compare: {what} (outputs not "
                                          "replaced)")
    assert out.read_text() == "previous run\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_signal_after_publishing_names_what_was_written(tmp_path):
    out = tmp_path / "t.csv"

    def child():
        from scalarlab.experiments import tables
        real = tables.write_outputs

        def then_term(*a, **kw):
            notes = real(*a, **kw)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(30)
            return notes                                      # pragma: no cover
        tables.write_outputs = then_term
        return main(["compare", "--quiet", "--contexts", "binary32", "--out", str(out)])
    code, _, stderr = _fork(child)
    assert code == 143
    assert stderr.strip() == (f"scalarlab compare: terminated by SIGTERM after writing {out}, "
                              f"{out}.meta.json (later outputs not written)")
    assert out.exists()


@pytest.mark.parametrize("how, rc, msg", [
    ("closed", 1, "scalarlab contexts: error: standard output: Bad file descriptor"),
    ("full", 1, "scalarlab contexts: error: standard output: No space left on device"),
    ("pipe", 0, ""),
])
def test_closed_or_full_stdout_ends_with_one_line(how, rc, msg):
    """`>&-`, `>/dev/full`, `| head -1`: no traceback, no internal error (exit 3); like
    coreutils: a write error is one line and exit 1, a reader that had enough is quiet."""
    def child():
        if how == "closed":
            os.close(1)
            sys.stdout = None
        elif how == "full":
            fd = os.open("/dev/full", os.O_WRONLY)
            os.dup2(fd, 1)
            sys.stdout = open(1, "w", closefd=False)
        else:
            r, w = os.pipe()
            os.close(r)
            os.dup2(w, 1)
            sys.stdout = open(1, "w", closefd=False)
        return main(["contexts"])
    code, _, stderr = _fork(child)
    assert (code, stderr.strip()) == (rc, msg)


# ------------------------------------------------------------------------ full disk
class _Quota:
    """A disk that holds ``limit`` more bytes: writes to the lab's staged files past it
    store what fits and fail with ENOSPC (all writers: CSV, JSON, matplotlib's PNG)."""

    def __init__(self, root, limit):
        self.root, self.left, self.real = str(root), limit, builtins.open

    def open(self, file, mode="r", *a, **kw):
        fh = self.real(file, mode, *a, **kw)
        path = os.fspath(file) if isinstance(file, (str, os.PathLike)) else ""
        if any(c in mode for c in "wax") and path.startswith(self.root) and "/." in path:
            return _Limited(fh, self)
        return fh


class _Limited:
    def __init__(self, fh, quota):
        self._fh, self._q = fh, quota

    def write(self, data):
        n = len(data)
        if n > self._q.left:
            self._fh.write(data[: self._q.left])
            self._q.left = 0
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._q.left -= n
        return self._fh.write(data)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._fh.close()

    def __getattr__(self, name):
        return getattr(self._fh, name)


def test_full_disk_at_any_byte_keeps_the_previous_set(tmp_path, monkeypatch, capsys):
    """compare --out c.csv --plot c.png on a disk that fills at byte N, for N in every
    file of the set: exit 1, the message names the file and says the three are
    unchanged, and they are."""
    def argv(d, seed):
        return ["compare", "--contexts", "binary32", "--quiet", "--out", str(d / "c.csv"),
                "--plot", str(d / "c.png"), "--seed", str(seed), "--samples", str(2 + seed)]
    names = ["c.png", "c.csv", "c.csv.meta.json"]        # in the order they are written
    ref = tmp_path / "ref"
    ref.mkdir()
    assert main(argv(ref, 2)) == 0                         # the sizes of the new set
    sizes = [len((ref / n).read_bytes()) for n in names]
    d = tmp_path / "out"
    d.mkdir()
    assert main(argv(d, 1)) == 0
    capsys.readouterr()
    old = {n: (d / n).read_bytes() for n in names}
    limits = [0, sizes[0] // 2, sizes[0] + 10, sizes[0] + sizes[1] + 100, sum(sizes) - 1]
    for limit in limits:
        q = _Quota(d, limit)
        monkeypatch.setattr(builtins, "open", q.open)
        rc = main(argv(d, 2))
        monkeypatch.setattr(builtins, "open", q.real)
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 1 and len(err) == 1, (limit, err)
        assert "No space left on device; nothing was replaced: c.png, c.csv and " \
               "c.csv.meta.json are unchanged" in err[0], err
        assert {n: (d / n).read_bytes() for n in names} == old, limit
        assert sorted(p.name for p in d.iterdir()) == sorted(names)


_TMPFS_SCRIPT = r"""
import json, os, sys
from scalarlab.experiments.cli import main
d, mode = sys.argv[1], sys.argv[2]
os.chdir(d)
argv = ["compare", "--contexts", "binary32", "--quiet", "--out", "c.csv", "--plot", "c.png"]
res = {"first": main([*argv, "--samples", "3", "--seed", "1"])}
names = ["c.png", "c.csv", "c.csv.meta.json"]
old = {n: open(n, "rb").read().hex() for n in names}
if mode == "tmpfs":
    st = os.statvfs(".")
    free = st.f_bavail * st.f_frsize
    with open("filler", "wb") as fh:             # leave less room than one PNG
        fh.write(b"x" * max(0, free - 20000))
else:                                            # no user namespaces: a file size limit
    import resource, signal
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (20000, resource.RLIM_INFINITY))
    open("filler", "wb").close()
sys.stderr.flush()
res["second"] = main([*argv, "--samples", "4", "--seed", "2"])
res["same"] = {n: open(n, "rb").read().hex() == old[n] for n in names}
res["entries"] = sorted(os.listdir("."))
print(json.dumps(res))
"""


@pytest.mark.slow   # a fresh interpreter running compare (2.6 s CPU); the default selection
#                    fills the disk at every byte in-process (test_full_disk_at_any_byte_...)
def test_full_tmpfs_keeps_the_previous_set(tmp_path):
    """A real full file system: a 1 MiB tmpfs mounted in a user namespace (``unshare
    -rm``; where user namespaces are not allowed, the kernel's file size limit
    RLIMIT_FSIZE plays the full disk).  The second run cannot write its PNG: exit 1, the
    previous three files as they were, no temporaries, and the message says so."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    script = tmp_path / "full.py"
    script.write_text(_TMPFS_SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    namespaces = subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode \
        == 0 if shutil.which("unshare") else False
    if namespaces:
        cmd = ["unshare", "-rm", "sh", "-c",
               f'mount -t tmpfs -o size=1m none "{mnt}" && exec "{sys.executable}" '
               f'"{script}" "{mnt}" tmpfs']
        why = "No space left on device"
    else:                                                     # pragma: no cover
        cmd = [sys.executable, str(script), str(mnt), "rlimit"]
        why = "File too large"
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["first"] == 0 and res["second"] == 1
    assert res["same"] == {"c.png": True, "c.csv": True, "c.csv.meta.json": True}
    assert res["entries"] == ["c.csv", "c.csv.meta.json", "c.png", "filler"]
    err = [ln for ln in r.stderr.splitlines() if ln.startswith("scalarlab compare")]
    assert len(err) == 1 and f"{why}; nothing was replaced: c.png, c.csv and " \
        "c.csv.meta.json are unchanged" in err[0], r.stderr


def _catches(pid: int, sig: int) -> bool:
    """Whether process ``pid`` has a handler for ``sig`` (Linux /proc: SigCgt mask)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    except OSError:
        pass
    return False


@pytest.mark.slow
@pytest.mark.parametrize("sig, rc, name", [(signal.SIGTERM, 143, "SIGTERM"),
                                           (signal.SIGHUP, 129, "SIGHUP")])
def test_real_process_sigterm_sighup(tmp_path, sig, rc, name):
    """`python -m scalarlab.experiments compare --out t.csv` in its own interpreter,
    signalled once its handler is installed: one line, 128+n, the previous file, no
    temporaries."""
    out = tmp_path / "t.csv"
    out.write_text("previous run\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    p = subprocess.Popen([sys.executable, "-m", "scalarlab.experiments", "compare",
                          "--samples", "400000", "--contexts", "binary32,bfloat16",
                          "--quiet", "--out", str(out)], cwd=tmp_path, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         # the default action even under `nohup pytest` (an ignored
                         # signal stays ignored in the lab)
                         preexec_fn=lambda: signal.signal(sig, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while not _catches(p.pid, sig) and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.5)                                  # into the work
    p.send_signal(sig)
    _, err = p.communicate(timeout=300)
    assert (p.returncode, err.strip()) == (rc, f"scalarlab compare: terminated by {name} "
                                               "(outputs not replaced)")
    assert out.read_text() == "previous run\n"
    assert [q.name for q in tmp_path.iterdir() if q.name.startswith(".")] == []


def test_a_file_added_to_the_report_directory_during_the_run_is_kept(tmp_path, monkeypatch,
                                                                    capsys):
    from scalarlab.experiments import report as R
    d = tmp_path / "rep"

    def build(rep, **kw):
        (rep.directory / R.REPORT_NAME).write_text("new")
        rep.files.append(R.REPORT_NAME)
        if d.exists():                  # meanwhile, someone saves a file into the old one
            (d / "notes.txt").write_text("mine")
        return rep
    monkeypatch.setattr(R, "_build", build)
    assert main(["report", "--out", str(d), "--quiet"]) == 0
    assert main(["report", "--out", str(d), "--quiet"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"scalarlab report: error: --out {d}: holds notes.txt, which scalarlab "
                       "did not write; move it away or give another directory (this run's "
                       f"output was discarded; {d} is unchanged)")
    assert (d / "notes.txt").read_text() == "mine" and (d / "report.md").read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["rep"]
