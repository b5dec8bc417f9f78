"""``scalarlab report``: the standard experiments on the built-in graphs, as a Markdown report."""
from __future__ import annotations

import os

from .. import argtypes as T
from . import help_of
from ..lazy_import import lazy

# Heavy modules load when a run first uses them: --help builds the parser without them.
outputs = lazy("scalarlab.experiments.outputs")
R = lazy("scalarlab.experiments.report")

NAME = "report"
HELP = help_of(NAME)


def add_arguments(p) -> None:
    p.add_argument("--out", type=T.output_dir(), default="scalarlab-report", metavar="DIR",
                   help="directory for report.md, CSVs and PNGs: a new or empty one, or one "
                        "an earlier report wrote (replaced as a whole when the report is "
                        "complete); a folder holding other files is refused (default "
                        "./scalarlab-report)")
    p.add_argument("--samples", type=T.integer(1), default=1000, metavar="N",
                   help="sampled inputs for the sampled compare and reduction-order (default 1000)")
    p.add_argument("--gap-samples", type=T.integer(1), default=2000, metavar="N",
                   help="sampled inputs per gaps run (default 2000)")
    p.add_argument("--graphs", type=T.name_list, default=None, metavar="A,B",
                   help="built-in graphs or graph files for the discrepancy tables at their "
                        "own inputs (default: all built-ins)")
    p.add_argument("--graph", default="six-node", metavar="GRAPH",
                   help="built-in graph or graph file for the sampled sections (default "
                        "six-node)")
    p.add_argument("--input", type=T.input_spec, default=None, metavar="X",
                   help="centre of the sampled sections (default: --graph's x0)")
    p.add_argument("--seed", type=T.integer(0), default=0, metavar="S",
                   help="random seed (default 0)")
    p.add_argument("--tightness", default=None, metavar="A,B",
                   help="networks of the bound-tightness section: six-node, "
                        "mlp-784-256-256-10, cnn-28x28 (default all; 'none' for no section)")
    p.add_argument("--json", action="store_true", help="print the list of files as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def run(args) -> int:
    from ..errors import ExperimentError
    graphs = None
    known = R.builtin_graphs()
    if args.graphs is not None:
        graphs = list(args.graphs)
        bad = [g for g in graphs if g not in known and not os.path.isfile(g)]
        if bad:
            raise ExperimentError(f"--graphs: {', '.join(bad)}: neither a built-in graph nor "
                                  f"a file; built-ins: {', '.join(known)}")
    if args.graph not in known and not os.path.isfile(args.graph):
        raise ExperimentError(f"--graph {args.graph}: neither a built-in graph nor a file; "
                              f"built-ins: {', '.join(known)}")
    tight = None
    if args.tightness is not None:
        from .. import tightness as TT
        tight = [t.strip() for t in args.tightness.split(",") if t.strip() and t.strip() != "none"]
        bad = [t for t in tight if t not in TT.NETWORKS]
        if bad:
            raise ExperimentError(f"--tightness: unknown network(s) {', '.join(bad)}; known: "
                                  f"{', '.join(TT.NETWORKS)}")
    rep = R.write_report(args.out, samples=args.samples, gap_samples=args.gap_samples,
                         seed=args.seed, quiet=args.quiet, graphs=graphs, graph=args.graph,
                         center=args.input, tightness=tight)
    if args.json:
        meta = {"graph": outputs.graph_meta(args.graph), "graphs": graphs or known,
                "samples": args.samples, "gap_samples": args.gap_samples, "seed": args.seed,
                "directory": str(rep.directory)}
        print(outputs.dumps(outputs.document(
            "report", meta, rows=[{"file": f} for f in rep.files],
            directory=str(rep.directory), files=rep.files)))
        return 0
    print(f"wrote {rep.directory / R.REPORT_NAME} with {len(rep.files) - 1} tables and plots:")
    for f in rep.files[1:]:
        print(f"  {rep.directory / f}")
    return 0
