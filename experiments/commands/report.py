"""``scalarlab report``: the standard experiments on the built-in graphs, as a Markdown report."""
from __future__ import annotations

import json

from .. import report as R

NAME = "report"
HELP = ("run the standard experiments (compare, gaps, reduction-order) on the built-in graphs "
        "and write report.md with its tables (CSV) and plots (PNG)")


def add_arguments(p) -> None:
    p.add_argument("--out", default="scalarlab-report", metavar="DIR",
                   help="directory for report.md, CSVs and PNGs (default ./scalarlab-report)")
    p.add_argument("--samples", type=int, default=1000, metavar="N",
                   help="sampled inputs for the sampled compare and reduction-order (default 1000)")
    p.add_argument("--gap-samples", type=int, default=2000, metavar="N",
                   help="sampled inputs per gaps run (default 2000)")
    p.add_argument("--graphs", default=None, metavar="A,B",
                   help="built-in graphs for the discrepancy tables (default: all built-ins)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (default 0)")
    p.add_argument("--tightness", default=None, metavar="A,B",
                   help="networks of the bound-tightness section: six-node, "
                        "mlp-784-256-256-10, cnn-28x28 (default all; 'none' for no section)")
    p.add_argument("--json", action="store_true", help="print the list of files as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def run(args) -> int:
    from ..compare import ExperimentError
    if args.samples < 1 or args.gap_samples < 1:
        raise ExperimentError("--samples and --gap-samples must be >= 1")
    graphs = None
    if args.graphs is not None:
        graphs = [g.strip() for g in args.graphs.split(",") if g.strip()]
        known = R.builtin_graphs()
        bad = [g for g in graphs if g not in known]
        if bad or not graphs:
            raise ExperimentError(f"--graphs: unknown built-in graph(s) {', '.join(bad) or '(none)'};"
                                  f" built-ins: {', '.join(known)}")
    tight = None
    if args.tightness is not None:
        from .. import tightness as TT
        tight = [t.strip() for t in args.tightness.split(",") if t.strip() and t.strip() != "none"]
        bad = [t for t in tight if t not in TT.NETWORKS]
        if bad:
            raise ExperimentError(f"--tightness: unknown network(s) {', '.join(bad)}; known: "
                                  f"{', '.join(TT.NETWORKS)}")
    rep = R.write_report(args.out, samples=args.samples, gap_samples=args.gap_samples,
                         seed=args.seed, quiet=args.quiet, graphs=graphs, tightness=tight)
    if args.json:
        print(json.dumps({"format": "scalarlab-report", "version": 1,
                          "directory": str(rep.directory), "files": rep.files}, indent=2))
        return 0
    print(f"wrote {rep.directory / R.REPORT_NAME} with {len(rep.files) - 1} tables and plots:")
    for f in rep.files[1:]:
        print(f"  {rep.directory / f}")
    return 0
