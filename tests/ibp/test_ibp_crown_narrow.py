"""CROWN on narrow boxes (ibp/crown.py): never looser than IBP, relaxations are theorems.

* the relaxation lines of tanh/sigmoid, as the backward pass uses them (interval slope
  times an exact point plus interval offset), lie below/above the exact function (mpmath
  at 200 bits) at the ends, the midpoint and seeded points of boxes from 0 to 10 wide,
  point boxes and few-ulp boxes included;
* one neuron at x = 0.3 (the issue's reproducer) and point boxes / radii 1e-15..1e-6 of
  tanh, sigmoid, relu and max-pool graphs and a small MLP and CNN: every node's CROWN and
  CROWN-IBP box (real guarantee) is inside the IBP box and holds the exact values of
  seeded samples and vertices; the execution guarantee costs at most a few rounding
  errors over IBP on a point box (it was 1.8e15 times IBP before);
* on wider boxes CROWN stays much tighter than IBP.
"""
from __future__ import annotations

import mpmath
import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.graph import Graph, Node, OpKind
from scalarlab.ibp import Box, IBPError, run_ibp
from scalarlab.ibp.crown import _relax, run_crown

from test_ibp_crown import _check_sound, mlp_graph, random_mlp, small_cnn

RADII = [0.0, 1e-15, 1e-12, 1e-9, 1e-6]
F64 = scalars.get("interval:float64")
MP = mpmath.MPContext()
MP.prec = 200


def _exact(op, z):
    x = MP.mpf(float(z))
    return MP.tanh(x) if op == "tanh" else 1 / (1 + MP.exp(-x))


def _line_ends(iv, k):
    return MP.mpf(float(iv.lo[k])), MP.mpf(float(iv.hi[k]))


@pytest.mark.parametrize("op", ["tanh", "sigmoid"])
def test_relaxation_lines_enclose_the_function(op):
    rng = np.random.default_rng(7 if op == "tanh" else 8)
    centres = rng.normal(0, 2.5, 40)
    widths = np.concatenate([[0.0, 0.0], 10.0 ** rng.uniform(-16, 1, 38)])
    l, u = centres - widths / 2, centres + widths / 2
    l[1] = u[1] = 0.3
    # few-ulp boxes around 0.3 and straddling 0
    l[2], u[2] = 0.3, float(np.nextafter(np.nextafter(0.3, 1), 1))
    l[3], u[3] = -1e-300, 1e-300
    al, bl, au, bu = _relax(F64, op, l, u)
    for k in range(l.size):
        zs = [l[k], u[k], l[k] * 0.5 + u[k] * 0.5] + list(l[k] + rng.random(5) * (u[k] - l[k]))
        for z in zs:
            s = _exact(op, z)
            zq = MP.mpf(float(z))
            a_lo, a_hi = _line_ends(al, k)
            b_lo, _ = _line_ends(bl, k)
            c_lo, c_hi = _line_ends(au, k)
            _, d_hi = _line_ends(bu, k)
            lower = min(a_lo * zq, a_hi * zq) + b_lo
            upper = max(c_lo * zq, c_hi * zq) + d_hi
            assert lower <= s <= upper, (op, k, l[k], u[k], float(z))


def _one_neuron(act):
    if act == "max_pool2d":
        g = Graph([Node(0, [], "input", [1, 2, 2]),
                   Node(1, [0], OpKind("conv2d", kernel_size=1), [1, 2, 2]),
                   Node(2, [1], OpKind("max_pool2d", kernel_size=2), [1, 1, 1])])
        p = {1: {"conv2d": {"weight": np.array([[[[0.7]]]]), "bias": np.array([0.1])}}}
        return g, p, np.array([[[0.3, 0.29], [0.31, 0.3]]])
    g = Graph([Node(0, [], "input", [1]), Node(1, [0], "linear", [1]),
               Node(2, [1], act, [1])])
    p = {1: {"linear": {"W": np.array([[1.0]]), "b": np.array([0.0])}}}
    return g, p, np.array([0.3])


def _widths_inside(crown, ibp):
    for k, (c, b) in enumerate(zip(crown, ibp)):
        if c is None or b is None:
            continue
        assert np.all(c.lo_float() >= b.lo_float()) and np.all(c.hi_float() <= b.hi_float()), k


# the default run: every activation in interval:binary32, tanh (the issue's) in the other
# two contexts; -m slow: every activation in every context
@pytest.mark.parametrize("ctx, act", [
    pytest.param(ctx, act, id=f"{ctx}-{act}",
                 marks=() if act == "tanh" or ctx == "interval:binary32" else pytest.mark.slow)
    for ctx in ("interval:float64", "interval:binary32", "interval:bfloat16")
    for act in ("tanh", "sigmoid", "relu", "max_pool2d")])
def test_one_neuron_never_looser_than_ibp(act, ctx):
    g, p, x0 = _one_neuron(act)
    for r in RADII:
        box = Box.from_center_radius(x0, np.full(x0.shape, r))
        ibp = run_ibp(g, p, box, ctx)
        for method in ("crown", "crown-ibp"):
            real = run_crown(g, p, box, ctx, method=method, guarantee="real")
            _widths_inside(real, ibp)
            _check_sound(g, p, box.lo_float(), box.hi_float(), real, 20, 1)
            ex = run_crown(g, p, box, ctx, method=method)
            _check_sound(g, p, box.lo_float(), box.hi_float(), ex, 20, 2)
            # the execution guarantee adds rounding errors only: on the issue's point box
            # (1.8e15 times IBP before) a few ulps of the result
            wi, we = float(ibp[-1].width().max()), float(ex[-1].width().max())
            ulp = 2.0 ** -52 if ctx.endswith("float64") else (
                2.0 ** -23 if ctx.endswith("binary32") else 2.0 ** -7)
            assert we <= wi + 16 * ulp * (1 + abs(float(ex[-1].hi_float().max()))), (r, method)


def test_issue_reproducer_tanh_point_box():
    """x = 0.3, one tanh neuron: crown-ibp gave [-0.0087, 0.2913] (IBP width 2.8e-16)."""
    g, p, x0 = _one_neuron("tanh")
    box = Box(x0, x0)
    ibp = run_ibp(g, p, box, "interval:float64")[-1]
    t = mpmath.tanh(mpmath.mpf(0.3))
    for method in ("crown", "crown-ibp"):
        for guarantee, bound in (("real", 1.0), ("execution", 8.0)):
            b = run_crown(g, p, box, method=method, guarantee=guarantee)[-1]
            assert float(b.width()[0]) <= bound * float(ibp.width()[0]), (method, guarantee)
            assert b.lo_float()[0] <= t <= b.hi_float()[0]
    # radius 1e-10: CROWN was 534 times IBP
    box = Box.from_center_radius(x0, np.array([1e-10]))
    ibp = run_ibp(g, p, box, "interval:float64")[-1]
    for method in ("crown", "crown-ibp"):
        b = run_crown(g, p, box, method=method)[-1]
        assert float(b.width()[0]) <= 1.0 + 1e-6 * float(ibp.width()[0]) + float(ibp.width()[0])


NETS = {
    "mlp-tanh": lambda: mlp_graph(random_mlp(11, [4, 8, 8, 2], ["tanh"]), 4) + (4,),
    "mlp-mixed": lambda: mlp_graph(random_mlp(12, [4, 8, 6, 2], ["sigmoid", "relu"]), 4) + (4,),
    "cnn-max": lambda: small_cnn(13, "relu", "max")[:2] + ((1, 6, 6),),
}


@pytest.mark.parametrize("net", [pytest.param(n, marks=pytest.mark.slow) if n == "cnn-max" else n
                                 for n in sorted(NETS)])
def test_networks_never_looser_than_ibp_at_any_node(net):
    g, p, shape = NETS[net]()
    rng = np.random.default_rng(len(net))
    x0 = rng.normal(0, 1, shape)
    for r in RADII + [1e-2]:
        box = Box.from_center_radius(x0, np.full(x0.shape, r))
        for ctx in ("interval:float64", "interval:bfloat16"):
            ibp = run_ibp(g, p, box, ctx)
            for method in ("crown", "crown-ibp"):
                real = run_crown(g, p, box, ctx, method=method, guarantee="real")
                _widths_inside(real, ibp)
                if ctx.endswith("float64") and r in (0.0, 1e-9):
                    _check_sound(g, p, box.lo_float(), box.hi_float(), real, 10, 3,
                                 max_vertices=16)


@pytest.mark.parametrize("ctx", ["interval:float64", "interval:binary32", "interval:bfloat16"])
def test_crown_stays_much_tighter_than_ibp_on_wider_boxes(ctx):
    layers = random_mlp(1, [8, 32, 32, 4], ["tanh"])
    g, p = mlp_graph(layers, 8)
    x0 = np.random.default_rng(1).normal(0, 1, 8)
    for r, bound in ((0.01, 0.1), (0.1, 0.2)):
        box = Box.from_center_radius(x0, np.full(8, r))
        ibp = run_ibp(g, p, box, ctx)[-1].width()
        real = run_crown(g, p, box, ctx, guarantee="real")[-1].width()
        assert np.mean(real / ibp) < bound, (r, np.mean(real / ibp))
        if not ctx.endswith("bfloat16"):     # there the rounding bound itself is wide
            # gamma_34 (|W| |x| + |b|) per layer: ~1e-14 of the width in float64, ~0.3%
            # in binary32 (u = 2^-24)
            ex = run_crown(g, p, box, ctx)[-1].width()
            tol = 1e-9 if ctx.endswith("float64") else 1e-2
            assert np.all(ex <= real * (1 + tol)), r


def test_guarantee_argument_is_checked():
    g, p, x0 = _one_neuron("tanh")
    with pytest.raises(IBPError, match="unknown guarantee 'exact'"):
        run_crown(g, p, Box(x0, x0), guarantee="exact")
