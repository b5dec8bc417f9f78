"""``scalarlab graph-semantics [GRAPH]``: interval bounds for a graph, end to end.

Evaluate the centre input, propagate an l-infinity box through the graph with interval
arithmetic, print the box at every node, then check deterministic samples (and the box
vertices) against the boxes: exit 0 when all are inside, 1 with the first counterexample,
and 1 when nothing was checked (no output box, or not one sample evaluated).
"""
from __future__ import annotations

import sys

from .. import argtypes as T
from . import help_of
from ..lazy_import import lazy

# Heavy modules load when a run first uses them: --help builds the parser without them.
np = lazy("numpy")
scalars = lazy("scalarlab.scalars")
outputs = lazy("scalarlab.experiments.outputs")

NAME = "graph-semantics"
HELP = help_of(NAME)


def add_arguments(p):
    p.add_argument("graph", nargs="?", default="six-node", metavar="GRAPH",
                   help="built-in graph name or a graph file (default six-node)")
    p.add_argument("--input", type=T.input_spec, default=None, metavar="X",
                   help="box centre as comma-separated decimals (default: the graph's x0)")
    p.add_argument("--payload", type=T.existing_file(".npz"), default=None, metavar="P.npz",
                   help="payload .npz for a graph file without inline payload")
    p.add_argument("--box", default=None, metavar="LO:HI,...",
                   help="per-entry box lo1:hi1,... (or .json/.npy of [lo, hi] pairs) instead "
                        "of --input/--radius; graphs with several inputs are packed into one")
    p.add_argument("--samples", type=T.integer(0), default=50,
                   help="random samples to check (default 50)")
    p.add_argument("--radius", type=lambda t: T.decimal(t, lo=0, hi=T.RADIUS_MAX),
                   default="0.05", help="l-infinity radius of the input box (default 0.05)")
    p.add_argument("--context", type=T.context_name, default="binary32",
                   help="point context; boxes use interval:<context> (default binary32)")
    p.add_argument("--seed", type=T.integer(0), default=0,
                   help="sample generator seed (default 0)")
    p.add_argument("--no-vertices", action="store_true", help="do not check the box vertices")
    p.add_argument("--method", default="ibp", choices=("ibp", "crown", "crown-ibp"),
                   help="bounding method for the boxes: ibp, crown or crown-ibp (default "
                        "ibp); the output widths of all three are compared at the end")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def _box_spec(args, payload):
    """``(case, graph, payload, centre, radius)``: as sweep boxes its graphs (several input
    nodes packed into one vector in node-id order; --box gives per-entry half-widths)."""
    import argparse
    from .. import cases as CS
    from .sweep import _box_of
    case = CS.load_case(args.graph)
    ns = argparse.Namespace(input=args.input, center_file=None, box=args.box,
                            radii=[args.radius])
    g, payload, x0, radii = _box_of(case, case.payload if payload is None else payload, ns)
    return case, g, payload, x0, radii[0]


def run(args) -> int:
    from scalarlab.graph import denote_all
    from scalarlab.graph.fileformat import load_npz
    from scalarlab.ibp import Box, check_containment, run_ibp

    case, g, payload, x0, radius = _box_spec(args, load_npz(args.payload) if args.payload
                                             else None)
    pctx = scalars.get(args.context)
    ictx = scalars.get(f"interval:{pctx.name}")
    center_vals = denote_all(g, payload, pctx.convert(x0), pctx)
    box = Box.from_center_radius(x0, radius)
    from scalarlab.ibp.crown import run_crown
    boxes = (run_ibp(g, payload, box, ictx) if args.method == "ibp"
             else run_crown(g, payload, box, ictx, method=args.method))
    def _width(b):      # the largest output-coordinate width; None: no box
        return None if b is None else float(np.max(np.asarray(b.width(), dtype=float)))
    widths = {m: _width(run_crown(g, payload, box, ictx, method=m)[g.output])
              for m in ("ibp", "crown", "crown-ibp")}
    rep = check_containment(g, payload, box, samples=args.samples, point_ctx=pctx,
                            interval_ctx=ictx, seed=args.seed,
                            vertices=not args.no_vertices, boxes=boxes)
    out = g.output
    evaluated = rep.checked - len(rep.failures)
    nothing = []
    if boxes[out] is None:
        nothing.append(f"no box for the output node {out} (a rule could not bound it)")
    if evaluated <= 0:
        nothing.append(f"no successful sample ({rep.checked} checked, "
                       f"{len(rep.failures)} failed)")
    status = 0 if rep.ok and not nothing else 1
    if args.json:
        meta = {"graph": outputs.graph_meta(args.graph, g, payload),
                "context": pctx.name, "interval_context": ictx.name,
                "center": [t if isinstance(t, str) else repr(float(t))
                           for t in np.asarray(x0, dtype=object).reshape(-1)],
                "radius": None if args.box is not None else str(args.radius),
                "box": args.box, "samples": rep.samples, "seed": args.seed,
                "vertices": rep.vertices}
        rows = [{"node": i, "center_value": np.asarray(pctx.to_float64(v)).tolist(),
                 "lo": None if b is None else np.asarray(b.lo_float()).tolist(),
                 "hi": None if b is None else np.asarray(b.hi_float()).tolist(),
                 "guarantee": None if b is None else b.guarantee_text}
                for i, (v, b) in enumerate(zip(center_vals, boxes))]
        summary = {"samples": rep.samples, "vertices": rep.vertices,
                   "violations": rep.violation_count, "failures": len(rep.failures),
                   "unbounded": rep.unbounded, "ok": rep.ok and not nothing,
                   "first_counterexample": rep.first_counterexample(),
                   "nothing_checked": nothing,
                   "method": args.method, "output_width": widths,
                   "guarantee": rep.guarantee, "checked": rep.checked_guarantee,
                   "claimed_violations": rep.claimed_violation_count}
        outputs.print_document(outputs.document("graph-semantics", meta, rows=rows,
                                                summary=summary))
        for why in nothing:
            print(f"scalarlab graph-semantics: error: {why}", file=sys.stderr)
        return status
    print(f"== graph semantics: {case.name}, point context {pctx.name}, "
          f"boxes in {ictx.name} ==")
    print(f"centre x0 = {pctx.format(center_vals[0])}")
    for i, v in enumerate(center_vals):
        print(f"  value node {i}: {pctx.format(v)}")
    print(f"input box: l-infinity radius {args.radius} around x0")
    for i, b in enumerate(boxes):
        print(f"node {i}: " + ("no bound" if b is None else b.format(6)))
    ob = boxes[out]
    if ob is None:
        print("output interval: none (a rule could not bound its input)")
    else:
        print(f"output interval: [{float(ob.lo_float()):.6f}, {float(ob.hi_float()):.6f}]"
              if ob.lo.ndim == 0 else f"output interval: {ob.format(6)}")
    def _shown(m, w):
        if w is None:
            return f"{m} n/a (no box)"
        base = widths["ibp"]
        return f"{m} {w:.6g} ({w / base:.3f} of ibp)" if base else f"{m} {w:.6g}"
    print(f"bounding method: {args.method}; output width by method: "
          + ", ".join(_shown(m, w) for m, w in widths.items()))
    print(f"guarantee: the {args.method} boxes claim {rep.guarantee or 'nothing'} "
          f"(real: the exact real result; execution: also what {pctx.name} computes); "
          f"the point runs in {pctx.name} check {rep.checked_guarantee}")
    print(f"samples checked: {rep.samples} random + {rep.vertices} box vertices "
          f"(seed {args.seed})")
    if not rep.ok:
        print(f"counterexample: {rep.first_counterexample()}")
        print(f"{rep.violation_count} violation(s) ({rep.claimed_violation_count} of boxes "
              f"claiming {rep.checked_guarantee}), {len(rep.failures)} evaluation "
              f"failure(s)")
    elif not nothing:
        print(f"all {rep.checked} samples inside")
    for why in nothing:
        print(f"scalarlab graph-semantics: error: {why}", file=sys.stderr)
    return status
