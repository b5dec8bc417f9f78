"""Every file the CLI writes goes through here: atomic writes, output-path checks, and the
one JSON output schema.

Atomic writes
    Everything one command writes is one *output set* (:mod:`experiments.output_sets`):
    built under hidden staging names beside the targets and published together (one
    rename, one directory exchange, or a journal that the next run rolls forward), so a
    kill at any instant leaves the old set or the new one.  :func:`atomic_path`,
    :func:`write_text` and :func:`atomic_directory` write into the active set
    (:func:`output_set`), or form a set of their own.

Output paths are checked when the command line is parsed (:func:`output_file`,
:func:`output_dir` are argparse ``type=`` functions), i.e. before any computation: the
suffix, an existing and writable parent directory, not an existing directory (or file), a
directory only if it is empty or the lab's own; then :func:`prepare` checks the sidecars,
refuses an output that is an input and recovers what interrupted runs left.

Schema
    Every JSON output is ``{"format": "scalarlab-<kind>", "version": N, "meta": {...},
    "rows": [...]}`` (or ``"tables": {...}``); floats are written by :func:`json.dumps`
    (shortest round-trip ``repr``), NaN as ``null`` and infinities as ``"inf"``/``"-inf"``.
    ``meta`` always carries :func:`run_meta` (versions of scalarlab, numpy, gmpy2, mpmath,
    pandas and Python, and the command line); commands add graph (:func:`graph_meta`: name,
    path, SHA-256), inputs/centre, seed, samples and contexts.  Markdown files start with
    the same meta as a bullet list; a CSV file gets the meta as a sidecar
    ``FILE.csv.meta.json`` (the JSON document without rows), so the CSV itself stays a
    plain table that any reader parses.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import sys
from pathlib import Path

from . import output_sets
from .output_sets import OutputError, output_set  # noqa: F401  (re-exported)


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


# --------------------------------------------------------------------- path validation
def check_output_file(path, flag: str = "--out", suffixes=None) -> Path:
    """Refuse an output file name that cannot be written, before any computation."""
    p = Path(os.fspath(path))
    where = f"{flag} {path}".strip()
    if not str(path):
        raise OutputError(f"{flag or 'output'}: empty file name")
    if p.is_dir():
        raise OutputError(f"{where}: is a directory")
    if os.path.lexists(p) and not (p.is_file() or p.is_symlink()):
        raise OutputError(f"{where}: exists and is not a regular file")
    if suffixes is not None and p.suffix.lower() not in suffixes:
        raise OutputError(f"{where}: unknown file type {p.suffix or '(none)'!r}; use "
                          f"one of {', '.join(suffixes)}")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise OutputError(f"{where}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{where}: directory {parent} is not writable")
    if p.exists() and not os.access(p, os.W_OK) and not os.access(parent, os.W_OK):
        raise OutputError(f"{where}: not writable")
    return p


def check_output_dir(path, flag: str = "--out") -> Path:
    """Refuse an output directory that cannot be created or replaced."""
    p = Path(os.fspath(path))
    where = f"{flag} {path}".strip()
    if not str(path):
        raise OutputError(f"{flag or 'output'}: empty directory name")
    if p.exists() and not p.is_dir():
        raise OutputError(f"{where}: exists and is not a directory")
    parent = p.absolute().parent
    if not parent.is_dir():
        raise OutputError(f"{where}: parent directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{where}: parent directory {parent} is not writable")
    output_sets.check_replaceable_dir(p, where)
    return p


def output_file(*suffixes: str, flag: str = "--out"):
    """argparse ``type=``: an output file name with one of ``suffixes`` (any if none),
    checked at parse time; the value stays a ``str``."""
    allowed = tuple(s.lower() for s in suffixes) or None

    def parse(text: str) -> str:
        try:
            check_output_file(text, "", allowed)
        except OutputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return OutputPath(text)
    parse.__name__ = "output file"
    return parse


def output_dir(flag: str = "--out"):
    """argparse ``type=``: an output directory, checked at parse time."""
    def parse(text: str) -> str:
        try:
            check_output_dir(text, "")
        except OutputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return OutputDirPath(text)
    parse.__name__ = "output directory"
    return parse


# ----------------------------------------------------------------------- atomic writes
def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


@contextlib.contextmanager
def atomic_path(path, flag: str = "--out"):
    """Yield the staged name of ``path`` (same file name, in a hidden staging directory
    beside it, so writers that pick a format from the name still work); it is published
    when the block ends normally -- at once, or with the rest of the active
    :func:`output_set` when ``path`` is one of its members.

    Any exception (``OSError`` such as ENOSPC, ``KeyboardInterrupt``, SIGTERM, ...) leaves
    ``path`` untouched; an ``OSError`` is re-raised as :class:`OutputError` naming the
    flag, the file and what was kept.
    """
    staged = output_sets.staged_path(path, flag)
    if staged is None:
        with output_set([(path, flag)]):
            with atomic_path(path, flag) as tmp:
                yield tmp
        return
    try:
        yield str(staged)
    except OSError as exc:
        _remove(str(staged))
        raise OutputError(f"{flag} {path}: cannot write: {_why(exc)}; "
                          f"{output_sets.kept_message(path)}") from None
    except BaseException:
        _remove(str(staged))
        raise


def write_text(path, text: str, flag: str = "--out") -> Path:
    """Write ``text`` to ``path`` atomically (flushed and fsynced before the rename)."""
    with atomic_path(path, flag) as tmp:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
    return Path(path)


def write_bytes(path, data: bytes, flag: str = "--out") -> Path:
    with atomic_path(path, flag) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    return Path(path)


@contextlib.contextmanager
def atomic_directory(path, flag: str = "--out"):
    """Yield a fresh directory beside ``path``; when the block ends normally it replaces
    ``path`` in one step (:mod:`experiments.output_sets`: the old contents are removed,
    the lab's marker file is added), otherwise it is deleted and ``path`` is untouched.
    An existing ``path`` must be empty or one the lab wrote
    (:func:`output_sets.check_replaceable_dir`)."""
    check_output_dir(path, flag)
    with output_set([(path, flag, True)]) as s:
        yield s.stage(s.members[0])


# ------------------------------------------------------------------ checks before work
class OutputPath(str):
    """An output path argument (the value of an ``output_file``/``output_dir`` flag):
    :func:`prepare` finds the command's outputs by this type."""
    is_dir = False


class OutputDirPath(OutputPath):
    is_dir = True


def companions(path, args=None) -> list[str]:
    """The files written together with output ``path``: a CSV table's meta sidecar; the
    payload ``.npz`` beside a graph file written with ``--npz`` (``scalarlab import``)."""
    text = str(path)
    if text.lower().endswith(".csv"):
        return [text + ".meta.json"]
    if getattr(args, "npz", None) is True and text.lower().endswith(".json"):
        return [os.path.splitext(text)[0] + ".npz"]
    return []


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def _input_paths(args) -> list[str]:
    """Every argument value that names an existing file or directory and is not an
    output: the command's inputs (graph, --box, --input-file, --payload, models ...)."""
    found = []

    def visit(v):
        if isinstance(v, OutputPath):
            return
        if isinstance(v, (list, tuple)):
            for t in v:
                visit(t)
        elif isinstance(v, (str, os.PathLike)):
            for cand in {os.fspath(v), os.fspath(v).split("#", 1)[0]}:
                if cand and os.path.exists(cand):
                    found.append(cand)
    for k, v in vars(args).items():
        if not k.startswith("_"):
            visit(v)
    return found


def check_not_input(out, inputs, flag: str = "--out", is_dir: bool = False) -> None:
    """Refuse an output that is one of the inputs (same file after symlinks, ``..``,
    hard links) or, for a directory output, holds one."""
    where = f"{flag} {out}"
    for inp in inputs:
        if os.path.exists(out):
            with contextlib.suppress(OSError):
                if os.path.samefile(out, inp):
                    raise OutputError(f"{where}: is the input {inp}; writing it would "
                                      "destroy the input")
        if is_dir:
            root = os.path.realpath(out).rstrip(os.sep) + os.sep
            if os.path.realpath(inp).startswith(root):
                raise OutputError(f"{where}: holds the input {inp}; replacing the "
                                  "directory would delete it")


def prepare(args) -> str | None:
    """Everything about a command's outputs that can be checked before its work: each
    output (and its sidecar) is writable and not a directory, no output is an input, a
    PNG can be drawn; stale temporaries of interrupted runs in the output directories are
    rolled forward or removed.  Returns a usage error message (the caller exits 2)."""
    outs = [(_flag(k), v) for k, v in vars(args).items()
            if isinstance(v, OutputPath) and not k.startswith("_")]
    if not outs:
        return None
    inputs = _input_paths(args)
    try:
        for flag, out in outs:
            if out.is_dir:
                check_output_dir(out, flag)
                check_not_input(out, inputs, flag, is_dir=True)
                continue
            for path in [out, *companions(out, args)]:
                check_output_file(path, flag)
                check_not_input(path, inputs, flag)
    except OutputError as exc:
        return str(exc)
    if any(out.lower().endswith(".png") for _, out in outs):
        check_plot_backend()
    for d in {os.path.dirname(os.path.abspath(out)) for _, out in outs}:
        output_sets.recover(d)
    return None


def check_plot_backend() -> None:
    """Refuse ``--plot`` before the work when matplotlib's Agg backend cannot be loaded."""
    try:
        import matplotlib
        matplotlib.use("Agg", force=True)
        import matplotlib.backends.backend_agg  # noqa: F401
    except Exception as exc:
        raise OutputError(f"--plot: matplotlib cannot draw PNG files here "
                          f"({type(exc).__name__}: {' '.join(str(exc).split())}); "
                          "pip install matplotlib") from None


# ---------------------------------------------------------------------------- schema
def versions() -> dict:
    import gmpy2
    import mpmath
    import numpy
    import pandas
    try:
        from importlib.metadata import version
        own = version("scalarlab")
    except Exception:                                         # pragma: no cover
        own = "unknown"
    return {"scalarlab": own, "numpy": numpy.__version__, "gmpy2": gmpy2.version(),
            "mpmath": mpmath.__version__, "pandas": pandas.__version__,
            "python": sys.version.split()[0]}


#: The command line of the running ``scalarlab`` call (set by ``experiments.cli.main``).
COMMAND_LINE: list = []


def run_meta() -> dict:
    """What every output's meta records about the run itself."""
    return {"versions": versions(),
            "command": " ".join(["scalarlab", *COMMAND_LINE]) if COMMAND_LINE else None}


def sha256_file(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def graph_meta(spec, g=None, payload=None) -> dict:
    """``{"name", "path", "sha256"}`` of a GRAPH argument: a file's bytes are hashed; a
    built-in graph's canonical graph-file text (``graph.dumps``) is."""
    if spec is not None and os.path.isfile(os.fspath(spec)):
        return {"name": Path(spec).name, "path": str(Path(spec).absolute()),
                "sha256": sha256_file(spec)}
    digest = None
    if g is not None:
        from scalarlab.graph import dumps
        with contextlib.suppress(Exception):
            digest = hashlib.sha256(dumps(g, payload).encode()).hexdigest()
    return {"name": spec or "six-node", "path": None, "sha256": digest}


def json_safe(v):
    """A JSON-safe value: NaN -> null, +-inf -> "inf"/"-inf", numpy -> Python; floats stay
    floats (json writes their shortest round-trip repr)."""
    import numpy as np
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, (float, np.floating)):
        f = float(v)
        if math.isnan(f):
            return None
        if math.isinf(f):
            return "inf" if f > 0 else "-inf"
        return f
    if isinstance(v, dict):
        return {str(k): json_safe(t) for k, t in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_safe(t) for t in v]
    if isinstance(v, np.ndarray):
        return json_safe(v.tolist())
    if isinstance(v, Path):
        return str(v)
    try:
        import pandas as pd
        if v is pd.NA:
            return None
    except ImportError:                                       # pragma: no cover
        pass
    return v


def document(kind: str, meta: dict, *, rows=None, tables=None, version: int = 1,
             **extra) -> dict:
    """The one output schema: ``{"format", "version", "meta", "rows" | "tables", ...}``;
    :func:`run_meta` is merged into ``meta`` (the command's own keys win)."""
    m = {**run_meta(), **(meta or {})}
    doc = {"format": f"scalarlab-{kind}", "version": version, "meta": json_safe(m)}
    if rows is not None:
        doc["rows"] = json_safe(rows)
    if tables is not None:
        doc["tables"] = json_safe(tables)
    for k, v in extra.items():
        doc[k] = json_safe(v)
    return doc


def dumps(doc: dict) -> str:
    return json.dumps(doc, indent=2, allow_nan=False)


def print_document(doc: dict) -> None:
    """Print a JSON document on stdout (the caller's ``--json``)."""
    print(dumps(doc))


def note(text: str, *, to_stderr: bool) -> None:
    """A "wrote FILE" line: on stderr when stdout carries JSON, else on stdout."""
    print(text, file=sys.stderr if to_stderr else sys.stdout)
