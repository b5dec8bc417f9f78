"""The scalar functions of the vocabulary, each declared once: ``exp log tanh sigmoid
softplus sin cos erf atan``, FPCore's ``exp2 expm1 log10 log2 log1p cbrt tan asin acos
sinh cosh asinh acosh atanh erfc tgamma lgamma`` and ``ceil floor trunc round nearbyint``
(plus ``digamma``, a helper of the tgamma/lgamma derivatives that is no IR op).

A :class:`ScalarFunction` holds every fact the lab needs about one real function.  Nothing
else in the package names these functions one by one; everything is derived from
:data:`FUNCTIONS`:

* every context gets its method (``ctx.exp(x)``) generated in :mod:`scalars.base`; each
  context family implements one ``_function(fn, x)`` that reads the entry:
  binary formats: the float64 evaluator, a check that its error bound cannot straddle a
  rounding boundary, MPFR (``mpfr``/``bounds``) for the rest (:mod:`scalars.kernels.correct_rounding`);
  fp32-real: MPFR; mpmath: ``mpmath``; float64: ``f64``; complex128: ``complex``;
  rational: the exact ``rational_points`` or a ContextError naming op and context;
  intervals: ``monotone``/``periodic`` and ``domain`` decide which endpoints to round, and
  :mod:`scalars.kernels.function_endpoints` rounds them (exactly directed for binary formats);
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
``rational``, ``pieces``, ``critical``, ``interval_domain``, ``poles_at``, ``op``: see
                "piecewise functions" below (the FPCore additions).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable

import gmpy2
import mpmath
import numpy as np

from .errors import ContextError

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
    """The real arguments where f is defined: ``x > lo`` (``open``) or ``x >= lo``, and
    likewise ``x < hi`` (``hi_open``) or ``x <= hi``, less the ``poles``.

    ``limit``/``hi_limit`` are f's limits at ``lo``/``hi`` (intervals touching an open end
    use them as their end); ``poles(x)`` (optional) masks isolated points where f is
    undefined (tgamma's non-positive integers); ``why`` is the message of the
    ContextError / OpDataError raised outside the domain."""

    lo: float
    open: bool
    why: str
    limit: float = -math.inf
    hi: float = math.inf
    hi_open: bool = False
    hi_limit: float = math.inf
    poles: Callable | None = None

    @property
    def has_hi(self) -> bool:
        return self.hi < math.inf

    def outside(self, x) -> np.ndarray:
        """Boolean mask of the entries of x (any comparable values) outside the domain."""
        cmp = np.less_equal if self.open else np.less
        out = np.asarray(cmp(x, self.lo), dtype=bool)
        if self.has_hi:
            cmp = np.greater_equal if self.hi_open else np.greater
            out = out | np.asarray(cmp(x, self.hi), dtype=bool)
        if self.poles is not None:
            out = out | np.asarray(self.poles(x), dtype=bool)
        return out


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
    # ---- fields of the functions added for FPCore (see "Piecewise functions" below)
    rational: Callable | None = None
    pieces: bool = False
    critical: tuple = ()
    interval_domain: Domain | None = None
    poles_at: tuple | None = None
    op: bool = True
    negative_branches: bool = False

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
        if self.mpfr == "rint":
            # MPFR's rint rounds to an integer in the context's direction (RD rint = floor);
            # nearbyint is half-to-even whatever the direction: a nearest context, where
            # the integer of an x of at most prec bits is exact
            v = gmpy2.context(precision=max(prec, x.precision)).rint(x)
            return v, v
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
    from .kernels.f64_libm import erf_f64        # numpy has no erf; libm's, vectorised by numba
    x = np.asarray(x, dtype=np.float64)
    return np.reshape(erf_f64(np.ascontiguousarray(x)), x.shape)


# ------------------------------------------------- MPFR bounds of the compositions
def _directed(prec):
    return (gmpy2.context(precision=prec, round=gmpy2.RoundDown),
            gmpy2.context(precision=prec, round=gmpy2.RoundUp))


def _sigmoid_bounds(x, prec):
    dn, up = _directed(prec)
    if x >= 0:      # 1 / (1 + e^-x): the denominator rounded the other way
        mx = dn.minus(x)    # exact (x has at most prec bits); Python's -x would round to
        #                     gmpy2's global context
        return dn.div(1, up.add(1, up.exp(mx))), up.div(1, dn.add(1, dn.exp(mx)))
    # e^x / (1 + e^x): no exponent overflow for very negative x
    return (dn.div(dn.exp(x), up.add(1, up.exp(x))),
            up.div(up.exp(x), dn.add(1, dn.exp(x))))


def _softplus_bounds(x, prec):
    # max(x, 0) + log1p(e^-|x|): e^x never overflows MPFR's exponent range; log1p and exp
    # are increasing, so rounding every step the same way bounds the result.
    dn, up = _directed(prec)
    pos = x if x > 0 else gmpy2.mpfr(0)
    e = dn.minus(dn.abs(x))     # exact, in a directed context (not the global one)
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


# ============================================================ piecewise functions
# The functions FPCore adds (exp2 ... lgamma, the rounding functions).  Their interval
# rule is the generic one of scalars.kernels.function_intervals (``pieces=True``): f is continuous
# and monotone between the points of ``critical`` on the (interval) domain, so over
# [a, b] it ranges between the smallest and largest of f(a), f(b), the limits at open
# domain ends touched, and the critical values inside.  Fields:
#
# ``rational``         q -> exact value (mpq) or None, for the rational context (exp2 at
#                      integers, cbrt of cubes, tgamma at positive integers, ...).
# ``pieces``           use that generic interval rule.
# ``critical``         ((x_lo, x_hi, v_lo, v_hi), ...): a critical point lies in the float
#                      bracket [x_lo, x_hi], f's value there in the decimal bracket
#                      [v_lo, v_hi] (tgamma's minimum at 1.4616...).
# ``interval_domain``  the domain used by interval contexts when it is smaller than the
#                      point domain (tgamma/lgamma/digamma: x > 0 only; the negative axis
#                      has a pole at every integer): ContextError outside it.
# ``poles_at``         (offset, period): tan has poles at offset + k period; an interval
#                      that may contain one is the whole line (ContextError over rational
#                      endpoints).
# ``op``               False for helper functions of the vocabulary that are no IR op
#                      (digamma, used by the derivatives of tgamma and lgamma).
# ``negative_branches``  tgamma/lgamma: intervals below 0 inside one branch between poles
#                      take the convexity rule of function_intervals (the rest: x > 0).
with mpmath.workdps(320):
    LN2 = mpmath.nstr(mpmath.log(2), 318, strip_zeros=False)
    LN10 = mpmath.nstr(mpmath.log(10), 318, strip_zeros=False)
with mpmath.workdps(60):
    # The minimum of tgamma on x > 0 (the root of digamma), shared by lgamma.
    _X0 = mpmath.findroot(mpmath.digamma, mpmath.mpf("1.4616321449683623"))
    _G0, _LG0 = mpmath.gamma(_X0), mpmath.log(mpmath.gamma(_X0))
    _X0_BRACKET = (float(np.nextafter(float(_X0), -math.inf)),
                   float(np.nextafter(float(_X0), math.inf)))
    _TINY = mpmath.mpf(10) ** -50
    _GAMMA_MIN = (*_X0_BRACKET, mpmath.nstr(_G0 - _TINY, 55), mpmath.nstr(_G0 + _TINY, 55))
    _LGAMMA_MIN = (*_X0_BRACKET, mpmath.nstr(_LG0 - _TINY, 55),
                   mpmath.nstr(_LG0 + _TINY, 55))
_PI_UP = float(np.nextafter(math.pi, math.inf))   # float64's pi lies below the real pi


def _nonpos_int(x):
    """Mask of the non-positive integers among x (float or object arrays)."""
    a = np.asarray(x)
    if a.dtype != object:
        with np.errstate(invalid="ignore"):
            return (a <= 0) & (a == np.floor(a))

    def one(t):
        try:
            return bool(t <= 0 and t == int(t))
        except (ValueError, OverflowError, TypeError, ArithmeticError):
            return False
    return np.asarray(np.frompyfunc(one, 1, 1)(a), dtype=bool)


def _digamma64(x):
    # numpy has no digamma: MPFR's correctly rounded binary64 value (~1 us per entry;
    # digamma only serves the derivatives of tgamma and lgamma).
    c = _F64_NEAREST
    flat = np.asarray(x, dtype=np.float64).reshape(-1)
    out = np.fromiter((float(c.digamma(gmpy2.mpfr(float(t), 53))) for t in flat),
                      np.float64, flat.size)
    return out.reshape(np.shape(x))


_F64_NEAREST = gmpy2.context(precision=53, emin=-1073, emax=1024, subnormalize=True)


def _round_half_away64(x):
    # C's round(): the fraction x - trunc(x) is exact; the sign is kept (round(-0.4) = -0).
    t = np.trunc(x)
    r = t + np.where(np.abs(x - t) >= 0.5, np.sign(x), 0.0)
    return np.copysign(r, x)


def _erfc64(x):
    from .kernels.f64_libm import erfc_f64
    x = np.asarray(x, dtype=np.float64)
    return np.reshape(erfc_f64(np.ascontiguousarray(x)), x.shape)


def _gamma64(x):
    from .kernels.f64_libm import gamma_f64
    x = np.asarray(x, dtype=np.float64)
    return np.reshape(gamma_f64(np.ascontiguousarray(x)), x.shape)


def _lgamma64(x):
    from .kernels.f64_libm import lgamma_f64
    x = np.asarray(x, dtype=np.float64)
    return np.reshape(lgamma_f64(np.ascontiguousarray(x)), x.shape)


def _lgamma_bounds(x, prec):
    # MPFR's lgamma (log|Gamma|, unlike lngamma) rounded each way; Ziv's loop on these.
    dn, up = _directed(prec)
    return dn.lgamma(x)[0], up.lgamma(x)[0]


def _cbrt_mp(mp, x):
    # the real root.  mpmath's nthroot starts Newton from int(mpz ** float), which gmpy2
    # evaluates in its global context (2 bits there give a wrong root): a fresh 53-bit one
    with gmpy2.context():
        return -mp.cbrt(-x) if x < 0 else mp.cbrt(x)


def _lgamma_mp(mp, x):
    # log|Gamma x|; extra bits so the value keeps its relative accuracy near its roots
    with mp.extraprec(64):
        return mp.re(mp.loggamma(x)) if x < 0 else mp.loggamma(x)


# ---- exact rational values
_MAX_EXP2 = 1 << 16


def _frac(q) -> Fraction:
    return Fraction(int(q.numerator), int(q.denominator))


def _pow2_exponent(n: int):
    """k with n = 2^k, or None."""
    return n.bit_length() - 1 if n > 0 and n & (n - 1) == 0 else None


def _exp2_q(q):
    if q.denominator == 1 and abs(int(q)) <= _MAX_EXP2:
        return gmpy2.mpq(2) ** int(q)
    return None


def _log2_q(q):
    if q <= 0:
        return None
    n, d = int(q.numerator), int(q.denominator)
    if d == 1 and _pow2_exponent(n) is not None:
        return gmpy2.mpq(_pow2_exponent(n))
    if n == 1 and _pow2_exponent(d) is not None:
        return gmpy2.mpq(-_pow2_exponent(d))
    return None


def _log10_q(q):
    if q <= 0:
        return None
    n, d = int(q.numerator), int(q.denominator)
    for top, sign in ((n, 1), (d, -1)):
        other = d if sign == 1 else n
        if other != 1:
            continue
        k = 0
        while top % 10 == 0:
            top //= 10
            k += 1
        if top == 1:
            return gmpy2.mpq(sign * k)
    return None


def _cbrt_q(q):
    n, d = int(q.numerator), int(q.denominator)
    rn, en = gmpy2.iroot(abs(n), 3)
    rd, ed = gmpy2.iroot(d, 3)
    if en and ed:
        return gmpy2.mpq(-rn if n < 0 else rn, rd)
    return None


def _tgamma_q(q):
    if q.denominator == 1 and 0 < int(q) <= 1000:
        return gmpy2.mpq(math.factorial(int(q) - 1))
    return None


def _round_q(kind):
    def f(q):
        v = _frac(q)
        if kind == "ceil":
            r = math.ceil(v)
        elif kind == "floor":
            r = math.floor(v)
        elif kind == "trunc":
            r = math.trunc(v)
        elif kind == "round":                       # half away from zero (C round)
            r = math.floor(abs(v) + Fraction(1, 2))
            r = -r if v < 0 else r
        else:                                       # nearbyint: half to even
            r = round(v)
        return gmpy2.mpq(r)
    return f


# ---- derivatives (context vocabulary)
def _zero_d(c, x, y):
    return c.zeros(c.shape(x))


def _recip_sqrt(c, t):
    return c.div(_one(c), c.sqrt(t))


def _no_derivative(name, why):
    def d(c, x, y):
        raise ContextError(f"context {c.name}: derivative of {name}: {why}")
    return d


def _gamma_facts(x):     # Gamma x > 0 for x > 0 (no cheaper fact is safe near the minimum)
    n = np.shape(x)
    pos = x > 0
    return (np.where(pos, 0.0, -np.inf), pos, np.full(n, np.inf), np.zeros(n, bool))


_MORE = (
    ScalarFunction(
        "exp2", "2^x; derivative 2^x ln 2", f64=np.exp2, mpfr="exp2",
        mpmath=lambda mp, x: mp.power(2, x), range=(0.0, math.inf), monotone="increasing",
        complex=np.exp2, rational=_exp2_q, pieces=True,
        derivative=lambda c, x, y: c.mul(y, c.convert(LN2))),
    ScalarFunction(
        "expm1", "e^x - 1; derivative e^x", f64=np.expm1, mpfr="expm1",
        mpmath=lambda mp, x: mp.expm1(x), range=(-1.0, math.inf), monotone="increasing",
        complex=np.expm1, rational_points={0: 0}, pieces=True,
        derivative=lambda c, x, y: c.add(y, _one(c))),
    ScalarFunction(
        "log10", "base-10 log; derivative 1/(x ln 10)", f64=np.log10, mpfr="log10",
        mpmath=lambda mp, x: mp.log10(x), range=(-math.inf, math.inf),
        domain=Domain(0.0, open=True, why="log10 of a non-positive value", limit=-math.inf),
        monotone="increasing", complex=np.log10, rational=_log10_q, pieces=True,
        derivative=lambda c, x, y: c.div(_one(c), c.mul(x, c.convert(LN10)))),
    ScalarFunction(
        "log2", "base-2 log; derivative 1/(x ln 2)", f64=np.log2, mpfr="log2",
        mpmath=lambda mp, x: mp.log(x, 2), range=(-math.inf, math.inf),
        domain=Domain(0.0, open=True, why="log2 of a non-positive value", limit=-math.inf),
        monotone="increasing", complex=np.log2, rational=_log2_q, pieces=True,
        derivative=lambda c, x, y: c.div(_one(c), c.mul(x, c.convert(LN2)))),
    ScalarFunction(
        "log1p", "log(1 + x); derivative 1/(1 + x)", f64=np.log1p, mpfr="log1p",
        mpmath=lambda mp, x: mp.log1p(x), range=(-math.inf, math.inf),
        domain=Domain(-1.0, open=True, why="log1p of a value <= -1", limit=-math.inf),
        monotone="increasing", complex=np.log1p, rational_points={0: 0}, pieces=True,
        derivative=lambda c, x, y: c.div(_one(c), c.add(_one(c), x))),
    ScalarFunction(
        "cbrt", "cube root; derivative 1/(3 y^2)", f64=np.cbrt, mpfr="cbrt",
        mpmath=_cbrt_mp, 
        range=(-math.inf, math.inf), monotone="increasing", rational=_cbrt_q, pieces=True,
        complex_why="numpy has no complex cbrt",
        derivative=lambda c, x, y: c.div(_one(c), c.mul(c.convert(3), c.square(y)))),
    ScalarFunction(
        "tan", "tangent; derivative 1 + y^2", f64=np.tan, mpfr="tan", mpmath="tan",
        range=(-math.inf, math.inf), complex=np.tan,   # increasing between its poles only
        rational_points={0: 0}, pieces=True, poles_at=(math.pi / 2, math.pi),
        derivative=lambda c, x, y: c.add(_one(c), c.square(y))),
    ScalarFunction(
        "asin", "arcsine; derivative 1/sqrt(1 - x^2)", f64=np.arcsin, mpfr="asin",
        mpmath="asin", range=(-_HALF_PI_UP, _HALF_PI_UP), monotone="increasing",
        domain=Domain(-1.0, open=False, why="asin of a value outside [-1, 1]", hi=1.0),
        complex=np.arcsin, rational_points={0: 0}, pieces=True,
        derivative=lambda c, x, y: _recip_sqrt(c, c.sub(_one(c), c.square(x)))),
    ScalarFunction(
        "acos", "arccosine; derivative -1/sqrt(1 - x^2)", f64=np.arccos, mpfr="acos",
        mpmath="acos", range=(0.0, _PI_UP), monotone="decreasing",
        domain=Domain(-1.0, open=False, why="acos of a value outside [-1, 1]", hi=1.0),
        complex=np.arccos, rational_points={1: 0}, pieces=True,
        derivative=lambda c, x, y: c.neg(_recip_sqrt(c, c.sub(_one(c), c.square(x))))),
    ScalarFunction(
        "sinh", "hyperbolic sine; derivative cosh x", f64=np.sinh, mpfr="sinh",
        mpmath="sinh", range=(-math.inf, math.inf), monotone="increasing", complex=np.sinh,
        rational_points={0: 0}, pieces=True, derivative=lambda c, x, y: c.cosh(x)),
    ScalarFunction(
        "cosh", "hyperbolic cosine (even, minimum 1 at 0); derivative sinh x", f64=np.cosh,
        mpfr="cosh", mpmath="cosh", range=(1.0, math.inf), complex=np.cosh,
        rational_points={0: 1}, pieces=True, critical=((0.0, 0.0, "1", "1"),),
        derivative=lambda c, x, y: c.sinh(x)),
    ScalarFunction(
        "asinh", "inverse hyperbolic sine; derivative 1/sqrt(x^2 + 1)", f64=np.arcsinh,
        mpfr="asinh", mpmath="asinh", range=(-math.inf, math.inf), monotone="increasing",
        complex=np.arcsinh, rational_points={0: 0}, pieces=True,
        derivative=lambda c, x, y: _recip_sqrt(c, c.add(c.square(x), _one(c)))),
    ScalarFunction(
        "acosh", "inverse hyperbolic cosine; derivative 1/sqrt((x - 1)(x + 1))",
        f64=np.arccosh, mpfr="acosh", mpmath="acosh", range=(0.0, math.inf),
        domain=Domain(1.0, open=False, why="acosh of a value < 1"), monotone="increasing",
        complex=np.arccosh, rational_points={1: 0}, pieces=True,
        derivative=lambda c, x, y: _recip_sqrt(
            c, c.mul(c.sub(x, _one(c)), c.add(x, _one(c))))),
    ScalarFunction(
        "atanh", "inverse hyperbolic tangent; derivative 1/(1 - x^2)", f64=np.arctanh,
        mpfr="atanh", mpmath="atanh", range=(-math.inf, math.inf), monotone="increasing",
        domain=Domain(-1.0, open=True, why="atanh of a value outside (-1, 1)",
                      limit=-math.inf, hi=1.0, hi_open=True, hi_limit=math.inf),
        complex=np.arctanh, rational_points={0: 0}, pieces=True,
        derivative=lambda c, x, y: c.div(_one(c), c.sub(_one(c), c.square(x)))),
    ScalarFunction(
        "erfc", "complementary error function; derivative -2/sqrt(pi) e^(-x^2)",
        f64=_erfc64, f64_ulps=6, mpfr="erfc", mpmath="erfc", range=(0.0, 2.0),
        monotone="decreasing", rational_points={0: 1}, pieces=True,
        complex_why="numpy has no complex erfc",
        derivative=lambda c, x, y: c.neg(c.mul(c.convert(TWO_OVER_SQRT_PI),
                                               c.exp(c.neg(c.square(x)))))),
    ScalarFunction(
        "tgamma", "Gamma function; derivative Gamma(x) digamma(x)", f64=_gamma64,
        f64_ulps=10, mpfr="gamma", mpmath="gamma", range=(-math.inf, math.inf),
        domain=Domain(-math.inf, open=False, poles=_nonpos_int,
                      why="tgamma at a non-positive integer (a pole)"),
        interval_domain=Domain(0.0, open=True, limit=math.inf,
                               why="an interval reaching 0 or across it contains "
                                   "tgamma's pole at 0"), negative_branches=True,
        critical=(_GAMMA_MIN,), facts=_gamma_facts, rational=_tgamma_q, pieces=True,
        complex_why="numpy has no complex gamma",
        derivative=lambda c, x, y: c.mul(y, c.digamma(x))),
    ScalarFunction(
        "lgamma", "log|Gamma(x)| (C lgamma); derivative digamma(x)", f64=_lgamma64,
        f64_ulps=8, mpfr_bounds=_lgamma_bounds, mpmath=_lgamma_mp,
        range=(-math.inf, math.inf),
        domain=Domain(-math.inf, open=False, poles=_nonpos_int,
                      why="lgamma at a non-positive integer (a pole)"),
        interval_domain=Domain(0.0, open=True, limit=math.inf,
                               why="an interval reaching 0 or across it contains "
                                   "lgamma's pole at 0"), negative_branches=True,
        critical=(_LGAMMA_MIN,), rational_points={1: 0, 2: 0}, pieces=True,
        complex_why="numpy has no complex lgamma",
        derivative=lambda c, x, y: c.digamma(x)),
    ScalarFunction(
        "digamma", "digamma (d/dx log Gamma); a helper of the tgamma/lgamma derivatives, "
        "not an IR op", f64=_digamma64, f64_ulps=1, mpfr="digamma", mpmath="psi0",
        range=(-math.inf, math.inf),
        domain=Domain(-math.inf, open=False, poles=_nonpos_int,
                      why="digamma at a non-positive integer (a pole)"),
        interval_domain=Domain(0.0, open=True, limit=-math.inf,
                               why="digamma over intervals is implemented for x > 0 only"),
        pieces=True, op=False,          # increasing between poles only, not overall
        complex_why="numpy has no complex digamma",
        derivative=_no_derivative("digamma", "trigamma is not in the vocabulary, so "
                                  "tgamma and lgamma have no second derivative")),
)

# The rounding functions: exact in every context (a rounded format value is a format
# value), non-decreasing (the classic monotone interval rule), derivative 0 a.e.
_ROUNDING = (
    ("ceil", "smallest integer >= x", np.ceil, "rint_ceil", lambda mp, x: mp.ceil(x)),
    ("floor", "largest integer <= x", np.floor, "rint_floor", lambda mp, x: mp.floor(x)),
    ("trunc", "integer part, toward zero", np.trunc, "rint_trunc",
     lambda mp, x: mp.sign(x) * mp.floor(abs(x))),
    ("round", "nearest integer, halves away from zero (C round)", _round_half_away64,
     "rint_round", lambda mp, x: mp.sign(x) * mp.floor(abs(x) + mp.mpf(0.5))),
    ("nearbyint", "nearest integer, halves to even (C nearbyint, default mode)", np.rint,
     "rint", lambda mp, x: mp.nint(x)),
)
_MORE += tuple(
    ScalarFunction(name, doc + "; derivative 0 (almost everywhere)", f64=f64, f64_ulps=0,
                   mpfr=mpfr, mpmath=mpm, range=(-math.inf, math.inf),
                   monotone="increasing", rational=_round_q(name), derivative=_zero_d,
                   complex_why=f"{name} is not defined on complex numbers")
    for name, doc, f64, mpfr, mpm in _ROUNDING)

#: name -> ScalarFunction, in vocabulary order.
FUNCTIONS: dict[str, ScalarFunction] = {f.name: f for f in _ENTRIES + _MORE}

