"""atan, the function added by one entry of scalars.functions: correctly rounded in the
binary formats (binary32 sampled, every binary16/bfloat16/e4m3/e5m2 input) against MPFR in
matching contexts, exactly directed interval endpoints, fp32-real, mpmath, the dual rule
and the graph op record against mpmath, and the rational context's refusal."""
from __future__ import annotations

import gmpy2
import mpmath
import numpy as np
import pytest

from scalarlab import graph, scalars
from scalarlab.graph.optable import OPS
from scalarlab.scalars import formats
from scalarlab.scalars.values import Dual
from scalarlab.scalars.functions import FUNCTIONS

B32 = dict(precision=24, emin=-148, emax=128, subnormalize=True)
B16 = dict(precision=11, emin=-23, emax=16, subnormalize=True)


def _mpfr_atan(xs, ctx_kw, rnd=gmpy2.RoundToNearest):
    """MPFR's atan of each float64 in ``xs`` in a gmpy2 context with the format's
    precision, exponent range and subnormals, rounded ``rnd``."""
    c = gmpy2.context(round=rnd, **ctx_kw)
    return np.array([float(c.atan(gmpy2.mpfr(float(x), 53))) for x in xs])


def _same(got, want):
    got = np.asarray(got, dtype=np.float64).reshape(-1)
    ok = (((got == want) & (np.signbit(got) == np.signbit(want)))
          | (np.isnan(got) & np.isnan(want)))
    bad = np.flatnonzero(~ok)[:3]
    assert bad.size == 0, f"mismatches at {bad}: {got[bad]} vs MPFR {want[bad]}"


def _binary32_inputs(n=20_000):
    rng = np.random.default_rng(2026)
    f = formats.binary32
    main = formats.round_to_format(rng.uniform(-20, 20, n), f)
    tiny = formats.round_to_format(rng.standard_normal(n // 10) *
                                   np.exp2(rng.integers(-149, -10, n // 10)), f)
    huge = formats.round_to_format(rng.standard_normal(n // 10) *
                                   np.exp2(rng.integers(5, 127, n // 10)), f)
    bits = np.abs(formats.decode(rng.integers(0, 1 << 32, n), f))
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0 ** -149,
                         f.max_finite, -f.max_finite])
    x = np.concatenate([main, tiny, huge, bits[np.isfinite(bits)], specials])
    return x


def test_binary32_atan_is_mpfr_correctly_rounded():
    ctx = scalars.get("binary32")
    x = _binary32_inputs()
    _same(ctx.atan(x), _mpfr_atan(x, B32))


def test_binary32_atan_hard_cases_take_the_mpfr_path():
    """Tiny arguments (atan x just below x) and huge ones (just below pi/2) sit next to a
    rounding boundary of binary32; they must still round as MPFR says."""
    ctx = scalars.get("binary32")
    x = np.array([2.0 ** -12, 3 * 2.0 ** -13, -2.0 ** -12, 2.0 ** 24, 2.0 ** 100, -2.0 ** 60])
    x = formats.round_to_format(x, formats.binary32)
    _same(ctx.atan(x), _mpfr_atan(x, B32))


def test_every_binary16_input():
    ctx = scalars.get("binary16")
    x = formats.decode(np.arange(1 << 16), "binary16")
    _same(ctx.atan(x), _mpfr_atan(x, B16))


@pytest.mark.parametrize("name", ["bfloat16", "e4m3", "e5m2"])
def test_every_input_of_small_formats(name):
    fmt = formats.get(name)
    x = formats.decode(np.arange(1 << (1 + fmt.exp_bits + fmt.man_bits)), fmt)
    fctx = formats.gmpy2_context(fmt, "nearest_even")
    want = formats.round_to_format(
        np.array([float(fctx.atan(gmpy2.mpfr(float(t), 53))) for t in x]), fmt)
    _same(scalars.get(name).atan(x), want)


def test_binary64_is_mpfr_correctly_rounded():
    rng = np.random.default_rng(5)
    x = rng.standard_normal(2000) * 10.0 ** rng.integers(-8, 8, 2000)
    b64 = dict(precision=53, emin=-1073, emax=1024, subnormalize=True)
    _same(scalars.get("binary64").atan(x), _mpfr_atan(x, b64))


def test_fp32_real_is_mpfr_correctly_rounded():
    ctx = scalars.get("fp32-real")
    x = _binary32_inputs(2000)
    x = x[np.isfinite(x)][:2500]
    got = np.array([float(t) for t in ctx.atan(ctx.convert(x)).reshape(-1)])
    _same(got, _mpfr_atan(x, B32))


@pytest.mark.parametrize("base, kw", [("binary32", B32), ("binary16", B16)])
def test_interval_endpoints_are_the_directed_mpfr_values(base, kw):
    """lo = RD(atan a), hi = RU(atan b): contain MPFR's value and are the tightest."""
    ctx = scalars.get(f"interval:{base}")
    fmt = formats.get(base)
    rng = np.random.default_rng(7)
    a = formats.round_to_format(np.concatenate([rng.uniform(-30, 30, 800),
                                                rng.standard_normal(200) * 1e-3,
                                                [0.0, -0.0, 1e4, -1e4]]), fmt)
    b = formats.round_to_format(a + np.abs(rng.standard_normal(a.size)), fmt)
    b = np.maximum(a, b)
    r = ctx.atan(ctx.make(a, b))
    lo_want = _mpfr_atan(a, kw, gmpy2.RoundDown)
    hi_want = _mpfr_atan(b, kw, gmpy2.RoundUp)
    np.testing.assert_array_equal(r.lo, lo_want)
    np.testing.assert_array_equal(r.hi, hi_want)
    wide = gmpy2.context(precision=200)
    for i in range(0, a.size, 11):
        assert gmpy2.mpfr(float(r.lo[i]), 53) <= wide.atan(float(a[i]))
        assert wide.atan(float(b[i])) <= gmpy2.mpfr(float(r.hi[i]), 53)


def test_interval_float64_encloses_and_is_narrow():
    ctx = scalars.get("interval:float64")
    fn = FUNCTIONS["atan"]
    x = np.concatenate([np.random.default_rng(8).uniform(-1e3, 1e3, 3000), [1e300, -1e300]])
    r = ctx.atan(ctx.make(x, x))
    wide = gmpy2.context(precision=200)
    nearest = _mpfr_atan(x, dict(precision=53, emin=-1073, emax=1024, subnormalize=True))
    v = fn.eval_f64(x)
    def ordv(t):
        i = t.view(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFFFFFFFFFF), i)
    assert np.abs(ordv(v) - ordv(nearest)).max() <= fn.f64_ulps - 1
    for i in range(x.size):
        e = wide.atan(float(x[i]))
        assert gmpy2.mpfr(float(r.lo[i]), 53) <= e <= gmpy2.mpfr(float(r.hi[i]), 53), x[i]
    r = ctx.atan(ctx.make(-np.inf, np.inf))
    assert r.lo < -1.5707963 and r.hi > 1.5707963 and r.hi - r.lo < 3.1415927


def test_interval_mpmath_encloses():
    ctx = scalars.get("interval:mpmath:100")
    r = ctx.atan(ctx.make(["0.5", "-3"], ["2", "1e30"]))
    mp = mpmath.MPContext()
    mp.prec = 300
    for lo, hi, a, b in zip(r.lo, r.hi, ["0.5", "-3"], ["2", "1e30"]):
        assert mp.mpf(lo) <= mp.atan(mp.mpf(a)) and mp.atan(mp.mpf(b)) <= mp.mpf(hi)
        assert mp.mpf(hi) - mp.atan(mp.mpf(b)) < mp.mpf(2) ** -90


def test_mpmath_context_and_complex128():
    ctx = scalars.get("mpmath:200")
    y = ctx.atan(ctx.convert(["0.5", "-7"]))
    mp = mpmath.MPContext()
    mp.prec = 400
    for v, t in zip(y, ["0.5", "-7"]):
        assert abs(mp.mpf(v) - mp.atan(mp.mpf(t))) <= abs(mp.atan(mp.mpf(t))) * mp.mpf(2) ** -198
    c = scalars.get("complex128")
    z = np.array([0.5 + 0.25j, -2j + 0.1])
    np.testing.assert_allclose(c.atan(c.convert(z)), np.arctan(z), rtol=1e-15)


def test_rational_refuses_with_a_context_error_naming_op_and_context():
    ctx = scalars.get("rational")
    assert ctx.atan(ctx.convert(["0", "0"])).tolist() == [0, 0]
    with pytest.raises(scalars.ContextError,
                       match=r"context rational cannot compute atan.*1/3.*irrational"):
        ctx.atan(ctx.convert(["0", "1/3"]))
    iv = scalars.get("interval:rational")
    assert not iv.supports("atan")
    with pytest.raises(scalars.ContextError, match="atan"):
        iv.atan(iv.make("0", "1"))


POINTS = ["-3", "-0.5", "0", "0.25", "1", "40"]


def test_dual_rule_against_mpmath_diff():
    mp = mpmath.MPContext()
    mp.prec = 300
    ctx = scalars.get("dual:mpmath:200")
    r = ctx.atan(ctx.make(POINTS, ["1"] * len(POINTS)))
    for t, p in zip(r.tangent, POINTS):
        want = mp.diff(mp.atan, mp.mpf(p))
        assert abs(mp.mpf(t) - want) <= mp.mpf(2) ** -190 * (1 + abs(want))
        assert abs(want - 1 / (1 + mp.mpf(p) ** 2)) < mp.mpf(2) ** -250


def test_op_record_forward_jvp_vjp_against_mpmath():
    rec = OPS["atan"]
    assert rec.monotone == "increasing" and rec.elementwise
    mp = mpmath.MPContext()
    mp.prec = 300
    ctx = scalars.get("mpmath:200")
    x = ctx.convert(POINTS)
    y = rec.forward(ctx, [x], {}, 0)
    jvp = rec.jvp(ctx, [x], [ctx.ones((len(POINTS),))], y, {}, 0)
    (vjp,) = rec.vjp(ctx, ctx.ones((len(POINTS),)), [x], y, {}, 0)
    for i, p in enumerate(POINTS):
        assert abs(mp.mpf(y[i]) - mp.atan(mp.mpf(p))) <= mp.mpf(2) ** -195
        want = mp.diff(mp.atan, mp.mpf(p))
        assert abs(mp.mpf(jvp[i]) - want) <= mp.mpf(2) ** -190
        assert abs(mp.mpf(vjp[i]) - want) <= mp.mpf(2) ** -190
    # over a dual context the record's tangent is its JVP
    D = scalars.get("dual:mpmath:200")
    d = rec.forward(D, [Dual(x, ctx.ones((len(POINTS),)))], {}, 0)
    assert [mp.mpf(t) for t in d.tangent] == [mp.mpf(t) for t in jvp]


def test_atan_node_in_a_graph_under_interval_and_binary_contexts():
    g = graph.Graph([graph.Node(0, [], graph.OpKind("input"), [3]),
                     graph.Node(1, [0], graph.OpKind("atan"), [3])])
    x = np.array([0.5, -2.0, 10.0])
    y32 = graph.denote(g, graph.Payload(), {0: x}, scalars.get("binary32"))
    _same(y32, _mpfr_atan(x, B32))
    box = graph.denote(g, graph.Payload(), {0: x}, scalars.get("interval:binary32"))
    assert (box.lo <= y32).all() and (y32 <= box.hi).all()
