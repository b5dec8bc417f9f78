"""``scalarlab provider-diff [GRAPH]``: per node, the ULP gap between the numba-cuda
provider and the binary32 reference path.

Two gaps per runtime node, in binary32 ULPs (ordinal distance, +0 == -0):

* ``local``: the numba kernel fed with the reference's own inputs — the kernel's gap alone
  (0 where the accumulation order and the roundings match the reference);
* ``end-to-end``: both paths run the whole graph — gaps propagate from earlier nodes.

The reduction order of both sides is printed: tree-order sums and device-math
transcendentals are expected to show a gap, exact kernels are expected to show none.
"""
from __future__ import annotations

import sys

from ..command_args import add_graph_and_input_arguments, batch_from_args, run_meta
from . import help_of
from .. import argtypes as T
from .. import defaults as D
from ..lazy_import import lazy

# Heavy modules load when a run first uses them: --help builds the parser without them.
np = lazy("numpy")
pd = lazy("pandas")
scalars = lazy("scalarlab.scalars")
F = lazy("scalarlab.scalars.formats")
_plan = lazy("scalarlab.graph.plan")
_payload = lazy("scalarlab.graph.payload")
outputs = lazy("scalarlab.experiments.outputs")
tables = lazy("scalarlab.experiments.tables")
_cases = lazy("scalarlab.experiments.cases")
_errors = lazy("scalarlab.experiments.errors")

NAME = "provider-diff"
HELP = help_of(NAME)

CONTEXTS = ("binary32", "binary32+fma")


def add_arguments(p) -> None:
    add_graph_and_input_arguments(p)
    p.add_argument("--context", default="binary32", choices=CONTEXTS,
                   help="reference context; binary32+fma makes linear use fma (default binary32)")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    p.add_argument("--out", type=T.output_file(*D.OUT_SUFFIXES), default=None,
                   metavar="FILE", help="also write the table to FILE (.csv, .md or .json)")


def _gap(a, b, fmt) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    b = np.asarray(b, dtype=np.float64).reshape(-1)
    both_nan = np.isnan(a) & np.isnan(b)
    one_nan = np.isnan(a) ^ np.isnan(b)
    if one_nan.any():
        i = int(np.flatnonzero(one_nan)[0])
        raise _errors.ExperimentError(f"entry {i}: one side is NaN ({a[i]} vs {b[i]})")
    keep = ~both_nan
    return np.asarray(F.ulp_distance(a[keep], b[keep], fmt), dtype=np.float64)


def expectation(capsule, ref_capsule, ctx) -> str:
    """What the gap should be, from the two capsules' declared orders and trust."""
    if capsule.trust == "sampled":
        return "device math: small gap"
    red, ref_red = capsule.reduction_in(ctx), ref_capsule.reduction_in(ctx)
    if red == ref_red:
        return "same order: 0"
    return f"{red} vs {ref_red}: gap"


def diff(case, x, context: str = "binary32"):
    """The per-node table (DataFrame) and the metadata of one provider comparison."""
    ctx = scalars.get(context)
    fmt = F.get("binary32")
    g, payload = case.graph, _payload.as_payload(case.payload)
    ref_plan = _plan.plan(g, _plan.Policy(device="cpu", providers=("reference",), context=context))
    cuda_plan = _plan.plan(g, _plan.Policy(device="cuda", providers=("numba_cuda",),
                                           context=context, trust="trusted"))
    cuda_bound = _plan.bind(cuda_plan)
    ref_vals = _plan.run_planned(g, payload, x, bound=_plan.bind(ref_plan))
    cuda_vals = _plan.run_planned(g, payload, x, bound=cuda_bound)
    nb = len(ctx.shape(ref_vals[case.input_ids()[0]])) - len(g.nodes[case.input_ids()[0]].out_shape) \
        if case.input_ids() else 0
    ref_by_id = {e.node_id: e.capsule for e in ref_plan}
    rows = []
    for e in cuda_plan:
        node = g.nodes[e.node_id]
        args, attrs = _plan.node_args(g, payload, ctx, node, ref_vals)
        local = cuda_bound.kernels[e.node_id](args, attrs, nb)
        gl = _gap(local, ref_vals[e.node_id], fmt)
        ge = _gap(cuda_vals[e.node_id], ref_vals[e.node_id], fmt)
        rows.append({
            "node": e.node_id, "op": e.op, "shape": _cases.node_shape(node),
            "capsule": e.capsule.name, "trust": e.capsule.trust,
            "order": e.capsule.reduction_in(ctx),
            "reference": ref_by_id[e.node_id].name,
            "reference_order": ref_by_id[e.node_id].reduction_in(ctx),
            "max_ulp_local": float(gl.max()) if gl.size else 0.0,
            "mean_ulp_local": float(gl.mean()) if gl.size else 0.0,
            "identical_local": bool(gl.size == 0 or gl.max() == 0),
            "max_ulp_e2e": float(ge.max()) if ge.size else 0.0,
            "expected": expectation(e.capsule, ref_by_id[e.node_id], ctx),
        })
    from scalarlab.cuda_kernels.provider import simulated
    meta = {"graph": case.name, "context": context, "samples": len(ref_vals[0]) if nb else 1,
            "device": "CUDA simulator" if simulated() else "GPU",
            "metric": "binary32 ULPs (ordinal distance, +0 == -0)"}
    return pd.DataFrame(rows), meta


def run(args) -> int:
    case = _cases.load_case(args.graph)
    x, desc = batch_from_args(case, args)
    df, meta = diff(case, x, args.context)
    meta["input"] = desc
    meta.update(run_meta(args, case, _cases.center_of(case, args.input)))
    if args.out:
        tables.write_table(args.out, "provider-diff", meta, df,
                           title=f"scalarlab provider-diff: {case.name}")
    if args.json:
        print(tables.dumps(tables.json_document("provider-diff", meta, df)))
        if args.out:
            print(f"wrote {args.out}", file=sys.stderr)
        return 0
    print(f"provider-diff: {case.name}: numba_cuda vs reference in {args.context} "
          f"({meta['device']})")
    print(f"input: {desc}")
    print()
    show = df[["node", "op", "capsule", "order", "reference_order", "max_ulp_local",
               "mean_ulp_local", "max_ulp_e2e", "expected"]]
    print(tables.render(show))
    if args.out:
        print(f"wrote {args.out}")
    return 0
