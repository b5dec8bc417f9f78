"""CROWN's execution guarantee (ibp/crown.py, ibp/crown_rounding.py).

The point context of the interval's base format (float64, binary32, bfloat16) runs the
graph on seeded samples and vertices of the box (each input converted by the context,
as a user's run would); every node's executed value must lie in its CROWN and CROWN-IBP
box.  Graphs: tanh / sigmoid / relu MLPs, the small CNN with max- and avg-pooling, at
point boxes and radii 1e-15..0.1.  The real guarantee alone is refuted by the same runs
(so these checks can fail), and the error bounds of crown_rounding are checked against
MPFR-exact rounding errors of dot products and functions.
"""
from __future__ import annotations

import itertools
import math
from fractions import Fraction

import gmpy2
import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.graph import denote_all
from scalarlab.ibp import Box
from scalarlab.ibp.crown import run_crown
from scalarlab.ibp.crown_rounding import PointErrors
from scalarlab.scalars import formats

from test_ibp_crown import mlp_graph, random_mlp, small_cnn

RADII = [0.0, 1e-15, 1e-9, 1e-6, 1e-2, 0.1]


def _samples(box, n, seed):
    rng = np.random.default_rng(seed)
    lo, hi = box.lo_float().reshape(-1), box.hi_float().reshape(-1)
    verts = np.where(rng.random((n, lo.size)) < 0.5, hi, lo)
    inner = lo + rng.random((n, lo.size)) * (hi - lo)
    return np.concatenate([verts, inner]).reshape((-1,) + box.shape)


def _violations(g, p, box, fmt, boxes, n=40, seed=0):
    """Executed node values (point context ``fmt``) outside their boxes."""
    ctx = scalars.get(fmt)
    vals = denote_all(g, p, ctx.convert(_samples(box, n, seed)), ctx)
    bad = 0
    for b, v in zip(boxes, vals):
        if b is None or v is None:
            continue
        v = np.asarray(ctx.to_float64(v))
        bad += int((~((b.lo_float() <= v) & (v <= b.hi_float()))).sum())
    return bad


NETS = {
    "mlp-tanh": lambda: mlp_graph(random_mlp(1, [8, 16, 16, 4], ["tanh"]), 8) + ((8,),),
    "mlp-relu": lambda: mlp_graph(random_mlp(0, [8, 16, 16, 4], ["relu"]), 8) + ((8,),),
    "mlp-sigmoid-tanh": lambda: mlp_graph(random_mlp(2, [8, 16, 12, 4],
                                                     ["sigmoid", "tanh"]), 8) + ((8,),),
    "cnn-max": lambda: small_cnn(3, "relu", "max")[:2] + ((1, 6, 6),),
    "cnn-avg-sigmoid": lambda: small_cnn(4, "sigmoid", "avg")[:2] + ((1, 6, 6),),
}


# the default selection: float64 on a tanh MLP and both CNNs (relu + max pool, sigmoid +
# average pool); -m slow: every net in every format
@pytest.mark.parametrize("net, fmt", [
    pytest.param(net, fmt, marks=() if fmt == "float64" and net in
                 ("mlp-tanh", "cnn-max", "cnn-avg-sigmoid") else pytest.mark.slow)
    for fmt in ("float64", "binary32", "bfloat16") for net in sorted(NETS)])
def test_point_runs_inside_crown_boxes(net, fmt):
    g, p, shape = NETS[net]()
    x0 = np.random.default_rng(len(net)).normal(0, 1, shape)
    checked = 0
    for r in RADII:
        box = Box.from_center_radius(x0, np.full(shape, r))
        for method in ("crown", "crown-ibp"):
            boxes = run_crown(g, p, box, "interval:" + fmt, method=method)
            assert all(b is not None for b in boxes)
            assert _violations(g, p, box, fmt, boxes, seed=int(r * 1e6)) == 0, (r, method)
            checked += 1
    assert checked == 2 * len(RADII)


def test_real_guarantee_alone_misses_point_runs():
    """The same check refutes real-only boxes: a float64 run of a tanh MLP at a point box
    and a binary32 run at radius 1e-9 fall outside them (the products' rounding)."""
    g, p, shape = NETS["mlp-tanh"]()
    x0 = np.random.default_rng(8).normal(0, 1, shape)
    for fmt, r in (("float64", 0.0), ("binary32", 1e-9)):
        box = Box.from_center_radius(x0, np.full(shape, r))
        real = run_crown(g, p, box, "interval:" + fmt, guarantee="real")
        ex = run_crown(g, p, box, "interval:" + fmt)
        assert _violations(g, p, box, fmt, real) > 0, fmt
        assert _violations(g, p, box, fmt, ex) == 0, fmt


# ------------------------------------------------------- the bounds against exact errors
def _mpfr_dot(w, x, b, fmt):
    """Sequential dot product with one rounding per product and per sum, then + b, in
    MPFR at the format's precision (the binary contexts' documented order)."""
    with gmpy2.context(formats.gmpy2_context(fmt)) as c:
        s = None
        for wi, xi in zip(w, x):
            t = c.mul(gmpy2.mpfr(float(wi)), gmpy2.mpfr(float(xi)))
            s = t if s is None else c.add(s, t)
        s = c.add(s, gmpy2.mpfr(float(b)))
        return Fraction(*s.as_integer_ratio())


@pytest.mark.parametrize("fmt_name", ["bfloat16", "binary16", "binary32"])
def test_affine_bound_holds_for_exact_rounding_errors(fmt_name):
    fmt = formats.get(fmt_name)
    ictx = scalars.get("interval:" + fmt_name)
    pe = PointErrors(ictx)
    pctx = scalars.get(fmt_name)
    rng = np.random.default_rng(5)
    worst = 0.0
    for trial in range(30):
        k = int(rng.integers(1, 40))
        w = np.asarray(pctx.to_float64(pctx.convert(rng.normal(0, 1, k))))
        scale = 10.0 ** rng.integers(-3, 3)
        x = np.asarray(pctx.to_float64(pctx.convert(rng.normal(0, 1, k) * scale)))
        b = float(np.asarray(pctx.to_float64(pctx.convert(rng.normal(0, 1, 1))))[0])
        F64 = scalars.get("interval:float64")
        M = F64.convert(w.reshape(1, k))
        B = F64.convert(np.array([b]))
        err = pe.affine("linear", M, B, np.abs(x))[0]
        run_err = pe.linear_sequential(M, B, F64.convert(x))[0]
        exact = sum(Fraction(float(a)) * Fraction(float(c)) for a, c in zip(w, x)) + Fraction(b)
        got = _mpfr_dot(w, x, b, fmt)
        e = abs(got - exact)
        assert e <= Fraction(float(err)) and e <= Fraction(float(run_err)), (trial, e, err)
        worst = max(worst, float(e) / run_err if run_err else 0.0)
    assert worst > 0.0       # the errors are real (not all exact)


@pytest.mark.parametrize("fmt_name", ["bfloat16", "binary16"])
def test_running_bound_on_cancellation(fmt_name):
    """[1, 2^-11, -1] . [1, 1, 1] runs to 0 (the middle term is lost): exact error 2^-11,
    and a box around x: the running bound holds at every vertex of the box."""
    fmt = formats.get(fmt_name)
    pe = PointErrors(scalars.get("interval:" + fmt_name))
    F64 = scalars.get("interval:float64")
    w = np.array([1.0, 2.0 ** -11, -1.0])
    M = F64.convert(w.reshape(1, 3))
    B = F64.convert(np.array([0.0]))
    assert pe.sequential
    for lo, hi in ((np.ones(3), np.ones(3)), (np.array([0.99, 1.0, 0.98]),
                                               np.array([1.0, 1.25, 1.0]))):
        bound = pe.linear_sequential(M, B, F64.make(lo, hi))[0]
        pctx = scalars.get(fmt_name)
        grid = [np.asarray(pctx.to_float64(pctx.convert(np.linspace(a, c, 5)))) for a, c in
                zip(lo, hi)]
        for x in itertools.product(*grid):
            exact = sum(Fraction(float(a)) * Fraction(float(c)) for a, c in zip(w, x))
            e = abs(_mpfr_dot(w, x, 0.0, fmt) - exact)
            assert e <= Fraction(float(bound)), (x, float(e), bound)
    assert bound < 0.05


@pytest.mark.parametrize("fmt_name", ["float64", "binary32", "bfloat16"])
@pytest.mark.parametrize("op", ["tanh", "sigmoid"])
def test_elementwise_bound_holds_for_point_context(fmt_name, op):
    ictx = scalars.get("interval:" + fmt_name)
    pe = PointErrors(ictx)
    pctx = scalars.get(fmt_name)
    z = np.asarray(pctx.to_float64(pctx.convert(np.linspace(-6, 6, 301))))
    y = np.asarray(pctx.to_float64(getattr(pctx, op)(pctx.convert(z))))
    with gmpy2.context(precision=200):
        exact = [gmpy2.tanh(gmpy2.mpfr(float(t))) if op == "tanh"
                 else 1 / (1 + gmpy2.exp(-gmpy2.mpfr(float(t)))) for t in z]
    err = pe.elementwise(op, np.abs(np.array([float(e) for e in exact])) * (1 + 1e-12))
    for k in range(z.size):
        e = abs(Fraction(float(y[k])) - Fraction(*exact[k].as_integer_ratio()))
        assert e <= Fraction(float(err[k])), k
    # a bound of the right size: a few ulps, not a blanket
    assert np.all(err <= 64 * math.ldexp(1.0, -(ictx.fmt or formats.get("binary64")).precision))


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["float64", "binary32", "bfloat16", "binary16"])
def test_stress_random_networks_both_guarantees(fmt):
    """Random MLPs (relu/tanh/sigmoid mixes, widths 2..24) and CNNs (max/avg pooling) x
    radii 0..1: point runs of ``fmt`` inside the execution boxes, exact samples (mpmath
    at 120 bits) and vertices inside the real boxes, and real boxes inside IBP's."""
    from test_ibp_crown import _check_sound
    from scalarlab.ibp import run_ibp

    rng = np.random.default_rng(hash(fmt) % 2 ** 32)
    acts = ["relu", "tanh", "sigmoid"]
    runs = 0
    for trial in range(12):
        if trial % 3 == 2:
            g, p, _ = small_cnn(100 + trial, acts[trial % 3], ("max", "avg")[trial % 2])
            shape = (1, 6, 6)
        else:
            widths = [int(w) for w in rng.integers(2, 25, int(rng.integers(3, 6)))]
            g, p = mlp_graph(random_mlp(100 + trial, widths,
                                        [acts[int(a)] for a in rng.integers(0, 3, 3)]),
                             widths[0])
            shape = (widths[0],)
        x0 = rng.normal(0, 1, shape)
        for r in (0.0, 1e-12, 1e-6, 1e-3, 0.1, 1.0):
            box = Box.from_center_radius(x0, np.full(shape, r))
            ibp = run_ibp(g, p, box, "interval:" + fmt)
            for method in ("crown", "crown-ibp"):
                ex = run_crown(g, p, box, "interval:" + fmt, method=method)
                assert _violations(g, p, box, fmt, ex, n=60, seed=trial) == 0, (trial, r)
                real = run_crown(g, p, box, "interval:" + fmt, method=method,
                                 guarantee="real")
                for k, (c, b) in enumerate(zip(real, ibp)):
                    assert np.all(c.lo_float() >= b.lo_float()), (trial, r, k)
                    assert np.all(c.hi_float() <= b.hi_float()), (trial, r, k)
                _check_sound(g, p, box.lo_float(), box.hi_float(), real, 20, trial,
                             max_vertices=32)
                runs += 1
    assert runs == 12 * 6 * 2


def _bn_net(seed):
    """input[5] -> linear[6] -> batchnorm_eval -> tanh -> linear[2] (mean/var far from
    the data's, so that (x - mean) cancels)."""
    from scalarlab.graph import Graph, Node, OpKind
    rng = np.random.default_rng(seed)
    g = Graph([Node(0, [], "input", [5]), Node(1, [0], "linear", [6]),
               Node(2, [1], OpKind("batchnorm_eval", axis=0), [6]),
               Node(3, [2], "tanh", [6]), Node(4, [3], "linear", [2])])
    p = {1: {"linear": {"W": rng.normal(0, 0.5, (6, 5)), "b": rng.normal(0, 0.1, 6)}},
         2: {"batchnorm_eval": {"mean": rng.normal(0, 3, 6), "var": rng.uniform(0.1, 4, 6),
                                "gamma": rng.normal(1, 0.5, 6), "beta": rng.normal(0, 2, 6),
                                "eps": np.array(1e-5)}},
         4: {"linear": {"W": rng.normal(0, 0.5, (2, 6)), "b": rng.normal(0, 0.1, 2)}}}
    return g, p


@pytest.mark.parametrize("fmt", [pytest.param("float64", marks=pytest.mark.slow), "binary32",
                                 pytest.param("bfloat16", marks=pytest.mark.slow), "binary16"])
def test_batchnorm_crossed_with_its_rounding_bound(fmt):
    from test_ibp_crown import _check_sound
    from scalarlab.ibp import run_ibp

    g, p = _bn_net(6)
    x0 = np.random.default_rng(7).normal(0, 1, 5)
    for r in (0.0, 1e-9, 1e-3, 0.1):
        box = Box.from_center_radius(x0, np.full(5, r))
        for method in ("crown", "crown-ibp"):
            ex = run_crown(g, p, box, "interval:" + fmt, method=method)
            assert _violations(g, p, box, fmt, ex, n=60, seed=3) == 0, (r, method)
            real = run_crown(g, p, box, "interval:" + fmt, method=method, guarantee="real")
            _check_sound(g, p, box.lo_float(), box.hi_float(), real, 20, 4)
    # CROWN crosses the batchnorm with the execution guarantee as with the real one
    # (stopping at its box gave IBP's width, [0.562, 0.268] against [0.560, 0.131])
    box = Box.from_center_radius(x0, np.full(5, 0.1))
    if fmt in ("float64", "binary32"):
        ex = run_crown(g, p, box, "interval:" + fmt)[-1].width()
        real = run_crown(g, p, box, "interval:" + fmt, guarantee="real")[-1].width()
        assert np.all(ex <= real * (1 + 1e-3))
        assert np.any(ex < 0.6 * run_ibp(g, p, box, "interval:" + fmt)[-1].width())


def _more_ops_nets():
    """Graphs of the other affine ops CROWN crosses: matmul by a constant, conv1d/conv3d,
    avg_pool1d, global_avg_pool, slice/pad/unsqueeze/tile/squeeze, and the addition of a
    constant computed by a function."""
    from scalarlab.graph import Graph, Node, OpKind
    rng = np.random.default_rng(0)
    lin = lambda o, i: {"linear": {"W": rng.normal(0, 1, (o, i)), "b": np.zeros(o)}}  # noqa: E731
    return {
        "matmul": (Graph([Node(0, [], "input", [2, 3]), Node(1, [], "const", [3, 4]),
                          Node(2, [0, 1], "matmul", [2, 4]), Node(3, [2], "tanh", [2, 4]),
                          Node(4, [3], "flatten", [8]), Node(5, [4], "linear", [2])]),
                   {1: {"const": {"value": rng.normal(0, 1, (3, 4))}}, 5: lin(2, 8)}, (2, 3)),
        "conv1d": (Graph([Node(0, [], "input", [1, 8]),
                          Node(1, [0], OpKind("conv1d", kernel_size=3), [2, 6]),
                          Node(2, [1], "relu", [2, 6]),
                          Node(3, [2], OpKind("avg_pool1d", kernel_size=2), [2, 3]),
                          Node(4, [3], "flatten", [6]), Node(5, [4], "linear", [2])]),
                   {1: {"conv1d": {"weight": rng.normal(0, 1, (2, 1, 3)),
                                   "bias": rng.normal(0, .1, 2)}}, 5: lin(2, 6)}, (1, 8)),
        "conv3d": (Graph([Node(0, [], "input", [1, 3, 3, 3]),
                          Node(1, [0], OpKind("conv3d", kernel_size=2), [2, 2, 2, 2]),
                          Node(2, [1], "sigmoid", [2, 2, 2, 2]),
                          Node(3, [2], "global_avg_pool", [2, 1, 1, 1]),
                          Node(4, [3], "flatten", [2]), Node(5, [4], "linear", [2])]),
                   {1: {"conv3d": {"weight": rng.normal(0, 1, (2, 1, 2, 2, 2)),
                                   "bias": rng.normal(0, .1, 2)}}, 5: lin(2, 2)}, (1, 3, 3, 3)),
        "shape": (Graph([Node(0, [], "input", [6]), Node(1, [0], "linear", [6]),
                         Node(2, [1], OpKind("slice", starts=[1], ends=[5]), [4]),
                         Node(3, [2], OpKind("pad", pads=[1, 2], value=0.1), [7]),
                         Node(4, [3], OpKind("unsqueeze", axes=[0]), [1, 7]),
                         Node(5, [4], OpKind("tile", repeats=[2, 1]), [2, 7]),
                         Node(6, [5], "tanh", [2, 7]), Node(7, [6], "squeeze", [2, 7]),
                         Node(8, [7], "flatten", [14]), Node(9, [8], "linear", [2])]),
                  {1: lin(6, 6), 9: lin(2, 14)}, (6,)),
        # a constant computed by a function (float64's libm exp: widened by its ulps)
        "const-exp": (Graph([Node(0, [], "input", [3]), Node(1, [], "const", [3]),
                             Node(2, [1], "exp", [3]), Node(3, [0, 2], "add", [3]),
                             Node(4, [3], "sigmoid", [3]), Node(5, [4], "linear", [2])]),
                      {1: {"const": {"value": rng.normal(0, 2, 3)}}, 5: lin(2, 3)}, (3,)),
    }


@pytest.mark.parametrize("net", ["matmul", "conv1d", "conv3d", "shape", "const-exp"])
def test_other_affine_ops_crossed_and_sound(net):
    from test_ibp_crown import _check_sound
    from scalarlab.ibp import run_ibp
    from scalarlab.ibp.crown import _depends, _kind

    g, p, shape = _more_ops_nets()[net]
    dep = _depends(g, 0)
    kinds = [_kind(g, n, dep, True) for n in g.nodes]
    assert all(k is not None for n, k in zip(g.nodes, kinds) if dep[n.id] and n.id), kinds
    x0 = np.random.default_rng(len(net)).normal(0, 1, shape)
    for r in (0.0, 1e-6, 0.1):
        box = Box.from_center_radius(x0, np.full(shape, r))
        for fmt in ("float64", "bfloat16"):
            ex = run_crown(g, p, box, "interval:" + fmt)
            assert _violations(g, p, box, fmt, ex, n=40) == 0, (r, fmt)
            real = run_crown(g, p, box, "interval:" + fmt, guarantee="real")
            _check_sound(g, p, box.lo_float(), box.hi_float(), real, 20, 1, max_vertices=16)
            ibp = run_ibp(g, p, box, "interval:" + fmt)
            for c, b in zip(real, ibp):
                assert np.all(c.lo_float() >= b.lo_float()) and np.all(c.hi_float() <= b.hi_float())
    if net == "const-exp":          # one activation layer: nothing for CROWN to gain
        return
    # crossing them pays: at radius 0.1 CROWN is tighter than IBP at the output
    box = Box.from_center_radius(x0, np.full(shape, 0.1))
    real = run_crown(g, p, box, "interval:float64", guarantee="real")[-1].width()
    assert np.mean(real / run_ibp(g, p, box, "interval:float64")[-1].width()) < 0.95


@pytest.mark.parametrize("fmt", ["binary16", "bfloat16"])
def test_matmul_of_two_variable_operands_widened(fmt):
    """[1, 1, 1] . [1, 2^-11, -1] in a 16-bit format: the sequential sum loses 2^-11
    (1 + 2^-11 rounds to 1), so the run gives 0 while the exact value is 2^-11.  The
    matmul's interval box (the fold's rule) holds 2^-11 only; CROWN stops at the matmul
    and widens that box by its rounding bound for the execution guarantee."""
    from scalarlab.graph import Graph, Node, OpKind

    g = Graph([Node(0, [], "input", [2, 3]),
               Node(1, [0], OpKind("slice", starts=[0], ends=[1], axes=[0]), [1, 3]),
               Node(2, [0], OpKind("slice", starts=[1], ends=[2], axes=[0]), [1, 3]),
               Node(3, [2], OpKind("permute", perm=[1, 0]), [3, 1]),
               Node(4, [1, 3], "matmul", [1, 1])])
    x = np.array([[1.0, 1.0, 1.0], [1.0, 2.0 ** -11, -1.0]])
    ctx = scalars.get(fmt)
    run = float(np.asarray(ctx.to_float64(denote_all(g, {}, ctx.convert(x), ctx)[4])).item())
    assert run == 0.0
    real = run_crown(g, {}, Box(x, x), "interval:" + fmt, guarantee="real")[4]
    assert not real.lo_float().item() <= run       # the real box misses the run ...
    assert real.lo_float().item() <= 2.0 ** -11 <= real.hi_float().item()
    for method in ("crown", "crown-ibp"):
        ex = run_crown(g, {}, Box(x, x), "interval:" + fmt, method=method)[4]
        assert ex.lo_float().item() <= run <= ex.hi_float().item()   # ... this one not
        assert ex.hi_float().item() - ex.lo_float().item() < 0.1
