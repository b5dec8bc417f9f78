"""``scalarlab contexts``: every scalar context and what it promises.

Lists each registered context (``scalars.names()``) plus one concrete example of each
parametrised family (``binary(E,M)``, ``mpmath:PREC``, ``interval:BASE``, ``dual:BASE``)
with its kind, exactness, interval-ness, value format, reduction order and the set of
correctly rounded operations, as a table or as JSON (``--json``), and the aliases the
registry accepts (``fp32`` -> ``binary32``, ...).
"""
from __future__ import annotations

import textwrap

from . import help_of

# The registry, the contexts and pandas are imported where they are used: building this
# command's parser (its --help) imports none of them.

NAME = "contexts"
HELP = help_of(NAME)

# Concrete instances shown for the parametrised families (when the family is registered).
FAMILY_EXAMPLES = ("binary(5,10)", "binary(8,7)", "e4m3@binary32", "mpmath:100",
                   "interval:binary16", "interval:mpmath:100",
                   "dual:binary32", "dual:rational")


def add_arguments(parser) -> None:
    parser.add_argument("--json", action="store_true",
                        help="print a JSON object instead of the table")
    parser.add_argument("--name", action="append", default=None, metavar="CONTEXT",
                        help="describe only this context (repeatable; any family member, "
                             "e.g. binary(4,3) or mpmath:300)")


def collect(only=None) -> tuple[list[dict], list[str]]:
    """Property dicts of the contexts to list, and the family patterns registered."""
    from scalarlab import scalars
    from scalarlab.scalars.errors import ScalarLabError
    families = scalars.family_examples()
    if only:
        names = list(dict.fromkeys(only))      # an alias is listed under the name given
    else:
        names = list(scalars.names())
        for ex in FAMILY_EXAMPLES:
            if ex in names:
                continue
            try:
                scalars.get(ex)
            except ScalarLabError:
                continue  # that family is not registered (yet): nothing to show
            names.append(ex)
    rows = []
    for name in names:
        ctx = scalars.get(name)  # unknown names raise ContextError listing the valid ones
        props = dict(ctx.properties())
        props["name"] = name
        props["listed"] = name in scalars.names()
        rows.append(props)
    return rows, families


def _table(rows: list[dict], cols: int | None = None) -> str:
    """The listing; with ``cols``, the free-text columns (format, correctly rounded) are
    wrapped inside their cells so that the table fits ``cols`` characters."""
    df = _frame(rows)
    text = _plain(df)
    if cols is None or max(len(ln) for ln in text.splitlines()) <= cols:
        return text
    return _wrapped(df, cols)


def _plain(df) -> str:
    df = df.copy()
    for col in df.columns:  # left-align text cells (to_string right-aligns values)
        width = max(len(col), int(df[col].str.len().max()))
        df[col] = df[col].str.ljust(width)
    return df.to_string(index=False, justify="left")


FREE_TEXT = ("format", "correctly rounded")


def _wrapped(df, cols: int) -> str:
    """Rows of several lines: the fixed columns at their width, the free-text columns
    share what is left (format at most a third of it), wrapped at spaces.  Where fewer
    than 20 characters would be left for the correctly rounded operations, they go on
    indented lines of their own under each row (and the format too, where it has fewer
    than 12 characters left beside the fixed columns)."""
    width = {c: max(len(c), int(df[c].str.len().max())) for c in df.columns}
    fixed = sum(width[c] for c in df.columns if c not in FREE_TEXT) + len(df.columns) - 1
    room = cols - fixed
    width["format"] = min(width["format"], max(12, room // 3))
    width["correctly rounded"] = room - width["format"]
    below = [] if width["correctly rounded"] >= 20 else ["correctly rounded"]
    if below and room + 1 < min(12, width["format"]) + 1:
        below.insert(0, "format")
    elif below:
        width["format"] = min(width["format"], room + 1)
    shown = [c for c in df.columns if c not in below]
    out = []
    for n, row in enumerate([dict(zip(df.columns, df.columns))] + df.to_dict("records")):
        cells = {c: textwrap.wrap(row[c], width[c], break_on_hyphens=False,
                                   break_long_words=False) or [""]
                 for c in shown}
        for i in range(max(len(v) for v in cells.values())):
            out.append(" ".join((cells[c][i] if i < len(cells[c]) else "").ljust(width[c])
                                for c in shown).rstrip())
        for c in below if n else ():
            out.extend(textwrap.wrap(f"{c}: {row[c]}", max(20, cols - 4),
                                     initial_indent="    ", subsequent_indent="    ",
                                     break_on_hyphens=False))
    return "\n".join(out)


def _frame(rows: list[dict]):
    import pandas as pd
    return pd.DataFrame([{
        "name": r["name"],
        "kind": r["kind"],
        "exact": "yes" if r["exact"] else "no",
        "interval": "yes" if r["interval"] else "no",
        "dual": "yes" if r.get("dual") else "no",
        "format": r["format"] if r["format"] else "-",
        "reduction": r["reduction"],
        "correctly rounded": " ".join(r["correctly_rounded"]) or "-",
    } for r in rows])


def run(args) -> int:
    from scalarlab.scalars.registry import aliases
    rows, families = collect(args.name)
    if args.json:
        from .. import outputs
        outputs.print_document(outputs.document(
            "contexts", {"names": args.name}, rows=rows, families=families,
            aliases=aliases()))
        return 0
    from .. import terminal
    cols = terminal.width()                 # None: full width (stdout is not a terminal)
    print(_table(rows, cols))
    notes = []
    if families:
        notes.append("families (any parameter works with scalars.get): " +
                     ", ".join(families))
    if not args.name:
        notes.append("aliases (also inside interval:/dual: names): " +
                     ", ".join(f"{a} -> {c}" for a, c in aliases().items()))
    if notes:
        print()
    for line in notes:
        print(textwrap.fill(line, cols, subsequent_indent="  ", break_on_hyphens=False)
              if cols else line)
    return 0
