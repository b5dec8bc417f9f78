"""Input sampling as the floating-point community does it: per-variable boxes, bit
patterns, rejection by a precondition, and sample files.

* **Regions.**  Every scalar input variable gets an interval ``[lo, hi]`` (exact bounds,
  either end may be open = the format's largest finite value); an FPCore ``:pre`` gives
  them through :func:`scalarlab.graph.importers.fpcore.precondition_boxes`, a graph gets
  them from ``--box lo1:hi1,lo2:hi2,...`` or a JSON/NPY file (:func:`parse_box`).
  Bounds are rounded INWARD into the sampled format (``lo`` up, ``hi`` down; one more
  step for a strict ``<``), so every sample satisfies them exactly.
* **bitpattern** (Herbie's choice): uniform over the format's finite values in the
  region -- uniform ordinals, so every binade is as likely as every other and tiny
  magnitudes and subnormals are reached.  **box**: uniform real in the region, rounded
  to nearest into the format (a variable with an open end falls back to bit patterns,
  since no uniform distribution covers it; the result says which variables did).
* **Rejection**: the conjuncts of a precondition that are not boxes are compiled to IR
  graphs by the FPCore translator and decided on each batch of samples by the fold
  (:meth:`scalarlab.graph.importers.fpcore_pre.Condition.decide`: exactly in the rational
  context where every op is rational, else in interval contexts of rising precision; a
  sample counts only when the condition is surely true).  Failing samples are redrawn;
  the numbers rejected and undecided are reported, and ``Samples.short`` says when fewer
  samples than asked came back.
* **Sample files**: ``--input-file X.npy`` holds one row per sample and one column per
  scalar input entry, inputs in id order (= FPCore argument order);
  :func:`load_input_file` checks it and splits it into the graph's input nodes.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from scalarlab.scalars import formats
from scalarlab.scalars.kernels import literals

from .errors import ExperimentError
from .npy_input import read_npy

from .defaults import SAMPLINGS  # noqa: E402,F401


# ------------------------------------------------------------------------------ regions
@dataclass
class Region:
    """One scalar variable's sampling interval (exact; None = open to +-infinity)."""
    lo: Fraction | None = None
    hi: Fraction | None = None
    lo_strict: bool = False
    hi_strict: bool = False

    @property
    def finite(self) -> bool:
        return self.lo is not None and self.hi is not None

    def describe(self) -> str:
        lo = "-inf" if self.lo is None else _short(self.lo)
        hi = "inf" if self.hi is None else _short(self.hi)
        return f"{'(' if self.lo is None or self.lo_strict else '['}{lo}, {hi}" \
               f"{')' if self.hi is None or self.hi_strict else ']'}"


def _short(q: Fraction) -> str:
    return f"{float(q):.6g}"


def regions_from_bounds(bounds: dict, names) -> list:
    """FPCore :class:`Bound` objects (by argument name) -> :class:`Region` list."""
    return [Region(b.lo, b.hi, b.lo_strict, b.hi_strict)
            for b in (bounds[n] for n in names)]


def format_range(region: Region, fmt) -> tuple:
    """``(lo, hi)`` format values inside the region (inward rounding), or ExperimentError."""
    big = fmt.max_finite
    if region.lo is None:
        lo = -big
    else:
        lo = formats.round_fraction(region.lo, fmt, "up")
        if region.lo_strict and Fraction(lo) == region.lo:
            lo = float(formats.next_up(np.array([lo]), fmt)[0])
        lo = max(lo, -big)
    if region.hi is None:
        hi = big
    else:
        hi = formats.round_fraction(region.hi, fmt, "down")
        if region.hi_strict and Fraction(hi) == region.hi:
            hi = float(formats.next_down(np.array([hi]), fmt)[0])
        hi = min(hi, big)
    if not lo <= hi:
        raise ExperimentError(f"the interval {region.describe()} holds no finite "
                              f"{fmt.name} value")
    return float(lo), float(hi)


def _ordinals(x, fmt) -> np.ndarray:
    from .gaps import ordinals
    return ordinals(x, fmt)


def _from_ordinals(k, fmt) -> np.ndarray:
    from .gaps import from_ordinals
    return from_ordinals(k, fmt)


def draw(regions, fmt, n: int, rng, sampling: str = "bitpattern", held=()) -> tuple:
    """``(X, by_bits)``: ``n`` samples of ``fmt`` per region (X has shape ``(n, k)``) and the
    indices of the variables drawn by bit pattern (all of them for ``bitpattern``; the
    open-ended ones for ``box``).  Columns in ``held`` (integer inputs, whose regions
    :func:`check_held_regions` made single integers) repeat their value, unrounded."""
    if sampling not in SAMPLINGS:
        raise ExperimentError(f"--sampling {sampling!r}: choose one of {', '.join(SAMPLINGS)}")
    fmt = formats.get(fmt)
    X = np.empty((n, len(regions)))
    by_bits = []
    for j, r in enumerate(regions):
        if j in held:
            X[:, j] = float(r.lo)           # an integer within 2^53 (read_npy/--box checked)
            continue
        lo, hi = format_range(r, fmt)
        if sampling == "box" and r.finite:
            u = rng.uniform(lo, hi, size=n) if hi > lo else np.full(n, lo)
            x = formats.round_to_format(u, fmt, "nearest_even")
            X[:, j] = np.clip(x, lo, hi)        # rounding may step just outside: clamp
        else:
            by_bits.append(j)
            olo, ohi = _ordinals(np.array([lo]), fmt)[0], _ordinals(np.array([hi]), fmt)[0]
            X[:, j] = _from_ordinals(rng.integers(olo, ohi, size=n, endpoint=True), fmt)
    return X, by_bits


# ------------------------------------------------------------------------- rejection
def _conditions(residual, names) -> list:
    """Residual conjuncts as compiled conditions (FPCore expressions are compiled here;
    :class:`Condition` s pass).  A conjunct the translator refuses is an ExperimentError."""
    from scalarlab.graph.importers.fpcore import Condition, compile_condition
    from scalarlab.graph.errors import GraphError
    out = []
    for c in residual:
        if isinstance(c, Condition):
            if list(c.arguments) != list(names):
                raise ExperimentError(f"precondition {c.text[:60]}: compiled over "
                                      f"{c.arguments}, sampled over {list(names)}")
            out.append(c)
            continue
        try:
            out.append(compile_condition(c, list(names)))
        except GraphError as exc:
            raise ExperimentError(str(exc)) from None
    return out


def eval_condition(expr, env: dict) -> bool:
    """Is the FPCore condition ``expr`` surely true at the exact point ``env``
    (``{name: Fraction}``)?  The same compiled graph and fold as :func:`residual_mask`."""
    cond, = _conditions([expr], list(env))
    return cond.holds(env)


def residual_mask(residual, names, X, *, with_undecided: bool = False):
    """Per sample (row of X): is every residual precondition conjunct surely true?  Decided
    by the fold in the rational context (rational ops) or in interval contexts of rising
    precision (:meth:`Condition.decide`); ``with_undecided`` also returns the mask of the
    samples rejected only because no precision tried decided a conjunct."""
    ok = np.ones(len(X), dtype=bool)
    undecided = np.zeros(len(X), dtype=bool)
    for cond in _conditions(residual, names):
        rows = np.flatnonzero(ok)
        if not len(rows):
            break
        d = cond.decide(X[rows])
        ok[rows[~d.true]] = False
        undecided[rows[d.undecided]] = True
    return (ok, undecided) if with_undecided else ok


@dataclass
class Samples:
    """Samples inside the regions that satisfy the residual precondition."""
    x: np.ndarray                    # (n, k) format values
    drawn: int                       # samples drawn in total
    rejected: int                    # ... of which the precondition rejected
    by_bits: list = field(default_factory=list)
    draw_index: np.ndarray = None    # per sample: draws made up to and including it
    undecided: int = 0               # rejected ones no interval precision decided
    asked: int = 0                   # samples asked for (more than ``len(x)``: ran short)

    @property
    def short(self) -> bool:
        """Fewer samples than asked (the precondition rejected nearly every draw)."""
        return len(self.x) < self.asked


def sample(regions, names, residual, fmt, n: int, rng, sampling="bitpattern", *,
           max_draw: int | None = None) -> Samples:
    """Draw until ``n`` samples satisfy the residual precondition (or ``max_draw`` were
    drawn, default ``200 n``, or ``max(16 n, 4096)`` draws gave none; fewer samples then
    come back and ``Samples.short`` is set)."""
    if n < 1:
        raise ExperimentError(f"--samples must be >= 1, got {n}")
    max_draw = max_draw or 200 * n
    conds = _conditions(residual, names)
    got, drawn, rejected, undecided, by_bits, index = [], 0, 0, 0, [], []
    have = 0
    while have < n and drawn < max_draw:
        if have == 0 and drawn >= max(16 * n, 4096):
            # nothing accepted: the acceptance rate is below 1/(16 n), so n samples would
            # take more than 16 n^2 draws -- give up early (``short`` says so)
            break
        m = min(max(2 * (n - have), 16), max_draw - drawn)
        X, by_bits = draw(regions, fmt, m, rng, sampling)
        ok, und = residual_mask(conds, names, X, with_undecided=True)
        acc = np.flatnonzero(ok)
        if len(acc) > n - have:          # count the draws up to the n-th accepted only
            cut = int(acc[n - have - 1]) + 1
            X, ok, und = X[:cut], ok[:cut], und[:cut]
        index.append(drawn + np.flatnonzero(ok) + 1)
        drawn += len(X)
        rejected += int(np.count_nonzero(~ok))
        undecided += int(np.count_nonzero(und))
        got.append(X[ok])
        have += int(np.count_nonzero(ok))
    x = np.concatenate(got) if got else np.empty((0, len(regions)))
    idx = np.concatenate(index) if index else np.empty(0, dtype=np.int64)
    return Samples(x, drawn, rejected, by_bits, idx, undecided, n)


# -------------------------------------------------------------------- graphs and files
def input_entries(case) -> list:
    """``[(input_id, shape), ...]`` of a graph's input nodes in id order."""
    return [(int(i), tuple(int(s) for s in case.nodes[i].out_shape)) for i in case.input_ids()]


def integer_columns(case) -> dict:
    """``{column: (input_id, dtype)}``: the columns of a sample file (or ``--box`` entries)
    that belong to integer inputs (``case``: a GraphCase or a Graph)."""
    from scalarlab.graph.ops_shape import integer_input
    out, c = {}, 0
    for i, shape in input_entries(case):
        w = int(np.prod(shape)) if shape else 1
        node = case.nodes[i]
        if integer_input(node):
            out.update({c + k: (i, str(node.kind.attrs["dtype"])) for k in range(w)})
        c += w
    return out


def check_held_regions(case, regions, flag: str = "--box") -> set:
    """The integer columns, after checking that ``--box`` gives each a single integer
    (``n:n``): integer inputs are held, never sampled from an interval.  ExperimentError
    naming the entry, its input node and type otherwise."""
    cols = integer_columns(case)
    for j, (i, dtype) in cols.items():
        r = regions[j]
        if not (r.finite and r.lo == r.hi and r.lo.denominator == 1 and abs(r.lo) <= 2 ** 53
                and (dtype != "bool" or r.lo in (0, 1))
                and (not dtype.startswith("u") or r.lo >= 0)):
            raise ExperimentError(f"{flag} entry {j}: input node {i} holds {dtype} values (token "
                                  f"ids, positions or masks are held, never sampled from an "
                                  f"interval), got {r.describe()}; give one integer as n:n or "
                                  f"sample the inputs from --input-file")
    return set(cols)


def columns(case) -> int:
    return sum(int(np.prod(s)) if s else 1 for _, s in input_entries(case))


def split_columns(case, X: np.ndarray):
    """An ``(N, columns)`` array -> the batch the fold takes (array or {id: array});
    None for a graph without inputs."""
    parts, c = {}, 0
    for i, s in input_entries(case):
        w = int(np.prod(s)) if s else 1
        parts[i] = X[:, c:c + w].reshape((len(X),) + s)
        c += w
    if len(parts) == 1:
        return next(iter(parts.values()))
    return parts or None


def load_input_file(path: str, case, flag="--input-file"):
    """``(batch, description)`` from a ``.npy`` file of ``N`` rows x one column per scalar
    input entry (inputs in id order), read by :func:`read_npy`.  A single-input graph
    also takes ``[N, *shape]``."""
    # a bool input (an attention mask) may come from a bool array
    masks = any(d == "bool" for _, d in integer_columns(case).values())
    arr = read_npy(path, flag, allow_bool=masks)
    entries = input_entries(case)
    k = columns(case)
    if len(entries) == 1 and arr.ndim >= 1 and arr.shape[1:] == entries[0][1] \
            and entries[0][1] != ():
        arr = arr.reshape(len(arr), -1)
    if arr.ndim == 1 and k == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[1] != k or len(arr) == 0:
        raise ExperimentError(f"{flag} {path}: array shape {list(arr.shape)}; expected [N, {k}] "
                              f"(one column per scalar input entry, inputs in id order: "
                              f"{', '.join(f'node {i} {list(s)}' for i, s in entries)})")
    check_integer_columns(case, arr, f"{flag} {path}")
    return split_columns(case, arr), f"{len(arr)} samples from {path}"


def check_integer_columns(case, X, what: str) -> None:
    """ExperimentError when a column of an integer input holds a non-integer (or a bool
    input something other than 0/1, an unsigned one a negative value)."""
    for j, (i, dtype) in integer_columns(case).items():
        col = X[:, j]
        bad = (col != np.floor(col)) | ((col != 0) & (col != 1) if dtype == "bool" else
                                        (col < 0) if dtype.startswith("u") else False)
        if np.any(bad):
            r = int(np.flatnonzero(bad)[0])
            need = ("0 or 1" if dtype == "bool" else "integers >= 0" if dtype.startswith("u")
                    else "integers")
            raise ExperimentError(f"{what}: row {r} column {j} is {float(col[r])!r}, but it belongs "
                                  f"to input node {i}, which holds {dtype} values (token ids, "
                                  f"positions or masks); that column must hold {need}")


def _exact_text(v: float) -> str:
    """A float64 bound as text that :func:`_bound` reads back exactly (inf: open)."""
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    q = Fraction(float(v))
    return f"{q.numerator}/{q.denominator}"


def _bound(text: str, what: str):
    t = text.strip()
    if t.lower() in ("", "-inf", "inf", "+inf"):
        return None
    try:
        return literals.exact(t)     # bounded: beyond 10^+-1000 refused before 10^e is built
    except literals.NotALiteral:
        raise ExperimentError(f"{what}: {text!r} is not a number") from None
    except literals.LiteralError as exc:
        raise ExperimentError(f"{what}: {exc}") from None


def parse_box(spec: str, k: int, flag: str = "--box") -> list:
    """``lo1:hi1,lo2:hi2,...`` (one pair per scalar input entry; a single pair applies to
    all), or a ``.json`` file (list of [lo, hi]) or ``.npy`` file (shape [k, 2])."""
    pairs = None
    if spec.endswith(".npy"):
        arr = read_npy(spec, flag, allow_infinite=True)
        if arr.ndim != 2 or arr.shape[1] != 2:
            raise ExperimentError(f"{flag} {spec}: array shape {list(arr.shape)}; expected "
                                  f"[k, 2] (one [lo, hi] row per scalar input entry)")
        pairs = [[_exact_text(a), _exact_text(b)] for a, b in arr]
    elif spec.endswith(".json"):
        from scalarlab.graph import files
        try:
            pairs = json.loads(files.read_text(spec, flag))  # regular file within the cap
        except files.InputFileError as exc:
            raise ExperimentError(str(exc)) from None
        except (ValueError, RecursionError) as exc:
            raise ExperimentError(f"{flag} {spec}: cannot read: {exc}") from None
        if not (isinstance(pairs, list) and all(isinstance(t, list) and len(t) == 2
                                                for t in pairs)):
            raise ExperimentError(f"{flag} {spec}: expected a list of [lo, hi] pairs")
        pairs = [(str(a), str(b)) for a, b in pairs]
    else:
        pairs = []
        for part in spec.split(","):
            if ":" not in part:
                raise ExperimentError(f"{flag}: {part!r} is not lo:hi")
            a, b = part.split(":", 1)
            pairs.append((a, b))
    if len(pairs) == 1 and k > 1:
        pairs = pairs * k
    if len(pairs) != k:
        raise ExperimentError(f"{flag}: {len(pairs)} intervals for {k} scalar input entries")
    out = []
    for j, (a, b) in enumerate(pairs):
        lo, hi = _bound(a, f"{flag} entry {j}"), _bound(b, f"{flag} entry {j}")
        if lo is not None and hi is not None and lo > hi:
            raise ExperimentError(f"{flag} entry {j}: lo {a} > hi {b}")
        out.append(Region(lo, hi))
    return out


def box_batch(case, regions, n: int, seed: int, fmt=None, sampling="box"):
    """``n`` samples of the graph's inputs in the per-entry regions: in ``fmt`` (bit
    patterns or rounded uniform), or uniform float64 when ``fmt`` is None.  Integer
    inputs are held at their single integer (:func:`check_held_regions`)."""
    held = check_held_regions(case, regions)
    rng = np.random.default_rng(seed)
    X, _ = draw(regions, fmt or "binary64", n, rng, sampling, held=held)
    return split_columns(case, X)


# ------------------------------------------------------------------------ CLI helpers
# (--input-file, --box and --sampling are declared by
# experiments.command_args.add_sample_file_arguments, which needs no numpy)


def batch_from_flags(case, args, *, n_default=None, fmt=None, sampling=None):
    """``(batch, description)`` from ``--input-file`` / ``--box``, or None when neither
    flag was given.  ``fmt``: draw the box samples in that format (gaps); default
    uniform float64 / binary64 bit patterns."""
    input_file = getattr(args, "input_file", None)
    box = getattr(args, "box", None)
    if input_file is None and box is None:
        return None
    if input_file is not None and box is not None:
        raise ExperimentError("--input-file and --box exclude each other")
    if getattr(args, "input", None) is not None:
        raise ExperimentError(f"--input and {'--input-file' if input_file else '--box'} "
                              f"exclude each other")
    if input_file is not None:
        return load_input_file(input_file, case)
    n = getattr(args, "samples", None) or n_default
    if n is None:
        raise ExperimentError("--box needs --samples N")
    sampling = sampling or getattr(args, "sampling", None) or "box"
    regions = parse_box(box, columns(case))
    x = box_batch(case, regions, int(n), int(getattr(args, "seed", 0) or 0), fmt, sampling)
    where = ", ".join(r.describe() for r in regions[:4]) + (", ..." if len(regions) > 4 else "")
    return x, (f"{n} samples ({sampling}{' in ' + formats.get(fmt).name if fmt else ''}) "
               f"in the box {where} (seed {getattr(args, 'seed', 0)})")


# ---------------------------------------------------------------- several-input graphs
def pack_inputs(graph, payload):
    """``(graph', payload')`` with ONE input node holding every scalar input entry (the
    columns of :func:`split_columns`, inputs in id order) and the old input nodes
    replaced by exact data movement: ``gather`` of one entry for a scalar input,
    ``slice`` + ``reshape`` for a shaped one.  For consumers that take one input box
    (IBP, ``sweep``); a graph with one input comes back unchanged.  Needs the ``gather``
    and ``slice`` ops of the op table."""
    from scalarlab.graph import Graph, Node, OpKind
    from scalarlab.graph.optable import OPS
    from scalarlab.graph.payload import Payload, as_payload
    ids = [n.id for n in graph.nodes if n.kind.op == "input"]
    if len(ids) <= 1:
        return graph, payload
    missing = [op for op in ("gather", "slice", "reshape") if op not in OPS]
    if missing:
        raise ExperimentError(f"a graph with {len(ids)} input nodes needs the op(s) "
                              f"{', '.join(missing)} to be packed into one input")
    payload = as_payload(payload)
    widths = {i: int(np.prod(graph.nodes[i].out_shape)) if graph.nodes[i].out_shape else 1
              for i in ids}
    k = sum(widths.values())
    # one packed input holds integers when every input does (token ids and their mask);
    # a mix of real and integer inputs stays real here and its integer entries get radius
    # 0 from :func:`held_radii`
    dtypes = {str(graph.nodes[i].kind.attrs.get("dtype", "float")) for i in ids}
    attrs = {"dtype": dtypes.pop()} if len(dtypes) == 1 else \
        {"dtype": "int64"} if "float" not in dtypes else {}
    nodes = [Node(0, [], OpKind("input", **{k_: v for k_, v in attrs.items() if v != "float"}),
                  [k])]
    new_id, col = {}, 0
    out = Payload()
    for n in graph.nodes:
        if n.kind.op == "input":
            w, shape = widths[n.id], tuple(n.out_shape)
            if not shape:
                nodes.append(Node(len(nodes), [0], OpKind("gather", indices=col, axis=0), []))
            else:
                nodes.append(Node(len(nodes), [0], OpKind("slice", starts=[col],
                                                          ends=[col + w], axes=[0]), [w]))
                nodes.append(Node(len(nodes), [len(nodes) - 1],
                                  OpKind("reshape", shape=list(shape)), list(shape)))
            col += w
        else:
            nodes.append(Node(len(nodes), [new_id[p] for p in n.parents], n.kind,
                              list(n.out_shape)))
            if n.id in payload:
                out.set(len(nodes) - 1, payload.get(n.id), op=payload.op_of(n.id))
        new_id[n.id] = len(nodes) - 1
    return Graph(nodes, new_id[graph.output]), out


def held_radii(case, radii) -> list:
    """``sweep`` radii for a graph with several inputs, some real and some integer: per
    radius an array over the packed entries (:func:`pack_inputs`), 0 at the entries of
    integer inputs (held, never widened).  Unchanged when no input or every input is
    integer (the packed input then declares it and the box holds it)."""
    cols = integer_columns(case)
    k = columns(case)
    if not cols or len(cols) == k:
        return list(radii)
    out = []
    for r in radii:
        a = np.full(k, r, dtype=object)
        a[sorted(cols)] = 0
        out.append(a)
    return out


def packed_box(case, regions):
    """``(center, radius)`` arrays (exact Fractions) of the per-entry box of a graph
    packed by :func:`pack_inputs` (both bounds of every entry must be finite)."""
    if not all(r.finite for r in regions):
        raise ExperimentError("--box: every interval needs two finite bounds here")
    c = np.array([(r.lo + r.hi) / 2 for r in regions], dtype=object)
    h = np.array([(r.hi - r.lo) / 2 for r in regions], dtype=object)
    return c, h


def prepare_sweep(graph, payload, default_x, args):
    """``sweep`` on any graph: several input nodes are packed into one
    (:func:`pack_inputs`; a built-in several-input x0 is concatenated in id order), and
    ``--box`` becomes ``(center, per-entry radius)``.  Returns ``(graph, payload,
    default_x, box)`` with ``box`` None without ``--box``."""
    original = graph
    ids = [n.id for n in graph.nodes if n.kind.op == "input"]
    if len(ids) > 1:
        if isinstance(default_x, dict):
            default_x = np.concatenate([np.asarray(default_x[i], dtype=object).reshape(-1)
                                        for i in ids])
        graph, payload = pack_inputs(graph, payload)
    box = None
    spec = getattr(args, "box", None)
    if spec is not None:
        if getattr(args, "input", None) is not None or getattr(args, "input_file", None):
            raise ExperimentError("--box replaces --input/--input-file (the box's midpoints "
                                  "are the centre)")
        k = int(np.prod(graph.nodes[0].out_shape)) if graph.nodes[0].out_shape else 1
        regions = parse_box(spec, k)
        check_held_regions(original, regions)
        c, h = packed_box(None, regions)
        shape = tuple(graph.nodes[0].out_shape)
        box = (c.reshape(shape), h.reshape(shape))
    return graph, payload, default_x, box
