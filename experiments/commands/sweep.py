"""``scalarlab sweep``: containment sweeps over radii x contexts x sample counts."""
from __future__ import annotations

import json
import sys

import numpy as np

NAME = "sweep"
HELP = "sampled containment sweep (radii x contexts x sample counts), serial or on Dask"


def add_arguments(p):
    p.add_argument("graph", nargs="?", default="six-node",
                   help="graph file or built-in name (default six-node)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--input", help='box centre, e.g. "0.3,-0.2,0.1,0.4"')
    src.add_argument("--input-file", help="box centre from a .npy file")
    p.add_argument("--payload", help="payload .npz for a graph file without inline payload")
    p.add_argument("--box", default=None, metavar="LO:HI,...",
                   help="per-entry box lo1:hi1,... (or .json/.npy of [lo, hi] pairs) instead "
                        "of --input/--radii; graphs with several inputs are packed into one")
    p.add_argument("--radii", default="0.01,0.05,0.5", help="comma-separated radii")
    p.add_argument("--samples", default="1000", help="comma-separated sample counts")
    p.add_argument("--contexts", default="float64,binary32,bfloat16",
                   help="comma-separated point contexts (boxes in interval:<ctx>)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--shard-size", type=int, default=2000, help="samples per shard")
    d = p.add_mutually_exclusive_group()
    d.add_argument("--workers", type=int, help="run shards on a local Dask cluster of N workers")
    d.add_argument("--scheduler", help="run shards on an existing Dask scheduler ADDRESS")
    p.add_argument("--out", help="write the table to FILE.csv, .md or .json")
    p.add_argument("--json", action="store_true", help="print JSON records")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _floats(text: str, what: str):
    from scalarlab.ibp.errors import IBPError
    try:
        return [t.strip() for t in text.split(",") if t.strip() and float(t) == float(t)]
    except ValueError:
        raise IBPError(f"--{what}: cannot read {text!r} as comma-separated numbers") from None


def _ints(text: str, what: str):
    from scalarlab.ibp.errors import IBPError
    try:
        return [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise IBPError(f"--{what}: cannot read {text!r} as comma-separated integers") from None


def run(args) -> int:
    from scalarlab.graph import examples
    from scalarlab.ibp import sweep
    from scalarlab.ibp.errors import IBPError

    from scalarlab.graph.fileformat import load_npz

    g, payload, default_x = examples.resolve(args.graph)
    if args.payload:
        payload = load_npz(args.payload)
    from .. import sampling
    g, payload, default_x, box = sampling.prepare_sweep(g, payload, default_x, args)
    if box is not None:
        center = box[0]
    elif args.input is not None:
        center = _floats(args.input, "input")
    elif args.input_file:
        try:
            center = np.load(args.input_file)
        except (OSError, ValueError) as exc:
            raise IBPError(f"--input-file {args.input_file}: {exc}") from None
    elif default_x is not None:
        center = default_x
    else:
        center = np.zeros(tuple(g.nodes[0].out_shape))
    radii = [box[1]] if box is not None else _floats(args.radii, "radii")
    if args.input_file and box is None and np.ndim(center) == 2 and len(center) == 1:
        center = center[0]                       # one row of the per-entry column file
    counts = _ints(args.samples, "samples")
    contexts = [c.strip() for c in args.contexts.split(",") if c.strip()]
    total = len(radii) * len(contexts) * sum(max(1, -(-n // args.shard_size)) for n in counts)
    bar = None
    if not args.quiet and sys.stderr.isatty():
        from tqdm import tqdm
        bar = tqdm(total=total, unit="shard", desc="sweep", file=sys.stderr)
    try:
        df = sweep(g, payload, center, radii, contexts, counts, seed=args.seed,
                   shard_size=args.shard_size, workers=args.workers, scheduler=args.scheduler,
                   progress=(bar.update if bar else None))
    finally:
        if bar:
            bar.close()
    if args.out:
        _write(df, args.out)
    if args.json:
        print(json.dumps(json.loads(df.to_json(orient="records")), indent=2))
    else:
        import pandas as pd
        with pd.option_context("display.width", 200, "display.max_columns", 50):
            print(df.drop(columns=["first_counterexample"]).to_string(index=False))
        bad = df[df["violations"] > 0]
        for _, row in bad.iterrows():
            print(f"counterexample (radius {row['radius']}, {row['context']}): "
                  f"{row['first_counterexample']}")
    return 1 if (df["violations"] > 0).any() else 0


def _write(df, path: str) -> None:
    from scalarlab.ibp.errors import IBPError
    if path.endswith(".csv"):
        df.to_csv(path, index=False)
    elif path.endswith(".md"):
        from scalarlab.experiments.tables import markdown_table
        with open(path, "w") as fh:
            fh.write(markdown_table(df) + "\n")
    elif path.endswith(".json"):
        df.to_json(path, orient="records", indent=2)
    else:
        raise IBPError(f"--out {path}: use a .csv, .md or .json file name")

