"""Arguments and input batches shared by the table commands (compare, gaps,
reduction-order, provider-diff): GRAPH/--input/--samples, the reference flags, the output
flags, the run's meta, and the batch those flags name."""
from __future__ import annotations

from . import argtypes as T
from . import defaults as RF
from .lazy_import import lazy

# what the parsers need comes from argtypes and defaults; the run-time helpers below load
# the cases, the outputs and the errors when they are called
CS = lazy("scalarlab.experiments.cases")
outputs = lazy("scalarlab.experiments.outputs")
_errors = lazy("scalarlab.experiments.errors")


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


def add_sample_file_arguments(p, *, sampling: bool = False) -> None:
    """``--input-file`` and ``--box`` (and ``--sampling`` where the command has none);
    read by ``experiments.sampling.batch_from_flags``."""
    p.add_argument("--input-file", default=None, metavar="X.npy",
                   help="samples: N rows x one column per scalar input entry (inputs in id "
                        "order, e.g. FPCore argument order)")
    p.add_argument("--box", default=None, metavar="LO:HI,...",
                   help="sample per-variable boxes instead of --radius around the input: "
                        "lo1:hi1,lo2:hi2,... (one per scalar input entry; one pair = all) "
                        "or a .json/.npy file of [lo, hi] pairs")
    if sampling:
        p.add_argument("--sampling", choices=RF.SAMPLINGS, default="box",
                       help="with --box: box = uniform reals, bitpattern = uniform over "
                            "binary64 values (default box)")


def reference_name(text: str) -> str:
    """``enclosure`` (the ball enclosure, the oracle where it does not settle),
    ``interval`` (the interval:float64 enclosure) or an oracle context name."""
    if text.strip() in (RF.ENCLOSURE, RF.INTERVAL_ENCLOSURE):
        return text.strip()
    return T.context_name(text)


reference_name.__name__ = "reference"


def add_reference_arguments(p) -> None:
    p.add_argument("--reference", type=reference_name, default=RF.DEFAULT_REFERENCE,
                   metavar="CTX",
                   help=f"{RF.ENCLOSURE} (default): ball:3 enclosures (ball:6 where too "
                        f"wide) prove the correctly rounded outputs they can, float64's "
                        f"included, {RF.DEFAULT_ORACLE} takes the samples they leave; "
                        f"{RF.INTERVAL_ENCLOSURE}: the same with interval:float64 (float64 "
                        f"runs take the oracle); or an oracle context for all samples (e.g. "
                        f"{RF.DEFAULT_ORACLE})")
    p.add_argument("--oracle-limit", type=T.integer(0), default=RF.DEFAULT_ORACLE_LIMIT,
                   metavar="N",
                   help="above N samples a float64 reference replaces the oracle, but only "
                        "after it reproduces the oracle's correctly rounded values on "
                        f"--check-samples samples (default {RF.DEFAULT_ORACLE_LIMIT})")
    p.add_argument("--check-samples", type=T.integer(1), default=RF.DEFAULT_CHECK_SAMPLES,
                   metavar="K",
                   help=f"samples used for that check (default {RF.DEFAULT_CHECK_SAMPLES})")


def add_output_arguments(p, *, plot=True) -> None:
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    p.add_argument("--out", type=T.output_file(*RF.OUT_SUFFIXES), default=None,
                   metavar="FILE", help="also write the table to FILE (.csv with its meta in "
                                        "FILE.csv.meta.json, .md or .json)")
    if plot:
        p.add_argument("--plot", type=T.output_file(".png"), default=None,
                       metavar="FILE.png", help="write a PNG plot")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def run_meta(args, case, center=None) -> dict:
    """What every table command records besides its own figures: the graph (name, path,
    SHA-256), the input source and centre (exact texts), the seed."""
    meta = {"graph": outputs.graph_meta(getattr(args, "graph", None), case.graph,
                                        case.payload),
            "input_source": "--input" if getattr(args, "input", None) is not None else "x0",
            "seed": getattr(args, "seed", None)}
    if center is not None and not isinstance(center, dict) and CS.batch_size(center) == 1:
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
    from . import sampling
    got = sampling.batch_from_flags(case, args)
    if got is not None:
        return got
    center = CS.center_of(case, args.input)
    src = "--input" if args.input is not None else "x0"
    n = CS.batch_size(center)
    if args.samples is None:
        if n == 1:
            return center, describe_input(center, src)
        return center, f"{n} inputs from {args.input}"
    if n != 1:
        raise _errors.ExperimentError(f"--samples needs a single centre input, but --input "
                                      f"holds {n}")
    x = CS.box_samples(center, args.radius, args.samples, args.seed, case)
    return x, (f"{args.samples} samples uniform in the l-inf box of radius {args.radius:g} "
               f"around {src} (seed {args.seed})")
