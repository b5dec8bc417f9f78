"""``scalarlab fpbench``: rounding error of FPBench benchmarks in binary formats.

For every benchmark (an FPCore translated by :mod:`scalarlab.graph.importers.fpcore`)
and every context the experiment

1. samples the arguments *in the context's format* from the precondition
   (:mod:`experiments.sampling`: per-argument boxes, bit patterns or uniform, rejection
   for the rest of ``:pre``);
2. drops samples on which the program has no real finite value, as Herbie does: a float64
   pre-pass discards samples where some node is NaN (a domain error the context would
   refuse), then the oracle discards samples where the exact program fails (domain) or
   its value rounded into the format is not finite; more samples are drawn to replace
   them (the ``invalid`` column counts them);
3. evaluates the oracle: mpmath at a precision chosen per sample (``--reference-bits``
   plus twice the largest binary exponent of its arguments, so sums like ``(x + 1) - x``
   or ``exp(x) - 1`` keep every bit at huge or tiny ``x``), checked Ziv-style at twice
   that precision: a sample is accepted when both precisions round to the same format
   value at EVERY node, else it is redone at doubled precision (up to
   ``MAX_ORACLE_BITS``; still undecided samples are dropped and counted as invalid);
4. evaluates the graph in the context (a sample the context cannot compute -- e.g. the
   square root of a value rounding made negative -- counts as the worst error: bits =
   the format's width, as Herbie scores a NaN) and measures, per sample, the ULP distance
   of the output to the oracle correctly rounded into the format and
   ``bits = log2(1 + ULPs)`` (:mod:`experiments.metrics`);
5. finds the first node (in node order = evaluation order) whose max bits of error
   exceed ``--threshold``.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from scalarlab import scalars
from scalarlab.scalars.errors import ScalarLabError

from . import compare as C
from . import metrics
from . import sampling as S
from .tables import progress

DEFAULT_CONTEXTS = ("binary64", "binary32")
DEFAULT_SAMPLES = 256
DEFAULT_REFERENCE_BITS = 256
MAX_ORACLE_BITS = 1 << 14
DEFAULT_THRESHOLD_BITS = 2.0
#: Rounds of drawing (each sized by the valid fraction so far) before giving up with
#: fewer samples than asked (the ``samples`` column then says how many).
MAX_ROUNDS = 6

ROW_COLUMNS = ("file", "benchmark", "index", "arguments", "precision", "domain", "context",
               "format", "sampling", "samples", "drawn", "rejected_pre", "invalid",
               "mean_bits", "max_bits", "max_ulps", "pct_over_1bit", "context_failures",
               "divergence_node", "divergence_op", "divergence_expr", "divergence_bits",
               "skip", "pre")


# ---------------------------------------------------------------------- float64 pre-pass
def _np_table():
    import math as m
    vec = lambda f: np.vectorize(f, otypes=[np.float64])  # noqa: E731

    def safe(f):
        def g(x):
            try:
                return f(x)
            except (ValueError, OverflowError):
                return math.nan
        return vec(g)

    def rem(a, b):
        with np.errstate(all="ignore"):
            return a - b * np.round(a / b)
    return {
        "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
        "neg": np.negative, "abs": np.abs, "sqrt": np.sqrt, "exp": np.exp, "log": np.log,
        "sin": np.sin, "cos": np.cos, "tan": np.tan, "atan": np.arctan, "tanh": np.tanh,
        "asin": np.arcsin, "acos": np.arccos, "sinh": np.sinh, "cosh": np.cosh,
        "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "exp2": np.exp2,
        "expm1": np.expm1, "log10": np.log10, "log2": np.log2, "log1p": np.log1p,
        "cbrt": np.cbrt, "pow": np.power, "hypot": np.hypot, "atan2": np.arctan2,
        "fmod": np.fmod, "remainder": rem, "fmax": np.fmax, "fmin": np.fmin,
        "max": np.maximum, "min": np.minimum,
        "fdim": lambda a, b: np.where(a > b, a - b, 0.0), "copysign": np.copysign,
        "ceil": np.ceil, "floor": np.floor, "trunc": np.trunc, "round": safe(round),
        "nearbyint": np.rint, "fma": lambda a, b, c: a * b + c,
        "erf": safe(m.erf), "erfc": safe(m.erfc), "tgamma": safe(m.gamma),
        "lgamma": safe(m.lgamma),
        "lt": lambda a, b: (a < b) * 1.0, "le": lambda a, b: (a <= b) * 1.0,
        "gt": lambda a, b: (a > b) * 1.0, "ge": lambda a, b: (a >= b) * 1.0,
        "eq": lambda a, b: (a == b) * 1.0, "ne": lambda a, b: (a != b) * 1.0,
        "and": lambda a, b: ((a != 0) & (b != 0)) * 1.0,
        "or": lambda a, b: ((a != 0) | (b != 0)) * 1.0, "not": lambda a: (a == 0) * 1.0,
        "select": lambda c, a, b: np.where(c != 0, a, b),
        "isfinite": lambda a: np.isfinite(a) * 1.0, "isinf": lambda a: np.isinf(a) * 1.0,
        "isnan": lambda a: np.isnan(a) * 1.0, "signbit": lambda a: np.signbit(a) * 1.0,
    }


_NP = None


def float64_nan_mask(graph, payload, X: np.ndarray) -> np.ndarray:
    """Per sample: does some node of the graph evaluate to NaN in plain float64?

    A cheap screen for samples outside the program's domain (sqrt of a negative, log of
    a negative, ...): the lab's point contexts refuse such a value for the whole batch,
    so these samples are dropped before the exact evaluations.  Ops without a numpy
    counterpart are not screened (the exact evaluation still catches them).
    """
    global _NP
    if _NP is None:
        _NP = _np_table()
    n = len(X)
    vals = [None] * len(graph.nodes)
    bad = np.zeros(n, dtype=bool)
    with np.errstate(all="ignore"):
        for node in graph.nodes:
            op = node.kind.op
            if op == "input":
                v = X[:, node.id]
            elif op == "const":
                raw = payload.get(node.id)["value"]
                v = np.full(n, float(scalars.get("float64").convert(raw)))
            else:
                f = _NP.get(op)
                args = [vals[p] for p in node.parents]
                if f is None or any(a is None for a in args):
                    vals[node.id] = None
                    continue
                v = np.asarray(f(*args), dtype=np.float64)
            vals[node.id] = v
            bad |= np.isnan(v)
    return bad


# ----------------------------------------------------------------------- robust folds
def robust_values(case, x, ctx, rows: int = 1):
    """``(values, failed)``: per node (hi, lo) over all samples (NaN rows where the
    evaluation failed) and the mask of samples the context could not evaluate.

    The fold refuses a whole batch when one sample is out of a function's domain, so a
    failing batch is bisected until the failing samples are isolated."""
    if x is None:                 # a program without arguments: one value for all rows
        vals, bad = _no_input(case, ctx)
        return ([(np.repeat(h, rows), np.repeat(lo, rows)) for h, lo in vals],
                np.repeat(bad, rows))
    n = C.batch_size(x)
    failed = np.zeros(n, dtype=bool)
    parts: list = []

    import scalarlab.graph as G

    def go(lo, hi):
        sub = C.batch_take(x, slice(lo, hi))
        try:
            vals = [_split(ctx, v) for v in G.denote_all(case.graph, case.payload, sub, ctx)]
        except ScalarLabError:
            if hi - lo == 1:
                failed[lo] = True
                return
            mid = (lo + hi) // 2
            go(lo, mid)
            go(mid, hi)
            return
        parts.append((lo, hi, vals))
    if n:
        go(0, n)
    out = []
    for k in range(len(case.nodes)):
        hi = np.full(n, np.nan)
        lo = np.full(n, np.nan)
        for a, b, vals in parts:
            h, low = vals[k]
            hi[a:b] = np.asarray(h).reshape(b - a, -1)[:, 0]
            lo[a:b] = np.asarray(low).reshape(b - a, -1)[:, 0]
        out.append((hi, lo))
    return out, failed


def _no_input(case, ctx):
    """``robust_values`` of a graph without input nodes (one evaluation)."""
    import scalarlab.graph as G
    try:
        vals = [_split(ctx, v) for v in G.denote_all(case.graph, case.payload, None, ctx)]
    except ScalarLabError:
        nan = (np.full(1, np.nan), np.full(1, np.nan))
        return [nan for _ in case.nodes], np.ones(1, dtype=bool)
    return [(np.reshape(h, (1,)), np.reshape(lo, (1,))) for h, lo in vals], \
        np.zeros(1, dtype=bool)


def _split(ctx, v):
    """(hi, lo) float64 pair of a value array; object values beyond float64's exponent
    range are first clamped (to +-inf above 2^1100, to 0 below 2^-1100: that is their
    nearest-even value in every format the lab has), so the exact split stays cheap."""
    arr = np.asarray(v)
    if arr.dtype != object:
        return C.split_values(ctx, arr)
    flat = arr.reshape(-1).copy()
    for i, t in enumerate(flat):
        m = getattr(t, "_mpf_", None)
        if m is not None and m[1]:
            top = int(m[2]) + int(m[3])
            if top > 1100:
                flat[i] = float("-inf") if m[0] else float("inf")
            elif top < -1100:
                flat[i] = 0
    return metrics.exact_split(flat.reshape(arr.shape))


def _rounded(v, fmt):
    return metrics.correctly_rounded(v[0], v[1], fmt)


def _same(a, b):
    return (a == b) | (np.isnan(a) & np.isnan(b))


def oracle_values(case, X: np.ndarray, fmt, base_bits=DEFAULT_REFERENCE_BITS):
    """``(values, ok, bits)``: per node the exact value as (hi, lo) for every sample,
    the mask of samples the oracle decided (program defined, both precisions agree at
    every node after rounding into ``fmt``), and the precision used per sample."""
    n = len(X)
    with np.errstate(all="ignore"):
        _, e = np.frexp(np.where(X == 0, 1.0, X))
    span = np.max(np.abs(e), axis=1) if X.shape[1] else np.zeros(n, dtype=int)
    need = base_bits + 2 * span
    prec = np.full(n, base_bits, dtype=np.int64)
    while np.any(prec < need):
        prec = np.where(prec < need, 2 * prec, prec)
    values = [(np.full(n, np.nan), np.full(n, np.nan)) for _ in case.nodes]
    ok = np.zeros(n, dtype=bool)
    pending = np.ones(n, dtype=bool)
    while np.any(pending):
        p = int(np.min(prec[pending]))
        if p > MAX_ORACLE_BITS:
            break
        sel = np.flatnonzero(pending & (prec == p))
        xs = S.split_columns(case, X[sel])
        a, fa = robust_values(case, xs, scalars.get(f"mpmath:{p}"), len(sel))
        b, fb = robust_values(case, xs, scalars.get(f"mpmath:{2 * p}"), len(sel))
        agree = ~fa & ~fb
        for va, vb in zip(a, b):
            agree &= _same(_rounded(va, fmt), _rounded(vb, fmt))
        both_fail = fa & fb
        for k, vb in enumerate(b):
            values[k][0][sel[agree]] = vb[0][agree]
            values[k][1][sel[agree]] = vb[1][agree]
        ok[sel[agree]] = True
        pending[sel[agree | both_fail]] = False
        prec[sel] = 2 * p
    return values, ok, prec


# ----------------------------------------------------------------------------- results
@dataclass
class BenchmarkRun:
    """One benchmark in one context: the samples used and the per-sample errors."""
    row: dict
    x: np.ndarray = None             # (n, k) samples (format values), argument order
    ulps: np.ndarray = None          # per sample, output
    bits: np.ndarray = None
    node_max_bits: list = field(default_factory=list)


def _base_row(prog, ctx, fmt, sampling):
    props = prog.properties
    return {"file": os.path.basename(prog.source), "benchmark": prog.name,
            "index": prog.index, "arguments": " ".join(prog.arguments),
            "precision": prog.precision, "domain": props.get("fpbench-domain", ""),
            "context": ctx.name, "format": fmt.name, "sampling": sampling,
            "samples": 0, "drawn": 0, "rejected_pre": 0, "invalid": 0,
            "mean_bits": math.nan, "max_bits": math.nan, "max_ulps": math.nan,
            "pct_over_1bit": math.nan, "context_failures": 0, "divergence_node": None,
            "divergence_op": "", "divergence_expr": "", "divergence_bits": math.nan,
            "skip": prog.skip or "", "pre": props.get("pre", "")}


def run_benchmark(prog, ctx, *, samples=DEFAULT_SAMPLES, sampling="bitpattern", seed=0,
                  threshold=DEFAULT_THRESHOLD_BITS, reference_bits=DEFAULT_REFERENCE_BITS,
                  x=None) -> BenchmarkRun:
    """Measure one translated FPCore in one binary context (see the module docstring).

    ``x``: an ``(N, k)`` array of samples to use instead of sampling (values are rounded
    into the format by the context; the precondition is not applied)."""
    fmt = metrics.format_of(ctx)
    row = _base_row(prog, ctx, fmt, sampling if x is None else "file")
    if prog.graph is None:
        return BenchmarkRun(row)
    case = C.GraphCase(prog.name, prog.graph, prog.payload)
    k = len(prog.arguments)
    if k == 0:
        samples = 1                  # no arguments: one evaluation is the whole story
    width = fmt.exp_bits + fmt.man_bits + 1
    if x is not None:
        X = np.asarray(x, dtype=np.float64).reshape(len(x), k)
        from scalarlab.scalars import formats
        X = formats.round_to_format(X, fmt, "nearest_even")
        fx, ok, _ = _screen(case, prog, X, fmt, reference_bits)
        row.update(drawn=len(X), invalid=int(np.count_nonzero(~ok)))
        X, vals = X[ok], [(h[ok], lo[ok]) for h, lo in fx]
    else:
        try:
            bounds, residual = prog.boxes()
            regions = S.regions_from_bounds(bounds, prog.arguments)
        except ScalarLabError as exc:
            row["skip"] = f"precondition: {exc}"
            return BenchmarkRun(row)
        rng = np.random.default_rng(seed)
        got_x, got_v, invalid, drawn, rejected = [], [], 0, 0, 0
        have, rounds = 0, 0
        while have < samples and rounds < MAX_ROUNDS:
            rounds += 1
            # draw enough for the valid fraction seen so far (the screen drops the rest)
            rate = max(have / max(drawn - rejected, 1), 0.05) if rounds > 1 else 1.0
            want = min(int(math.ceil((samples - have) / rate * 1.1)) + 4, 20 * samples)
            try:
                smp = S.sample(regions, prog.arguments, residual, fmt, want, rng, sampling)
            except ScalarLabError as exc:
                row["skip"] = f"sampling: {exc}"
                return BenchmarkRun(row)
            if not len(smp.x):
                drawn += smp.drawn
                rejected += smp.rejected
                break
            fx, ok, _ = _screen(case, prog, smp.x, fmt, reference_bits)
            pos = np.flatnonzero(ok)
            if len(pos) > samples - have:
                # the round overshot: count the draws up to the last sample kept only
                cut = int(pos[samples - have - 1]) + 1
                ok = ok[:cut]
                fx = [(h[:cut], lo[:cut]) for h, lo in fx]
                smp.x = smp.x[:cut]
                drawn += int(smp.draw_index[cut - 1])
                rejected += int(smp.draw_index[cut - 1]) - cut
            else:
                drawn += smp.drawn
                rejected += smp.rejected
            invalid += int(np.count_nonzero(~ok))
            got_x.append(smp.x[ok])
            got_v.append([(h[ok], lo[ok]) for h, lo in fx])
            have += int(np.count_nonzero(ok))
        row.update(drawn=drawn, rejected_pre=rejected, invalid=invalid)
        if not have:
            row["skip"] = (f"no valid sample: of {drawn} drawn, {rejected} failed the "
                           f"precondition and {invalid} had no finite real value in "
                           f"{fmt.name}"
                           + ("" if sampling != "bitpattern" or not rejected else
                              " (bit patterns crowd near 0; try --sampling box)"))
            return BenchmarkRun(row)
        X = np.concatenate(got_x)[:samples]
        vals = [(np.concatenate([g[j][0] for g in got_v])[:samples],
                 np.concatenate([g[j][1] for g in got_v])[:samples])
                for j in range(len(case.nodes))]
    n = len(X)
    row["samples"] = n
    if n == 0:
        row["skip"] = "no valid sample"
        return BenchmarkRun(row, X)
    mine, failed = robust_values(case, S.split_columns(case, X), ctx, n)
    node_max = []
    out_ulps = out_bits = None
    for node, (vh, vl), (rh, rl) in zip(case.nodes, mine, vals):
        e = metrics.entry_errors(vh, np.zeros_like(vh), rh, rl, fmt)
        b = np.minimum(e.bits, width)
        # a sample the context could not evaluate has no per-node values: it counts at
        # the output only (as the worst error), the node figures are over the others
        node_max.append(float(np.max(b[~failed])) if np.any(~failed) else float(width))
        if node.id == case.output_id:
            out_ulps = np.where(failed, np.inf, e.ulps)
            out_bits = np.where(failed, float(width), b)
    first = metrics.first_divergence(node_max, threshold)
    row.update(mean_bits=float(np.mean(out_bits)), max_bits=float(np.max(out_bits)),
               max_ulps=float(np.max(out_ulps)),
               pct_over_1bit=100.0 * float(np.mean(out_bits > 1.0)),
               context_failures=int(np.count_nonzero(failed)))
    if first is not None:
        node = case.nodes[first]
        text = prog.node_text[first] if prog.node_text else ""
        row.update(divergence_node=int(node.id), divergence_op=node.kind.op,
                   divergence_expr=text if len(text) <= 60 else text[:57] + "...",
                   divergence_bits=node_max[first])
    return BenchmarkRun(row, X, out_ulps, out_bits, node_max)


def _screen(case, prog, X, fmt, reference_bits):
    """Oracle values of the samples and the mask of valid ones (program defined and
    finite in the format at the output, oracle decided)."""
    ok = ~float64_nan_mask(prog.graph, prog.payload, X)
    vals = [(np.full(len(X), np.nan), np.full(len(X), np.nan)) for _ in case.nodes]
    sel = np.flatnonzero(ok)
    if len(sel):
        v, decided, prec = oracle_values(case, X[sel], fmt, reference_bits)
        out = _rounded(v[case.output_id], fmt)
        good = decided & np.isfinite(out)
        for k, (h, lo) in enumerate(v):
            vals[k][0][sel] = h
            vals[k][1][sel] = lo
        ok[sel[~good]] = False
    return vals, ok, None


# ------------------------------------------------------------------------------ driver
def parse_contexts(spec) -> list:
    ctxs = C.parse_contexts(spec)
    for c in ctxs:
        if metrics.format_of(c) is None:
            raise C.ExperimentError(f"--contexts: {c.name} has no binary format; fpbench "
                                    f"measures ULPs and bits of error in a format")
    return ctxs


def load_programs(paths) -> list:
    """Every FPCore of every file, in order (paths validated first)."""
    from scalarlab.graph.importers.fpcore import read_fpcore
    for p in paths:
        if not os.path.isfile(p):
            raise C.ExperimentError(f"FPCore file {p}: no such file")
    progs = []
    for p in paths:
        progs.extend(read_fpcore(p))
    return progs


def run(progs, contexts, *, samples=DEFAULT_SAMPLES, sampling="bitpattern", seed=0,
        threshold=DEFAULT_THRESHOLD_BITS, reference_bits=DEFAULT_REFERENCE_BITS, x=None,
        quiet=True, keep_runs=False):
    """``(DataFrame, runs)``: one row per benchmark x context (runs kept on request)."""
    rows, runs = [], []
    jobs = [(p, c) for p in progs for c in contexts]
    for prog, ctx in progress(jobs, total=len(jobs), desc="fpbench", quiet=quiet):
        r = run_benchmark(prog, ctx, samples=samples, sampling=sampling, seed=seed,
                          threshold=threshold, reference_bits=reference_bits, x=x)
        rows.append(r.row)
        if keep_runs:
            runs.append(r)
    df = pd.DataFrame(rows, columns=list(ROW_COLUMNS))
    return df, runs


def summary_lines(df: pd.DataFrame) -> list:
    """Per context: how many benchmarks ran and how many were skipped (and why)."""
    lines = []
    for ctx, sub in df.groupby("context", sort=False):
        ran = sub[sub["skip"] == ""]
        lines.append(f"{ctx}: {len(ran)} of {len(sub)} benchmarks ran; mean of mean bits "
                     f"{ran['mean_bits'].mean():.3f}" if len(ran) else
                     f"{ctx}: 0 of {len(sub)} benchmarks ran")
    reasons = df[df["skip"] != ""].drop_duplicates(["file", "index"])["skip"]
    for reason, count in reasons.value_counts().items():
        lines.append(f"  skipped x{count}: {reason}")
    return lines
