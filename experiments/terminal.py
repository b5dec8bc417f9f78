"""Tables that fit the terminal: a wide table is cut into blocks of columns, the key
columns repeated in each, so that no line is wider than the terminal (``scalarlab
contexts`` wraps its free-text cells instead).

The width is the terminal's when standard output is one; when it is not (a pipe, a file,
a test), lines keep their full width so that ``grep``/``awk`` see one row per line,
unless ``COLUMNS`` is set, which asks for that width explicitly.
"""
from __future__ import annotations

import os
import shutil
import sys

#: narrower than this, fitting does more harm than good: print the full table
MIN_WIDTH = 40


def width() -> int | None:
    """The width tables are fitted to, or None for full width (see the module doc)."""
    if "COLUMNS" in os.environ:
        try:
            cols = int(os.environ["COLUMNS"])
        except ValueError:
            return None
        return cols if cols >= MIN_WIDTH else None
    try:
        if not sys.stdout.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    cols = shutil.get_terminal_size().columns
    return cols if cols >= MIN_WIDTH else None


def _longest(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


def column_blocks(df, render, keys=(), cols: int | None = None) -> str:
    """``render(df)`` (a function DataFrame -> text), cut into blocks of columns that fit
    ``cols`` characters (default :func:`width`), each block led by the ``keys`` columns
    and separated by a blank line.  A table that fits comes back as one block."""
    cols = width() if cols is None else cols
    full = render(df)
    if cols is None or _longest(full) <= cols:
        return full
    keys = [k for k in keys if k in df.columns]
    rest = [c for c in df.columns if c not in keys]
    blocks, group = [], []
    for c in rest:
        if group and _longest(render(df[keys + group + [c]])) > cols:
            blocks.append(group)
            group = []
        group.append(c)
    if group:
        blocks.append(group)
    return "\n\n".join(render(df[keys + g]) for g in blocks)
