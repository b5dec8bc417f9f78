"""``scalarlab gaps``: the distribution of one context's output rounding gap."""
from __future__ import annotations

from .. import argtypes as T
from ..command_args import (add_output_arguments, add_reference_arguments,
                            add_sample_file_arguments, run_meta)
from . import help_of
from .. import defaults as D
from ..lazy_import import lazy

# Heavy modules load when a run first uses them: --help builds the parser without them.
scalars = lazy("scalarlab.scalars")
CS = lazy("scalarlab.experiments.cases")
_errors = lazy("scalarlab.experiments.errors")
G = lazy("scalarlab.experiments.gaps")
progress = lazy("scalarlab.experiments.progress")
tables = lazy("scalarlab.experiments.tables")

NAME = "gaps"
HELP = help_of(NAME)


def add_arguments(p) -> None:
    p.add_argument("graph", nargs="?", default=None, metavar="GRAPH",
                   help="built-in graph name (default: six-node) or a graph file")
    p.add_argument("--context", type=T.context_name, default="binary32", metavar="CTX",
                   help="context whose gap is measured (default binary32)")
    p.add_argument("--samples", type=T.integer(1), default=2000, metavar="N",
                   help="number of sampled inputs (default 2000)")
    p.add_argument("--sampling", choices=D.GAPS_SAMPLINGS, default="box",
                   help="box: uniform in the box, rounded to the format; bitpattern: "
                        "uniform over the format's values in the box (default box)")
    p.add_argument("--input", type=T.input_spec, default=None, metavar="X",
                   help="centre of the box as comma-separated decimals (default: the graph's x0)")
    p.add_argument("--radius", type=T.radius, default=0.05, metavar="R",
                   help="l-inf radius of the sampling box (default 0.05)")
    p.add_argument("--seed", type=T.integer(0), default=0, metavar="S",
                   help="random seed (default 0)")
    p.add_argument("--node", type=T.integer(0), default=None, metavar="ID",
                   help="node whose gap is measured (default: the graph's output)")
    add_sample_file_arguments(p)
    add_reference_arguments(p)
    add_output_arguments(p)
    progress.add_arguments(p)


def _header(case, ctx, args, sampling, samples, radius, center_desc) -> None:
    """The header on the progress stream before the work, when progress is shown and the
    header can be made (a bad --node or a context without a format is refused by the
    work itself, with its own message)."""
    node = case.output_id if args.node is None else int(args.node)
    if not progress.header_shown() or not 0 <= node < len(case.nodes):
        return
    try:
        lines = G.plan_lines(case, node, ctx, f"{args.reference} (asked; the table's "
                             f"header says what was used)", sampling, samples, radius,
                             args.seed, center_desc)
    except _errors.ExperimentError:
        return
    progress.header(lines)


def table(args, case):
    """``(summary, meta, result, context)``: the gap distribution of ``case`` as the flags
    in ``args`` ask and the meta of its JSON output; :func:`run` prints and writes them,
    the Python API (:func:`scalarlab.gaps`) returns them as a DataFrame."""
    ctx = scalars.get(args.context)
    from .. import sampling
    if args.input_file is not None or args.box is not None:
        CS.check_point_context(ctx, "--context")
        got = sampling.batch_from_flags(case, args, fmt=G._fmt_of(ctx), sampling=args.sampling)
        _header(case, ctx, args, args.sampling if args.box else "file", CS.batch_size(got[0]),
                float("nan"), got[1])
        res = G.gaps(case, ctx, x=got[0], sampling=args.sampling if args.box else "file",
                     seed=args.seed, reference=args.reference, node=args.node,
                     quiet=args.quiet, oracle_limit=args.oracle_limit,
                     check_samples=args.check_samples, center_desc=got[1])
        center, source = None, "--box" if args.box is not None else "--input-file"
    else:
        center = CS.center_of(case, args.input)
        if CS.batch_size(center) != 1:
            raise _errors.ExperimentError("--input must be a single centre input for gaps")
        _header(case, ctx, args, args.sampling, args.samples, args.radius,
                "--input" if args.input is not None else "x0")
        res = G.gaps(case, ctx, samples=args.samples, sampling=args.sampling,
                     radius=args.radius, seed=args.seed, center=center,
                     reference=args.reference, node=args.node, quiet=args.quiet,
                     oracle_limit=args.oracle_limit, check_samples=args.check_samples,
                     center_desc="--input" if args.input is not None else "x0")
        source = None
    meta = {**res.meta(), **run_meta(args, case, center)}
    if res.reference.check:        # how the reference was settled (enclosure / oracle)
        meta["reference_check"] = res.reference.check
    if source is not None:
        meta["input_source"] = source
    return res.summary, meta, res, ctx


def run(args) -> int:
    case = CS.load_case(args.graph)
    summary, meta, res, ctx = table(args, case)
    hist = res.histogram()
    hist_md = "## Histogram (ULP distance: output entries)\n\n" + \
        ", ".join(f"{k}: {v}" for k, v in hist.items())
    notes = tables.write_outputs(args, "gaps", meta, summary,
                                 plot=lambda path: G.plot_histogram(res, path),
                                 title=f"scalarlab gaps: {case.name} in {ctx.name}",
                                 extra_md=hist_md, histogram=hist)
    if args.json:
        return 0
    print("\n".join(G.header_lines(res)))
    print()
    view = res.summary[["metric", "mean", "p50", "p90", "p99", "p99.9", "max"]]
    print(tables.render(view))
    print()
    shown = list(hist.items())
    more = f", ... ({len(shown) - 12} more)" if len(shown) > 12 else ""
    print("histogram (ULP: entries): " + ", ".join(f"{k}: {v}" for k, v in shown[:12]) + more)
    print(f"verdict: {G.verdict_text(res)}")
    for n in notes:
        print(n)
    return 0
