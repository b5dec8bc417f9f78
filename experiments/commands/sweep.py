"""``scalarlab sweep``: containment sweeps over radii x contexts x sample counts."""
from __future__ import annotations

import sys

from .. import argtypes as T
from . import help_of
from ..lazy_import import lazy

# Heavy modules load when a run first uses them: --help builds the parser without them.
np = lazy("numpy")
outputs = lazy("scalarlab.experiments.outputs")
progress = lazy("scalarlab.experiments.progress")

NAME = "sweep"
HELP = help_of(NAME)


def _no_input_file(text: str) -> str:
    """``sweep --input-file``: one meaning per flag across commands (samples), so sweep's
    centre file has its own flag and this one is refused with a pointer to it."""
    import argparse
    raise argparse.ArgumentTypeError(f"{text}: sweep samples its own points; give the box "
                                     f"centre with --center-file {text}")


METHODS = ("ibp", "crown", "crown-ibp")


def method_list(text: str) -> list:
    """argparse ``type=``: comma-separated bounding methods out of :data:`METHODS`."""
    import argparse
    items = [t.strip() for t in text.split(",")]
    bad = [t for t in items if t not in METHODS]
    if bad or not items:
        raise argparse.ArgumentTypeError(f"{bad[0] if bad else text!r} is not a bounding "
                                         f"method (known: {', '.join(METHODS)})")
    return list(dict.fromkeys(items))


def add_arguments(p):
    p.add_argument("graph", nargs="?", default="six-node", metavar="GRAPH",
                   help="graph file or built-in name (default six-node)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--input", type=T.input_spec, metavar="X",
                     help='box centre, e.g. "0.3,-0.2,0.1,0.4" (default: the graph\'s x0)')
    src.add_argument("--center-file", type=T.npy_file, metavar="X.npy",
                     help="box centre from a .npy file (one input)")
    p.add_argument("--input-file", type=_no_input_file, metavar="X.npy",
                   help="refused: --input-file means samples in every command; sweep "
                        "takes one box centre, given by --center-file")
    p.add_argument("--payload", type=T.existing_file(".npz"), metavar="P.npz",
                   help="payload .npz for a graph file without inline payload")
    p.add_argument("--radii", type=T.decimal_list(0, T.RADIUS_MAX), default="0.01,0.05,0.5",
                   metavar="R,R", help="comma-separated l-inf radii >= 0")
    p.add_argument("--samples", type=T.integer_list(0), default="1000", metavar="N,N",
                   help="comma-separated sample counts")
    p.add_argument("--contexts", type=T.contexts, default="float64,binary32,bfloat16",
                   metavar="A,B", help="comma-separated point contexts (boxes in "
                                       "interval:<ctx>)")
    p.add_argument("--seed", type=T.integer(0), default=0, metavar="S",
                   help="seed of the sample generator")
    p.add_argument("--shard-size", type=T.integer(1), default=2000, metavar="N",
                   help="samples per shard")
    p.add_argument("--method", type=method_list, default="ibp", metavar="M,M",
                   help="comma-separated bounding methods: ibp, crown, crown-ibp (default ibp); "
                        "with several, column width_vs_ibp compares output widths")
    p.add_argument("--spec", type=T.npy_file, metavar="C.npy",
                   help="bound C y instead of the output y: a .npy matrix whose rows are "
                        "linear functions of the output's entries (m x n_out); CROWN "
                        "seeds its backward pass with these rows")
    p.add_argument("--box", default=None, metavar="LO:HI,...",
                   help="per-entry box lo1:hi1,... (or .json/.npy of [lo, hi] pairs) instead "
                        "of --input/--radii; graphs with several inputs are packed into one")
    d = p.add_mutually_exclusive_group()
    d.add_argument("--workers", type=T.integer(1), metavar="N",
                   help="run shards on a local Dask cluster of N workers (default: serial)")
    d.add_argument("--scheduler", type=T.dask_address, metavar="ADDRESS",
                   help="run shards on an existing Dask scheduler tcp://HOST:PORT")
    p.add_argument("--connect-timeout", type=T.real(0, 3600, lo_open=True), default=10.0,
                   metavar="SEC", help="seconds to wait for the Dask scheduler (and for a "
                                       "worker when none is left)")
    p.add_argument("--out", type=T.output_file(".csv", ".md", ".json"), metavar="FILE",
                   help="write the table to FILE.csv (meta in FILE.csv.meta.json), .md or "
                        ".json")
    p.add_argument("--json", action="store_true", help="print the JSON document on stdout")
    progress.add_arguments(p, quiet=True)


def header_lines(case, g, radii, total, args) -> list:
    """What the sweep will run, shown before the work where progress is shown."""
    def radius(r):
        return r if isinstance(r, str) else "per-entry box" if np.ndim(r) else f"{r:g}"
    where = (f"dask scheduler {args.scheduler}" if args.scheduler else
             f"local dask, {args.workers} workers" if args.workers else "serial")
    return [f"scalarlab sweep: graph {case.name} ({len(g.nodes)} nodes)",
            f"  contexts   : {', '.join(c.name for c in args.contexts)} (boxes in "
            f"interval:<context>)",
            f"  radii      : {', '.join(radius(r) for r in radii)}",
            f"  samples    : {', '.join(str(n) for n in args.samples)} (seed {args.seed})",
            f"  methods    : {', '.join(args.method)}",
            f"  shards     : {total} of at most {args.shard_size} samples, {where}"]


def _box_of(case, payload, args):
    """``(graph, payload, centre, radii)``: the centre (one example) and the radii from
    --box (per-entry half-widths), --input/--input-file or the graph's x0.  A graph with
    several input nodes is boxed as one vector of their entries in node-id order
    (:func:`experiments.sampling.pack_inputs`)."""
    from .. import cases as CS
    from ..errors import ExperimentError
    from .. import sampling
    ids = case.input_ids()
    if args.box is not None and args.center_file is not None:
        raise ExperimentError("--box replaces --center-file (the box's midpoints are the "
                              "centre)")
    if args.box is not None or len(ids) > 1:
        x0 = case.x0
        if args.input is None and args.center_file is None and args.box is None and x0 is None:
            raise ExperimentError(f"graph {case.name} has no built-in input; give --input "
                                  "or --box")
        g, payload, default_x, box = sampling.prepare_sweep(case.graph, payload, x0, args)
        if box is not None:
            return g, payload, box[0], [box[1]]
        shape = tuple(g.nodes[0].out_shape)
        spec = args.input if args.input is not None else args.center_file
        if spec is not None:
            x = CS.parse_input(spec, shape)
            sampling.check_integer_columns(case, CS.as_float64(x).reshape(len(x), -1),
                                           "--center-file" if args.center_file else "--input")
            if CS.batch_size(x) != 1:
                raise ExperimentError(f"--input holds {CS.batch_size(x)} inputs; sweep "
                                      "needs one centre")
            return g, payload, x[0], sampling.held_radii(case, args.radii)
        return g, payload, np.asarray(default_x, dtype=object).reshape(shape), \
            sampling.held_radii(case, args.radii)
    spec = args.input if args.input is not None else args.center_file
    x = CS.center_of(case, spec, "--center-file" if args.center_file else "--input")
    if CS.batch_size(x) != 1:
        raise ExperimentError(f"--input holds {CS.batch_size(x)} inputs; sweep needs one "
                              "centre")
    return case.graph, payload, x[0], list(args.radii)


def _run_sweep(g, payload, center, radii, args, progress):
    from scalarlab.ibp import sweep
    # the contexts were resolved while parsing; ibp.sweep takes names (they travel to Dask
    # workers, and name the interval context interval:<name>)
    names = [c.name for c in args.contexts]
    kw = dict(seed=args.seed, shard_size=args.shard_size, progress=progress,
              methods=list(args.method), spec=_spec_of(g, args))
    if not (args.workers or args.scheduler):
        return sweep(g, payload, center, radii, names, args.samples, **kw)
    from .. import dask_cluster
    with dask_cluster.client_for(scheduler=args.scheduler, workers=args.workers,
                                 timeout=args.connect_timeout) as (client, where):
        def runner(fn, doc, arg_lists, progress):
            return dask_cluster.run_tasks(client, where, fn, doc, arg_lists,
                                          progress=progress,
                                          wait_for_worker=args.connect_timeout)
        return sweep(g, payload, center, radii, names, args.samples, runner=runner,
                     **kw)


def _spec_of(g, args):
    """``--spec``: the matrix read from its .npy file and checked against the graph's
    output shape (one-line error naming the flag, the file and both shapes), or None."""
    if getattr(args, "spec", None) is None:
        return None
    from scalarlab.ibp.crown import _spec_matrix
    from scalarlab.ibp.errors import IBPError
    from ..errors import ExperimentError
    from ..npy_input import read_npy
    C = read_npy(args.spec, "--spec")
    try:
        return _spec_matrix(C, tuple(g.nodes[g.output].out_shape))
    except IBPError as exc:
        raise ExperimentError(f"--spec {args.spec}: {str(exc).split(': ', 1)[1]}") from None


def unchecked_rows(df) -> list[str]:
    """Rows that checked nothing: no output box, or not one sample evaluated."""
    out = []
    for _, r in df.iterrows():
        why = []
        if np.isnan(r["box_lo"]) or np.isnan(r["box_hi"]):
            why.append("no output box (non-finite weights or a rule that gave up)")
        if np.isnan(r["sampled_lo"]):
            why.append(f"no sample with a finite output ({r['failures']} evaluation "
                       "failures)")
        if why:
            out.append(f"radius {r['radius']!r} context {r['context']} samples "
                       f"{r['samples']}: " + "; ".join(why))
    return out


def table(args, case):
    """``(rows, meta)``: the sweep of ``case`` as the flags in ``args`` ask and the meta of
    its JSON output; :func:`run` prints and writes them, the Python API
    (:func:`scalarlab.sweep`) returns them as a DataFrame."""
    from scalarlab.graph.fileformat import load_npz

    g, payload = case.graph, case.payload
    if args.payload:
        payload = load_npz(args.payload)
    g, payload, center, radii = _box_of(case, payload, args)
    total = len(radii) * len(args.contexts) * sum(max(1, -(-n // args.shard_size))
                                                   for n in args.samples)
    if progress.header_shown():
        progress.header(header_lines(case, g, radii, total, args))
    bar = None
    if progress.shown(args.quiet):
        from tqdm.auto import tqdm
        bar = tqdm(total=total, unit="shard", desc="sweep", file=progress.stream(),
                   leave=False, dynamic_ncols=True)
    import warnings
    try:
        with warnings.catch_warnings(), progress.ticking(bar):
            # all-NaN outputs are reported per row below
            warnings.simplefilter("ignore", RuntimeWarning)
            df = _run_sweep(g, payload, center, radii, args, bar.update if bar else None)
    finally:
        if bar:
            bar.close()
    meta = {"graph": outputs.graph_meta(args.graph, g, payload),
            "center": [str(t) if isinstance(t, str) else repr(float(t))
                       for t in np.asarray(center, dtype=object).reshape(-1)],
            "center_source": "--box" if args.box is not None else
                             "--input" if args.input is not None else
                             "--center-file" if args.center_file else "x0",
            "radii": [r if isinstance(r, str) else np.asarray(r, dtype=float).tolist()
                      for r in radii], "samples": list(args.samples),
            "contexts": [c.name for c in args.contexts], "methods": list(args.method),
            "spec": getattr(args, "spec", None),
            "seed": args.seed,
            "shard_size": args.shard_size,
            "execution": (f"dask scheduler {args.scheduler}" if args.scheduler else
                          f"local dask, {args.workers} workers" if args.workers else "serial"),
            "columns": "sampled_lo/sampled_hi span all output coordinates; box_width and "
                       "sampled_width are maxima of per-coordinate widths (for a scalar "
                       "output sampled_width = sampled_hi - sampled_lo); guarantee is what "
                       "the output box claims (real: holds the exact real result; "
                       "execution: also every value the point context of that format "
                       "computes), checked the guarantee the point runs test, "
                       "claimed_violations the violations of boxes claiming it"}
    return df, meta


def run(args) -> int:
    from .. import cases as CS
    from .. import tables

    case = CS.load_case(args.graph)
    df, meta = table(args, case)
    if args.out:
        tables.write_table(args.out, "sweep", meta, df,
                           title=f"scalarlab sweep: {case.name}")
    if args.json:
        outputs.print_document(tables.json_document("sweep", meta, df))
    else:
        from .. import terminal   # wider than the terminal: column blocks, keys repeated
        print(terminal.column_blocks(df.drop(columns=["first_counterexample"]),
                                     lambda d: d.to_string(index=False),
                                     keys=["radius", "context", "samples", "method"]))
        for _, row in df[df["violations"] > 0].iterrows():
            print(f"counterexample (radius {row['radius']!r}, {row['context']}): "
                  f"{row['first_counterexample']}")
        checks = sorted({(r["method"], r["guarantee"], r["checked"])
                         for _, r in df.iterrows()})
        print("guarantees: " + "; ".join(f"{m} boxes claim {g or 'nothing (no box)'}, "
                                          f"point runs check {c}" for m, g, c in checks))
    if args.out:
        outputs.note(f"wrote {args.out}", to_stderr=args.json)
    status = 0
    if (df["violations"] > 0).any():
        status = 1
    bad = unchecked_rows(df)
    if bad:
        print(f"scalarlab sweep: error: {len(bad)} row(s) checked nothing; first: {bad[0]}",
              file=sys.stderr)
        status = 1
    return status
