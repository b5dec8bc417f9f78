"""float64 context: values stay ndarrays (0-d included) and foreign values are refused."""
import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.scalars import ContextError

F = scalars.get("float64")


def test_zero_d_results_stay_arrays_through_chains():
    x = F.convert(2.0)
    y = F.add(F.mul(x, x), F.exp(F.convert(0.0)))
    for v in (y, F.sum(F.convert([1.0, 2.0])), F.amax(F.convert([1.0, 3.0])),
              F.sigmoid(x), F.softplus(x), F.erf(x), F.sign(x), F.tanh(F.neg(x))):
        assert isinstance(v, np.ndarray) and v.dtype == np.float64 and v.shape == ()
    assert y[()] == 5.0
    assert F.add(np.float64(1.5), np.array(1.0))[()] == 2.5  # numpy scalars count as 0-d


@pytest.mark.parametrize("other,label", [("rational", "rational value"),
                                         ("fp32-real", "fp32-real value"),
                                         ("complex128", "complex128 value"),
                                         ("mpmath:53", "mpmath:53 value")])
def test_values_of_other_contexts_are_named(other, label):
    v = scalars.get(other).convert([1, 2])
    with pytest.raises(ContextError, match=rf"context float64: add: got .*\(an? {label}\)"):
        F.add(np.ones(2), v)


def test_interval_like_values_are_named():
    class Interval:  # duck-typed like scalars.interval.Interval
        def __init__(self, lo, hi):
            self.lo, self.hi = lo, hi
    with pytest.raises(ContextError, match=r"float64: mul: got an Interval \(an interval-context value\)"):
        F.mul(np.ones(2), Interval(np.zeros(2), np.ones(2)))


def test_integer_arrays_are_widened():
    assert F.add(np.array([1, 2]), np.array([0.5, 0.5])).tolist() == [1.5, 2.5]


def test_reduction_errors_are_context_errors():
    with pytest.raises(ContextError, match=r"float64: sum: .*axis 2"):
        F.sum(np.ones((2, 2)), axis=2)
    with pytest.raises(ContextError, match=r"float64: amax of shape \[0\]"):
        F.amax(np.ones(0))
    assert F.argmax(np.array([[1.0, 3.0], [4.0, 2.0]]), 1).tolist() == [1, 0]


@pytest.mark.parametrize("ctx", ["float64", "rational", "fp32-real", "mpmath:200", "complex128"])
def test_real_interval_and_dual_values_are_refused_by_name(ctx):
    iv = scalars.get("interval:float64").convert([1.0, 2.0])
    du = scalars.get("dual:float64").convert([1.0, 2.0])
    with pytest.raises(ContextError, match=rf"context {ctx}: add: got an Interval \(an interval-context value\)"):
        scalars.get(ctx).add(iv, iv)
    with pytest.raises(ContextError, match=rf"context {ctx}: mul: got a Dual \(a dual-context value\)"):
        scalars.get(ctx).mul(du, du)


SPECIALS = [0.0, -0.0, 5e-324, -5e-324, 1.5, -2.25, 1e308, -1e308, np.inf, -np.inf, np.nan,
            -np.nan, 2.0 ** -1074, 0.1]


def test_heaviside_and_fused_relu_product_match_their_definitions():
    """heaviside is 1 where x > 0 else 0 (NaN -> 0); mul_heaviside(g, x) is bit for bit
    g * heaviside(x) computed by numpy (inf * 0 -> NaN, quiet NaN payloads kept), over
    every pair of special values and broadcast shapes."""
    s = np.array(SPECIALS)
    s[11] = np.frombuffer(np.uint64(0x7FF8000000000123).tobytes(), np.float64)[0]  # payload
    x, g = np.meshgrid(s, s, indexing="ij")
    want_h = np.where(x > 0, 1.0, 0.0)
    h = F.heaviside(x)
    assert h.dtype == np.float64 and np.array_equal(h, want_h)
    with np.errstate(all="ignore"):
        want = g * want_h
    got = F.mul_heaviside(g, x)
    assert np.array_equal(got.view(np.uint64), want.view(np.uint64))
    with np.errstate(all="ignore"):
        want_b = g[:1] * want_h                                                 # broadcast g
    assert np.array_equal(F.mul_heaviside(g[:1], x).view(np.uint64), want_b.view(np.uint64))
    row = F.mul_heaviside(np.float64(3.0), s)                                   # 0-d g
    assert np.array_equal(row, 3.0 * want_h[:, 0])
    with pytest.raises(ContextError,
                       match=r"context float64: mul: shapes do not broadcast: \[3\] vs \[4\]"):
        F.mul_heaviside(np.ones(3), np.ones(4))
