"""Bound tightness: generic IBP vs IBP with the per-op interval rules vs CROWN-IBP vs CROWN.

For each network and radius the output box of every method is compared with the range of
seeded samples from the input box (evaluated in float64): ``width`` is the mean output
box width over the output coordinates, ``width_vs_generic`` its ratio to generic IBP,
``tightness = sampled width / box width`` (mean over coordinates; 1 = attained; the
samples are half uniform points, half random vertices of the box), and
``outside`` counts sampled outputs outside the box (0 for every sound method).

``ibp-generic`` is the fold with every op's forward rule run in interval arithmetic (the
ops' own ``interval`` rules switched off through the fold's per-node kernel hook);
``ibp`` uses the rules (softmax, log_softmax, layernorm, gelu); ``crown-ibp`` and
``crown`` are :func:`scalarlab.ibp.crown.run_crown`.

Networks (weights seeded, He-scaled normals; each ends in a softmax-type head so that the
per-op rules matter): the six-node graph; a 784-256-256-10 ReLU MLP with a log_softmax
head; a small CNN on 1x28x28 (conv 8@4x4/2, relu, conv 16@4x4/2, relu, flatten, linear
100, relu, linear 10, softmax).
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

from scalarlab import scalars
from scalarlab.graph import Graph, Node, OpKind, denote_all, examples
from scalarlab.graph.optable import OPS
from scalarlab.ibp import Box, run_crown, run_ibp

METHODS = ("ibp-generic", "ibp", "crown-ibp", "crown")
COLUMNS = ["network", "radius", "method", "width", "max_width", "width_vs_generic",
           "sampled_width", "tightness", "outside", "seconds"]


def mlp_784(seed: int = 0):
    """784-256-256-10 ReLU MLP + log_softmax head: (graph, payload, centre)."""
    rng = np.random.default_rng(seed)
    sizes = [784, 256, 256, 10]
    nodes, payload = [Node(0, [], "input", [784])], {}
    for k in range(3):
        i = len(nodes)
        nodes.append(Node(i, [i - 1], "linear", [sizes[k + 1]]))
        payload[i] = {"linear": {"W": rng.normal(0, np.sqrt(2 / sizes[k]), (sizes[k + 1], sizes[k])),
                                 "b": rng.normal(0, 0.01, sizes[k + 1])}}
        if k < 2:
            nodes.append(Node(i + 1, [i], "relu", [sizes[k + 1]]))
    nodes.append(Node(len(nodes), [len(nodes) - 1], OpKind("log_softmax", axis=0), [10]))
    return Graph(nodes), payload, rng.random(784)


def small_cnn(seed: int = 0):
    """conv(1->8, 4x4, stride 2) relu conv(8->16, 4x4, stride 2) relu flatten linear(400->100)
    relu linear(100->10) softmax, on 1x28x28: (graph, payload, centre)."""
    rng = np.random.default_rng(seed)
    g = Graph([Node(0, [], "input", [1, 28, 28]),
               Node(1, [0], OpKind("conv2d", kernel_size=4, stride=2), [8, 13, 13]),
               Node(2, [1], "relu", [8, 13, 13]),
               Node(3, [2], OpKind("conv2d", kernel_size=4, stride=2), [16, 5, 5]),
               Node(4, [3], "relu", [16, 5, 5]),
               Node(5, [4], "flatten", [400]),
               Node(6, [5], "linear", [100]),
               Node(7, [6], "relu", [100]),
               Node(8, [7], "linear", [10]),
               Node(9, [8], OpKind("softmax", axis=0), [10])])
    payload = {1: {"conv2d": {"weight": rng.normal(0, np.sqrt(2 / 16), (8, 1, 4, 4)),
                              "bias": rng.normal(0, 0.01, 8)}},
               3: {"conv2d": {"weight": rng.normal(0, np.sqrt(2 / 128), (16, 8, 4, 4)),
                              "bias": rng.normal(0, 0.01, 16)}},
               6: {"linear": {"W": rng.normal(0, np.sqrt(2 / 400), (100, 400)),
                              "b": rng.normal(0, 0.01, 100)}},
               8: {"linear": {"W": rng.normal(0, np.sqrt(2 / 100), (10, 100)),
                              "b": rng.normal(0, 0.01, 10)}}}
    return g, payload, rng.random((1, 28, 28))


NETWORKS = ("six-node", "mlp-784-256-256-10", "cnn-28x28")


def networks(seed: int = 0) -> dict:
    """{name: ((graph, payload, centre), radii)} for the names in :data:`NETWORKS`."""
    g, p, x0 = examples.six_node_mlp()
    x0 = np.array([float(t) for t in x0])
    return {"six-node": ((g, p, x0), (0.05, 0.5)),
            "mlp-784-256-256-10": (mlp_784(seed), (0.001, 0.01)),
            "cnn-28x28": (small_cnn(seed), (0.001, 0.01))}


def generic_ibp(g, payload, box, ictx):
    """IBP with every op's forward rule (no op-specific reformulating interval rules; the
    dot products and sums keep the rounding bound of their point evaluation, which the
    generic fold needs to hold the point runs too: graph/interval_rules.py)."""
    from scalarlab.graph.interval_rules import real_rule
    ictx = scalars.get(ictx)
    kernels = {n.id: (lambda args, attrs, nb, rec=OPS[n.kind.op]: rec.forward(ictx, args, attrs, nb))
               for n in g.nodes if real_rule(OPS[n.kind.op]) is not None}
    vals = denote_all(g, payload, box.to_interval(ictx), ictx, partial=True, kernels=kernels)
    return [None if v is None else Box.from_interval(ictx, v) for v in vals]


def _bound(method, g, p, box, ictx):
    if method == "ibp-generic":
        return generic_ibp(g, p, box, ictx)
    if method == "ibp":
        return run_ibp(g, p, box, ictx)
    return run_crown(g, p, box, ictx, method=method)


def tightness_table(nets=None, *, samples: int = 200, seed: int = 0,
                    ictx: str = "interval:float64", methods=METHODS) -> pd.DataFrame:
    nets = networks(seed) if nets is None else nets
    f64 = scalars.get("float64")
    rows = []
    for name, ((g, p, x0), radii) in nets.items():
        out = g.output
        for radius in radii:
            box = Box(x0 - radius, x0 + radius)
            rng = np.random.default_rng(seed)
            # half uniform points, half random vertices (where near-linear nets peak)
            u = rng.random((samples,) + x0.shape)
            u[samples // 2:] = np.round(u[samples // 2:])
            xs = x0 - radius + 2 * radius * u
            ys = np.asarray(denote_all(g, p, xs, f64)[out]).reshape(samples, -1)
            s_lo, s_hi = ys.min(axis=0), ys.max(axis=0)
            generic = None
            for method in methods:
                t0 = time.perf_counter()
                b = _bound(method, g, p, box, ictx)[out]
                sec = time.perf_counter() - t0
                lo, hi = b.lo_float().reshape(-1), b.hi_float().reshape(-1)
                w = hi - lo
                if method == "ibp-generic":
                    generic = float(np.mean(w))
                outside = int(np.sum((ys < lo) | (ys > hi)))
                with np.errstate(invalid="ignore", divide="ignore"):
                    tight = float(np.nanmean(np.where(w > 0, (s_hi - s_lo) / w, np.nan)))
                rows.append({"network": name, "radius": radius, "method": method,
                             "width": float(np.mean(w)), "max_width": float(np.max(w)),
                             "width_vs_generic": (float(np.mean(w)) / generic
                                                  if generic else float("nan")),
                             "sampled_width": float(np.mean(s_hi - s_lo)),
                             "tightness": tight, "outside": outside, "seconds": sec})
    return pd.DataFrame.from_records(rows, columns=COLUMNS)
