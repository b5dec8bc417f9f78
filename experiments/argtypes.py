"""argparse ``type=`` functions shared by the ``scalarlab`` commands.

A bad value is refused while the command line is parsed, before any computation, as the
one line ``scalarlab <cmd>: error: argument --flag: ...`` with exit status 2 (see
``experiments.cli``).  Numeric lists accept negative numbers (``--input -0.3,0.2``: the CLI
parser glues a value that starts with ``-`` to the option before it).
"""
from __future__ import annotations

import argparse
import math
from fractions import Fraction


def _fail(msg: str):
    raise argparse.ArgumentTypeError(msg)


def _in_range(v, lo, hi, lo_open: bool, show, got):
    """``v``, refused outside ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``): the message
    shows the bound by ``show`` and the value as ``got``."""
    if lo is not None and (v < lo or (lo_open and v == lo)):
        _fail(f"must be {'>' if lo_open else '>='} {show(lo)}, got {got}")
    if hi is not None and v > hi:
        _fail(f"must be <= {show(hi)}, got {got}")
    return v


#: The ceiling of every integer flag without a bound of its own (counts, seeds, ids): a
#: billion samples is beyond what the lab can hold in memory for any graph, and a larger
#: value would otherwise reach numpy as an impossible array shape.
INTEGER_MAX = 10 ** 9


def integer(lo: int | None = None, hi: int | None = None):
    """An integer in ``[lo, hi]`` (``hi`` defaults to :data:`INTEGER_MAX`)."""
    hi = INTEGER_MAX if hi is None else hi

    def parse(text: str) -> int:
        t = str(text).strip()
        if len(t) > 30:           # int() of thousands of digits is slow and refused anyway
            _fail(f"expected an integer <= {hi}, got {t[:20]}... ({len(t)} characters)")
        try:
            v = int(t, 10)
        except ValueError:
            _fail(f"expected an integer, got {text!r}")
        return _in_range(v, lo, hi, False, str, v)
    parse.__name__ = "integer"
    return parse


def real(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False):
    """A finite float in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``)."""
    def parse(text: str) -> float:
        try:
            v = float(str(text).strip())
        except ValueError:
            _fail(f"expected a number, got {text!r}")
        if not math.isfinite(v):
            _fail(f"must be a finite number, got {text!r}")
        return _in_range(v, lo, hi, lo_open, lambda b: f"{b:g}", text)
    parse.__name__ = "number"
    return parse


#: Sampling radii: finite, >= 0, and small enough that the box width 2r is finite.
RADIUS_MAX = 1e300
radius = real(0.0, RADIUS_MAX)


def split_top(text: str) -> list[str]:
    """``text`` split at its top-level commas only: ``binary(5,10),e4m3`` is two items
    (a comma inside brackets belongs to the item; an unmatched closer is ignored)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(depth - 1, 0)
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _items(text: str, what: str) -> list[str]:
    parts = [t.strip() for t in split_top(str(text))]
    if not any(parts):
        _fail(f"no {what} given")
    if any(not t for t in parts):
        _fail(f"empty item in {text!r} (a doubled or trailing comma?)")
    return parts


def decimal(text: str, *, lo: float | None = None, hi: float | None = None) -> str:
    """One exact decimal or p/q number, kept as its text (exact for rational contexts);
    read by the lab's one bounded literal reader (magnitudes 10^-1000 .. 10^1000, at most
    4000 digits: scalars/kernels/literals.py), so a huge exponent is refused at once."""
    from scalarlab.scalars.kernels import literals
    t = text.strip()
    try:
        q = literals.exact(t)
    except literals.NotALiteral:
        _fail(f"{t!r} is not a decimal number")
    except literals.LiteralError as exc:
        _fail(str(exc))
    if lo is not None and q < Fraction(lo):
        _fail(f"{t} must be >= {lo:g}")
    if hi is not None and q > Fraction(hi):
        _fail(f"{t} must be <= {hi:g}")
    return t


def decimal_list(lo: float | None = None, hi: float | None = None):
    """Comma-separated exact decimals (negative allowed unless ``lo``), returned as a list of
    their texts; NaN, infinities and empty items are refused."""
    def parse(text: str) -> list[str]:
        return [decimal(t, lo=lo, hi=hi) for t in _items(text, "numbers")]
    parse.__name__ = "list of numbers"
    return parse


def integer_list(lo: int | None = None, hi: int | None = None):
    one = integer(lo, hi)

    def parse(text: str) -> list[int]:
        return [one(t) for t in _items(text, "integers")]
    parse.__name__ = "list of integers"
    return parse


def name_list(text: str) -> list[str]:
    """Comma-separated names without empty items or repeats."""
    parts = _items(text, "names")
    dup = sorted({p for p in parts if parts.count(p) > 1})
    if dup:
        _fail(f"{', '.join(dup)} given more than once")
    return parts


name_list.__name__ = "list of names"


def context_name(text: str) -> str:
    """A scalar context name known to the registry (parametrised families included)."""
    from scalarlab import scalars
    from scalarlab.scalars.errors import ScalarLabError
    try:
        scalars.get(text)
    except ScalarLabError as exc:
        _fail(str(exc))
    from scalarlab.scalars.registry import canonical
    return canonical(text)              # an alias (fp32) is named as its context (binary32)


def context_list(text: str) -> list[str]:
    return [context_name(p) for p in name_list(text)]     # aliases -> canonical names


context_list.__name__ = "list of contexts"


def contexts(text: str) -> list:
    """Comma-separated context names resolved to the contexts themselves (once, here: the
    command passes the objects on instead of resolving the names again)."""
    from scalarlab import scalars
    from scalarlab.scalars.errors import ScalarLabError
    out = []
    for p in name_list(text):
        try:
            out.append(scalars.get(p))
        except ScalarLabError as exc:
            _fail(str(exc))
    return out


contexts.__name__ = "list of contexts"


def _regular_file(text: str) -> None:
    """Refuse, while parsing, a path that is missing, a directory, a FIFO or device, or over
    the input size cap (the same gate, graph/files.py, checks again when it is read)."""
    from scalarlab.graph import files
    try:
        files.check(text, "")
    except files.InputFileError as exc:
        _fail(str(exc).strip())


def npy_file(text: str) -> str:
    """An existing ``.npy`` file (read later, with its shape checked against the graph)."""
    if not text.endswith(".npy"):
        _fail(f"{text!r}: expected a .npy file")
    _regular_file(text)
    return text


def input_spec(text: str) -> str:
    """``--input``: comma-separated exact decimals (negative allowed: ``-0.3,0.2``) or a
    ``.npy`` file; checked here, returned as given (the command reshapes it)."""
    if text.strip().endswith(".npy"):
        return npy_file(text.strip())
    decimal_list()(text.replace(";", ","))
    return text


input_spec.__name__ = "input"


def existing_file(*suffixes: str):
    """argparse ``type=``: an existing file (with one of ``suffixes`` if given)."""
    def parse(text: str) -> str:
        if not text.strip():
            _fail("empty file name")
        if suffixes and not text.lower().endswith(tuple(s.lower() for s in suffixes)):
            _fail(f"{text!r}: expected a {' or '.join(suffixes)} file")
        _regular_file(text)
        return text
    parse.__name__ = "file"
    return parse


DASK_SCHEMES = ("tcp", "tls", "inproc", "ucx")


def dask_address(text: str) -> str:
    """``--scheduler``: a Dask scheduler address ``[SCHEME://]HOST:PORT`` (scheme tcp,
    tls, inproc or ucx; tcp when omitted), host a name, an IPv4 address or ``[IPv6]``,
    port 1..65535; returned as given, stripped."""
    import ipaddress
    import re
    t = str(text).strip()
    scheme, sep, rest = t.partition("://")
    if not sep:
        scheme, rest = "tcp", t
    if scheme not in DASK_SCHEMES:
        _fail(f"{text!r} is not a Dask scheduler address: scheme {scheme!r} is not one of "
              f"{', '.join(DASK_SCHEMES)}")
    if scheme == "inproc":              # inproc://HOST/PID/N names an in-process address
        if not re.fullmatch(r"[\w.\-/\[\]:]+", rest):
            _fail(f"{text!r} is not a Dask scheduler address (inproc://HOST/PID/N)")
        return t
    rest = rest[:-1] if rest.endswith("/") else rest
    host, colon, port = rest.rpartition(":")
    if not colon or not host:
        _fail(f"{text!r} is not a Dask scheduler address (tcp://HOST:PORT)")
    if not port.isdigit() or not port.isascii() or not 1 <= int(port) <= 65535:
        _fail(f"{text!r}: port {port!r} is not a port number (1..65535)")
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1] if host.endswith("]") else "?")
        except ValueError:
            _fail(f"{text!r}: {host!r} is not a bracketed IPv6 address")
    elif re.fullmatch(r"[\d.]+", host):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            _fail(f"{text!r}: {host!r} is not an IPv4 address")
    elif len(host) > 253 or not all(
            re.fullmatch(r"[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?", label)
            for label in host.split(".")):
        _fail(f"{text!r}: {host!r} is not a host name")
    return t


dask_address.__name__ = "Dask scheduler address"


def output_file(*suffixes: str, flag: str = "--out"):
    """``experiments.outputs.output_file``, imported when a value is parsed (not when the
    parser is built: ``--help`` then loads no contexts)."""
    def parse(text: str) -> str:
        from . import outputs
        return outputs.output_file(*suffixes, flag=flag)(text)
    parse.__name__ = "output file"
    return parse


def output_dir(flag: str = "--out"):
    """``experiments.outputs.output_dir``, imported when a value is parsed."""
    def parse(text: str) -> str:
        from . import outputs
        return outputs.output_dir(flag)(text)
    parse.__name__ = "output directory"
    return parse
