"""``scalarlab libm``: audit math libraries (numpy, torch, C libm, the lab) against the
correctly rounded result: max ulps, worst input, share not correctly rounded, and the
special-value (C99 Annex F) disagreements apart."""
from __future__ import annotations

import argparse
import math

from .. import argtypes as T
from ..command_args import add_output_arguments
from . import help_of
from .. import defaults as D
from ..lazy_import import lazy

# Heavy modules load when a run first uses them: --help builds the parser without them.
L = lazy("scalarlab.experiments.libm_audit")
outputs = lazy("scalarlab.experiments.outputs")
tables = lazy("scalarlab.experiments.tables")

NAME = "libm"
HELP = help_of(NAME)


def _funcs(text: str) -> list[str]:
    from scalarlab.scalars.functions import FUNCTIONS
    names = T.name_list(text)
    known = [n for n, v in FUNCTIONS.items() if v.op]
    bad = [n for n in names if n not in known]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown function {', '.join(map(repr, bad))}; "
                                         f"known: {', '.join(known)}")
    return names


_funcs.__name__ = "list of functions"


def _libs(text: str) -> list[str]:
    names = T.name_list(text)
    bad = [n for n in names if n not in D.LIBM_LIBRARIES]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown library {', '.join(map(repr, bad))}; "
                                         f"known: {', '.join(D.LIBM_LIBRARIES)}")
    return names


_libs.__name__ = "list of libraries"


def _range(text: str) -> tuple[float, float]:
    parts = str(text).split(":")
    if len(parts) != 2:
        raise argparse.ArgumentTypeError(f"expected LO:HI, got {text!r}")
    num = T.real()
    lo, hi = num(parts[0]), num(parts[1])
    if lo > hi:
        raise argparse.ArgumentTypeError(f"LO must not exceed HI, got {text!r}")
    return lo, hi


_range.__name__ = "range"


def add_arguments(p) -> None:
    p.add_argument("funcs", nargs="?", type=_funcs, default=list(D.LIBM_DEFAULT_FUNCS),
                   metavar="FUNCS", help="comma-separated functions (default: "
                   + ",".join(D.LIBM_DEFAULT_FUNCS) + ")")
    p.add_argument("--lib", type=_libs, default=["numpy", "torch", "libm"], metavar="LIBS",
                   help="libraries: " + ",".join(D.LIBM_LIBRARIES) + " (default: numpy,torch,libm; "
                   "jax is left out when not installed)")
    p.add_argument("--format", choices=D.LIBM_FORMATS, default="binary32",
                   help="format of inputs and results (default binary32)")
    p.add_argument("--exhaustive", action="store_true",
                   help="every value of the format in --range (binary32: 2^32, long)")
    p.add_argument("--samples", type=T.integer(1), default=10000, metavar="N",
                   help="sampled inputs, uniform over the format's values (default 10000)")
    p.add_argument("--search", type=T.integer(0, 1000), default=0, metavar="ROUNDS",
                   help="local-search rounds around the worst points (default 0)")
    p.add_argument("--range", type=_range, default=None, metavar="LO:HI",
                   help="inputs in [LO, HI] only (default: every finite value and +-inf)")
    p.add_argument("--seed", type=T.integer(0), default=0, metavar="S",
                   help="random seed (default 0)")
    p.add_argument("--workers", type=T.integer(1, 256), default=1, metavar="N",
                   help="local processes for --exhaustive chunks (default 1)")
    d = p.add_mutually_exclusive_group()
    d.add_argument("--dask", action="store_true",
                   help="run the --workers on a local Dask cluster instead of a process pool")
    d.add_argument("--scheduler", type=T.dask_address, metavar="ADDRESS",
                   help="run --exhaustive chunks on an existing Dask scheduler "
                        "tcp://HOST:PORT")
    p.add_argument("--connect-timeout", type=T.real(0, 3600, lo_open=True), default=10.0,
                   metavar="SEC", help="seconds to wait for the Dask scheduler and for a "
                                       "worker (default 10)")
    p.add_argument("--resume", type=T.output_file(".json", flag="--resume"),
                   default=None, metavar="FILE.json",
                   help="record finished chunks in FILE.json and skip them when rerun "
                        "(default: none)")
    p.add_argument("--plot-function", type=_funcs, default=None, metavar="F",
                   help="function drawn by --plot (default: the first of FUNCS)")
    add_output_arguments(p)


def run(args) -> int:
    from ..errors import ExperimentError
    if args.plot_function and args.plot_function[0] not in args.funcs:
        raise ExperimentError(f"--plot-function {args.plot_function[0]}: not among the "
                              f"audited functions ({','.join(args.funcs)})")
    if (args.dask or args.scheduler) and not args.exhaustive:
        raise ExperimentError(f"{'--dask' if args.dask else '--scheduler'} runs the chunks "
                              "of --exhaustive runs; add --exhaustive")
    df = L.libm_audit(args.funcs, args.lib, args.format, exhaustive=args.exhaustive,
                      samples=args.samples, search=args.search, range=args.range,
                      seed=args.seed, workers=args.workers, resume=args.resume,
                      quiet=args.quiet, scheduler=args.scheduler, dask=args.dask,
                      connect_timeout=args.connect_timeout)
    if not len(df):                  # a run that checked nothing writes nothing, exits 1
        raise ExperimentError(f"nothing to audit in {args.format}: "
                              + ", ".join(df.attrs["skipped"]) + " are not available")
    specials = df.attrs["specials"]
    meta = {**df.attrs["meta"], "skipped": df.attrs["skipped"]}
    func = (args.plot_function or args.funcs)[0]
    extra = "## Special-value disagreements (not in max_ulps)\n\n" + (
        tables.markdown_table(specials) if len(specials) else "none")
    notes = tables.write_outputs(args, "libm", meta, df,
                                 plot=lambda path: L.plot_errors(df, func, path),
                                 title=f"scalarlab libm: {df.attrs['meta']['mode']}",
                                 extra_md=extra, specials=tables.json_rows(specials))
    if args.json:
        return 0
    m = df.attrs["meta"]
    print(f"format {args.format}, {m['mode']}, {m['seconds']:.1f} s; {m['glibc']}; numpy "
          f"{m['numpy']} ({m['numpy_simd']}); torch {m.get('torch', 'absent')}")
    print("max_ulps: ulps of the exact result (MPFR), 0.5 = correctly rounded; "
          + ("exhaustive: exact maxima" if args.exhaustive else "sampled: lower bounds"))
    show = df.copy()
    show["not_cr_frac"] = [f"{100 * v:.3g}%" for v in show["not_cr_frac"]]
    show["max_ulps"] = [f"{v:.2f}" if not math.isnan(v) else "-" for v in show["max_ulps"]]
    print(tables.render(show.drop(columns=["format", "bound"])))
    if len(specials):
        print("\nspecial-value disagreements (C99 Annex F; not in max_ulps):")
        print(tables.render(specials.drop(columns=["format"])))
    if df.attrs["skipped"]:
        print("\nnot available: " + ", ".join(df.attrs["skipped"]))
    for n in notes:
        print(n)
    return 0
