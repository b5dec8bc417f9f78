"""The fold's masked ``select`` evaluation: what it costs where there is no select, and
what the masking machinery costs where there is one.

1. Select-free graphs (an FPCore-sized scalar expression over 8000 samples in float64
   and binary32, 1000 in mpmath:100; a 10,000-node chain over 4 samples; the six-node
   MLP over 10^4 samples): seconds per ``denote_all``.  With ``--baseline PYTHONPATH``
   the same measurements run in a subprocess whose ``scalarlab`` is another checkout
   (``--baseline ''``: the installed package) and the ratios this/baseline are printed.
2. ``(if (< x 0) (sqrt (- x)) (sqrt x))``-shaped graphs over mixed-sign samples (float64
   x8000, also with 20 more nodes per branch; mpmath:100 x1000): the masked fold vs the
   same work done by hand (the condition on every row, each branch as a select-free graph
   on its own rows, a numpy pick): the ratio is the bookkeeping of the rounds, the
   gathers/scatters and the select's own rule.

Usage: python bench/select_fold.py [--repeats N] [--baseline PYTHONPATH]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import benchlib  # noqa: E402  (thread settings before numpy)
import numpy as np  # noqa: E402

from scalarlab import graph, scalars  # noqa: E402
from scalarlab.graph import Graph, Node, OpKind, Payload, examples  # noqa: E402


def expression(n_terms: int):
    """A select-free scalar expression of FPCore size: sum of (x*c_k - y)/(x + k)."""
    nodes = [Node(0, [], "input", []), Node(1, [], "input", [])]
    pay = {}
    acc = None
    for k in range(n_terms):
        base = len(nodes)
        nodes += [Node(base, [], "const", []), Node(base + 1, [0, base], OpKind("mul"), []),
                  Node(base + 2, [base + 1, 1], OpKind("sub"), []),
                  Node(base + 3, [], "const", []),
                  Node(base + 4, [0, base + 3], OpKind("add"), []),
                  Node(base + 5, [base + 2, base + 4], OpKind("div"), [])]
        pay[base] = {"const": {"value": f"{k + 1}.25"}}
        pay[base + 3] = {"const": {"value": f"{k + 3}"}}
        term = base + 5
        if acc is not None:
            nodes.append(Node(len(nodes), [acc, term], OpKind("add"), []))
            term = len(nodes) - 1
        acc = term
    return Graph(nodes), Payload(pay)


def chain(n: int):
    nodes = [Node(0, [], "input", [])] + [Node(i, [i - 1], OpKind("neg"), [])
                                          for i in range(1, n)]
    return Graph(nodes), Payload()


def select_free_cases(rng):
    g, p = expression(4)
    x = rng.uniform(0.5, 4.0, 8000)
    y = rng.uniform(-2.0, 2.0, 8000)
    six, p6, _ = examples.six_node_mlp()
    cases = [("expr-24 float64 x8000", g, p, [x, y], "float64"),
             ("expr-24 binary32 x8000", g, p, [x, y], "binary32"),
             ("expr-24 mpmath:100 x1000", g, p, [x[:1000], y[:1000]], "mpmath:100")]
    gc, pc = chain(10_000)
    cases.append(("chain-10000 float64 x4", gc, pc, x[:4], "float64"))
    xs = rng.standard_normal((10_000,) + tuple(six.nodes[0].out_shape))
    cases.append(("six-node float64 x10000", six, p6, xs, "float64"))
    return cases


def measure_select_free(repeats: int) -> dict:
    rng = np.random.default_rng(0)
    out = {}
    for name, g, p, x, cname in select_free_cases(rng):
        ctx = scalars.get(cname)
        (t,), _ = benchlib.interleaved([lambda: graph.denote_all(g, p, x, ctx)], repeats,
                                       warm=True)
        out[name] = t
    return out


def abs_sqrt_graph(depth: int):
    """(if (< x 0) (sqrt (- x)) (sqrt x)) with ``depth`` extra neg/abs pairs in each
    branch (more branch-exclusive nodes per select)."""
    nodes = [Node(0, [], "input", []), Node(1, [0], OpKind("neg"), [])]
    for _ in range(depth):
        k = len(nodes)
        nodes += [Node(k, [k - 1], OpKind("abs"), []), Node(k + 1, [k], OpKind("abs"), [])]
    nodes.append(Node(len(nodes), [len(nodes) - 1], OpKind("sqrt"), []))
    a = len(nodes) - 1
    nodes.append(Node(len(nodes), [0], OpKind("sqrt"), []))
    b = len(nodes) - 1
    c0 = len(nodes)
    nodes += [Node(c0, [], "const", []), Node(c0 + 1, [0, c0], OpKind("lt"), []),
              Node(c0 + 2, [c0 + 1, a, b], OpKind("select"), [])]
    return Graph(nodes), Payload({c0: {"const": {"value": "0"}}}), a


def measure_masked(repeats: int):
    rng = np.random.default_rng(1)
    rows = []
    for depth, cname, n in ((0, "float64", 8000), (10, "float64", 8000),
                            (0, "mpmath:100", 1000)):
        ctx = scalars.get(cname)
        xf = rng.uniform(-4, 4, n)
        x = ctx.convert(xf)
        c = xf < 0
        neg, pos = ctx.convert(xf[c]), ctx.convert(xf[~c])
        g, p, a = abs_sqrt_graph(depth)
        # the same work by hand: the condition on every row, the then-branch's nodes on
        # the negative rows, sqrt on the others, and the pick (numpy)
        ga = Graph(g.nodes[:a + 1])
        gb = Graph([Node(0, [], "input", []), Node(1, [0], OpKind("sqrt"), [])])
        gc = Graph([Node(0, [], "input", []), Node(1, [], "const", []),
                    Node(2, [0, 1], OpKind("lt"), [])])
        pc = Payload({1: {"const": {"value": "0"}}})

        def by_hand():
            cond = np.asarray(ctx.to_float64(graph.denote(gc, pc, x, ctx))) > 0
            ya = graph.denote(ga, Payload(), neg, ctx)
            yb = graph.denote(gb, Payload(), pos, ctx)
            out = np.empty(n, dtype=np.asarray(ya).dtype)
            out[cond], out[~cond] = ya, yb
            return out
        (tm, th), _ = benchlib.interleaved([lambda: graph.denote(g, p, x, ctx), by_hand],
                                           repeats, warm=True)
        assert np.asarray(graph.denote(g, p, x, ctx)).tolist() == by_hand().tolist()
        rows.append((f"abs-sqrt, {len(g.nodes)} nodes, {cname} x{n}", tm, th))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--baseline", default=None,
                    help="PYTHONPATH of a reference scalarlab ('' = the installed one)")
    ap.add_argument("--json-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    mine = measure_select_free(args.repeats)
    if args.json_only:
        print(json.dumps(mine))
        return 0
    print(f"scalarlab from {os.path.dirname(graph.__file__)}")
    base = None
    if args.baseline is not None:
        env = dict(os.environ, PYTHONPATH=args.baseline)
        res = subprocess.run([sys.executable, os.path.abspath(__file__), "--json-only",
                              "--repeats", str(args.repeats)], env=env, capture_output=True,
                             text=True, check=True)
        base = json.loads(res.stdout.strip().splitlines()[-1])
    print("1. select-free graphs: seconds per denote_all (best of "
          f"{args.repeats})" + ("" if base is None else "; this / baseline"))
    for name, t in mine.items():
        extra = "" if base is None else f"   baseline {base[name]:.4g} s   ratio " \
                                        f"{t / base[name]:.3f}"
        print(f"   {name:28s} {t:.4g} s{extra}")
    print("2. masked select vs the same work by hand (seconds; ratio)")
    for name, tm, th in measure_masked(args.repeats):
        print(f"   {name:36s} masked {tm:.4g}   by hand {th:.4g}   ratio {tm / th:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
