"""The activation records beyond the shared op cases: binary32 bit-equality with torch's
float32 kernels, exact rational values across the kinks, tight interval boxes for the
monotone ones, and clear errors for bad attributes."""
from __future__ import annotations

import functools
from fractions import Fraction

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from scalarlab import graph, scalars
from scalarlab.graph import Graph, Node, OpKind, Payload
from scalarlab.graph.optable import OPS, full_attrs
from scalarlab.scalars.base import to_fraction
from scalarlab.scalars.values import Interval

# inputs across every kink (-3, 0, 3, 6), binary32 numbers
X = np.concatenate([np.linspace(-8, 8, 161), [-3.0, 3.0, 6.0, 0.0, -0.0, 1e-30, -1e-30]])
X = X.astype(np.float32).astype(np.float64)


def run(op, x, ctx, **attrs):
    g = Graph([Node(0, [], "input", list(np.shape(x))),
               Node(1, [0], OpKind(op, **attrs), list(np.shape(x)))])
    return graph.denote(g, Payload(), x, ctx)


TORCH32 = [
    ("clip", {"min": 0, "max": 6}, F.relu6),
    ("clip", {"min": -1.5, "max": 2.25}, lambda t: torch.clamp(t, -1.5, 2.25)),
    ("leaky_relu", {}, lambda t: F.leaky_relu(t, 0.01)),
    ("leaky_relu", {"alpha": 0.3}, lambda t: F.leaky_relu(t, 0.3)),
    ("hardswish", {}, F.hardswish),
]


@pytest.mark.parametrize("op,attrs,tf", TORCH32, ids=[f"{o}-{i}" for i, (o, _, _) in enumerate(TORCH32)])
def test_piecewise_linear_binary32_equals_torch_float32(op, attrs, tf):
    """Each step of these rules is one correctly rounded binary32 operation in torch's
    order, so the values equal torch's float32 kernels bit for bit (zeros compared by value)."""
    got = np.asarray(run(op, X, "binary32", **attrs))
    want = tf(torch.tensor(X, dtype=torch.float32)).numpy().astype(np.float64)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("op,attrs,exact", [
    ("clip", {"min": 0, "max": 6}, lambda q: min(max(q, Fraction(0)), Fraction(6))),
    ("leaky_relu", {"alpha": "1/3"}, lambda q: q if q > 0 else q / 3),
    ("hardsigmoid", {}, lambda q: max(Fraction(0), min(Fraction(1), q / 5 + Fraction(1, 2)))),
    ("hardswish", {}, lambda q: q * min(max(q + 3, Fraction(0)), Fraction(6)) / 6),
])
def test_rational_values_are_exact_across_the_kinks(op, attrs, exact):
    y = np.asarray(run(op, X, "rational", **attrs), dtype=object)
    for q, v in zip(X, y):
        assert to_fraction(v) == exact(Fraction(float(q)))


MONOTONE = [("clip", {"min": -1, "max": 2}), ("leaky_relu", {"alpha": 0.1}),
            ("hardsigmoid", {}), ("elu", {"alpha": 1.0}), ("selu", {})]


@pytest.mark.parametrize("ctxname", ["interval:binary32", "interval:float64"])
@pytest.mark.parametrize("op,attrs", MONOTONE, ids=[m[0] for m in MONOTONE])
def test_monotone_activations_give_the_tight_box(op, attrs, ctxname):
    """Increasing maps: the box over [lo, hi] is [f(lo), f(hi)] up to the outward
    rounding of each step: it encloses the mpmath values at the ends and is at most a few
    units in the last place of max(|f|, 1) wider (the constants alpha, beta are enclosed
    too, and near a zero of alpha x + beta their width is what remains)."""
    ctx = scalars.get(ctxname)
    xs = np.unique(X)
    lo, hi = xs[:-1], xs[1:]
    box = run(op, Interval(ctx.base.convert(lo), ctx.base.convert(hi)), ctx, **attrs)
    mp = scalars.get("mpmath:200")
    f_lo = np.asarray(mp.to_float64(run(op, lo, mp, **attrs)))
    f_hi = np.asarray(mp.to_float64(run(op, hi, mp, **attrs)))
    blo, bhi = np.asarray(box.lo, dtype=np.float64), np.asarray(box.hi, dtype=np.float64)
    assert (blo <= f_lo).all() and (f_hi <= bhi).all()
    ulp = np.spacing(np.maximum(np.maximum(np.abs(f_lo), np.abs(f_hi)), 1.0).astype(
        np.float32 if ctxname.endswith("32") else np.float64)).astype(np.float64)
    assert (f_lo - blo <= 8 * ulp).all() and (bhi - f_hi <= 8 * ulp).all()


@pytest.mark.parametrize("attrs,msg", [
    ({"alpha": "abc"}, r"leaky_relu: attribute alpha must be a real number or an exact decimal"),
    ({"alpha": True}, r"leaky_relu: attribute alpha must be a real number, got True"),
    ({"alpha": float("nan")}, r"leaky_relu: attribute alpha must be finite"),
])
def test_bad_attributes_are_named(attrs, msg):
    with pytest.raises(graph.GraphError, match=msg):
        graph.check_shapes(Graph([Node(0, [], "input", [2]),
                                  Node(1, [0], OpKind("leaky_relu", **attrs), [2])]))


def test_clip_bounds_in_the_wrong_order_are_refused():
    with pytest.raises(graph.GraphError, match=r"clip: min=2 exceeds max=1"):
        graph.check_shapes(Graph([Node(0, [], "input", [2]),
                                  Node(1, [0], OpKind("clip", min=2, max=1), [2])]))


def test_gelu_tanh_differs_from_exact_gelu_as_torch_does():
    """gelu_tanh is torch's approximate='tanh', not the erf GELU (they differ ~1e-4)."""
    x = np.linspace(-3, 3, 13)
    a = np.asarray(run("gelu_tanh", x, "float64"))
    b = np.asarray(run("gelu", x, "float64"))
    np.testing.assert_allclose(a, F.gelu(torch.tensor(x), approximate="tanh").numpy(), rtol=1e-14, atol=1e-15)
    assert np.max(np.abs(a - b)) > 1e-5


UNIMODAL_OPS = ["silu", "mish", "gelu_tanh", "hardswish"]


@functools.cache
def _exact_samples(op, lo_bytes, hi_bytes):
    """33 points across each box [lo, hi] and the op's value there in mpmath at 200 bits,
    rounded to nearest float64; computed once per op and shared by the three contexts
    (the oracle is the expensive part of the soundness test)."""
    lo, hi = np.frombuffer(lo_bytes), np.frombuffer(hi_bytes)
    mp = scalars.get("mpmath:200")
    t = np.linspace(0, 1, 33)
    pts = lo[:, None] + (hi - lo)[:, None] * t[None, :]
    vals = np.asarray(mp.to_float64(OPS[op].forward(mp, [mp.convert(pts)], {}, 0)),
                      dtype=np.float64)
    return pts, vals


@pytest.mark.parametrize("ctxname", ["interval:binary32", "interval:float64", "interval:mpmath:200"])
@pytest.mark.parametrize("op", UNIMODAL_OPS)
def test_unimodal_interval_rule_is_sound_tight_and_never_looser(op, ctxname):
    """Boxes left of, right of and across the minimum: every sampled point's exact value
    (mpmath, 200 bits) lies in the box; the box is inside the generic fold's box and
    strictly tighter somewhere; across the minimum its lower end is within 1e-12 of the
    true minimum."""
    ctx = scalars.get(ctxname)
    rec = OPS[op]
    rng = np.random.default_rng(5)
    lo = np.concatenate([rng.uniform(-6, 3, 40), [-4.0, -1.0, -2.0, -0.9, 0.5]])
    hi = lo + np.concatenate([rng.uniform(0, 3, 40), [1.0, 0.5, 1.0, 0.4, 2.0]])
    lo, hi = (v.astype(np.float32).astype(np.float64) for v in (lo, hi))
    box = Interval(ctx.base.convert(lo), ctx.base.convert(hi))
    y = rec.interval(ctx, [box], {}, 0)
    gen = rec.forward(ctx, [box], {}, 0)
    ylo, yhi = (np.asarray(ctx.base.to_float64(v), dtype=np.float64) for v in (y.lo, y.hi))
    glo, ghi = (np.asarray(ctx.base.to_float64(v), dtype=np.float64) for v in (gen.lo, gen.hi))
    assert (ylo >= glo).all() and (yhi <= ghi).all()
    assert ((ylo > glo) | (yhi < ghi)).any()
    _, vals = _exact_samples(op, lo.tobytes(), hi.tobytes())
    # to_float64 rounds to nearest: allow one float64 ulp for the comparison
    slack = np.spacing(np.abs(vals))
    assert (ylo[:, None] <= vals + slack).all() and (vals - slack <= yhi[:, None]).all()
    c_lo, c_hi, m_low = __import__("scalarlab.graph.ops_activation", fromlist=["UNIMODAL"]).UNIMODAL[op]
    across = (lo < c_lo) & (hi > c_hi)
    assert across.any()
    assert (np.abs(ylo[across] - float(m_low)) < 1e-6 if ctxname.endswith("32") else
            np.abs(ylo[across] - float(m_low)) < 1e-12).all()


@pytest.mark.parametrize("op", ["silu", "mish", "gelu_tanh"])
def test_unimodal_constants_bracket_the_minimum(op):
    """c_lo < c < c_hi with f'(c) = 0 and f(c) >= the declared lower bound (mpmath at 60
    digits, independently of the module's computation)."""
    import mpmath
    from scalarlab.graph.ops_activation import UNIMODAL
    c_lo, c_hi, m_low = UNIMODAL[op]
    f = {"silu": lambda x: x / (1 + mpmath.exp(-x)),
         "mish": lambda x: x * mpmath.tanh(mpmath.log(1 + mpmath.exp(x))),
         "gelu_tanh": lambda x: x / 2 * (1 + mpmath.tanh(mpmath.sqrt(2 / mpmath.pi)
                                                         * (x + mpmath.mpf("0.044715") * x ** 3)))}[op]
    with mpmath.workdps(60):
        assert mpmath.diff(f, c_lo) < 0 < mpmath.diff(f, c_hi)
        c = mpmath.findroot(lambda x: mpmath.diff(f, x), (c_lo + c_hi) / 2)
        assert f(c) >= mpmath.mpf(m_low) and f(c) - mpmath.mpf(m_low) < mpmath.mpf(10) ** -25


@pytest.mark.parametrize("op,bound", [("elu", 0.5), ("selu", 2.0), ("silu", 1.5), ("mish", 2.0),
                                      ("hardswish", 2.0), ("gelu_tanh", 100.0)])
def test_binary32_error_in_ulps_of_the_exact_value(op, bound):
    """binary32 values against the 200-bit value of the same formula, in binary32 ulps of
    the result, over [-8, 8] and near 0.  elu uses expm1 (exp(x) - 1 was ~1000 ulps off
    near 0); gelu_tanh uses x sigmoid(2u) (torch's 0.5 x (1 + tanh u) is ~1.7e7 ulps off
    for x << 0, where 1 + tanh u cancels); its remaining error is the conditioning of
    sigmoid(2u) for |u| large (about |2u| times the rounding error of u)."""
    rng = np.random.default_rng(9)
    x = np.concatenate([rng.uniform(-8, 8, 1500), rng.uniform(-1e-3, 1e-3, 300)])
    x = x.astype(np.float32).astype(np.float64)
    b32, mp = scalars.get("binary32"), scalars.get("mpmath:200")
    y = np.asarray(run(op, x, b32))
    exact = np.asarray(mp.to_float64(run(op, x, mp)), dtype=np.float64)
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    err = np.abs(y - exact) / ulp
    assert err.max() <= bound, f"{op}: {err.max():.2f} ulps at x = {x[err.argmax()]!r}"
