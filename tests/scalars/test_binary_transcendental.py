"""exp log tanh sigmoid softplus sin cos erf (and sqrt) of the binary contexts against MPFR:
binary32 random and near-rounding-boundary inputs, every binary16 / bfloat16 input."""
from __future__ import annotations

import gmpy2
import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.scalars.kernels import binary_format as K
from scalarlab.scalars import formats
from scalarlab.scalars.functions import F64_ABS_ERR, FUNCTIONS
from scalarlab.scalars.kernels.f64_libm import erf_f64

FUNCS = ("exp", "log", "tanh", "sigmoid", "softplus", "sin", "cos", "erf")


def _hp_sigmoid(x, hp):
    return hp.div(1, hp.add(1, hp.exp(hp.minus(x))))


def _hp_softplus(x, hp):
    # max(x, 0) + log1p(e^-|x|): the same real number as log1p(e^x), without MPFR's
    # exponent overflow of e^x for huge x.
    return hp.add(max(x, 0), hp.log1p(hp.exp(hp.minus(hp.abs(x)))))


def oracle(fmt, fn, x):
    """MPFR in the format's context (precision, exponent range, subnormals).  sigmoid and
    softplus, which MPFR lacks, are evaluated at 160 bits and then rounded once (a double
    rounding could only bite within 2^-160 of a midpoint; these values are transcendental)."""
    fctx = formats.gmpy2_context(fmt)
    xs = np.asarray(x, dtype=np.float64).reshape(-1)
    fin = np.isfinite(xs)
    assert (formats.round_to_format(xs[fin], fmt) == xs[fin]).all()
    xs = xs.tolist()
    if fn in ("sigmoid", "softplus"):
        hp = gmpy2.context(precision=160)
        g = _hp_sigmoid if fn == "sigmoid" else _hp_softplus
        vals = (fctx.plus(g(gmpy2.mpfr(v, 53), hp)) for v in xs)
    else:
        vals = map(getattr(fctx, fn), xs)
    out = np.fromiter(map(float, vals), np.float64, len(xs))
    return formats.round_to_format(out, fmt)


def assert_same(got, want, what, x):
    got = np.asarray(got).reshape(-1)
    ok = ((got == want) & (np.signbit(got) == np.signbit(want))) | (np.isnan(got) & np.isnan(want))
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise AssertionError(f"{what}: {(~ok).sum()} mismatches; first: f({float(x[i])!r}) = "
                             f"{float(got[i])!r}, MPFR says {float(want[i])!r}")


DOMAINS = {  # where the interesting values of each function lie (binary32)
    "exp": (-110.0, 95.0), "log": None, "tanh": (-12.0, 12.0), "sigmoid": (-110.0, 110.0),
    "softplus": (-110.0, 100.0), "sin": (-40.0, 40.0), "cos": (-40.0, 40.0), "erf": (-5.0, 5.0),
}

NP_F64 = {
    "exp": np.exp, "log": np.log, "tanh": np.tanh, "sin": np.sin, "cos": np.cos,
    "sigmoid": lambda x: 0.5 * (1 + np.tanh(x / 2)),
    "softplus": lambda x: np.logaddexp(0.0, x),
    "erf": erf_f64,
}


def inputs_binary32(fn, rng, n):
    """Random inputs over the function's domain, tiny and huge magnitudes, specials."""
    f = formats.binary32
    dom = DOMAINS[fn]
    if dom is None:
        main = np.abs(formats.decode(rng.integers(0, 1 << 32, n), f))
        main = main[np.isfinite(main)]
    else:
        main = formats.round_to_format(rng.uniform(*dom, n), f)
    tiny = formats.round_to_format(rng.standard_normal(n // 10) *
                                   np.exp2(rng.integers(-149, -10, n // 10)), f)
    huge = formats.round_to_format(rng.standard_normal(n // 20) *
                                   np.exp2(rng.integers(5, 127, n // 20)), f)
    special = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 2.0 ** -149,
                        -2.0 ** -149, f.max_finite, -f.max_finite, 88.72283935546875,
                        88.7228469848632812, -103.97207641601562, -87.33654022216797])
    return np.concatenate([main, tiny, huge, special])


def near_boundary_binary32(fn, rng, n_cand=400_000, keep=300):
    """Inputs whose function value lies closest to a binary32 rounding midpoint, found by
    scanning random binary32 inputs with a float64 evaluation (ranking only)."""
    f = formats.binary32
    dom = DOMAINS[fn] or (1e-3, 1e3)
    x = np.unique(formats.round_to_format(rng.uniform(*dom, n_cand), f))
    if fn == "log":
        x = x[x > 0]
    with np.errstate(all="ignore"):
        y = NP_F64[fn](x)
    ok = np.isfinite(y) & (y != 0)
    x, y = x[ok], y[ok]
    u = formats.ulp(y, f)
    frac = np.modf(np.abs(y) / u)[0]
    d = np.abs(frac - 0.5)
    return x[np.argsort(d)[:keep]]


# Analytic near-midpoint cases: exp(2^-24) = 1 + 2^-24 + 2^-49 + ... sits 2^-49 above
# the midpoint between 1 and next_up(1); sigmoid(2^-23) sits just below 1/2 + 2^-25,
# the midpoint above 1/2 (and so on for the neighbouring midpoints).
ANALYTIC = {
    "exp": np.array([2.0 ** -24, -2.0 ** -25, 3 * 2.0 ** -24, -3 * 2.0 ** -25]),
    "sigmoid": np.array([2.0 ** -23, -2.0 ** -24, 3 * 2.0 ** -23, -3 * 2.0 ** -24]),
}


@pytest.mark.parametrize("fn", FUNCS)
def test_binary32_transcendental_vs_mpfr(fn):
    ctx = scalars.get("binary32")
    rng = np.random.default_rng(FUNCS.index(fn) + 100)
    x = np.concatenate([inputs_binary32(fn, rng, 10_000),
                        near_boundary_binary32(fn, rng),
                        ANALYTIC.get(fn, np.zeros(0))])
    assert x.size >= 10_000
    assert_same(getattr(ctx, fn)(x), oracle(ctx.fmt, fn, x), f"binary32 {fn}", x)


def test_near_boundary_inputs_take_the_mpfr_path():
    """The crafted inputs really are hard: the float64 value cannot decide them, so the
    kernel flags them for MPFR (and the context still returns MPFR's answer)."""
    ctx = scalars.get("binary32")
    spec = ctx.fmt.spec
    for fn, x in ANALYTIC.items():
        out = np.empty(x.size)
        unsafe = np.zeros(x.size, dtype=np.uint8)
        f = FUNCTIONS[fn]
        K.round_checked(K.FAST, x, f.eval_f64(x), f.f64_rel, F64_ABS_ERR, out, unsafe, spec)
        assert unsafe.all(), (fn, x[unsafe == 0])
        assert_same(getattr(ctx, fn)(x), oracle(ctx.fmt, fn, x), f"analytic {fn}", x)
    # exp(2^-24) rounds up to next_up(1), exp(-2^-25) to 1 (not to the float64 neighbour).
    got = ctx.exp(np.array([2.0 ** -24, -2.0 ** -25]))
    assert got.tolist() == [1 + 2.0 ** -23, 1.0]


ALL16 = {name: formats.decode(np.arange(1 << 16), name) for name in ("binary16", "bfloat16")}


@pytest.mark.parametrize("name", ["binary16", "bfloat16"])
@pytest.mark.parametrize("fn", ["sqrt", "exp", "log", "tanh"])
def test_every_16bit_input(name, fn):
    ctx = scalars.get(name)
    x = ALL16[name]
    assert_same(getattr(ctx, fn)(x), oracle(ctx.fmt, fn, x), f"{name} {fn}", x)


@pytest.mark.parametrize("name", ["binary16", "bfloat16"])
@pytest.mark.parametrize("fn", ["sigmoid", "softplus", "sin", "cos", "erf"])
def test_16bit_other_functions_strided(name, fn):
    ctx = scalars.get(name)
    x = ALL16[name][3::7]
    assert_same(getattr(ctx, fn)(x), oracle(ctx.fmt, fn, x), f"{name} {fn}", x)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["binary16", "bfloat16"])
@pytest.mark.parametrize("fn", ["sigmoid", "softplus", "sin", "cos", "erf"])
def test_16bit_other_functions_every_input(name, fn):
    ctx = scalars.get(name)
    x = ALL16[name]
    assert_same(getattr(ctx, fn)(x), oracle(ctx.fmt, fn, x), f"{name} {fn}", x)


@pytest.mark.parametrize("name", ["e4m3", "e5m2"])
@pytest.mark.parametrize("fn", ("sqrt",) + FUNCS)
def test_fp8_every_input(name, fn):
    ctx = scalars.get(name)
    x = formats.decode(np.arange(256), name)
    if name == "e4m3":
        x = x[~np.isinf(x)]
    got = getattr(ctx, fn)(x)
    assert_same(got, oracle(ctx.fmt, fn, x), f"{name} {fn}", x)
    if name == "e4m3":
        assert not np.isinf(got).any()


@pytest.mark.parametrize("name", ["binary(11,40)", "binary(8,30)", "binary64"])
def test_wide_formats_transcendental(name):
    ctx = scalars.get(name)
    rng = np.random.default_rng(7)
    for fn in FUNCS:
        lo, hi = DOMAINS[fn] or (0.0, 50.0)
        x = formats.round_to_format(rng.uniform(lo, hi, 400), ctx.fmt)
        if name != "binary(8,30)":   # float64-wide exponent range: overflow and underflow
            x = np.concatenate([x, formats.round_to_format(
                rng.uniform(-760, 720, 100), ctx.fmt), [0.0, -0.0, np.inf, -np.inf]])
        if fn == "log":
            x = np.abs(x)
        assert_same(getattr(ctx, fn)(x), oracle(ctx.fmt, fn, x), f"{name} {fn}", x)


def test_ieee_special_values():
    ctx = scalars.get("binary32")
    inf, nan = np.inf, np.nan
    x = np.array([0.0, -0.0, -1.0, inf, -inf, nan])
    with np.errstate(all="ignore"):
        lg = ctx.log(x)
    assert lg[0] == -inf and lg[1] == -inf and np.isnan(lg[2]) and lg[3] == inf
    assert np.isnan(lg[4]) and np.isnan(lg[5])
    ex = ctx.exp(x)
    assert ex[0] == 1.0 and ex[1] == 1.0 and ex[3] == inf and ex[4] == 0.0 and np.isnan(ex[5])
    th = ctx.tanh(x)
    assert th[3] == 1.0 and th[4] == -1.0 and np.signbit(th[1]) and not np.signbit(th[0])
    assert ctx.sigmoid(x)[3:5].tolist() == [1.0, 0.0]
    assert ctx.softplus(x)[3:5].tolist() == [inf, 0.0]
    assert np.isnan(ctx.sin(x)[3]) and np.signbit(ctx.sin(x)[1])
    assert ctx.erf(x)[3:5].tolist() == [1.0, -1.0]
