"""``scalarlab compare``: the discrepancy table of one graph across scalar contexts."""
from __future__ import annotations

from .. import argtypes as T
from .. import compare as C
from .. import outputs
from .. import tables

NAME = "compare"
HELP = ("evaluate a graph in several contexts against an oracle: per node x context max/mean "
        "absolute, relative, ULP and bits of error, and where divergence starts")


def add_graph_and_input_arguments(p, *, samples_default=None, radius_default=0.05) -> None:
    """GRAPH, --input, --samples, --radius, --seed (shared with gaps and reduction-order)."""
    p.add_argument("graph", nargs="?", default=None, metavar="GRAPH",
                   help="built-in graph name (default: six-node) or a graph file")
    p.add_argument("--input", type=T.input_spec, default=None, metavar="X",
                   help="input as comma-separated exact decimals (e.g. '0.3,-0.2,0.1,0.4') "
                        "or a .npy file of one input or a batch; default: the graph's x0")
    p.add_argument("--samples", type=T.integer(1), default=samples_default, metavar="N",
                   help="draw N inputs uniformly from the box of --radius around the input "
                        f"(default: {samples_default or 'no sampling: the input itself'})")
    p.add_argument("--radius", type=T.radius, default=radius_default, metavar="R",
                   help=f"l-inf radius of the sampling box (default {radius_default})")
    p.add_argument("--seed", type=T.integer(0), default=0, metavar="S",
                   help="random seed of the sampling (default 0)")


def add_reference_arguments(p) -> None:
    p.add_argument("--reference", type=T.context_name, default=C.DEFAULT_REFERENCE,
                   metavar="CTX",
                   help=f"oracle context (default {C.DEFAULT_REFERENCE})")
    p.add_argument("--oracle-limit", type=T.integer(0), default=C.DEFAULT_ORACLE_LIMIT,
                   metavar="N",
                   help="above N samples a float64 reference replaces the oracle, but only "
                        "after it reproduces the oracle's correctly rounded values on "
                        f"--check-samples samples (default {C.DEFAULT_ORACLE_LIMIT})")
    p.add_argument("--check-samples", type=T.integer(1), default=C.DEFAULT_CHECK_SAMPLES,
                   metavar="K",
                   help=f"samples used for that check (default {C.DEFAULT_CHECK_SAMPLES})")


def add_output_arguments(p, *, plot=True) -> None:
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    p.add_argument("--out", type=outputs.output_file(*tables.OUT_SUFFIXES), default=None,
                   metavar="FILE", help="also write the table to FILE (.csv with its meta in "
                                        "FILE.csv.meta.json, .md or .json)")
    if plot:
        p.add_argument("--plot", type=outputs.output_file(".png"), default=None,
                       metavar="FILE.png", help="write a PNG plot")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def add_arguments(p) -> None:
    add_graph_and_input_arguments(p)
    from .. import sampling
    sampling.add_arguments(p, sampling=True)
    p.add_argument("--contexts", type=T.context_list, default=",".join(C.DEFAULT_CONTEXTS),
                   metavar="A,B,...",
                   help=f"contexts to compare (default {','.join(C.DEFAULT_CONTEXTS)})")
    add_reference_arguments(p)
    p.add_argument("--threshold", type=T.real(0), default=C.DEFAULT_THRESHOLD_BITS,
                   metavar="BITS",
                   help="divergence = first node whose max bits of error exceeds BITS "
                        f"(default {C.DEFAULT_THRESHOLD_BITS:g})")
    add_output_arguments(p)


def run_meta(args, case, center=None) -> dict:
    """What every table command records besides its own figures: the graph (name, path,
    SHA-256), the input source and centre (exact texts), the seed."""
    meta = {"graph": outputs.graph_meta(getattr(args, "graph", None), case.graph,
                                        case.payload),
            "input_source": "--input" if getattr(args, "input", None) is not None else "x0",
            "seed": getattr(args, "seed", None)}
    if center is not None and not isinstance(center, dict) and C.batch_size(center) == 1:
        meta["center"] = [v if isinstance(v, str) else repr(float(v))
                          for v in center.reshape(-1)]
    return meta


def describe_input(x, src: str) -> str:
    """``x0 = (0.3, -0.2, ...)`` for a batch of one (each input shown, 8 numbers at most)."""
    def show(a):
        flat = a.reshape(-1)
        return "(" + ", ".join(str(v) for v in flat[:8]) + (", ..." if flat.size > 8 else "") + ")"
    if isinstance(x, dict):
        return f"{src}: " + "; ".join(f"input {i} = {show(v)}" for i, v in x.items())
    return f"{src} = {show(x)}"


def batch_from_args(case, args):
    """The input batch and a one-line description of it, from --input/--samples/--radius
    (or --input-file / --box: experiments.sampling)."""
    from .. import sampling
    got = sampling.batch_from_flags(case, args)
    if got is not None:
        return got
    center = C.center_of(case, args.input)
    src = "--input" if args.input is not None else "x0"
    n = C.batch_size(center)
    if args.samples is None:
        if n == 1:
            return center, describe_input(center, src)
        return center, f"{n} inputs from {args.input}"
    if n != 1:
        raise C.ExperimentError(f"--samples needs a single centre input, but --input holds {n}")
    x = C.box_samples(center, args.radius, args.samples, args.seed)
    return x, (f"{args.samples} samples uniform in the l-inf box of radius {args.radius:g} "
               f"around {src} (seed {args.seed})")


def run(args) -> int:
    case = C.load_case(args.graph)
    contexts = C.parse_contexts(args.contexts)
    x, desc = batch_from_args(case, args)
    res = C.compare(case, contexts, x, reference=args.reference, threshold=args.threshold,
                    input_desc=desc, quiet=args.quiet, oracle_limit=args.oracle_limit,
                    check_samples=args.check_samples, seed=args.seed)
    verdicts = [v for v in res.verdicts.values()]
    md_verdicts = "## Verdicts\n\n" + "\n".join(f"- **{v['context']}** "
                                                f"[{v['reduction']}]: {v['text']}"
                                                for v in verdicts)
    sampled = getattr(args, "box", None) is not None or \
        getattr(args, "input_file", None) is not None
    meta = {**res.meta(), **run_meta(args, case, None if sampled else
                                     C.center_of(case, args.input))}
    if sampled:
        meta["input_source"] = "--box" if args.box is not None else "--input-file"
    notes = tables.write_outputs(args, "compare", meta, res.rows,
                                 plot=lambda path: C.plot_bits(res, path),
                                 title=f"scalarlab compare: {case.name}", extra_md=md_verdicts,
                                 verdicts=verdicts)
    if args.json:
        return 0
    print("\n".join(C.header_lines(res)))
    print()
    print(tables.render(C.display_frame(res.rows)))
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
