"""Stochastic rounding: reproducible, always a neighbour, and unbiased (5-sigma bounds)."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from scalarlab.scalars import formats as F
from test_formats_oracle import same

N = 400_000


def test_reproducible_from_seed_and_generator():
    x = np.random.default_rng(0).standard_normal(10_000)
    a = F.round_to_format(x, F.bfloat16, "stochastic", rng=42)
    b = F.round_to_format(x, F.bfloat16, "stochastic", rng=42)
    c = F.round_to_format(x, F.bfloat16, "stochastic", rng=np.random.default_rng(42))
    d = F.round_to_format(x, F.bfloat16, "stochastic", rng=43)
    assert same(a, b).all() and same(a, c).all()
    assert not same(a, d).all()
    g = np.random.default_rng(7)
    e1 = F.round_to_format(x, F.e4m3, "stochastic", rng=g)
    e2 = F.round_to_format(x, F.e4m3, "stochastic", rng=g)  # the generator advanced
    assert not same(e1, e2).all()
    q = np.array([Fraction(1, 3), Fraction(-2, 7)] * 50, dtype=object)
    assert same(F.round_fractions(q, F.e5m2, "stochastic", rng=5),
                F.round_fractions(q, F.e5m2, "stochastic", rng=5)).all()


@pytest.mark.parametrize("fmt", [F.binary16, F.bfloat16, F.e4m3, F.e5m2,
                                 F.Format(5, 10, subnormals=False)], ids=lambda f: f.name)
def test_result_is_always_a_neighbour(fmt):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(50_000) * 2.0 ** rng.integers(-30, 20, 50_000)
    x = x[np.abs(x) <= fmt.max_finite]
    r = F.round_to_format(x, fmt, "stochastic", rng=rng)
    lo = F.round_to_format(x, fmt, "down")
    hi = F.round_to_format(x, fmt, "up")
    assert ((r == lo) | (r == hi)).all()
    assert (np.signbit(r) == np.signbit(x)).all()
    # Values already in the format never move.
    assert same(F.round_to_format(lo, fmt, "stochastic", rng=rng), lo).all()


CASES = [
    (F.binary16, 1.0 + 2.0 ** -12),          # p = 1/4 in the normal range
    (F.binary16, -(1.0 + 3 * 2.0 ** -12)),   # p = 3/4, negative
    (F.binary16, 1.0 / 3.0),                 # p is a long binary fraction
    (F.binary16, 2.0 ** -24 * 0.3),          # below the smallest subnormal
    (F.binary16, 2.0 ** -20 * 1.37),         # inside the subnormal range
    (F.binary16, 2.0 ** -24 * 2.0 ** -40 * 1.5),  # 40 binades below it (p ~ 2^-39.4)
    (F.e4m3, 100.0),                         # p = 1/2
    (F.e4m3, 2.0 ** -9 * 0.1),
    (F.bfloat16, np.pi),
    (F.Format(5, 10, subnormals=False), 2.0 ** -16),  # between 0 and min_normal: p = 1/4
]


@pytest.mark.parametrize("fmt,x", CASES)
def test_unbiased_within_five_sigma(fmt, x):
    lo = float(F.round_to_format(x, fmt, "toward_zero"))
    hi = float(F.next_up(abs(lo), fmt)) * (1 if x > 0 else -1) if lo != 0 else \
        np.copysign(fmt.min_subnormal, x)
    p = float((Fraction(x) - Fraction(lo)) / (Fraction(hi) - Fraction(lo)))
    r = F.round_to_format(np.full(N, x), fmt, "stochastic", rng=123)
    k = np.count_nonzero(r == hi)
    assert np.count_nonzero(r == lo) + k == N
    sigma = np.sqrt(max(p * (1 - p), 1e-300) / N)
    assert abs(k / N - p) <= 5 * sigma + 1.0 / N, (k / N, p)
    # The mean is the exact value within the same bound (scaled to the gap).
    assert abs(r.mean() - x) <= (5 * sigma + 1.0 / N) * abs(hi - lo) + abs(x) * 1e-15


def test_sum_of_stochastic_roundings_is_unbiased():
    rng = np.random.default_rng(5)
    x = rng.uniform(1.0, 2.0, N)  # bfloat16 gap 2^-7 here
    r = F.round_to_format(x, F.bfloat16, "stochastic", rng=rng)
    err = r - x
    # Each error has |e| < 2^-7, so the mean error's sd is below 2^-7 / sqrt(N).
    assert abs(err.mean()) <= 5 * 2.0 ** -7 / np.sqrt(N)
    rn = F.round_to_format(x, F.bfloat16)
    assert np.abs(err).mean() > np.abs(rn - x).mean()  # it really is random, not nearest


def test_round_fraction_stochastic_mean():
    q = Fraction(1, 3)  # e5m2: between 0.3125 and 0.375, p = 1/3 exactly
    n = 10_000
    r = F.round_fractions(np.array([q] * n, dtype=object), F.e5m2, "stochastic", rng=3)
    k = np.count_nonzero(r == 0.375)
    assert np.count_nonzero(r == 0.3125) + k == n
    assert abs(k / n - 1 / 3) <= 5 * np.sqrt(2 / 9 / n)
