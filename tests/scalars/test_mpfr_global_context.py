"""Endpoint code never depends on gmpy2's global context.

Any mpfr operation outside a ``with gmpy2.context(...)`` block -- Python's unary minus,
abs, an operator, ``gmpy2.mpfr(x)`` without a precision, ``gmpy2.copy_sign`` -- rounds to
the thread's global context (53 bits, nearest by default), which is how tgamma's negative
branches lost their maxima (issue 23).  Here that context is set to 2 bits rounding away
from zero, the most hostile choice: every such escape then changes a value.

* default run: the endpoint entry points (MPFR directed rounding of every unary function
  onto every grid, the interval rules of every function and binary function over float,
  binary and mpmath bases, MPFR settlement of the correctly rounded binary paths,
  sin/cos/tan phase reduction, tgamma's negative branches) give bit-identical results
  under the hostile context and under the default one (the default one is checked
  against MPFR/Arb/mpmath oracles by the suites named below);
* ``-m slow``: those suites themselves pass with the hostile context set around every
  test (tests/scalars/conftest.py).
"""
from __future__ import annotations

import contextlib
import math
import os
import subprocess
import sys
from pathlib import Path

import gmpy2
import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.scalars.kernels import correct_rounding as CR
from scalarlab.scalars import formats
from scalarlab.scalars.kernels import function_endpoints as FE
from scalarlab.scalars.functions import FUNCTIONS
from scalarlab.scalars.functions_binary import BINARY_FUNCTIONS


@contextlib.contextmanager
def hostile():
    saved = gmpy2.get_context().copy()
    gmpy2.set_context(gmpy2.context(precision=2, round=gmpy2.RoundAwayZero))
    try:
        yield
    finally:
        gmpy2.set_context(saved)


def test_hostile_context_does_change_plain_mpfr_arithmetic():
    """The premise: outside a context block, a 256-bit value's negation is rounded."""
    with gmpy2.context(precision=256):
        x = gmpy2.mpfr(1) / 3
    with hostile():
        assert -x == -0.375 and gmpy2.mpfr(0.3) == 0.375
    assert gmpy2.get_context().precision == 53


def _key(v):
    """A comparable image of a result: float bits, mpf tuples, nested."""
    if isinstance(v, (tuple, list)):
        return tuple(_key(t) for t in v)
    if hasattr(v, "lo") and hasattr(v, "hi"):
        return (_key(v.lo), _key(v.hi))
    a = np.asarray(v)
    if a.dtype == object:
        return tuple(getattr(t, "_mpf_", t) for t in a.reshape(-1))
    a = np.asarray(a, dtype=np.float64)
    return (a.shape, a.tobytes())


def _same_both_ways(compute):
    """compute() under the default context and under the hostile one: equal."""
    want = _key(compute())
    with hostile():
        got = _key(compute())
    assert got == want


RANGES = {"exp2": (-30, 30), "expm1": (-5, 5), "log10": (1e-3, 1e3), "log2": (1e-3, 1e3),
          "log1p": (-0.99, 20), "cbrt": (-100, 100), "tan": (-1.5, 1.5), "asin": (-1, 1),
          "acos": (-1, 1), "sinh": (-12, 12), "cosh": (-12, 12), "asinh": (-100, 100),
          "acosh": (1, 100), "atanh": (-0.999, 0.999), "erfc": (-4, 9),
          "tgamma": (0.02, 30), "lgamma": (0.02, 60), "log": (1e-3, 1e3),
          "sin": (-40, 40), "cos": (-40, 40), "digamma": (0.1, 30)}
BASES = ["float64", "binary32", "bfloat16", "binary16", "mpmath:100"]
OPS = [n for n, f in FUNCTIONS.items() if f.op]


def _args(name, n, seed):
    rng = np.random.default_rng(seed)
    lo, hi = RANGES.get(name, (-20, 20))
    a = rng.uniform(lo, hi, n)
    b = np.minimum(a + rng.uniform(0, (hi - lo) * 0.05, n), hi)
    a[:3] = b[:3]                 # point boxes
    return a, b


@pytest.mark.parametrize("name", OPS)
def test_mpfr_directed_rounding_of_every_function(name):
    fn = FUNCTIONS[name]
    x = _args(name, 8, 1)[0]
    for grid in (formats.binary64, formats.binary32, formats.bfloat16, formats.e4m3):
        _same_both_ways(lambda: [FE.mpfr_func_dir(fn, float(t), grid) for t in x])


@pytest.mark.parametrize("base", BASES)
def test_interval_functions_over_every_base(base):
    ctx = scalars.get(f"interval:{base}")

    def run():
        out = []
        for name in OPS:
            a, b = _args(name, 6, len(name))
            if ctx.ends.kind == "float":
                a = np.asarray(ctx.base.to_float64(ctx.base.convert(a)), dtype=np.float64)
                b = np.maximum(a, np.asarray(ctx.base.to_float64(ctx.base.convert(b)),
                                             dtype=np.float64))
            out.append(getattr(ctx, name)(ctx.make(a, b)))
        # tgamma / lgamma inside negative branches, a box holding each extremum
        for name in ("tgamma", "lgamma"):
            out.append(getattr(ctx, name)(ctx.make([-2.62, -0.51, -5.3], [-2.6, -0.49, -5.2])))
        return out
    _same_both_ways(run)


@pytest.mark.parametrize("base", BASES)
def test_binary_function_intervals_over_every_base(base):
    ctx = scalars.get(f"interval:{base}")
    xl, xh = np.array([0.5, 1.25, 2.0, 5.1, 3.7]), np.array([0.75, 1.25, 3.5, 5.3, 3.7])
    yl, yh = np.array([0.3, -1.5, 0.5, 2.0, 1.1]), np.array([0.6, -1.5, 2.5, 2.1, 1.1])

    def run():
        return [getattr(ctx, name)(ctx.make(xl, xh), ctx.make(yl, yh))
                for name in BINARY_FUNCTIONS]
    _same_both_ways(run)


@pytest.mark.parametrize("fmt", ["binary32", "bfloat16", "binary16", "e4m3", "binary64",
                                 "binary(11,40)"])
def test_mpfr_settlement_of_correctly_rounded_paths(fmt):
    """correct_rounding.settle computes every element in MPFR: every unary and binary
    function and the arithmetic, at points of the format."""
    f = formats.get(fmt)
    rng = np.random.default_rng(4)
    x = formats.round_to_format(rng.uniform(0.05, 3.0, 6), f)
    y = formats.round_to_format(rng.uniform(-2.0, 2.0, 6), f)
    idx = np.arange(x.size)

    def run():
        out = [CR.settle(op, f, (x, y, x)[:3 if op == "fma" else (1 if op == "sqrt" else 2)],
                         idx) for op in CR._ARITH]
        for name in OPS:
            if name in ("acosh",):
                arg = x + 1.0
            elif name in ("asin", "acos", "atanh"):
                arg = x / 4
            else:
                arg = x
            arg = formats.round_to_format(arg, f)
            out.append(CR.settle(FUNCTIONS[name], f, (arg,), idx))
        for name, fn2 in BINARY_FUNCTIONS.items():
            out.append(CR.settle(fn2, f, (x, y), idx))
        return out
    _same_both_ways(run)


def test_phase_reduction_and_point_contexts():
    """sin/cos/tan at huge arguments (MPFR argument reduction), the fp32-real and
    mpmath point contexts."""
    big = np.ldexp(1 + np.random.default_rng(2).random(8), np.arange(40, 1000, 120))

    def run():
        out = [FE.extremum_inside(ph, big, big + np.spacing(big) * 9)
               for ph in (0.0, math.pi / 2, math.pi, -math.pi / 2)]
        for base in ("float64", "binary32"):
            ctx = scalars.get(f"interval:{base}")
            for name in ("sin", "cos", "tan"):
                out.append(getattr(ctx, name)(ctx.make(big, big)))
        x = np.array([0.3, 1.7, -2.2])
        for name in ("fp32-real", "mpmath:120"):
            c = scalars.get(name)
            for f in OPS:
                if f in ("acosh",):
                    arg = np.abs(x) + 1
                elif f in ("asin", "acos", "atanh", "log1p"):
                    arg = x / 4
                elif f in ("log", "log2", "log10", "tgamma", "lgamma"):
                    arg = np.abs(x)
                else:
                    arg = x
                out.append(c.to_float64(getattr(c, f)(c.convert(arg))))
        return out
    _same_both_ways(run)


SUITES = ["test_interval_functions.py", "test_interval_directed.py",
          "test_interval_f64_endpoints.py", "test_interval_sincos_any_argument.py",
          "test_fpcore_functions.py", "test_fpcore_binary_functions.py",
          "test_gamma_negative_branches.py", "test_atan.py", "test_binary_transcendental.py",
          "test_interval_scalar_tightness.py"]


@pytest.mark.slow
def test_endpoint_suites_pass_under_the_hostile_global_context():
    here = Path(__file__).parent
    env = dict(os.environ, SCALARLAB_TEST_MPFR_GLOBAL="hostile")
    files = [str(here / s) for s in SUITES if (here / s).exists()]
    assert len(files) >= len(SUITES) - 1
    r = subprocess.run([sys.executable, "-m", "pytest", "-o", "addopts=", "-m", "not slow",
                        "-q", "-x", "-p", "no:cacheprovider", *files],
                       env=env, capture_output=True, text=True, timeout=3000)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert " passed" in r.stdout and " failed" not in r.stdout
