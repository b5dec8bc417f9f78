"""``scalarlab ir-axis-ops``: softmax, layernorm and concat on an interior axis of [2,3,4].

Each graph is shape-checked, then its output is evaluated (the IR fold on CPU); a last
case shows shape inference rejecting an out-of-range concat axis before evaluation.
"""
from __future__ import annotations

from .. import argtypes as T
from . import help_of
from ..lazy_import import lazy

# Heavy modules load when a run first uses them: --help builds the parser without them.
graph = lazy("scalarlab.graph")
scalars = lazy("scalarlab.scalars")
examples = lazy("scalarlab.graph.examples")
_errors = lazy("scalarlab.scalars.errors")

NAME = "ir-axis-ops"
HELP = help_of(NAME)

ALIASES = {"native": "float64", "ieee": "binary32", "complex": "complex128"}


def add_arguments(p) -> None:
    p.add_argument("--arithmetic", default="native", metavar="NAME",
                   help="scalar context: native (float64), ieee (binary32), complex "
                        "(complex128) or any context name (default native)")
    p.add_argument("--leading", type=T.integer(1), default=4, metavar="K",
                   help="how many leading output values to print (default 4)")


def _leading(ctx, v, k):
    n = 1
    for d in ctx.shape(v):
        n *= d
    flat = ctx.reshape(v, (n,))
    import numpy as np
    return ctx.format(ctx.take(flat, np.arange(min(k, n)), axis=0))


def _case(tag, make, ctx, k) -> bool:
    g, p, x = make()
    graph.check_shapes(g)
    try:
        y = graph.denote(g, p, x, ctx)
    except _errors.ContextError as exc:
        print(f"[{tag}] not evaluated: {exc}")
        return False
    print(f"[{tag}] output shape: {list(ctx.shape(y))}")
    print(f"[{tag}] leading values: {_leading(ctx, y, k)}")
    return True


def run(args) -> int:
    ctx = scalars.get(ALIASES.get(args.arithmetic, args.arithmetic))
    print("== IR axis ops tutorial ==")
    print("The IR evaluator validates each graph and computes its selected output on CPU.")
    print(f"(context: {ctx.name})")
    ok = True
    print()
    print("-- softmax axis=1 on shape [2,3,4]")
    ok &= _case("softmax_middle_axis", examples.softmax_axis, ctx, args.leading)
    print()
    print("-- layernorm axis=1 on shape [2,3,4]")
    print("PyTorch meaning: normalized_shape = x.shape[axis:] = [3,4]")
    ok &= _case("layernorm_middle_axis", examples.layernorm_axis, ctx, args.leading)
    print()
    print("-- concat axis=1: [2,3,4] ++ [2,5,4] -> [2,8,4]")
    ok &= _case("concat_middle_axis", examples.concat_axis, ctx, args.leading)
    print()
    print("-- concat axis=3 (out of range): shape inference rejects it before evaluation")
    g, _, _ = examples.concat_axis(axis=3)
    try:
        graph.check_shapes(g)
        print("[concat_bad_axis] unexpectedly accepted")
        ok = False
    except graph.GraphError as exc:
        print(f"[concat_bad_axis] {exc}")
    return 0 if ok else 1
