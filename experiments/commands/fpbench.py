"""``scalarlab fpbench``: bits of error of FPBench benchmarks (FPCore files) per context."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .. import compare as C
from .. import fpbench as F
from .. import tables

NAME = "fpbench"
HELP = ("rounding error of FPCore benchmarks: per benchmark x context mean/max bits of error "
        "against the MPFR oracle, max ULPs, %% samples over 1 bit, where error starts, "
        "precondition rejections and skip reasons")


def add_arguments(p) -> None:
    p.add_argument("files", nargs="+", metavar="FILE.fpcore", help="FPCore files")
    p.add_argument("--contexts", default=",".join(F.DEFAULT_CONTEXTS), metavar="A,B,...",
                   help=f"binary-format contexts (default {','.join(F.DEFAULT_CONTEXTS)})")
    p.add_argument("--samples", type=int, default=F.DEFAULT_SAMPLES, metavar="N",
                   help=f"valid samples per benchmark and context (default {F.DEFAULT_SAMPLES})")
    p.add_argument("--sampling", choices=("bitpattern", "box"), default="bitpattern",
                   help="bitpattern: uniform over the format's values in the precondition's "
                        "box (Herbie); box: uniform reals rounded to the format (default "
                        "bitpattern)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (default 0)")
    p.add_argument("--threshold", type=float, default=F.DEFAULT_THRESHOLD_BITS, metavar="BITS",
                   help="divergence = first node whose max bits of error exceeds BITS "
                        f"(default {F.DEFAULT_THRESHOLD_BITS:g})")
    p.add_argument("--reference-bits", type=int, default=F.DEFAULT_REFERENCE_BITS, metavar="P",
                   help="oracle base precision in bits (raised per sample; default "
                        f"{F.DEFAULT_REFERENCE_BITS})")
    p.add_argument("--only", default=None, metavar="NAME",
                   help="run only the benchmarks whose :name contains NAME")
    p.add_argument("--input-file", default=None, metavar="X.npy",
                   help="samples instead of sampling: N rows x one column per argument (in "
                        "argument order); needs exactly one selected benchmark")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    p.add_argument("--out", default=None, metavar="FILE",
                   help="also write the table to FILE (.csv, .md or .json), atomically")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def check_out(path):
    """Validate ``--out`` before any computation."""
    if path is None:
        return None
    p = Path(path)
    if p.suffix.lower() not in tables.OUT_SUFFIXES:
        raise tables.OutputError(f"--out {path}: unknown file type {p.suffix or '(none)'!r}; "
                                 f"use one of {', '.join(tables.OUT_SUFFIXES)}")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise tables.OutputError(f"--out {path}: directory {parent} does not exist")
    if p.is_dir():
        raise tables.OutputError(f"--out {path}: is a directory")
    return p


def write_atomic(path: Path, meta, df, title) -> None:
    """The table written to a temporary file beside ``path``, then renamed into place."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix,
                               dir=str(path.parent) if str(path.parent) else ".")
    os.close(fd)
    try:
        tables.write_table(tmp, "fpbench", meta, df, title=title)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def run(args) -> int:
    out = check_out(args.out)
    contexts = F.parse_contexts(args.contexts)
    if args.samples < 1:
        raise C.ExperimentError(f"--samples must be >= 1, got {args.samples}")
    progs = F.load_programs(args.files)
    if args.only is not None:
        progs = [p for p in progs if args.only in p.name]
        if not progs:
            raise C.ExperimentError(f"--only {args.only!r}: no benchmark name contains it")
    x = None
    if args.input_file is not None:
        runnable = [p for p in progs if p.graph is not None]
        if len(progs) != 1 or not runnable:
            raise C.ExperimentError(f"--input-file needs exactly one translatable benchmark "
                                    f"(select it with --only); {len(progs)} selected")
        case = C.GraphCase(progs[0].name, progs[0].graph, progs[0].payload)
        from .. import sampling as S
        batch, _ = S.load_input_file(args.input_file, case)
        import numpy as np
        x = np.stack([np.asarray(batch[i]) for i in sorted(batch)], axis=1) \
            if isinstance(batch, dict) else np.asarray(batch).reshape(-1, 1)
    df, _ = F.run(progs, contexts, samples=args.samples, sampling=args.sampling,
                  seed=args.seed, threshold=args.threshold,
                  reference_bits=args.reference_bits, x=x, quiet=args.quiet)
    meta = {"files": list(args.files), "benchmarks": len(progs),
            "contexts": [c.name for c in contexts], "samples": args.samples,
            "sampling": "file " + args.input_file if x is not None else args.sampling,
            "seed": args.seed, "threshold_bits": args.threshold,
            "reference": f"mpmath, >= {args.reference_bits} bits per sample (+2x the largest "
                         f"argument exponent), Ziv-checked at twice that precision",
            "metric": "bits = log2(1 + ULPs) of the output vs the oracle correctly rounded "
                      "into the context's format"}
    if out is not None:
        write_atomic(out, meta, df, "scalarlab fpbench")
    if args.json:
        print(tables.dumps(tables.json_document("fpbench", meta, df)))
        return 0 if (df["skip"] == "").any() else 1
    view = df[["benchmark", "context", "samples", "rejected_pre", "invalid", "mean_bits",
               "max_bits", "max_ulps", "pct_over_1bit", "divergence_node", "divergence_op",
               "skip"]].copy()
    view["benchmark"] = [b if len(b) <= 36 else b[:33] + "..." for b in view["benchmark"]]
    view["skip"] = [s if len(s) <= 40 else s[:37] + "..." for s in view["skip"]]
    view["divergence_node"] = ["" if v is None or v != v else str(int(v))
                               for v in view["divergence_node"]]
    print(tables.render(view))
    print()
    for line in F.summary_lines(df):
        print(line)
    if out is not None:
        print(f"wrote {out}")
    # a run that measured nothing did not check anything
    return 0 if (df["skip"] == "").any() else 1
