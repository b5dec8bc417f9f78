"""Values live in the context: exact gradients in rational, per-op rounding in binary32
(eager tape == typed graph, bit for bit), enclosures over intervals."""
from fractions import Fraction

import numpy as np

from scalarlab import scalars
from scalarlab.tape import EagerOps, backward, grad


def frac_array(r, shape, den=7):
    return np.vectorize(lambda v: Fraction(int(v), den), otypes=[object])(
        r.integers(-20, 21, shape))


def pwl(ops, x, p):
    """Piecewise linear: relu layer, abs, max, min, sums."""
    pre = ops.linear(x, p["W"], p["b"])
    a = ops.sum(ops.mul(p["c"], ops.relu(pre)))
    bpart = ops.sum(ops.mul(ops.abs(x), ops.apply("max", x, p["y"])))
    return ops.add(a, ops.sub(bpart, ops.sum(ops.apply("min", x, p["y"]))))


def case(seed):
    r = np.random.default_rng(seed)
    while True:
        p = {"W": frac_array(r, (3, 4)), "b": frac_array(r, (3,)), "c": frac_array(r, (3,)),
             "y": frac_array(r, (4,))}
        x = frac_array(r, (4,), den=5)
        pre = p["W"].dot(x) + p["b"]
        if all(v != 0 for v in pre) and all(v != 0 for v in x) and all(x != p["y"]):
            return x, p, pre                       # away from every kink


def reference(x, p, pre):
    """The gradient by hand, in Python Fractions."""
    m = np.array([p["c"][i] if pre[i] > 0 else Fraction(0) for i in range(3)], dtype=object)
    gW = np.outer(m, x)
    gx = p["W"].T.dot(m)
    mx = np.where(x > p["y"], x, p["y"])
    gx = gx + np.array([(1 if v > 0 else -1) for v in x], dtype=object) * mx
    gx = gx + np.abs(x) * (x > p["y"]) - (x < p["y"]).astype(object)
    return gx, gW, m


def as_fracs(a):
    return [Fraction(int(v.numerator), int(v.denominator)) for v in np.asarray(a).reshape(-1)]


def test_piecewise_linear_gradients_are_exact_in_rational():
    for seed in range(3):
        x, p, pre = case(seed)
        gx, gp = grad(pwl, "rational", argnums=(0, 1))(x, p)
        rx, rW, rb = reference(x, p, pre)
        assert as_fracs(gx) == list(rx)
        assert as_fracs(gp["W"]) == list(rW.reshape(-1))
        assert as_fracs(gp["b"]) == list(rb)


def test_interval_gradient_encloses_the_exact_one():
    x, p, pre = case(11)
    gx_exact, _ = grad(pwl, "rational", argnums=(0, 1))(x, p)
    gx_iv, _ = grad(pwl, "interval:float64", argnums=(0, 1))(x, p)
    exact = as_fracs(gx_exact)
    lo, hi = np.asarray(gx_iv.lo, dtype=np.float64), np.asarray(gx_iv.hi, dtype=np.float64)
    for e, l, h in zip(exact, lo, hi):
        assert Fraction(float(l)) <= e <= Fraction(float(h))


def smooth(ops, x, p):
    h = ops.tanh(ops.linear(x, p[0], p[1]))
    s = ops.sigmoid(ops.linear(h, p[2], p[3]))
    return ops.apply("mse_loss", ops.softplus(s), p[4])


def test_binary32_eager_tape_and_typed_graph_agree_bit_for_bit():
    ctx = scalars.get("binary32")
    r = np.random.default_rng(2)
    shapes = [(6, 4), (6,), (3, 6), (3,), (3,)]
    p = [ctx.convert(r.standard_normal(s)) for s in shapes]
    x = ctx.convert(r.standard_normal(4))
    gx, gp = grad(smooth, "binary32", argnums=(0, 1))(x, p)   # typed graph -> tape
    ops = EagerOps("binary32")                                 # eager tape
    hx = ops.input(x, "x")
    hp = [ops.input(v, f"p{i}") for i, v in enumerate(p)]
    out = smooth(ops, hx, hp)
    g = ops.session.backward(out)
    eager = [ops.session.grad(g, h) for h in [hx] + hp]
    for a, b in zip(eager, [gx] + list(gp)):
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        assert np.array_equal(a.view(np.uint64), b.view(np.uint64))
        assert np.array_equal(a.astype(np.float32).astype(np.float64), a)  # binary32 values
    # and they are binary32 results, not float64 ones: close to, but not all equal to float64
    gx64, _ = grad(smooth, "float64", argnums=(0, 1))(np.asarray(x, np.float64),
                                                      [np.asarray(v, np.float64) for v in p])
    np.testing.assert_allclose(np.asarray(gx, np.float64), gx64, rtol=1e-4, atol=1e-6)
    assert not np.array_equal(np.asarray(gx, np.float64), gx64)
