"""``scalarlab reduction-order``: ULP gaps between accumulation orders, per node."""
from __future__ import annotations

import argparse

from .. import argtypes as T
from ..command_args import (add_graph_and_input_arguments, add_output_arguments,
                            add_reference_arguments, add_sample_file_arguments,
                            batch_from_args, run_meta)
from .. import defaults as D
from ..lazy_import import lazy

# Heavy modules load when a run first uses them: --help builds the parser without them.
CS = lazy("scalarlab.experiments.cases")
R = lazy("scalarlab.experiments.reduction_order")
tables = lazy("scalarlab.experiments.tables")


def format_list(text: str) -> list[str]:
    """argparse ``type=``: format names; a context name stands for its format
    (``float64`` -> ``binary64``)."""
    from scalarlab import scalars
    from scalarlab.scalars import formats as F
    from scalarlab.scalars.errors import ScalarLabError
    out = []
    for name in T.name_list(text):
        try:
            out.append(F.get(name).name)
            continue
        except ScalarLabError as exc:
            first = exc
        try:
            fmt = scalars.get(name).fmt          # a declared flag of every context
        except ScalarLabError:
            fmt = None
        if fmt is None:
            raise argparse.ArgumentTypeError(str(first))
        out.append(fmt.name)
    if len(set(out)) != len(out):
        raise argparse.ArgumentTypeError(f"{text!r} names a format more than once")
    return out


format_list.__name__ = "list of formats"
from . import help_of

NAME = "reduction-order"
HELP = help_of(NAME)


def add_arguments(p) -> None:
    add_graph_and_input_arguments(p, samples_default=1000)
    add_sample_file_arguments(p, sampling=True)
    p.add_argument("--formats", type=format_list, default=",".join(D.REDUCTION_FORMATS),
                   metavar="F,G",
                   help="formats to study (or contexts: float64 = binary64) "
                        f"(default {','.join(D.REDUCTION_FORMATS)})")
    add_reference_arguments(p)
    add_output_arguments(p)


def run(args) -> int:
    case = CS.load_case(args.graph)
    fmts = list(args.formats)
    x, desc = batch_from_args(case, args)
    res = R.reduction_order(case, x, formats=fmts, reference=args.reference, input_desc=desc,
                            quiet=args.quiet, oracle_limit=args.oracle_limit,
                            check_samples=args.check_samples, seed=args.seed)
    meta = {**res.meta(), **run_meta(args, case, CS.center_of(case, args.input))}
    notes = tables.write_outputs(args, "reduction-order", meta, res.rows,
                                 plot=lambda path: R.plot(res, path),
                                 title=f"scalarlab reduction-order: {case.name}")
    if args.json:
        return 0
    print(f"scalarlab reduction-order: graph {case.name} ({len(case.nodes)} nodes)")
    print(f"  reference : {res.reference}")
    print(f"  input     : {desc}")
    print("  columns   : '<order> Δseq' = max ULP gap to the sequential order; "
          "'<order> vs ref' = max ULP to the correctly rounded reference")
    print("  native    : numpy float64 kernels (pairwise sum, BLAS), one rounding per op")
    for f, ctxs in res.contexts.items():
        print()
        names = ", ".join(f"{o}={c.name}" for o, c in ctxs.items())
        print(f"{f}: {names}")
        for o, why in res.missing[f].items():
            print(f"  ({o} order left out: {why})")
        print(tables.render(R.pivot(res, f)))
    for n in notes:
        print(n)
    return 0
