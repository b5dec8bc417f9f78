"""The ball contexts ``ball:K`` against exact rationals and Arb.

Every result must hold the exact value of the operation on the operands' exact values
(``|exact - sum(mid)| <= rad``, all in Fractions), and be tight: a radius near
``2^-53K`` of the magnitudes involved, never a blanket widening.  Cases: cancellation,
relu kinks (straddling, exactly zero), underflowing products, huge exponents, division,
exact sums, the error-free matmul with the weight on either side, both operands balls,
functions in Arb and the wide-ball interval path; refusals (NaN, overflow, a divisor ball
holding 0, an undecided comparison) are ContextErrors naming the op.
"""
from fractions import Fraction as F

import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.scalars.errors import ContextError
from scalarlab.scalars.values import Ball


def _exact(b: Ball):
    """Per entry (Fraction midpoint, Fraction radius)."""
    mid = b.mid.reshape(b.mid.shape[0], -1)
    rad = np.zeros(mid.shape[1]) if b.rad is None else np.asarray(b.rad).reshape(-1)
    return [(sum(F(float(mid[i, j])) for i in range(mid.shape[0])), F(float(rad[j])))
            for j in range(mid.shape[1])]


def _holds(b: Ball, exact, rel=None, scale=None):
    """Every entry holds ``exact`` (a flat list of Fractions); with ``rel``, the radius is
    at most ``rel * scale`` (scale: per entry magnitudes, default |exact|)."""
    got = _exact(b)
    assert len(got) == len(exact)
    for j, ((m, r), e) in enumerate(zip(got, exact)):
        assert abs(m - e) <= r, (j, float(m - e), float(r))
        if rel is not None:
            s = abs(e) if scale is None else F(float(scale[j]))
            assert r <= F(rel) * s + F(2) ** -1070, (j, float(r), float(s))


def _fr(a):
    return [F(float(t)) for t in np.asarray(a, dtype=np.float64).reshape(-1)]


@pytest.fixture(scope="module")
def ctx():
    return scalars.get("ball:3")


RNG = np.random.default_rng(31)
# values over many binades, with exact cancellations and tiny/huge magnitudes
A = np.concatenate([RNG.standard_normal(6), [1.0, 1e-300, 3e300, -2.5, 1e-200, 0.0]])
B = np.concatenate([RNG.standard_normal(6), [-1.0 + 2.0 ** -52, -1e-300, 1e5, 2.5, 1e-200,
                                             7.0]])


def test_registered_and_listed(ctx):
    assert "ball:3" in scalars.names() and "ball:6" in scalars.names()
    assert ctx.k == 3 and scalars.get("ball:4").k == 4
    with pytest.raises(ContextError, match="2..6"):
        scalars.get("ball:9")


def test_convert_exact_and_decimal(ctx):
    b = ctx.convert(np.array([0.1, -3.0]))
    assert b.rad is None and np.array_equal(b.mid[0], [0.1, -3.0])
    t = ctx.convert("0.1")                       # not a float64: 3 components + remainder
    (m, r), = _exact(t)
    assert abs(m - F(1, 10)) <= r and r < F(2) ** -160
    with pytest.raises(ContextError, match="convert: non-finite"):
        ctx.convert(np.array([1.0, np.nan]))
    with pytest.raises(ContextError, match="float64 range"):
        ctx.convert(F(10) ** 400)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_arithmetic_on_points_and_balls(ctx, op):
    """Point operands, then balls with radii (the result's radius carries them)."""
    f = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y,
         "mul": lambda x, y: x * y, "div": lambda x, y: x / y}[op]
    a, b = ctx.convert(A), ctx.convert(B)
    r = getattr(ctx, op)(a, b)
    ex = [f(x, y) for x, y in zip(_fr(A), _fr(B))]
    # a quotient of operands near 2^-1000 loses to underflow in its residual's products
    # (2^-1074 each, over |b|): the tightness check is relative to that too
    scale = [abs(e) + F(2) ** -900 / F(abs(float(y)) or 1.0) for e, y in zip(ex, B)]
    _holds(r, ex, rel=F(2) ** -150, scale=[float(t) for t in scale])
    # balls: a third of a point, then the operation (radius > 0 on both sides)
    third = ctx.div(a, ctx.convert(3.0))
    r2 = getattr(ctx, op)(third, ctx.div(b, ctx.convert(7.0)))
    ex2 = [f(x / 3, y / 7) for x, y in zip(_fr(A), _fr(B))]
    mag = {"add": lambda x, y: abs(x) + abs(y), "sub": lambda x, y: abs(x) + abs(y),
           "mul": lambda x, y: abs(x * y), "div": lambda x, y: abs(x / y) if y else 0}[op]
    scale2 = [mag(x / 3, y / 7) + (F(2) ** -900 / abs(y) if y else 0)
              for x, y in zip(_fr(A), _fr(B))]
    _holds(r2, ex2, rel=F(2) ** -145, scale=[float(t) for t in scale2])


def test_cancellation_is_exact(ctx):
    """(1e16 + 1) - 1e16 in K components: exactly 1, radius 0; 0.1 - 0.1 is 0."""
    big = ctx.add(ctx.convert(1e16), ctx.convert(1.0))
    one = ctx.sub(big, ctx.convert(1e16))
    _holds(one, [F(1)], rel=0)
    t = ctx.convert("0.1")
    z = ctx.sub(t, t)
    (m, r), = _exact(z)
    assert m == 0 and r <= 2 * _exact(t)[0][1] * (1 + F(2) ** -40)


def test_underflow_and_overflow(ctx):
    a = ctx.convert(np.array([1e-200, 3e-170]))
    p = ctx.mul(a, a)                       # 1e-400 underflows: the radius must hold it
    _holds(p, [F(1e-200) ** 2, F(3e-170) ** 2])
    assert np.all(p.rad <= 2.0 ** -1070)
    with pytest.raises(ContextError, match="mul: the midpoint overflowed"):
        ctx.mul(ctx.convert(1e300), ctx.convert(1e10))
    with pytest.raises(ContextError, match="div: the divisor ball .* contains 0"):
        ctx.div(ctx.convert(1.0), ctx.sub(ctx.div(ctx.convert(1.0), ctx.convert(3.0)),
                                          ctx.convert("0.333333333333333333333333333333"
                                                      "33333333333333333333333333")))


def test_sum_exact(ctx):
    x = np.array([[1e16, 1.0, -1e16, 2.0 ** -60], [0.1, 0.2, 0.3, -0.6]])
    s = ctx.sum(ctx.convert(x), axis=1)
    _holds(s, [sum(_fr(row)) for row in x], rel=0)
    s2 = ctx.sum(ctx.div(ctx.convert(x), ctx.convert(3.0)), axis=(0, 1), keepdims=True)
    assert ctx.shape(s2) == (1, 1)
    _holds(s2, [sum(_fr(x)) / 3])


@pytest.mark.parametrize("side", ["weight right", "weight left", "both balls"])
def test_matmul(ctx, side):
    rng = np.random.default_rng(4)
    X = rng.standard_normal((2, 3, 5))
    W = rng.standard_normal((5, 4)) * np.array([1.0, 1e-8, 1e8, 1.0])
    Xb = ctx.div(ctx.convert(X), ctx.convert(3.0))      # balls with radii
    Xf = [[[F(float(t)) / 3 for t in row] for row in m] for m in X]
    Wf = [[F(float(t)) for t in row] for row in W]
    if side == "weight right":
        r = ctx.matmul(Xb, ctx.convert(W))
        ex = [sum(Xf[b][i][k] * Wf[k][j] for k in range(5))
              for b in range(2) for i in range(3) for j in range(4)]
    elif side == "weight left":
        Wt = W.T.copy()
        r = ctx.matmul(ctx.convert(Wt), ctx.transpose(Xb, (0, 2, 1)))
        ex = [sum(Wf[k][j] * Xf[b][i][k] for k in range(5))
              for b in range(2) for j in range(4) for i in range(3)]
    else:
        Wb = ctx.div(ctx.convert(W), ctx.convert(7.0))
        r = ctx.matmul(Xb, Wb)
        ex = [sum(Xf[b][i][k] * Wf[k][j] / 7 for k in range(5))
              for b in range(2) for i in range(3) for j in range(4)]
    _holds(r, ex)
    scale = np.abs(X).max() * np.abs(W).max() * 5
    assert np.all(r.rad <= 2.0 ** -140 * scale)
    if side == "weight right":       # the weight's slices split again after clear_cache
        ctx.clear_cache()
        again = ctx.matmul(Xb, ctx.convert(W))
        assert np.array_equal(again.mid, r.mid) and np.array_equal(again.rad, r.rad)


S61 = "0." + "3" * 61          # 1/3 - S61 = 10^-61 / 3: inside a 159-bit ball of 1/3


def test_relu_kinks_and_lattice(ctx):
    """max(x, 0): decided balls keep their components, an exact 0 stays exact, a ball
    straddling 0 becomes the hull [0, hi] (it holds the exact value and 0)."""
    x = ctx.sub(ctx.div(ctx.convert(np.array([1.0, -1.0, 1.0, 0.0])), ctx.convert(3.0)),
                ctx.convert(np.array([0.0, 0.0, S61, 0.0], dtype=object)))
    r = ctx.maximum(x, ctx.zeros(()))
    _holds(r, [F(1, 3), F(0), F(1, 3) - F(S61), F(0)])
    (m1, r1), (m0, r0) = _exact(r)[1], _exact(r)[3]
    assert m1 == 0 and r1 == 0 and m0 == 0 and r0 == 0
    lo, hi = ctx.ends(x)
    assert lo[2] < 0 < hi[2]                 # the straddling ball -> hull [0, hi]
    assert float(r.mid[0][2]) - float(r.rad[2]) <= 0 <= float(r.mid[0][2]) + float(r.rad[2])
    mn = ctx.minimum(x, ctx.zeros(()))
    _holds(mn, [F(0), F(-1, 3), F(0), F(0)])
    ab = ctx.abs(x)
    _holds(ab, [F(1, 3), F(1, 3), F(1, 3) - F(S61), F(0)])


def test_lattice_every_entry_decided_keeps_the_operands(ctx):
    """Where the ends decide every entry (no hull), max/min return the chosen operand's
    components and radius unchanged."""
    x = ctx.div(ctx.convert(np.array([1.0, -1.0, 2.0])), ctx.convert(3.0))
    z = ctx.zeros(())
    r, m = ctx.maximum(x, z), ctx.minimum(x, z)
    c = x.mid.shape[0]
    for out, keep in ((r, [True, False, True]), (m, [False, True, False])):
        for j, k in enumerate(keep):
            want_mid = x.mid[:, j] if k else np.zeros(c)
            assert np.array_equal(out.mid[:, j], want_mid)
            assert out.rad[j] == (x.rad[j] if k else 0.0)


def test_amax_argmax_less(ctx):
    x = ctx.div(ctx.convert(np.array([[1.0, 3.0, 2.0], [5.0, 5.0, 1.0]])), ctx.convert(3.0))
    m = ctx.amax(x, axis=1)
    _holds(m, [F(1), F(5, 3)])
    assert ctx.argmax(ctx.take(x, [0], 0), 1).tolist() == [1]
    with pytest.raises(ContextError, match="argmax: the balls do not decide"):
        ctx.argmax(x, 1)                      # a tie: 5/3 twice
    a, b = ctx.convert(np.array([1.0, 2.0])), ctx.convert(np.array([2.0, 1.0]))
    assert ctx.less(a, b).tolist() == [True, False]
    with pytest.raises(ContextError, match="less: the balls .* overlap"):
        ctx.less(ctx.div(ctx.convert(1.0), ctx.convert(3.0)),
                 ctx.convert(S61))
    h = ctx.heaviside(ctx.convert(np.array([-1.0, 0.0, 2.0])))
    _holds(h, [F(0), F(0), F(1)], rel=0)


def test_equal_values_are_decided_not_hulled(ctx):
    """A max-pool window holding one value twice (padding by repetition, equal
    activations), or two balls a few float64 ulps apart: the float64 ends cannot tell them
    apart, the exact difference of the midpoints can, so the result keeps the components
    and the radius (a hull would cost a float64 midpoint: radius ~2^-53 relative)."""
    third = ctx.div(ctx.convert(np.array([1.0, 1.0 + 2.0 ** -51, 0.5])), ctx.convert(3.0))
    w = ctx.take(third, [0, 0, 2], axis=0)                   # 1/3 twice, 1/6
    m = ctx.amax(w, axis=0)
    assert np.array_equal(m.mid, third.mid[:, 0]) and m.rad == third.rad[0]
    assert ctx.argmax(ctx.take(third, [1, 0], axis=0), 0) == 0     # 2^-51/3 apart
    mx = ctx.maximum(ctx.take(third, [0], 0), ctx.take(third, [1], 0))
    _holds(mx, [(1 + F(2) ** -51) / 3], rel=F(2) ** -150)
    same = ctx.minimum(third, third)
    assert np.array_equal(same.mid, third.mid) and np.array_equal(same.rad, third.rad)


def test_where_and_shape_ops(ctx):
    x = ctx.div(ctx.convert(np.arange(6.0).reshape(2, 3)), ctx.convert(3.0))
    y = ctx.transpose(ctx.reshape(x, (3, 2)), (1, 0))
    _holds(y, [F(int(v), 3) for v in np.arange(6).reshape(3, 2).T.reshape(-1)])
    t = ctx.take(x, [2, 0], axis=-1)
    _holds(t, [F(2, 3), F(0), F(5, 3), F(1)])
    c = ctx.concat([x, ctx.convert(np.ones((1, 3)))], axis=0)
    _holds(c, [F(v, 3) for v in range(6)] + [F(1)] * 3)
    w = ctx.where(np.array([True, False, True]), x, ctx.zeros(()))
    _holds(w, [F(0), F(0), F(2, 3), F(1), F(0), F(5, 3)])
    bc = ctx.broadcast_to(ctx.convert("0.1"), (2, 2))
    assert ctx.shape(bc) == (2, 2)
    _holds(bc, [F(1, 10)] * 4)
    with pytest.raises(ContextError, match="where: the condition"):
        ctx.where(x, x, x)


@pytest.mark.parametrize("name", ["exp", "tanh", "erf", "sigmoid", "log", "sqrt"])
def test_functions_in_arb(ctx, name):
    """Tight balls: within 2^-150 relative of Arb at 600 bits; wide balls (relative radius
    2^-20) through interval:float64: they hold Arb's value at every end."""
    import flint
    xs = np.array([0.125, 0.75, 2.5, 1e-5])
    x = ctx.div(ctx.convert(xs), ctx.convert(3.0))
    r = getattr(ctx, name)(x)
    old = flint.ctx.prec
    flint.ctx.prec = 600
    try:
        f = {"sigmoid": lambda a: 1 / (1 + (-a).exp())}.get(name, lambda a: getattr(a, name)())
        ex = [f(flint.arb(float(v)) / 3) for v in xs]
        got = _exact(r)
        for (m, rad), e in zip(got, ex):
            mid = flint.arb(m.numerator) / m.denominator
            d = abs(mid - e)
            assert d.upper() <= flint.arb(rad.numerator) / rad.denominator
            assert rad <= F(2) ** -150 * abs(F(str(e.mid().str(60, radius=False))))
        wide = Ball(x.mid, np.abs(x.mid[0]) * 2.0 ** -20)
        w = getattr(ctx, name)(wide)
        for j, v in enumerate(xs):
            for end in (-1, 1):
                a = flint.arb(float(v)) / 3 + end * flint.arb(float(wide.rad[j]))
                (m, rad) = _exact(w)[j]
                d = abs(flint.arb(m.numerator) / m.denominator - f(a))
                assert d.upper() <= flint.arb(rad.numerator) / rad.denominator
    finally:
        flint.ctx.prec = old


def test_function_domain_error(ctx):
    with pytest.raises(ContextError, match="log"):
        ctx.log(ctx.convert(np.array([1.0, -2.0])))
    with pytest.raises(ContextError, match="sqrt: the ball at index \\[1\\]"):
        ctx.sqrt(ctx.convert(np.array([1.0, -2.0])))
