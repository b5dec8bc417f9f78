"""Saving and loading the whole training state: ONE file, ``<stem>.npz``.

What reproduces the next update: parameters, buffers, the mode, the step count, the
optimizer (kind, hyperparameters, step, slots), the generator state (dropout draws) and
the loader position.  The file is a zip archive (``numpy.load`` opens it) holding one
``.npy`` member per array (no pickle) and ``meta.json``: everything else and the list of
entries.  One file, because a checkpoint must change with ONE rename: the new archive is
written complete under a temporary name beside the target and renamed over it, so at
every instant the path holds the old checkpoint or the new one (a save killed midway
leaves the old one plus a temporary that the next save removes).

Values are stored exactly: float64 and binary-format contexts as float64 arrays (their
values are float64 numbers), object contexts (rational, mpmath, fp32-real) as strings
``p/q`` of the exact rational value, converted back by the context (exact, since the value
is representable there).  Each entry records its shape and a SHA-256 of its bytes.

``load`` checks every field of the metadata (types, ranges, shapes, dtypes, the nesting)
and every array against it before it touches the session: the new state is built aside
and swapped in at the end by assignments that cannot fail, so a refused file leaves the
session (and the loader) exactly as it was.  Every refusal is a one-line ``TapeError``
naming the file and the field.  Version-1 checkpoints (``<stem>.npz`` + ``<stem>.json``)
are still read.
"""
from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import re
import secrets
import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np

from scalarlab.scalars.base import to_fraction
from scalarlab.scalars.errors import ContextError

from ..errors import TapeError

FORMAT = "scalarlab-train-checkpoint"
VERSION = 2
META_MEMBER = "meta.json"
# The metadata is a few hundred bytes per entry; a bigger member is not a checkpoint of
# this lab, and is refused before it is read.
META_MAX_BYTES = 64 << 20
# Step counts, seeds and positions are int64-sized: anything larger is a corrupt file (a
# step count near 2**63 would also make Adam's exact bias corrections unaffordable).
INT_MAX = 2 ** 63 - 1
ENCODINGS = ("float64", "exact")
_SHA256 = re.compile(r"[0-9a-f]{64}\Z")
# what a damaged archive makes zipfile raise (a flipped byte can select an unknown
# compression method or zip version, a bad offset a struct or zlib error)
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError,
               KeyError, IndexError, NotImplementedError, struct.error, zlib.error)
_TEMP = re.compile(r"\.(?P<name>.+)\.(?P<pid>\d+)\.[0-9a-f]{8}\.tmp\Z")


def path_of(path) -> Path:
    """The checkpoint file for a path given with or without ``.npz``."""
    p = Path(path)
    stem = p.with_suffix("") if p.suffix == ".npz" else p
    return stem.with_name(stem.name + ".npz")


_to_exact_str = np.frompyfunc(lambda v: str(to_fraction(v)), 1, 1)


def _encode(ctx, value) -> tuple:
    arr = np.asarray(value)
    if arr.dtype == object:
        try:
            out = np.asarray(_to_exact_str(arr), dtype=str) if arr.size else \
                np.zeros(arr.shape, dtype="<U1")
        except ContextError as exc:
            raise TapeError(f"checkpoint: a value of context {ctx.name} has no exact rational "
                            f"form: {exc}") from None
        return out.reshape(arr.shape), "exact"
    if arr.dtype == np.float32:
        # binary32 storage: widened exactly, saved as float64 like every float context
        arr = np.asarray(ctx.to_float64(value), dtype=np.float64)
    if arr.dtype != np.float64:
        raise TapeError(f"checkpoint: context {ctx.name} holds {arr.dtype} values; only "
                        f"float64 and exact object values can be stored")
    return arr, "float64"


def _digest(arr: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(arr).tobytes()).hexdigest()


def _entries(session) -> dict:
    """``{entry name: context value}`` in a fixed order."""
    out = {}
    for n, v in session.params.items():
        out[f"param/{n}"] = v
    for n, v in session.buffers.items():
        out[f"buffer/{n}"] = v
    for slot, vals in session.optimizer.slots.items():
        for n in session.params:
            if n in vals:
                out[f"optim/{slot}/{n}"] = vals[n]
    return out


# ------------------------------------------------------------------------------ save
def save(path, session, loader=None) -> Path:
    """Write the checkpoint file; returns its path (``<stem>.npz``).

    The archive is written complete under a temporary name in the target's folder,
    flushed to disk, and renamed over the target in one step; a failure or an interrupt
    removes the temporary, and a kill leaves it for the next save to remove."""
    target = path_of(path)
    ctx = session.ctx
    arrays, meta_entries = {}, {}
    for i, (name, value) in enumerate(_entries(session).items()):
        arr, enc = _encode(ctx, value)
        key = f"e{i}"
        arrays[key] = arr
        meta_entries[name] = {"key": key, "shape": list(arr.shape), "encoding": enc,
                              "sha256": _digest(arr)}
    opt = session.optimizer.state_dict()
    meta = {
        "format": FORMAT, "version": VERSION, "context": ctx.name,
        "execution": session.execution, "mode": session.mode, "steps": session.steps,
        "seed": session.seed,
        "state": [[n, list(s)] for n, s in session.state_shapes()],
        "optimizer": {"kind": opt["kind"], "hyper": opt["hyper"], "step": opt["step"],
                      "slots": sorted(opt["slots"])},
        "rng": session.rng.bit_generator.state,
        "loader": None if loader is None else loader.position,
        "entries": meta_entries,
    }
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TapeError(f"checkpoint {target}: cannot create its folder: "
                        f"{exc.strerror or exc}") from None
    _remove_stale_temporaries(target)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "xb") as fh:
            with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
                zf.writestr(META_MEMBER, json.dumps(meta, indent=1, sort_keys=True))
                for key, arr in arrays.items():
                    with zf.open(key + ".npy", "w", force_zip64=True) as member:
                        np.lib.format.write_array(member, arr, allow_pickle=False)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):          # full disk, no permission, a directory there
            kept = ("the previous checkpoint is unchanged" if target.is_file()
                    else "nothing was written")
            raise TapeError(f"checkpoint {target}: cannot save: "
                            f"{exc.strerror or exc}; {kept}") from None
        raise
    _sync_dir(target.parent)
    return target


def _sync_dir(folder: Path) -> None:
    """Make the rename durable (a crash of the machine keeps old or new, not nothing)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:                      # pragma: no cover - platforms without dir fds
        return
    try:
        os.fsync(fd)
    except OSError:                      # pragma: no cover - file systems that refuse
        pass
    finally:
        os.close(fd)


def _remove_stale_temporaries(target: Path) -> None:
    """Delete ``.<name>.<pid>.<hex>.tmp`` files of this checkpoint left by a save that was
    killed: those whose process no longer runs (a running one may be saving now)."""
    try:
        names = os.listdir(target.parent)
    except OSError:
        return
    for n in names:
        m = _TEMP.match(n)
        if m is None or m["name"] != target.name:
            continue
        pid = int(m["pid"])
        if pid != os.getpid() and _alive(pid):
            continue
        with contextlib.suppress(OSError):
            os.unlink(target.parent / n)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True
    return True


# ------------------------------------------------------------------------------ load
class _Bad(Exception):
    """A refused field: ``(dotted field name, what is wrong)``."""


def _show(v) -> str:
    """A value for a one-line message: short, whatever the file holds."""
    if isinstance(v, (dict, list)):
        return f"a {'JSON object' if isinstance(v, dict) else 'list'}"
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 10 ** 30:
        return f"an integer of {len(str(abs(v)))} digits"
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def _int(v, field, lo=0, hi=INT_MAX) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise _Bad(field, f"must be an integer, got {_show(v)}")
    if not lo <= v <= hi:
        raise _Bad(field, f"must be an integer in [{_bound(lo)}, {_bound(hi)}], got "
                          f"{_show(v)}")
    return v


def _bound(b: int) -> str:
    """``2^63-1`` rather than 19 digits in a message."""
    if abs(b) < 2 ** 20:
        return str(b)
    sign, n = ("-", -b) if b < 0 else ("", b)
    return f"{sign}2^{n.bit_length()}-1" if (n + 1) & n == 0 else f"{sign}2^{n.bit_length() - 1}"


def _str(v, field, choices=None) -> str:
    if not isinstance(v, str):
        raise _Bad(field, f"must be a string, got {_show(v)}")
    if choices is not None and v not in choices:
        raise _Bad(field, f"is {_show(v)}, expected one of {', '.join(choices)}")
    return v


def _obj(v, field, keys) -> dict:
    if not isinstance(v, dict):
        raise _Bad(field, f"must be a JSON object, got {_show(v)}")
    for k in keys:
        if k not in v:
            raise _Bad(f"{field}.{k}" if field else k, "is missing")
    return v


def _list(v, field) -> list:
    if not isinstance(v, list):
        raise _Bad(field, f"must be a list, got {_show(v)}")
    return v


def _shape(v, field) -> list:
    _list(v, field)
    if len(v) > 32:
        raise _Bad(field, f"has {len(v)} dimensions (at most 32)")
    return [_int(d, f"{field}[{i}]") for i, d in enumerate(v)]


def _check_meta(meta) -> dict:
    """Every field's type and range (the checks that need no session)."""
    top = ("format", "version", "context", "execution", "mode", "steps", "seed", "state",
           "optimizer", "rng", "loader", "entries")
    _obj(meta, "", top)
    _str(meta["context"], "context")
    _str(meta["execution"], "execution")
    _str(meta["mode"], "mode", ("train", "eval"))
    _int(meta["steps"], "steps")
    _int(meta["seed"], "seed", -INT_MAX - 1)
    for i, e in enumerate(_list(meta["state"], "state")):
        if not isinstance(e, list) or len(e) != 2:
            raise _Bad(f"state[{i}]", f"must be a [name, shape] pair, got {_show(e)}")
        _str(e[0], f"state[{i}][0]")
        _shape(e[1], f"state[{i}][1]")
    mo = _obj(meta["optimizer"], "optimizer", ("kind", "hyper", "step", "slots"))
    _str(mo["kind"], "optimizer.kind")
    for k, v in _obj(mo["hyper"], "optimizer.hyper", ()).items():
        _str(v, f"optimizer.hyper.{k}")
    _int(mo["step"], "optimizer.step")
    for i, s in enumerate(_list(mo["slots"], "optimizer.slots")):
        _str(s, f"optimizer.slots[{i}]")
    rng = _obj(meta["rng"], "rng", ("bit_generator", "state"))
    _str(rng["bit_generator"], "rng.bit_generator")
    if rng["bit_generator"] == "PCG64":
        _obj(rng, "rng", ("has_uint32", "uinteger"))
        st = _obj(rng["state"], "rng.state", ("state", "inc"))
        _int(st["state"], "rng.state.state", 0, 2 ** 128 - 1)
        _int(st["inc"], "rng.state.inc", 0, 2 ** 128 - 1)
        _int(rng["has_uint32"], "rng.has_uint32", 0, 1)
        _int(rng["uinteger"], "rng.uinteger", 0, 2 ** 32 - 1)
    if meta["loader"] is not None:
        lo = _obj(meta["loader"], "loader", ("epoch", "pos", "seed", "batch_size", "shuffle",
                                             "size"))
        for k in ("epoch", "pos", "size"):
            _int(lo[k], f"loader.{k}")
        _int(lo["seed"], "loader.seed", -INT_MAX - 1)
        _int(lo["batch_size"], "loader.batch_size", 1)
        if not isinstance(lo["shuffle"], bool):
            raise _Bad("loader.shuffle", f"must be true or false, got {_show(lo['shuffle'])}")
        if lo["pos"] > lo["size"]:
            raise _Bad("loader.pos", f"is {lo['pos']}, past the data set's size {lo['size']}")
    keys = set()
    for name, e in _obj(meta["entries"], "entries", ()).items():
        f = f"entries.{name}"
        _obj(e, f, ("key", "shape", "encoding", "sha256"))
        key = _str(e["key"], f"{f}.key")
        if not re.fullmatch(r"e\d{1,9}", key) or key in keys:
            raise _Bad(f"{f}.key", f"is {_show(key)}, expected a unique e<number>")
        keys.add(key)
        _shape(e["shape"], f"{f}.shape")
        _str(e["encoding"], f"{f}.encoding", ENCODINGS)
        if not isinstance(e["sha256"], str) or not _SHA256.match(e["sha256"]):
            raise _Bad(f"{f}.sha256", f"must be 64 hex digits, got {_show(e['sha256'])}")
    return meta


def _parse_meta(raw: bytes, where) -> dict:
    if len(raw) > META_MAX_BYTES:
        raise TapeError(f"checkpoint {where}: metadata is larger than {META_MAX_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TapeError(f"checkpoint {where}: metadata is not UTF-8 text (byte "
                        f"{exc.start})") from None
    try:
        meta = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TapeError(f"checkpoint {where}: metadata is not valid JSON (truncated?): "
                        f"{exc.msg} at line {exc.lineno}") from None
    except RecursionError:
        raise TapeError(f"checkpoint {where}: metadata nests too deeply to be a "
                        f"checkpoint") from None
    except ValueError as exc:        # e.g. an integer literal past Python's digit limit
        raise TapeError(f"checkpoint {where}: metadata is not usable JSON: "
                        f"{' '.join(str(exc).split())[:160]}") from None
    if not isinstance(meta, dict):
        raise TapeError(f"checkpoint {where}: not a {FORMAT} file (the metadata is "
                        f"{_show(meta)}, not a JSON object)")
    if meta.get("format") != FORMAT:
        raise TapeError(f"checkpoint {where}: not a {FORMAT} file (field 'format' is "
                        f"{_show(meta.get('format', 'missing'))})")
    return meta


def _open_archive(npz_path: Path):
    try:
        return zipfile.ZipFile(npz_path)
    except FileNotFoundError:
        raise TapeError(f"checkpoint {npz_path}: file not found") from None
    except IsADirectoryError:
        raise TapeError(f"checkpoint {npz_path}: is a directory, not a checkpoint "
                        f"file") from None
    except _ZIP_ERRORS as exc:
        raise TapeError(f"checkpoint {npz_path}: cannot open the archive (truncated or "
                        f"not an .npz): {' '.join(str(exc).split())[:160]}") from None


def _read_meta(zf, npz_path: Path) -> tuple:
    """``(metadata, where)`` from the archive, or from ``<stem>.json`` (version 1)."""
    if META_MEMBER in zf.NameToInfo:
        where = f"{npz_path} ({META_MEMBER})"
        info = zf.getinfo(META_MEMBER)
        if info.file_size > META_MAX_BYTES:
            raise TapeError(f"checkpoint {where}: metadata is larger than {META_MAX_BYTES} "
                            f"bytes")
        try:
            with zf.open(info) as fh:
                raw = fh.read(META_MAX_BYTES + 1)
        except _ZIP_ERRORS as exc:
            raise TapeError(f"checkpoint {where}: cannot read the metadata (truncated or "
                            f"corrupt): {' '.join(str(exc).split())[:160]}") from None
        meta, version = _parse_meta(raw, where), VERSION
    else:
        json_path = npz_path.with_suffix(".json")
        where = str(json_path)
        try:
            with open(json_path, "rb") as fh:
                raw = fh.read(META_MAX_BYTES + 1)
        except FileNotFoundError:
            raise TapeError(f"checkpoint {npz_path}: the archive holds no {META_MEMBER} and "
                            f"there is no version-1 metadata file {json_path.name}") from None
        except OSError as exc:
            raise TapeError(f"checkpoint {json_path}: cannot read the metadata: "
                            f"{exc.strerror or exc}") from None
        meta, version = _parse_meta(raw, where), 1
    if meta.get("version") != version or isinstance(meta.get("version"), bool):
        raise TapeError(f"checkpoint {where}: version {_show(meta.get('version'))} is not "
                        f"supported here (a single-file checkpoint is version {VERSION}, "
                        f"an .npz + .json pair version 1)")
    try:
        _check_meta(meta)
    except _Bad as bad:
        field, what = bad.args
        raise TapeError(f"checkpoint {where}: field '{field}' {what}") from None
    return meta, where


def load(path, session, loader=None) -> dict:
    """Restore ``session`` (and ``loader``) from the checkpoint; returns the metadata.

    Nothing is changed unless every check passes: the new state is built aside and
    swapped in at the end."""
    npz_path = path_of(path)
    with _open_archive(npz_path) as zf:
        meta, where = _read_meta(zf, npz_path)
        ctx = session.ctx
        opt = session.optimizer
        _check_against_session(meta, where, session, loader)
        values = _read_arrays(zf, npz_path, meta["entries"], ctx)

    params, buffers = {}, {}
    slots = {s: {} for s in opt.slot_names}
    for name, v in values.items():            # names checked by _check_against_session
        kind, _, rest = name.partition("/")
        if kind == "optim":
            slot, _, pname = rest.partition("/")
            slots[slot][pname] = v
        else:
            (params if kind == "param" else buffers)[rest] = v
    for n, v in list(params.items()) + list(buffers.items()):
        have = tuple(ctx.shape(session.params.get(n, session.buffers.get(n))))
        if tuple(ctx.shape(v)) != have:
            raise TapeError(f"checkpoint {npz_path}: entry {n!r} has shape "
                            f"{list(ctx.shape(v))}, the session's has {list(have)}")

    # Stage the optimizer, the loader and the generator on copies: their own checks run
    # there, so a refusal still leaves the originals untouched.
    mo = meta["optimizer"]
    staged_opt = copy.copy(opt)
    staged_loader = copy.copy(loader) if loader is not None else None
    rng = type(session.rng.bit_generator)()
    try:
        staged_opt.load_state_dict({"kind": mo["kind"], "hyper": mo["hyper"],
                                    "step": mo["step"], "slots": slots})
        if staged_loader is not None:
            staged_loader.set_position(meta["loader"])
    except TapeError as exc:
        raise TapeError(f"checkpoint {where}: {exc}") from None
    try:
        if type(rng).__name__ != meta["rng"]["bit_generator"]:
            raise ValueError(f"bit generator {meta['rng']['bit_generator']!r}, the session "
                             f"uses {type(rng).__name__}")
        rng.state = meta["rng"]
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
        raise TapeError(f"checkpoint {where}: field 'rng' is not a usable generator state: "
                        f"{' '.join(str(exc).split())[:160]}") from None

    # The swap: plain assignments of values checked above, nothing here can raise.
    if loader is not None:
        loader.set_position(meta["loader"])      # passed the same checks on the copy
    opt.step_count, opt.slots = staged_opt.step_count, staged_opt.slots
    session.params.update(params)
    session.buffers.update(buffers)
    session.rng.bit_generator.state = rng.state
    session.mode = meta["mode"]
    session.steps = meta["steps"]
    return meta


def _check_against_session(meta, where, session, loader) -> None:
    """The metadata against the session: context, state names and shapes, optimizer."""
    ctx = session.ctx
    if meta["context"] != ctx.name:
        raise TapeError(f"checkpoint {where}: saved in context {_show(meta['context'])}, the "
                        f"session computes in {ctx.name}")
    want = [[n, list(s)] for n, s in session.state_shapes()]
    got = {e[0]: e[1] for e in meta["state"]}
    for n, s in want:
        if n not in got:
            raise TapeError(f"checkpoint {where}: state entry {n!r} is missing "
                            f"(checkpoint has: {', '.join(got)[:200]})")
        if got[n] != s:
            raise TapeError(f"checkpoint {where}: state entry {n!r} has shape {got[n]}, "
                            f"the session's has shape {s}")
    extra = [n for n in got if n not in dict(want)]
    if extra:
        raise TapeError(f"checkpoint {where}: state entry {_show(extra[0])} does not exist "
                        f"in the session's model")
    opt = session.optimizer
    mo = meta["optimizer"]
    if mo["kind"] != opt.kind:
        raise TapeError(f"checkpoint {where}: optimizer is {_show(mo['kind'])}, the session "
                        f"uses {opt.kind!r}")
    have = opt.hyper()
    for k in sorted(set(have) | set(mo["hyper"])):
        if mo["hyper"].get(k) != have.get(k):
            raise TapeError(f"checkpoint {where}: optimizer hyperparameter {_show(k)} is "
                            f"{_show(mo['hyper'].get(k))} in the checkpoint, "
                            f"{_show(have.get(k))} in the session")
    if sorted(mo["slots"]) != sorted(opt.slot_names):
        raise TapeError(f"checkpoint {where}: optimizer slots {mo['slots'][:8]} differ from "
                        f"the {opt.kind} optimizer's {sorted(opt.slot_names)}")
    entries = meta["entries"]
    for group, have in (("param", session.params), ("buffer", session.buffers)):
        for n in have:
            if f"{group}/{n}" not in entries:
                raise TapeError(f"checkpoint {where}: field 'entries' has no entry "
                                f"'{group}/{n}'")
    for name in entries:
        kind, _, rest = name.partition("/")
        slot, _, pname = rest.partition("/")
        if not ((kind == "param" and rest in session.params)
                or (kind == "buffer" and rest in session.buffers)
                or (kind == "optim" and slot in opt.slot_names and pname in session.params)):
            raise TapeError(f"checkpoint {where}: field 'entries' holds {_show(name)}, which "
                            f"names no parameter, buffer or {opt.kind} slot of the session")
    if loader is not None and meta["loader"] is None:
        raise TapeError(f"checkpoint {where}: no loader position was saved")


def _read_arrays(zf, npz_path: Path, entries: dict, ctx) -> dict:
    """Every entry's array, checked against its metadata (dtype and shape from the .npy
    header before the data is read, then the checksum), converted into ``ctx``."""
    stored = {n[:-4]: n for n in zf.namelist() if n.endswith(".npy")}
    extra = sorted(set(zf.namelist()) - set(stored.values()) - {META_MEMBER})
    listed = {e["key"] for e in entries.values()}
    extra += sorted(set(stored) - listed)
    if extra:
        raise TapeError(f"checkpoint {npz_path}: array {_show(extra[0])} is not listed in the "
                        f"metadata (mismatched .npz / .json pair?)")
    out = {}
    for name, e in entries.items():
        if e["key"] not in stored:
            raise TapeError(f"checkpoint {npz_path}: entry {name!r} is missing from the "
                            f"array file (truncated?)")
        info = zf.getinfo(stored[e["key"]])
        try:
            with zf.open(info) as fh:
                version = np.lib.format.read_magic(fh)
                if version not in ((1, 0), (2, 0)):
                    raise ValueError(f".npy format version {version}")
                read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                               else np.lib.format.read_array_header_2_0)
                shape, fortran, dtype = read_header(fh, max_header_size=10000)
                ok = (dtype == np.float64 if e["encoding"] == "float64"
                      else dtype.kind == "U" and dtype.byteorder in "<=|")
                if not ok:
                    raise TapeError(f"checkpoint {npz_path}: entry {name!r} has encoding "
                                    f"{e['encoding']!r} and dtype {dtype}, which do not fit")
                if list(shape) != e["shape"]:
                    raise TapeError(f"checkpoint {npz_path}: entry {name!r} has shape "
                                    f"{list(shape)}, the metadata says {e['shape']}")
                # the data must fit in the member: a header claiming more is corrupt, and
                # is refused before anything that size is allocated
                if int(np.prod(shape, dtype=object)) * dtype.itemsize > info.file_size:
                    raise TapeError(f"checkpoint {npz_path}: entry {name!r} claims more "
                                    f"data than its member holds (truncated or corrupt)")
            with zf.open(info) as fh:
                arr = np.lib.format.read_array(fh, allow_pickle=False)
        except TapeError:
            raise
        except _ZIP_ERRORS + (SyntaxError, TypeError) as exc:
            raise TapeError(f"checkpoint {npz_path}: entry {name!r} cannot be read "
                            f"(truncated or corrupt): "
                            f"{' '.join(str(exc).split())[:160]}") from None
        if _digest(arr) != e["sha256"]:
            raise TapeError(f"checkpoint {npz_path}: entry {name!r} does not match its "
                            f"checksum (corrupt, or the .npz and .json are not a pair)")
        try:
            if e["encoding"] == "float64":
                v = ctx.convert(arr)
            else:
                v = ctx.convert(arr.astype(object)) if arr.size else ctx.zeros(arr.shape)
        except (ContextError, ValueError, ZeroDivisionError) as exc:
            raise TapeError(f"checkpoint {npz_path}: entry {name!r} cannot be converted "
                            f"into {ctx.name}: {' '.join(str(exc).split())[:160]}") from None
        if e["encoding"] == "float64" and not np.array_equal(
                np.asarray(ctx.to_float64(v)), arr, equal_nan=True):
            raise TapeError(f"checkpoint {npz_path}: entry {name!r} holds values that are "
                            f"not representable in {ctx.name} (saved in another format?)")
        out[name] = v
    return out
