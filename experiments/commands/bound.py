"""``scalarlab bound``: sound round-off error bounds of FPCore programs or scalar graphs."""
from __future__ import annotations

import math
import sys

from .. import argtypes as T
from . import help_of
from .. import defaults as D
from ..lazy_import import lazy

# Heavy modules load when a run first uses them: --help builds the parser without them.
B = lazy("scalarlab.experiments.bound")
outputs = lazy("scalarlab.experiments.outputs")
progress = lazy("scalarlab.experiments.progress")
tables = lazy("scalarlab.experiments.tables")

NAME = "bound"
HELP = help_of(NAME)


def add_arguments(p) -> None:
    p.add_argument("sources", nargs="+", metavar="FILE.fpcore|GRAPH",
                   help="FPCore files (every program; FILE.fpcore#N the N-th) or a scalar "
                        "graph (its input nodes are the arguments; needs --box)")
    p.add_argument("--format", type=T.context_list, default=",".join(D.BOUND_FORMATS),
                   metavar="A,B,...",
                   help="binary point contexts whose execution is bounded (binary64, "
                        "binary32, bfloat16, binary16, ...)")
    p.add_argument("--box", default=None, metavar="LO:HI,...",
                   help="input box, one lo:hi per argument (one pair: all), instead of each "
                        "program's :pre")
    p.add_argument("--only", default=None, metavar="NAME",
                   help="only the programs whose :name contains NAME")
    p.add_argument("--inputs", choices=("format", "real"), default="format",
                   help="format: the arguments are format values (the lab's execution); "
                        "real: reals rounded once into the format (FPTaylor's tables)")
    p.add_argument("--samples", type=T.integer(0, 100000), default=D.BOUND_SAMPLES,
                   metavar="N", help="samples for the largest seen error (0: none)")
    p.add_argument("--seed", type=T.integer(0), default=0, metavar="S", help="random seed")
    p.add_argument("--budget", type=T.real(0, 3600, lo_open=True), default=D.BOUND_BUDGET_S,
                   metavar="SEC", help="branch-and-bound time per program and format")
    p.add_argument("--tol", type=T.real(0, 10), default=D.BOUND_TOL, metavar="REL",
                   help="stop splitting when the bound is within REL of the best "
                        "first-order value seen at a midpoint")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    p.add_argument("--out", type=T.output_file(".csv", ".md", ".json"), default=None,
                   metavar="FILE",
                   help="also write the table to FILE (.csv, .md or .json), atomically")
    progress.add_arguments(p, quiet=True)


PRE = "each program's :pre"


def header_lines(args) -> list:
    """What the run will bound, shown before the work where progress is shown."""
    formats = args.format if isinstance(args.format, str) else ", ".join(args.format)
    return [f"scalarlab bound: {', '.join(args.sources)}" +
            (f" (programs whose name contains {args.only!r})" if args.only else ""),
            f"  formats    : {formats}",
            "  inputs     : " + ("reals rounded once into the format" if args.inputs == "real"
                                 else "format values"),
            f"  box        : {args.box if args.box is not None else PRE}",
            f"  samples    : {args.samples} (seed {args.seed})",
            f"  budget     : {args.budget:g} s per program and format (tol {args.tol:g})"]


def _sci(v) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3e}"


def run(args) -> int:
    if progress.header_shown():
        progress.header(header_lines(args))
    df, meta = B.bound(args.sources if len(args.sources) > 1 else args.sources[0],
                       formats=args.format, box=args.box, only=args.only,
                       samples=args.samples, seed=args.seed,
                       real_inputs=args.inputs == "real", budget_s=args.budget,
                       tol=args.tol)
    meta["sources"] = list(args.sources)
    if args.out is not None:
        tables.write_table(args.out, "bound", meta, df, title="scalarlab bound")
        outputs.note(f"wrote {args.out}", to_stderr=args.json)
    bounded = df["skip"] == ""
    failed = int(df["violations"].sum())
    if args.json:
        outputs.print_document(tables.json_document("bound", meta, df))
    else:
        view = df[["benchmark", "format", "bound_abs", "bound_rel", "sampled_max", "ratio",
                   "fptaylor", "time_s", "skip"]].copy()
        view["benchmark"] = [b if len(b) <= 28 else b[:25] + "..." for b in view["benchmark"]]
        for c in ("bound_abs", "bound_rel", "sampled_max", "fptaylor"):
            view[c] = [_sci(v) for v in view[c]]
        view["ratio"] = ["" if v != v else f"{v:.2f}" for v in view["ratio"]]
        view["time_s"] = ["" if v != v else f"{v:.2f}" for v in view["time_s"]]
        view["skip"] = [s if len(s) <= 48 else s[:45] + "..." for s in view["skip"]]
        print(tables.render(view))
        print()
        print(f"{int(bounded.sum())} of {len(df)} rows bounded ({meta['inputs']}); "
              f"bound below a sampled error: {failed} samples")
    if failed:
        print(f"scalarlab bound: error: {failed} sampled errors exceed their bound",
              file=sys.stderr)
        return 1
    # a run that bounded nothing did not check anything
    return 0 if bounded.any() else 1
