"""The compiled ULP-distance pass (scalars/kernels/ordinal.py): distances of every pair of
small formats against the ordinals read off the bit patterns, the membership check against
MPFR in the format's own context, and the fused per-entry errors of experiments.metrics
against exact rationals and gmpy2 rounding (0.6 s CPU warm)."""
from __future__ import annotations

import re
from fractions import Fraction

import gmpy2
import numpy as np
import pytest

from scalarlab.experiments import metrics
from scalarlab.scalars import formats as F
from scalarlab.scalars.errors import ContextError
from scalarlab.scalars.kernels import ordinal as K
from test_formats_ulp import ordinal_table

SMALL = [F.e4m3, F.e5m2, F.Format(3, 2, subnormals=False), F.Format(3, 2, has_inf=False),
         F.Format(4, 3, saturate=True)]


@pytest.mark.parametrize("fmt", SMALL, ids=lambda f: f.name)
def test_every_pair_of_a_small_format(fmt):
    """All pairs of non-NaN values (both zeros included): the distance is the gap of the
    ordinals numbered by hand from the codes; one compiled signature for every format."""
    vals, ords = ordinal_table(fmt)
    i, j = np.meshgrid(np.arange(vals.size), np.arange(vals.size), indexing="ij")
    d = F.ulp_distance(vals[i.ravel()], vals[j.ravel()], fmt)
    assert d.dtype == np.int64
    assert (d == np.abs(ords[i.ravel()] - ords[j.ravel()])).all()
    assert len(K.ulp_distance_flat.signatures) == 1


def _mpfr_members(x, fmt):
    """Which float64s of ``x`` are values of ``fmt``: MPFR rounds them to themselves in
    the format's context (and an infinity is a value only where the format has one)."""
    out = []
    with F.gmpy2_context(fmt):
        for v in x.tolist():
            if np.isinf(v):
                out.append(fmt.has_inf)
                continue
            r = gmpy2.mpfr(v)          # exact: the context is narrower, so round explicitly
            out.append(float(gmpy2.mpfr(r) * 1) == v and abs(v) <= fmt.max_finite)
    return np.array(out)


@pytest.mark.parametrize("fmt", [F.bfloat16, F.e4m3, F.Format(4, 3, subnormals=False)],
                         ids=lambda f: f.name)
def test_membership_check_against_mpfr(fmt):
    """The kernel's count of non-values equals MPFR's: values, midpoints between
    neighbours, quarter steps, values past max_finite and below min_subnormal, float64
    subnormals, infinities; a refused input raises naming the entry."""
    rng = np.random.default_rng(5)
    vals, _ = ordinal_table(fmt)
    vals = vals[np.isfinite(vals)]
    up = F.next_up(vals, fmt)
    fin = np.isfinite(up)
    mids = 0.5 * (vals[fin] + up[fin])
    quarter = vals[fin] + 0.25 * (up[fin] - vals[fin])
    extra = np.array([fmt.max_finite * 1.0625, fmt.min_subnormal / 2, 5e-324, np.inf,
                      -np.inf, fmt.min_normal * 0.5, 0.0, -0.0])
    x = np.concatenate([rng.choice(vals, 300), rng.choice(mids, 200),
                        rng.choice(quarter, 200), extra])
    want = _mpfr_members(x, fmt)
    out = np.empty(x.size, dtype=np.uint64)
    bad = K.ulp_distance_flat(x, np.zeros_like(x), out, *F._ordinal_params(fmt))
    assert bad == int(np.count_nonzero(~want))
    assert int(np.count_nonzero(~want)) > 100
    k = int(np.flatnonzero(~want)[0])
    with pytest.raises(ContextError, match=re.escape(f"ulp_distance in {fmt.name}")):
        F.ulp_distance(x[k:k + 1], 0.0, fmt)
    ok = x[want]
    assert (F.ulp_distance(ok, ok, fmt) == 0).all()


def _exact(h, lo):
    return Fraction(h) + Fraction(lo)


@pytest.mark.parametrize("fmt", [F.bfloat16, F.e4m3], ids=lambda f: f.name)
def test_entry_errors_against_exact_rationals_and_gmpy2(fmt):
    """Per entry: ULPs = ordinal gap between the context's value and the double-double
    reference rounded by MPFR in the format; absolute and relative errors within 2^-50
    of the exact ones; NaN and infinity conventions; counts of non-finite pairs."""
    rng = np.random.default_rng(11)
    vals, ords = ordinal_table(fmt)
    fin = np.isfinite(vals)
    order = dict(zip(vals[fin].tolist(), ords[fin].tolist()))
    order[0.0] = 0
    v = rng.choice(vals[fin & (np.abs(vals) <= fmt.max_finite / 2)], 400)   # no overflow
    r_hi = v * (1 + rng.uniform(-0.2, 0.2, v.size)) + rng.choice([0.0, 1e-3], v.size)
    r_lo = r_hi * rng.uniform(-2.0 ** -53, 2.0 ** -53, v.size)
    r_hi, r_lo = r_hi + r_lo, (r_hi - (r_hi + r_lo)) + r_lo         # a double-double
    r_hi[:4], r_lo[:4] = v[:4], 0.0                                  # exact entries
    v[4], r_hi[4], r_lo[4] = np.nan, np.nan, 0.0                     # both NaN
    v[5], r_hi[5], r_lo[5] = np.nan, 1.0, 0.0                        # NaN for a number
    v[6] = np.inf if fmt.has_inf else np.nan
    r_hi[6], r_lo[6] = 2.0, 0.0
    e = metrics.entry_errors(v, np.zeros_like(v), r_hi, r_lo, fmt)
    assert e.fmt == fmt and e.nonfinite == 2
    with F.gmpy2_context(fmt):
        target = [float(gmpy2.mpfr(gmpy2.mpq(_exact(h, lo)))) for h, lo in zip(r_hi[7:],
                                                                             r_lo[7:])]
    want_ulps = [abs(order[a] - order[t]) for a, t in zip(v[7:].tolist(), target)]
    assert e.ulps[7:].tolist() == [float(w) for w in want_ulps]
    assert e.ulps[:4].tolist() == [0.0] * 4 and e.ulps[4] == 0 and np.isinf(e.ulps[5])
    assert e.bits[6] == fmt.total_bits and e.bits[5] == fmt.total_bits
    for i in range(7, v.size):
        ex = abs(Fraction(v[i]) - _exact(r_hi[i], r_lo[i]))
        assert abs(Fraction(e.abs_err[i]) - ex) <= ex * Fraction(1, 2 ** 50)
        if ex:
            rel = ex / abs(_exact(r_hi[i], r_lo[i]))
            assert abs(Fraction(e.rel_err[i]) - rel) <= rel * Fraction(1, 2 ** 49)
    assert e.abs_err[4] == 0 and e.rel_err[4] == 0 and np.isinf(e.abs_err[5])
    # a value that is not a format value: no ULP figures (fp32-real's case)
    w = v.copy()
    w[10] = 1.0 + 2.0 ** -30
    e2 = metrics.entry_errors(w, np.zeros_like(w), r_hi, r_lo, fmt)
    assert e2.fmt is None and e2.ulps is None and e2.bits is None
    assert len(K.entry_errors_flat.signatures) == 1


def test_round_to_odd_against_mpfr_toward_zero():
    """Round-to-odd of a double-double = MPFR's toward-zero rounding at 53 bits with the
    last bit set where inexact (float64 subnormals included); lo = 0 and non-finite hi
    pass through."""
    rng = np.random.default_rng(2)
    hi = rng.standard_normal(300) * np.ldexp(1.0, rng.integers(-1070, 60, 300))
    ulp = np.spacing(np.abs(hi))
    lo = ulp * rng.uniform(-0.5, 0.5, hi.size) * rng.choice([0.0, 1.0, 1.0], hi.size)
    lo = np.where(np.abs(lo) < 5e-324, 0.0, lo)
    hi[:3], lo[:3] = [np.inf, -np.inf, np.nan], [1.0, -1.0, 1.0]
    got = metrics.round_to_odd_f64(hi, lo)
    assert np.isinf(got[:2]).all() and np.isnan(got[2])
    ctx = gmpy2.context(precision=53, emin=-1073, emax=1024, subnormalize=True,
                        round=gmpy2.RoundToZero)
    for h, low, g in zip(hi[3:].tolist(), lo[3:].tolist(), got[3:].tolist()):
        exact = Fraction(h) + Fraction(low)
        with gmpy2.context(ctx):
            z = float(gmpy2.mpfr(gmpy2.mpq(exact)) * 1)
        if Fraction(z) != exact:                       # inexact: the last bit set
            z = float((np.array([z]).view(np.int64) | 1).view(np.float64)[0])
        assert g == z
    assert len(K.round_to_odd_flat.signatures) == 1
