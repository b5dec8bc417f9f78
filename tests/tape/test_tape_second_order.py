"""``jvp`` and ``hvp`` take their first derivatives from the op table.

At kinks (``relu`` and ``abs`` at 0, ``max``/``min`` ties) the results must be exactly
what the op table's rules say -- heaviside(0) = 0, sign(0) = 0, a tie splits 1/2-1/2 --
so those cases run in the rational context and compare with fractions worked out by hand
from those conventions (and, for ``jvp``, with the op record's JVP rule called directly).
Away from kinks ``hvp`` is checked against exact second derivatives (mixed partials of an
independent mpmath implementation of the loss, by ``mpmath.diff`` at 80 digits) and
against ``torch.autograd.functional.hvp`` in float64.
"""
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import torch

from scalarlab import scalars
from scalarlab.graph.optable import get_op
from scalarlab.tape import TapeError, hvp, jvp

Q = "rational"


def fractions(values) -> list:
    """Context values of the rational context (gmpy2 ``mpq``) as ``Fraction``s."""
    return [Fraction(int(v.numerator), int(v.denominator)) for v in np.ravel(values)]


def strs(values) -> list:
    return [str(Fraction(v)) for v in values]


def tie_weight(a: Fraction, b: Fraction) -> Fraction:
    """The op table's weight of ``a`` in ``max(a, b)``: 1, 0, or 1/2 at a tie."""
    return Fraction(1) if a > b else Fraction(0) if a < b else Fraction(1, 2)


# ---------------------------------------------------------------------- jvp at kinks
@pytest.mark.parametrize("op, xs, expected", [
    # relu' = heaviside(x), 0 at x = 0
    ("relu", [0, 1, -1], [0, 3, 0]),
    # abs' = sign(x), 0 at x = 0
    ("abs", [0, 2, -2], [0, 3, -3]),
])
def test_unary_jvp_at_the_kink_is_the_op_tables_rule(op, xs, expected):
    v = [3] * len(xs)
    _, t = jvp(lambda ops, x: ops.apply(op, x), (strs(xs),), (strs(v),), ctx=Q)
    assert fractions(t) == [Fraction(e) for e in expected]
    ctx = scalars.get(Q)
    x, tv = ctx.convert(strs(xs)), ctx.convert(strs(v))
    rec = get_op(op)
    rule = rec.jvp(ctx, [x], [tv], rec.forward(ctx, [x], {}, 0), {}, 0)
    assert fractions(t) == fractions(rule)


@pytest.mark.parametrize("op", ["max", "min"])
def test_binary_jvp_at_a_tie_splits_equally(op):
    a, b = [1, 1, 2], [1, 3, 1]            # a tie, a < b, a > b
    va, vb = [4, 4, 4], [2, 2, 2]
    _, t = jvp(lambda ops, x, y: ops.apply(op, x, y), (strs(a), strs(b)),
               (strs(va), strs(vb)), ctx=Q)
    expected = []
    for ai, bi, vai, vbi in zip(a, b, va, vb):
        w = tie_weight(Fraction(ai), Fraction(bi)) if op == "max" \
            else tie_weight(Fraction(bi), Fraction(ai))
        expected.append(w * vai + (1 - w) * vbi)
    assert fractions(t) == expected == ([3, 2, 4] if op == "max" else [3, 4, 2])
    ctx = scalars.get(Q)
    args = [ctx.convert(strs(a)), ctx.convert(strs(b))]
    tans = [ctx.convert(strs(va)), ctx.convert(strs(vb))]
    rec = get_op(op)
    rule = rec.jvp(ctx, args, tans, rec.forward(ctx, args, {}, 0), {}, 0)
    assert fractions(t) == fractions(rule)


def test_jvp_through_a_kink_inside_a_program():
    # f(x) = tanh(relu(x) * x) + abs(x): at x = 0 every path has derivative 0 by the table
    def f(ops, x):
        return ops.add(ops.tanh(ops.mul(ops.relu(x), x)), ops.abs(x))

    _, t = jvp(f, (["0", "0"],), (["1", "-5"],), ctx=Q)
    assert fractions(t) == [0, 0]


# ---------------------------------------------------------------------- hvp at kinks
def test_hvp_of_x_relu_x_at_zero():
    # f = sum(x * relu(x)); grad = relu(x) + x H(x); H v = 2 H(x) v with H(0) = 0
    def f(ops, x):
        return ops.sum(ops.mul(x, ops.relu(x)))

    hv = hvp(f, (["0", "1", "-1"],), ["1", "1", "1"], ctx=Q)
    assert fractions(hv) == [0, 2, 0]


def test_hvp_of_x_abs_x_at_zero():
    # f = sum(x * |x|); grad = |x| + x sign(x); H v = 2 sign(x) v with sign(0) = 0
    def f(ops, x):
        return ops.sum(ops.mul(x, ops.abs(x)))

    hv = hvp(f, (["0", "2", "-3"],), ["1", "1", "1"], ctx=Q)
    assert fractions(hv) == [0, 2, -2]


@pytest.mark.parametrize("op", ["max", "min"])
def test_hvp_of_a_squared_max_or_min_at_a_tie(op):
    # f = sum(m^2), m = op(a, b) with weights (w, 1 - w) from the table (1/2 at ties):
    # grad_a = 2 m w, grad_b = 2 m (1 - w); the weights are piecewise constant, so
    # H v = (2 w mdot, 2 (1 - w) mdot) with mdot = w va + (1 - w) vb.
    a, b = [1, 2, 1], [1, 1, 3]
    va, vb = [1, 1, 1], [0, 0, 0]

    def f(ops, z):
        m = ops.apply(op, z["a"], z["b"])
        return ops.sum(ops.mul(m, m))

    hv = hvp(f, ({"a": strs(a), "b": strs(b)},), {"a": strs(va), "b": strs(vb)}, ctx=Q)
    want_a, want_b = [], []
    for ai, bi, vai, vbi in zip(a, b, va, vb):
        w = tie_weight(Fraction(ai), Fraction(bi)) if op == "max" \
            else tie_weight(Fraction(bi), Fraction(ai))
        mdot = w * vai + (1 - w) * vbi
        want_a.append(2 * w * mdot)
        want_b.append(2 * (1 - w) * mdot)
    assert fractions(hv["a"]) == want_a
    assert fractions(hv["b"]) == want_b
    assert want_a[0] == want_b[0] == Fraction(1, 2)      # the tie itself


def test_the_dual_cross_check_stays_available():
    def f(ops, x):
        return ops.sum(ops.mul(ops.tanh(x), ops.softplus(x)))

    x, v = ["1/3", "2"], ["1", "-1/2"]
    rules = hvp(f, (x,), v, ctx="mpmath:200")
    dual = hvp(f, (x,), v, ctx="mpmath:200", method="dual")
    for r, d in zip(rules, dual):
        assert abs(r - d) <= mpmath.mpf(2) ** -190 * max(1, abs(d))
    with pytest.raises(TapeError, match="method must be 'rules' or 'dual'"):
        hvp(f, (x,), v, ctx=Q, method="forward")
    with pytest.raises(TapeError, match="method must be 'rules' or 'dual'"):
        jvp(f, (x,), (v,), ctx=Q, method="forward")


# ------------------------------------------------------- hvp on a small MLP loss
SHAPES = {"W1": (3, 2), "b1": (3,), "W2": (1, 3), "b2": (1,)}


def mlp_loss(ops, p, x, y):
    h = ops.tanh(ops.linear(x, p["W1"], p["b1"]))
    out = ops.linear(ops.softplus(h), p["W2"], p["b2"])
    return ops.mse(out, y)


def mlp_problem(seed):
    """Parameters, direction, inputs and targets as exact decimal fractions."""
    r = np.random.default_rng(seed)

    def draw(shape):
        return np.vectorize(lambda u: Fraction(int(round(u * 1000)), 1000),
                            otypes=[object])(r.standard_normal(shape))

    p = {k: draw(s) for k, s in SHAPES.items()}
    v = {k: draw(s) for k, s in SHAPES.items()}
    return p, v, draw((4, 2)), draw((4, 1))


def as_strings(tree):
    if isinstance(tree, dict):
        return {k: as_strings(a) for k, a in tree.items()}
    return np.vectorize(str, otypes=[object])(tree).tolist()


def mlp_loss_mpmath(p, x, y):
    """The same loss written directly in mpmath (an independent implementation)."""
    total = mpmath.mpf(0)
    for n in range(len(x)):
        s = []
        for j in range(3):
            z = p["b1"][j] + sum(p["W1"][j][k] * x[n][k] for k in range(2))
            s.append(mpmath.log(1 + mpmath.exp(mpmath.tanh(z))))
        out = p["b2"][0] + sum(p["W2"][0][j] * s[j] for j in range(3))
        total += (out - y[n][0]) ** 2
    return total / len(x)


def test_hvp_of_an_mlp_loss_matches_exact_mixed_partials_in_mpmath():
    p, v, x, y = mlp_problem(7)
    hv = hvp(mlp_loss, (as_strings(p), as_strings(x), as_strings(y)), as_strings(v),
             ctx="mpmath:200")
    with mpmath.workdps(80):
        def mp(a):
            return np.vectorize(lambda q: mpmath.mpf(q.numerator) / q.denominator,
                                otypes=[object])(a)

        P, V, X, Y = ({k: mp(a) for k, a in p.items()}, {k: mp(a) for k, a in v.items()},
                      mp(x).tolist(), mp(y).tolist())
        for key, shape in SHAPES.items():
            for idx in np.ndindex(shape):
                def f(s, t, _key=key, _idx=idx):
                    q = {k: (P[k] + t * V[k]).copy() for k in P}
                    q[_key][_idx] += s
                    return mlp_loss_mpmath({k: a.tolist() for k, a in q.items()}, X, Y)

                # (H v)_i = d^2/ds dt L(theta + s e_i + t v) at s = t = 0
                exact = mpmath.diff(f, (0, 0), (1, 1))
                got = hv[key][idx]
                assert abs(got - exact) <= mpmath.mpf(10) ** -50 * max(1, abs(exact)), \
                    (key, idx, got, exact)


def test_hvp_of_an_mlp_loss_matches_torch_in_float64():
    p, v, x, y = mlp_problem(11)
    f64 = {k: a.astype(np.float64) for k, a in p.items()}
    v64 = {k: a.astype(np.float64) for k, a in v.items()}
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    hv = hvp(mlp_loss, (f64, x64, y64), v64)
    dual = hvp(mlp_loss, (f64, x64, y64), v64, method="dual")
    keys = sorted(SHAPES)

    def loss_torch(*vals):
        q = dict(zip(keys, vals))
        h = torch.tanh(torch.nn.functional.linear(torch.tensor(x64), q["W1"], q["b1"]))
        out = torch.nn.functional.linear(torch.nn.functional.softplus(h), q["W2"], q["b2"])
        return torch.mean((out - torch.tensor(y64)) ** 2)

    _, thv = torch.autograd.functional.hvp(
        loss_torch, tuple(torch.tensor(f64[k]) for k in keys),
        tuple(torch.tensor(v64[k]) for k in keys))
    for k, t in zip(keys, thv):
        np.testing.assert_allclose(hv[k], t.numpy(), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(hv[k], dual[k], rtol=1e-13, atol=1e-15)
