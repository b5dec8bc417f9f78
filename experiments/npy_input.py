"""The one ``.npy`` reader of the CLI (``--input``, ``--input-file``, ``--box``): strict
about what a file of samples may hold, in a leaf module so that every reader of inputs
(cases, sampling) imports it without importing the others."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from scalarlab.graph import files

from .errors import ExperimentError


def read_npy(path, flag: str, *, allow_infinite: bool = False,
             allow_0d: bool = False, allow_bool: bool = False) -> np.ndarray:
    """The one ``.npy`` reader of the CLI: a float64 array holding exactly the file's real
    numbers, or an ExperimentError naming the flag, the file and what is wrong.

    Accepted: float (16/32/64 bits; wider ones only when every entry is a float64 value)
    and integer arrays (every entry within 2^53, so float64 holds it exactly).  Refused:
    booleans (a mask saved by mistake reads as 0/1 samples otherwise), complex, strings,
    objects (reading them needs pickle), structured arrays, 0-d arrays, empty arrays, NaN
    (and +-inf unless ``allow_infinite``: open box bounds).  A 0-d array only with
    ``allow_0d`` (one input of a scalar input node).  Booleans only with ``allow_bool``
    (a graph whose bool input -- an attention mask -- the file feeds), read as 0/1."""
    p = Path(path)
    if p.suffix != ".npy":
        raise ExperimentError(f"{flag} {path}: expected a .npy file")
    try:
        files.check(p, flag)           # a regular file within the size cap, before reading
    except files.InputFileError as exc:
        raise ExperimentError(str(exc)) from None
    try:
        arr = np.load(p, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise ExperimentError(f"{flag} {path}: not a readable .npy array: {exc}") from None
    if not isinstance(arr, np.ndarray):
        raise ExperimentError(f"{flag} {path}: not a .npy array")
    kind = arr.dtype.kind
    if kind == "b" and allow_bool:
        arr, kind = arr.astype(np.int64), "i"
    if kind == "b":
        raise ExperimentError(f"{flag} {path}: dtype bool holds truth values, not real "
                              f"numbers (save arr.astype(np.float64) if 0/1 samples are meant)")
    if kind not in "fiu":
        raise ExperimentError(f"{flag} {path}: dtype {arr.dtype} is not a real number type "
                              f"(float or integer arrays)")
    if arr.ndim == 0 and not allow_0d:
        raise ExperimentError(f"{flag} {path}: a single number (0-d array); expected an "
                              f"array of rows")
    if arr.size == 0:
        raise ExperimentError(f"{flag} {path}: the array is empty (shape {list(arr.shape)})")
    out = np.asarray(arr, dtype=np.float64)
    if kind in "iu":
        big = np.abs(arr.astype(object) if arr.dtype.itemsize > 8 else arr) > 2 ** 53
        if np.any(big):
            at = tuple(int(i) for i in np.argwhere(big)[0])
            raise ExperimentError(f"{flag} {path}: integer entry {arr[at]} at {list(at)} is "
                                  f"not a float64 value (|v| > 2^53 would be rounded)")
    elif arr.dtype.itemsize > 8:
        with np.errstate(over="ignore", invalid="ignore"):
            lost = (out.astype(arr.dtype) != arr) & ~np.isnan(arr)
        if np.any(lost):
            at = tuple(int(i) for i in np.argwhere(lost)[0])
            raise ExperimentError(f"{flag} {path}: entry {arr[at]} at {list(at)} of dtype "
                                  f"{arr.dtype} is not a float64 value (it would be rounded)")
    bad = np.isnan(out) if allow_infinite else ~np.isfinite(out)
    if np.any(bad):
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ExperimentError(f"{flag} {path}: entry {list(at)} is {out[at]}; "
                              f"{'NaN is' if allow_infinite else 'NaN and infinities are'} "
                              f"not a sample")
    return out
