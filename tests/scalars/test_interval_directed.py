"""Directed endpoints of interval + - * / sqrt against MPFR RoundDown / RoundUp.

Degenerate intervals [a, a] op [b, b] must come back as exactly [RD(a op b), RU(a op b)]
in the base format.  The oracle is a gmpy2 context with the format's precision, exponent
range and subnormalisation; the inputs mix random bit patterns with adversarial cases
(near-cancellation, tiny addends, products/quotients on the subnormal boundary and at the
overflow threshold, exact results, which hit the RD_p(RN_53(x)) != RD_p(x) trap).
"""
from __future__ import annotations

from fractions import Fraction

import gmpy2
import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.scalars.kernels import directed as D
F32_MAX = float(np.finfo(np.float32).max)


def _mpfr_ctx(prec, emin_ieee, emax_ieee, mode):
    """gmpy2 context reproducing a binary format (IEEE emin/emax convention)."""
    return gmpy2.context(precision=prec, emin=emin_ieee - prec + 2, emax=emax_ieee + 1,
                         subnormalize=True, round=mode)


def _oracle(ctxs, op, a, b=None):
    with np.errstate(all="ignore"):
        return _oracle_raw(ctxs, op, a, b)


def _oracle_raw(ctxs, op, a, b=None):
    out = []
    for c in ctxs:
        f = getattr(c, op)
        if b is None:
            out.append(np.frompyfunc(lambda x: float(f(x)), 1, 1)(a).astype(float))
        else:
            out.append(np.frompyfunc(lambda x, y: float(f(x, y)), 2, 1)(a, b).astype(float))
    return out


def _same(x, y):
    return (x == y) | (np.isnan(x) & np.isnan(y))


def _f32_cases(n, seed):
    """Random binary32 pairs plus adversarial families, as float64 arrays."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2 ** 32, size=(2, n), dtype=np.uint64).astype(np.uint32)
    with np.errstate(all="ignore"):
        a, b = bits.view(np.float32).astype(np.float64)
    bad = ~np.isfinite(a) | ~np.isfinite(b)
    a[bad], b[bad] = 1.5, -0.75
    k = n // 8
    r32 = lambda x: x.astype(np.float32).astype(np.float64)
    # near-equal operands (cancellation in sub, quotients near 1)
    b[:k] = r32(a[:k] * (1 + rng.integers(-4, 5, k) * 2.0 ** -23))
    # tiny addends: a + b rounds back to a, the error sign decides the directed result
    b[k:2 * k] = r32(a[k:2 * k] * 2.0 ** -rng.integers(24, 60, k))
    # moderate magnitudes (products/quotients neither overflow nor underflow)
    a[2 * k:3 * k] = r32(rng.standard_normal(k))
    b[2 * k:3 * k] = r32(rng.standard_normal(k))
    # subnormal boundary: products / quotients landing around 2^-126 .. 2^-149
    a[3 * k:4 * k] = r32(np.ldexp(rng.uniform(1, 2, k), -rng.integers(60, 90, k)))
    b[3 * k:4 * k] = r32(np.ldexp(rng.uniform(1, 2, k), -rng.integers(40, 70, k)))
    # overflow threshold
    a[4 * k:5 * k] = r32(F32_MAX * rng.uniform(0.4, 1.0, k))
    b[4 * k:5 * k] = r32(np.where(rng.random(k) < 0.5, F32_MAX * rng.uniform(0.4, 1.0, k),
                                  rng.uniform(0.99, 2.5, k)))
    # small integers: many exact results
    a[5 * k:6 * k] = rng.integers(-64, 65, k)
    b[5 * k:6 * k] = rng.integers(1, 65, k) * rng.choice([-1, 1], k)
    return a, b


@pytest.fixture(scope="module")
def f32_cases():
    return _f32_cases(100_000, 11)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_binary32_endpoints_match_mpfr(op, f32_cases):
    a, b = f32_cases
    if op == "div":
        b = np.where(b == 0, 1.0, b)
    ctx = scalars.get("interval:binary32")
    r = getattr(ctx, op)(ctx.make(a, a), ctx.make(b, b))
    dn = _mpfr_ctx(24, -126, 127, gmpy2.RoundDown)
    up = _mpfr_ctx(24, -126, 127, gmpy2.RoundUp)
    lo, hi = _oracle([dn, up], op, a, b)
    assert _same(r.lo, lo).all(), (op, a[~_same(r.lo, lo)][:3], b[~_same(r.lo, lo)][:3])
    assert _same(r.hi, hi).all(), (op, a[~_same(r.hi, hi)][:3], b[~_same(r.hi, hi)][:3])


def test_binary32_sqrt_endpoints_match_mpfr(f32_cases):
    a = np.abs(f32_cases[0])
    sq = np.square(np.arange(1, 2000, dtype=np.float64))   # exact squares
    a = np.concatenate([a, sq, sq * 2.0 ** -140, [0.0, 2.0 ** -149, F32_MAX]])
    ctx = scalars.get("interval:binary32")
    r = ctx.sqrt(ctx.make(a, a))
    lo, hi = _oracle([_mpfr_ctx(24, -126, 127, m) for m in (gmpy2.RoundDown, gmpy2.RoundUp)],
                     "sqrt", a)
    assert _same(r.lo, lo).all() and _same(r.hi, hi).all()


def _f64_cases(n, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, 2 ** 64, size=(2, n), dtype=np.uint64).view(np.float64)
    a, b = a.copy(), b.copy()
    bad = ~np.isfinite(a) | ~np.isfinite(b)
    a[bad], b[bad] = 3.0, -0.5
    k = n // 6
    b[:k] = a[:k] * (1 + rng.integers(-3, 4, k) * 2.0 ** -52)
    b[k:2 * k] = a[k:2 * k] * 2.0 ** -rng.integers(50, 120, k)
    a[2 * k:3 * k] = rng.standard_normal(k)
    b[2 * k:3 * k] = rng.standard_normal(k)
    a[3 * k:4 * k] = np.ldexp(rng.uniform(1, 2, k), -rng.integers(500, 560, k))
    b[3 * k:4 * k] = np.ldexp(rng.uniform(1, 2, k), -rng.integers(480, 540, k))
    a[4 * k:5 * k] = np.finfo(np.float64).max * rng.uniform(0.5, 1.0, k)
    return a, b


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_float64_endpoints_match_mpfr_and_enclose_exact(op):
    a, b = _f64_cases(20_000, 5)
    if op == "div":
        b = np.where(b == 0, 1.0, b)
    ctx = scalars.get("interval:float64")
    r = getattr(ctx, op)(ctx.make(a, a), ctx.make(b, b))
    lo, hi = _oracle([_mpfr_ctx(53, -1022, 1023, m) for m in (gmpy2.RoundDown, gmpy2.RoundUp)],
                     op, a, b)
    assert _same(r.lo, lo).all() and _same(r.hi, hi).all()
    # exact rationals: lo <= a op b <= hi, and lo/hi are neighbours (or equal)
    fn = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y,
          "mul": lambda x, y: x * y, "div": lambda x, y: x / y}[op]
    for i in range(0, a.size, 97):
        q = fn(gmpy2.mpq(a[i]), gmpy2.mpq(b[i]))
        if np.isfinite(r.lo[i]):
            assert gmpy2.mpq(r.lo[i]) <= q
        if np.isfinite(r.hi[i]):
            assert q <= gmpy2.mpq(r.hi[i])
        if np.isfinite(r.lo[i]) and np.isfinite(r.hi[i]):
            assert r.hi[i] == r.lo[i] or np.nextafter(r.lo[i], np.inf) == r.hi[i]


def test_float64_sqrt_matches_mpfr():
    a = np.abs(_f64_cases(20_000, 6)[0])
    ctx = scalars.get("interval:float64")
    r = ctx.sqrt(ctx.make(a, a))
    lo, hi = _oracle([_mpfr_ctx(53, -1022, 1023, m) for m in (gmpy2.RoundDown, gmpy2.RoundUp)],
                     "sqrt", a)
    assert _same(r.lo, lo).all() and _same(r.hi, hi).all()


def test_double_rounding_trap_is_avoided():
    # 1 + 2^-30 in float64 is exact; 1 + 2^-60 rounds to 1.0 in float64 (RN), which IS a
    # binary32 value; the exact sum is above it, so RU must be next_up_32(1), not 1.
    ctx = scalars.get("interval:binary32")
    one = ctx.make(1.0, 1.0)
    tiny = ctx.make(2.0 ** -60, 2.0 ** -60)
    r = ctx.add(one, tiny)
    assert r.lo == 1.0 and r.hi == 1.0 + 2.0 ** -23
    r = ctx.sub(one, tiny)
    assert r.lo == 1.0 - 2.0 ** -24 and r.hi == 1.0


@pytest.mark.parametrize("fmt_name, prec, emin, emax, maxf", [
    ("e4m3", 4, -6, 8, 448.0),
    pytest.param("e5m2", 3, -14, 15, 57344.0, marks=pytest.mark.slow)])
def test_fp8_all_pairs_add_mul_div(fmt_name, prec, emin, emax, maxf):
    """Every pair of finite fp8 values; beyond max_finite RD clamps, RU goes to +inf
    (e4m3 has no infinities: an infinite endpoint means unbounded)."""
    from scalarlab.scalars import formats
    fmt = formats.get(fmt_name)
    vals = np.unique(np.abs(formats.decode(np.arange(256), fmt)))
    vals = vals[np.isfinite(vals)]
    vals = np.concatenate([-vals[::-1], vals])
    a, b = np.meshgrid(vals, vals)
    a, b = a.reshape(-1), b.reshape(-1)
    ctx = scalars.get(f"interval:{fmt_name}")
    for op in ("add", "mul", "div"):
        bb = np.where(b == 0, 1.0, b) if op == "div" else b
        r = getattr(ctx, op)(ctx.make(a, a), ctx.make(bb, bb))
        lo, hi = _oracle([_mpfr_ctx(prec, emin, emax, m)
                          for m in (gmpy2.RoundDown, gmpy2.RoundUp)], op, a, bb)
        # the MPFR grid continues above max_finite up to 2^(emax+1): map those to the
        # format's semantics (no value above max_finite).
        lo = np.where(lo > maxf, maxf, np.where(lo < -maxf, -np.inf, lo))
        hi = np.where(hi > maxf, np.inf, np.where(hi < -maxf, -maxf, hi))
        assert _same(r.lo, lo).all(), op
        assert _same(r.hi, hi).all(), op


def test_directed_rounding_onto_named_formats_matches_formats_module():
    from scalarlab.scalars import formats
    for name in ("binary32", "bfloat16", "binary16", "e4m3", "e5m2", "tf32"):
        fmt = formats.get(name)
        rng = np.random.default_rng(3)
        x = np.concatenate([rng.standard_normal(2000) * 10.0 ** rng.integers(-8, 8, 2000),
                            [0.0, fmt.max_finite, fmt.min_subnormal]])
        x = x[np.abs(x) < fmt.max_finite]
        np.testing.assert_array_equal(D.round_down(x, fmt), formats.round_to_format(x, fmt, "down"))
        np.testing.assert_array_equal(D.round_up(x, fmt), formats.round_to_format(x, fmt, "up"))


def test_rational_fallback_paths_are_exact():
    # Operands outside the EFT-safe range go through exact rationals.
    a = np.array([2.0 ** -1000, 3.0 * 2.0 ** -1070, 1e308, 2.0 ** 950, 5e-324])
    b = np.array([3.0 ** -200, 7.0 * 2.0 ** 40, 10.0, 2.0 ** 100, 3.0])
    for fn, op in ((D.mul_dir, "mul"), (D.div_dir, "div"), (D.add_dir, "add")):
        lo, hi = fn(a, b)
        for i in range(a.size):
            q = {"mul": Fraction(a[i]) * Fraction(b[i]), "div": Fraction(a[i]) / Fraction(b[i]),
                 "add": Fraction(a[i]) + Fraction(b[i])}[op]
            assert (lo[i] == -np.inf) or Fraction(lo[i]) <= q
            assert (hi[i] == np.inf) or q <= Fraction(hi[i])
            with np.errstate(all="ignore"):
                assert lo[i] == hi[i] or np.nextafter(lo[i], np.inf) == hi[i]
