"""``scalarlab eval GRAPH``: evaluate a graph under one scalar context and print the values."""
from __future__ import annotations

import os

from .. import argtypes as T
from . import help_of
from .. import defaults as D
from ..lazy_import import lazy

# Heavy modules load when a run first uses them: --help builds the parser without them.
np = lazy("numpy")
graph = lazy("scalarlab.graph")
scalars = lazy("scalarlab.scalars")
examples = lazy("scalarlab.graph.examples")
_errors = lazy("scalarlab.graph.errors")
_fileformat = lazy("scalarlab.graph.fileformat")
outputs = lazy("scalarlab.experiments.outputs")

NAME = "eval"
HELP = help_of(NAME)


def add_arguments(p) -> None:
    p.add_argument("graph", metavar="GRAPH",
                   help=f"built-in graph ({', '.join(D.EXAMPLE_NAMES)}) or a graph file")
    p.add_argument("--payload", type=T.existing_file(".npz"), default=None, metavar="P.npz",
                   help="payload .npz to use instead")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--input", default=None, metavar="X",
                     help="comma-separated exact decimals, e.g. '0.3,-0.2,0.1,0.4' (a multiple "
                          "of the input size evaluates a batch)")
    src.add_argument("--input-file", type=T.existing_file(".npy", ".npz"), default=None,
                     metavar="X.npy",
                     help=".npy input (leading batch axes allowed) or .npz keyed by input id")
    p.add_argument("--context", default=None, metavar="NAME",
                   help="scalar context (default float64, or binary32 with --device cuda; "
                        "see `scalarlab contexts`)")
    p.add_argument("--device", choices=["cpu", "cuda"], default=None,
                   help="run through the kernel plan on this device (cuda: the numba_cuda "
                        "provider; without a GPU set NUMBA_ENABLE_CUDASIM=1 for the simulator)")
    p.add_argument("--show-backend", action="store_true",
                   help="print the capsule selected for each op the first time it is used")
    p.add_argument("--all", action="store_true", help="print every node's value, not only the output")
    p.add_argument("--json", action="store_true",
                   help="JSON: per node the float64 view and an exact string per value")


def _parse_input(text, g):
    ids = g.input_ids()
    if len(ids) != 1:
        raise _errors.GraphError(f"--input: the graph has {len(ids)} inputs; use --input-file "
                                 f"X.npz")
    parts = [t.strip() for t in text.split(",") if t.strip()]
    if not parts:
        raise _errors.GraphError("--input: no values given")
    from scalarlab.scalars.kernels import literals
    for t in parts:
        # the spelling only: the context converts it (a float context rounds 1e999999999
        # to inf, an exact one refuses it), through the same bounded reader
        try:
            literals.for_rounding(t)
        except literals.NotALiteral:
            raise _errors.GraphError(f"--input: {t!r} is not a decimal or p/q number") from None
        except literals.LiteralError as exc:
            raise _errors.GraphError(f"--input: {exc}") from None
    shape = g.nodes[ids[0]].out_shape
    size = int(np.prod(shape)) if shape else 1
    if size == 0 or len(parts) % size:
        raise _errors.GraphError(f"--input: {len(parts)} values do not fill the input shape "
                         f"{graph.fmt_shape(shape)} ({size} values per sample)")
    arr = np.asarray(parts, dtype=object)
    lead = () if len(parts) == size else (len(parts) // size,)
    return arr.reshape(lead + tuple(shape))


def _input_array(arr, where: str):
    """One array of input values: numbers or exact decimal strings, not empty."""
    if arr.dtype.kind not in "fiuU":
        raise _errors.GraphError(f"{where}: dtype {arr.dtype} is not numbers or exact decimal "
                         f"strings")
    if arr.size == 0:
        raise _errors.GraphError(f"{where}: the array is empty (shape {list(arr.shape)})")
    return arr.astype(object) if arr.dtype.kind == "U" else arr


def _read_input_file(path, g):
    import zipfile
    from scalarlab.graph import files
    files.check(path, "--input-file")        # a regular file within the size cap
    bad = (OSError, ValueError, EOFError, zipfile.BadZipFile)
    try:
        data = np.load(path, allow_pickle=False)
    except bad as exc:
        raise _errors.GraphError(f"--input-file {path}: cannot read: {exc}") from None
    if isinstance(data, np.ndarray):
        return _input_array(data, f"--input-file {path}")
    with data:
        out = {}
        for k in data.files:
            if not k.isdigit():
                raise _errors.GraphError(f"--input-file {path}: key {k!r} is not an input node id")
            try:
                arr = data[k]
            except bad as exc:   # a truncated or corrupt member
                raise _errors.GraphError(f"--input-file {path}: array {k!r}: cannot read: "
                                 f"{exc}") from None
            out[int(k)] = _input_array(arr, f"--input-file {path}: array {k!r}")
        if not out:
            raise _errors.GraphError(f"--input-file {path}: the archive holds no arrays")
        return out


def exact_strings(ctx, v) -> list:
    """One exact text per entry: p/q (rational), shortest round-trip decimal (binary
    formats, float64), the context's full precision (mpmath)."""
    shape = tuple(ctx.shape(v))
    n = int(np.prod(shape)) if shape else 1
    flat = ctx.reshape(v, (n,))
    if ctx.exact_strings:
        s = ctx.exact_string(flat).strip()
        parts = [t.strip() for t in s[1:-1].split(",")] if s.startswith("[") else [s]
        if len(parts) == n:
            return parts
    if ctx.mp is not None and isinstance(flat, np.ndarray) and flat.dtype == object:
        # repr_dps(prec) digits read back to the same mpf: the full precision, no more
        from mpmath.libmp import repr_dps
        return [ctx.mp.nstr(t, repr_dps(ctx.mp.prec), strip_zeros=False) for t in flat]
    if isinstance(flat, np.ndarray) and flat.dtype.kind == "f":
        return [repr(float(t)) for t in flat]
    if isinstance(flat, np.ndarray):
        return [_fileformat.exact_str(t) if not isinstance(t, complex) else repr(t) for t in flat]
    return [str(t) for t in np.asarray(ctx.to_float64(flat)).reshape(-1)]


def _nested(items, shape):
    return np.asarray(items, dtype=object).reshape(shape).tolist() if shape else items[0]


def _views(ctx, v) -> dict:
    """float64 view + exact strings of a point-context value; components for pairs."""
    if ctx.is_interval:
        return {"lo": _views(ctx.base, v.lo), "hi": _views(ctx.base, v.hi)}
    if ctx.is_dual:
        return {"primal": _views(ctx.base, v.primal), "tangent": _views(ctx.base, v.tangent)}
    shape = tuple(ctx.shape(v))
    f64 = np.asarray(ctx.to_float64(v))
    fl = [float(t) if np.isfinite(t) else str(float(t)) for t in f64.reshape(-1)] \
        if f64.dtype.kind == "f" else [str(t) for t in f64.reshape(-1)]
    return {"float64": _nested(fl, shape), "exact": _nested(exact_strings(ctx, v), shape)}


def _node_json(ctx, node, v):
    if v is None:
        return {"id": node.id, "op": node.kind.op, "value": None}
    return {"id": node.id, "op": node.kind.op, "kind": str(node.kind),
            "shape": list(ctx.shape(v)), **_views(ctx, v)}


def _format_value(ctx, v, out_shape) -> str:
    """A node value as text; a batch (leading axes beyond the node's shape) one line per
    sample, ``[i] value``."""
    shape = tuple(ctx.shape(v))
    out_shape = tuple(int(t) for t in out_shape)
    lead = len(shape) - len(out_shape)
    if lead <= 0:
        return ctx.format(v)
    n = int(np.prod(shape[:lead]))
    flat = ctx.reshape(v, (n, *out_shape))
    lines = [f"batch of {n}" + (f" {list(shape[:lead])}" if lead > 1 else "")]
    for i in range(n):
        one = ctx.reshape(ctx.take(flat, np.array([i]), axis=0), out_shape)
        lines.append(f"  [{i}] {ctx.format(one)}")
    return "\n".join(lines)


def run(args) -> int:
    g, payload, x = examples.resolve(args.graph)
    if args.payload:
        payload = graph.fileformat.load_npz(args.payload)
    if args.input is not None:
        x = _parse_input(args.input, g)
    elif args.input_file is not None:
        x = _read_input_file(args.input_file, g)
    if x is None and g.input_ids():
        raise _errors.GraphError(f"graph {args.graph} has no default input; give --input or "
                                 f"--input-file")
    ctx = scalars.get(args.context or ("binary32" if args.device == "cuda" else "float64"))
    if args.device or args.show_backend:
        from scalarlab.graph.plan import default_policy, run_planned
        planned = run_planned(g, payload, x, default_policy(args.device or "cpu", ctx.name),
                              show_backend=print if args.show_backend else None)
        vals = planned
        show = list(g.nodes) if args.all else [g.nodes[g.output]]
    elif args.all:
        vals = graph.denote_all(g, payload, x, ctx)
        show = list(g.nodes)
    else:
        vals = {g.output: graph.denote(g, payload, x, ctx)}
        show = [g.nodes[g.output]]
    if args.json:
        meta = {"graph": outputs.graph_meta(args.graph, g, payload), "context": ctx.name,
                "output": g.output, "device": args.device or "fold",
                "input": ("--input " + args.input if args.input is not None else
                          "--input-file " + args.input_file if args.input_file else "x0")}
        outputs.print_document(outputs.document(
            "eval", meta, rows=[_node_json(ctx, n, vals[n.id]) for n in show]))
        return 0
    print(f"graph {os.path.basename(args.graph)}, context {ctx.name}, output node {g.output}")
    for n in show:
        print(f"node {n.id} {n.kind} out={graph.fmt_shape(n.out_shape)}: "
              f"{_format_value(ctx, vals[n.id], n.out_shape)}")
    return 0
