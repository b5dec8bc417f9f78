"""Dual contexts: every derivative rule against mpmath.diff at high precision, exact
rational derivatives for rational functions, piecewise ops, reductions, shape ops and
nested duals (second derivatives)."""
from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.scalars import ContextError
from scalarlab.scalars.values import Dual

_MP = mpmath.MPContext()
_MP.prec = 300

# f(ctx, x) written against the vocabulary, and the same f over mpmath reals
UNARY = {
    "exp": (lambda m, x: m.exp(x)), "log": (lambda m, x: m.log(x)),
    "tanh": (lambda m, x: m.tanh(x)), "sigmoid": (lambda m, x: 1 / (1 + m.exp(-x))),
    "softplus": (lambda m, x: m.log1p(m.exp(x))), "sin": (lambda m, x: m.sin(x)),
    "cos": (lambda m, x: m.cos(x)), "erf": (lambda m, x: m.erf(x)),
    "sqrt": (lambda m, x: m.sqrt(x)), "square": (lambda m, x: x * x),
    "abs": (lambda m, x: abs(x)), "neg": (lambda m, x: -x),
}
POINTS = ["-2.5", "-0.75", "0.3", "1.25", "3"]


def _diff(name, x: str):
    return _MP.diff(lambda t: UNARY[name](_MP, t), _MP.mpf(x))


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_rules_mpmath200_vs_mpmath_diff(name):
    ctx = scalars.get("dual:mpmath:200")
    pts = [p for p in POINTS if name not in ("log", "sqrt") or float(p) > 0]
    r = getattr(ctx, name)(ctx.make(pts, ["1"] * len(pts)))
    for i, p in enumerate(pts):
        want = _diff(name, p)
        got = _MP.mpf(r.tangent[i])
        assert abs(got - want) <= abs(want) * _MP.mpf(2) ** -190 + _MP.mpf(2) ** -190, (name, p)
        val = UNARY[name](_MP, _MP.mpf(p))
        assert abs(_MP.mpf(r.primal[i]) - val) <= abs(val) * _MP.mpf(2) ** -190


@pytest.mark.parametrize("base, tol", [("float64", 1e-14), ("binary32", 2e-6)])
@pytest.mark.parametrize("name", list(UNARY))
def test_unary_rules_float_bases(base, tol, name):
    ctx = scalars.get(f"dual:{base}")
    pts = [p for p in POINTS if name not in ("log", "sqrt") or float(p) > 0]
    x = [float(p) for p in pts]
    r = getattr(ctx, name)(ctx.make(x, [0.5] * len(x)))
    for i, p in enumerate(pts):
        want = 0.5 * float(_MP.diff(lambda t: UNARY[name](_MP, t), _MP.mpf(x[i])))
        # absolute + relative: 1 - tanh^2 style rules cancel in a rounding base
        assert abs(r.tangent[i] - want) <= tol * (abs(want) + 1), (name, p)


def test_binary_rules_vs_mpmath_diff():
    ctx = scalars.get("dual:mpmath:200")
    a, b = "1.75", "-0.625"
    rules = {
        "add": lambda m, x, y: x + y, "sub": lambda m, x, y: x - y,
        "mul": lambda m, x, y: x * y, "div": lambda m, x, y: x / y,
        "maximum": lambda m, x, y: m.mpf(max(x, y)), "minimum": lambda m, x, y: m.mpf(min(x, y)),
    }
    for name, f in rules.items():
        # directional derivative along (da, db) = (0.25, -3)
        r = getattr(ctx, name)(ctx.make(a, "0.25"), ctx.make(b, "-3"))
        want = _MP.diff(lambda t: f(_MP, _MP.mpf(a) + t / 4, _MP.mpf(b) - 3 * t), 0)
        assert abs(_MP.mpf(r.tangent[()]) - want) < _MP.mpf(2) ** -180, name
    r = ctx.fma(ctx.make(a, "1"), ctx.make(b, "2"), ctx.make("0.5", "-1"))
    want = _MP.mpf(b) * 1 + _MP.mpf(a) * 2 - 1
    assert abs(_MP.mpf(r.tangent[()]) - want) < _MP.mpf(2) ** -190


def test_rational_derivatives_are_exact():
    """d/dx of (x^2 + 3x) / (x - 5) at rationals, exactly: ((2x+3)(x-5) - (x^2+3x))/(x-5)^2."""
    ctx = scalars.get("dual:rational")
    xs = ["1/3", "-7/2", "11", "0"]
    x = ctx.make(xs, ["1"] * 4)
    num = ctx.add(ctx.square(x), ctx.mul(ctx.convert("3"), x))
    f = ctx.div(num, ctx.sub(x, ctx.convert("5")))
    for i, s in enumerate(xs):
        q = Fraction(s)
        want = ((2 * q + 3) * (q - 5) - (q * q + 3 * q)) / (q - 5) ** 2
        assert Fraction(int(f.tangent[i].numerator), int(f.tangent[i].denominator)) == want
        assert Fraction(int(f.primal[i].numerator), int(f.primal[i].denominator)) == \
            (q * q + 3 * q) / (q - 5)
    # matmul: J of W x is W, exactly
    W = ctx.convert([["1/2", "2"], ["-3", "5/7"]])
    y = ctx.matmul(W, ctx.make(["1", "2"], ["0", "1"]))
    assert list(y.tangent) == [2, Fraction(5, 7)]
    # exactly where the base raises: tanh is not rational
    with pytest.raises(ContextError, match="tanh"):
        ctx.tanh(x)
    e = ctx.exp(ctx.make("0", "3"))               # exp(0) = 1 is rational: works
    assert e.primal[()] == 1 and e.tangent[()] == 3


@pytest.mark.parametrize("base", ["float64", "rational", "mpmath:200"])
def test_piecewise_reductions_and_shapes(base):
    ctx = scalars.get(f"dual:{base}")
    x = ctx.make([["1", "-2", "3"], ["0", "5", "-1"]], [["1", "2", "3"], ["4", "5", "6"]])
    h = ctx.heaviside(x)
    assert np.all(np.asarray(ctx.base.to_float64(h.tangent)) == 0)
    assert ctx.base.to_float64(h.primal).tolist() == [[1, 0, 1], [0, 1, 0]]
    s = ctx.sign(x)
    assert ctx.base.to_float64(s.primal).tolist() == [[1, -1, 1], [0, 1, -1]]
    a = ctx.abs(x)
    assert ctx.base.to_float64(a.tangent).tolist() == [[1, -2, 3], [0, 5, -6]]
    m = ctx.amax(x, axis=1)
    assert ctx.base.to_float64(m.primal).tolist() == [3, 5]
    assert ctx.base.to_float64(m.tangent).tolist() == [3, 5]
    m = ctx.amax(x)
    assert float(ctx.base.to_float64(m.tangent)) == 5
    m = ctx.amax(x, axis=0, keepdims=True)
    assert ctx.shape(m) == (1, 3) and ctx.base.to_float64(m.tangent).tolist() == [[1, 5, 3]]
    assert ctx.argmax(x, 1).tolist() == [2, 1]
    assert ctx.less(x, ctx.zeros((2, 3))).tolist() == [[False, True, False],
                                                       [False, False, True]]
    t = ctx.sum(x, axis=0)
    assert ctx.base.to_float64(t.tangent).tolist() == [5, 7, 9]
    w = ctx.where(np.array([[True, False, True], [False, True, False]]), x, ctx.zeros((2, 3)))
    assert ctx.base.to_float64(w.tangent).tolist() == [[1, 0, 3], [0, 5, 0]]
    mx = ctx.maximum(x, ctx.zeros((2, 3)))         # the tie x = 0 splits 1/2-1/2
    assert ctx.base.to_float64(mx.tangent).tolist() == [[1, 0, 3], [2, 5, 0]]
    assert ctx.shape(ctx.transpose(x)) == (3, 2)
    assert ctx.shape(ctx.reshape(x, (6,))) == (6,)
    assert ctx.shape(ctx.concat([x, x], 1)) == (2, 6)
    assert ctx.shape(ctx.stack([x, x], 0)) == (2, 2, 3)
    assert ctx.base.to_float64(ctx.take(x, [1], 1).tangent).tolist() == [[2], [5]]
    assert ctx.shape(ctx.broadcast_to(ctx.convert("1"), (2, 2))) == (2, 2)
    with pytest.raises(ContextError, match="axis 3 out of range"):
        ctx.amax(x, axis=3)
    with pytest.raises(ContextError):
        ctx.make(["1", "2"], ["1", "2", "3"])


def test_matmul_jvp_float64():
    ctx = scalars.get("dual:float64")
    rng = np.random.default_rng(0)
    W, x, v = rng.standard_normal((3, 4)), rng.standard_normal(4), rng.standard_normal(4)
    y = ctx.tanh(ctx.matmul(ctx.convert(W), ctx.make(x, v)))
    J = (1 - np.tanh(W @ x) ** 2)[:, None] * W
    np.testing.assert_allclose(y.tangent, J @ v, rtol=1e-13)
    dW = rng.standard_normal((3, 4))
    z = ctx.matmul(ctx.make(W, dW), ctx.convert(x))
    np.testing.assert_allclose(z.tangent, dW @ x, rtol=1e-13)


def test_nested_duals_give_second_derivatives():
    """dual:dual:float64: f(x + e1 + e2) carries f'' in the e1 e2 coefficient."""
    outer = scalars.get("dual:dual:float64")
    inner = outer.base
    for name in ("exp", "tanh", "sigmoid", "softplus", "sin", "log", "erf"):
        x0 = 0.7
        x = Dual(inner.make(x0, 1.0), inner.make(1.0, 0.0))
        r = getattr(outer, name)(x)
        want2 = float(_MP.diff(lambda t: UNARY[name](_MP, t), _MP.mpf(x0), 2))
        want1 = float(_MP.diff(lambda t: UNARY[name](_MP, t), _MP.mpf(x0)))
        assert abs(r.tangent.tangent - want2) < 1e-12 * (1 + abs(want2)), name
        assert abs(r.tangent.primal - want1) < 1e-13 * (1 + abs(want1)), name
        assert abs(r.primal.tangent - want1) < 1e-13 * (1 + abs(want1)), name
    assert outer.name == "dual:dual:float64" and outer.is_dual


def test_registry_format_and_errors():
    for b in ("float64", "binary32", "rational", "mpmath:200"):
        assert f"dual:{b}" in scalars.names()
        ctx = scalars.get(f"dual:{b}")
        assert ctx.is_dual and ctx.properties()["base"] == b
    ctx = scalars.get("dual:float64")
    assert ctx.format(ctx.make([0.5, 2.0], [1.0, 0.0])) == "[0.500000, 2.000000] + eps [1.000000, 0.000000]"
    c = ctx.convert([1.0, 2.0])
    assert (c.tangent == 0).all()
    f = ctx.to_float64(ctx.make(1.0, 2.0))
    assert isinstance(f, Dual) and f.primal == 1.0 and f.tangent == 2.0
    iv = scalars.get("interval:float64").convert(1.0)
    with pytest.raises(ContextError, match="interval"):
        ctx.add(iv, c)
    assert scalars.get("dual:binary32").fmt.name == "binary32"
    b32 = scalars.get("dual:binary32")
    r = b32.mul(b32.make(0.1, 1.0), b32.make(3.0, 0.0))
    assert r.primal == np.float32(np.float32(0.1) * np.float32(3.0))
