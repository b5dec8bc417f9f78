"""The standard report: the lab's experiments on the built-in graphs, as Markdown + PNG + CSV.

``write_report(dir)`` runs, with fixed seeds so the report is reproducible:

1. ``compare`` at the built-in input of every built-in graph that has one (default contexts);
2. ``compare`` on the six-node graph (or ``graph=``) over sampled inputs around x0;
3. ``gaps`` of binary32 and bfloat16 on its output (box and bit-pattern sampling);
4. ``reduction-order`` on it (binary32 and bfloat16);
5. bound tightness (generic IBP, IBP with the per-op rules, CROWN-IBP, CROWN) on the
   six-node graph, a 784-256-256-10 MLP and a small CNN (:mod:`experiments.tightness`);

and writes ``report.md`` beside one CSV per table and one PNG per plot.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from scalarlab import scalars

from . import cases as CS
from . import compare as C
from . import compare_table as TB
from . import reference as RF
from .errors import ExperimentError
from . import gaps as G
from . import outputs
from . import reduction_order as R
from . import tables

REPORT_NAME = "report.md"
COMPARE_VIEW = ["context", "reduction", "node", "op", "shape", "max_abs_err", "max_rel_err",
                "max_ulps", "mean_ulps", "max_bits", "mean_bits", "normwise_ulps",
                "max_rel_err_nontiny", "underflow", "divergence_start"]


@dataclass
class Report:
    directory: Path
    sections: list = field(default_factory=list)      # Markdown chunks
    files: list = field(default_factory=list)         # paths written (relative names)

    def add(self, text: str) -> None:
        self.sections.append(text)

    def table(self, name: str, df: pd.DataFrame, view=None) -> None:
        path = self.directory / f"{name}.csv"
        df.to_csv(path, index=False)
        self.files.append(path.name)
        shown = df if view is None else df[view]
        self.add(tables.markdown_table(shown) + f"\n\n(full table: [{path.name}]({path.name}))")

    def image(self, name: str, writer) -> None:
        path = self.directory / f"{name}.png"
        writer(path)
        self.files.append(path.name)
        self.add(f"![{name}]({path.name})")


def builtin_graphs() -> list[str]:
    """Names of the built-in example graphs (six-node first)."""
    import scalarlab.graph.examples as ex
    names = list(ex.names()) if hasattr(ex, "names") else ["six-node"]
    return sorted(names, key=lambda n: (n != "six-node", n))


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name)


def write_report(directory, *, samples: int = 1000, gap_samples: int = 2000, seed: int = 0,
                 quiet: bool = True, graphs=None, graph: str = "six-node",
                 center: str | None = None, tightness=None) -> Report:
    """Run the standard experiments and write ``report.md`` (+ CSV, PNG) into ``directory``.

    ``graphs`` get the discrepancy tables at their own inputs (section 1); ``graph`` (a
    built-in name or a graph file, centre ``center`` or its x0) gets the sampled sections.
    The report is built in a new directory beside ``directory`` and exchanged with it at the
    end (:func:`outputs.atomic_directory`): an interrupted or failed run leaves the previous
    report as it was.  ``tightness``: names of the networks of section 5 (default all;
    empty: no section).
    """
    outputs.check_output_dir(directory)
    main_case = CS.load_case(graph)
    main_center = CS.center_of(main_case, center)
    if isinstance(main_center, dict) or CS.batch_size(main_center) != 1:
        raise ExperimentError(f"report: graph {main_case.name} needs one input node and one "
                              "centre for the sampled sections")
    with outputs.atomic_directory(directory) as work:
        rep = _build(Report(Path(work)), samples=samples, gap_samples=gap_samples, seed=seed,
                     quiet=quiet, graphs=graphs, six=main_case, center=main_center,
                     spec=graph, tightness=tightness)
    rep.directory = Path(directory)
    return rep


def _build(rep: Report, *, samples, gap_samples, seed, quiet, graphs, six, center,
           spec, tightness=None) -> Report:
    d = rep.directory
    label = six.name
    meta = outputs.run_meta()
    meta["graph"] = outputs.graph_meta(spec, six.graph, six.payload)
    contexts = CS.parse_contexts(list(C.DEFAULT_CONTEXTS))
    rep.add("# scalarlab report\n\n"
            f"Reference: the `{RF.DEFAULT_REFERENCE}` reference (interval:float64 "
            f"enclosures where they prove the outputs, the `{RF.DEFAULT_ORACLE}` oracle "
            "elsewhere); each section's header says which. "
            "ULP = ordinal distance between a context's value and the reference correctly "
            "rounded into that context's format; bits of error = log2(1 + ULP) (Herbie); "
            "normwise = max|error| / ulp(max|exact|) per sample, in ulps of the output "
            "scale (the verdicts lead with it; divergence is located by it). "
            f"Seeds: {seed}. Contexts and their reduction orders: "
            + ", ".join(f"`{c.name}` ({CS.reduction_label(c)})" for c in contexts) + ".\n\n"
            + tables.markdown_meta({"versions": meta["versions"], "command": meta["command"],
                                    "sampled graph": meta["graph"],
                                    "centre": ", ".join(str(v) for v in
                                                        CS.as_float64(center).reshape(-1)),
                                    "samples": samples, "gap samples": gap_samples}))

    names = builtin_graphs() if graphs is None else list(graphs)
    steps = tables.progress(total=len(names) + 4, desc="report", quiet=quiet)
    # 1. every built-in graph at its own input
    rep.add("## 1. Discrepancy tables at the built-in inputs")
    for name in names:
        case = CS.load_case(name)
        if case.x0 is None and name != spec:
            rep.add(f"### {name}\n\n(no built-in input: skipped; give it as --graph with "
                    "--input)")
            steps.update(1)
            continue
        # the sampled graph is tabulated at the report's centre (its x0 or --input)
        x, where = (center, "the report's centre") if name == spec else \
            (CS.center_of(case, None), "built-in x0")
        res = C.compare(case, contexts, x, input_desc=where, quiet=True, seed=seed)
        rep.add(f"### {name}\n\n" + tables.markdown_meta(
            {"reference": res.reference.label, "input": where}))
        rep.table(f"compare_{_safe(name)}", res.rows, COMPARE_VIEW)
        rep.add("\n".join(f"- **{v['context']}**: {v['text']}" for v in res.verdicts.values()))
        rep.image(f"compare_{_safe(name)}", lambda p, r=res: TB.plot_normwise(r, p))
        steps.update(1)

    # 2. sampled compare
    x = CS.box_samples(center, 0.05, samples, seed, six)
    desc = f"{samples} samples uniform in the l-inf box of radius 0.05 around x0 (seed {seed})"
    res = C.compare(six, contexts, x, input_desc=desc, quiet=quiet, seed=seed)
    rep.add(f"## 2. {label} over {samples} sampled inputs\n\n"
            + tables.markdown_meta({"reference": res.reference.label, "input": desc}))
    rep.table(f"compare_{_safe(label)}_sampled", res.rows, COMPARE_VIEW)
    rep.add("\n".join(f"- **{v['context']}**: {v['text']}" for v in res.verdicts.values()))
    rep.image(f"compare_{_safe(label)}_sampled", lambda p: TB.plot_normwise(res, p))
    steps.update(1)

    # 3. gaps
    rep.add(f"## 3. Output rounding gaps ({gap_samples} samples, radius 0.05)")
    gap_rows = []
    for ctx_name in ("binary32", "bfloat16"):
        ctx = scalars.get(ctx_name)
        for sampling in G.SAMPLINGS:
            g = G.gaps(six, ctx, samples=gap_samples, sampling=sampling, radius=0.05,
                       seed=seed, center=center, quiet=quiet, center_desc="x0")
            gap_rows.append(g.summary.assign(reference_label=g.reference.label))
            rep.image(f"gaps_{ctx_name}_{sampling}", lambda p, r=g: G.plot_histogram(r, p))
        steps.update(1)
    gdf = pd.concat(gap_rows, ignore_index=True)
    rep.table(f"gaps_{_safe(label)}", gdf, ["context", "sampling", "samples", "metric", "mean", "p50",
                                     "p90", "p99", "p99.9", "max"])

    # 4. reduction orders
    xr = CS.box_samples(center, 0.05, samples, seed, six)
    ro = R.reduction_order(six, xr, input_desc=desc, quiet=quiet, seed=seed)
    rep.add(f"## 4. Reduction orders on {label} ({samples} samples)\n\n"
            + tables.markdown_meta({"reference": ro.reference,
                                    "orders": {f: ", ".join(f"{o}={c.name}" for o, c in d.items())
                                               for f, d in ro.contexts.items()}})
            + "\n\n`native` = numpy float64 kernels (pairwise sum, BLAS matmul) with one "
              "rounding to the format per op.")
    for f, miss in ro.missing.items():
        for o, why in miss.items():
            rep.add(f"- {f}: `{o}` left out ({why})")
    rep.table(f"reduction_order_{_safe(label)}", ro.rows,
              ["format", "order", "node", "op", "max_ulps_vs_sequential", "frac_differs",
               "max_ulps_vs_reference", "mean_ulps_vs_reference"])
    rep.image(f"reduction_order_{_safe(label)}", lambda p: R.plot(ro, p))
    steps.update(1)

    # 5. bound tightness
    from . import tightness as TT
    nets = TT.networks(seed)
    if tightness is not None:
        nets = {k: v for k, v in nets.items() if k in tightness}
    if nets:
        tdf = TT.tightness_table(nets, samples=min(samples, 200), seed=seed)
        rep.add("## 5. Bound tightness: IBP, per-op interval rules, CROWN\n\n"
                "Output box of each bounding method in `interval:float64` (mean width over "
                "the output coordinates) against the sampled output range (half uniform "
                "points, half random vertices of the l-inf box): `ibp-generic` = every op's "
                "forward rule in interval arithmetic, `ibp` = with the ops' own interval "
                "rules (softmax, log_softmax, layernorm, gelu), `crown-ibp` / `crown` = "
                "backward linear bounds (`scalarlab.ibp.crown`). `outside` counts sampled "
                "outputs outside the box (0 = no counterexample). Weights are seeded "
                "random (He-scaled), not trained.")
        rep.table("tightness", tdf)
    steps.close()

    path = d / REPORT_NAME
    path.write_text("\n\n".join(rep.sections) + "\n")
    rep.files.insert(0, REPORT_NAME)
    return rep
