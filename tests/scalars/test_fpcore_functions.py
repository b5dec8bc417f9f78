"""The unary functions FPCore adds (exp2 expm1 log10 log2 log1p cbrt tan asin acos sinh
cosh asinh acosh atanh erfc tgamma lgamma) and the rounding functions (ceil floor trunc
round nearbyint), each one entry of scalars.functions: correctly rounded in the binary
formats against MPFR in matching contexts (every e4m3/e5m2 input, a slice of binary16 in
the default run and all of it under ``-m slow``, sampled binary32/binary64/fp32-real),
exactly directed interval endpoints (monotone pieces, cosh's and tgamma's minimum, open
domain ends, tan's poles), float64 enclosures within the declared ulps, mpmath, complex128,
exact rational values and refusals, the dual rule against mpmath's numerical derivative."""
from __future__ import annotations

import math

import gmpy2
import mpmath
import numpy as np
import pytest

from scalarlab import graph, scalars
from scalarlab.scalars import formats
from scalarlab.scalars.base import to_fraction
from scalarlab.scalars.functions import FUNCTIONS

# The test's own map to MPFR (gmpy2 context methods); lgamma is log|Gamma| (C's lgamma).
MPFR = {"exp2": "exp2", "expm1": "expm1", "log10": "log10", "log2": "log2",
        "log1p": "log1p", "cbrt": "cbrt", "tan": "tan", "asin": "asin", "acos": "acos",
        "sinh": "sinh", "cosh": "cosh", "asinh": "asinh", "acosh": "acosh",
        "atanh": "atanh", "erfc": "erfc", "tgamma": "gamma", "lgamma": None,
        "ceil": "rint_ceil", "floor": "rint_floor", "trunc": "rint_trunc",
        "round": "rint_round", "nearbyint": "rint"}
NAMES = sorted(MPFR)
ROUNDING = ("ceil", "floor", "trunc", "round", "nearbyint")
# Argument ranges for the sampled checks (inside the domain, across the interesting parts).
RANGE = {"exp2": (-30, 30), "expm1": (-5, 5), "log10": (1e-3, 1e3), "log2": (1e-3, 1e3),
         "log1p": (-0.99, 20), "cbrt": (-100, 100), "tan": (-1.5, 1.5), "asin": (-1, 1),
         "acos": (-1, 1), "sinh": (-12, 12), "cosh": (-12, 12), "asinh": (-100, 100),
         "acosh": (1, 100), "atanh": (-0.999, 0.999), "erfc": (-4, 9),
         "tgamma": (0.02, 30), "lgamma": (0.02, 60), "ceil": (-20, 20), "floor": (-20, 20),
         "trunc": (-20, 20), "round": (-20, 20), "nearbyint": (-20, 20)}
B32 = dict(precision=24, emin=-148, emax=128, subnormalize=True)
B64 = dict(precision=53, emin=-1073, emax=1024, subnormalize=True)


def mpfr_of(name, ctx, t):
    x = gmpy2.mpfr(t, 400) if isinstance(t, str) else gmpy2.mpfr(float(t), 53)
    if MPFR[name] is None:
        return ctx.lgamma(x)[0]
    return getattr(ctx, MPFR[name])(x)


def oracle(name, xs, ctx_kw=None, rnd=gmpy2.RoundToNearest, fmt=None):
    """MPFR's value of f at each float64 of xs in a matching gmpy2 context."""
    c = formats.gmpy2_context(fmt, "nearest_even") if fmt is not None else \
        gmpy2.context(round=rnd, **ctx_kw)
    out = np.array([float(mpfr_of(name, c, t)) for t in xs])
    return formats.round_to_format(out, fmt) if fmt is not None else out


def exact(v):
    """The exact value of an mpmath number as an mpq (str() would round it)."""
    return gmpy2.mpq(to_fraction(v))


def same(got, want, what=""):
    got = np.asarray(got, dtype=np.float64).reshape(-1)
    want = np.asarray(want, dtype=np.float64).reshape(-1)
    ok = (((got == want) & (np.signbit(got) == np.signbit(want)))
          | (np.isnan(got) & np.isnan(want)))
    bad = np.flatnonzero(~ok)[:3]
    assert bad.size == 0, f"{what}: mismatches at {bad}: {got[bad]} vs MPFR {want[bad]}"


def all_values(fmt):
    fmt = formats.get(fmt)
    return formats.decode(np.arange(1 << (1 + fmt.exp_bits + fmt.man_bits)), fmt)


def samples(name, fmt, n, seed=0):
    rng = np.random.default_rng(seed)
    a, b = RANGE[name]
    x = np.concatenate([rng.uniform(a, b, n), rng.standard_normal(n // 4) * 10.0 **
                        rng.integers(-12, 3, n // 4), [0.0, -0.0, 1.0, -1.0, 0.5, 2.0,
                                                       np.inf, -np.inf, np.nan]])
    return formats.round_to_format(x, formats.get(fmt))


# ------------------------------------------------------------- binary formats
@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
@pytest.mark.parametrize("name", NAMES)
def test_every_input_of_8bit_formats(name, fmt):
    x = all_values(fmt)
    with np.errstate(all="ignore"):
        same(getattr(scalars.get(fmt), name)(x), oracle(name, x, fmt=formats.get(fmt)),
             f"{name} {fmt}")


@pytest.mark.parametrize("name", NAMES)
def test_binary16_slice(name):
    """Every 23rd bit pattern (2850 values across all binades and both signs)."""
    x = all_values("binary16")[::23]
    same(scalars.get("binary16").__getattribute__(name)(x),
         oracle(name, x, fmt=formats.binary16), name)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["binary16", "bfloat16"])
@pytest.mark.parametrize("name", NAMES)
def test_every_input_of_16bit_formats(name, fmt):
    x = all_values(fmt)
    same(getattr(scalars.get(fmt), name)(x), oracle(name, x, fmt=formats.get(fmt)),
         f"{name} {fmt}")


@pytest.mark.parametrize("name", NAMES)
def test_binary32_and_fp32_real_sampled(name):
    x = samples(name, "binary32", 1500)
    same(getattr(scalars.get("binary32"), name)(x), oracle(name, x, B32), name)
    fin = x[np.isfinite(x)][:200]
    fin = fin[~FUNCTIONS[name].domain.outside(fin)] if FUNCTIONS[name].domain else fin
    ctx = scalars.get("fp32-real")
    got = np.array([float(t) for t in getattr(ctx, name)(ctx.convert(fin)).reshape(-1)])
    want = oracle(name, fin, dict(B32, emin=-148, emax=1 << 20))
    same(got, want, f"fp32-real {name}")


@pytest.mark.parametrize("name", NAMES)
def test_binary64_is_mpfr_correctly_rounded(name):
    x = samples(name, "binary64", 150, seed=1)
    same(getattr(scalars.get("binary64"), name)(x), oracle(name, x, B64), name)


def test_hard_cases_near_rounding_boundaries():
    """Exact values (exp2 at integers, log2 of powers of 2) and values just off a format
    value (expm1 and tan of tiny x, erfc far out) take the MPFR path and still agree."""
    ctx = scalars.get("binary32")
    f = formats.binary32
    cases = {"exp2": [3.0, -126.0, -149.0, -150.0, 127.0, 128.0, 0.5],
             "log2": [8.0, 2.0 ** -140, 2.0 ** 100, 1.0],
             "expm1": [2.0 ** -30, -(2.0 ** -40), 1e-8],
             "tan": [2.0 ** -13, 1.5707963705062866, -1e-7],
             "erfc": [9.5, 10.0, -10.0], "cosh": [2.0 ** -12, 89.0, 90.0],
             "tgamma": [35.0, 36.0, 1.0, 2.0, 3.0, -2.5, -40.5], "lgamma": [1.0, 2.0, -2.5]}
    for name, xs in cases.items():
        x = formats.round_to_format(np.array(xs), f)
        same(getattr(ctx, name)(x), oracle(name, x, B32), name)


# ------------------------------------------------------------- intervals
def _exact_extremes(name, a, b):
    """(min, max) of f over [a, b] at 300 bits: the ends, and the critical point inside."""
    c = gmpy2.context(precision=300)
    vals = [mpfr_of(name, c, a), mpfr_of(name, c, b)]
    for xc, vc in CRITICAL.get(name, []):
        if a <= xc <= b:
            vals.append(vc)
    return min(vals), max(vals)


def _critical():
    """cosh's minimum 1 at 0; tgamma's and lgamma's at the root of digamma (mpmath)."""
    with mpmath.workprec(320):
        x0 = mpmath.findroot(mpmath.digamma, 1.4616)
        g0 = mpmath.gamma(x0)
        m = lambda v: gmpy2.mpfr(mpmath.nstr(v, 95), 300)  # noqa: E731
        return {"cosh": [(0, gmpy2.mpfr(1))], "tgamma": [(m(x0), m(g0))],
                "lgamma": [(m(x0), m(mpmath.log(g0)))]}


CRITICAL = _critical()


@pytest.mark.parametrize("base, kw", [("binary32", B32), ("binary16",
                         dict(precision=11, emin=-23, emax=16, subnormalize=True))])
@pytest.mark.parametrize("name", NAMES)
def test_interval_endpoints_are_exactly_directed(name, base, kw):
    """lo = RD(min f), hi = RU(max f) over [a, b]: the tightest enclosure on the grid."""
    ctx = scalars.get(f"interval:{base}")
    fmt = formats.get(base)
    rng = np.random.default_rng(3)
    lo_r, hi_r = RANGE[name]
    a = formats.round_to_format(rng.uniform(lo_r, hi_r, 120), fmt)
    width = (hi_r - lo_r) * 0.02 if name != "tan" else 0.2
    b = np.minimum(formats.round_to_format(a + rng.uniform(0, width, a.size), fmt),
                   formats.round_to_format(np.array(float(hi_r)), fmt))
    b = np.maximum(a, b)
    if name in ("cosh",):
        a, b = np.append(a, [-1.0, -3.0]), np.append(b, [2.0, 0.0])
    if name in ("tgamma", "lgamma"):
        a, b = np.append(a, [1.0, 0.5]), np.append(b, [2.0, 1.5])
    r = getattr(ctx, name)(ctx.make(a, b))
    dn = gmpy2.context(round=gmpy2.RoundDown, **kw)
    up = gmpy2.context(round=gmpy2.RoundUp, **kw)
    for i in range(a.size):
        mn, mx = _exact_extremes(name, float(a[i]), float(b[i]))
        assert r.lo[i] == float(dn.plus(mn)), (name, a[i], b[i], r.lo[i], mn)
        assert r.hi[i] == float(up.plus(mx)), (name, a[i], b[i], r.hi[i], mx)


def test_interval_domain_ends_poles_and_refusals():
    ctx = scalars.get("interval:binary32")
    r = ctx.log1p(ctx.make([-1.0], [0.0]))
    assert r.lo[0] == -np.inf and r.hi[0] == 0.0
    r = ctx.atanh(ctx.make([-1.0, -0.5], [1.0, 1.0]))
    assert list(r.lo) == [-np.inf, -0.5493061542510986] and list(r.hi) == [np.inf, np.inf]
    r = ctx.tgamma(ctx.make([0.0], [3.0]))
    assert r.hi[0] == np.inf and r.lo[0] == float(np.float32(0.8856031894683838))
    r = ctx.asin(ctx.make([-1.0], [1.0]))
    assert r.lo[0] == -float(np.float32(np.pi / 2)) and r.hi[0] == float(np.float32(np.pi / 2))
    # tan: an interval around the pole at pi/2 is the whole line; one beside it is not
    r = ctx.tan(ctx.make([1.0, 1.0, -4.0], [2.0, 1.5, -3.0]))
    assert list(r.lo[:1]) == [-np.inf] and list(r.hi[:1]) == [np.inf]
    assert np.isfinite(r.lo[1:]).all() and np.isfinite(r.hi[1:]).all()
    for op, lo, hi, what in [("asin", -2.0, 0.0, r"asin of a value outside \[-1, 1\]"),
                             ("acosh", 0.5, 2.0, "acosh of a value < 1"),
                             ("log2", -1.0, 1.0, "log2 of a non-positive value"),
                             ("tgamma", -0.5, 1.0, "an interval reaching 0 or across it "
                                                  "contains tgamma's pole at 0"),
                             ("lgamma", -1.0, 1.0, "an interval reaching 0 or across it")]:
        with pytest.raises(scalars.ContextError,
                           match=rf"context interval:binary32: {op}: interval .*\({what}"):
            getattr(ctx, op)(ctx.make([lo], [hi]))
    rq = scalars.get("interval:rational")
    with pytest.raises(scalars.ContextError, match="interval:rational"):
        rq.log1p(rq.make("-1", "0"))
    with pytest.raises(scalars.ContextError, match="tan"):
        rq.tan(rq.make("0", "1/2"))


@pytest.mark.parametrize("name", NAMES)
def test_interval_float64_encloses_within_the_declared_ulps(name):
    ctx = scalars.get("interval:float64")
    fn = FUNCTIONS[name]
    x = samples(name, "binary64", 600, seed=4)
    x = x[np.isfinite(x)]
    if fn.domain is not None:
        x = x[~fn.domain.outside(x)]
    if fn.interval_domain is not None:
        x = x[~fn.interval_domain.outside(x)]
    nearest = oracle(name, x, B64)
    v = fn.eval_f64(x)

    def ordv(t):
        i = t.view(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFFFFFFFFFF), i)
    fin = np.isfinite(nearest) & np.isfinite(v)
    assert np.abs(ordv(v[fin]) - ordv(nearest[fin])).max(initial=0) <= max(fn.f64_ulps - 1, 0)
    r = getattr(ctx, name)(ctx.make(x, x))
    wide = gmpy2.context(precision=200)
    for i in range(0, x.size, 3):
        e = mpfr_of(name, wide, x[i])
        assert gmpy2.mpfr(float(r.lo[i]), 53) <= e <= gmpy2.mpfr(float(r.hi[i]), 53), (name, x[i])


@pytest.mark.parametrize("name", NAMES)
def test_interval_mpmath_encloses(name):
    ctx = scalars.get("interval:mpmath:100")
    lo_r, hi_r = RANGE[name]
    a = [lo_r + (hi_r - lo_r) * t for t in (0.13, 0.5)]
    b = [t + (hi_r - lo_r) * 0.01 for t in a]
    r = getattr(ctx, name)(ctx.make(a, b))
    wide = gmpy2.context(precision=300)
    for i in range(2):
        mn, mx = _exact_extremes(name, a[i], b[i])
        lo, hi = exact(r.lo[i]), exact(r.hi[i])
        assert lo <= mn and mx <= hi
        assert wide.sub(hi, mx) <= wide.add(wide.mul(wide.abs(mx), 2.0 ** -90), 2.0 ** -90)


# ------------------------------------------------------------- other contexts
@pytest.mark.parametrize("name", NAMES)
def test_mpmath_context_and_complex128(name):
    ctx = scalars.get("mpmath:200")
    lo_r, hi_r = RANGE[name]
    pts = [repr(lo_r + (hi_r - lo_r) * t) for t in (0.21, 0.77)]
    y = getattr(ctx, name)(ctx.convert(pts))
    c = gmpy2.context(precision=400)
    for v, t in zip(y, pts):
        want = mpfr_of(name, c, t)
        assert abs(exact(v) - gmpy2.mpq(want)) <= (abs(gmpy2.mpq(want)) * gmpy2.mpq(1, 2 ** 190)
                                                   + gmpy2.mpq(1, 2 ** 400))
    fn = FUNCTIONS[name]
    cx = scalars.get("complex128")
    z = np.array([0.3 + 0.2j, -0.1 + 0.5j])
    if fn.complex is None:
        with pytest.raises(scalars.ContextError, match=f"complex128 cannot compute {name}"):
            getattr(cx, name)(cx.convert(z))
    else:
        np.testing.assert_allclose(getattr(cx, name)(cx.convert(z)), fn.complex(z), rtol=1e-15)


RATIONAL = [("exp2", "3", "8"), ("exp2", "-2", "1/4"), ("exp2", "0", "1"),
            ("log2", "1/8", "-3"), ("log2", "1024", "10"), ("log10", "1000", "3"),
            ("log10", "1/100", "-2"), ("cbrt", "-27/8", "-3/2"), ("cbrt", "0", "0"),
            ("tgamma", "5", "24"), ("tgamma", "1", "1"), ("lgamma", "2", "0"),
            ("expm1", "0", "0"), ("log1p", "0", "0"), ("acos", "1", "0"),
            ("cosh", "0", "1"), ("erfc", "0", "1"), ("acosh", "1", "0"),
            ("ceil", "-7/2", "-3"), ("floor", "-7/2", "-4"), ("trunc", "-7/2", "-3"),
            ("round", "-7/2", "-4"), ("round", "5/2", "3"), ("nearbyint", "5/2", "2"),
            ("nearbyint", "7/2", "4"), ("nearbyint", "-1/3", "0")]


def test_rational_values_and_refusals():
    from fractions import Fraction
    ctx = scalars.get("rational")
    for name, x, want in RATIONAL:
        got = getattr(ctx, name)(ctx.convert([x]))
        assert Fraction(int(got[0].numerator), int(got[0].denominator)) == Fraction(want), name
    for name, x in [("exp2", "1/2"), ("log2", "3"), ("log10", "2"), ("cbrt", "2"),
                    ("tgamma", "1/2"), ("lgamma", "3"), ("tan", "1"), ("asinh", "1/3"),
                    ("erfc", "1")]:
        with pytest.raises(scalars.ContextError,
                           match=rf"context rational cannot compute {name} honestly"):
            getattr(ctx, name)(ctx.convert(["0", x] if name not in ("log2", "log10",
                                                                     "tgamma", "lgamma")
                                            else [x]))
    with pytest.raises(scalars.ContextError, match=r"asin\(2\).*outside \[-1, 1\]"):
        ctx.asin(ctx.convert(["2"]))
    with pytest.raises(scalars.ContextError, match=r"tgamma.*pole"):
        ctx.tgamma(ctx.convert(["-3"]))


POINTS = {"acosh": ["1.5", "3"], "log10": ["0.5", "7"], "log2": ["0.5", "7"],
          "log1p": ["-0.5", "3"], "tgamma": ["0.3", "-2.5", "4"], "lgamma": ["0.3", "-2.5", "4"],
          "asin": ["-0.7", "0.2"], "acos": ["-0.7", "0.2"], "atanh": ["-0.7", "0.2"]}


@pytest.mark.parametrize("name", [n for n in NAMES if n not in ROUNDING])
def test_dual_rule_against_mpmath_diff(name):
    mp = mpmath.MPContext()
    mp.prec = 300
    pts = POINTS.get(name, ["-1.3", "0.25", "2"])
    ctx = scalars.get("dual:mpmath:200")
    r = getattr(ctx, name)(ctx.make(pts, ["1"] * len(pts)))
    f = {"exp2": lambda t: mp.power(2, t), "cbrt": lambda t: mp.sign(t) * mp.cbrt(abs(t)),
         "tgamma": mp.gamma, "lgamma": lambda t: mp.log(abs(mp.gamma(t))),
         "log2": lambda t: mp.log(t, 2)}.get(name) or getattr(mp, name)
    for t, p in zip(r.tangent, pts):
        with gmpy2.context():       # mpmath's cbrt reads gmpy2's global context
            want = mp.diff(f, mp.mpf(p))
        assert abs(mp.mpf(t) - want) <= mp.mpf(2) ** -180 * (1 + abs(want)), (name, p)


def test_rounding_functions_have_derivative_zero_and_tgamma_no_second_derivative():
    ctx = scalars.get("dual:float64")
    for name in ROUNDING:
        r = getattr(ctx, name)(ctx.make([1.3, -2.7], [1.0, 1.0]))
        assert list(r.tangent) == [0.0, 0.0]
    dd = scalars.get("dual:dual:float64") if "dual:dual:float64" in scalars.names() else None
    d = scalars.get("dual:float64")
    with pytest.raises(scalars.ContextError, match="derivative of digamma: trigamma"):
        FUNCTIONS["digamma"].derivative(d, d.make([1.5], [1.0]), None)
    del dd


def test_graph_nodes_name_the_node_outside_the_domain():
    g = graph.Graph([graph.Node(0, [], graph.OpKind("input"), [3]),
                     graph.Node(1, [0], graph.OpKind("asin"), [3])])
    with pytest.raises(graph.GraphError, match=r"asin 1.*asin of a value outside"):
        graph.denote(g, graph.Payload(), {0: np.array([0.5, 2.0, 0.0])}, "binary32")
    g = graph.Graph([graph.Node(0, [], graph.OpKind("input"), [2]),
                     graph.Node(1, [0], graph.OpKind("tgamma"), [2])])
    with pytest.raises(graph.GraphError, match=r"tgamma 1.*pole.*-3.0"):
        graph.denote(g, graph.Payload(), {0: np.array([0.5, -3.0])}, "float64")
    y = graph.denote(g, graph.Payload(), {0: np.array([0.5, -2.5])}, "binary32")
    same(y, oracle("tgamma", np.array([0.5, -2.5]), B32), "tgamma node")
    assert "digamma" not in graph.optable.OPS and "digamma" in FUNCTIONS


@pytest.mark.parametrize("fmt", ["binary(11,30)", "tf32"])
def test_other_formats_error_free_path(fmt):
    """binary(11,30) takes the error-free-transformation (STICKY) kernels; tf32 the fast
    path with a 10-bit significand: both match MPFR in a matching context."""
    for name in NAMES:
        x = samples(name, fmt, 150, seed=2)
        same(getattr(scalars.get(fmt), name)(x), oracle(name, x, fmt=formats.get(fmt)),
             f"{name} {fmt}")


@pytest.mark.parametrize("name", NAMES)
def test_interval_float64_boxes_are_sound(name):
    """Non-degenerate boxes in interval:float64 (libm widened by the declared ulps): the
    exact value at sampled points, the ends and the critical points lies inside."""
    ctx = scalars.get("interval:float64")
    rng = np.random.default_rng(11)
    lo_r, hi_r = RANGE[name]
    a = rng.uniform(lo_r, hi_r, 40)
    b = np.minimum(a + rng.uniform(0, (hi_r - lo_r) * 0.3, a.size), hi_r)
    r = getattr(ctx, name)(ctx.make(a, b))
    wide = gmpy2.context(precision=200)
    for i in range(a.size):
        pts = list(rng.uniform(a[i], b[i], 8)) + [a[i], b[i]]
        pts += [float(xc) for xc, _ in CRITICAL.get(name, []) if a[i] <= xc <= b[i]]
        for t in pts:
            assert gmpy2.mpfr(float(r.lo[i]), 53) <= mpfr_of(name, wide, t) <= gmpy2.mpfr(float(r.hi[i]), 53), \
                (name, a[i], b[i], t)


def test_second_derivatives_through_nested_duals():
    """dual:dual:float64 carries second derivatives of the new functions (the Hessian-
    vector products of the tape run over duals) -- except tgamma/lgamma, which refuse."""
    from scalarlab.scalars.values import Dual
    dd = scalars.get("dual:dual:float64")
    x = Dual(Dual(np.array([0.7]), np.array([1.0])), Dual(np.array([1.0]), np.array([0.0])))
    mp = mpmath.MPContext()
    mp.prec = 200
    for name, f in [("tan", mp.tan), ("asin", mp.asin), ("cosh", mp.cosh), ("erfc", mp.erfc),
                    ("cbrt", mp.cbrt), ("log1p", mp.log1p), ("atanh", mp.atanh)]:
        got = float(getattr(dd, name)(x).tangent.tangent[0])
        with gmpy2.context():       # mpmath's cbrt reads gmpy2's global context
            want = float(mp.diff(f, mp.mpf(0.7), 2))
        assert abs(got - want) <= 1e-13 * (1 + abs(want)), name
    y = Dual(Dual(np.array([1.3]), np.array([0.0])), Dual(np.array([0.0]), np.array([0.0])))
    got = float(dd.pow(x, y).tangent.tangent[0])
    assert abs(got - float(mp.diff(lambda t: t ** mp.mpf(1.3), mp.mpf(0.7), 2))) < 1e-13
    with pytest.raises(scalars.ContextError, match="derivative of digamma"):
        dd.lgamma(x)


@pytest.mark.parametrize("name", ["tgamma", "lgamma"])
def test_negative_branches_are_exactly_directed(name):
    """Below 0, inside one branch between poles: lo = RD(min f), hi = RU(max f) in
    binary32, the interior extremum at digamma's root (found here by mpmath); a box
    holding a pole is a ContextError naming it."""
    ctx = scalars.get("interval:binary32")
    f32 = formats.binary32
    rng = np.random.default_rng(5)
    k = rng.integers(0, 6, 16)
    a = formats.round_to_format(-k - rng.uniform(0.02, 0.98, k.size), f32)
    b = formats.round_to_format(a + rng.uniform(0, 0.5, k.size), f32)
    b = np.minimum(b, formats.round_to_format(-k - 0.01, f32))
    b = np.maximum(a, b)
    r = getattr(ctx, name)(ctx.make(a, b))
    dn = gmpy2.context(round=gmpy2.RoundDown, **B32)
    up = gmpy2.context(round=gmpy2.RoundUp, **B32)
    c = gmpy2.context(precision=300)
    with mpmath.workprec(300):
        for i in range(a.size):
            vals = [mpfr_of(name, c, a[i]), mpfr_of(name, c, b[i])]
            lo_t, hi_t = mpmath.mpf(float(a[i])), mpmath.mpf(float(b[i]))
            if mpmath.digamma(lo_t) < 0 < mpmath.digamma(hi_t):
                xs = mpmath.findroot(mpmath.digamma, (lo_t, hi_t), solver="anderson")
                v = mpmath.gamma(xs)
                v = mpmath.log(abs(v)) if name == "lgamma" else v
                vals.append(gmpy2.mpfr(mpmath.nstr(v, 90), 300))
            assert r.lo[i] == float(dn.plus(min(vals))), (name, a[i], b[i])
            assert r.hi[i] == float(up.plus(max(vals))), (name, a[i], b[i])
    with pytest.raises(scalars.ContextError,
                       match=rf"context interval:binary32: {name}: interval \[-2.5, -1.5\] "
                             rf"at index \[0\] contains a pole"):
        getattr(ctx, name)(ctx.make([-2.5], [-1.5]))
    m = scalars.get("interval:mpmath:80")
    rm = getattr(m, name)(m.make(["-2.9"], ["-2.1"]))
    box = m.make(["-2.9"], ["-2.1"])
    with mpmath.workprec(300):     # points of the 80-bit box, values at 300 bits
        for t in [box.lo[0], "-2.6", "-2.61", "-2.3", box.hi[0]]:
            t = mpmath.mpf(t)
            v = mpmath.gamma(t) if name == "tgamma" else mpmath.log(abs(mpmath.gamma(t)))
            assert rm.lo[0] <= v <= rm.hi[0], (name, t)
