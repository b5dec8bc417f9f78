"""``scalarlab fpbench``: rounding error of FPBench benchmarks in binary formats.

For every benchmark (an FPCore translated by :mod:`scalarlab.graph.importers.fpcore`)
and every context the experiment

1. samples the arguments *in the context's format* from the precondition
   (:mod:`experiments.sampling`: per-argument boxes, bit patterns or uniform, rejection
   for the rest of ``:pre``);
2. decides each sample's exact output with the proven oracle (:mod:`experiments.oracle`:
   Arb balls at ``--reference-bits``, doubled per undecided sample up to
   ``MAX_ORACLE_BITS``).  Herbie's sample semantics: a sample whose exact value is not a
   real number (a domain error: ``log`` of a value <= 0, ``0/0``, ...) or is finite but
   beyond the format's range (Herbie's "infinite" points) is ``invalid``; a sample whose
   ball never fits inside one rounding interval of the format is ``unsettled``; both are
   replaced by new draws and never scored.  Every other sample counts, whatever the
   format computes there;
3. evaluates the graph in the context and measures, per sample, the ULP distance of the
   output to the exact value correctly rounded into the format and
   ``bits = log2(1 + ULPs)`` (:mod:`experiments.metrics`).  A NaN or an infinity the exact
   value does not round to, or a sample the context refuses (the square root of a value
   rounding made negative), scores the format's width in bits, the most an ordinal
   distance can give (Herbie scores a NaN so); the ``nonfinite`` column counts them;
4. finds the first node (in node order = evaluation order) whose max bits of error
   exceed ``--threshold``; per-node references are the balls' midpoints (within the
   ball's radius of the exact value; only the output is proven correctly rounded).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from scalarlab import scalars
from scalarlab.scalars.errors import ScalarLabError

from . import cases as CS
from .errors import ExperimentError
from . import metrics
from . import oracle as O
from . import sampling as S
from .tables import progress

from .defaults import FPBENCH_CONTEXTS as DEFAULT_CONTEXTS  # noqa: E402
from .defaults import FPBENCH_MAX_ORACLE_BITS as MAX_ORACLE_BITS  # noqa: E402
from .defaults import FPBENCH_REFERENCE_BITS as DEFAULT_REFERENCE_BITS  # noqa: E402
from .defaults import FPBENCH_SAMPLES as DEFAULT_SAMPLES  # noqa: E402
from .defaults import FPBENCH_THRESHOLD_BITS as DEFAULT_THRESHOLD_BITS  # noqa: E402
#: Rounds of drawing (each sized by the valid fraction so far) before giving up with
#: fewer samples than asked (the ``samples`` column then says how many).
MAX_ROUNDS = 6

ROW_COLUMNS = ("file", "benchmark", "index", "variant", "arguments", "precision", "domain",
               "context", "format", "sampling", "samples", "asked", "drawn", "rejected_pre",
               "invalid", "unsettled", "mean_bits", "max_bits", "max_ulps", "pct_over_1bit",
               "nonfinite", "context_failures", "oracle_bits", "divergence_node",
               "divergence_op", "divergence_expr", "divergence_bits", "skip", "pre")


# ----------------------------------------------------------------------- robust folds
def robust_values(case, x, ctx, rows: int = 1, ran: list | None = None):
    """``(values, failed)``: per node (hi, lo) over all samples (NaN rows where the
    evaluation failed) and the mask of samples the context could not evaluate.
    ``ran``: a list filled with one bool mask per node, the samples it was evaluated on
    (a ``select`` branch runs only on the samples that take it).

    The fold refuses a whole batch when one sample is out of a function's domain, so a
    failing batch is bisected until the failing samples are isolated."""
    if x is None:                 # a program without arguments: one value for all rows
        vals, bad = _no_input(case, ctx)
        return ([(np.repeat(h, rows), np.repeat(lo, rows)) for h, lo in vals],
                np.repeat(bad, rows))
    n = CS.batch_size(x)
    failed = np.zeros(n, dtype=bool)
    parts: list = []

    import scalarlab.graph as G
    kernels = CS.ieee_kernels(case.graph, ctx)

    def go(lo, hi):
        sub = CS.batch_take(x, slice(lo, hi))
        try:
            table, where = G.denote_rows(case.graph, case.payload, sub, ctx,
                                         kernels=kernels)
            vals = [_split(ctx, v) for v in table]
        except ScalarLabError:
            if hi - lo == 1:
                failed[lo] = True
                return
            mid = (lo + hi) // 2
            go(lo, mid)
            go(mid, hi)
            return
        parts.append((lo, hi, vals, where))
    if n:
        go(0, n)
    out = []
    for k in range(len(case.nodes)):
        hi = np.full(n, np.nan)
        lo = np.full(n, np.nan)
        done = np.zeros(n, dtype=bool)
        for a, b, vals, where in parts:
            h, low = vals[k]
            hi[a:b] = np.asarray(h).reshape(b - a, -1)[:, 0]
            lo[a:b] = np.asarray(low).reshape(b - a, -1)[:, 0]
            done[a:b] = True if where[k] is None else np.asarray(where[k]).reshape(b - a)
        out.append((hi, lo))
        if ran is not None:
            ran.append(done)
    return out, failed


def _no_input(case, ctx):
    """``robust_values`` of a graph without input nodes (one evaluation)."""
    import scalarlab.graph as G
    try:
        vals = [_split(ctx, v) for v in G.denote_all(case.graph, case.payload, None, ctx,
                                                     kernels=CS.ieee_kernels(case.graph, ctx))]
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
        return CS.split_values(ctx, arr)
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


# ----------------------------------------------------------------------------- results
@dataclass
class BenchmarkRun:
    """One benchmark in one context: the samples used and the per-sample errors."""
    row: dict
    x: np.ndarray = None             # (n, k) samples (format values), argument order
    ulps: np.ndarray = None          # per sample, output
    bits: np.ndarray = None
    node_max_bits: list = field(default_factory=list)
    target: np.ndarray = None        # per sample: the exact output rounded into the format
    values: np.ndarray = None        # per sample: the context's output


def _base_row(prog, ctx, fmt, sampling, samples=0):
    props = prog.properties
    return {"file": os.path.basename(prog.source), "benchmark": prog.name,
            "index": prog.index, "variant": "", "arguments": " ".join(prog.arguments),
            "precision": prog.precision, "domain": props.get("fpbench-domain", ""),
            "context": ctx.name, "format": fmt.name, "sampling": sampling,
            "samples": 0, "asked": samples, "drawn": 0, "rejected_pre": 0, "invalid": 0,
            "unsettled": 0, "mean_bits": math.nan, "max_bits": math.nan,
            "max_ulps": math.nan, "pct_over_1bit": math.nan, "nonfinite": 0,
            "context_failures": 0, "oracle_bits": 0, "divergence_node": None,
            "divergence_op": "", "divergence_expr": "", "divergence_bits": math.nan,
            "skip": prog.skip or "", "pre": props.get("pre", "")}


def _take(ref: O.Reference, keep) -> O.Reference:
    return O.Reference(ref.outcome[keep], ref.target[keep], ref.bits[keep],
                       [(h[keep], lo[keep]) for h, lo in ref.nodes])


def _concat(refs) -> O.Reference:
    return O.Reference(np.concatenate([r.outcome for r in refs]),
                       np.concatenate([r.target for r in refs]),
                       np.concatenate([r.bits for r in refs]),
                       [(np.concatenate([r.nodes[k][0] for r in refs]),
                         np.concatenate([r.nodes[k][1] for r in refs]))
                        for k in range(len(refs[0].nodes))])


def _not_real(outcome) -> np.ndarray:
    return (outcome == O.NOT_REAL) | (outcome == O.OUT_OF_RANGE)


def run_benchmark(prog, ctx, *, samples=DEFAULT_SAMPLES, sampling="bitpattern", seed=0,
                  threshold=DEFAULT_THRESHOLD_BITS, reference_bits=DEFAULT_REFERENCE_BITS,
                  x=None) -> BenchmarkRun:
    """Measure one translated FPCore in one binary context (see the module docstring).

    ``x``: an ``(N, k)`` array of samples to use instead of sampling (values are rounded
    into the format by the context; the precondition is not applied, samples without a
    settled real value are counted, not replaced)."""
    fmt = metrics.format_of(ctx)
    row = _base_row(prog, ctx, fmt, sampling if x is None else "file",
                    samples if x is None else len(x))
    if prog.graph is None:
        return BenchmarkRun(row)
    k = len(prog.arguments)
    if k == 0:
        samples = 1                  # no arguments: one evaluation is the whole story
        row["asked"] = 1 if x is None else row["asked"]
    if x is not None:
        X = np.asarray(x, dtype=np.float64).reshape(len(x), k)
        from scalarlab.scalars import formats
        X = formats.round_to_format(X, fmt, "nearest_even")
        ref = _oracle(prog, X, fmt, reference_bits)
        ok = ref.outcome == O.SETTLED
        row.update(drawn=len(X), invalid=int(np.count_nonzero(_not_real(ref.outcome))),
                   unsettled=int(np.count_nonzero(ref.outcome == O.UNSETTLED)))
        X, ref = X[ok], _take(ref, ok)
    else:
        got = _draw(prog, fmt, samples, sampling, seed, reference_bits, row)
        if got is None:
            return BenchmarkRun(row)
        X, ref = got
    return _score(prog, ctx, fmt, X, ref, threshold, row)


def _oracle(prog, X, fmt, reference_bits) -> O.Reference:
    return O.reference(prog.graph, prog.payload, X, fmt, start_bits=reference_bits,
                       max_bits=max(MAX_ORACLE_BITS, reference_bits))


def _draw(prog, fmt, samples, sampling, seed, reference_bits, row):
    """``(X, reference)`` of up to ``samples`` settled samples drawn from the
    precondition (more rounds replace the invalid and unsettled ones), or None with
    ``row["skip"]`` set."""
    try:
        bounds, residual = prog.boxes()
        regions = S.regions_from_bounds(bounds, prog.arguments)
    except ScalarLabError as exc:
        row["skip"] = f"precondition: {exc}"
        return None
    rng = np.random.default_rng(seed)
    got_x, got_r = [], []
    invalid = unsettled = drawn = rejected = have = rounds = 0
    while have < samples and rounds < MAX_ROUNDS:
        rounds += 1
        # draw enough for the valid fraction seen so far (the oracle drops the rest)
        rate = max(have / max(drawn - rejected, 1), 0.05) if rounds > 1 else 1.0
        want = min(int(math.ceil((samples - have) / rate * 1.1)) + 4, 20 * samples)
        try:
            smp = S.sample(regions, prog.arguments, residual, fmt, want, rng, sampling)
        except ScalarLabError as exc:
            row["skip"] = f"sampling: {exc}"
            return None
        if not len(smp.x):
            drawn += smp.drawn
            rejected += smp.rejected
            break
        ref = _oracle(prog, smp.x, fmt, reference_bits)
        ok = ref.outcome == O.SETTLED
        pos = np.flatnonzero(ok)
        xs = smp.x
        if len(pos) > samples - have:
            # the round overshot: count the draws up to the last sample kept only
            cut = int(pos[samples - have - 1]) + 1
            ok, xs, ref = ok[:cut], xs[:cut], _take(ref, slice(0, cut))
            drawn += int(smp.draw_index[cut - 1])
            rejected += int(smp.draw_index[cut - 1]) - cut
        else:
            drawn += smp.drawn
            rejected += smp.rejected
        invalid += int(np.count_nonzero(_not_real(ref.outcome)))
        open_ = int(np.count_nonzero(ref.outcome == O.UNSETTLED))
        unsettled += open_
        got_x.append(xs[ok])
        got_r.append(_take(ref, ok))
        have += int(np.count_nonzero(ok))
        if open_ and not ok.any():
            break                    # nothing settles at the precision cap: stop drawing
    row.update(drawn=drawn, rejected_pre=rejected, invalid=invalid, unsettled=unsettled)
    if not have:
        why = [f"{rejected} failed the precondition"] if rejected else []
        if invalid:
            why.append(f"{invalid} had no finite real value in {fmt.name}")
        if unsettled:
            why.append(f"{unsettled} stayed unsettled at {MAX_ORACLE_BITS} bits")
        row["skip"] = (f"no valid sample: of {drawn} drawn, " + ", ".join(why or ["none"])
                       + ("" if sampling != "bitpattern" or not rejected else
                          " (bit patterns crowd near 0; try --sampling box)"))
        return None
    return np.concatenate(got_x)[:samples], _take(_concat(got_r), slice(0, samples))


def output_errors(values, failed, target, fmt):
    """``(ulps, bits)`` per sample of the context's output against the settled target.

    Herbie's counting: the exact value is finite and settled inside the format's range,
    so a NaN, an infinity, or a sample the context could not evaluate scores the
    format's width in bits (about what an ordinal distance to NaN gives)."""
    from scalarlab.scalars import formats
    width = fmt.exp_bits + fmt.man_bits + 1
    v = np.asarray(values, dtype=np.float64)
    bad = failed | ~np.isfinite(v)
    d = np.asarray(formats.ulp_distance(np.where(bad, 0.0, v), target, fmt),
                   dtype=np.float64)
    ulps = np.where(bad, np.inf, d)
    bits = np.minimum(np.where(bad, float(width), np.log2(1.0 + d)), float(width))
    return ulps, bits


def _score(prog, ctx, fmt, X, ref, threshold, row) -> BenchmarkRun:
    """The context's run on the settled samples, scored against the oracle."""
    case = CS.GraphCase(prog.name, prog.graph, prog.payload)
    width = fmt.exp_bits + fmt.man_bits + 1
    n = len(X)
    row["samples"] = n
    if n == 0:
        row["skip"] = "no valid sample"
        return BenchmarkRun(row, X)
    row["oracle_bits"] = int(np.max(ref.bits))
    ran: list = []
    mine, failed = robust_values(case, S.split_columns(case, X), ctx, n, ran)
    node_max = []
    out_ulps = out_bits = out_v = None
    if len(ran) != len(case.nodes):                  # a program without arguments
        ran = [np.ones(n, dtype=bool)] * len(case.nodes)
    for node, (vh, vl), (rh, rl), evaluated in zip(case.nodes, mine, ref.nodes, ran):
        if node.id == case.output_id:
            out_v = vh
            out_ulps, b = output_errors(vh, failed, ref.target, fmt)
            out_bits = b
            keep = ~failed
        else:
            e = metrics.entry_errors(vh, np.zeros_like(vh), rh, rl, fmt)
            b = np.minimum(e.bits, width)
            # a node without a real value on a sample (a branch the sample does not
            # take, an undecided condition) has no figure there; a sample the context
            # could not evaluate counts at the output only
            keep = ~failed & ~np.isnan(rh) & evaluated
        node_max.append(float(np.max(b[keep])) if np.any(keep) else 0.0)
    first = metrics.first_divergence(node_max, threshold)
    row.update(mean_bits=float(np.mean(out_bits)), max_bits=float(np.max(out_bits)),
               max_ulps=float(np.max(out_ulps)),
               pct_over_1bit=100.0 * float(np.mean(out_bits > 1.0)),
               nonfinite=int(np.count_nonzero(failed | ~np.isfinite(out_v))),
               context_failures=int(np.count_nonzero(failed)))
    if first is not None:
        node = case.nodes[first]
        text = prog.node_text[first] if prog.node_text else ""
        row.update(divergence_node=int(node.id), divergence_op=node.kind.op,
                   divergence_expr=text if len(text) <= 60 else text[:57] + "...",
                   divergence_bits=node_max[first])
    return BenchmarkRun(row, X, out_ulps, out_bits, node_max, ref.target, out_v)


# ------------------------------------------------------------------------------ driver
def parse_contexts(spec) -> list:
    ctxs = CS.parse_contexts(spec)
    for c in ctxs:
        if metrics.format_of(c) is None:
            raise ExperimentError(f"--contexts: {c.name} has no binary format; fpbench "
                                  f"measures ULPs and bits of error in a format")
    return ctxs


def load_programs(paths) -> list:
    """Every FPCore of every file, in order (paths validated first)."""
    from scalarlab.graph.importers.fpcore import read_fpcore
    from pathlib import Path
    from scalarlab.graph import files
    for p in paths:
        try:
            files.check(p, "FPCore file")    # regular file within the size cap
        except files.InputFileError as exc:
            raise ExperimentError(str(exc)) from None
    progs = []
    for p in paths:
        progs.extend(read_fpcore(Path(p)))   # a path, never taken for FPCore text
    return progs


def run(progs, contexts, *, samples=DEFAULT_SAMPLES, sampling="bitpattern", seed=0,
        threshold=DEFAULT_THRESHOLD_BITS, reference_bits=DEFAULT_REFERENCE_BITS, x=None,
        quiet=True, keep_runs=False, alts=False, scheduler=None, connect_timeout=10.0):
    """``(DataFrame, runs)``: one row per benchmark x context (runs kept on request).

    ``scheduler``: a Dask scheduler address; each benchmark x context is then one task on
    its workers (the FPCore file's text travels, the worker translates it again), and the
    rows come back in the local order.  Every task seeds its own generator, so the table
    equals the local run's.  Runs are not kept in that mode."""
    opts = dict(samples=samples, sampling=sampling, seed=seed, threshold=threshold,
                reference_bits=reference_bits, x=x, alts=alts)
    if scheduler:
        rows = _run_dask(progs, contexts, opts, scheduler, connect_timeout, quiet)
        return pd.DataFrame(rows, columns=list(ROW_COLUMNS)), []
    rows, runs = [], []
    jobs = [(p, c) for p in progs for c in contexts]
    for prog, ctx in progress(jobs, total=len(jobs), desc="fpbench", quiet=quiet):
        for r in guarded_runs(prog, ctx, **opts):
            rows.append(r.row)
            if keep_runs:
                runs.append(r)
    df = pd.DataFrame(rows, columns=list(ROW_COLUMNS))
    return df, runs


def _remote_rows(texts, source, index, ctx_name, opts) -> list:
    """A Dask task: the rows of FPCore ``index`` of file ``source`` (``texts[source]``)
    in one context."""
    from scalarlab.graph.importers.fpcore import read_fpcore
    prog = read_fpcore(texts[source], source=source)[index]
    return [r.row for r in guarded_runs(prog, scalars.get(ctx_name), **opts)]


def _run_dask(progs, contexts, opts, scheduler, connect_timeout, quiet) -> list:
    """Rows of every benchmark x context computed on the workers of ``scheduler``
    (faults of the cluster end in one line: :mod:`experiments.dask_cluster`)."""
    try:
        from . import dask_cluster
        import distributed  # noqa: F401
    except ImportError as exc:                       # pragma: no cover - a test extra
        raise ExperimentError(f"--scheduler needs dask.distributed: {exc}") from None
    texts = {}
    for p in progs:
        if p.source not in texts:
            texts[p.source] = _source_text(p.source)
    jobs = [(p.source, p.index, c.name, opts) for p in progs for c in contexts]
    with dask_cluster.client_for(scheduler=scheduler, timeout=connect_timeout) as (client,
                                                                                  where):
        bar = progress(total=len(jobs), desc="fpbench", quiet=quiet)
        try:
            parts = dask_cluster.run_tasks(client, where, _remote_rows, texts, jobs,
                                           progress=bar.update,
                                           wait_for_worker=connect_timeout)
        finally:
            bar.close()
    return [row for part in parts for row in part]


def _source_text(source) -> str:
    from scalarlab.graph import files
    try:
        return files.read_text(source, "FPCore file")   # regular file within the cap
    except files.InputFileError as exc:
        raise ExperimentError(str(exc)) from None


def guarded_runs(prog, ctx, *, alts=False, **opts) -> list:
    """The runs of one benchmark in one context (the original, then each ``:alt`` form on
    the original's samples when ``alts``).  Any error becomes a row whose ``skip`` names
    it, so one failing benchmark never loses the others' results."""
    try:
        main = run_benchmark(prog, ctx, **opts)
    except Exception as exc:                        # noqa: BLE001 -- reported in the row
        row = _base_row(prog, ctx, metrics.format_of(ctx), opts.get("sampling", ""),
                        opts.get("samples", 0))
        row["skip"] = f"error: {type(exc).__name__}: {str(exc)[:200]}"
        return [BenchmarkRun(row)]
    out = [main]
    if not alts:
        return out
    for j, alt in enumerate(getattr(prog, "alts", None) or []):
        name = f"alt {j + 1}"
        x = main.x if main.x is not None and len(main.x) else None
        try:
            if alt.graph is None:
                r = BenchmarkRun(_base_row(alt, ctx, metrics.format_of(ctx), "same"))
                r.row["skip"] = alt.skip or "not translated"
            elif x is None:
                r = BenchmarkRun(_base_row(alt, ctx, metrics.format_of(ctx), "same"))
                r.row["skip"] = "the original has no sample"
            else:
                r = run_benchmark(alt, ctx, **{**opts, "x": x})
                r.row["sampling"] = "same as the original"
        except Exception as exc:                    # noqa: BLE001 -- reported in the row
            r = BenchmarkRun(_base_row(alt, ctx, metrics.format_of(ctx), "same"))
            r.row["skip"] = f"error: {type(exc).__name__}: {str(exc)[:200]}"
        r.row.update(benchmark=prog.name, index=prog.index, variant=name,
                     file=os.path.basename(prog.source))
        out.append(r)
    return out


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
