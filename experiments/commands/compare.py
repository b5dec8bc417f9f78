"""``scalarlab compare``: the discrepancy table of one graph across scalar contexts."""
from __future__ import annotations

from .. import argtypes as T
from ..command_args import (add_graph_and_input_arguments, add_output_arguments,
                            add_reference_arguments, add_sample_file_arguments,
                            batch_from_args, run_meta)
from . import help_of
from .. import defaults as D
from ..lazy_import import lazy

# Heavy modules load when a run first uses them: --help builds the parser without them.
CS = lazy("scalarlab.experiments.cases")
C = lazy("scalarlab.experiments.compare")
TB = lazy("scalarlab.experiments.compare_table")
progress = lazy("scalarlab.experiments.progress")
tables = lazy("scalarlab.experiments.tables")

NAME = "compare"
HELP = help_of(NAME)


def add_arguments(p) -> None:
    add_graph_and_input_arguments(p)
    add_sample_file_arguments(p, sampling=True)
    p.add_argument("--contexts", type=T.contexts, default=",".join(D.COMPARE_CONTEXTS),
                   metavar="A,B,...",
                   help=f"contexts to compare (default {','.join(D.COMPARE_CONTEXTS)})")
    add_reference_arguments(p)
    p.add_argument("--threshold", type=T.real(0), default=D.COMPARE_THRESHOLD_BITS,
                   metavar="BITS",
                   help="exceeds_threshold = a node whose max bits of error per entry "
                        f"exceeds BITS (default {D.COMPARE_THRESHOLD_BITS:g})")
    p.add_argument("--divergence-ulps", type=T.real(0), default=D.DEFAULT_DIVERGENCE_ULPS,
                   metavar="ULPS",
                   help="divergence = first node whose normwise error exceeds ULPS ulps of "
                        f"its own scale (default {D.DEFAULT_DIVERGENCE_ULPS:g})")
    add_output_arguments(p)
    progress.add_arguments(p)


def table(args, case):
    """``(rows, meta, result)``: the discrepancy table of ``case`` as the flags in ``args``
    ask, the meta of its JSON output and the :class:`~experiments.compare_table.
    CompareResult` (verdicts, header); :func:`run` prints and writes them, the Python API
    (:func:`scalarlab.compare`) returns them as a DataFrame."""
    x, desc = batch_from_args(case, args)
    # where progress is shown, the header comes before the work (stdout's comes with the
    # table: the reference's label says what was used, known only after the work), and
    # before the contexts' check, which loads their compiled conversions (~1 s cold)
    if progress.header_shown() and not isinstance(args.contexts, str):   # resolved already
        progress.header(TB.plan_lines(case, list(args.contexts), f"{args.reference} (asked; "
                                      f"the table's header says what was used)", desc,
                                      CS.batch_size(x), args.divergence_ulps))
    contexts = CS.parse_contexts(args.contexts)
    res = C.compare(case, contexts, x, reference=args.reference, threshold=args.threshold,
                    input_desc=desc, quiet=args.quiet, oracle_limit=args.oracle_limit,
                    check_samples=args.check_samples, seed=args.seed,
                    divergence_ulps=args.divergence_ulps)
    sampled = getattr(args, "box", None) is not None or \
        getattr(args, "input_file", None) is not None
    meta = {**res.meta(), **run_meta(args, case, None if sampled else
                                     CS.center_of(case, args.input))}
    if res.reference.check:        # how the reference was settled (enclosure / oracle)
        meta["reference_check"] = res.reference.check
    if sampled:
        meta["input_source"] = "--box" if args.box is not None else "--input-file"
    return res.rows, meta, res


def run(args) -> int:
    case = CS.load_case(args.graph)
    rows, meta, res = table(args, case)
    verdicts = [v for v in res.verdicts.values()]
    md_verdicts = "## Verdicts\n\n" + "\n".join(f"- **{v['context']}** "
                                                f"[{v['reduction']}]: {v['text']}"
                                                for v in verdicts)
    notes = tables.write_outputs(args, "compare", meta, rows,
                                 plot=lambda path: TB.plot_normwise(res, path),
                                 title=f"scalarlab compare: {case.name}", extra_md=md_verdicts,
                                 verdicts=verdicts)
    if args.json:
        return 0
    print("\n".join(TB.header_lines(res)))
    print()
    print(tables.render(TB.display_frame(res.rows)))
    print()
    print("verdict:")
    width = max(len(v["context"]) for v in verdicts)
    for v in verdicts:
        print(f"  {v['context']:<{width}}  {v['text']}")
    for n in notes:
        print(n)
    if not (args.out or args.plot or args.quiet):
        print("more: --samples N (sampled inputs), --out FILE.csv|.md|.json, --plot FILE.png; "
              "scalarlab gaps | reduction-order | report")
    return 0
