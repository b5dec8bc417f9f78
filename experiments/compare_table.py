"""The discrepancy table: per node x context rows of error metrics, verdicts, display.

For every node and every context the table holds the max and mean absolute, relative,
ULP and bits-of-error metrics of :mod:`experiments.metrics`, computed over all samples
and all entries of the node's value against the reference, and the vector figures
(normwise ulps of the node's scale, relative error where the exact value is not tiny,
underflow counts).  The verdict leads with the output's normwise figure, says where the
error first exceeds ``divergence_ulps`` ulps of a node's own scale, or which nodes the
context could not compute and why.
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
               "exceeds_threshold", "divergence_start", *metrics.FIGURE_COLUMNS,
               "exceeds_divergence_ulps")

#: Divergence: the first node whose normwise error exceeds this many ulps of its own scale
#: (max|exact| of the node, per sample).  A few ulps: one correctly rounded operation
#: scores <= 0.5, a dot product or sum of n terms rounded in sequence about sqrt(n) / 2 on
#: random data, so 4 separates "rounding as usual" from an error that has grown.
from .defaults import DEFAULT_DIVERGENCE_ULPS  # noqa: E402,F401


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
    divergence_ulps: float = DEFAULT_DIVERGENCE_ULPS

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
            "divergence_ulps": self.divergence_ulps,
        }


def failure_reason(errors: dict) -> str:
    """Why a context could not compute some nodes: the fold's message at the first node
    that failed itself (``errors`` as filled by :func:`cases.evaluate_split`)."""
    return errors[min(errors)] if errors else "not computable on some samples"


def context_rows(case: GraphCase, ctx, vals, ref: Reference, samples: int,
                 threshold: float, divergence_ulps: float = DEFAULT_DIVERGENCE_ULPS
                 ) -> tuple[list, int | None]:
    """``(rows, first)``: one row per node for ``ctx``'s values ``vals`` (per node (hi,
    lo), or None where the context could not compute it) against ``ref``, and the index of
    the first node whose normwise error exceeds ``divergence_ulps`` ulps of the node's
    own scale (None if none).  ``exceeds_threshold`` keeps the per-entry rule: max bits
    of error above ``threshold``."""
    fmt = metrics.format_of(ctx)
    rows = []
    for node, val, (rh, rl) in zip(case.nodes, vals, ref.values):
        if val is None:          # the context cannot compute this node: no figures
            s = {c: float("nan") for c in (*metrics.SUMMARY_COLUMNS, *metrics.FIGURE_COLUMNS)}
            s.update(nonfinite=0, nontiny=0, underflow=0, underflow_rounded=0)
            entries = 0
        else:
            e = metrics.entry_errors(val[0], val[1], rh, rl, fmt)
            s = {**metrics.summarize(e),
                 **metrics.figures(e, val[0], val[1], rh, rl, samples)}
            entries = int(e.abs_err.size)
        rows.append({
            "graph": case.name, "node": int(node.id), "op": node_op(node),
            "shape": node_shape(node), "context": ctx.name,
            "format": "-" if fmt is None else fmt.name,
            "reduction": reduction_label(ctx), "reference": ref.name,
            "samples": samples, "entries": entries, "evaluated": val is not None,
            **s})
    # Divergence is measured in ulps of the node's scale, so it needs a binary format: a
    # format-less context (mpmath, rational) has NaN figures and never "diverges".  Not
    # per-entry bits: an entry that cancels to near zero is many ULPs off at the first
    # linear node of every network while the node's value as a whole is fine.
    first = metrics.first_divergence([r["normwise_ulps"] for r in rows], divergence_ulps)
    for i, r in enumerate(rows):
        r["exceeds_threshold"] = bool(r["max_bits"] > threshold)
        r["divergence_start"] = first is not None and i == first
        r["exceeds_divergence_ulps"] = bool(r["normwise_ulps"] > divergence_ulps)
    return rows, first


def verdict(case: GraphCase, ctx, rows, first, threshold, failed=(), reason="",
            divergence_ulps: float = DEFAULT_DIVERGENCE_ULPS) -> dict:
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
        "text": verdict_text(ctx, out, first, nodes, rows, threshold, failed, reason,
                             divergence_ulps),
        "output_normwise_ulps": out["normwise_ulps"],
        "output_max_rel_err_nontiny": out["max_rel_err_nontiny"],
        "output_entries": out["entries"], "output_underflow": out["underflow"],
        "output_underflow_rounded": out["underflow_rounded"],
        "divergence_normwise_ulps": None if first is None else rows[first]["normwise_ulps"],
        "divergence_ulps": divergence_ulps,
    }


def _ulps(v: float) -> str:
    from .tables import fmt_number
    return f"{fmt_number(v)} ulp{'' if v == 1 else 's'}"


def underflow_text(out) -> str:
    """The underflow clause of a verdict ('' when no output entry underflowed).

    An entry that is 0 where the exact value is not scores 0 ULP when 0 is the correctly
    rounded value, yet every digit of it is lost: it is counted here, never called
    correctly rounded."""
    n, m, k = int(out["underflow"]), int(out["entries"]), int(out["underflow_rounded"])
    if not n:
        return ""
    if n == m:
        text = ("the whole output underflowed: " +
                (f"all {m} outputs are" if m > 1 else "it is") + " 0 where the exact value "
                "is not")
    else:
        text = f"underflow: {n} of {m} outputs are 0 where the exact value is not"
    if k == n:
        return text + (" (0 is the correctly rounded value: the exact "
                       f"{'values lie' if n > 1 else 'value lies'} below the format's range)")
    if k:
        return text + f" ({k} of them correctly rounded to 0)"
    return text


def verdict_text(ctx, out, first, nodes, ctx_rows, threshold, failed=(), reason="",
                 divergence_ulps: float = DEFAULT_DIVERGENCE_ULPS) -> str:
    """The verdict line: the normwise figure first (ulps of the output scale), then the
    per-entry ULPs, the relative error where the exact value is not tiny, underflow and
    where the error first exceeds ``divergence_ulps`` ulps of a node's own scale."""
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
    under = underflow_text(out)
    if np.isnan(out["max_ulps"]):
        head = f"output max rel err {fmt_number(out['max_rel_err'])} (no binary format: no ULPs)"
        parts = [head] + ([under] if under else [])
    else:
        parts = [f"output within {_ulps(out['normwise_ulps'])} of its scale "
                 f"{fmt_number(out['max_abs_ref'])} (normwise)"]
        if under and out["underflow"] == out["entries"]:
            parts = [under, parts[0]]         # nothing of the output is left: say so first
            under = ""
        if out["max_ulps"] == 0 and not out["underflow"]:
            parts.append("every entry correctly rounded (0 ULP)")
        elif out["max_ulps"] == 0:
            parts.append("every entry 0 ULP from the correctly rounded value")
        else:
            ulp = "ULP" if out["max_ulps"] == 1 else "ULPs"
            parts.append(f"per entry up to {fmt_number(out['max_ulps'])} {ulp} "
                         f"({out['max_bits']:.2f} bits)")
        if out["nontiny"]:
            some = "" if out["nontiny"] == out["entries"] else \
                f" ({out['nontiny']} of {out['entries']})"
            parts.append(f"rel err {fmt_number(out['max_rel_err_nontiny'])} where |exact| is "
                         f"not tiny{some}")
        else:
            parts.append("no entry above the tiny cut: no relative figure")
        if under:
            parts.append(under)
    head = "; ".join(parts)
    if out["nonfinite"]:
        head += f"; {out['nonfinite']} non-finite entries"
    if first is None and all(np.isnan(r["normwise_ulps"]) for r in ctx_rows):
        return head
    if first is None:
        tail = f"never above {divergence_ulps:g} ulps of a node's scale"
    else:
        r = ctx_rows[first]
        tail = (f"error first exceeds {divergence_ulps:g} ulps of the node's scale at node "
                f"{int(nodes[first].id)} ({node_op(nodes[first])}: "
                f"{_ulps(r['normwise_ulps'])})")
    return f"{head}; {tail}"


# --------------------------------------------------------------------------- display
DISPLAY_COLUMNS = {
    "context": "context", "node": "node", "op": "op", "shape": "shape",
    "max_abs_err": "max|abs err|", "mean_abs_err": "mean|abs err|",
    "max_rel_err": "max rel err", "max_ulps": "max ULP", "mean_ulps": "mean ULP",
    "max_bits": "max bits", "mean_bits": "mean bits", "normwise_ulps": "norm ulps",
}


def _marked(values, marks) -> list:
    """Figures as 2-decimal text with a ``*`` on the marked rows (``-`` for NaN)."""
    return [(f"{b:.2f}" if np.isfinite(b) else ("inf" if b == np.inf else "-"))
            + ("*" if d and not np.isnan(b) else "") for b, d in zip(values, marks)]


def display_frame(df: pd.DataFrame) -> pd.DataFrame:
    """The terminal view: fewer columns, a ``*`` marking each context's divergence node
    (on its normwise figure, the one divergence is measured in)."""
    view = df[list(DISPLAY_COLUMNS)].rename(columns=DISPLAY_COLUMNS).copy()
    view["max bits"] = _marked(df["max_bits"], [False] * len(df))
    view["mean bits"] = _marked(df["mean_bits"], [False] * len(df))
    view["norm ulps"] = _marked(df["normwise_ulps"], df["divergence_start"])
    # Show each context's name once, on its first row, so the blocks read as groups.
    ctx = list(view["context"])
    view["context"] = [c if i == 0 or ctx[i - 1] != c else "" for i, c in enumerate(ctx)]
    return view


def header_lines(res: CompareResult) -> list[str]:
    return plan_lines(res.case, res.contexts, res.reference.label, res.input_desc,
                      res.samples, res.divergence_ulps)


def plan_lines(case, contexts, reference: str, input_desc: str, samples: int,
               divergence_ulps: float) -> list[str]:
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
        "format; bits = log2(1 + ULP); norm ulps = max|error| / ulp(max|exact|) per sample",
        f"  divergence : first node whose norm ulps > {divergence_ulps:g} (marked *)",
    ]


def plot_normwise(res: CompareResult, path) -> Path:
    """Normwise error per node (ulps of the node's own scale, symlog axis), one line per
    context, with the divergence threshold: the figure divergence is located by.  Per-entry
    bits would show node 1 above any threshold on a real network (an entry near zero)."""
    from .tables import finish_figure, new_figure
    fig, ax = new_figure()
    for ctx in res.contexts:
        sub = res.rows[res.rows["context"] == ctx.name]
        y = np.where(np.isfinite(sub["normwise_ulps"]), sub["normwise_ulps"], np.nan)
        ax.plot(sub["node"], y, marker="o", label=f"{ctx.name} [{reduction_label(ctx)}]")
    ax.axhline(res.divergence_ulps, color="grey", linestyle="--", linewidth=1,
               label=f"divergence {res.divergence_ulps:g} ulps")
    # linear up to 1 ulp (an exact node, 0, stays on the axis), logarithmic above: a
    # cancellation node can be 10^6 ulps off its own scale
    ax.set_yscale("symlog", linthresh=1.0)
    ax.set_ylim(bottom=0)
    nodes = res.case.nodes
    ax.set_xticks([int(n.id) for n in nodes])
    ax.set_xticklabels([f"{int(n.id)}\n{node_op(n)}" for n in nodes], fontsize=8)
    return finish_figure(fig, ax, path, "node",
                         "normwise error (ulps of the node's scale max|exact|)",
                         f"{res.case.name}: normwise error per node vs {res.reference.name} "
                         f"({res.samples} sample{'s' if res.samples != 1 else ''})")
