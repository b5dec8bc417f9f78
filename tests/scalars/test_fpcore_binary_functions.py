"""The binary functions of scalars.functions_binary (pow atan2 hypot fmod remainder fmax fmin
fdim copysign): correctly rounded in the binary formats against MPFR in matching contexts
(every pair of e4m3 values, sampled binary16/binary32/binary64, C's special cases),
fp32-real and mpmath, exact rational values and refusals, interval rules sound on sampled
boxes (and exactly directed where the extremes sit at corners), pow's derivatives against
torch with a tensor and with a constant exponent (issue 13)."""
from __future__ import annotations

import itertools
import math
from fractions import Fraction

import gmpy2
import mpmath
import numpy as np
import pytest
import torch

from scalarlab import graph, scalars
from scalarlab.graph.optable import OPS
from scalarlab.scalars import formats
from scalarlab.scalars.base import to_fraction
from scalarlab.scalars.values import Interval
from scalarlab.tape import TapeBuilder, backward

NAMES = ["pow", "atan2", "hypot", "fmod", "remainder", "fmax", "fmin", "fdim", "copysign"]
B32 = dict(precision=24, emin=-148, emax=128, subnormalize=True)
B64 = dict(precision=53, emin=-1073, emax=1024, subnormalize=True)


def mpfr2(name, c, x, y):
    """The test's own MPFR definition of each function (C semantics) in gmpy2 context c."""
    if name == "fdim":
        if gmpy2.is_nan(x) or gmpy2.is_nan(y):
            return c.add(x, y)
        return c.sub(x, y) if x > y else gmpy2.mpfr(0)
    if name == "copysign":      # (gmpy2.copy_sign would round to the global context)
        m = c.abs(x)
        return c.minus(m) if gmpy2.copy_sign(gmpy2.mpfr(1, 2), y) < 0 else m
    meth = {"fmax": "maxnum", "fmin": "minnum"}.get(name, name)
    return getattr(c, meth)(x, y)


def oracle(name, xs, ys, *, fmt=None, kw=None, rnd=gmpy2.RoundToNearest):
    c = formats.gmpy2_context(fmt, "nearest_even") if fmt is not None else \
        gmpy2.context(round=rnd, **kw)
    if name == "copysign":      # C's copysign reads y's sign bit, a NaN's included
        out = np.array([float(c.plus(gmpy2.mpfr(math.copysign(float(s), float(t)), 53)))
                        for s, t in zip(xs, ys)])
    else:
        out = np.array([float(mpfr2(name, c, gmpy2.mpfr(float(s), 53), gmpy2.mpfr(float(t), 53)))
                        for s, t in zip(xs, ys)])
    return formats.round_to_format(out, fmt) if fmt is not None else out


def same(got, want, what=""):
    got = np.asarray(got, dtype=np.float64).reshape(-1)
    want = np.asarray(want, dtype=np.float64).reshape(-1)
    ok = (((got == want) & (np.signbit(got) == np.signbit(want)))
          | (np.isnan(got) & np.isnan(want)))
    bad = np.flatnonzero(~ok)[:3]
    assert bad.size == 0, f"{what}: mismatches at {bad}: {got[bad]} vs MPFR {want[bad]}"


def pairs(fmt, n, seed):
    rng = np.random.default_rng(seed)
    f = formats.get(fmt)
    x = np.concatenate([rng.uniform(-8, 8, n), rng.standard_normal(n // 2) *
                        np.exp2(rng.integers(-30, 30, n // 2))])
    y = np.concatenate([rng.uniform(-4, 4, n), rng.standard_normal(n // 2) *
                        np.exp2(rng.integers(-30, 30, n // 2))])
    # integer exponents and small integers (pow's exact cases, fmod's quotients)
    k = n // 4
    x[:k] = np.round(x[:k])
    y[k:2 * k] = np.round(y[k:2 * k])
    return formats.round_to_format(x, f), formats.round_to_format(y, f)


SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, 3.0, -3.0, np.inf, -np.inf, np.nan]


# pow atan2 hypot fmod stay default; the piecewise-trivial rest runs under -m slow
@pytest.mark.parametrize("name", [n if n in ("pow", "atan2", "hypot", "fmod") else
                                  pytest.param(n, marks=pytest.mark.slow) for n in NAMES])
def test_every_pair_of_e4m3_values(name):
    v = formats.decode(np.arange(256), "e4m3")
    x, y = np.repeat(v, 256), np.tile(v, 256)
    got = getattr(scalars.get("e4m3"), name)(x, y)
    same(got, oracle(name, x, y, fmt=formats.e4m3), f"{name} e4m3")


@pytest.mark.parametrize("name", NAMES)
def test_sampled_binary16_binary32_binary64_and_specials(name):
    for fmt, n, kw in (("binary16", 1500, None), ("binary32", 1500, B32),
                       ("binary64", 120, B64)):
        x, y = pairs(fmt, n, seed=len(name))
        # copysign of a NaN sign is unspecified in C (the payload's sign is not portable)
        ys = SPECIAL[:-1] if name == "copysign" else SPECIAL
        sx, sy = (np.array(t) for t in zip(*itertools.product(SPECIAL, ys)))
        x, y = np.concatenate([x, sx]), np.concatenate([y, sy])
        got = getattr(scalars.get(fmt), name)(x, y)
        want = oracle(name, x, y, fmt=formats.get(fmt)) if kw is None else \
            oracle(name, x, y, kw=kw)
        same(got, want, f"{name} {fmt}")


def test_c_special_cases_in_float64():
    """C99 Annex F cases through the float64 context (and binary32 agrees)."""
    f = scalars.get("float64")
    cases = [("pow", np.nan, 0.0, 1.0), ("pow", 1.0, np.nan, 1.0), ("pow", -0.0, -1.0, -np.inf),
             ("pow", -np.inf, 3.0, -np.inf), ("pow", -1.0, np.inf, 1.0),
             ("atan2", 0.0, -0.0, math.pi), ("atan2", -0.0, -0.0, -math.pi),
             ("fmax", np.nan, 1.0, 1.0), ("fmin", -0.0, 0.0, -0.0), ("fmax", -0.0, 0.0, 0.0),
             ("copysign", 1.0, -0.0, -1.0), ("remainder", 5.0, 2.0, 1.0),
             ("remainder", 7.0, 2.0, -1.0), ("fmod", -7.0, 2.0, -1.0), ("fdim", 1.0, 3.0, 0.0),
             ("hypot", np.inf, np.nan, np.inf)]
    for name, x, y, want in cases:
        for ctx in (f, scalars.get("binary32")):
            got = float(getattr(ctx, name)(np.array(x), np.array(y)))
            if ctx is not f:
                want = float(np.float32(want))
            assert (got == want and math.copysign(1, got) == math.copysign(1, want)), \
                (ctx.name, name, x, y, got, want)


@pytest.mark.parametrize("name", NAMES)
def test_fp32_real_and_mpmath(name):
    rng = np.random.default_rng(9)
    x = formats.round_to_format(rng.uniform(-8, 8, 60), formats.binary32)
    y = formats.round_to_format(rng.uniform(-4, 4, 60), formats.binary32)
    x[:20] = np.round(x[:20])
    y[20:40] = np.where(np.round(y[20:40]) == 0, 1.0, np.round(y[20:40]))
    if name == "pow":
        x = np.abs(x)
    ctx = scalars.get("fp32-real")
    got = np.array([float(t) for t in getattr(ctx, name)(ctx.convert(x), ctx.convert(y))])
    same(got, oracle(name, x, y, kw=dict(B32, emax=1 << 20)), f"fp32-real {name}")
    m = scalars.get("mpmath:200")
    r = getattr(m, name)(m.convert(x), m.convert(y))
    c = gmpy2.context(precision=400)
    for v, s, t in zip(r, x, y):
        want = mpfr2(name, c, gmpy2.mpfr(float(s), 53), gmpy2.mpfr(float(t), 53))
        if gmpy2.is_nan(want):
            assert mpmath.isnan(v)
            continue
        if gmpy2.is_infinite(want):
            assert v == float(want)
            continue
        if name == "atan2" and s == 0:
            continue        # mpmath has no signed zero: atan2(-0, x < 0) is +pi there
        assert abs(gmpy2.mpq(to_fraction(v)) - gmpy2.mpq(want)) <= \
            abs(want) * 2.0 ** -199 + 2.0 ** -600, (name, s, t)


def test_rational_exact_values_and_refusals():
    q = scalars.get("rational")
    cases = [("pow", "2/3", "3", "8/27"), ("pow", "-2", "-3", "-1/8"), ("pow", "4/9", "3/2", "8/27"),
             ("pow", "5", "0", "1"), ("hypot", "3", "4", "5"), ("atan2", "0", "2", "0"),
             ("fmod", "-7/2", "1", "-1/2"), ("remainder", "5/2", "1", "1/2"),
             ("remainder", "7/2", "1", "-1/2"), ("fmax", "1/3", "1/4", "1/3"),
             ("fmin", "1/3", "1/4", "1/4"), ("fdim", "1/4", "1/3", "0"),
             ("fdim", "1/3", "1/4", "1/12"), ("copysign", "3/4", "-1", "-3/4")]
    for name, x, y, want in cases:
        got = getattr(q, name)(q.convert([x]), q.convert([y]))
        assert to_fraction(got[0]) == Fraction(want), name
    for name, x, y in [("pow", "2", "1/2"), ("atan2", "1", "1"), ("hypot", "1", "1")]:
        with pytest.raises(scalars.ContextError,
                           match=rf"context rational cannot compute {name} honestly: "
                                 rf"{name}\({x}, {y}\)"):
            getattr(q, name)(q.convert([x]), q.convert([y]))
    with pytest.raises(scalars.ContextError, match=r"context rational: fmod.*fmod by zero"):
        q.fmod(q.convert(["1"]), q.convert(["0"]))
    with pytest.raises(scalars.ContextError, match="negative base with a non-integer"):
        q.pow(q.convert(["-8"]), q.convert(["1/3"]))
    c = scalars.get("complex128")
    z = np.array([1 + 1j, -2 + 0.5j])
    np.testing.assert_allclose(c.pow(c.convert(z), c.convert(z[::-1])), z ** z[::-1], rtol=1e-15)
    with pytest.raises(scalars.ContextError, match="complex128 cannot compute atan2"):
        c.atan2(c.convert(z), c.convert(z))


# ------------------------------------------------------------------ intervals
def _hp(t):
    return gmpy2.mpfr(float(t), 53)


def _sound(ctx, name, a, b, box, n=15, seed=0):
    """Every sampled point (and corner) of the box has its exact value inside."""
    rng = np.random.default_rng(seed)
    c = gmpy2.context(precision=200)
    lo, hi = ctx.to_float64(box).lo, ctx.to_float64(box).hi
    for i in range(np.size(lo)):
        xs = list(rng.uniform(a[0][i], a[1][i], n)) + [a[0][i], a[1][i]]
        ys = list(rng.uniform(b[0][i], b[1][i], n)) + [b[0][i], b[1][i]]
        for s, t in itertools.product(xs[-2:], ys[-2:]):
            xs.append(s), ys.append(t)
        for s, t in zip(xs, ys):
            v = mpfr2(name, c, _hp(s), _hp(t))
            if gmpy2.is_nan(v):
                continue
            assert lo[i] <= v <= hi[i], (ctx.name, name, s, t, float(v), lo[i], hi[i])


BOXES = {   # name -> (x lows, x highs, y lows, y highs)
    "pow": ([0.5, 0.0, 1.5, 2.0, 0.0], [2.0, 0.75, 3.0, 2.5, 1.0],
            [-1.5, 0.5, -2.0, 0.25, -1.0], [2.5, 3.0, -1.0, 0.5, 0.0]),
    "atan2": ([0.5, -1.0, -2.0, -1.0, -3.0], [2.0, 1.0, -1.0, 0.5, -2.0],
              [0.25, 0.5, -3.0, -3.0, -1.0], [3.0, 2.0, 1.0, -0.5, -0.5]),
    "hypot": ([-1.0, 0.5, -3.0], [2.0, 1.0, -2.0], [-0.5, 1.0, -1.0], [0.5, 2.0, 3.0]),
    "fmod": ([5.1, -7.5, 0.2, -3.0], [5.3, -7.2, 9.0, 3.0], [2.0, 2.0, 0.5, -2.0],
             [2.1, 2.2, 1.5, -1.0]),
    "remainder": ([5.1, -7.5, 0.2, -3.0], [5.3, -7.2, 9.0, 3.0], [2.0, 2.0, 0.5, -2.0],
                  [2.1, 2.2, 1.5, -1.0]),
    "fmax": ([-1.0, 0.0], [1.0, 2.0], [0.5, -3.0], [0.75, -1.0]),
    "fmin": ([-1.0, 0.0], [1.0, 2.0], [0.5, -3.0], [0.75, -1.0]),
    "fdim": ([-1.0, 0.0], [1.0, 2.0], [0.5, -3.0], [0.75, -1.0]),
    "copysign": ([-1.0, 0.5, -2.0], [1.0, 2.0, -1.0], [0.5, -3.0, -1.0], [0.75, -1.0, 2.0]),
}


@pytest.mark.parametrize("base", ["binary32", "float64", "mpmath:100"])
@pytest.mark.parametrize("name", NAMES)
def test_interval_rules_are_sound(name, base):
    ctx = scalars.get(f"interval:{base}")
    xl, xh, yl, yh = (np.array(t) for t in BOXES[name])
    box = getattr(ctx, name)(ctx.make(xl, xh), ctx.make(yl, yh))
    _sound(ctx, name, (xl, xh), (yl, yh), box)


@pytest.mark.parametrize("name", ["pow", "hypot", "atan2"])
def test_interval_corner_rules_are_exactly_directed(name):
    """Where the extremes sit at corners (pow with base >= 0, hypot on |x|, |y|, atan2 off
    the cut), lo = RD(min) and hi = RU(max) of the exact corner values."""
    ctx = scalars.get("interval:binary32")
    xl, xh, yl, yh = (np.array(t) for t in BOXES[name])
    keep = np.ones(xl.size, bool)
    if name == "pow":      # a zero base end may be -0: pow(-0, -1) = -inf (tested below)
        keep = ~((xl == 0) & (yl <= -1))
    if name == "atan2":    # boxes off the cut {x <= 0, y = 0}: y > 0 or y < 0 or x > 0
        keep = (xl > 0) | (xh < 0) | (yl > 0)
    if name == "hypot":
        keep = ((xl >= 0) | (xh <= 0)) & ((yl >= 0) | (yh <= 0))
    xl, xh, yl, yh = xl[keep], xh[keep], yl[keep], yh[keep]
    box = getattr(ctx, name)(ctx.make(xl, xh), ctx.make(yl, yh))
    c = gmpy2.context(precision=300)
    dn = gmpy2.context(round=gmpy2.RoundDown, **B32)
    up = gmpy2.context(round=gmpy2.RoundUp, **B32)
    for i in range(xl.size):
        vals = [mpfr2(name, c, _hp(s), _hp(t)) for s, t in
                itertools.product((xl[i], xh[i]), (yl[i], yh[i]))]
        assert box.lo[i] == float(dn.plus(min(vals))) and box.hi[i] == float(up.plus(max(vals)))


def test_pow_interval_negative_bases_and_refusal():
    ctx = scalars.get("interval:binary32")

    def pw(lo, hi, n):
        r = ctx.pow(ctx.make([lo], [hi]), ctx.convert([n]))
        return float(r.lo[0]), float(r.hi[0])
    assert pw(-2.0, 3.0, 2.0) == (0.0, 9.0)
    assert pw(-2.0, 3.0, 3.0) == (-8.0, 27.0)
    assert pw(-3.0, -2.0, 2.0) == (4.0, 9.0)
    assert pw(-2.0, -1.0, -1.0) == (-1.0, -0.5)
    assert pw(-1.0, 2.0, -1.0) == (-np.inf, np.inf)
    assert pw(-1.0, 2.0, -2.0) == (0.25, np.inf)
    assert pw(-1.0, 2.0, 0.0) == (1.0, 1.0)
    assert pw(0.0, 2.0, -1.0) == (-np.inf, np.inf)      # the zero end may be -0
    assert pw(0.0, 2.0, -2.0) == (0.25, np.inf)
    with pytest.raises(scalars.ContextError,
                       match=r"context interval:binary32: pow: base interval \[-2.0, 1.0\].*"
                             r"not one integer"):
        ctx.pow(ctx.make([-2.0], [1.0]), ctx.convert([0.5]))
    # mpmath endpoints that are no float64 (-2.1 at 100 bits) stay exact through MPFR
    im = scalars.get("interval:mpmath:100")
    r = im.pow(im.make(["-2.1"], ["-2.1"]), im.convert(["3"]))
    lo, hi = to_fraction(r.lo[0]), to_fraction(r.hi[0])
    assert lo <= Fraction(-9261, 1000) <= hi and hi - lo < Fraction(1, 2 ** 90)
    rq = scalars.get("interval:rational")
    r = rq.pow(rq.make(["-2"], ["3"]), rq.convert(["3"]))
    assert (to_fraction(r.lo[0]), to_fraction(r.hi[0])) == (-8, 27)
    # fmod/remainder across a divisor holding 0: the whole line (undefined at y = 0)
    r = ctx.fmod(ctx.make([1.0], [2.0]), ctx.make([-1.0], [1.0]))
    assert (r.lo[0], r.hi[0]) == (-np.inf, np.inf)


# --------------------------------------------------------------- derivatives
def test_pow_derivatives_against_torch_tensor_and_constant_exponent():
    """pow as a graph op (issue 13): a tensor exponent (both partials vs torch) and a
    constant scalar exponent node (RMSNorm's x.pow(2): negative bases included)."""
    rng = np.random.default_rng(0)
    x = rng.uniform(0.3, 2.0, (3, 4))
    e = rng.standard_normal(4)
    g = rng.standard_normal((3, 4))
    b = TapeBuilder("float64")
    ix, ie = b.leaf(x), b.leaf(e)
    y = b.apply("pow", ix, ie)
    gr = backward(b.tape, y, seed=g)
    tx = torch.tensor(x, requires_grad=True)
    te = torch.tensor(e, requires_grad=True)
    gx, ge = torch.autograd.grad(torch.pow(tx, te), [tx, te], torch.tensor(g))
    np.testing.assert_allclose(gr[ix], gx.numpy(), rtol=1e-13)
    np.testing.assert_allclose(gr[ie], ge.numpy(), rtol=1e-13)
    # constant exponent node: graph with a const payload, negative bases
    xs = rng.standard_normal((2, 5))
    for p in (2.0, 3.0, -1.0, 0.0):
        G = graph.Graph([graph.Node(0, [], "input", [5]), graph.Node(1, [], "const", []),
                         graph.Node(2, [0, 1], graph.OpKind("pow"), [5])])
        pay = graph.Payload({1: {"const": {"value": np.array(p)}}})
        val = graph.denote(G, pay, xs, "float64")
        np.testing.assert_allclose(val, np.power(xs, p), rtol=1e-15)
        rec = OPS["pow"]
        f64 = scalars.get("float64")
        gx_, gp_ = rec.vjp(f64, np.ones((2, 5)), [xs, np.array(p)], val, {}, 1)
        t = torch.tensor(xs, requires_grad=True)
        (want,) = torch.autograd.grad(torch.pow(t, p).sum(), [t])
        np.testing.assert_allclose(gx_, want.numpy(), rtol=1e-14)
        assert np.shape(gp_) == ()      # the exponent's cotangent, summed over the batch
    # binary32 graph values: correctly rounded
    val = graph.denote(G, graph.Payload({1: {"const": {"value": np.array(2.0)}}}),
                       formats.round_to_format(xs, formats.binary32), "binary32")
    same(val, oracle("pow", formats.round_to_format(xs, formats.binary32).reshape(-1),
                     np.full(10, 2.0), kw=B32), "pow const")


@pytest.mark.parametrize("name", ["pow", "atan2", "hypot"])
def test_partials_against_mpmath(name):
    mp = mpmath.MPContext()
    mp.prec = 300
    f = {"pow": mp.power, "atan2": mp.atan2, "hypot": mp.hypot}[name]
    D = scalars.get("dual:mpmath:200")
    pts = [("1.5", "-0.75"), ("0.3", "2.5"), ("2", "3")]
    for k in (0, 1):
        xs = D.make([p[0] for p in pts], ["1" if k == 0 else "0"] * 3)
        ys = D.make([p[1] for p in pts], ["1" if k == 1 else "0"] * 3)
        r = getattr(D, name)(xs, ys)
        for t, (a, b) in zip(r.tangent, pts):
            want = mp.diff(lambda u: f(u, mp.mpf(b)), mp.mpf(a)) if k == 0 else \
                mp.diff(lambda v: f(mp.mpf(a), v), mp.mpf(b))
            assert abs(mp.mpf(t) - want) <= mp.mpf(2) ** -180 * (1 + abs(want)), (name, k, a, b)


def test_graph_domain_errors_name_the_node():
    for op, x, y, what in [("pow", [-2.0, 1.0], [0.5, 2.0], r"pow 2: pow outside its domain"
                            r" \(pow of a negative base with a non-integer exponent\): "
                            r"x\[0\] = -2.0, y\[0\] = 0.5"),
                           ("fmod", [1.0, 2.0], [1.0, 0.0], r"fmod 2: .*fmod by zero")]:
        G = graph.Graph([graph.Node(0, [], "input", [2]), graph.Node(1, [], "input", [2]),
                         graph.Node(2, [0, 1], graph.OpKind(op), [2])])
        for ctx in ("binary32", "mpmath:100"):
            with pytest.raises(graph.GraphError, match=what):
                graph.denote(G, graph.Payload(), {0: np.array(x), 1: np.array(y)}, ctx)
    box = Interval(np.array([1.0]), np.array([2.0]))
    assert box.lo[0] == 1.0


@pytest.mark.parametrize("fmt", ["binary(11,30)", "binary(5,2)", "bfloat16"])
def test_other_formats_error_free_path_and_tiny(fmt):
    """binary(11,30) takes the error-free-transformation (STICKY) kernels, binary(5,2) is
    tiny: the binary functions still match MPFR in a matching context."""
    f = formats.get(fmt)
    rng = np.random.default_rng(4)
    x = formats.round_to_format(rng.uniform(-5, 5, 300), f)
    y = formats.round_to_format(rng.uniform(-3, 3, 300), f)
    x[:100], y[100:200] = np.round(x[:100]), np.round(y[100:200])
    for name in NAMES:
        same(getattr(scalars.get(fmt), name)(x, y), oracle(name, x, y, fmt=f), f"{name} {fmt}")


from hypothesis import given, settings, strategies as st  # noqa: E402

_ENDS = st.floats(-6, 6, allow_nan=False).map(lambda v: float(np.float32(v)))


@settings(max_examples=60, deadline=None)
@given(a=_ENDS, b=_ENDS, e1=st.floats(-3, 3).map(lambda v: float(np.float32(v))),
       e2=st.floats(-3, 3).map(lambda v: float(np.float32(v))),
       n=st.integers(-4, 4), integer=st.booleans())
def test_pow_interval_is_sound_on_random_boxes(a, b, e1, e2, n, integer):
    """Random base boxes (negative ones with a point integer exponent, else the base is
    made non-negative) and exponent boxes: sampled points and corners lie inside."""
    ctx = scalars.get("interval:binary32")
    lo, hi = min(a, b), max(a, b)
    if integer:
        el = eh = float(n)
    else:
        lo, hi = abs(lo), abs(hi)
        lo, hi = min(lo, hi), max(lo, hi)
        el, eh = min(e1, e2), max(e1, e2)
    try:
        box = ctx.pow(ctx.make([lo], [hi]), ctx.make([el], [eh]))
    except scalars.ContextError:
        assert False, (lo, hi, el, eh)
    _sound(ctx, "pow", (np.array([lo]), np.array([hi])), (np.array([el]), np.array([eh])),
           box, n=8)
