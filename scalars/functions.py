"""The scalar functions of the vocabulary, each declared once: ``exp log tanh sigmoid
softplus sin cos erf atan``.

A :class:`ScalarFunction` holds every fact the lab needs about one real function.  Nothing
else in the package names these functions one by one; everything is derived from
:data:`FUNCTIONS`:

* every context gets its method (``ctx.exp(x)``) generated in :mod:`scalars.base`; each
  context family implements one ``_function(fn, x)`` that reads the entry:
  binary formats: the float64 evaluator, a check that its error bound cannot straddle a
  rounding boundary, MPFR (``mpfr``/``bounds``) for the rest (:mod:`scalars.correct_rounding`);
  fp32-real: MPFR; mpmath: ``mpmath``; float64: ``f64``; complex128: ``complex``;
  rational: the exact ``rational_points`` or a ContextError naming op and context;
  intervals: ``monotone``/``periodic`` and ``domain`` decide which endpoints to round, and
  :mod:`scalars.function_endpoints` rounds them (exactly directed for binary formats);
  duals: ``derivative``;
* the graph op record (:mod:`graph.ops_elementwise`): forward ``ctx.<name>``, JVP and VJP
  from ``derivative``, the ``monotone`` flag, the domain check.

Adding a function is adding one entry here (and its tests).  Fields:

``mpfr``        name of MPFR's correctly rounded function (a gmpy2 context method), or
                None for a composition; then ``mpfr_bounds(x, prec)`` gives a lower and an
                upper bound at working precision ``prec`` with directed rounding at every
                step, and correct rounding comes from Ziv's loop (raise prec until both
                bounds round alike).
``f64``         vectorised float64 evaluator (numpy) used by the fast paths; ``f64_ulps``
                a bound on its error in float64 ulps, checked against MPFR by
                tests/scalars/test_interval_functions.py.  The correct-rounding fast paths
                trust only ``FAST_PATH_MARGIN`` times that bound; the float64 interval
                endpoints widen by exactly ``f64_ulps`` steps.
``derivative``  ``(ctx, x, y) -> dy/dx`` written against the context vocabulary (y = f(x)).
``domain``      :class:`Domain` or None (the whole line).
``range``       (lo, hi): every value lies in it (intervals clamp to it).
``monotone``    "increasing" / "decreasing" on the domain, or None.
``periodic``    :class:`Periodic` for sin-like functions (extrema located by phase).
``facts``       optional ``x -> (lower, lower_strict, upper, upper_strict)`` elementwise
                bounds of f(x) that let the directed fast path settle saturated and
                near-identity regions (tanh(20) just below 1) without MPFR.
``mpmath``      name of an mpmath function (``mp.<name>``, ``libmp.mpf_<name>``) or a
                composition ``(mp, x) -> mpf`` evaluated with guard bits.
``complex``     numpy function on complex128, or None (with ``complex_why``).
``rational_points``  {x: f(x)} of the rational arguments with a rational value; by
                Lindemann-Weierstrass there are no others for these functions.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable

import gmpy2
import mpmath
import numpy as np

#: The correct-rounding fast paths trust the float64 value to FAST_PATH_MARGIN times the
#: declared ulps bound (so 4 ulps -> 2^-45 relative): a large margin over the tested bound
#: costs almost nothing (a few more elements go to MPFR) and guards against a libm update.
FAST_PATH_MARGIN = 32
#: Absolute error allowance for results in float64's subnormal range (2^24 subnormal ulps).
F64_ABS_ERR = 2.0 ** -1050

# Constant for erf's derivative, as a decimal string of ~1060 bits so every context
# (mpmath at high precision included) converts it with its own single correct rounding.
with mpmath.workdps(320):
    TWO_OVER_SQRT_PI = mpmath.nstr(2 / mpmath.sqrt(mpmath.pi), 318, strip_zeros=False)


@dataclass(frozen=True)
class Domain:
    """The real arguments where f is defined: ``x > lo`` (``open``) or ``x >= lo``.

    ``limit`` is f's limit at ``lo`` (intervals touching an open end use it as their end);
    ``why`` is the message of the ContextError / OpDataError raised outside it."""

    lo: float
    open: bool
    why: str
    limit: float = -math.inf

    def outside(self, x) -> np.ndarray:
        """Boolean mask of the entries of x (any comparable values) outside the domain."""
        cmp = np.less_equal if self.open else np.less
        return np.asarray(cmp(x, self.lo), dtype=bool)


@dataclass(frozen=True)
class Periodic:
    """A 2pi-periodic function with its maximum (value range[1]) at ``maximum + 2k pi``
    and its minimum (value range[0]) at ``minimum + 2k pi``."""

    maximum: float
    minimum: float


@dataclass(frozen=True)
class ScalarFunction:
    """One real function of the vocabulary; see the module docstring for each field."""

    name: str
    doc: str
    f64: Callable
    derivative: Callable
    range: tuple
    mpmath: object
    mpfr: str | None = None
    mpfr_bounds: Callable | None = None
    f64_ulps: int = 4
    domain: Domain | None = None
    monotone: str | None = None
    periodic: Periodic | None = None
    facts: Callable | None = None
    complex: Callable | None = None
    complex_why: str = ""
    rational_points: dict = field(default_factory=dict)

    @property
    def f64_rel(self) -> float:
        """Relative error the correct-rounding fast paths allow the float64 value."""
        return self.f64_ulps * 2.0 ** -52 * FAST_PATH_MARGIN

    def eval_f64(self, x) -> np.ndarray:
        """The float64 evaluator on a float64 array, without floating-point warnings."""
        with np.errstate(all="ignore"):
            return np.asarray(self.f64(np.asarray(x, dtype=np.float64)), dtype=np.float64)

    def bounds(self, x, prec: int):
        """(L, U) mpfr with L <= f(x) <= U, for an mpfr x exact at precision ``prec``."""
        if self.mpfr is None:
            return self.mpfr_bounds(x, prec)
        dn = gmpy2.context(precision=prec, round=gmpy2.RoundDown)
        up = gmpy2.context(precision=prec, round=gmpy2.RoundUp)
        return getattr(dn, self.mpfr)(x), getattr(up, self.mpfr)(x)


# ----------------------------------------------------------------- float64 evaluators
def _sigmoid64(x):
    # 1/(1+e^-x) for x >= 0 and e^x/(1+e^x) below: no overflow, no cancellation.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _softplus64(x):
    # log(1 + e^x) = max(x, 0) + log1p(e^-|x|): both terms >= 0, no cancellation.
    return np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))


def _erf64(x):
    from .kernels import erf_f64        # numpy has no erf; libm's, vectorised by numba
    x = np.asarray(x, dtype=np.float64)
    return np.reshape(erf_f64(np.ascontiguousarray(x)), x.shape)


# ------------------------------------------------- MPFR bounds of the compositions
def _directed(prec):
    return (gmpy2.context(precision=prec, round=gmpy2.RoundDown),
            gmpy2.context(precision=prec, round=gmpy2.RoundUp))


def _sigmoid_bounds(x, prec):
    dn, up = _directed(prec)
    if x >= 0:      # 1 / (1 + e^-x): the denominator rounded the other way
        return dn.div(1, up.add(1, up.exp(-x))), up.div(1, dn.add(1, dn.exp(-x)))
    # e^x / (1 + e^x): no exponent overflow for very negative x
    return (dn.div(dn.exp(x), up.add(1, up.exp(x))),
            up.div(up.exp(x), dn.add(1, dn.exp(x))))


def _softplus_bounds(x, prec):
    # max(x, 0) + log1p(e^-|x|): e^x never overflows MPFR's exponent range; log1p and exp
    # are increasing, so rounding every step the same way bounds the result.
    dn, up = _directed(prec)
    pos = x if x > 0 else gmpy2.mpfr(0)
    e = -abs(x)
    return dn.add(pos, dn.log1p(dn.exp(e))), up.add(pos, up.log1p(up.exp(e)))


# -------------------------------------------------------- mpmath compositions
def _sigmoid_mp(mp, x):
    if x >= 0:
        return 1 / (1 + mp.exp(-x))
    e = mp.exp(x)
    return e / (1 + e)


def _softplus_mp(mp, x):
    return x + mp.log1p(mp.exp(-x)) if x > 0 else mp.log1p(mp.exp(x))


# ------------------------------------------------------------- known bounds
# Each returns (lower, lower_strict, upper, upper_strict) float64 arrays: lower <= f(x)
# (strictly where lower_strict) and f(x) <= upper likewise.
def _exp_facts(x):       # e^x > 1 for x > 0, 0 < e^x < 1 for x < 0, e^0 = 1
    pos, neg, zero = x > 0, x < 0, x == 0
    return (np.where(pos | zero, 1.0, 0.0), ~zero, np.where(neg | zero, 1.0, np.inf), neg)


def _odd_below_identity(cap):
    """|f x| < min(cap, |x|) with the sign of x (tanh, atan with cap 1, pi/2)."""
    def facts(x):
        pos, neg, zero = x > 0, x < 0, x == 0
        return (np.where(pos, 0.0, np.maximum(x, -cap)), ~zero,
                np.where(neg, 0.0, np.minimum(x, cap)), ~zero)
    return facts


# |atan x| < pi/2; float64's pi/2 lies BELOW the real pi/2 (and atan(1e300) above it), so
# the bound is the next float64 up.
_HALF_PI_UP = float(np.nextafter(math.pi / 2, math.inf))


def _sigmoid_facts(x):   # 0 < s < 1, s > 1/2 iff x > 0, s(0) = 1/2
    pos, neg, zero = x > 0, x < 0, x == 0
    return (np.where(pos | zero, 0.5, 0.0), ~zero, np.where(neg | zero, 0.5, 1.0), ~zero)


def _softplus_facts(x):  # softplus x > max(0, x)
    n = np.shape(x)
    return (np.maximum(x, 0.0), np.ones(n, bool), np.full(n, np.inf), np.zeros(n, bool))


def _erf_facts(x):       # |erf x| < 1, same sign as x
    pos, neg, zero = x > 0, x < 0, x == 0
    return (np.where(pos | zero, 0.0, -1.0), ~zero, np.where(neg | zero, 0.0, 1.0), ~zero)


def _sin_facts(x):       # |sin x| < |x| for x != 0
    pos, neg, zero = x > 0, x < 0, x == 0
    return (np.where(neg | zero, np.maximum(x, -1.0), -1.0), neg & (x > -1.0),
            np.where(pos | zero, np.minimum(x, 1.0), 1.0), pos & (x < 1.0))


def _cos_facts(x):       # cos x < 1 for x != 0, cos 0 = 1
    zero = x == 0
    return (np.where(zero, 1.0, -1.0), np.zeros(np.shape(x), bool), np.ones_like(x), ~zero)


def _log_facts(x):       # log x > 0 iff x > 1, log 1 = 0
    one = x == 1
    return (np.where((x > 1) | one, 0.0, -np.inf), x > 1,
            np.where((x < 1) | one, 0.0, np.inf), x < 1)


# ---------------------------------------------------------------- derivatives
def _one(c):
    return c.ones(())


def _csigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def _csoftplus(z):
    return np.log1p(np.exp(z))


# ==================================================================== the table
_ENTRIES = (
    ScalarFunction(
        "exp", "e^x; derivative e^x", f64=np.exp, mpfr="exp", mpmath="exp",
        derivative=lambda c, x, y: y, range=(0.0, math.inf), monotone="increasing",
        facts=_exp_facts, complex=np.exp, rational_points={0: 1}),
    ScalarFunction(
        "log", "natural log; derivative 1/x", f64=np.log, mpfr="log", mpmath="log",
        derivative=lambda c, x, y: c.div(_one(c), x), range=(-math.inf, math.inf),
        domain=Domain(0.0, open=True, why="log of a non-positive value", limit=-math.inf),
        monotone="increasing", facts=_log_facts, complex=np.log, rational_points={1: 0}),
    ScalarFunction(
        "tanh", "tanh x; derivative 1 - y^2", f64=np.tanh, mpfr="tanh", mpmath="tanh",
        derivative=lambda c, x, y: c.sub(_one(c), c.square(y)), range=(-1.0, 1.0),
        monotone="increasing", facts=_odd_below_identity(1.0), complex=np.tanh,
        rational_points={0: 0}),
    ScalarFunction(
        "sigmoid", "1/(1+e^-x); derivative y(1-y)", f64=_sigmoid64, f64_ulps=4,
        mpfr_bounds=_sigmoid_bounds, mpmath=_sigmoid_mp,
        derivative=lambda c, x, y: c.mul(y, c.sub(_one(c), y)), range=(0.0, 1.0),
        monotone="increasing", facts=_sigmoid_facts, complex=_csigmoid,
        rational_points={0: Fraction(1, 2)}),
    ScalarFunction(
        "softplus", "log(1+e^x); derivative sigmoid(x)", f64=_softplus64, f64_ulps=4,
        mpfr_bounds=_softplus_bounds, mpmath=_softplus_mp,
        derivative=lambda c, x, y: c.sigmoid(x), range=(0.0, math.inf),
        monotone="increasing", facts=_softplus_facts, complex=_csoftplus),
    ScalarFunction(
        "sin", "sin x; derivative cos x", f64=np.sin, mpfr="sin", mpmath="sin",
        derivative=lambda c, x, y: c.cos(x), range=(-1.0, 1.0),
        periodic=Periodic(maximum=math.pi / 2, minimum=-math.pi / 2), facts=_sin_facts,
        complex=np.sin, rational_points={0: 0}),
    ScalarFunction(
        "cos", "cos x; derivative -sin x", f64=np.cos, mpfr="cos", mpmath="cos",
        derivative=lambda c, x, y: c.neg(c.sin(x)), range=(-1.0, 1.0),
        periodic=Periodic(maximum=0.0, minimum=math.pi), facts=_cos_facts,
        complex=np.cos, rational_points={0: 1}),
    ScalarFunction(
        "erf", "error function; derivative 2/sqrt(pi) e^(-x^2)", f64=_erf64, mpfr="erf",
        mpmath="erf", range=(-1.0, 1.0), monotone="increasing", facts=_erf_facts,
        derivative=lambda c, x, y: c.mul(c.convert(TWO_OVER_SQRT_PI),
                                         c.exp(c.neg(c.square(x)))),
        complex_why="numpy has no complex erf", rational_points={0: 0}),
    ScalarFunction(
        "atan", "arctangent; derivative 1/(1+x^2)", f64=np.arctan, mpfr="atan",
        mpmath="atan", range=(-_HALF_PI_UP, _HALF_PI_UP), monotone="increasing",
        facts=_odd_below_identity(_HALF_PI_UP), complex=np.arctan, rational_points={0: 0},
        derivative=lambda c, x, y: c.div(_one(c), c.add(_one(c), c.square(x)))),
)

#: name -> ScalarFunction, in vocabulary order.
FUNCTIONS: dict[str, ScalarFunction] = {f.name: f for f in _ENTRIES}
