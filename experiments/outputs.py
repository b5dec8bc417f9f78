"""Every file the CLI writes goes through here: atomic writes, output-path checks, and the
one JSON output schema.

Atomic writes
    :func:`atomic_path` hands out a temporary name *in the target directory* (so the final
    :func:`os.replace` is a rename within one file system, atomic on POSIX); the target is
    replaced only when the writer returned normally.  On any exception, ``KeyboardInterrupt``
    included, the temporary file is removed and the previous output stays as it was.
    :func:`atomic_directory` does the same for a directory (``report --out DIR``): the new
    directory is built beside the old one and swapped in with two renames (old -> hidden
    backup, new -> DIR), then the backup is deleted; a failure between the two renames puts
    the old directory back.

Output paths are checked when the command line is parsed (:func:`output_file`,
:func:`output_dir` are argparse ``type=`` functions), i.e. before any computation: the
suffix, an existing and writable parent directory, not an existing directory (or file).

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
import shutil
import sys
import tempfile
from pathlib import Path

from scalarlab.scalars.errors import ScalarLabError


class OutputError(ScalarLabError):
    """A requested output cannot be written (unknown suffix, missing or read-only directory,
    full disk)."""


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
        return text
    parse.__name__ = "output file"
    return parse


def output_dir(flag: str = "--out"):
    """argparse ``type=``: an output directory, checked at parse time."""
    def parse(text: str) -> str:
        try:
            check_output_dir(text, "")
        except OutputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text
    parse.__name__ = "output directory"
    return parse


# ----------------------------------------------------------------------- atomic writes
def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


@contextlib.contextmanager
def atomic_path(path, flag: str = "--out"):
    """Yield a temporary path beside ``path`` (same suffix, so writers that pick a format
    from the name still work); rename it onto ``path`` when the block ends normally.

    Any exception (``OSError`` such as ENOSPC, ``KeyboardInterrupt``, ...) removes the
    temporary file and leaves ``path`` untouched; an ``OSError`` is re-raised as
    :class:`OutputError` naming the flag and the file.
    """
    target = Path(os.fspath(path))
    parent = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{target.name}.",
                                   suffix=".tmp" + target.suffix)
    except OSError as exc:
        raise OutputError(f"{flag} {path}: cannot write: {_why(exc)}") from None
    os.close(fd)
    try:
        yield tmp
        mode = 0o666 & ~_umask()
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except OSError as exc:
        _remove(tmp)
        raise OutputError(f"{flag} {path}: cannot write: {_why(exc)}; the previous file "
                          f"(if any) is unchanged") from None
    except BaseException:
        _remove(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


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
    ``path`` (old contents removed), otherwise it is deleted and ``path`` is untouched."""
    target = Path(os.fspath(path)).absolute()
    parent = target.parent
    try:
        work = Path(tempfile.mkdtemp(dir=parent, prefix=f".{target.name}.new-"))
    except OSError as exc:
        raise OutputError(f"{flag} {path}: cannot create directory: {_why(exc)}") from None
    try:
        yield work
        os.chmod(work, 0o777 & ~_umask())
        backup = None
        if target.exists():
            backup = Path(tempfile.mkdtemp(dir=parent, prefix=f".{target.name}.old-"))
            os.rmdir(backup)
            os.rename(target, backup)
        try:
            os.rename(work, target)
        except BaseException:
            if backup is not None:
                os.rename(backup, target)
            raise
        if backup is not None:
            shutil.rmtree(backup, ignore_errors=True)
    except OSError as exc:
        shutil.rmtree(work, ignore_errors=True)
        raise OutputError(f"{flag} {path}: cannot write: {_why(exc)}; the previous directory "
                          f"(if any) is unchanged") from None
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


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
