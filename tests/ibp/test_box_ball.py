"""Box.from_center_radius on float arrays (the vectorised ball): its float64 ends are the
exact ends c ± r rounded outward / inward (checked with Fractions), it converts into every
interval base exactly as the exact-rational box does (one outward rounding of each exact
end), sampling stays inside the exact ball, and slicing/containment keep the ball."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.ibp import Box, IBPError
from scalarlab.ibp.containment import sample_box


def _centres(rng, n=3000):
    c = rng.standard_normal(n) * 10.0 ** rng.integers(-8, 8, n)
    c[:50] = 0.0
    c[50:100] = 2.0 ** -1070            # subnormal centres
    c[100:150] = 1e308
    return c


def _rd_ru(q):
    f = float(q)
    if Fraction(f) == q:
        return f, f
    if Fraction(f) > q:
        return float(np.nextafter(f, -np.inf)), f
    return f, float(np.nextafter(f, np.inf))


@pytest.mark.parametrize("radius", [0.01, 3e-17, 0.0, "0.05", Fraction(1, 3), 2])
def test_ends_are_the_exact_ends_rounded_outward_and_inward(radius):
    rng = np.random.default_rng(17)
    c = _centres(rng)
    box = Box.from_center_radius(c, radius)
    assert box.ball is not None and box.lo.dtype == np.float64
    rq = Fraction(radius) if not isinstance(radius, float) else Fraction(radius)
    lo_in, hi_in = box.inner_float()
    for i in range(0, c.size, 7):
        lo_q, hi_q = Fraction(float(c[i])) - rq, Fraction(float(c[i])) + rq
        assert (float(box.lo[i]), float(lo_in[i])) == _rd_ru(lo_q)
        assert (float(hi_in[i]), float(box.hi[i])) == _rd_ru(hi_q)


@pytest.mark.parametrize("ctx", ["interval:float64", "interval:binary32", "interval:bfloat16",
                                 "interval:rational"])
def test_to_interval_equals_the_exact_box(ctx):
    rng = np.random.default_rng(3)
    c = rng.standard_normal((40, 6)) * 10.0 ** rng.integers(-5, 5, (40, 6))
    r = np.abs(rng.standard_normal((40, 6))) * 1e-3
    ictx = scalars.get(ctx)
    ball = Box.from_center_radius(c, r)
    fr = np.frompyfunc(Fraction, 1, 1)
    exact = Box(fr(c) - fr(r), fr(c) + fr(r))           # the exact-rational box
    a, b = ball.to_interval(ictx), exact.to_interval(ictx)
    assert np.array_equal(np.asarray(a.lo), np.asarray(b.lo))
    assert np.array_equal(np.asarray(a.hi), np.asarray(b.hi))


def test_samples_lie_in_the_exact_ball_and_containment_is_exact():
    c = np.array([0.1, 1.0, -3.3])
    box = Box.from_center_radius(c, "0.1")
    x = sample_box(box, 200, seed=1)
    for row in x:
        for v, ci in zip(row, c):
            assert abs(Fraction(float(v)) - Fraction(float(ci))) <= Fraction(1, 10)
    # 0.1 - 0.1 (decimal) is not 0: the float 0.1 exceeds 1/10, so 0.0 is outside, and
    # the exact lower end lies strictly between two float64s: the upper one is inside
    assert not box.contains(np.array([0.0, 1.0, -3.3]))[0]
    up = float(box.inner_float()[0][0])
    assert Fraction(up) > Fraction(0.1) - Fraction(1, 10) > Fraction(float(box.lo[0]))
    assert box.contains(np.array([up, 1.0, -3.3])).all()
    assert not box.contains(np.array([float(box.lo[0]), 1.0, -3.3]))[0]
    sub = box[1:]
    assert sub.ball is not None and sub.shape == (2,) and sub.contains(c[1:]).all()


def test_bad_radius_and_centre_are_named():
    with pytest.raises(IBPError, match="radius must be >= 0"):
        Box.from_center_radius(np.zeros(3), np.array([0.1, -0.1, 0.1]))
    with pytest.raises(IBPError, match="radius must be >= 0"):
        Box.from_center_radius(np.zeros(3), "-0.5")
    with pytest.raises(IBPError, match="centre must be finite"):
        Box.from_center_radius(np.array([0.0, np.nan]), 0.1)
