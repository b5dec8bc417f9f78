"""Output machinery of the experiments: terminal tables, CSV/Markdown/JSON files, PNG plots
and progress bars.

Every experiment produces a pandas DataFrame plus a small metadata dict; the writers here
turn that pair into the file named by ``--out`` (format chosen by the suffix) so all
commands share one schema discipline: CSV = the rows only, JSON = ``{"format", "version",
"meta", "rows"}``, Markdown = a metadata list followed by the table.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from . import outputs
from .outputs import OutputError  # noqa: F401  (re-exported: tables.OutputError)

#: Pixel size of every PNG the lab writes (figsize inches x dpi), stated in the README.
PLOT_SIZE_IN = (8.0, 4.5)
PLOT_DPI = 100


# ----------------------------------------------------------------------------- progress
def progress(iterable=None, *, total=None, desc="", quiet=False):
    """A tqdm progress bar on stderr, silent with ``quiet`` or when stderr is not a TTY
    (within a command: as its ``--progress``/``--quiet``/``SCALARLAB_PROGRESS`` decide,
    :mod:`experiments.progress`)."""
    from tqdm.auto import tqdm
    from . import progress as live
    decided = live.decided()
    disable = bool(quiet) or not (_stderr_is_tty() if decided is None else decided)
    return tqdm(iterable, total=total, desc=desc, disable=disable, leave=False,
                file=live.stream(), dynamic_ncols=True)


def _stderr_is_tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


# ------------------------------------------------------------------------ number format
def fmt_number(x, digits: int = 3) -> str:
    """Compact human number: integers as integers, else 3 significant digits."""
    if x is None:
        return "-"
    if isinstance(x, (bool, np.bool_)):
        return "yes" if x else "no"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    try:
        f = float(x)
    except (TypeError, ValueError):
        return str(x)
    if math.isnan(f):
        return "-"
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    if f == 0:
        return "0"
    if f == int(f) and abs(f) < 1e15:
        return str(int(f))
    if 1e-3 <= abs(f) < 1e5:
        return f"{f:.{digits}g}"
    return f"{f:.{digits - 1}e}"


def render(df: pd.DataFrame, digits: int = 3) -> str:
    """The DataFrame as a readable fixed-width terminal table (no index column)."""
    if df.empty:
        return "(no rows)"
    shown = df.copy()
    for col in shown.columns:
        if shown[col].dtype.kind in "fiub" or shown[col].dtype == object:
            shown[col] = [fmt_number(v, digits) if not isinstance(v, str) else v
                          for v in shown[col]]
    return shown.to_string(index=False)


# ---------------------------------------------------------------------------- markdown
def _md_cell(v) -> str:
    s = v if isinstance(v, str) else fmt_number(v, 4)
    return s.replace("|", "\\|").replace("\n", " ")


def markdown_table(df: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table (numbers right-aligned)."""
    cols = list(df.columns)
    head = "| " + " | ".join(str(c) for c in cols) + " |"
    align = "|" + "|".join("---:" if df[c].dtype.kind in "fiu" else ":---" for c in cols) + "|"
    body = ["| " + " | ".join(_md_cell(v) for v in row) + " |"
            for row in df.itertuples(index=False, name=None)]
    return "\n".join([head, align, *body])


def markdown_meta(meta: dict) -> str:
    lines = []
    for k, v in meta.items():
        if isinstance(v, (list, tuple)):
            v = ", ".join(str(t) for t in v)
        elif isinstance(v, dict):
            v = ", ".join(f"{a}={b}" for a, b in v.items())
        lines.append(f"- **{k}**: {v}")
    return "\n".join(lines)


# -------------------------------------------------------------------------------- JSON
def json_value(v):
    """A JSON-safe value (:func:`experiments.outputs.json_safe`: NaN -> null, +-inf ->
    "inf"/"-inf", numpy -> Python)."""
    from .outputs import json_safe
    return json_safe(v)


def json_rows(df: pd.DataFrame) -> list[dict]:
    """Rows as JSON objects; a ``shape`` column's "[2, 3]" text becomes the list [2, 3]."""
    def cell(k, v):
        if k == "shape" and isinstance(v, str) and v.startswith("["):
            try:
                return json.loads(v)
            except ValueError:
                return v
        return json_value(v)
    return [{str(k): cell(k, v) for k, v in zip(df.columns, row)}
            for row in df.itertuples(index=False, name=None)]


def json_document(kind: str, meta: dict, df: pd.DataFrame, version: int = 1, **extra) -> dict:
    """The one output schema (:func:`outputs.document`) with the rows of ``df``."""
    return outputs.document(kind, meta, rows=json_rows(df), version=version, **extra)


def dumps(doc: dict) -> str:
    return json.dumps(doc, indent=2, allow_nan=False)


# ------------------------------------------------------------------------------ writers
from .defaults import OUT_SUFFIXES  # noqa: E402,F401  (one definition: defaults.py)


def table_members(path) -> list[tuple[str, str]]:
    """The output set of ``--out PATH``: the table, then (for CSV) its meta sidecar, which
    names the table and its SHA-256 and is published last."""
    return [(str(path), "--out")] + [(c, "--out") for c in outputs.companions(path)]


def write_table(path, kind: str, meta: dict, df: pd.DataFrame, *, title: str = "",
                extra_md: str = "", **json_extra) -> Path:
    """Write ``df`` (+ ``meta``) to ``path``; the suffix picks CSV, Markdown or JSON.  A CSV
    and its sidecar are one output set (:func:`outputs.output_set`): both or neither."""
    path = outputs.check_output_file(path, "--out", OUT_SUFFIXES)
    for c in outputs.companions(path):
        outputs.check_output_file(c, "--out")
    suffix = path.suffix.lower()
    doc = json_document(kind, meta, df, **json_extra)
    with outputs.output_set(table_members(path)):
        if suffix == ".csv":
            # the CSV stays a plain table; its meta goes to a sidecar FILE.csv.meta.json
            text = df.to_csv(index=False, na_rep="")
            outputs.write_text(path, text)
            side = {k: v for k, v in doc.items() if k != "rows"}
            side["table"] = path.name
            # a reader can tell the sidecar belongs to this very table
            side["table_sha256"] = hashlib.sha256(text.encode("utf-8")).hexdigest()
            outputs.write_text(str(path) + ".meta.json", outputs.dumps(side) + "\n")
        elif suffix == ".json":
            outputs.write_text(path, dumps(doc) + "\n")
        else:
            parts = [f"# {title or 'scalarlab ' + kind}", "", markdown_meta(doc["meta"]), "",
                     markdown_table(df), ""]
            if extra_md:
                parts += [extra_md, ""]
            outputs.write_text(path, "\n".join(parts))
    return path


def write_outputs(args, kind: str, meta: dict, df: pd.DataFrame, *, plot=None,
                  title: str = "", extra_md: str = "", **json_extra) -> list[str]:
    """The output flags every table command shares: ``--out`` (:func:`write_table`),
    ``--plot`` (``plot(path)`` draws the PNG) and ``--json`` (the JSON document on stdout,
    the "wrote PATH" notes on stderr so that stdout stays parseable).

    Table, sidecar and plot are one output set: the plot is drawn first, and a plot that
    fails replaces nothing.  Returns the notes for the text view to print after its table
    (already printed when ``--json`` was given).
    """
    plot_path = args.plot if plot is not None and getattr(args, "plot", None) else None
    members = ([(plot_path, "--plot")] if plot_path else []) + \
        (table_members(args.out) if args.out else [])
    with outputs.output_set(members):
        if plot_path:
            plot(plot_path)
        if args.out:
            write_table(args.out, kind, meta, df, title=title, extra_md=extra_md,
                        **json_extra)
    notes = [f"wrote {p}" for p in (args.out, plot_path) if p]
    if args.json:
        print(dumps(json_document(kind, meta, df, **json_extra)))
        for n in notes:
            print(n, file=sys.stderr)
    return notes


# -------------------------------------------------------------------------------- plots
def new_figure(nrows: int = 1, ncols: int = 1):
    """A matplotlib figure on the Agg backend at the lab's fixed PNG size."""
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(nrows, ncols, figsize=PLOT_SIZE_IN, dpi=PLOT_DPI)
    fig.subplots_adjust(left=0.1, right=0.98, top=0.92, bottom=0.16, hspace=0.35)
    return fig, ax


def finish_figure(fig, ax, path, xlabel: str, ylabel: str, title: str) -> Path:
    """The house style of a one-axes plot (labels, a 10-point title, light grid, 8-point
    legend), saved as by :func:`save_figure`."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def save_figure(fig, path) -> Path:
    """Save ``fig`` as PNG at exactly PLOT_SIZE_IN x PLOT_DPI pixels, then close it."""
    import matplotlib.pyplot as plt
    path = Path(path)
    if path.suffix.lower() != ".png":
        plt.close(fig)
        raise OutputError(f"--plot {path}: plots are written as PNG; name the file *.png")
    try:
        outputs.check_output_file(path, "--plot", (".png",))
        # Fixed margins instead of tight_layout (which draws the figure twice): the size
        # stays exactly PLOT_SIZE_IN x PLOT_DPI (no bbox='tight' either).  Drawn under a
        # staging name and published with the command's other outputs (or alone): an
        # interrupted run leaves no partial PNG.
        with outputs.atomic_path(path, "--plot") as tmp:
            fig.savefig(tmp, format="png", dpi=PLOT_DPI)
    finally:
        plt.close(fig)
    return path


def plot_pixels() -> tuple[int, int]:
    """(width, height) in pixels of every PNG written by :func:`save_figure`."""
    return int(round(PLOT_SIZE_IN[0] * PLOT_DPI)), int(round(PLOT_SIZE_IN[1] * PLOT_DPI))


def ensure_dir(path) -> Path:
    path = Path(path)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"--out {path}: cannot create directory: {exc.strerror or exc}") \
            from None
    return path
