"""``scalarlab tape-demo``: the two-branch square example on a hand-built tape.

Records ``z = x*x + x*x, l = sum(z)`` at ``x = (3, -1.5)`` in the chosen context, prints the
node list, ``(output id, tape length)``, the forward value and the gradient; then the same
with the second branch detached (six nodes, gradient ``2x``, the reached set); then both
gradients again from the transform API (typed graph -> tape).  In ``rational`` every
figure is exact.
"""
from __future__ import annotations
from . import help_of

NAME = "tape-demo"
HELP = help_of(NAME)

X0 = ["3", "-1.5"]


def add_arguments(parser) -> None:
    parser.add_argument("--context", default="float64",
                        help="scalar context (float64, rational, binary32, ...)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def _live(ops, x):
    return ops.sum(ops.add(ops.mul(x, x), ops.mul(x, x)))


def _detached(ops, x):
    return ops.sum(ops.add(ops.mul(x, x), ops.detach(ops.mul(x, x))))


def _build(ctx, detach: bool):
    from scalarlab.tape import TapeBuilder
    b = TapeBuilder(ctx)
    x = b.leaf(X0, name="x")
    a = b.mul(x, x)
    c = b.mul(x, x)
    if detach:
        c = b.detach(c)
    out = b.sum(b.add(a, c))
    return b, x, out


def _fmt(ctx, v):
    """Exact contexts: integers or p/q per entry (``[12, -6]``, ``45/2``); others: the
    context's own six-digit format (``[12.000000, -6.000000]``, intervals as lo .. hi)."""
    import numpy as np
    if ctx.exact:
        a = np.asarray(v, dtype=object)
        items = [str(t) for t in a.reshape(-1)]
        return items[0] if a.ndim == 0 else "[" + ", ".join(items) + "]"
    return ctx.format(v, 6)


def _nodes_text(nodes) -> str:
    return "[" + ", ".join(f'("{n}", {p})' for n, p in nodes) + "]"


def run(args) -> int:
    from scalarlab import scalars
    from scalarlab.tape import backward, grad
    ctx = scalars.get(args.context)

    b, x, out = _build(ctx, detach=False)
    g = backward(b.tape, out)
    bd, xd, outd = _build(ctx, detach=True)
    gd = backward(bd.tape, outd)
    live_t = grad(_live, ctx)(X0)
    det_t = grad(_detached, ctx)(X0)

    report = {
        "context": ctx.name,
        "x": X0,
        "nodes": b.tape.nodes(),
        "output_id": out,
        "tape_length": len(b.tape),
        "forward": _fmt(ctx, b.tape.value(out)),
        "gradient": _fmt(ctx, g[x]),
        "detached": {
            "nodes": bd.tape.nodes(),
            "forward": _fmt(ctx, bd.tape.value(outd)),
            "gradient": _fmt(ctx, gd[xd]),
            "reached": gd.reached,
        },
        "transform": {"live": _fmt(ctx, live_t), "detached": _fmt(ctx, det_t)},
    }
    if args.json:
        from .. import outputs
        outputs.print_document(outputs.document(
            "tape-demo", {"context": ctx.name, "x": X0}, tables=report))
        return 0
    print(f"context: {ctx.name}")
    print("program: z = x*x + x*x, l = sum(z) at x = (3, -1.5)")
    print(f"recorded nodes: {_nodes_text(report['nodes'])}")
    print(f"(output id, tape length) = ({out}, {len(b.tape)})")
    print(f"forward = {report['forward']}")
    print(f"gradient of node {x} = {report['gradient']}")
    print("second branch detached:")
    print(f"  recorded nodes: {_nodes_text(report['detached']['nodes'])}")
    print(f"  forward = {report['detached']['forward']}")
    print(f"  gradient of node {xd} = {report['detached']['gradient']}")
    print(f"  reached = {gd.reached}")
    print("transform API (typed graph lowered to a tape):")
    print(f"  both branches live = {report['transform']['live']}")
    print(f"  second detached    = {report['transform']['detached']}")
    return 0
