"""``scalarlab graph-semantics``: interval bounds for the six-node MLP, end to end.

Evaluate the centre input, propagate an l-infinity box through the graph with interval
arithmetic, print the box at every node, then check deterministic samples (and the box
vertices) against the boxes: exit 0 when all are inside, 1 with the first counterexample.
"""
from __future__ import annotations

import json

from scalarlab import scalars

NAME = "graph-semantics"
HELP = "six-node graph: centre value, IBP box per node, sampled containment check"


def add_arguments(p):
    p.add_argument("--samples", type=int, default=50, help="random samples to check (default 50)")
    p.add_argument("--radius", default="0.05", help="l-infinity radius of the input box (default 0.05)")
    p.add_argument("--context", default="binary32",
                   help="point context; boxes use interval:<context> (default binary32)")
    p.add_argument("--seed", type=int, default=0, help="sample generator seed (default 0)")
    p.add_argument("--no-vertices", action="store_true", help="do not check the box vertices")
    p.add_argument("--method", default="ibp",
                   help="bounding method for the boxes: ibp, crown or crown-ibp (default "
                        "ibp); the output widths of all three are compared at the end")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def run(args) -> int:
    from scalarlab.graph import denote_all, examples
    from scalarlab.ibp import Box, check_containment, run_ibp
    from scalarlab.ibp.errors import IBPError

    if args.samples < 0:
        raise IBPError(f"--samples must be >= 0, got {args.samples}")
    g, payload, x0 = examples.six_node_mlp()
    pctx = scalars.get(args.context)
    ictx = scalars.get(f"interval:{pctx.name}")
    center_vals = denote_all(g, payload, pctx.convert(x0), pctx)
    box = Box.from_center_radius(x0, args.radius)
    from scalarlab.ibp.crown import run_crown
    boxes = (run_ibp(g, payload, box, ictx) if args.method == "ibp"
             else run_crown(g, payload, box, ictx, method=args.method))
    widths = {m: float(run_crown(g, payload, box, ictx, method=m)[g.output].width())
              for m in ("ibp", "crown", "crown-ibp")}
    rep = check_containment(g, payload, box, samples=args.samples, point_ctx=pctx,
                            interval_ctx=ictx, seed=args.seed,
                            vertices=not args.no_vertices, boxes=boxes)
    out = g.output
    if args.json:
        doc = {
            "context": pctx.name, "interval_context": ictx.name,
            "center": [float(t) for t in x0], "radius": str(args.radius),
            "center_values": [pctx.to_float64(v).tolist() for v in center_vals],
            "boxes": [None if b is None else {"lo": b.lo_float().tolist(),
                                               "hi": b.hi_float().tolist()} for b in boxes],
            "samples": rep.samples, "vertices": rep.vertices,
            "violations": rep.violation_count, "failures": len(rep.failures),
            "ok": rep.ok, "first_counterexample": rep.first_counterexample(),
            "method": args.method, "output_width": widths,
        }
        print(json.dumps(doc, indent=2))
        return 0 if rep.ok else 1
    print(f"== graph semantics: six-node MLP, point context {pctx.name}, "
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
    print(f"bounding method: {args.method}; output width by method: " + ", ".join(
        f"{m} {w:.6g} ({w / widths['ibp']:.3f} of ibp)" if widths["ibp"] > 0 else f"{m} {w:.6g}"
        for m, w in widths.items()))
    print(f"samples checked: {rep.samples} random + {rep.vertices} box vertices "
          f"(seed {args.seed})")
    if rep.ok:
        print(f"all {rep.checked} samples inside")
        return 0
    print(f"counterexample: {rep.first_counterexample()}")
    print(f"{rep.violation_count} violation(s), {len(rep.failures)} evaluation failure(s)")
    return 1
