"""VJP rules that take ``needs`` (linear, matmul) compute only the cotangents of the
arguments that want one: a constant input costs no product in the backward pass, and the
gradients that are computed equal the full rule's."""
from __future__ import annotations

import numpy as np

from scalarlab import scalars
from scalarlab.graph.optable import OPS
from scalarlab.tape import TapeBuilder, backward


def _counting(ctx_name):
    ctx = scalars.get(ctx_name)
    calls = []
    orig = ctx.matmul

    class Counting(type(ctx)):
        pass

    c = object.__new__(Counting)
    c.__dict__.update(ctx.__dict__)
    c.matmul = lambda a, b: (calls.append((np.shape(a), np.shape(b))), orig(a, b))[1]
    return c, calls


def test_linear_skips_the_input_cotangent_of_a_constant():
    rng = np.random.default_rng(0)
    x, W, b = rng.standard_normal((5, 7)), rng.standard_normal((3, 7)), rng.standard_normal(3)
    ctx, calls = _counting("float64")
    tb = TapeBuilder("float64")
    tb.tape.ctx = tb.ctx = ctx
    xi, Wi, bi = tb.const(x), tb.leaf(W), tb.leaf(b)
    out = tb.apply("sum", tb.linear(xi, Wi, bi))
    calls.clear()
    g = backward(tb.tape, out)
    assert len(calls) == 1                       # gW only; no g @ W for the constant x
    assert xi not in g.reached
    np.testing.assert_allclose(g[Wi], np.ones((5, 3)).T @ x)
    np.testing.assert_allclose(g[bi], np.full(3, 5.0))


def test_rules_with_needs_equal_the_full_rules():
    rng = np.random.default_rng(1)
    ctx = scalars.get("binary32")
    r = lambda *s: ctx.convert(rng.standard_normal(s))  # noqa: E731
    lin = OPS["linear"].vjp
    args = [r(4, 6), r(2, 6), r(2)]
    gy = r(4, 2)
    full = lin(ctx, gy, args, None, {}, 0)
    part = lin(ctx, gy, args, None, {}, 0, needs=(False, True, False))
    assert part[0] is None and part[2] is None
    assert np.array_equal(part[1], full[1])
    mm = OPS["matmul"].vjp
    a, bb, g2 = r(3, 4), r(4, 5), r(3, 5)
    full = mm(ctx, g2, [a, bb], None, {}, 0)
    part = mm(ctx, g2, [a, bb], None, {}, 0, needs=(True, False))
    assert part[1] is None and np.array_equal(part[0], full[0])
    assert getattr(lin, "takes_needs", False) and getattr(mm, "takes_needs", False)
