"""``scalarlab tape-demo``: the two-branch square example on a hand-built tape.

Records ``z = x*x + x*x, l = sum(z)`` at ``x = (3, -1.5)`` in the chosen context, prints the
node list, ``(output id, tape length)``, the forward value and the gradient; then the same
with the second branch detached (six nodes, gradient ``2x``, the reached set); then both
gradients again from the transform API (typed graph -> tape).  In ``rational`` every
figure is exact.
"""
from __future__ import annotations

import json

NAME = "tape-demo"
HELP = "walk the tape example: recorded nodes, (4, 5), forward 22.5, gradients 4x and 2x"

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
    from tape import TapeBuilder
    b = TapeBuilder(ctx)
    x = b.leaf(X0, name="x")
    a = b.mul(x, x)
    c = b.mul(x, x)
    if detach:
        c = b.detach(c)
    out = b.sum(b.add(a, c))
    return b, x, out


def _fmt(ctx, v):
    """Exact contexts: integers or p/q per entry; others: the context's own format."""
    import numpy as np
    if ctx.exact:
        a = np.asarray(v, dtype=object)
        items = [str(t) for t in a.reshape(-1)]
        return items[0] if a.ndim == 0 else items
    if a_shape(ctx, v) == ():
        return ctx.format(v, 6)
    return [ctx.format(t, 6) for t in _entries(ctx, v)]


def a_shape(ctx, v):
    return tuple(ctx.shape(v))


def _entries(ctx, v):
    n = a_shape(ctx, v)[0]
    return [ctx.take(v, [i], 0) for i in range(n)]


def _show(items) -> str:
    return items if isinstance(items, str) else "(" + ", ".join(items) + ")"


def _nodes_text(nodes) -> str:
    return "[" + ", ".join(f'("{n}", {p})' for n, p in nodes) + "]"


def run(args) -> int:
    import scalars
    from tape import backward, grad
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
        print(json.dumps(report, indent=2))
        return 0
    print(f"context: {ctx.name}")
    print("program: z = x*x + x*x, l = sum(z) at x = (3, -1.5)")
    print(f"recorded nodes: {_nodes_text(report['nodes'])}")
    print(f"(output id, tape length) = ({out}, {len(b.tape)})")
    print(f"forward = {report['forward']}")
    print(f"gradient at node {x} = {_show(report['gradient'])}")
    print("second branch detached:")
    print(f"  recorded nodes: {_nodes_text(report['detached']['nodes'])}")
    print(f"  forward = {report['detached']['forward']}")
    print(f"  gradient at node {xd} = {_show(report['detached']['gradient'])}")
    print(f"  reached = {gd.reached}")
    print("transform API (typed graph lowered to a tape):")
    print(f"  both branches live = {_show(report['transform']['live'])}")
    print(f"  second detached    = {_show(report['transform']['detached'])}")
    return 0
