"""Box widths under the two guarantees (not a test): what the execution bound costs.

For relu -> head graphs (head = softmax, log_softmax, layernorm, gelu, silu; one layer of
six inputs, and two dense layers with random weights), radius 0.3, in float64, binary32,
bfloat16 and binary16: the mean output width of

* ``real``      — ``run_ibp(..., guarantee="real")``: the per-op rule without its
                  point-evaluation bound (what the rules gave before the bound);
* ``execution`` — ``run_ibp`` (default): the rule plus the bound, met with the generic box;
* ``generic``   — the fold with the head's forward rule in interval arithmetic
                  (``experiments.tightness.generic_ibp``: no reformulating rule);

and the ratios execution / real and execution / generic.

Run: ``python bench/ibp_guarantees.py``.
"""
from __future__ import annotations

import os
import sys

# this file is named like nothing it measures, but keep bench/ off the import path anyway
sys.path = [q for q in sys.path if os.path.abspath(q or ".") != os.path.dirname(os.path.abspath(__file__))]

import numpy as np  # noqa: E402

from scalarlab.experiments.tightness import generic_ibp  # noqa: E402
from scalarlab.graph import Graph, Node, OpKind, Payload  # noqa: E402
from scalarlab.ibp import Box, run_ibp  # noqa: E402

HEADS = ["softmax", "log_softmax", "layernorm", "gelu", "silu"]
FORMATS = ["float64", "binary32", "bfloat16", "binary16"]


def _head(op, i, parent, k):
    if op in ("gelu", "silu"):
        return Node(i, [parent], op, [k])
    return Node(i, [parent], OpKind(op, axis=0), [k])


def relu_head(op, seed=5):
    rng = np.random.default_rng(seed)
    g = Graph([Node(0, [], "input", [6]), Node(1, [0], "relu", [6]), _head(op, 2, 1, 6)])
    return g, Payload({}), 2 * rng.standard_normal(6)


def two_layers(op, seed=1):
    rng = np.random.default_rng(seed)
    g = Graph([Node(0, [], "input", [4]), Node(1, [0], "linear", [8]),
               Node(2, [1], "relu", [8]), Node(3, [2], "linear", [5]), _head(op, 4, 3, 5)])
    p = Payload({1: {"W": rng.standard_normal((8, 4)), "b": rng.standard_normal(8)},
                 3: {"W": rng.standard_normal((5, 8)), "b": rng.standard_normal(5)}})
    return g, p, rng.standard_normal(4)


def main() -> None:
    print(f"{'head':12s} {'format':9s} {'graph':10s} {'real':>9s} {'execution':>9s} "
          f"{'generic':>9s} {'exec/real':>9s} {'exec/gen':>9s}")
    for op in HEADS:
        for fmt in FORMATS:
            for name, build in (("relu-head", relu_head), ("two-layer", two_layers)):
                g, p, c = build(op)
                box = Box.from_center_radius(c, 0.3)
                ctx = f"interval:{fmt}"
                w = {k: float(np.mean(b[g.output].width())) for k, b in (
                    ("real", run_ibp(g, p, box, ctx, guarantee="real")),
                    ("execution", run_ibp(g, p, box, ctx)),
                    ("generic", generic_ibp(g, p, box, ctx)))}
                print(f"{op:12s} {fmt:9s} {name:10s} {w['real']:9.4g} {w['execution']:9.4g} "
                      f"{w['generic']:9.4g} {w['execution'] / w['real']:9.3f} "
                      f"{w['execution'] / w['generic']:9.3f}")


if __name__ == "__main__":
    main()
