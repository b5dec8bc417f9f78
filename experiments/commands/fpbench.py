"""``scalarlab fpbench``: bits of error of FPBench benchmarks (FPCore files) per context."""
from __future__ import annotations

import sys

from .. import argtypes as T
from . import help_of
from .. import defaults as D
from ..lazy_import import lazy

# Heavy modules load when a run first uses them: --help builds the parser without them.
CS = lazy("scalarlab.experiments.cases")
_errors = lazy("scalarlab.experiments.errors")
F = lazy("scalarlab.experiments.fpbench")
outputs = lazy("scalarlab.experiments.outputs")
progress = lazy("scalarlab.experiments.progress")
tables = lazy("scalarlab.experiments.tables")

NAME = "fpbench"
HELP = help_of(NAME)


def add_arguments(p) -> None:
    p.add_argument("files", nargs="+", metavar="FILE.fpcore", type=T.existing_file(),
                   help="FPCore files")
    p.add_argument("--contexts", type=T.contexts, default=",".join(D.FPBENCH_CONTEXTS),
                   metavar="A,B,...",
                   help=f"binary-format contexts (default {','.join(D.FPBENCH_CONTEXTS)})")
    p.add_argument("--samples", type=T.integer(1), default=D.FPBENCH_SAMPLES, metavar="N",
                   help=f"valid samples per benchmark and context (default {D.FPBENCH_SAMPLES})")
    p.add_argument("--sampling", choices=("bitpattern", "box"), default="bitpattern",
                   help="bitpattern: uniform over the format's values in the precondition's "
                        "box (Herbie); box: uniform reals rounded to the format (default "
                        "bitpattern)")
    p.add_argument("--seed", type=T.integer(0), default=0, metavar="S",
                   help="random seed (default 0)")
    p.add_argument("--threshold", type=T.real(0), default=D.FPBENCH_THRESHOLD_BITS,
                   metavar="BITS",
                   help="divergence = first node whose max bits of error exceeds BITS "
                        f"(default {D.FPBENCH_THRESHOLD_BITS:g})")
    p.add_argument("--reference-bits", type=T.integer(53, 100000),
                   default=D.FPBENCH_REFERENCE_BITS, metavar="P",
                   help="the Arb oracle's starting precision in bits (doubled per undecided "
                        f"sample up to {D.FPBENCH_MAX_ORACLE_BITS}; "
                        f"default {D.FPBENCH_REFERENCE_BITS})")
    p.add_argument("--only", default=None, metavar="NAME",
                   help="run only the benchmarks whose :name contains NAME")
    p.add_argument("--input-file", type=T.npy_file, default=None, metavar="X.npy",
                   help="samples instead of sampling: N rows x one column per argument (in "
                        "argument order); needs exactly one selected benchmark")
    p.add_argument("--alts", action="store_true",
                   help="also measure each benchmark's :alt forms on the original's samples "
                        "(one row each after the original's, column variant = 'alt N')")
    p.add_argument("--scheduler", type=T.dask_address, default=None, metavar="ADDRESS",
                   help="run each benchmark x context as a task on an existing Dask "
                        "scheduler tcp://HOST:PORT (same table as the local run)")
    p.add_argument("--connect-timeout", type=T.real(0, 3600, lo_open=True), default=10.0,
                   metavar="SEC", help="seconds to wait for the Dask scheduler (and for a "
                                       "worker when none is left)")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    p.add_argument("--out", type=T.output_file(".csv", ".md", ".json"), default=None,
                   metavar="FILE",
                   help="also write the table to FILE (.csv, .md or .json), atomically")
    progress.add_arguments(p, quiet=True)


def header_lines(args, progs, contexts, x) -> list:
    """What the run will measure, shown before the work where progress is shown."""
    return [f"scalarlab fpbench: {len(progs)} benchmark{'s' if len(progs) != 1 else ''} "
            f"from {', '.join(map(str, args.files))}" + (" (and their :alt forms)"
                                                         if args.alts else ""),
            f"  contexts   : {', '.join(c.name for c in contexts)}",
            ("  samples    : the rows of " + args.input_file if x is not None else
             f"  samples    : {args.samples} valid per benchmark and context, {args.sampling} "
             f"sampling (seed {args.seed})"),
            f"  reference  : Arb balls from {args.reference_bits} bits, doubled per undecided "
            f"sample up to {max(D.FPBENCH_MAX_ORACLE_BITS, args.reference_bits)}",
            "  execution  : " + (f"dask scheduler {args.scheduler}" if args.scheduler
                                  else "local")]


def short_lines(df) -> list:
    """One warning per row measured on fewer samples than asked (``samples < asked``)."""
    lines = []
    ran = df[df["skip"] == ""]
    for _, r in ran[ran["samples"] < ran["asked"]].iterrows():
        alt = f" ({r['variant']})" if r["variant"] else ""
        lines.append(f"warning: {r['benchmark']}{alt} in {r['context']}: {r['samples']} of "
                     f"{r['asked']} samples ({r['invalid']} invalid, {r['unsettled']} "
                     f"unsettled, {r['rejected_pre']} rejected by :pre)")
    return lines


def table(args):
    """``(rows, meta)``: the FPBench table of the files in ``args`` as its flags ask and
    the meta of its JSON output; :func:`run` prints and writes them, the Python API
    (:func:`scalarlab.fpbench`) returns them as a DataFrame."""
    contexts = F.parse_contexts(args.contexts)
    progs = F.load_programs(args.files)
    if args.only is not None:
        progs = [p for p in progs if args.only in p.name]
        if not progs:
            raise _errors.ExperimentError(f"--only {args.only!r}: no benchmark name contains it")
    x = None
    if args.input_file is not None:
        runnable = [p for p in progs if p.graph is not None]
        if len(progs) != 1 or not runnable:
            raise _errors.ExperimentError(f"--input-file needs exactly one translatable benchmark "
                                  f"(select it with --only); {len(progs)} selected")
        case = CS.GraphCase(progs[0].name, progs[0].graph, progs[0].payload)
        from .. import sampling as S
        batch, _ = S.load_input_file(args.input_file, case)
        import numpy as np
        x = np.stack([np.asarray(batch[i]) for i in sorted(batch)], axis=1) \
            if isinstance(batch, dict) else np.asarray(batch).reshape(-1, 1)
    if progress.header_shown():
        progress.header(header_lines(args, progs, contexts, x))
    df, _ = F.run(progs, contexts, samples=args.samples, sampling=args.sampling,
                  seed=args.seed, threshold=args.threshold,
                  reference_bits=args.reference_bits, x=x, quiet=args.quiet,
                  alts=args.alts, scheduler=args.scheduler,
                  connect_timeout=args.connect_timeout)
    meta = {"files": list(args.files), "benchmarks": len(progs),
            "contexts": [c.name for c in contexts], "samples": args.samples,
            "sampling": "file " + args.input_file if x is not None else args.sampling,
            "seed": args.seed, "threshold_bits": args.threshold,
            "execution": (f"dask scheduler {args.scheduler}" if args.scheduler else "local"),
            "reference": f"Arb balls from {args.reference_bits} bits, doubled per undecided "
                         f"sample up to {max(D.FPBENCH_MAX_ORACLE_BITS, args.reference_bits)}; a "
                         f"sample counts when its ball lies inside one rounding interval of "
                         f"the format, else it is unsettled (never scored)",
            "metric": "bits = log2(1 + ULPs) of the output vs the exact value correctly "
                      "rounded into the context's format; NaN/inf outputs (nonfinite) score "
                      "the format's width (Herbie's counting)"}
    return df, meta


def run(args) -> int:
    out = args.out
    df, meta = table(args)
    if out is not None:
        tables.write_table(out, "fpbench", meta, df, title="scalarlab fpbench")
        outputs.note(f"wrote {out}", to_stderr=args.json)
    if args.json:
        for line in short_lines(df):
            print(line, file=sys.stderr)
        outputs.print_document(tables.json_document("fpbench", meta, df))
        return 0 if (df["skip"] == "").any() else 1
    cols = ["benchmark"] + (["variant"] if args.alts else []) + [
        "context", "samples", "rejected_pre", "invalid", "unsettled", "nonfinite",
        "mean_bits", "max_bits", "max_ulps", "pct_over_1bit", "divergence_node",
        "divergence_op", "skip"]
    view = df[cols].copy()
    view["benchmark"] = [b if len(b) <= 36 else b[:33] + "..." for b in view["benchmark"]]
    view["skip"] = [s if len(s) <= 40 else s[:37] + "..." for s in view["skip"]]
    view["divergence_node"] = ["" if v is None or v != v else str(int(v))
                               for v in view["divergence_node"]]
    from .. import terminal       # wider than the terminal: column blocks, keys repeated
    print(terminal.column_blocks(view, tables.render, keys=["benchmark", "variant",
                                                             "context"]))
    print()
    for line in F.summary_lines(df):
        print(line)
    for line in short_lines(df):
        print(line, file=sys.stderr)

    # a run that measured nothing did not check anything
    return 0 if (df["skip"] == "").any() else 1
