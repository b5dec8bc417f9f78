"""Cases: a graph to study, its inputs and the contexts it is evaluated in.

A :class:`GraphCase` (built-in name or graph file), ``--input`` (exact decimals or a
``.npy`` file read by :func:`experiments.npy_input.read_npy`), input batches (an array
with a leading sample axis, or ``{input_id: such array}``), box sampling, the
point-context check, and the batched evaluation of a case in one context as double-double (hi, lo)
values, which the reference and the discrepancy table both read.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scalarlab import scalars

from . import metrics
from . import progress as live
from .errors import ExperimentError
from .npy_input import read_npy


# --------------------------------------------------------------------------- graph in
@dataclass
class GraphCase:
    """A graph to study: its display name, the IR, its payload and its default input."""
    name: str
    graph: object
    payload: object
    x0: object = None

    @property
    def nodes(self):
        return list(self.graph.nodes)

    @property
    def output_id(self) -> int:
        out = getattr(self.graph, "output", None)
        if out is None:
            out = getattr(self.graph, "output_id", None)
        return int(out) if out is not None else len(self.nodes) - 1

    def input_ids(self) -> list:
        return [int(n.id) for n in self.nodes if node_op(n) == "input"]

    def input_shape(self) -> tuple:
        """Per-example shape of the graph's single input node."""
        ids = self.input_ids()
        if len(ids) != 1:
            raise ExperimentError(f"graph {self.name} has {len(ids)} input nodes "
                                  f"({ids}); --input takes exactly one")
        return tuple(int(s) for s in self.nodes[ids[0]].out_shape)


def integer_inputs(case) -> dict:
    """``{input_id: dtype}`` of the input nodes that declare integer or boolean values
    (token ids, positions, attention masks: ``graph.ops_shape.INTEGER_DTYPES``).  They are
    exact integers in every context: samplers hold them at the given value (or draw them
    from a file), never round them to a format or widen them by a radius."""
    from scalarlab.graph.ops_shape import integer_input
    return {int(n.id): str(n.kind.attrs["dtype"]) for n in case.nodes if integer_input(n)}


def map_real_inputs(case, x, f, held=None):
    """Apply ``f`` to every real-valued input array of the batch ``x`` (an array or
    ``{input_id: array}``); integer inputs get ``held(a)`` (default: unchanged)."""
    ints = integer_inputs(case) if case is not None else {}
    keep = held or (lambda a: a)
    if isinstance(x, dict):
        return {i: keep(x[i]) if i in ints else f(x[i]) for i in sorted(x)}
    ids = case.input_ids() if case is not None else []
    return keep(x) if len(ids) == 1 and ids[0] in ints else f(x)


def check_integer_inputs(case, x, flag: str) -> None:
    """ExperimentError when an integer input of the batch ``x`` holds a value that is not
    an integer of its element type (``bool``: 0 or 1; unsigned types: >= 0), naming the
    flag, the input node, its type, the value and where it sits."""
    ints = integer_inputs(case)
    if not ints or x is None:
        return
    from fractions import Fraction
    parts = x if isinstance(x, dict) else {case.input_ids()[0]: x} \
        if len(case.input_ids()) == 1 else {}
    for i, a in parts.items():
        if i not in ints:
            continue
        dtype = ints[i]
        arr = np.asarray(a)
        flat = arr.reshape(-1)
        for k, v in enumerate(flat):
            try:
                q = Fraction(str(v)) if isinstance(v, str) else Fraction(v)
            except (ValueError, ZeroDivisionError, OverflowError, TypeError):
                q = None
            ok = q is not None and q.denominator == 1 and (
                dtype != "bool" or q in (0, 1)) and (not dtype.startswith("u") or q >= 0)
            if not ok:
                at = [int(t) for t in np.unravel_index(k, arr.shape)]
                need = ("0 or 1" if dtype == "bool" else "an integer >= 0"
                        if dtype.startswith("u") else "an integer")
                raise ExperimentError(f"{flag}: input node {i} holds {dtype} values (token "
                                      f"ids, positions or masks: never rounded or perturbed), "
                                      f"but entry {at} is {v}; give {need}")


def node_op(node) -> str:
    kind = node.kind
    return str(getattr(kind, "op", kind))


def node_shape(node) -> str:
    return "[" + ", ".join(str(int(s)) for s in node.out_shape) + "]"


def load_case(arg: str | None) -> GraphCase:
    """A built-in graph name (default ``six-node``) or a graph file, with its x0."""
    import scalarlab.graph.examples as examples
    spec = arg or "six-node"
    got = examples.resolve(spec)
    if isinstance(got, GraphCase):
        return got
    got = tuple(got)
    if len(got) == 3:
        g, payload, x0 = got
    elif len(got) == 2:
        (g, payload), x0 = got, None
    else:  # pragma: no cover - contract guard
        raise ExperimentError(f"graph {spec!r}: graph.examples.resolve returned {len(got)} "
                              f"items, expected (graph, payload[, x0])")
    name = spec if not Path(spec).suffix else Path(spec).name
    return GraphCase(name, g, payload, x0)


# -------------------------------------------------------------------------- contexts
def parse_contexts(spec) -> list:
    """Comma-separated context names, or a list of names or contexts (the CLI's
    ``--contexts`` arrives resolved) -> contexts (point contexts with real values only)."""
    from .argtypes import split_top
    items = split_top(spec) if isinstance(spec, str) else list(spec)  # binary(5,10): one
    items = [s.strip() if isinstance(s, str) else s for s in items]
    items = [s for s in items if not isinstance(s, str) or s]
    if not items:
        raise ExperimentError("--contexts: no context named")
    names = [s if isinstance(s, str) else s.name for s in items]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise ExperimentError(f"--contexts: {', '.join(dup)} given more than once")
    out = []
    for item in items:
        ctx = scalars.get(item)                   # unknown names: ContextError with the list
        check_point_context(ctx, "--contexts")
        out.append(ctx)
    return out


def check_point_context(ctx, flag: str) -> None:
    """Refuse interval, dual and complex contexts: error tables compare real point values."""
    what = ("interval" if ctx.is_interval else "dual" if ctx.is_dual else
            "complex" if metrics.has_complex_values(ctx) else None)
    if what is not None:
        raise ExperimentError(f"{flag}: context {ctx.name} is a{'n' if what[0] == 'i' else ''} "
                              f"{what} context; error tables compare real point values")


def reduction_label(ctx) -> str:
    """The order of a context's sums as tables show it (``sequential@binary32``: a mixed
    context accumulating in binary32)."""
    acc = ctx.accumulation
    return ctx.reduction + (f"@{acc.name}" if acc is not None else "") + (
        "+fma" if ctx.fma_dot else "")


# ----------------------------------------------------------------------------- inputs
def parse_input(text: str, shape: tuple):
    """``--input``: comma-separated exact decimals, or a ``.npy`` file of one or N inputs.

    Returns an array with a leading batch axis: object (decimal strings, kept exact for
    the reference) or float64 (from a file, read by the CLI's one ``.npy`` reader).
    """
    if text.endswith(".npy"):
        arr = read_npy(text, "--input", allow_0d=shape == ())
        if arr.shape == shape:
            arr = arr[None]
        if arr.shape[1:] != shape:
            raise ExperimentError(f"--input {text}: array shape {list(arr.shape)} does not "
                                  f"match the input node's shape {list(shape)} "
                                  f"(or [N, {', '.join(map(str, shape))}])")
        return arr
    parts = [p.strip() for p in text.replace(";", ",").split(",") if p.strip()]
    from fractions import Fraction
    for p in parts:
        try:
            Fraction(p)
        except (ValueError, ZeroDivisionError):
            raise ExperimentError(f"--input: {p!r} is not a decimal number") from None
    need = int(np.prod(shape)) if shape else 1
    if len(parts) != need:
        raise ExperimentError(f"--input: got {len(parts)} numbers, the input node has shape "
                              f"{list(shape)} ({need} numbers)")
    return np.array(parts, dtype=object).reshape((1, *shape))


def center_of(case: GraphCase, text: str | None, flag: str = "--input"):
    """The input (batch of 1) named by ``--input``, or the graph's built-in x0.

    Single-input graphs get an array with a leading batch axis; graphs with several input
    nodes (built-in x0 only) get ``{input_id: array}`` with the same leading axis.
    """
    ids = case.input_ids()
    if text is not None:
        x = parse_input(text, case.input_shape())
        check_integer_inputs(case, x, flag)
        return x
    if case.x0 is None:
        shape = case.input_shape()
        raise ExperimentError(f"graph {case.name} has no built-in input; give --input "
                              f"(shape {list(shape)})")
    if isinstance(case.x0, dict):
        return {int(i): _batch_of_one(case.x0[i], case.nodes[int(i)].out_shape)
                for i in sorted(case.x0)}
    if len(ids) != 1:
        case.input_shape()                                  # raises with the input ids
    return _batch_of_one(case.x0, case.nodes[ids[0]].out_shape)


def _batch_of_one(x0, shape) -> np.ndarray:
    arr = np.asarray(x0, dtype=object if _is_exact(x0) else np.float64)
    return arr.reshape((1, *tuple(int(t) for t in shape)))


def _is_exact(x0) -> bool:
    arr = np.asarray(x0, dtype=object).reshape(-1)
    return any(isinstance(v, str) or hasattr(v, "denominator") for v in arr)


def as_float64(x) -> np.ndarray:
    """Float64 view of an input batch (decimal strings rounded once, correctly)."""
    arr = np.asarray(x)
    if arr.dtype != object:
        return arr.astype(np.float64)
    from scalarlab.scalars.float64 import float64_array
    return float64_array(arr)  # strings through the bounded literal reader, one rounding


# An input batch is an array with a leading sample axis, or {input_id: such array}.
def batch_size(x) -> int:
    if isinstance(x, dict):
        return int(next(iter(x.values())).shape[0])
    return int(x.shape[0])


def batch_take(x, sel):
    """The samples ``sel`` (a slice or an index array) of a batch."""
    if isinstance(x, dict):
        return {i: v[sel] for i, v in x.items()}
    return x[sel]


def batch_map(x, f):
    """Apply ``f`` to every input array of a batch (inputs in id order)."""
    if isinstance(x, dict):
        return {i: f(x[i]) for i in sorted(x)}
    return f(x)


def box_samples(center, radius: float, n: int, seed: int, case=None):
    """``n`` inputs uniform in the l-inf box of ``radius`` around ``center`` (seeded).
    With ``case``, its integer inputs (:func:`integer_inputs`) are held at the centre:
    a token id is not a point of a continuum."""
    if n < 1:
        raise ExperimentError(f"--samples must be >= 1, got {n}")
    if not np.isfinite(2.0 * radius) or radius < 0:
        raise ExperimentError(f"--radius must be a finite number >= 0 (and 2r finite), "
                              f"got {radius}")
    if batch_size(center) != 1:
        raise ExperimentError(f"sampling needs a single centre input, got {batch_size(center)}")
    rng = np.random.default_rng(seed)

    def draw(c):
        c = as_float64(c)[0]
        return c + rng.uniform(-radius, radius, size=(n, *c.shape))

    def held(c):
        return np.repeat(as_float64(c), n, axis=0)
    return map_real_inputs(case, center, draw, held)


# --------------------------------------------------------------------------- evaluation
def _chunk_size(ctx) -> int:
    # Object-valued contexts (mpmath, rationals) cost microseconds per scalar op: small
    # chunks keep the progress moving and its ETA fed; array contexts take big batches.
    return 1 << 18 if is_array_context(ctx) else 256


def evaluate_split(case: GraphCase, x, ctx, *, quiet=True, desc=None, partial=False,
                   errors: dict | None = None) -> list:
    """Evaluate all samples of ``x`` in ``ctx``; per node a double-double (hi, lo) pair.

    Batched: one ``denote_all`` call per chunk of samples (the whole batch when small).
    With ``partial`` a node the context cannot compute (e.g. tanh over rationals) is
    ``None``, together with its dependents, instead of raising; ``errors`` (a dict) then
    receives the fold's first message per node that failed itself.  Unless ``quiet``,
    :mod:`experiments.progress` shows the evaluation per chunk and per node (``desc``
    names it, default the context) where the command's progress is shown.
    """
    import scalarlab.graph as G
    n = batch_size(x)
    step = _chunk_size(ctx)
    parts: list = [[] for _ in case.nodes]
    kernels = ieee_kernels(case.graph, ctx)
    ev = live.evaluation(case.graph, n, step, desc or ctx.name, quiet=quiet)
    try:
        for s in range(0, n, step):
            ev.chunk(s, min(step, n - s))
            found: dict = {}
            values = G.denote_all(case.graph, case.payload, batch_take(x, slice(s, s + step)),
                                  ctx, partial=partial, kernels=kernels, errors=found,
                                  on_node=ev.node_done)
            ev.end_chunk()
            if errors is not None:
                for i, msg in found.items():
                    errors.setdefault(i, msg)
            for i, v in enumerate(values):
                if v is None or parts[i] is None:
                    parts[i] = None
                else:
                    parts[i].append(split_values(ctx, v))
    finally:
        ev.close()
    return [None if p is None else p[0] if len(p) == 1 else
            (np.concatenate([h for h, _ in p]), np.concatenate([lo for _, lo in p]))
            for p in parts]


def ieee_kernels(graph, ctx) -> dict:
    """Per-node fold kernels giving the format's IEEE value where the op table refuses a
    point value (``log(0)`` = -inf, ``sqrt(-1)`` = NaN): the op's own rule, and on its
    domain error the context's method of the same name, which follows IEEE 754 (for
    elementwise maps only).

    The lab's fold raises there on purpose; Herbie's counting scores what the format
    computes on a sample whose exact value is finite, so an underflowed ``(log (* x x))``
    is measured, not refused.  Only binary-format contexts get them (an oracle's refusal
    means the exact value is not real)."""
    from scalarlab.graph.fold import rule_for
    from scalarlab.graph.optable import OPS, OpDataError
    out = {}
    if metrics.format_of(ctx) is None or ctx.is_interval or ctx.is_dual:
        return out
    for node in graph.nodes:
        op = node.kind.op
        f = getattr(ctx, op, None)
        # only elementwise maps without attributes or parameters: their context method
        # takes the node's arguments as they are; another op's method (take's axis, a
        # reduction's axes) would compute something else instead of refusing
        rec = OPS.get(op)
        if op in ("input", "const") or rec is None or not callable(f) or \
                not rec.elementwise or rec.attrs or rec.params:
            continue
        rule = rule_for(rec, ctx)

        def kernel(args, attrs, nb, _rule=rule, _f=f):
            try:
                return _rule(ctx, args, attrs, nb)
            except OpDataError:
                with np.errstate(all="ignore"):
                    return _f(*args)
        out[node.id] = kernel
    return out


def split_values(ctx, v):
    """A context's value array as float64 (hi, lo): exact for binary formats; a ball's
    midpoint as its double-double."""
    from scalarlab.scalars.values import Ball
    if isinstance(v, Ball):
        return ctx.midpoint_dd(v)
    arr = np.asarray(v)
    if arr.dtype == object:
        return metrics.exact_split(arr)
    if arr.dtype.kind == "c":
        raise ExperimentError(f"context {ctx.name} produced complex values")
    # no copy of a float64 fold's values; np.zeros maps untouched zero pages (no memory
    # until written), where zeros_like writes every page of a tensor that is only read
    hi = np.asarray(arr, dtype=np.float64)
    return hi, np.zeros(hi.shape)


def is_array_context(ctx) -> bool:
    """True for contexts whose values are numeric arrays (float64 and the binary formats):
    a batch costs one numpy call per op.  Format-less contexts that do not reduce natively
    (mpmath, rationals, fp32-real) hold Python objects and cost microseconds per scalar."""
    return ctx.fmt is not None or ctx.reduction == "native"
