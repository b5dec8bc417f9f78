"""Output sets: everything one command writes lands whole or not at all.

A command's outputs form one *set* (``c.csv`` + ``c.csv.meta.json`` + ``--plot c.png``;
``m.json`` + ``m.npz``; a report directory).  The set is built first, every member under
its final name inside a hidden staging directory beside its target
(``.NAME.new-PID-TOKEN/``), and published afterwards:

* a set of one file is published by one ``rename``;
* a directory (``report --out DIR``) by one ``renameat2(RENAME_EXCHANGE)`` where the file
  system has it (else by two renames under a journal, below);
* a set of several files by a **journal**: ``.NAME.commit-PID-TOKEN`` (NAME = the first
  member) is written atomically beside the first member and names every staged file and
  its target.  Its appearance is the commit point; the members are then renamed in order
  (the member that describes the others — sidecar, graph file — last), and the journal is
  removed.  A run killed before the journal exists leaves the old set (the staging
  directory is garbage); one killed after it leaves a committed set that the next run
  rolls forward from the journal.

Every temporary is named ``.NAME.(new|old|commit)-PID-TOKEN`` after its writer's process
id; the next run that writes into that directory (:func:`recover`) rolls forward the
journals and deletes the other temporaries of writers that are no longer running, and only
those.  SIGINT, SIGTERM and SIGHUP are held back while a set is published or its staging
is removed, so that an interrupt ends a run either before its commit or after its cleanup.

A directory the lab writes carries a marker file (:data:`MARKER`) listing its entries; an
existing directory is replaced only when it is empty or holds exactly what its marker
lists (:func:`check_replaceable_dir`), so nothing the lab did not write is ever deleted.
"""
from __future__ import annotations

import contextlib
import contextvars
import ctypes
import errno
import json
import os
import re
import secrets
import shutil
import signal
import sys
import threading
from pathlib import Path

from scalarlab.scalars.errors import ScalarLabError


class OutputError(ScalarLabError):
    """A requested output cannot be written (unknown suffix, missing or read-only directory,
    full disk)."""


#: The marker file inside every directory the lab writes (``report --out DIR``).
MARKER = ".scalarlab-output.json"
MARKER_FORMAT = "scalarlab-output-directory"

#: Names of the lab's temporaries: ``.NAME.new-PID-TOKEN`` (staging), ``.old-`` (a replaced
#: directory waiting for deletion), ``.commit-`` (journal; ``.tmp`` while being written).
TEMP_NAME = re.compile(r"^\.(?P<name>.+)\.(?P<kind>new|old|commit)-(?P<pid>\d+)-"
                       r"(?P<token>[0-9a-f]{12})(?P<partial>\.tmp)?$")

#: Paths published by this process (the interrupt message names them).
from .interrupts import PUBLISHED  # noqa: E402  (the run's published files)

_ACTIVE = contextvars.ContextVar("scalarlab_output_set", default=None)
_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP")
                 if hasattr(signal, n))


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _temp(target: Path, kind: str, token: str) -> Path:
    return target.parent / f".{target.name}.{kind}-{os.getpid()}-{token}"


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (another user's process counts as alive)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _fsync_dir(path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def signals_held():
    """Hold SIGINT/SIGTERM/SIGHUP back for the block (they are delivered when it ends), so
    that a publish or a cleanup is never cut in half by an interrupt."""
    if threading.current_thread() is not threading.main_thread() or \
            not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


# ------------------------------------------------------------------ directory exchange
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Swap two directories in one step (Linux ``renameat2``); False where the system or
    file system cannot (the caller then uses two renames under a journal)."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    rc = fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


# ------------------------------------------------------------------- directory markers
def read_marker(d: Path):
    """The entry list of the lab's marker in ``d``, or None if there is no valid marker."""
    try:
        doc = json.loads((d / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    files = doc.get("files") if isinstance(doc, dict) else None
    if doc.get("format") != MARKER_FORMAT or not isinstance(files, list) or \
            not all(isinstance(f, str) for f in files):
        return None
    return files


def check_replaceable_dir(p: Path, where: str) -> None:
    """Refuse to replace an existing directory that holds anything the lab did not write:
    it must be empty or hold exactly the entries its marker lists (a file its marker does
    not name was put there by someone else).  The current directory (or one above it) is
    never replaced."""
    if not p.is_dir():
        return
    real, cwd = os.path.realpath(p), os.path.realpath(os.getcwd())
    if cwd == real or cwd.startswith(real.rstrip(os.sep) + os.sep):
        raise OutputError(f"{where}: is the current directory (or holds it); give a new or "
                          "empty directory")
    try:
        entries = sorted(os.listdir(p))
    except OSError as exc:
        raise OutputError(f"{where}: cannot read the directory: {_why(exc)}") from None
    if not entries:
        return
    listed = read_marker(p)
    if listed is None:
        shown = ", ".join(entries[:3]) + (", ..." if len(entries) > 3 else "")
        raise OutputError(f"{where}: exists and was not written by scalarlab (holds {shown}; "
                          f"no {MARKER}); give a new or empty directory")
    foreign = [e for e in entries if e != MARKER and e not in listed]
    if foreign:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise OutputError(f"{where}: holds {shown}, which scalarlab did not write; move it "
                          "away or give another directory")


# ---------------------------------------------------------------------------- the set
class _Member:
    def __init__(self, target: Path, flag: str, is_dir: bool):
        self.shown = str(target)
        self.target = Path(os.path.abspath(target))
        self.flag, self.is_dir = flag, is_dir
        self.staged: Path | None = None


class OutputSet:
    """The files (or one directory) one command writes, published together.

    Use :func:`output_set`; inside its block :func:`staged_path` (and so
    :func:`outputs.atomic_path`, :func:`outputs.write_text`) hands out the staged name of
    a member.
    """

    def __init__(self, members):
        self.token = secrets.token_hex(6)
        self.members: list[_Member] = []
        for target, flag, is_dir in members:
            m = _Member(Path(os.fspath(target)), flag, is_dir)
            if any(o.target == m.target for o in self.members):
                continue
            self.members.append(m)
        if any(m.is_dir for m in self.members) and len(self.members) > 1:
            raise ValueError("a directory output is a set of its own")
        first = self.members[0].target
        self.journal = _temp(first, "commit", self.token)
        self.stages: dict[Path, Path] = {}
        self.committed = False          # the journal exists: the set must roll forward

    # the caller's view -----------------------------------------------------------
    def member(self, path):
        t = Path(os.path.abspath(os.fspath(path)))
        return next((m for m in self.members if m.target == t), None)

    def kept(self) -> str:
        """What a failed or interrupted run leaves: every member as it was."""
        same_dir = len({m.target.parent for m in self.members}) == 1

        def name(m):
            return m.target.name if same_dir else m.shown
        old = [name(m) for m in self.members if os.path.lexists(m.target)]
        new = [name(m) for m in self.members if not os.path.lexists(m.target)]
        parts = ([f"{_join(old)} {'is' if len(old) == 1 else 'are'} unchanged"] if old
                 else []) + ([f"{_join(new)} not created"] if new else [])
        return "nothing was replaced: " + "; ".join(parts)

    def stage(self, m: _Member) -> Path:
        """The staged name of member ``m`` (its staging directory made on first use)."""
        if m.staged is not None:
            return m.staged
        if m.is_dir:
            m.staged = _temp(m.target, "new", self.token)
            os.mkdir(m.staged)
            return m.staged
        parent = m.target.parent
        d = self.stages.get(parent)
        if d is None:
            d = _temp(m.target, "new", self.token)
            os.mkdir(d)
            self.stages[parent] = d
            # the back pointer: recovery finds the set's journal from any staging directory
            (d / ".journal").write_text(str(self.journal), encoding="utf-8")
        m.staged = d / m.target.name
        return m.staged

    # publishing ---------------------------------------------------------------------
    def publish(self) -> None:
        """Move the staged members onto their targets (the commit); members never
        written are left as they are."""
        written = [m for m in self.members if m.staged is not None and
                   os.path.lexists(m.staged)]
        mode = 0o666 & ~_umask()
        for m in written:
            os.chmod(m.staged, (0o777 & ~_umask()) if m.is_dir else mode)
        with signals_held():
            if len(written) == 1 and written[0].is_dir:
                self._publish_dir(written[0])
            elif len(written) == 1:
                os.replace(written[0].staged, written[0].target)
                _fsync_dir(written[0].target.parent)
            elif written:
                _write_journal(self.journal, self.token, written, list(self.stages.values()))
                self.committed = True
                for m in written:
                    os.replace(m.staged, m.target)
                for d in {m.target.parent for m in written}:
                    _fsync_dir(d)
                os.unlink(self.journal)
                self.committed = False
            # (a file published into another set's staging directory is not an output yet;
            # a file rewritten during the run, a resume state, is named once)
            PUBLISHED.extend(m.shown for m in written if m.shown not in PUBLISHED and not any(
                TEMP_NAME.match(part) for part in m.target.parent.parts))
            self.cleanup()

    def _publish_dir(self, m: _Member) -> None:
        _write_marker(m.staged, self.token)
        if os.path.lexists(m.target) and (os.path.islink(m.target)
                                          or not os.path.isdir(m.target)):
            # never swap a directory for a file (or a link) that appeared meanwhile
            raise OSError(errno.ENOTDIR, "exists and is not a directory", str(m.target))
        # checked again now: a file put into the old directory during the run stays
        try:
            check_replaceable_dir(m.target, f"{m.flag} {m.shown}")
        except OutputError as exc:
            raise OutputError(f"{exc} (this run's output was discarded; {m.shown} is "
                              "unchanged)") from None
        if not os.path.lexists(m.target):
            os.rename(m.staged, m.target)
        elif _exchange(m.staged, m.target):
            shutil.rmtree(m.staged, ignore_errors=True)      # the old directory now
        else:
            _write_journal(self.journal, self.token, [m], [])
            self.committed = True
            backup = _temp(m.target, "old", self.token)
            os.rename(m.target, backup)
            os.rename(m.staged, m.target)
            shutil.rmtree(backup, ignore_errors=True)
            os.unlink(self.journal)
            self.committed = False
        _fsync_dir(m.target.parent)

    def cleanup(self) -> None:
        if self.committed:             # a publish that failed half-way: the journal
            return                     # and the staged members finish it next run
        with signals_held():
            for d in self.stages.values():
                shutil.rmtree(d, ignore_errors=True)
            for m in self.members:
                if m.is_dir and m.staged is not None:
                    shutil.rmtree(m.staged, ignore_errors=True)
            with contextlib.suppress(OSError):
                os.unlink(str(self.journal) + ".tmp")


def _join(names) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _write_marker(d: Path, token: str) -> None:
    entries = sorted(e for e in os.listdir(d) if e != MARKER)
    doc = {"format": MARKER_FORMAT, "version": 1, "token": token, "files": entries,
           "note": "written by scalarlab; the directory is replaced as a whole by the next "
                   "run while it holds only these files"}
    with open(d / MARKER, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(doc, indent=1) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def _write_journal(path: Path, token: str, members, stages) -> None:
    doc = {"format": "scalarlab-commit", "version": 1, "pid": os.getpid(), "token": token,
           "members": [{"target": str(m.target), "staged": str(m.staged), "dir": m.is_dir}
                       for m in members],
           "stages": [str(d) for d in stages]}
    tmp = str(path) + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(doc))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)                 # the commit point
    _fsync_dir(path.parent)


def active():
    """The output set being built by this run, if any."""
    return _ACTIVE.get()


@contextlib.contextmanager
def output_set(members):
    """Build and publish one output set.

    ``members``: ``(path, flag)`` or ``(path, flag, is_dir)`` tuples, in publishing order
    (the member describing the others last).  Inside a set that already holds all of them
    this is a no-op (``write_table`` inside ``write_outputs``).  On an exception nothing is
    published: the staging is removed and an ``OSError`` becomes an :class:`OutputError`
    saying what was kept.
    """
    members = [(*m, False) if len(m) == 2 else tuple(m) for m in members if m[0]]
    outer = _ACTIVE.get()
    if outer is not None and all(outer.member(p) is not None for p, *_ in members):
        yield outer
        return
    if not members:
        yield None
        return
    s = OutputSet(members)
    for d in {m.target.parent for m in s.members}:
        recover(d)
    reset = _ACTIVE.set(s)
    try:
        try:
            yield s
        finally:
            _ACTIVE.reset(reset)
        s.publish()
    except OutputError:
        s.cleanup()
        raise
    except OSError as exc:
        m = s.members[0]
        if s.committed:
            raise OutputError(f"{m.flag} {m.shown}: publishing stopped half-way: "
                              f"{_why(exc)}; the next scalarlab run that writes there "
                              f"completes it from {s.journal}") from None
        s.cleanup()
        what = "directory" if m.is_dir else "file"
        raise OutputError(f"{m.flag} {m.shown}: cannot write the {what}: {_why(exc)}; "
                          f"{s.kept()}") from None
    except BaseException:
        s.cleanup()
        raise


def staged_path(path, flag: str):
    """The staged name of ``path`` in the active set (None outside a set or if ``path``
    is not one of its members)."""
    s = _ACTIVE.get()
    m = s.member(path) if s is not None else None
    if m is None:
        return None
    try:
        return s.stage(m)
    except OSError as exc:
        raise OutputError(f"{flag} {m.shown}: cannot write: {_why(exc)}; {s.kept()}") \
            from None


def kept_message(path) -> str:
    s = _ACTIVE.get()
    return s.kept() if s is not None else "nothing was replaced"


# ---------------------------------------------------------------------------- recovery
def recover(directory) -> list[str]:
    """Finish or undo what interrupted runs left in ``directory``: every journal of a
    writer that is no longer running is rolled forward (its set was committed), every
    other temporary of such a writer is deleted (its set was not).  Returns one line per
    set for the user (also printed on stderr)."""
    d = Path(directory)
    notes = []
    for kind in ("commit", "new", "old"):        # journals first: they decide the rest
        try:
            names = sorted(os.listdir(d))
        except OSError:
            return notes
        for name in names:
            mt = TEMP_NAME.match(name)
            if not mt or mt["kind"] != kind or _alive(int(mt["pid"])):
                continue
            p = d / name
            if not os.path.lexists(p):
                continue
            with signals_held():
                note = _recover_one(p, mt)
            if note:
                notes.append(note)
    for n in notes:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            print(f"scalarlab: {n}", file=sys.stderr)
    return notes


def _recover_one(p: Path, mt) -> str | None:
    pid = mt["pid"]
    if mt["kind"] == "commit" and mt["partial"]:
        _rm(p)                                    # a journal never finished: no commit
        return None
    if mt["kind"] == "commit":
        done = roll_forward(p)
        if done is None:
            return f"left {p}: not a readable scalarlab journal"
        return (f"completed the interrupted write of {_join(done)} (process {pid})" if done
                else None)
    if mt["kind"] == "new" and p.is_dir() and (p / ".journal").is_file():
        with contextlib.suppress(OSError):
            j = Path((p / ".journal").read_text(encoding="utf-8").strip())
            jm = TEMP_NAME.match(j.name)
            if jm and jm["kind"] == "commit" and jm["token"] == mt["token"] and j.exists():
                done = roll_forward(j)
                if done is not None:
                    return (f"completed the interrupted write of {_join(done)} "
                            f"(process {pid})") if done else None
    if mt["kind"] in ("new", "old"):
        journal = p.parent / f".{mt['name']}.commit-{pid}-{mt['token']}"
        if journal.exists():
            return None                           # the journal pass handles it
    _rm(p)
    return f"removed {p.name}, left by an interrupted run (process {pid}); nothing there " \
           f"was published"


def _rm(p: Path) -> None:
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            os.unlink(p)


def roll_forward(journal: Path):
    """Publish the rest of a committed set from its journal (idempotent: a member already
    moved is skipped); returns the targets it moved, or None if the journal is not one of
    the lab's."""
    try:
        doc = json.loads(Path(journal).read_text(encoding="utf-8"))
        token = doc["token"]
        members = [(Path(m["target"]), Path(m["staged"]), bool(m["dir"]))
                   for m in doc["members"]]
        stages = [Path(s) for s in doc["stages"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if doc.get("format") != "scalarlab-commit":
        return None
    ok = all(_ours(s, token) or _ours(s.parent, token) for _, s, _ in members)
    if not ok or not all(_ours(s, token) for s in stages):
        return None
    done = []
    for target, staged, is_dir in members:
        if is_dir:
            backup = target.parent / f".{target.name}.old-{doc.get('pid')}-{token}"
            if staged.is_dir():
                if os.path.lexists(target) and not os.path.lexists(backup):
                    os.rename(target, backup)
                os.rename(staged, target)
                done.append(target.name)
            shutil.rmtree(backup, ignore_errors=True)
        elif os.path.lexists(staged):
            os.replace(staged, target)
            done.append(target.name)
    for t in {t.parent for t, _, _ in members}:
        _fsync_dir(t)
    _rm(Path(journal))
    for s in stages:
        shutil.rmtree(s, ignore_errors=True)
    return done


def _ours(p: Path, token: str) -> bool:
    mt = TEMP_NAME.match(p.name)
    return bool(mt) and mt["token"] == token and mt["kind"] == "new"
