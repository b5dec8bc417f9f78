"""The discrepancy table: per node x context rows of error metrics, verdicts, display.

For every node and every context the table holds the max and mean absolute, relative,
ULP and bits-of-error metrics of :mod:`experiments.metrics`, computed over all samples
and all entries of the node's value against the reference; the verdict says where the
error first exceeds the threshold, or which nodes the context could not compute and why.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from . import metrics
from .cases import GraphCase, node_op, node_shape, reduction_label
from .reference import Reference

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


def failure_reason(errors: dict) -> str:
    """Why a context could not compute some nodes: the fold's message at the first node
    that failed itself (``errors`` as filled by :func:`cases.evaluate_split`)."""
    return errors[min(errors)] if errors else "not computable on some samples"


def context_rows(case: GraphCase, ctx, vals, ref: Reference, samples: int,
                 threshold: float) -> tuple[list, int | None]:
    """``(rows, first)``: one row per node for ``ctx``'s values ``vals`` (per node (hi,
    lo), or None where the context could not compute it) against ``ref``, and the index of
    the first node whose max bits of error exceed ``threshold`` (None if none)."""
    fmt = metrics.format_of(ctx)
    rows = []
    for node, val, (rh, rl) in zip(case.nodes, vals, ref.values):
        if val is None:          # the context cannot compute this node: no figures
            s = {c: float("nan") for c in metrics.SUMMARY_COLUMNS}
            s["nonfinite"] = 0
            entries = 0
        else:
            e = metrics.entry_errors(val[0], val[1], rh, rl, fmt)
            s = metrics.summarize(e)
            entries = int(e.abs_err.size)
        rows.append({
            "graph": case.name, "node": int(node.id), "op": node_op(node),
            "shape": node_shape(node), "context": ctx.name,
            "format": "-" if fmt is None else fmt.name,
            "reduction": reduction_label(ctx), "reference": ref.name,
            "samples": samples, "entries": entries, "evaluated": val is not None,
            **s})
    # Divergence is measured in bits of error, so it needs a binary format: a
    # format-less context (mpmath, rational) has NaN bits and never "diverges".
    first = metrics.first_divergence([r["max_bits"] for r in rows], threshold)
    for i, r in enumerate(rows):
        r["exceeds_threshold"] = bool(r["max_bits"] > threshold)
        r["divergence_start"] = first is not None and i == first
    return rows, first


def verdict(case: GraphCase, ctx, rows, first, threshold, failed=(), reason="") -> dict:
    """One context's verdict fields from its rows (:func:`context_rows`)."""
    nodes = case.nodes
    out = rows[case.output_id]
    return {
        "context": ctx.name, "reduction": reduction_label(ctx),
        "output_max_ulps": out["max_ulps"], "output_max_bits": out["max_bits"],
        "output_max_rel_err": out["max_rel_err"], "output_mean_bits": out["mean_bits"],
        "divergence_node": None if first is None else int(nodes[first].id),
        "divergence_op": None if first is None else node_op(nodes[first]),
        "divergence_bits": None if first is None else rows[first]["max_bits"],
        "failed_nodes": list(failed), "failure": reason,
        "text": verdict_text(ctx, out, first, nodes, rows, threshold, failed, reason),
    }


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
    return plan_lines(res.case, res.contexts, res.reference.label, res.input_desc,
                      res.samples, res.threshold)


def plan_lines(case, contexts, reference: str, input_desc: str, samples: int,
               threshold: float) -> list[str]:
    """The header's lines from its parts: before the work (``reference`` then names the
    oracle asked for) and with the table (the reference's label: what was used)."""
    ctxs = ", ".join(c.name for c in contexts)
    reds = ", ".join(f"{c.name}={reduction_label(c)}" for c in contexts)
    return [
        f"scalarlab compare: graph {case.name} ({len(case.nodes)} nodes, output node "
        f"{case.output_id})",
        f"  reference  : {reference}",
        f"  contexts   : {ctxs}",
        f"  reductions : {reds}",
        f"  input      : {input_desc}",
        f"  samples    : {samples}",
        "  metrics    : ULP = distance to the reference correctly rounded into the context's "
        "format; bits = log2(1 + ULP)",
        f"  divergence : first node whose max bits of error > {threshold:g} (marked *)",
    ]


def plot_bits(res: CompareResult, path) -> Path:
    """Max bits of error per node, one line per context, with the threshold line."""
    from .tables import finish_figure, new_figure
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
    return finish_figure(fig, ax, path, "node", "max bits of error  (log2(1 + ULP))",
                         f"{res.case.name}: bits of error per node vs {res.reference.name} "
                         f"({res.samples} sample{'s' if res.samples != 1 else ''})")
