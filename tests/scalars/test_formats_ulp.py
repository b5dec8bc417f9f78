"""ulp, next_up, next_down, ulp_distance, bits_of_error, checked by hand from bit patterns."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from scalarlab.scalars import formats as F
from test_formats_oracle import same


def ordinal_table(fmt):
    """(values, ordinals) of every non-NaN code of a <= 16-bit format, by hand from the
    bit pattern: a code with the sign bit clear counts up from +0, one with it set counts
    down from -0 (both zeros are ordinal 0)."""
    codes = np.arange(1 << fmt.total_bits, dtype=np.int64)
    vals = F.decode(codes, fmt)
    sign = codes >> (fmt.total_bits - 1)
    mag = codes & ((1 << (fmt.total_bits - 1)) - 1)
    ords = np.where(sign == 1, -mag, mag)
    keep = ~np.isnan(vals)
    if not fmt.subnormals:
        keep &= ~((mag > 0) & (mag < (1 << fmt.man_bits)))
    vals, ords = vals[keep], ords[keep]
    if not fmt.subnormals:  # the unused subnormal codes are skipped in the numbering
        gap = (1 << fmt.man_bits) - 1
        ords = np.where(ords > 0, ords - gap, np.where(ords < 0, ords + gap, 0))
    return vals, ords


def view16(v, dt):
    return np.asarray(v).astype(dt)


def test_binary16_ulp_next_against_numpy_float16_every_value():
    codes = np.arange(1 << 16, dtype=np.uint16)
    h = codes.view(np.float16)
    h = h[~np.isnan(h)]
    x = h.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        nu = np.nextafter(h, np.float16(np.inf)).astype(np.float64)
        nd = np.nextafter(h, np.float16(-np.inf)).astype(np.float64)
        sp = np.abs(np.spacing(np.abs(h))).astype(np.float64)
    assert same(F.next_up(x, F.binary16), nu).all()
    assert same(F.next_down(x, F.binary16), nd).all()
    fin = np.isfinite(x) & (np.abs(x) < 65504)
    assert same(F.ulp(x[fin], F.binary16), sp[fin]).all()
    assert F.ulp(65504.0, F.binary16) == 32.0  # the top binade's spacing


def test_binary32_ulp_next_against_numpy_float32_sample():
    codes = np.random.default_rng(4).integers(0, 1 << 32, 200_000).astype(np.uint32)
    f = codes.view(np.float32)
    f = np.concatenate([f[~np.isnan(f)], np.array([0, -0.0, 2 ** -149, -2 ** -149, 2 ** -126,
                                                   np.finfo(np.float32).max, np.inf, -np.inf],
                                                  dtype=np.float32)])
    x = f.astype(np.float64)
    with np.errstate(over="ignore"):
        nu = np.nextafter(f, np.float32(np.inf)).astype(np.float64)
        nd = np.nextafter(f, np.float32(-np.inf)).astype(np.float64)
        sp = np.abs(np.spacing(np.abs(f))).astype(np.float64)
    assert same(F.next_up(x, F.binary32), nu).all()
    assert same(F.next_down(x, F.binary32), nd).all()
    fin = np.isfinite(x) & (np.abs(x) < np.finfo(np.float32).max)
    assert same(F.ulp(x[fin], F.binary32), sp[fin]).all()


@pytest.mark.parametrize("fmt", [F.bfloat16, F.e4m3, F.e5m2, F.Format(4, 3, subnormals=False),
                                 F.Format(3, 2, has_inf=False)], ids=lambda f: f.name)
def test_next_up_down_and_distance_from_codes(fmt):
    vals, ords = ordinal_table(fmt)
    order = np.argsort(ords, kind="stable")
    by_ord = dict(zip(ords[order].tolist(), vals[order].tolist()))
    lo, hi = ords.min(), ords.max()
    want_up = np.array([by_ord.get(o + 1, np.nan) if o < hi else
                        (np.nan if o == hi else 0) for o in ords])
    want_dn = np.array([by_ord.get(o - 1, np.nan) if o > lo else np.nan for o in ords])
    got_up = F.next_up(vals, fmt)
    got_dn = F.next_down(vals, fmt)
    top_has_inf = fmt.has_inf  # the largest ordinal is +inf, whose next_up is itself
    if top_has_inf:
        want_up = np.where(vals == np.inf, np.inf, want_up)
        want_dn = np.where(vals == -np.inf, -np.inf, want_dn)
    assert ((got_up == want_up) | (np.isnan(got_up) & np.isnan(want_up))).all()
    assert ((got_dn == want_dn) | (np.isnan(got_dn) & np.isnan(want_dn))).all()
    # next_up(-smallest) is -0.0 and next_down(+smallest) is +0.0 (IEEE).
    s = fmt.min_subnormal
    assert same(F.next_up(-s, fmt), -0.0) and same(F.next_down(s, fmt), 0.0)
    # Ordinal distance between every value and a few anchors equals the ordinal gap.
    for anchor in (0, 1, -1, hi, lo):
        av = by_ord[anchor]
        d = F.ulp_distance(vals, av, fmt)
        assert d.dtype == np.int64
        assert (d == np.abs(ords - anchor)).all()


def test_ulp_distance_pairs_binary16():
    vals, ords = ordinal_table(F.binary16)
    rng = np.random.default_rng(8)
    i, j = rng.integers(0, vals.size, (2, 100_000))
    assert (F.ulp_distance(vals[i], vals[j], F.binary16) == np.abs(ords[i] - ords[j])).all()
    be = F.bits_of_error(vals[i], vals[j], F.binary16)
    assert np.allclose(be, np.log2(1 + np.abs(ords[i] - ords[j])), rtol=0, atol=1e-12)


def test_ulp_distance_binary64_by_hand_with_python_ints():
    rng = np.random.default_rng(9)
    bits = rng.integers(0, 1 << 63, 20_000, dtype=np.int64)
    with np.errstate(invalid="ignore"):
        x = bits.view(np.float64) * rng.choice([-1.0, 1.0], bits.size)
    x = np.concatenate([x[~np.isnan(x)], [0.0, -0.0, 5e-324, -5e-324, np.inf, -np.inf,
                                          1.7976931348623157e308]])
    y = rng.permutation(x)
    y[:4] = [np.inf, -np.inf, np.inf, -5e-324]
    x[:4] = [-np.inf, np.inf, -0.0, 5e-324]

    def ordinal(v):
        b = int(np.array(v).view(np.int64)) & ((1 << 63) - 1)
        return -b if np.signbit(v) else b

    want = [abs(ordinal(a) - ordinal(b)) for a, b in zip(x.tolist(), y.tolist())]
    d = F.ulp_distance(x, y, F.binary64)
    assert d.dtype == np.uint64
    assert [int(v) for v in d] == want
    assert int(d[0]) == 2 * 0x7FF0000000000000 and int(d[2]) == 0x7FF0000000000000
    assert int(d[3]) == 2


def test_ulp_distance_nan_convention_and_signed_zero():
    f = F.binary16
    top = 31 * 1024  # ordinal of +inf
    d = F.ulp_distance([np.nan, np.nan, 1.0, 0.0, -0.0], [np.nan, 1.0, np.nan, -0.0, 0.0], f)
    assert d.tolist() == [0, 2 * top + 1, 2 * top + 1, 0, 0]
    assert F.ulp_distance(-np.inf, np.inf, f) == 2 * top  # one less than NaN's distance
    assert F.bits_of_error(np.nan, 1.0, f) == np.log2(2 * top + 2)
    d64 = F.ulp_distance(np.nan, 0.0, F.binary64)
    assert int(d64) == 2 * 0x7FF0000000000000 + 1
    d8 = F.ulp_distance(np.nan, 0.0, F.e4m3)
    assert int(d8) == 2 * 126 + 1  # e4m3 has no inf: top ordinal is 448's (0x7E)


def test_bits_of_error_values():
    f = F.binary32
    assert F.bits_of_error(1.0, 1.0, f) == 0.0
    one_up = float(np.nextafter(np.float32(1), np.float32(2)))
    assert F.bits_of_error(1.0, one_up, f) == 1.0
    assert F.bits_of_error(1.0, 2.0, f) == np.log2(1 + 2 ** 23)


def test_ulp_special_values_and_non_members():
    f = F.binary16
    r = F.ulp([0.0, -0.0, np.inf, -np.inf, np.nan, 0.1, -3.0, 1e-9], f)
    assert same(r, [2 ** -24, 2 ** -24, np.inf, np.inf, np.nan, 2 ** -14, 2 ** -9,
                    2 ** -24]).all()
    g = F.Format(5, 10, subnormals=False)
    assert same(F.ulp([0.0, 2 ** -20, 2 ** -14], g), [2 ** -14, 2 ** -14, 2 ** -24]).all()
    # next_up of a non-member is the least member above it.
    assert F.next_up(0.1, f) == float(np.nextafter(np.float16(0.1), np.float16(1)))
    assert F.next_up(1e9, f) == np.inf and np.isnan(F.next_up(1e9, F.e4m3))
    assert F.next_up(-1e9, F.e4m3) == -448.0 and F.next_up(-np.inf, F.e4m3) == -448.0
    assert np.isnan(F.next_up(np.inf, F.e4m3)) and np.isnan(F.next_up(448.0, F.e4m3))
    sat = F.Format(5, 2, saturate=True)
    assert F.next_up(-np.inf, sat) == -57344.0 and F.next_up(57344.0, sat) == np.inf
    assert F.next_up(-1e9, sat) == -57344.0


def test_ulp_distance_errors():
    with pytest.raises(F.ContextError, match="0.1 at index \\(1,\\) is not a binary16 value"):
        F.ulp_distance([1.0, 0.1], [1.0, 1.0], F.binary16)
    with pytest.raises(F.ContextError, match="do not broadcast"):
        F.ulp_distance(np.zeros(3), np.zeros(4), F.binary16)
    with pytest.raises(F.ContextError, match="infinity"):
        F.ulp_distance(np.inf, 1.0, F.e4m3)
