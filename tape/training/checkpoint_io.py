"""Saving and loading the whole training state: ``<stem>.npz`` + ``<stem>.json``.

What reproduces the next update: parameters, buffers, the mode, the step count, the
optimizer (kind, hyperparameters, step, slots), the generator state (dropout draws) and
the loader position.  Arrays go into the ``.npz`` (no pickle), everything else and the
list of entries into the JSON metadata.

Values are stored exactly: float64 and binary-format contexts as float64 arrays (their
values are float64 numbers), object contexts (rational, mpmath, fp32-real) as strings
``p/q`` of the exact rational value, converted back by the context (exact, since the value
is representable there).  Each entry records its shape and a SHA-256 of its bytes, so a
truncated, swapped or mismatched file is an error naming the entry, never a silent
partial load.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from scalarlab.scalars.base import to_fraction
from scalarlab.scalars.errors import ContextError

from ..errors import TapeError

FORMAT = "scalarlab-train-checkpoint"
VERSION = 1


def paths(path) -> tuple:
    """``(npz path, json path)`` for a checkpoint path with or without ``.npz``."""
    p = Path(path)
    stem = p.with_suffix("") if p.suffix == ".npz" else p
    return stem.with_name(stem.name + ".npz"), stem.with_name(stem.name + ".json")


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


def save(path, session, loader=None) -> tuple:
    """Write the checkpoint; returns ``(npz path, json path)``."""
    npz_path, json_path = paths(path)
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
    npz_path.parent.mkdir(parents=True, exist_ok=True)
    # Both files are written under unique temporary names beside their targets and renamed
    # into place only when both are complete; a failure or an interrupt removes the
    # temporaries and leaves the previous checkpoint as it was.  An interrupt between the
    # two renames leaves a new npz beside the old metadata: the per-entry SHA-256 in the
    # metadata makes ``load`` refuse that pair with a clear error instead of mixing saves.
    temps = []
    try:
        for target, write in ((npz_path, lambda fh: np.savez(fh, **arrays)),
                              (json_path, lambda fh: fh.write(
                                  json.dumps(meta, indent=1, sort_keys=True).encode()))):
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                       dir=target.parent)
            temps.append(tmp)
            with os.fdopen(fd, "wb") as fh:
                write(fh)
        os.replace(temps[0], npz_path)
        os.replace(temps[1], json_path)
    finally:
        for tmp in temps:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    return npz_path, json_path


def _read_meta(json_path: Path) -> dict:
    try:
        text = json_path.read_text()
    except OSError as exc:
        raise TapeError(f"checkpoint {json_path}: cannot read the metadata: "
                        f"{exc.strerror or exc}") from None
    try:
        meta = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TapeError(f"checkpoint {json_path}: metadata is not valid JSON (truncated?): "
                        f"{exc.msg} at line {exc.lineno}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise TapeError(f"checkpoint {json_path}: not a {FORMAT} file")
    if meta.get("version") != VERSION:
        raise TapeError(f"checkpoint {json_path}: version {meta.get('version')!r} is not "
                        f"supported (this reader knows version {VERSION})")
    for key in ("context", "mode", "steps", "state", "optimizer", "rng", "entries"):
        if key not in meta:
            raise TapeError(f"checkpoint {json_path}: metadata has no field {key!r}")
    return meta


def load(path, session, loader=None) -> dict:
    """Restore ``session`` (and ``loader``) from the checkpoint; returns the metadata.

    Nothing is changed unless every check passes.
    """
    npz_path, json_path = paths(path)
    meta = _read_meta(json_path)
    ctx = session.ctx
    if meta["context"] != ctx.name:
        raise TapeError(f"checkpoint {json_path}: saved in context {meta['context']}, the "
                        f"session computes in {ctx.name}")
    want = [[n, list(s)] for n, s in session.state_shapes()]
    got_state = meta["state"]
    names_got = [e[0] for e in got_state]
    names_want = [e[0] for e in want]
    for n, s in want:
        if n not in names_got:
            raise TapeError(f"checkpoint {json_path}: state entry {n!r} is missing "
                            f"(checkpoint has: {', '.join(names_got)})")
        saved = got_state[names_got.index(n)][1]
        if list(saved) != s:
            raise TapeError(f"checkpoint {json_path}: state entry {n!r} has shape {saved}, "
                            f"the session's has shape {s}")
    extra = [n for n in names_got if n not in names_want]
    if extra:
        raise TapeError(f"checkpoint {json_path}: state entry {extra[0]!r} does not exist "
                        f"in the session's model")
    opt = session.optimizer
    mo = meta["optimizer"]
    if mo.get("kind") != opt.kind:
        raise TapeError(f"checkpoint {json_path}: optimizer is {mo.get('kind')!r}, the session "
                        f"uses {opt.kind!r}")
    if mo.get("hyper") != opt.hyper():
        raise TapeError(f"checkpoint {json_path}: optimizer hyperparameters {mo.get('hyper')} "
                        f"differ from the session's {opt.hyper()}")
    if loader is not None and meta.get("loader") is None:
        raise TapeError(f"checkpoint {json_path}: no loader position was saved")

    values = _read_arrays(npz_path, meta["entries"], ctx)
    params, buffers = {}, {}
    slots = {s: {} for s in opt.slot_names}
    for name, v in values.items():
        kind, _, rest = name.partition("/")
        if kind == "param":
            params[rest] = v
        elif kind == "buffer":
            buffers[rest] = v
        elif kind == "optim":
            slot, _, pname = rest.partition("/")
            if slot not in slots or pname not in session.params:
                raise TapeError(f"checkpoint {npz_path}: entry {name!r} names no slot/parameter "
                                f"of the {opt.kind} optimizer")
            slots[slot][pname] = v
        else:
            raise TapeError(f"checkpoint {npz_path}: unknown entry {name!r}")
    for n in session.params:
        if n not in params:
            raise TapeError(f"checkpoint {npz_path}: entry 'param/{n}' is missing")
    for n in session.buffers:
        if n not in buffers:
            raise TapeError(f"checkpoint {npz_path}: entry 'buffer/{n}' is missing")
    for n, v in list(params.items()) + list(buffers.items()):
        have = tuple(ctx.shape(session.params.get(n, session.buffers.get(n))))
        if tuple(ctx.shape(v)) != have:
            raise TapeError(f"checkpoint {npz_path}: entry {n!r} has shape "
                            f"{list(ctx.shape(v))}, the session's has {list(have)}")
    rng = np.random.default_rng()
    try:
        rng.bit_generator.state = meta["rng"]
        if type(rng.bit_generator).__name__ != meta["rng"].get("bit_generator"):
            raise ValueError(f"bit generator {meta['rng'].get('bit_generator')!r}")
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise TapeError(f"checkpoint {json_path}: entry 'rng' is not a usable generator "
                        f"state: {exc}") from None
    if meta["mode"] not in ("train", "eval"):
        raise TapeError(f"checkpoint {json_path}: entry 'mode' is {meta['mode']!r}, expected "
                        f"train or eval")
    if loader is not None:
        loader.set_position(meta["loader"])
    opt.load_state_dict({"kind": opt.kind, "hyper": opt.hyper(), "step": mo.get("step"),
                         "slots": slots})
    session.params.update(params)
    session.buffers.update(buffers)
    session.rng.bit_generator.state = meta["rng"]
    session.mode = meta["mode"]
    session.steps = int(meta["steps"])
    return meta


def _read_arrays(npz_path: Path, entries: dict, ctx) -> dict:
    try:
        z = np.load(npz_path, allow_pickle=False)
    except FileNotFoundError:
        raise TapeError(f"checkpoint {npz_path}: file not found") from None
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise TapeError(f"checkpoint {npz_path}: cannot open the array file (truncated or "
                        f"not an .npz): {exc}") from None
    out = {}
    with z:
        stored = set(z.files)
        listed = {e.get("key") for e in entries.values() if isinstance(e, dict)}
        for key in sorted(stored - {f"{k}" for k in listed}):
            raise TapeError(f"checkpoint {npz_path}: array {key!r} is not listed in the "
                            f"metadata (mismatched .npz / .json pair?)")
        for name, e in entries.items():
            if not isinstance(e, dict) or not {"key", "shape", "encoding", "sha256"} <= set(e):
                raise TapeError(f"checkpoint {npz_path}: metadata of entry {name!r} is "
                                f"incomplete")
            if e["key"] not in stored:
                raise TapeError(f"checkpoint {npz_path}: entry {name!r} is missing from the "
                                f"array file (truncated?)")
            try:
                arr = z[e["key"]]
            except (zipfile.BadZipFile, OSError, ValueError, EOFError, KeyError) as exc:
                raise TapeError(f"checkpoint {npz_path}: entry {name!r} cannot be read "
                                f"(truncated or corrupt): {exc}") from None
            if list(arr.shape) != list(e["shape"]):
                raise TapeError(f"checkpoint {npz_path}: entry {name!r} has shape "
                                f"{list(arr.shape)}, the metadata says {e['shape']}")
            if _digest(arr) != e["sha256"]:
                raise TapeError(f"checkpoint {npz_path}: entry {name!r} does not match its "
                                f"checksum (corrupt, or the .npz and .json are not a pair)")
            enc = e["encoding"]
            try:
                if enc == "float64" and arr.dtype == np.float64:
                    v = ctx.convert(arr)
                elif enc == "exact" and arr.dtype.kind == "U":
                    v = ctx.convert(arr.astype(object)) if arr.size else ctx.zeros(arr.shape)
                else:
                    raise TapeError(f"checkpoint {npz_path}: entry {name!r} has encoding "
                                    f"{enc!r} and dtype {arr.dtype}, which do not fit")
            except ContextError as exc:
                raise TapeError(f"checkpoint {npz_path}: entry {name!r} cannot be converted "
                                f"into {ctx.name}: {exc}") from None
            if enc == "float64" and not np.array_equal(np.asarray(ctx.to_float64(v)), arr,
                                                       equal_nan=True):
                raise TapeError(f"checkpoint {npz_path}: entry {name!r} holds values that are "
                                f"not representable in {ctx.name} (saved in another format?)")
            out[name] = v
    return out
