"""Reduction-order study: one graph in one format under several accumulation orders.

Orders (per format):

* ``sequential``: the format's reference context; sums and dot products left to right,
  one rounding per multiply and per add;
* ``pairwise``: the registered context of the same format with ``reduction="pairwise"``;
* ``fma``: the registered context of the same format with ``fma_dot`` (dot products round
  once per multiply-add);
* ``native``: numpy's own float64 kernels (pairwise ``np.sum``, BLAS ``matmul``, libm)
  with ONE rounding to the format per vocabulary op -- the "accumulate wide, round the
  result" model of mixed-precision hardware.  It is built here
  (:class:`WideAccumulationContext`), because it is a measurement device of this study,
  not an arithmetic the lab offers: for ``+ - * / sqrt`` on formats of <= 25 significand
  bits it equals the correctly rounded context (float64 then one rounding is exact by the
  2p+2 rule), so its differences come from the accumulations (and, rarely, from libm's
  double rounding in transcendental functions).

For each node the table gives the ULP gap of every order to the sequential order and to
the reference correctly rounded into the format.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from scalarlab import scalars
from scalarlab.scalars.float64 import Float64Context

from . import cases as CS
from . import reference as RF
from .errors import ExperimentError
from . import metrics

ORDERS = ("sequential", "pairwise", "fma", "native")
from .defaults import REDUCTION_FORMATS as DEFAULT_FORMATS  # noqa: E402
ROW_COLUMNS = ("graph", "format", "order", "context", "node", "op", "shape", "samples",
               "entries", "max_ulps_vs_sequential", "mean_ulps_vs_sequential",
               "frac_differs", "max_ulps_vs_reference", "mean_ulps_vs_reference",
               "max_bits_vs_reference")

_ROUNDED_OPS = ("add", "sub", "mul", "div", "fma", "neg", "abs", "sqrt", "square",
                "maximum", "minimum", "exp", "log", "tanh", "sigmoid", "softplus", "sin",
                "cos", "erf", "sum", "matmul", "full")


class WideAccumulationContext(Float64Context):
    """float64 numpy kernels, each op's result rounded once (nearest-even) to ``fmt``."""

    kind = "study"
    reduction = "native"
    fixed_order_matmul = False          # its meaning is BLAS's matmul, rounded once
    correctly_rounded = frozenset({"add", "sub", "mul", "div", "sqrt", "neg", "abs",
                                   "maximum", "minimum"})

    def __init__(self, fmt):
        from scalarlab.scalars import formats
        self.fmt = formats.get(fmt)
        self.name = f"{self.fmt.name}@native"
        self.description = (f"numpy float64 kernels (pairwise sum, BLAS matmul, libm), one "
                            f"rounding to {self.fmt.name} per op")

    def convert(self, x):
        """One correct rounding into the format (exact decimals are not rounded twice)."""
        from scalarlab.scalars import formats
        from scalarlab.scalars.base import as_object_array, to_fraction
        if isinstance(x, np.ndarray) and x.dtype.kind in "fiub":
            return formats.round_to_format(x.astype(np.float64), self.fmt, "nearest_even")
        if isinstance(x, (float, int, np.floating, np.integer)):
            return formats.round_to_format(np.float64(x), self.fmt, "nearest_even")
        return formats.round_fractions(as_object_array(x, to_fraction), self.fmt,
                                       "nearest_even")


def _rounding(op):
    base = getattr(Float64Context, op)

    def method(self, *args, **kwargs):
        from scalarlab.scalars import formats
        return formats.round_to_format(base(self, *args, **kwargs), self.fmt, "nearest_even")
    method.__name__ = op
    method.__doc__ = f"{op} in float64, rounded once to the format"
    return method


for _op in _ROUNDED_OPS:
    setattr(WideAccumulationContext, _op, _rounding(_op))


def order_contexts(fmt_name: str) -> tuple[dict, dict]:
    """{order: context} for the format, and {order: why missing} for orders not found.

    Registered contexts are matched by their flags (format, ``reduction``, ``fma_dot``),
    not by guessing names.
    """
    from scalarlab.scalars import formats
    fmt = formats.get(fmt_name)
    want = {"sequential": ("sequential", False), "pairwise": ("pairwise", False),
            "fma": ("sequential", True)}
    found: dict = {}
    for name in scalars.names():
        try:
            ctx = scalars.get(name)
        except scalars.ContextError:
            continue
        if ctx.is_interval or ctx.is_dual or ctx.fmt != fmt or ctx.accumulation is not None:
            continue               # (a mixed context sums in another format)
        for order, (red, fma) in want.items():
            if order not in found and ctx.reduction == red and bool(ctx.fma_dot) == fma:
                found[order] = ctx
    # The binary family also builds "<format>", "<format>/pairwise" and "<format>+fma" for
    # any format (scalars.family_examples()); accept them only if their flags match.
    for order, name in (("sequential", fmt_name), ("pairwise", f"{fmt_name}/pairwise"),
                        ("fma", f"{fmt_name}+fma")):
        if order in found:
            continue
        try:
            ctx = scalars.get(name)
        except scalars.ContextError:
            continue
        red, fma = want[order]
        if ctx.fmt == fmt and ctx.reduction == red and bool(ctx.fma_dot) == fma:
            found[order] = ctx
    found["native"] = WideAccumulationContext(fmt)
    missing = {o: f"no registered {fmt.name} context with reduction={want[o][0]}"
                  f"{' and fma_dot' if want[o][1] else ''}"
               for o in want if o not in found}
    return {o: found[o] for o in ORDERS if o in found}, missing


@dataclass
class ReductionOrderResult:
    case: CS.GraphCase
    reference: str
    samples: int
    input_desc: str
    rows: pd.DataFrame
    contexts: dict          # format -> {order: context}
    missing: dict           # format -> {order: why}

    def meta(self) -> dict:
        return {"graph": self.case.name, "reference": self.reference, "samples": self.samples,
                "input": self.input_desc,
                "orders": {f: {o: c.name for o, c in d.items()} for f, d in self.contexts.items()},
                "missing": self.missing}


def reduction_order(case: CS.GraphCase, x, *, formats=DEFAULT_FORMATS,
                    reference=RF.DEFAULT_REFERENCE, input_desc="", quiet=True,
                    oracle_limit=RF.DEFAULT_ORACLE_LIMIT,
                    check_samples=RF.DEFAULT_CHECK_SAMPLES, seed=0) -> ReductionOrderResult:
    """Evaluate ``case`` on ``x`` under every order of every format and tabulate ULP gaps."""
    per_fmt = {}
    missing = {}
    for f in formats:
        ctxs, miss = order_contexts(f)
        if "sequential" not in ctxs:
            raise ExperimentError(f"reduction-order: no sequential {f} context is registered "
                                  f"(scalars.names() = {', '.join(scalars.names())})")
        per_fmt[f] = ctxs
        missing[f] = miss
    all_ctx = [c for d in per_fmt.values() for c in d.values()]
    # every node's figures are reported: the reference must settle every node
    ref = RF.compute_reference(case, x, reference, all_ctx, oracle_limit=oracle_limit,
                               check_samples=check_samples, seed=seed, quiet=quiet,
                               nodes=list(range(len(case.nodes))))
    rows = []
    nodes = case.nodes
    for f, ctxs in per_fmt.items():
        fmt = metrics.format_of(ctxs["sequential"])
        vals = {o: CS.evaluate_split(case, x, c, quiet=quiet, desc=f"{f} {o}")
                for o, c in ctxs.items()}
        for i, node in enumerate(nodes):
            seq_hi, _ = vals["sequential"][i]
            rh, rl = ref.values[i]
            for o, c in ctxs.items():
                vh, vl = vals[o][i]
                vs_seq = metrics.entry_errors(vh, vl, seq_hi, np.zeros_like(seq_hi), fmt)
                vs_ref = metrics.entry_errors(vh, vl, rh, rl, fmt)
                rows.append({
                    "graph": case.name, "format": fmt.name, "order": o, "context": c.name,
                    "node": int(node.id), "op": CS.node_op(node), "shape": CS.node_shape(node),
                    "samples": CS.batch_size(x), "entries": int(vs_seq.ulps.size),
                    "max_ulps_vs_sequential": metrics._max(vs_seq.ulps),
                    "mean_ulps_vs_sequential": metrics._mean(vs_seq.ulps),
                    "frac_differs": float(np.mean(vs_seq.ulps != 0)) if vs_seq.ulps.size else 0.0,
                    "max_ulps_vs_reference": metrics._max(vs_ref.ulps),
                    "mean_ulps_vs_reference": metrics._mean(vs_ref.ulps),
                    "max_bits_vs_reference": metrics._max(vs_ref.bits)})
    df = pd.DataFrame(rows, columns=list(ROW_COLUMNS))
    return ReductionOrderResult(case, ref.label, CS.batch_size(x), input_desc, df, per_fmt, missing)


def pivot(res: ReductionOrderResult, fmt_name: str) -> pd.DataFrame:
    """Terminal view of one format: per node, max ULP to sequential and to the reference."""
    sub = res.rows[res.rows["format"] == fmt_name]
    out = sub[sub["order"] == "sequential"][["node", "op", "shape"]].reset_index(drop=True)
    for o in ORDERS:
        s = sub[sub["order"] == o].reset_index(drop=True)
        if s.empty:
            continue
        if o != "sequential":
            out[f"{o} Δseq"] = s["max_ulps_vs_sequential"]
        out[f"{o} vs ref"] = s["max_ulps_vs_reference"]
    return out


def plot(res: ReductionOrderResult, path):
    """Max ULP distance to the reference per node, one bar per order, one panel per format."""
    from .tables import new_figure, save_figure
    fmts = list(res.contexts)
    fig, axes = new_figure(len(fmts), 1)
    axes = np.atleast_1d(axes)
    fig.subplots_adjust(bottom=0.08, left=0.12)   # room for the two-line y-labels
    nodes = res.case.nodes
    for ax, f in zip(axes, fmts):
        sub = res.rows[res.rows["format"] == f]
        orders = [o for o in ORDERS if o in res.contexts[f]]
        width = 0.8 / max(1, len(orders))
        for j, o in enumerate(orders):
            s = sub[sub["order"] == o]
            ax.bar(s["node"] + (j - (len(orders) - 1) / 2) * width,
                   np.nan_to_num(s["max_ulps_vs_reference"], posinf=0.0), width, label=o)
        ax.set_xticks([int(n.id) for n in nodes])
        ax.set_xticklabels([f"{int(n.id)} {CS.node_op(n)}" for n in nodes], fontsize=7)
        # symlog: 0 stays at 0 and 1 ULP stays visible next to 1000 ULP
        ax.set_yscale("symlog", linthresh=1.0)
        top = np.nan_to_num(sub["max_ulps_vs_reference"].to_numpy(dtype=float), nan=0.0,
                            posinf=0.0).max(initial=0.0)
        ax.set_ylim(0, max(2.0, top) * 8)          # headroom above the bars for the legend
        ax.set_ylabel(f"{f}\nmax ULP vs ref", fontsize=8)
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=7, ncol=len(orders))
    axes[0].set_title(f"{res.case.name}: reduction orders, {res.samples} samples vs "
                      f"{res.reference.split(' ')[0]}", fontsize=10)
    return save_figure(fig, path)
