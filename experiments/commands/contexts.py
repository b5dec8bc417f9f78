"""``scalarlab contexts``: every scalar context and what it promises.

Lists each registered context (``scalars.names()``) plus one concrete example of each
parametrised family (``binary(E,M)``, ``mpmath:PREC``, ``interval:BASE``, ``dual:BASE``)
with its kind, exactness, interval-ness, value format, reduction order and the set of
correctly rounded operations, as a table or as JSON (``--json``), and the aliases the
registry accepts (``fp32`` -> ``binary32``, ...).
"""
from __future__ import annotations

import pandas as pd

from scalarlab import scalars
from scalarlab.scalars.errors import ScalarLabError
from scalarlab.scalars.registry import aliases
from . import help_of

NAME = "contexts"
HELP = help_of(NAME)

# Concrete instances shown for the parametrised families (when the family is registered).
FAMILY_EXAMPLES = ("binary(5,10)", "binary(8,7)", "mpmath:100", "interval:binary16",
                   "interval:mpmath:100", "dual:binary32", "dual:rational")


def add_arguments(parser) -> None:
    parser.add_argument("--json", action="store_true",
                        help="print a JSON object instead of the table")
    parser.add_argument("--name", action="append", default=None, metavar="CONTEXT",
                        help="describe only this context (repeatable; any family member, "
                             "e.g. binary(4,3) or mpmath:300)")


def collect(only=None) -> tuple[list[dict], list[str]]:
    """Property dicts of the contexts to list, and the family patterns registered."""
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


def _table(rows: list[dict]) -> str:
    df = pd.DataFrame([{
        "name": r["name"],
        "kind": r["kind"],
        "exact": "yes" if r["exact"] else "no",
        "interval": "yes" if r["interval"] else "no",
        "dual": "yes" if r.get("dual") else "no",
        "format": r["format"] if r["format"] else "-",
        "reduction": r["reduction"],
        "correctly rounded": " ".join(r["correctly_rounded"]) or "-",
    } for r in rows])
    for col in df.columns:  # left-align text cells (to_string right-aligns values)
        width = max(len(col), int(df[col].str.len().max()))
        df[col] = df[col].str.ljust(width)
    return df.to_string(index=False, justify="left")


def run(args) -> int:
    rows, families = collect(args.name)
    if args.json:
        from .. import outputs
        outputs.print_document(outputs.document(
            "contexts", {"names": args.name}, rows=rows, families=families,
            aliases=aliases()))
        return 0
    print(_table(rows))
    if families:
        print()
        print("families (any parameter works with scalars.get): " + ", ".join(families))
    if not args.name:
        print("aliases (also inside interval:/dual: names): " +
              ", ".join(f"{a} -> {c}" for a, c in aliases().items()))
    return 0
