"""The versioned JSON graph file (format ``scalarlab-graph``, version 1) and ``.npz`` payloads.

::

    {"format": "scalarlab-graph", "version": 1,
     "nodes": [{"id": 0, "parents": [], "kind": "input", "out_shape": [4]},
               {"id": 7, "parents": [6], "kind": {"op": "softmax", "axis": 1}, "out_shape": [2, 3, 4]}],
     "output": 7,
     "payload": {"1": {"linear": {"W": [["0.15", -0.12]], "b": ["0.01"]}}}}

Payload numbers are float64 values (JSON numbers round-trip exactly through Python's
``repr``); strings are exact decimals or ``p/q`` rationals, converted by each context with
one rounding.  ``"payload"`` may instead name a side file, an ``.npz`` (relative to the
JSON file, so the pair loads from any working directory) whose arrays are keyed
``"<id>.<op>.<param>"`` (float64, or unicode arrays of exact strings): written as
``{"file": "m.npz", "bytes": N, "sha256": "..."}`` so that a missing, truncated or
swapped side file is an error naming both files; a bare ``"m.npz"`` string (older files)
is read unchecked.  :func:`save` puts a payload of more than :data:`SIDE_FILE_NUMBERS`
numbers in a side file unless told otherwise (JSON spends about 32 bytes on a float64
with its indentation: resnet18's 11.7 million weights are 444 MB of JSON, 93 MB of
``.npz``).  Every malformed file raises :class:`GraphError` naming the path, the node and
the field.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import zipfile

import numpy as np

from scalarlab.scalars.base import to_fraction
from scalarlab.scalars.errors import ContextError
from . import files
from .errors import GraphError
from .node import Graph, Node, OpKind
from .payload import Payload, normalize_value

FORMAT = "scalarlab-graph"
VERSION = 1

#: A payload with more numbers than this goes to a side ``.npz`` by default (about 16 MiB
#: of JSON at 32 bytes a number).
SIDE_FILE_NUMBERS = 2 ** 19
_SIDE_FIELDS = ("file", "bytes", "sha256")


# ------------------------------------------------------------------------------ writing
def exact_str(v) -> str:
    """An exact text for one payload entry: decimal strings pass through, a finite float is
    its shortest repr, nan/inf/-inf (of any number type) their names, and everything else
    (ints, Fractions, gmpy2 mpq/mpfr, mpmath mpf) its exact rational (scalars' to_fraction)."""
    if isinstance(v, str):
        return v
    if isinstance(v, (float, np.floating)) and math.isfinite(float(v)):
        return repr(float(v))
    try:
        return str(to_fraction(v))
    except (ContextError, ArithmeticError, ValueError):
        pass
    try:
        f = float(v)             # only to name a non-finite value: exact ones returned above
    except (TypeError, ValueError, OverflowError):
        f = 0.0
    if not math.isfinite(f):
        return "nan" if f != f else ("inf" if f > 0 else "-inf")
    raise GraphError(f"cannot write payload value {v!r} of type {type(v).__name__} exactly")


def _json_value(arr, where):
    if hasattr(arr, "lo") or hasattr(arr, "primal"):
        raise GraphError(f"{where}: interval/dual payload values cannot be saved; save endpoints")
    a = np.asarray(arr)
    if a.dtype.kind in "fiub":
        flat = [float(t) for t in a.reshape(-1)]
        items = [t if math.isfinite(t) else exact_str(t) for t in flat]
    else:
        items = [exact_str(t) for t in a.reshape(-1)]
    if a.ndim == 0:
        return items[0]
    return np.asarray(items, dtype=object).reshape(a.shape).tolist()


def _node_json(n: Node) -> dict:
    kind = n.kind.op if not n.kind.attrs else {"op": n.kind.op, **{
        k: (list(v) if isinstance(v, tuple) else v) for k, v in n.kind.attrs.items()}}
    kind = json.loads(json.dumps(kind))   # nested tuples -> lists
    return {"id": n.id, "parents": list(n.parents), "kind": kind, "out_shape": list(n.out_shape)}


def _entry_op(g, payload, k):
    op = payload.op_of(k)
    if op is None and 0 <= k < len(g.nodes):
        op = g.nodes[k].kind.op
    return op or "params"


def payload_numbers(payload) -> int:
    """How many numbers ``payload`` holds (every entry of every parameter array)."""
    if payload is None:
        return 0
    return sum(int(np.size(v.lo if hasattr(v, "lo") else v))
               for _, params in Payload(payload).items() for v in params.values())


def wants_side_file(payload) -> bool:
    """Whether :func:`save` (and ``scalarlab import``) put ``payload`` in a side file by
    default: more than :data:`SIDE_FILE_NUMBERS` numbers."""
    return payload_numbers(payload) > SIDE_FILE_NUMBERS


def file_digest(path) -> tuple:
    """``(size in bytes, sha256 hex digest)`` of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    size = 0
    with open(os.fspath(path), "rb") as fh:
        while True:
            block = fh.read(2 ** 20)
            if not block:
                break
            size += len(block)
            h.update(block)
    return size, h.hexdigest()


def side_file_ref(name: str, written) -> dict:
    """The JSON's ``"payload"`` value for side file ``name`` (as the JSON names it:
    relative to the JSON's folder) whose bytes are now at path ``written``."""
    size, digest = file_digest(written)
    return {"file": name, "bytes": size, "sha256": digest}


def to_json(g: Graph, payload=None, *, payload_file=None) -> dict:
    """The document of a graph file: payload inline, or ``payload_file`` (a side file's
    name, or the reference :func:`side_file_ref` builds) in its place."""
    doc = {"format": FORMAT, "version": VERSION, "nodes": [_node_json(n) for n in g.nodes],
           "output": g.output}
    if payload_file is not None:
        doc["payload"] = payload_file
    elif payload is not None and len(payload):
        doc["payload"] = {str(k): {_entry_op(g, payload, k): {
            name: _json_value(v, f"payload entry {k} field {name!r}") for name, v in params.items()}}
            for k, params in payload.items()}
    return doc


def dumps(g: Graph, payload=None) -> str:
    return json.dumps(to_json(g, None if payload is None else Payload(payload)), indent=1)


class _Replacing:
    """``with _Replacing(path) as tmp:`` write ``tmp`` (beside ``path``, same suffix); it is
    renamed onto ``path`` only if the block ends normally, else removed, so an interrupted
    or failed save (full disk, Ctrl-C) leaves the previous file intact."""

    def __init__(self, path):
        self.path = os.fspath(path)

    def __enter__(self) -> str:
        import tempfile
        d, name = os.path.split(os.path.abspath(self.path))
        fd, self.tmp = tempfile.mkstemp(dir=d, prefix=f".{name}.",
                                        suffix=".tmp" + os.path.splitext(name)[1])
        os.close(fd)
        return self.tmp

    def __exit__(self, kind, exc, tb):
        if kind is None:
            try:
                mask = os.umask(0)
                os.umask(mask)
                os.chmod(self.tmp, 0o666 & ~mask)
                os.replace(self.tmp, self.path)
                return False
            except OSError:
                self._remove()
                raise
        self._remove()
        return False

    def _remove(self) -> None:
        try:
            os.unlink(self.tmp)
        except OSError:
            pass


def save_npz(path, g: Graph, payload) -> None:
    payload = Payload(payload)
    arrays = {}
    for k, params in payload.items():
        op = _entry_op(g, payload, k)
        for name, v in params.items():
            a = np.asarray(v) if not hasattr(v, "lo") else None
            if a is None:
                raise GraphError(f"payload entry {k} field {name!r}: interval values cannot be saved")
            if a.dtype.kind not in "fiub":
                a = np.asarray([exact_str(t) for t in a.reshape(-1)], dtype=str).reshape(a.shape)
            arrays[f"{k}.{op}.{name}"] = a
    try:
        with _Replacing(path) as tmp:
            np.savez(tmp, **arrays)
    except OSError as exc:
        raise GraphError(f"payload file {path}: cannot write: {exc}") from None


def save(path, g: Graph, payload=None, *, npz=None):
    """Write ``g`` (and ``payload``) as a version-1 JSON graph file; returns the side
    file's path, or None when the payload is inline.

    ``npz=True`` writes the payload beside it as ``<stem>.npz`` and references it (with
    its size and SHA-256); ``npz=False`` keeps it inline; ``None`` (default) writes the
    side file when the payload holds more than :data:`SIDE_FILE_NUMBERS` numbers.  The
    side file is replaced first and the JSON last, each atomically: an interrupted save
    leaves the old JSON, which then refuses the new side file by its hash (the CLI
    publishes the pair as one output set).
    """
    path = os.fspath(path)
    payload = None if payload is None else Payload(payload)
    ref = side = None
    if npz is None:
        npz = wants_side_file(payload)
    if npz and payload is not None:
        side = os.path.splitext(path)[0] + ".npz"
        save_npz(side, g, payload)
        ref = side_file_ref(os.path.basename(side), side)
    doc = to_json(g, payload, payload_file=ref)
    try:
        with _Replacing(path) as tmp, open(tmp, "w") as fh:
            json.dump(doc, fh, indent=1)
            fh.write("\n")
    except OSError as exc:
        raise GraphError(f"graph file {path}: cannot write: {exc}") from None
    return side


# ------------------------------------------------------------------------------ reading
def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _parse_node(i, d, where):
    w = f"{where}: node {i}"
    if not isinstance(d, dict):
        raise GraphError(f"{w}: expected an object with id, parents, kind, out_shape, got "
                         f"{type(d).__name__}")
    for f in ("id", "parents", "kind", "out_shape"):
        if f not in d:
            raise GraphError(f"{w}: missing field {f!r}")
    extra = [k for k in d if k not in ("id", "parents", "kind", "out_shape")]
    if extra:
        raise GraphError(f"{w}: unknown field {extra[0]!r}")
    if not _is_int(d["id"]):
        raise GraphError(f"{w}: field 'id': expected an int, got {d['id']!r}")
    ps = d["parents"]
    if not isinstance(ps, list) or not all(_is_int(p) for p in ps):
        raise GraphError(f"{w}: field 'parents': expected a list of ints, got {ps!r}")
    sh = d["out_shape"]
    if not isinstance(sh, list) or not all(_is_int(s) and s >= 0 for s in sh):
        raise GraphError(f"{w}: field 'out_shape': expected a list of non-negative ints, got {sh!r}")
    k = d["kind"]
    if isinstance(k, str):
        kind = OpKind(k)
    elif isinstance(k, dict):
        op = k.get("op")
        if not isinstance(op, str):
            raise GraphError(f"{w}: field 'kind': an object kind needs an 'op' string, got {k!r}")
        attrs = {a: v for a, v in k.items() if a != "op"}
        for a, v in attrs.items():
            if isinstance(v, dict):
                raise GraphError(f"{w}: field 'kind': attribute {a!r} must be a number, "
                                 f"string, boolean or list, got an object")
        kind = OpKind(op, **attrs)
    else:
        raise GraphError(f"{w}: field 'kind': expected an op name or an object with 'op', got {k!r}")
    try:
        return Node(d["id"], ps, kind, sh)
    except GraphError as exc:
        raise GraphError(f"{w}: {exc}") from None


def _payload_value(v, where):
    """JSON numbers -> float64 (ints kept exact), strings -> exact decimals/rationals."""
    def check(t):
        if isinstance(t, bool) or not isinstance(t, (int, float, str)):
            raise GraphError(f"{where}: entries must be numbers or strings, got {t!r}")
        return t
    if isinstance(v, list):
        try:
            a = np.asarray(v, dtype=object)
        except ValueError:
            raise GraphError(f"{where}: ragged nested lists") from None
        if a.ndim and any(isinstance(t, (list, dict)) for t in a.reshape(-1)):
            raise GraphError(f"{where}: ragged nested lists")
        for t in a.reshape(-1):
            check(t)
        if a.size and all(isinstance(t, float) for t in a.reshape(-1)):
            return a.astype(np.float64)
        return a
    check(v)
    return np.asarray(v, dtype=np.float64) if isinstance(v, float) else np.asarray(v, dtype=object)


def _parse_payload(p, where) -> Payload:
    if not isinstance(p, dict):
        raise GraphError(f"{where}: field 'payload': expected an object keyed by node id or an "
                         f".npz file name, got {type(p).__name__}")
    out = Payload()
    for key, entry in p.items():
        w = f"{where}: payload entry {key!r}"
        try:
            nid = int(key)
        except ValueError:
            raise GraphError(f"{w}: key is not a node id") from None
        if str(nid) != key.strip():
            raise GraphError(f"{w}: key is not a node id")
        if not isinstance(entry, dict) or len(entry) != 1 or not isinstance(next(iter(entry.values())), dict):
            raise GraphError(f"{w}: expected {{\"<op>\": {{\"<param>\": tensor, ...}}}}")
        (op, params), = entry.items()
        vals = {}
        for name, v in params.items():
            vals[name] = _payload_value(v, f"{where}: node {nid}: payload field {name!r}")
        out.set(nid, vals, op=op)
    return out


def load_npz(path) -> Payload:
    """Read a payload ``.npz`` (keys ``<id>.<op>.<param>`` or ``<id>.<param>``)."""
    path = files.check(path, "payload file")     # regular file within the size cap
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise GraphError(f"payload file {path}: cannot read: {exc}") from None
    entries: dict = {}
    ops: dict = {}
    with data:
        for key in data.files:
            parts = key.split(".")
            if len(parts) not in (2, 3) or not parts[0].isdigit():
                raise GraphError(f"payload file {path}: key {key!r} is not '<id>.<op>.<param>'")
            nid = int(parts[0])
            try:
                arr = data[key]
            except (ValueError, OSError, zipfile.BadZipFile) as exc:
                raise GraphError(f"payload file {path}: array {key!r}: {exc}") from None
            if arr.dtype.kind not in "fiubU":
                raise GraphError(f"payload file {path}: array {key!r} has dtype {arr.dtype}; "
                                 f"expected numbers or exact strings")
            entries.setdefault(nid, {})[parts[-1]] = normalize_value(arr)
            if len(parts) == 3:
                if ops.get(nid, parts[1]) != parts[1]:
                    raise GraphError(f"payload file {path}: node {nid} has two op tags")
                ops[nid] = parts[1]
    out = Payload()
    for nid, params in entries.items():
        out.set(nid, params, op=ops.get(nid))
    return out


def loads(text: str, where: str = "<string>", base_dir: str = ".") -> tuple:
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise GraphError(f"graph file {where}: not valid JSON: {exc}") from None
    return from_json(doc, where, base_dir)


def from_json(doc, where="<json>", base_dir=".") -> tuple:
    w = f"graph file {where}"
    if not isinstance(doc, dict):
        raise GraphError(f"{w}: expected a JSON object, got {type(doc).__name__}")
    if doc.get("format") != FORMAT:
        raise GraphError(f"{w}: field 'format': expected {FORMAT!r}, got {doc.get('format')!r}")
    if doc.get("version") != VERSION:
        raise GraphError(f"{w}: field 'version': unsupported version {doc.get('version')!r} "
                         f"(this build reads version {VERSION})")
    extra = [k for k in doc if k not in ("format", "version", "nodes", "output", "payload")]
    if extra:
        raise GraphError(f"{w}: unknown field {extra[0]!r}")
    nodes = doc.get("nodes")
    if not isinstance(nodes, list):
        raise GraphError(f"{w}: field 'nodes': expected a list, got {type(nodes).__name__}")
    parsed = [_parse_node(i, d, w) for i, d in enumerate(nodes)]
    out = doc.get("output")
    if out is not None and not _is_int(out):
        raise GraphError(f"{w}: field 'output': expected a node id, got {out!r}")
    g = Graph(parsed, output=out)
    p = doc.get("payload")
    if p is None:
        payload = Payload()
    elif isinstance(p, str):
        try:
            payload = load_npz(os.path.join(base_dir, p))
        except GraphError as exc:
            raise GraphError(f"{w}: field 'payload': {exc}") from None
    elif isinstance(p, dict) and "file" in p:
        payload = _load_side_file(p, w, base_dir)
    else:
        payload = _parse_payload(p, w)
    return g, payload


def _load_side_file(ref: dict, w: str, base_dir: str) -> Payload:
    """The payload of the side file ``ref`` names, once its size and SHA-256 are the ones
    the graph file recorded."""
    extra = [k for k in ref if k not in _SIDE_FIELDS]
    if extra:
        raise GraphError(f"{w}: field 'payload': unknown field {extra[0]!r} (a side file is "
                         f"{{\"file\": ..., \"bytes\": ..., \"sha256\": ...}})")
    name, size, digest = ref.get("file"), ref.get("bytes"), ref.get("sha256")
    if (not isinstance(name, str) or not name or not _is_int(size) or size < 0
            or not isinstance(digest, str) or len(digest) != 64):
        raise GraphError(f"{w}: field 'payload': a side file needs 'file' (a name), 'bytes' "
                         f"(an int) and 'sha256' (64 hex digits), got {ref!r}")
    path = os.path.join(base_dir, name)
    try:
        files.check(path, "payload file")
    except files.InputFileError as exc:
        why = str(exc).removeprefix(f"payload file {path}: cannot read: ")
        raise GraphError(f"{w}: cannot read its weights' side file {path}: {why} (keep "
                         f"the .npz beside the JSON, or import again)") from None
    try:
        got_size, got = file_digest(path)
    except OSError as exc:
        raise GraphError(f"{w}: side file {path}: cannot read: {exc.strerror or exc}") from None
    if (got_size, got) != (size, digest.lower()):
        raise GraphError(f"{w}: side file {path} does not match it ({got_size} bytes, "
                         f"sha256 {got[:12]}..., the graph file expects {size} bytes, sha256 "
                         f"{digest[:12]}...): the pair was not written together; import "
                         f"or save them again")
    try:
        return load_npz(path)
    except GraphError as exc:
        raise GraphError(f"{w}: field 'payload': {exc}") from None


def read_text(path, what: str = "graph file", error=GraphError) -> str:
    """The text of a file, or ``error`` naming ``what``, the path and the reason (missing,
    unreadable, not UTF-8)."""
    path = os.fspath(path)
    try:
        return files.read_text(path, what)     # a regular file within the size cap
    except files.InputFileError as exc:
        if error is GraphError:
            raise
        raise error(str(exc)) from None


def load(path) -> tuple:
    """``(Graph, Payload)`` from a version-1 JSON graph file (structure not yet validated)."""
    path = os.fspath(path)
    return loads(read_text(path), path, os.path.dirname(path) or ".")
