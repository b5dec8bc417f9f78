"""The one gate in front of every input file the lab reads (graph JSON, payload and sample
``.npz``/``.npy``, FPCore, ONNX, box files): the path must name a regular file (a FIFO
would block forever, ``/dev/zero`` never ends, a directory is not a file; a symlink is
judged by what it points to) no larger than the size cap, checked with ``stat`` before
the file is opened.

The cap is :data:`DEFAULT_MAX_MB` MiB, or ``SCALARLAB_MAX_INPUT_MB`` from the environment
(a positive number of MiB), so a large model can still be read on purpose.
"""
from __future__ import annotations

import os
import stat

from .errors import GraphError

#: Size cap of one input file in MiB unless ``SCALARLAB_MAX_INPUT_MB`` says otherwise.
DEFAULT_MAX_MB = 1024
ENV = "SCALARLAB_MAX_INPUT_MB"


class InputFileError(GraphError):
    """An input file that cannot be read: missing, not a regular file, or over the cap."""


def max_bytes() -> int:
    """The size cap in bytes (``SCALARLAB_MAX_INPUT_MB`` or :data:`DEFAULT_MAX_MB`)."""
    text = os.environ.get(ENV, "").strip()
    if not text:
        return DEFAULT_MAX_MB * 2 ** 20
    try:
        mb = float(text)
    except ValueError:
        mb = -1.0
    if not (0 < mb < 2 ** 40):
        raise InputFileError(f"{ENV}={text!r}: expected a positive number of MiB")
    return int(mb * 2 ** 20)


def _mb(n: int) -> str:
    return f"{n / 2 ** 20:.1f} MiB"


def check(path, what: str) -> str:
    """``path`` as a string once it names a readable regular file within the cap, else an
    :class:`InputFileError` ``"<what> <path>: ..."`` saying what it is instead."""
    p = os.fspath(path)
    try:
        st = os.stat(p)                  # follows symlinks: a link to /dev/zero is a device
    except FileNotFoundError:
        raise InputFileError(f"{what} {p}: cannot read: no such file") from None
    except OSError as exc:
        raise InputFileError(f"{what} {p}: cannot read: {exc.strerror or exc}") from None
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        raise InputFileError(f"{what} {p}: cannot read: a directory, not a file")
    if not stat.S_ISREG(mode):
        kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else
                "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else
                "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
        raise InputFileError(f"{what} {p}: cannot read: {kind}; only regular files are read")
    cap = max_bytes()
    if st.st_size > cap:
        raise InputFileError(f"{what} {p}: cannot read: {_mb(st.st_size)} is over the input "
                             f"size cap of {_mb(cap)} (set {ENV} to read larger files)")
    return p


def read_bytes(path, what: str) -> bytes:
    """The bytes of a checked file, never more than the cap (a file growing while it is
    read is refused rather than followed)."""
    p = check(path, what)
    cap = max_bytes()
    try:
        with open(p, "rb") as fh:
            data = fh.read(cap + 1)
    except OSError as exc:
        raise InputFileError(f"{what} {p}: cannot read: {exc.strerror or exc}") from None
    if len(data) > cap:
        raise InputFileError(f"{what} {p}: grew past the input size cap of {_mb(cap)} "
                             f"while being read (set {ENV} to read larger files)")
    return data


def read_text(path, what: str) -> str:
    """The UTF-8 text of a checked file (see :func:`read_bytes`)."""
    data = read_bytes(path, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError(f"{what} {os.fspath(path)}: not UTF-8 text ({exc.reason} at "
                             f"byte {exc.start})") from None
