"""Hypothesis properties of rounding, tied to the definitions of the modes.

Each example draws a format and a batch of values (checked vectorised), which keeps
Hypothesis' own per-example overhead affordable.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given, settings, strategies as st

from scalarlab.scalars import formats as F
from test_formats_oracle import DETERMINISTIC, odd_significand, same

FMTS = [F.binary16, F.bfloat16, F.e4m3, F.e5m2, F.binary32, F.Format(3, 2),
        F.Format(5, 10, subnormals=False),
        F.Format(4, 3, has_inf=False, nan_encoding="fn", saturate=True)]

modes = st.sampled_from(DETERMINISTIC)


def in_range(fmt):
    """Finite float64 values spread over the format's exponent range and a bit beyond."""
    lim = min(fmt.max_finite * 4, 1e308)
    return st.one_of(
        st.floats(-lim, lim, allow_nan=False, allow_infinity=False),
        st.builds(lambda m, e: float(np.ldexp(m, e)), st.floats(-1, 1, allow_nan=False),
                  st.integers(fmt.emin - fmt.man_bits - 4, fmt.emax + 2)))


_BATCHES = {f: st.lists(in_range(f), min_size=1, max_size=40).map(np.array) for f in FMTS}
batches = st.one_of([st.tuples(st.just(f), b) for f, b in _BATCHES.items()])

R = F.round_to_format
S = settings(max_examples=40, deadline=None)


@S
@given(batches, modes, modes)
def test_idempotent(fx, m1, m2):
    fmt, x = fx
    r = R(x, fmt, m1)
    assert same(R(r, fmt, m2), r).all()


@S
@given(batches, modes)
def test_monotone(fx, mode):
    fmt, x = fx
    r = R(np.sort(x), fmt, mode)
    r = r[~np.isnan(r)]
    assert (r[:-1] <= r[1:]).all()


@S
@given(batches)
def test_bracketing_and_mode_definitions(fx):
    fmt, x = fx
    x = x[np.abs(x) <= fmt.max_finite]  # overflow rules are tested against IEEE's table
    rd, ru = R(x, fmt, "down"), R(x, fmt, "up")
    assert (rd <= x).all() and (x <= ru).all()
    exact = rd == ru
    assert (rd[exact] == x[exact]).all()
    assert (ru[~exact] == F.next_up(rd[~exact], fmt)).all()
    assert (F.ulp_distance(rd, ru, fmt) == (~exact).astype(int)).all()
    assert (R(x, fmt, "toward_zero") == np.where(x >= 0, rd, ru)).all()
    dx = np.array([Fraction(a) - Fraction(b) for a, b in zip(x.tolist(), rd.tolist())])
    ux = np.array([Fraction(a) - Fraction(b) for a, b in zip(ru.tolist(), x.tolist())])
    closer = np.where(dx < ux, rd, ru)
    tie = dx == ux
    rne, rna = R(x, fmt, "nearest_even"), R(x, fmt, "nearest_away")
    assert (rne[~tie] == closer[~tie]).all() and (rna[~tie] == closer[~tie]).all()
    t = tie & ~exact
    assert (np.abs(rna[t]) == np.maximum(np.abs(rd[t]), np.abs(ru[t]))).all()
    assert ((rne[t] == rd[t]) | (rne[t] == ru[t])).all()
    assert not odd_significand(rne[t], fmt).any()
    ro = R(x, fmt, "odd")
    assert (ro[exact] == x[exact]).all()
    tiny = ~exact & (np.abs(x) < fmt.min_normal) & (not fmt.subnormals)
    # Without subnormals odd picks ±min_normal below it (documented); elsewhere the odd one.
    assert (np.abs(ro[tiny]) == fmt.min_normal).all()
    rest = ~exact & ~tiny
    assert odd_significand(ro[rest], fmt).all()
    assert ((ro[rest] == rd[rest]) | (ro[rest] == ru[rest])).all()


@S
@given(batches, modes)
def test_sign_symmetry(fx, mode):
    fmt, x = fx
    mirror = {"up": "down", "down": "up"}.get(mode, mode)
    assert same(R(-x, fmt, mode), -R(x, fmt, mirror)).all()


@S
@given(batches, modes)
def test_exact_path_agrees_with_float_path(fx, mode):
    fmt, x = fx
    x = x[x != 0]  # Fraction(-0.0) has no sign
    q = np.array([Fraction(v) for v in x.tolist()], dtype=object)
    assert same(F.round_fractions(q, fmt, mode), R(x, fmt, mode)).all()


@S
@given(batches)
def test_neighbours_and_ulp(fx):
    fmt, x = fx
    v = R(x, fmt, "nearest_even")
    v = v[np.isfinite(v)]
    up, dn = F.next_up(v, fmt), F.next_down(v, fmt)
    both = np.isfinite(up) & np.isfinite(dn)
    assert (dn[both] < v[both]).all() and (v[both] < up[both]).all()
    assert (F.ulp_distance(dn[both], up[both], fmt) == 2).all()
    pos = np.isfinite(up) & (v >= 0)
    assert (up[pos] - v[pos] == F.ulp(v[pos], fmt)).all()
    assert (F.ulp_distance(v[pos], up[pos], fmt) == 1).all()
