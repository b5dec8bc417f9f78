"""The output rounding gap of one context: its distribution over sampled inputs.

Inputs are drawn *in the context's format* so that the reference and the context see the
same input and the gap is what the computation's roundings did, not the quantisation of
the input:

* ``box``: uniform float64 in the l-inf box around the centre, then rounded to nearest in
  the format (ties to even);
* ``bitpattern``: uniform over the format's values inside the box (uniform ordinals, as
  Herbie samples bit patterns): small magnitudes are as likely as large ones, so the
  sample reaches subnormals and tiny values that uniform sampling never sees.

The gap at each sample is the ULP distance (and bits of error) of the context's output to
the reference correctly rounded into the context's format.  Beside these per-entry rows
the summary has the vector figures of :mod:`experiments.metrics`: ``normwise_ulps`` (one
value per sample: max|error| / ulp(max|exact|)) and ``rel_err_nontiny`` (the entries whose
exact value is not tiny); the verdict counts the entries that underflowed to 0.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import cases as CS
from . import reference as RF
from .errors import ExperimentError
from . import metrics

from .defaults import GAPS_SAMPLINGS as SAMPLINGS  # noqa: E402
PERCENTILES = (50, 90, 99, 99.9)
SUMMARY_COLUMNS = ("graph", "node", "context", "format", "reduction", "reference", "sampling",
                   "samples", "entries", "metric", "mean", "p50", "p90", "p99", "p99.9", "max")


def _fmt_of(ctx):
    fmt = metrics.format_of(ctx)
    if fmt is None:
        raise ExperimentError(f"--context {ctx.name}: gaps are measured in ULPs of the "
                              f"context's binary format, and {ctx.name} has none")
    return fmt


def ordinals(x, fmt) -> np.ndarray:
    """Signed ordinal of each format value (0 for ±0): sign(x) * ulp_distance(0, x)."""
    from scalarlab.scalars import formats
    x = np.asarray(x, dtype=np.float64)
    d = np.asarray(formats.ulp_distance(np.zeros_like(x), x, fmt)).astype(np.int64)
    return np.where(np.signbit(x), -d, d)


def from_ordinals(k, fmt) -> np.ndarray:
    """The format values with signed ordinals ``k`` (inverse of :func:`ordinals`)."""
    from scalarlab.scalars import formats
    k = np.asarray(k, dtype=np.int64)
    mag = np.abs(k)
    if fmt.is_binary64:                    # the code IS the float64 pattern (and a sign
        v = mag.view(np.float64)           # bit at 1 << 63 would not fit an int64)
    else:
        if not fmt.subnormals:             # ordinal 1 is min_normal (code 1 << M)
            mag = np.where(mag > 0, mag + (1 << fmt.man_bits) - 1, 0)
        v = formats.decode(mag, fmt)
    return np.where(k < 0, -v, v)


def sample_inputs(center, radius: float, n: int, seed: int, fmt, sampling: str, case=None):
    """``n`` inputs of ``fmt`` inside the box of ``radius`` around ``center`` (seeded).
    With ``case``, its integer inputs are held at the centre, unrounded."""
    from scalarlab.scalars import formats
    if sampling not in SAMPLINGS:
        raise ExperimentError(f"--sampling {sampling!r}: choose one of {', '.join(SAMPLINGS)}")
    if sampling == "box":
        x = CS.box_samples(center, radius, n, seed, case)
        return CS.map_real_inputs(case, x, lambda a: formats.round_to_format(
            a, fmt, "nearest_even"))
    if n < 1:
        raise ExperimentError(f"--samples must be >= 1, got {n}")
    if not np.isfinite(radius) or radius < 0:
        raise ExperimentError(f"--radius must be a finite number >= 0, got {radius}")
    rng = np.random.default_rng(seed)

    def draw(center_arr):
        c = CS.as_float64(center_arr)[0]
        lo = formats.round_to_format(c - radius, fmt, "up")      # box rounded inward
        hi = formats.round_to_format(c + radius, fmt, "down")
        empty = lo > hi
        if np.any(empty):
            i = int(np.argwhere(empty.reshape(-1))[0][0])
            raise ExperimentError(f"--radius {radius:g}: the box around input entry {i} "
                                  f"({c.reshape(-1)[i]!r}) holds no {fmt.name} value")
        olo, ohi = ordinals(lo, fmt), ordinals(hi, fmt)
        k = rng.integers(olo, ohi, size=(n, *c.shape), endpoint=True)
        return from_ordinals(k, fmt)
    return CS.map_real_inputs(case, center, draw,
                              lambda c: np.repeat(CS.as_float64(c), n, axis=0))


@dataclass
class GapsResult:
    case: CS.GraphCase
    ctx: object
    fmt: object
    reference: RF.Reference
    sampling: str
    samples: int
    radius: float
    seed: int
    node: int
    center_desc: str
    ulps: np.ndarray
    bits: np.ndarray
    rel_err: np.ndarray
    summary: pd.DataFrame
    vector: metrics.VectorErrors | None = None

    def meta(self) -> dict:
        return {"graph": self.case.name, "node": self.node, "context": self.ctx.name,
                "format": self.fmt.name, "reduction": CS.reduction_label(self.ctx),
                "reference": self.reference.label, "reference_context": self.reference.name,
                "sampling": self.sampling, "samples": self.samples, "radius": self.radius,
                "center": self.center_desc, "seed": self.seed}

    def histogram(self) -> dict:
        """ULP distance -> number of output entries with that gap (exact counts)."""
        finite = self.ulps[np.isfinite(self.ulps)].astype(np.int64)
        vals, counts = np.unique(finite, return_counts=True)
        out = {str(int(v)): int(c) for v, c in zip(vals, counts)}
        n_inf = int(np.count_nonzero(~np.isfinite(self.ulps)))
        if n_inf:
            out["inf"] = n_inf
        return out


def distribution_row(values: np.ndarray) -> dict:
    """mean, percentiles and max of one metric (percentiles by linear interpolation)."""
    v = np.asarray(values, dtype=np.float64)
    if not v.size:                     # e.g. no entry above the tiny cut: no figure
        return dict.fromkeys(("mean", "p50", "p90", "p99", "p99.9", "max"), float("nan"))
    with np.errstate(all="ignore"):
        pct = np.percentile(v, PERCENTILES) if v.size else [np.nan] * len(PERCENTILES)
        return {"mean": float(np.mean(v)), "p50": float(pct[0]), "p90": float(pct[1]),
                "p99": float(pct[2]), "p99.9": float(pct[3]), "max": float(np.max(v))}


def gaps(case: CS.GraphCase, ctx, *, samples=2000, sampling="box", radius=0.05, seed=0,
         center=None, reference=RF.DEFAULT_REFERENCE, node=None, quiet=True,
         oracle_limit=RF.DEFAULT_ORACLE_LIMIT, check_samples=RF.DEFAULT_CHECK_SAMPLES,
         center_desc=None, x=None) -> GapsResult:
    """Sample, evaluate in ``ctx`` and the reference, and summarise the output gap.

    ``x``: a ready batch of samples (``--input-file``/``--box``, several inputs allowed)
    instead of the box around ``center``; it is rounded into the format first."""
    CS.check_point_context(ctx, "--context")
    fmt = _fmt_of(ctx)
    if x is not None:
        from scalarlab.scalars import formats
        x = CS.map_real_inputs(case, x, lambda a: formats.round_to_format(
            np.asarray(a, dtype=np.float64), fmt, "nearest_even"))    # integers held
        samples, radius = CS.batch_size(x), float("nan")    # no radius: the batch is given
    else:
        if center is None:
            center = CS.center_of(case, None)
            center_desc = "x0"
        x = sample_inputs(center, radius, samples, seed, fmt, sampling, case)
    node = case.output_id if node is None else int(node)
    if not 0 <= node < len(case.nodes):
        raise ExperimentError(f"--node {node}: graph {case.name} has nodes 0..{len(case.nodes) - 1}")
    ref = RF.compute_reference(case, x, reference, [ctx], oracle_limit=oracle_limit,
                               check_samples=check_samples, seed=seed, quiet=quiet, nodes=[node])
    vals = CS.evaluate_split(case, x, ctx, quiet=quiet)
    (vh, vl), (rh, rl) = vals[node], ref.values[node]
    e = metrics.entry_errors(vh, vl, rh, rl, fmt)
    base = {"graph": case.name, "node": node, "context": ctx.name, "format": fmt.name,
            "reduction": CS.reduction_label(ctx), "reference": ref.name, "sampling": sampling,
            "samples": int(samples), "entries": int(e.ulps.size)}
    w = metrics.vector_errors(e, vh, vl, rh, rl, samples)
    rel = e.rel_err[w.nontiny]
    rows = [{**base, "metric": "ulps", **distribution_row(e.ulps)},
            {**base, "metric": "bits", **distribution_row(e.bits)},
            {**base, "metric": "rel_err", **distribution_row(e.rel_err)},
            {**base, "entries": int(w.normwise.size), "metric": "normwise_ulps",
             **distribution_row(w.normwise)},
            {**base, "entries": int(rel.size), "metric": "rel_err_nontiny",
             **distribution_row(rel)}]
    summary = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
    return GapsResult(case, ctx, fmt, ref, sampling, int(samples), float(radius), int(seed),
                      node, center_desc or "the given centre", e.ulps, e.bits, e.rel_err,
                      summary, w)


def verdict_text(res: GapsResult) -> str:
    """The gaps verdict: the share of entries correctly rounded (an entry that underflowed
    to 0 is not counted there even when 0 is its correctly rounded value), the worst
    per-entry gap, the worst normwise figure and the underflow count."""
    from .tables import fmt_number
    n = max(1, res.ulps.size)
    under = int(np.count_nonzero(res.vector.underflow)) if res.vector is not None else 0
    rounded0 = int(np.count_nonzero(res.vector.underflow_rounded)) if under else 0
    exact = (int(np.count_nonzero(res.ulps == 0)) - rounded0) / n
    s = res.summary.set_index("metric")
    text = (f"{exact:.1%} of outputs correctly rounded; worst {fmt_number(s.loc['ulps', 'max'])}"
            f" ULP ({s.loc['bits', 'max']:.2f} bits); normwise worst "
            f"{fmt_number(s.loc['normwise_ulps', 'max'])} ulps of the sample's output scale "
            f"(p99 {fmt_number(s.loc['normwise_ulps', 'p99'])})")
    if under:
        text += (f"; underflow: {under} of {res.ulps.size} outputs are 0 where the exact "
                 f"value is not ({rounded0} of them correctly rounded to 0)")
    return text


def header_lines(res: GapsResult) -> list[str]:
    return plan_lines(res.case, res.node, res.ctx, res.reference.label, res.sampling,
                      res.samples, res.radius, res.seed, res.center_desc)


def plan_lines(case, node, ctx, reference: str, sampling, samples, radius, seed,
               center_desc) -> list[str]:
    """The header's lines from its parts (before the work ``reference`` names the oracle
    asked for; a NaN ``radius`` means a given batch, described by ``center_desc``)."""
    fmt = _fmt_of(ctx)
    return [
        f"scalarlab gaps: graph {case.name}, node {node} "
        f"({CS.node_op(case.nodes[node])})",
        f"  context    : {ctx.name} (format {fmt.name}, reduction "
        f"{CS.reduction_label(ctx)})",
        f"  reference  : {reference}",
        (f"  sampling   : {center_desc}" if radius != radius else
         f"  sampling   : {sampling}, {samples} inputs of {fmt.name} in the l-inf box "
         f"of radius {radius:g} around {center_desc} (seed {seed})"),
        f"  gap        : ULP distance to the reference correctly rounded into {fmt.name}; "
        f"bits = log2(1 + ULP); normwise = max|error| / ulp(max|exact|) per sample",
    ]


def plot_histogram(res: GapsResult, path):
    """Histogram of the ULP gaps (integer bins, log count axis) with mean and p99 marked."""
    from .tables import finish_figure, new_figure
    fig, ax = new_figure()
    finite = res.ulps[np.isfinite(res.ulps)]
    top = int(finite.max()) if finite.size else 0
    if top <= 64:
        from matplotlib.ticker import MaxNLocator
        bins = np.arange(-0.5, top + 1.5, 1.0)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    else:                                   # wide gaps: log-spaced bins from 1 ULP
        bins = np.concatenate([[-0.5, 0.5], np.geomspace(1.0, top + 1, 48)[1:]])
        ax.set_xscale("symlog", linthresh=1.0)
    ax.hist(finite, bins=bins, color="#3b75af", edgecolor="white", linewidth=0.5)
    ax.set_yscale("log")
    ax.set_ylim(bottom=0.8)
    mean = float(np.mean(res.ulps)) if res.ulps.size else 0.0
    p99 = float(np.percentile(res.ulps, 99)) if res.ulps.size else 0.0
    ax.axvline(mean, color="#d62728", linestyle="--", linewidth=1, label=f"mean {mean:.3g} ULP")
    ax.axvline(p99, color="#2ca02c", linestyle=":", linewidth=1.2, label=f"p99 {p99:.3g} ULP")
    return finish_figure(fig, ax, path,
                         f"ULP distance to the correctly rounded reference ({res.fmt.name})",
                         "output entries",
                         f"{res.case.name} node {res.node} in {res.ctx.name}: {res.samples} "
                         f"{res.sampling} samples vs {res.reference.name}")
