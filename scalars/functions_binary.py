"""The binary functions of the vocabulary, each declared once: ``pow atan2 hypot fmod
remainder fmax fmin fdim copysign`` (FPCore's, with C's meaning).

A :class:`BinaryFunction` is the two-argument counterpart of
:class:`scalars.functions.ScalarFunction`; nothing else names these functions one by one:

* every context gets its method (``ctx.pow(a, b)``) generated in :mod:`scalars.base`; each
  context family implements one ``_function2(fn, a, b)`` that reads the entry (numpy
  broadcasting, a ContextError naming op, context and both shapes otherwise):
  binary formats: ``exact`` functions (fmod remainder fmax fmin copysign: the float64
  result is exact) rounded once onto the format; the others from the float64 evaluator
  within ``FAST_PATH_MARGIN`` times ``f64_ulps`` and MPFR (``mpfr``/``mpfr2``) near
  rounding boundaries (:mod:`scalars.kernels.correct_rounding`); fp32-real: MPFR; float64:
  ``f64``; mpmath: ``mpmath2`` at PREC+32 bits rounded once, exact functions from their
  exact value; rational: ``rational`` or a ContextError naming op and context;
  complex128: ``complex``; duals: ``partials``; intervals: the rule named by ``interval``
  in :mod:`scalars.kernels.function_intervals` (a ContextError naming op and context when None);
* the graph op record (:mod:`graph.ops_elementwise`): a broadcasting binary op like
  ``add`` with forward ``ctx.<name>``, VJP/JVP from ``partials``, the ``domain`` check.

Fields:

``f64``        (x, y) float64 arrays -> float64 array (numpy / libm; C's special cases).
``f64_ulps``   error bound of ``f64`` in float64 ulps; 0 = exact (its value is the exact
               real result, so one rounding onto a format is the correctly rounded one).
``mpfr``       gmpy2 context method with C's semantics, correctly rounded in the context;
               ``mpfr2(gctx, x, y)`` instead where MPFR lacks the function.
``mpmath2``    (mp, x, y) -> mpf evaluated with guard bits (non-exact functions).
``partials``   (ctx, x, y, z) -> (dz/dx, dz/dy) in the context vocabulary (z = f(x, y)).
``domain``     (x, y) -> mask of the point arguments outside the domain (pow of a negative
               base with a non-integer exponent, fmod by zero), with ``why``.
``rational``   (p, q) mpq -> exact mpq value or None (refused).
``complex``    numpy function on complex128, or None (with ``complex_why``).
``interval``   name of the interval rule, or None (refused with ``interval_why``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

import gmpy2
import numpy as np

from .functions import FAST_PATH_MARGIN


@dataclass(frozen=True)
class BinaryFunction:
    """One real function of two arguments; see the module docstring for each field."""

    name: str
    doc: str
    f64: Callable
    partials: Callable
    f64_ulps: int = 1
    mpfr: str | None = None
    mpfr2: Callable | None = None
    mpmath2: Callable | None = None
    domain: Callable | None = None
    why: str = ""
    rational: Callable | None = None
    complex: Callable | None = None
    complex_why: str = ""
    interval: str | None = None
    interval_why: str = ""

    @property
    def exact(self) -> bool:
        """The float64 evaluator returns the exact real result (on float64 arguments)."""
        return self.f64_ulps == 0

    @property
    def f64_rel(self) -> float:
        return self.f64_ulps * 2.0 ** -52 * FAST_PATH_MARGIN

    def eval_f64(self, x, y) -> np.ndarray:
        with np.errstate(all="ignore"):
            return np.asarray(self.f64(np.asarray(x, dtype=np.float64),
                                       np.asarray(y, dtype=np.float64)), dtype=np.float64)

    def mpfr_in(self, gctx) -> Callable:
        """(x, y) -> f(x, y) correctly rounded in the gmpy2 context ``gctx``."""
        if self.mpfr is not None:
            return getattr(gctx, self.mpfr)
        return lambda x, y: self.mpfr2(gctx, x, y)


# ------------------------------------------------------------- float64 evaluators
def _remainder64(x, y):
    # IEEE remainder (n = x/y rounded half to even), exact; numpy has none (np.remainder
    # is Python's floored modulo).  CPython's math.remainder is IEEE's; NaN where invalid.
    def one(a, b):
        try:
            return math.remainder(a, b)
        except ValueError:
            return math.nan
    x, y = np.broadcast_arrays(x, y)
    return np.asarray(np.frompyfunc(one, 2, 1)(x, y), dtype=np.float64)


def _fmax64(x, y):
    # maxNum: a NaN operand loses; max(+0, -0) = +0 (as MPFR), where numpy returns either
    r = np.fmax(x, y)
    return np.where((x == 0) & (y == 0), x + y, r)


def _fmin64(x, y):
    r = np.fmin(x, y)
    return np.where((x == 0) & (y == 0), -((-x) + (-y)), r)


def _fdim64(x, y):
    # x - y if x > y, +0 if x <= y, NaN if either is NaN (C fdim)
    return np.where(x > y, x - y, np.where(np.isnan(x) | np.isnan(y), x + y, 0.0))


# --------------------------------------------------------------- MPFR compositions
def _fdim_mpfr(c, x, y):
    if gmpy2.is_nan(x) or gmpy2.is_nan(y):
        return c.add(x, y)
    return c.sub(x, y) if x > y else gmpy2.mpfr(0)


def _copysign_mpfr(c, x, y):
    # |x| with y's sign bit, each step in c (gmpy2.copy_sign rounds to the global
    # context): exact for a value of c's format, correctly rounded otherwise; c's range
    m = c.abs(x)
    # y's sign bit as MPFR sees it, NaN's included (copy_sign of 1 is exact in any context)
    y = y if isinstance(y, type(m)) else gmpy2.mpfr(y, 53)
    return c.minus(m) if gmpy2.copy_sign(gmpy2.mpfr(1, 2), y) < 0 else m


# ------------------------------------------------------------------ domains
def _pow_domain(x, y):
    """pow is undefined (NaN) for a negative base and a non-integer exponent."""
    x, y = np.asarray(x), np.asarray(y)
    if x.dtype == object or y.dtype == object:
        def one(a, b):
            try:
                return bool(a < 0 and b != int(b))
            except (ValueError, OverflowError, TypeError, ArithmeticError):
                return False
        return np.asarray(np.frompyfunc(one, 2, 1)(x, y), dtype=bool)
    with np.errstate(invalid="ignore"):
        return (x < 0) & np.isfinite(y) & (y != np.floor(y))


def _zero_divisor(x, y):
    y = np.asarray(y)
    return np.broadcast_to(np.asarray(np.equal(y, 0), dtype=bool),
                           np.broadcast_shapes(np.shape(x), y.shape))


# ---------------------------------------------------------------- exact values
_MAX_EXPONENT = 4096


def _q(v) -> Fraction:
    return Fraction(int(v.numerator), int(v.denominator))


def _pow_q(p, q):
    p, q = _q(p), _q(q)
    if q.denominator == 1:
        n = int(q)
        if p == 0 and n < 0:
            return None
        if abs(n) > _MAX_EXPONENT and abs(p) != 1 and p != 0:
            return None
        return gmpy2.mpq(p ** n)
    if p < 0 or q.denominator > 64:
        return None
    d = q.denominator
    rn, en = gmpy2.iroot(p.numerator, d)
    rd, ed = gmpy2.iroot(p.denominator, d)
    if not (en and ed) or abs(q.numerator) > _MAX_EXPONENT or (p == 0 and q < 0):
        return None
    return gmpy2.mpq(Fraction(int(rn), int(rd)) ** q.numerator)


def _atan2_q(y, x):
    if y == 0 and x >= 0:
        return gmpy2.mpq(0)
    return None


def _hypot_q(x, y):
    s = gmpy2.mpq(x) ** 2 + gmpy2.mpq(y) ** 2
    rn, en = gmpy2.iroot(s.numerator, 2)
    rd, ed = gmpy2.iroot(s.denominator, 2)
    return gmpy2.mpq(rn, rd) if en and ed else None


def _fmod_q(x, y):
    x, y = _q(x), _q(y)
    if y == 0:
        return None
    n = math.trunc(x / y)
    return gmpy2.mpq(x - n * y)


def _remainder_q(x, y):
    x, y = _q(x), _q(y)
    if y == 0:
        return None
    n = round(x / y)                 # Fraction rounds half to even, as IEEE remainder
    return gmpy2.mpq(x - n * y)


def _copysign_q(x, y):
    return gmpy2.mpq(-abs(x) if y < 0 else abs(x))


# ---------------------------------------------------------------- partials
def _one(c):
    return c.ones(())


def _is_zero(c, v):
    """Point contexts: bool mask of v == 0 (None where the context cannot compare)."""
    if c.is_interval:
        return None
    zero = c.zeros(())
    return np.logical_not(c.less(v, zero)) & np.logical_not(c.less(zero, v))


def _pow_partials(c, x, y, z):
    # dz/dx = y x^(y-1) (0 where y = 0, as torch); dz/dy = z log x for x > 0, 0 elsewhere
    # (the real x^y has no y-derivative at x <= 0; log is taken of 1 there).
    dx = c.mul(y, c.pow(x, c.sub(y, _one(c))))
    zy = _is_zero(c, y)
    if zy is not None and zy.any():
        dx = c.where(zy, c.zeros(()), dx)
    h = c.heaviside(x)
    safe = c.add(c.mul(x, h), c.sub(_one(c), h))
    dy = c.mul(c.mul(z, c.log(safe)), h)
    return dx, dy


def _atan2_partials(c, y, x, z):
    r2 = c.add(c.square(x), c.square(y))
    return c.div(x, r2), c.neg(c.div(y, r2))


def _hypot_partials(c, x, y, z):
    return c.div(x, z), c.div(y, z)


def _quotient_partials(c, x, y, z):
    # z = x - n y with n an integer constant nearby: dz/dx = 1, dz/dy = -n, where n is
    # recovered as nearbyint((x - z) / y) (exact n up to the rounding of the division).
    n = c.nearbyint(c.div(c.sub(x, z), y))
    return c.ones(c.shape(x)), c.neg(n)


def _fmax_partials(c, x, y, z):
    # torch's fmax: the gradient goes to x where x >= y (ties to x)
    w = c.sub(_one(c), c.heaviside(c.sub(y, x)))
    return w, c.sub(_one(c), w)


def _fmin_partials(c, x, y, z):
    w = c.sub(_one(c), c.heaviside(c.sub(x, y)))
    return w, c.sub(_one(c), w)


def _fdim_partials(c, x, y, z):
    w = c.heaviside(c.sub(x, y))
    return w, c.neg(w)


def _copysign_partials(c, x, y, z):
    # z = |x| s(y): dz/dx = sign(x) s(y) = sign(x) copysign(1, y); dz/dy = 0
    return c.mul(c.sign(x), c.copysign(_one(c), y)), c.zeros(c.shape(y))


# ==================================================================== the table
_ENTRIES = (
    BinaryFunction(
        "pow", "x^y (C pow); partials y x^(y-1) and x^y log x", f64=np.power, f64_ulps=4,
        mpfr="pow", mpmath2=lambda mp, x, y: mp.power(x, y), partials=_pow_partials,
        domain=_pow_domain, why="pow of a negative base with a non-integer exponent",
        rational=_pow_q, complex=np.power, interval="pow"),
    BinaryFunction(
        "atan2", "angle of the point (x, y) for atan2(y, x); partials x/r^2, -y/r^2",
        f64=np.arctan2, f64_ulps=4, mpfr="atan2", mpmath2=lambda mp, y, x: mp.atan2(y, x),
        partials=_atan2_partials, rational=_atan2_q,
        complex_why="atan2 is not defined on complex numbers", interval="atan2"),
    BinaryFunction(
        "hypot", "sqrt(x^2 + y^2) without overflow; partials x/z, y/z", f64=np.hypot,
        f64_ulps=2, mpfr="hypot", mpmath2=lambda mp, x, y: mp.hypot(x, y),
        partials=_hypot_partials, rational=_hypot_q,
        complex_why="hypot is not defined on complex numbers", interval="hypot"),
    BinaryFunction(
        "fmod", "x - trunc(x/y) y (C fmod, exact); partials 1, -trunc(x/y)", f64=np.fmod,
        f64_ulps=0, mpfr="fmod", partials=_quotient_partials, domain=_zero_divisor,
        why="fmod by zero", rational=_fmod_q,
        complex_why="fmod is not defined on complex numbers", interval="fmod"),
    BinaryFunction(
        "remainder", "x - n y, n = x/y rounded half to even (IEEE remainder, exact); "
        "partials 1, -n", f64=_remainder64, f64_ulps=0, mpfr="remainder",
        partials=_quotient_partials, domain=_zero_divisor, why="remainder by zero",
        rational=_remainder_q, complex_why="remainder is not defined on complex numbers",
        interval="remainder"),
    BinaryFunction(
        "fmax", "maximum, a NaN operand loses (C fmax); the gradient goes to x at ties",
        f64=_fmax64, f64_ulps=0, mpfr="maxnum", partials=_fmax_partials,
        rational=lambda x, y: gmpy2.mpq(max(x, y)),
        complex_why="fmax is not defined on complex numbers", interval="fmax"),
    BinaryFunction(
        "fmin", "minimum, a NaN operand loses (C fmin); the gradient goes to x at ties",
        f64=_fmin64, f64_ulps=0, mpfr="minnum", partials=_fmin_partials,
        rational=lambda x, y: gmpy2.mpq(min(x, y)),
        complex_why="fmin is not defined on complex numbers", interval="fmin"),
    BinaryFunction(
        "fdim", "x - y if x > y else +0 (C fdim, one rounding); partials heaviside(x-y), "
        "-heaviside(x-y)", f64=_fdim64, f64_ulps=1, mpfr2=_fdim_mpfr,
        partials=_fdim_partials, rational=lambda x, y: gmpy2.mpq(max(x - y, 0)),
        complex_why="fdim is not defined on complex numbers", interval="fdim"),
    BinaryFunction(
        "copysign", "|x| with the sign of y (C copysign, exact); partials sign(x) "
        "copysign(1, y), 0", f64=np.copysign, f64_ulps=0, mpfr2=_copysign_mpfr,
        partials=_copysign_partials, rational=_copysign_q,
        complex_why="copysign is not defined on complex numbers", interval="copysign"),
)

#: name -> BinaryFunction, in vocabulary order.
BINARY_FUNCTIONS: dict[str, BinaryFunction] = {f.name: f for f in _ENTRIES}
