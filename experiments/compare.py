"""The discrepancy table: one graph evaluated in several contexts against a reference.

For every node and every context the table holds the max and mean absolute, relative,
ULP and bits-of-error metrics of :mod:`experiments.metrics`, computed over all samples
and all entries of the node's value.  Evaluation is batched: each context evaluates all
samples in one ``graph.denote_all`` call per chunk.

Inputs: the reference evaluates the input exactly as given (decimal strings or float64
samples); each context rounds it once on conversion, so the input node's row shows the
input quantisation (0 ULPs by construction: it IS the correctly rounded input).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from scalarlab import scalars
from scalarlab.scalars.errors import ScalarLabError

from . import metrics
from .tables import progress

DEFAULT_CONTEXTS = ("float64", "binary32", "bfloat16", "binary16", "e4m3")
DEFAULT_REFERENCE = "mpmath:200"
DEFAULT_THRESHOLD_BITS = 2.0
#: Above this many samples a float64 reference may replace the oracle, once checked.
DEFAULT_ORACLE_LIMIT = 20_000
DEFAULT_CHECK_SAMPLES = 256
#: The cheap float64 reference is only allowed for formats with at most this many
#: significand bits (it then carries >= 27 spare bits beyond the format's precision).
CHEAP_REFERENCE_MAX_PRECISION = 26
#: The check subset is drawn from ``seed + CHECK_SEED_OFFSET``, not ``seed``: callers draw
#: the samples themselves from ``seed``, and the same stream would pick a subset correlated
#: with how the samples were made.  Any fixed offset works; a prime keeps it off small seeds.
CHECK_SEED_OFFSET = 7919
#: Ziv-style safety net: a float64 value is treated as near a rounding boundary when a
#: boundary lies within this many times the largest relative deviation from the oracle
#: seen on the check (2^10: the check sees a subset, the batch may deviate more).
BOUNDARY_SAFETY_FACTOR = 1024.0
#: ... and never less than 2^-52 relative: two float64 roundings, even when the check saw
#: float64 agree exactly with the oracle (a boundary *at* the value is always "near").
BOUNDARY_MIN_REL_TOL = 2.0 ** -52
#: Near-boundary samples are re-evaluated in the oracle only while there are at most
#: max(BOUNDARY_REDO_MIN, n // BOUNDARY_REDO_DIVISOR) of them (a tenth of the batch);
#: beyond that the shortcut saves little over the oracle on all samples.
BOUNDARY_REDO_MIN = 16
BOUNDARY_REDO_DIVISOR = 10


class ExperimentError(ScalarLabError):
    """A user error in an experiment's request (graph, input, context, sampling)."""


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
    """Comma-separated context names -> contexts (point contexts with real values only)."""
    names = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec)]
    names = [n for n in names if n]
    if not names:
        raise ExperimentError("--contexts: no context named")
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise ExperimentError(f"--contexts: {', '.join(dup)} given more than once")
    out = []
    for n in names:
        ctx = scalars.get(n)                      # unknown names: ContextError with the list
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
    return str(getattr(ctx, "reduction", "?")) + ("+fma" if getattr(ctx, "fma_dot", False) else "")


# ----------------------------------------------------------------------------- inputs
def parse_input(text: str, shape: tuple):
    """``--input``: comma-separated exact decimals, or a ``.npy`` file of one or N inputs.

    Returns an array with a leading batch axis: object (decimal strings, kept exact for
    the reference) or float64 (from a file).
    """
    path = Path(text)
    if text.endswith(".npy"):
        if not path.exists():
            raise ExperimentError(f"--input {text}: no such file")
        try:
            arr = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise ExperimentError(f"--input {text}: not a readable .npy array: {exc}") from None
        if arr.dtype.kind not in "fiub":
            raise ExperimentError(f"--input {text}: array of {arr.dtype} values; expected "
                                  "real numbers")
        arr = np.asarray(arr, dtype=np.float64)
        if not np.all(np.isfinite(arr)):
            raise ExperimentError(f"--input {text}: holds NaN or infinite values")
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


def center_of(case: GraphCase, text: str | None):
    """The input (batch of 1) named by ``--input``, or the graph's built-in x0.

    Single-input graphs get an array with a leading batch axis; graphs with several input
    nodes (built-in x0 only) get ``{input_id: array}`` with the same leading axis.
    """
    ids = case.input_ids()
    if text is not None:
        return parse_input(text, case.input_shape())
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
    from fractions import Fraction
    return np.array([float(Fraction(str(v)) if isinstance(v, str) else Fraction(v))
                     for v in arr.reshape(-1)]).reshape(arr.shape)


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


def box_samples(center, radius: float, n: int, seed: int):
    """``n`` inputs uniform in the l-inf box of ``radius`` around ``center`` (seeded)."""
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
    return batch_map(center, draw)


# --------------------------------------------------------------------------- evaluation
def _chunk_size(ctx) -> int:
    # Object-valued contexts (mpmath, rationals) cost microseconds per scalar op: small
    # chunks keep the progress bar moving; array contexts take big batches.
    return 1 << 18 if is_array_context(ctx) else 256


def evaluate_split(case: GraphCase, x, ctx, *, quiet=True, desc=None, partial=False,
                   errors: dict | None = None) -> list:
    """Evaluate all samples of ``x`` in ``ctx``; per node a double-double (hi, lo) pair.

    Batched: one ``denote_all`` call per chunk of samples (the whole batch when small).
    With ``partial`` a node the context cannot compute (e.g. tanh over rationals) is
    ``None``, together with its dependents, instead of raising; ``errors`` (a dict) then
    receives the fold's first message per node that failed itself.
    """
    import scalarlab.graph as G
    n = batch_size(x)
    step = _chunk_size(ctx)
    parts: list = [[] for _ in case.nodes]
    kernels = ieee_kernels(case.graph, ctx)
    starts = range(0, n, step)
    bar = progress(starts, total=len(starts), desc=desc or ctx.name,
                   quiet=quiet or len(starts) < 2)
    for s in bar:
        found: dict = {}
        values = G.denote_all(case.graph, case.payload, batch_take(x, slice(s, s + step)), ctx,
                              partial=partial, kernels=kernels, errors=found)
        if errors is not None:
            for i, msg in found.items():
                errors.setdefault(i, msg)
        for i, v in enumerate(values):
            if v is None or parts[i] is None:
                parts[i] = None
            else:
                parts[i].append(split_values(ctx, v))
    return [None if p is None else p[0] if len(p) == 1 else
            (np.concatenate([h for h, _ in p]), np.concatenate([lo for _, lo in p]))
            for p in parts]


def ieee_kernels(graph, ctx) -> dict:
    """Per-node fold kernels giving the format's IEEE value where the op table refuses a
    point value (``log(0)`` = -inf, ``sqrt(-1)`` = NaN): the op's own rule, and on its
    domain error the context's method of the same name, which follows IEEE 754.

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
        if op in ("input", "const") or op not in OPS or not callable(f):
            continue
        rule = rule_for(OPS[op], ctx)

        def kernel(args, attrs, nb, _rule=rule, _f=f):
            try:
                return _rule(ctx, args, attrs, nb)
            except OpDataError:
                with np.errstate(all="ignore"):
                    return _f(*args)
        out[node.id] = kernel
    return out


def failure_reason(errors: dict) -> str:
    """Why a context could not compute some nodes: the fold's message at the first node
    that failed itself (``errors`` as filled by :func:`evaluate_split`)."""
    return errors[min(errors)] if errors else "not computable on some samples"


def split_values(ctx, v):
    """A context's value array as float64 (hi, lo): exact for binary formats."""
    arr = np.asarray(v)
    if arr.dtype == object:
        return metrics.exact_split(arr)
    if arr.dtype.kind == "c":
        raise ExperimentError(f"context {ctx.name} produced complex values")
    hi = arr.astype(np.float64)
    return hi, np.zeros_like(hi)


# --------------------------------------------------------------------------- reference
@dataclass
class Reference:
    """The values every context is measured against, and an honest label for them."""
    name: str                  # context used for the whole batch
    oracle: str                # the oracle asked for
    label: str                 # one line for headers and reports
    values: list               # per node (hi, lo)
    check: dict = field(default_factory=dict)


def compute_reference(case, x, oracle_name, contexts, *, oracle_limit=DEFAULT_ORACLE_LIMIT,
                      check_samples=DEFAULT_CHECK_SAMPLES, seed=0, quiet=True,
                      nodes=None) -> Reference:
    """The oracle on every sample, or a float64 reference checked against it on a subset.

    The float64 shortcut (:func:`checked_float64_reference`) is tried only when there are
    more than ``oracle_limit`` samples, the oracle is an object-valued context (an array
    context is as cheap as float64 itself), and no compared context is float64 itself or
    wider than ``CHEAP_REFERENCE_MAX_PRECISION`` significand bits.  When it is not taken,
    or declines, the oracle runs on everything (:func:`oracle_reference`) and the label
    says why.
    """
    oracle = scalars.get(oracle_name)
    check_point_context(oracle, "--reference")
    oracle, raised = _oracle_for_inputs(oracle, x)
    why = ""
    if batch_size(x) > oracle_limit and not is_array_context(oracle):
        fmts = [metrics.format_of(c) for c in contexts]
        wide = [c.name for c, f in zip(contexts, fmts)
                if f is None or f.man_bits + 1 > CHEAP_REFERENCE_MAX_PRECISION]
        if wide:
            why = (f"float64 reference not allowed: {', '.join(wide)} too precise for a "
                   f"float64 reference")
        else:
            ref, why = checked_float64_reference(case, x, oracle, set(fmts),
                                                 check_samples=check_samples, seed=seed,
                                                 quiet=quiet, nodes=nodes)
            if ref is not None:
                if raised:
                    ref.label += f"; {raised}"
                return ref
    why = "; ".join(t for t in (raised, why) if t)
    return oracle_reference(case, x, oracle, why, quiet=quiet)


#: An mpmath oracle carries at least this many bits beyond twice the largest binary
#: exponent of the inputs (as fpbench's oracle does), so that tiny or huge inputs -- e.g.
#: bit-pattern samples -- do not vanish against O(1) terms: (exp(x) - 1 at x = 1e-100
#: needs about 330 + 53 bits, which mpmath:200 does not have).
ORACLE_EXPONENT_GUARD = 64


def _oracle_for_inputs(oracle, x):
    """``(oracle, note)``: a multiprecision (``mpmath:P``) oracle raised to
    ``64 + 2 max|exponent|`` bits of the finite nonzero inputs when that is more than P
    (the note says so); read from the context's ``kind`` and ``prec``, not its name."""
    prec = getattr(oracle, "prec", None)
    if getattr(oracle, "kind", None) != "multiprecision" or not isinstance(prec, int):
        return oracle, ""
    parts = x.values() if isinstance(x, dict) else [x]
    emax = 0
    for part in parts:
        try:
            a = np.asarray(np.asarray(part, dtype=object).reshape(-1).astype(float),
                           dtype=np.float64)
        except (TypeError, ValueError, OverflowError):
            continue
        a = a[np.isfinite(a) & (a != 0)]
        if a.size:
            emax = max(emax, int(np.max(np.abs(np.frexp(a)[1]))))
    need = ORACLE_EXPONENT_GUARD + 2 * emax
    if need <= prec:
        return oracle, ""
    raised = type(oracle)(need)
    return raised, (f"oracle raised from {oracle.name} to {raised.name} for inputs with "
                    f"binary exponents up to {emax}")


def is_array_context(ctx) -> bool:
    """True for contexts whose values are numeric arrays (float64 and the binary formats):
    a batch costs one numpy call per op.  Format-less contexts that do not reduce natively
    (mpmath, rationals, fp32-real) hold Python objects and cost microseconds per scalar."""
    return getattr(ctx, "fmt", None) is not None or ctx.reduction == "native"


def oracle_reference(case, x, oracle, why: str = "", *, quiet=True) -> Reference:
    """The oracle evaluated on every sample; ``why`` (if any) says why no shortcut was used."""
    vals = evaluate_split(case, x, oracle, quiet=quiet, desc=f"reference {oracle.name}")
    # Only a format-less context (mpmath, rational, fp32-real) is called an oracle; a
    # binary reference the user asked for is labelled as such.
    kind = "oracle" if metrics.format_of(oracle) is None else "requested reference, not an oracle"
    label = f"{oracle.name} ({kind}, all samples)" + (f"; {why}" if why else "")
    return Reference(oracle.name, oracle.name, label, vals)


def checked_float64_reference(case, x, oracle, fmts, *, check_samples=DEFAULT_CHECK_SAMPLES,
                              seed=0, quiet=True, nodes=None) -> tuple[Reference | None, str]:
    """``(Reference, "")`` from float64 when it passes the check, else ``(None, why)``.

    The check: on ``check_samples`` random samples, float64 and the oracle give, at every
    node of ``nodes`` (default all) and in every format of ``fmts``, the same correctly
    rounded values.  Then float64 evaluates the whole batch, and the samples whose float64
    value lies within its error of a rounding boundary of a format are re-evaluated in the
    oracle -- unless there are so many that the shortcut is pointless (then it declines).
    """
    n = batch_size(x)
    rng = np.random.default_rng(seed + CHECK_SEED_OFFSET)
    idx = np.sort(rng.choice(n, size=min(check_samples, n), replace=False))
    sub = batch_take(x, idx)
    ref_o = evaluate_split(case, sub, oracle, quiet=quiet, desc=f"check {oracle.name}")
    f64 = scalars.get("float64")
    ref_f = evaluate_split(case, sub, f64, quiet=True)
    checked = list(range(len(ref_o)) if nodes is None else nodes)
    mismatches, max_rel = 0, 0.0
    for i in checked:
        (oh, ol), (fh, fl) = ref_o[i], ref_f[i]
        e = metrics.entry_errors(fh, fl, oh, ol, None)
        if e.rel_err.size:
            max_rel = max(max_rel, float(np.max(e.rel_err)))
        for f in fmts:
            a = metrics.correctly_rounded(fh, fl, f)
            b = metrics.correctly_rounded(oh, ol, f)
            mismatches += int(np.count_nonzero(~((a == b) | (np.isnan(a) & np.isnan(b)))))
    if mismatches:
        return None, (f"float64 reference failed the check ({mismatches} rounded values "
                      f"differ on {idx.size} samples)")
    check = {"samples": int(idx.size), "max_rel_dev": max_rel, "rounding_mismatches": 0}
    vals = evaluate_split(case, x, f64, quiet=quiet, desc="float64 reference")
    tol = max(BOUNDARY_SAFETY_FACTOR * max_rel, BOUNDARY_MIN_REL_TOL)
    near = near_boundary(vals, checked, fmts, tol, n)
    k = int(np.count_nonzero(near))
    if k > max(BOUNDARY_REDO_MIN, n // BOUNDARY_REDO_DIVISOR):
        return None, (f"float64 reference not used: {k} of {n} samples lie within its "
                      f"error of a rounding boundary")
    if k:
        sel = np.flatnonzero(near)
        redo = evaluate_split(case, batch_take(x, sel), oracle, quiet=quiet,
                              desc=f"boundary cases in {oracle.name}")
        for i in checked:
            hi, lo = vals[i][0].copy(), vals[i][1].copy()
            hi[sel], lo[sel] = redo[i]
            vals[i] = (hi, lo)
    check["near_boundary_in_oracle"] = k
    where = "every node" if nodes is None else \
        "node" + ("s " if len(nodes) > 1 else " ") + ", ".join(map(str, nodes))
    label = (f"float64, checked against {oracle.name} on {idx.size} samples "
             f"(max rel dev {max_rel:.2g}; identical correctly rounded values "
             f"at {where} in every compared format; {k} sample{'s' if k != 1 else ''} "
             f"near a rounding boundary re-evaluated in the oracle)")
    return Reference("float64", oracle.name, label, vals, check), ""


def near_boundary(vals, nodes, fmts, tol: float, n: int) -> np.ndarray:
    """Per sample: does some node's float64 value ``hi`` have a rounding boundary of some
    format within relative distance ``tol`` (``hi*(1-tol)`` and ``hi*(1+tol)`` round to
    different values)?  Such a value may round the other way than the exact one."""
    from scalarlab.scalars import formats
    near = np.zeros(n, dtype=bool)
    for i in nodes:
        hi = vals[i][0].reshape(n, -1)
        for f in fmts:
            with np.errstate(all="ignore"):
                a = formats.round_to_format(hi * (1 - tol), f)
                b = formats.round_to_format(hi * (1 + tol), f)
            near |= np.any((a != b) & ~(np.isnan(a) & np.isnan(b)), axis=1)
    return near


# ----------------------------------------------------------------------------- compare
ROW_COLUMNS = ("graph", "node", "op", "shape", "context", "format", "reduction", "reference",
               "samples", "entries", "evaluated", *metrics.SUMMARY_COLUMNS,
               "exceeds_threshold", "divergence_start")


@dataclass
class CompareResult:
    case: GraphCase
    contexts: list
    reference: Reference
    samples: int
    input_desc: str
    threshold: float
    rows: pd.DataFrame
    verdicts: dict          # context name -> dict(verdict fields)

    def meta(self) -> dict:
        return {
            "graph": self.case.name,
            "nodes": len(self.case.nodes),
            "output_node": self.case.output_id,
            "reference": self.reference.label,
            "reference_context": self.reference.name,
            "oracle": self.reference.oracle,
            "contexts": [c.name for c in self.contexts],
            "reduction_orders": {c.name: reduction_label(c) for c in self.contexts},
            "samples": self.samples,
            "input": self.input_desc,
            "threshold_bits": self.threshold,
        }


def compare(case: GraphCase, contexts, x, *, reference=DEFAULT_REFERENCE,
            threshold=DEFAULT_THRESHOLD_BITS, input_desc="", quiet=True,
            oracle_limit=DEFAULT_ORACLE_LIMIT, check_samples=DEFAULT_CHECK_SAMPLES,
            seed=0) -> CompareResult:
    """Evaluate ``case`` on the batch ``x`` in every context and tabulate the errors."""
    if not np.isfinite(threshold) or threshold < 0:
        raise ExperimentError(f"--threshold must be a number of bits >= 0, got {threshold}")
    ref = compute_reference(case, x, reference, contexts, oracle_limit=oracle_limit,
                            check_samples=check_samples, seed=seed, quiet=quiet)
    nodes = case.nodes
    rows = []
    verdicts = {}
    for ctx in progress(contexts, desc="contexts", quiet=quiet or len(contexts) < 2):
        errors: dict = {}
        vals = evaluate_split(case, x, ctx, quiet=quiet, partial=True, errors=errors)
        failed = [int(n.id) for n, v in zip(nodes, vals) if v is None]
        reason = failure_reason(errors) if failed else ""
        fmt = metrics.format_of(ctx)
        ctx_rows = []
        for node, val, (rh, rl) in zip(nodes, vals, ref.values):
            if val is None:          # the context cannot compute this node: no figures
                s = {c: float("nan") for c in metrics.SUMMARY_COLUMNS}
                s["nonfinite"] = 0
                entries = 0
            else:
                e = metrics.entry_errors(val[0], val[1], rh, rl, fmt)
                s = metrics.summarize(e)
                entries = int(e.abs_err.size)
            ctx_rows.append({
                "graph": case.name, "node": int(node.id), "op": node_op(node),
                "shape": node_shape(node), "context": ctx.name,
                "format": "-" if fmt is None else fmt.name,
                "reduction": reduction_label(ctx), "reference": ref.name,
                "samples": batch_size(x), "entries": entries, "evaluated": val is not None,
                **s})
        # Divergence is measured in bits of error, so it needs a binary format: a
        # format-less context (mpmath, rational) has NaN bits and never "diverges".
        first = metrics.first_divergence([r["max_bits"] for r in ctx_rows], threshold)
        for i, r in enumerate(ctx_rows):
            r["exceeds_threshold"] = bool(r["max_bits"] > threshold)
            r["divergence_start"] = first is not None and i == first
        rows.extend(ctx_rows)
        out = ctx_rows[case.output_id]
        verdicts[ctx.name] = {
            "context": ctx.name, "reduction": reduction_label(ctx),
            "output_max_ulps": out["max_ulps"], "output_max_bits": out["max_bits"],
            "output_max_rel_err": out["max_rel_err"], "output_mean_bits": out["mean_bits"],
            "divergence_node": None if first is None else int(nodes[first].id),
            "divergence_op": None if first is None else node_op(nodes[first]),
            "divergence_bits": None if first is None else ctx_rows[first]["max_bits"],
            "failed_nodes": failed, "failure": reason,
            "text": verdict_text(ctx, out, first, nodes, ctx_rows, threshold, failed, reason),
        }
    df = pd.DataFrame(rows, columns=list(ROW_COLUMNS))
    return CompareResult(case, list(contexts), ref, batch_size(x), input_desc, threshold,
                         df, verdicts)


def verdict_text(ctx, out, first, nodes, ctx_rows, threshold, failed=(), reason="") -> str:
    from .tables import fmt_number
    if failed:
        head = (f"cannot compute node{'s' if len(failed) > 1 else ''} "
                f"{', '.join(map(str, failed))} ({reason})")
        if not out["evaluated"]:
            good = [r for r in ctx_rows if r["evaluated"]]
            last = good[-1] if good else None
            if last is not None:
                head += (f"; up to node {last['node']}: max rel err "
                         f"{fmt_number(last['max_rel_err'])}")
            return head
    if np.isnan(out["max_ulps"]):
        head = f"output max rel err {fmt_number(out['max_rel_err'])} (no binary format: no ULPs)"
    elif out["max_ulps"] == 0:
        head = "output is the correctly rounded value (0 ULP)"
    else:
        ulp = "ULP" if out["max_ulps"] == 1 else "ULPs"
        head = (f"output off by up to {fmt_number(out['max_ulps'])} {ulp} "
                f"({out['max_bits']:.2f} bits, rel err {fmt_number(out['max_rel_err'])})")
    if out["nonfinite"]:
        head += f"; {out['nonfinite']} non-finite entries"
    if first is None and all(np.isnan(r["max_bits"]) for r in ctx_rows):
        return head
    if first is None:
        tail = f"never above {threshold:g} bits"
    else:
        r = ctx_rows[first]
        tail = (f"gap first exceeds {threshold:g} bits at node {int(nodes[first].id)} "
                f"({node_op(nodes[first])}: {r['max_bits']:.2f} bits)")
    return f"{head}; {tail}"


# --------------------------------------------------------------------------- display
DISPLAY_COLUMNS = {
    "context": "context", "node": "node", "op": "op", "shape": "shape",
    "max_abs_err": "max|abs err|", "mean_abs_err": "mean|abs err|",
    "max_rel_err": "max rel err", "max_ulps": "max ULP", "mean_ulps": "mean ULP",
    "max_bits": "max bits", "mean_bits": "mean bits",
}


def display_frame(df: pd.DataFrame) -> pd.DataFrame:
    """The terminal view: fewer columns, a ``*`` marking each context's divergence node."""
    view = df[list(DISPLAY_COLUMNS)].rename(columns=DISPLAY_COLUMNS).copy()
    view["max bits"] = [f"{b:.2f}" + ("*" if d else "") if np.isfinite(b) else
                        ("inf*" if d else ("inf" if b == np.inf else "-"))
                        for b, d in zip(df["max_bits"], df["divergence_start"])]
    view["mean bits"] = [f"{b:.2f}" if np.isfinite(b) else ("inf" if b == np.inf else "-")
                         for b in df["mean_bits"]]
    # Show each context's name once, on its first row, so the blocks read as groups.
    ctx = list(view["context"])
    view["context"] = [c if i == 0 or ctx[i - 1] != c else "" for i, c in enumerate(ctx)]
    return view


def header_lines(res: CompareResult) -> list[str]:
    case = res.case
    ctxs = ", ".join(c.name for c in res.contexts)
    reds = ", ".join(f"{c.name}={reduction_label(c)}" for c in res.contexts)
    return [
        f"scalarlab compare: graph {case.name} ({len(case.nodes)} nodes, output node "
        f"{case.output_id})",
        f"  reference  : {res.reference.label}",
        f"  contexts   : {ctxs}",
        f"  reductions : {reds}",
        f"  input      : {res.input_desc}",
        f"  samples    : {res.samples}",
        "  metrics    : ULP = distance to the reference correctly rounded into the context's "
        "format; bits = log2(1 + ULP)",
        f"  divergence : first node whose max bits of error > {res.threshold:g} (marked *)",
    ]


def plot_bits(res: CompareResult, path) -> Path:
    """Max bits of error per node, one line per context, with the threshold line."""
    from .tables import new_figure, save_figure
    fig, ax = new_figure()
    for ctx in res.contexts:
        sub = res.rows[res.rows["context"] == ctx.name]
        y = np.where(np.isfinite(sub["max_bits"]), sub["max_bits"], np.nan)
        ax.plot(sub["node"], y, marker="o", label=f"{ctx.name} [{reduction_label(ctx)}]")
    ax.axhline(res.threshold, color="grey", linestyle="--", linewidth=1,
               label=f"threshold {res.threshold:g} bits")
    nodes = res.case.nodes
    ax.set_xticks([int(n.id) for n in nodes])
    ax.set_xticklabels([f"{int(n.id)}\n{node_op(n)}" for n in nodes], fontsize=8)
    ax.set_xlabel("node")
    ax.set_ylabel("max bits of error  (log2(1 + ULP))")
    ax.set_title(f"{res.case.name}: bits of error per node vs {res.reference.name} "
                 f"({res.samples} sample{'s' if res.samples != 1 else ''})", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, path)
