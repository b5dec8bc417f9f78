"""The reductions of real networks beyond the shared op cases: tie-splitting derivatives
as torch.amax/amin, products with zeros, tight boxes, exact rational products."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch

from scalarlab import scalars
from scalarlab.graph.optable import OPS, full_attrs
from scalarlab.scalars.base import to_fraction
from scalarlab.scalars.values import Interval
from scalarlab.tape import TapeBuilder, backward


def tape_grad(op, x, g, **attrs):
    b = TapeBuilder("float64")
    i = b.leaf(x)
    y = b.apply(op, i, **attrs)
    return b.tape.value(y), backward(b.tape, y, seed=g)[i]


@pytest.mark.parametrize("op,tf", [("reduce_max", torch.amax), ("reduce_min", torch.amin)])
def test_ties_split_the_derivative_as_torch(op, tf):
    x = np.array([[1.0, 3.0, 3.0, -2.0], [-5.0, -5.0, -5.0, 0.5]])
    g = np.array([2.0, -3.0])
    y, gx = tape_grad(op, x, g, axis=1)
    tx = torch.tensor(x, requires_grad=True)
    ty = tf(tx, dim=1)
    ty.backward(torch.tensor(g))
    assert np.array_equal(y, ty.detach().numpy())
    assert np.array_equal(gx, tx.grad.numpy())


def test_prod_derivative_with_zeros_matches_torch():
    x = np.array([[0.0, 2.0, 3.0, -1.5], [0.0, 0.0, 4.0, 1.0], [1.0, 2.0, -3.0, 0.5]])
    g = np.array([1.5, -2.0, 0.25])
    y, gx = tape_grad("reduce_prod", x, g, axis=1)
    tx = torch.tensor(x, requires_grad=True)
    ty = torch.prod(tx, dim=1)
    ty.backward(torch.tensor(g))
    assert np.array_equal(y, ty.detach().numpy())
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-15, atol=0)


def test_prod_is_exact_in_rationals_and_left_to_right_in_binary16():
    xs = [Fraction(3, 7), Fraction(-5, 3), Fraction(11, 13), Fraction(2, 9)]
    rat = scalars.get("rational")
    y = OPS["reduce_prod"].forward(rat, [rat.convert(xs)], full_attrs(OPS["reduce_prod"], {}), 0)
    assert to_fraction(np.asarray(y).reshape(-1)[0]) == Fraction(3 * -5 * 11 * 2, 7 * 3 * 13 * 9)
    h = scalars.get("binary16")
    v = np.array([1.1, 3.3, 0.7, 2.9, 1.3])
    hv = h.convert(v)
    acc = np.float16(hv[0])
    for t in hv[1:]:
        acc = np.float16(acc * np.float16(t))          # IEEE half: one rounding per product
    y = OPS["reduce_prod"].forward(h, [hv], full_attrs(OPS["reduce_prod"], {}), 0)
    assert float(y) == float(acc)


@pytest.mark.parametrize("op", ["reduce_max", "reduce_min", "global_max_pool"])
def test_extremes_over_boxes_are_the_exact_range(op):
    """max/min are monotone in every entry: the box is [max of lower ends, max of upper
    ends] exactly (no rounding happens)."""
    ctx = scalars.get("interval:binary32")
    rng = np.random.default_rng(0)
    lo = rng.uniform(-1, 1, (2, 3, 4)).astype(np.float32).astype(np.float64)
    hi = lo + rng.uniform(0, 0.5, lo.shape).astype(np.float32).astype(np.float64)
    attrs = full_attrs(OPS[op], {} if op == "global_max_pool" else {"axis": [1, 2]})
    y = OPS[op].forward(ctx, [Interval(lo, hi)], attrs, 0)
    f = np.max if op != "reduce_min" else np.min
    assert np.array_equal(np.asarray(y.lo).reshape(-1), f(lo, axis=(1, 2)).reshape(-1))
    assert np.array_equal(np.asarray(y.hi).reshape(-1), f(hi, axis=(1, 2)).reshape(-1))


def test_global_avg_pool_batched_matches_torch_adaptive_pool():
    x = np.random.default_rng(1).standard_normal((5, 3, 4, 6))
    y = OPS["global_avg_pool"].forward(scalars.get("float64"), [x], {}, 1)
    want = torch.nn.functional.adaptive_avg_pool2d(torch.tensor(x), 1).numpy()
    np.testing.assert_allclose(y, want, rtol=1e-14, atol=1e-16)
