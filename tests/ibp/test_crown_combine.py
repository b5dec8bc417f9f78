"""run_crown(..., combine=): how a node's CROWN rows meet its other boxes.

auto_LiRPA 0.7.1 keeps an intermediate node's CROWN bound as it is; run_crown's default
intersects it with the op's rule box and the IBP box.  Both are sound, but CROWN-Ada's
lower slope (1 if u > -l else 0) and the upper chord depend on those boxes, so on a
residual net (the rule box of an ``add`` is often tighter than either branch's CROWN
bound) the final bounds differ, in either direction.  ``combine="crown"`` with
``rows="all"`` is plain CROWN: it must equal a dense float64 CROWN written here over the
residual graph (no intersection anywhere) to 1e-9; so must ``combine="crown"`` with the
default unstable rows where more than 90% of a node's coordinates are unstable (auto_LiRPA
then bounds every row); both choices must hold the exact values at every vertex of the
box (Fractions).
"""
from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

from scalarlab.graph import Graph, Node
from scalarlab.ibp import Box
from scalarlab.ibp.crown import run_crown

N_IN, H, N_OUT = 4, 8, 3


def _net(seed):
    """x -> linear -> relu (h) -> linear -> relu -> linear -> add(., h) -> relu -> linear."""
    rng = np.random.default_rng(seed)
    g = Graph([Node(0, [], "input", [N_IN]), Node(1, [0], "linear", [H]),
               Node(2, [1], "relu", [H]), Node(3, [2], "linear", [H]),
               Node(4, [3], "relu", [H]), Node(5, [4], "linear", [H]),
               Node(6, [5, 2], "add", [H]), Node(7, [6], "relu", [H]),
               Node(8, [7], "linear", [N_OUT])])
    p = {i: {"linear": {"W": rng.normal(0, 1 / np.sqrt(m), (n, m)), "b": rng.normal(0, 0.1, n)}}
         for i, n, m in ((1, H, N_IN), (3, H, H), (5, H, H), (8, N_OUT, H))}
    return g, p


def _ref_backward(g, p, pre, t, l0, u0, sign):
    """Dense float64 CROWN bound of node t (sign +1: upper, -1: lower): one coefficient
    matrix per node, summed over its consumers before the node is crossed (the add's two
    branches meet at their shared relu), relus relaxed with CROWN-Ada from ``pre``."""
    n = g.nodes[t].out_shape[0]
    A = {t: np.eye(n)}
    c = np.zeros(n)
    for k in range(t, 0, -1):
        if k not in A:
            continue
        a, node = A.pop(k), g.nodes[k]
        op = node.kind.op

        def give(j, m):
            A[j] = A[j] + m if j in A else m
        if op == "linear":
            W, b = p[k]["linear"]["W"], p[k]["linear"]["b"]
            c = c + a @ b
            give(node.parents[0], a @ W)
        elif op == "add":
            for j in node.parents:
                give(j, a)
        else:                                  # relu: CROWN-Ada from its input's box
            lo, hi = pre[node.parents[0]]
            lo, hi = np.minimum(lo, 0), np.maximum(hi, 0)
            au = np.where(hi <= 0, 0.0, np.where(lo >= 0, 1.0, hi / np.where(hi > lo, hi - lo, 1)))
            bu = np.where((lo < 0) & (hi > 0), -au * lo, 0.0)
            al = np.where(hi <= 0, 0.0, np.where(lo >= 0, 1.0, (hi > -lo).astype(float)))
            P, N = np.maximum(a, 0), np.minimum(a, 0)
            if sign > 0:                       # upper: positive coefficients take the upper line
                c = c + P @ bu
                give(node.parents[0], P * au + N * al)
            else:
                c = c + N @ bu
                give(node.parents[0], P * al + N * au)
    a = A[0]
    if sign > 0:
        return np.maximum(a, 0) @ u0 + np.minimum(a, 0) @ l0 + c
    return np.maximum(a, 0) @ l0 + np.minimum(a, 0) @ u0 + c


def _ref_crown(g, p, l0, u0):
    pre = {}
    for t in (1, 3, 6):                        # every relu input, in order, then the output
        pre[t] = (_ref_backward(g, p, pre, t, l0, u0, -1), _ref_backward(g, p, pre, t, l0, u0, 1))
    return pre, (_ref_backward(g, p, pre, 8, l0, u0, -1), _ref_backward(g, p, pre, 8, l0, u0, 1))


def _exact(g, p, x):
    """The network at one input, in Fractions (every node)."""
    v = {0: [Fraction(float(t)) for t in x]}
    for node in g.nodes[1:]:
        a = [v[j] for j in node.parents]
        if node.kind.op == "linear":
            W, b = p[node.id]["linear"]["W"], p[node.id]["linear"]["b"]
            v[node.id] = [sum((Fraction(float(W[r, s])) * a[0][s] for s in range(W.shape[1])),
                              Fraction(float(b[r]))) for r in range(W.shape[0])]
        elif node.kind.op == "add":
            v[node.id] = [s + t for s, t in zip(*a)]
        else:
            v[node.id] = [max(s, Fraction(0)) for s in a[0]]
    return v


def _ends(b):
    return np.asarray(b.lo, dtype=np.float64), np.asarray(b.hi, dtype=np.float64)


@pytest.mark.parametrize("seed, radius", [(3, 0.6)])
def test_combine_crown_is_plain_crown_and_both_choices_hold_exact_values(seed, radius):
    g, p = _net(seed)
    x0 = np.random.default_rng(100 + seed).normal(0, 0.5, N_IN)
    l0, u0 = x0 - radius, x0 + radius
    box = Box(l0, u0)
    plain = run_crown(g, p, box, guarantee="real", rows="all", combine="crown")
    pre, (olo, ohi) = _ref_crown(g, p, l0, u0)
    for t, (rlo, rhi) in list(pre.items()) + [(8, (olo, ohi))]:
        lo, hi = _ends(plain[t])
        scale = max(1.0, np.max(np.abs(np.concatenate([rlo, rhi]))))
        assert np.max(np.abs(lo - rlo)) <= 1e-9 * scale, (t, lo, rlo)
        assert np.max(np.abs(hi - rhi)) <= 1e-9 * scale, (t, hi, rhi)
    # more than 90% of the add's (and node 1's) coordinates straddle 0 here, so the
    # auto_LiRPA mode bounds every row: plain CROWN again
    assert np.count_nonzero((pre[6][0] < 0) & (pre[6][1] > 0)) > 0.9 * H
    sparse = run_crown(g, p, box, guarantee="real", combine="crown")
    for t in (6, 8):
        rlo, rhi = pre[t] if t == 6 else (olo, ohi)
        lo, hi = _ends(sparse[t])
        assert np.max(np.abs(np.concatenate([lo - rlo, hi - rhi]))) <= 1e-9 * max(
            1.0, np.max(np.abs(rhi)))
    inter = run_crown(g, p, box, guarantee="real")
    # the residual add's intersected box is tighter than its plain CROWN box, and the
    # final bounds differ (this seed: in both directions across the outputs)
    a_lo, a_hi = _ends(inter[6])
    assert np.all(a_lo >= pre[6][0] - 1e-12) and np.all(a_hi <= pre[6][1] + 1e-12)
    assert np.any(a_lo > pre[6][0] + 1e-6)
    i_lo, i_hi = _ends(inter[8])
    assert np.max(np.abs(np.concatenate([i_lo - olo, i_hi - ohi]))) > 1e-6
    for corner in itertools.product(*zip(l0, u0)):
        v = _exact(g, p, corner)
        for res in (plain, inter):
            for t in (1, 3, 6, 8):
                lo, hi = _ends(res[t])
                assert all(Fraction(float(lo[r])) <= v[t][r] <= Fraction(float(hi[r]))
                           for r in range(len(v[t]))), (t, corner)


def test_combine_rejects_unknown_choice():
    g, p = _net(0)
    with pytest.raises(Exception, match="combine"):
        run_crown(g, p, Box(np.zeros(N_IN), np.ones(N_IN)), combine="lirpa")


def test_combine_crown_on_a_conv_residual_net_holds_exact_and_binary32_runs():
    """The auto_LiRPA mode on a conv residual net (batchnorm, max-pool, add): real boxes
    hold mpmath runs at vertices and interior points, execution boxes in binary32 hold
    the lab's binary32 runs."""
    from test_crown_window import _assert_holds_binary32_runs, _residual_net
    from test_ibp_crown import _check_sound
    g, p = _residual_net(3)
    rng = np.random.default_rng(4)
    x = rng.normal(0, 1, (2, 8, 8)).astype(np.float32).astype(np.float64)
    box = Box(x - 2.0 ** -4, x + 2.0 ** -4)
    real = run_crown(g, p, box, guarantee="real", combine="crown")
    assert _check_sound(g, p, box.lo, box.hi, real, n_random=3, seed=5, max_vertices=3) > 0
    boxes = run_crown(g, p, box, "interval:binary32", combine="crown")
    _assert_holds_binary32_runs(g, p, box, boxes, rng, 6)
