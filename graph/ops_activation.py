"""Activation op records of real networks: clip (relu6), leaky_relu, hardsigmoid,
hardswish, elu, selu, silu, mish and the tanh-approximated GELU (``gelu_tanh``).

Attribute names follow ONNX (``Clip`` min/max, ``LeakyRelu``/``Elu`` alpha, ``Selu``
alpha/gamma, ``HardSigmoid`` alpha/beta); numeric attributes are numbers or exact decimal
strings, converted into each context with one rounding.  Exact GELU (ONNX ``Gelu`` with
``approximate="none"``) is the ``gelu`` record of ``ops_elementwise``; ONNX
``Gelu(approximate="tanh")`` is ``gelu_tanh`` here.

Every forward rule is a composition of context-vocabulary operations (each correctly
rounded in the binary formats), written without branches so that one formula serves point,
interval and dual contexts:

* the piecewise-linear maps are built from ``maximum``/``minimum`` of increasing pieces
  (``leaky_relu(x) = max(x, 0) + alpha * min(x, 0)``), so over an interval context every
  term's lower end comes from the box's lower end and the box is the exact range up to
  outward rounding;
* ``elu(x) = max(x, 0) + alpha * expm1(min(x, 0))`` likewise (both terms increasing for
  alpha >= 0); in a point context it is ``alpha * expm1(x)`` for x <= 0 and ``x`` for
  x > 0 exactly (the other term is an exact zero);
* ``gelu_tanh`` is evaluated as ``x * sigmoid(2 u)``, the same function as torch's
  ``0.5 x (1 + tanh u)`` without its cancellation for x << 0.

Derivatives follow torch at the kinks (``hardtanh``/``relu6``/``clip`` and ``hardsigmoid``
have derivative 0 on the boundary, ``hardswish`` takes torch's closed intervals, ``elu``
takes the x <= 0 branch at 0), so tape gradients agree with autograd everywhere.  Over a
dual context the primal runs in the base context and the tangent comes from the record's
JVP (one source of derivatives, kinks included).
"""
from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np

from scalarlab.scalars.base import to_fraction
from scalarlab.scalars.errors import ContextError
from scalarlab.scalars.values import Interval

from .axes import is_int
from .errors import ShapeRuleError
from .ops_elementwise import _over_duals
from .oprecord import OpRecord, register

with mpmath.workdps(320):
    #: sqrt(2/pi) as a ~1060-bit decimal string (each context rounds it once)
    SQRT_2_OVER_PI = mpmath.nstr(mpmath.sqrt(2 / mpmath.pi), 318, strip_zeros=False)

#: torch's SELU constants (aten: SELU_ALPHA / SELU_SCALE), the IR defaults.  The ONNX
#: importer passes the model's own float32 attribute values explicitly.
SELU_ALPHA = "1.6732632423543772848170429916717"
SELU_GAMMA = "1.0507009873554804934193349852946"
GELU_TANH_KAPPA = "0.044715"


def real_attr(op: str, name: str, v, *, allow_none: bool = False):
    """A numeric attribute: an int, a finite float or an exact decimal/fraction string
    (returned unchanged: each context converts it with one rounding)."""
    if v is None and allow_none:
        return None
    if isinstance(v, bool):
        raise ShapeRuleError(f"{op}: attribute {name} must be a real number, got {v!r}")
    if is_int(v):
        return v
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            if allow_none and v in (float("inf"), float("-inf")):
                return None
            raise ShapeRuleError(f"{op}: attribute {name} must be finite, got {v!r}")
        return v
    if isinstance(v, str):
        try:
            to_fraction(v)           # bounded: no 10^e built for a huge exponent
        except ContextError:
            raise ShapeRuleError(f"{op}: attribute {name} must be a real number or an exact "
                                 f"decimal string, got {v!r}") from None
        return v
    raise ShapeRuleError(f"{op}: attribute {name} must be a real number, got {v!r}")


def _frac(v) -> Fraction:
    return to_fraction(v) if isinstance(v, str) else Fraction(v)


def _same_shape_checked(op, names):
    def shape(in_shapes, attrs, declared=None):
        for n in names:
            real_attr(op, n, attrs[n], allow_none=(op == "clip"))
        if op == "clip" and attrs["min"] is not None and attrs["max"] is not None \
                and _frac(real_attr(op, "min", attrs["min"])) > _frac(real_attr(op, "max", attrs["max"])):
            raise ShapeRuleError(f"clip: min={attrs['min']!r} exceeds max={attrs['max']!r}")
        return tuple(in_shapes[0])
    return shape


def _activation(name, f, dydx, *, attrs=None, monotone=None, interval=None, doc=""):
    """Record for ``y = f(ctx, x, attrs)`` with derivative ``dydx(ctx, x, y, attrs)``."""
    attrs = dict(attrs or {})

    def forward(ctx, args, a, nb):
        return f(ctx, args[0], a)

    def vjp(ctx, g, args, y, a, nb):
        return [ctx.mul(g, dydx(ctx, args[0], y, a))]

    def jvp(ctx, args, tans, y, a, nb):
        return None if tans[0] is None else ctx.mul(tans[0], dydx(ctx, args[0], y, a))

    return register(OpRecord(name=name, arity=(1, 1), shape=_same_shape_checked(name, attrs),
                             forward=_over_duals(forward, jvp), vjp=vjp, jvp=jvp, attrs=attrs,
                             capsule=f"reference.{name}", elementwise=True, monotone=monotone,
                             interval=interval, doc=doc))


def _c(ctx, v):
    return ctx.convert(v)


def _gt(ctx, x, c):
    """1 where x > c else 0 (heaviside of x - c: the sign of a rounded difference is exact)."""
    return ctx.heaviside(ctx.sub(x, c))


def _ge(ctx, x, c):
    """1 where x >= c else 0."""
    return ctx.sub(ctx.ones(()), ctx.heaviside(ctx.sub(c, x)))


# ------------------------------------------------------------------ interval rules
# silu, mish, gelu_tanh and hardswish are not monotone: each decreases on (-inf, c] and
# increases on [c, inf) (one critical point c, the global minimum).  The generic fold
# (x * sigmoid(x) in interval arithmetic) forgets that both factors see the same x and
# gives loose boxes; the exact range over [lo, hi] is [f(hi), f(lo)] left of c,
# [f(lo), f(hi)] right of c and [f(c), max(f(lo), f(hi))] across it.  The rule below
# evaluates f at the two endpoints in the interval context (outward-rounded enclosures
# of f(lo), f(hi)), uses a lower bound of the minimum f(c) (computed with mpmath at 50
# digits and lowered by 1e-30), and compares the box with bounds c_lo < c < c_hi (floats
# two ulps apart from c).  It is intersected with the generic fold's box, so it is never
# looser; tests/graph/test_graph_activations.py proves it sound by exact sampling.
def _critical(f, df, guess):
    """(c_lo, c_hi, min_low): float bounds of the critical point and a decimal lower
    bound of the minimum."""
    with mpmath.workdps(50):
        c = mpmath.findroot(df, mpmath.mpf(guess))
        m = f(c) - mpmath.mpf(10) ** -30
        cf = float(c)
        return (math.nextafter(math.nextafter(cf, -math.inf), -math.inf),
                math.nextafter(math.nextafter(cf, math.inf), math.inf),
                mpmath.nstr(m, 40, min_fixed=-mpmath.inf, max_fixed=mpmath.inf))


def _mp_sigmoid(x):
    return 1 / (1 + mpmath.exp(-x))


def _mp_silu(x):
    return x * _mp_sigmoid(x)


def _mp_gelu_tanh(x):
    k = mpmath.sqrt(2 / mpmath.pi)
    return x / 2 * (1 + mpmath.tanh(k * (x + mpmath.mpf(GELU_TANH_KAPPA) * x ** 3)))


def _mp_mish(x):
    return x * mpmath.tanh(mpmath.log1p(mpmath.exp(x)))


UNIMODAL = {
    "silu": _critical(_mp_silu, lambda x: mpmath.diff(_mp_silu, x), -1.28),
    "mish": _critical(_mp_mish, lambda x: mpmath.diff(_mp_mish, x), -1.19),
    "gelu_tanh": _critical(_mp_gelu_tanh, lambda x: mpmath.diff(_mp_gelu_tanh, x), -0.75),
    "hardswish": (-1.5, -1.5, "-0.375"),     # exact: f(-3/2) = -3/8, the corner of x (x+3)/6
}


def _compare(ends, c: float, below: bool):
    """ends <= c (below) or ends >= c as a bool array, for float and object endpoints
    (mpq, mpf compare exactly with a Python float)."""
    e = np.asarray(ends)
    if e.dtype != object:
        return np.asarray(e <= c if below else e >= c, dtype=bool)
    flat = [bool(v <= c) if below else bool(v >= c) for v in e.reshape(-1)]
    return np.array(flat, dtype=bool).reshape(e.shape)


def _unimodal_interval(name, f):
    c_lo, c_hi, m_low = UNIMODAL[name]

    def rule(ctx, args, attrs, nb):
        x = args[0]
        if not isinstance(x, Interval):
            x = ctx.convert(x)
        lo, hi = x.lo, x.hi
        f_lo = f(ctx, Interval(lo, lo), attrs)
        f_hi = f(ctx, Interval(hi, hi), attrs)
        left = _compare(hi, c_lo, below=True)              # the box lies left of c
        right = _compare(lo, c_hi, below=False)            # ... right of c
        m = ctx.convert(m_low).lo
        top = ctx.maximum(f_lo, f_hi).hi
        t_lo = np.where(left, f_hi.lo, np.where(right, f_lo.lo, m))
        t_hi = np.where(left, f_lo.hi, np.where(right, f_hi.hi, top))
        tight = ctx.make(t_lo, t_hi)
        generic = f(ctx, x, attrs)
        return Interval(ctx.maximum(tight, generic).lo, ctx.minimum(tight, generic).hi)
    return rule


# --------------------------------------------------------------------------------- clip
def _clip(ctx, x, a):
    if a["min"] is not None:
        x = ctx.maximum(x, _c(ctx, a["min"]))
    if a["max"] is not None:
        x = ctx.minimum(x, _c(ctx, a["max"]))
    return x


def _clip_d(ctx, x, y, a):
    # 1 strictly inside (min, max), 0 on and beyond the bounds (torch hardtanh / relu6)
    d = ctx.ones(())
    if a["min"] is not None:
        d = ctx.mul(d, _gt(ctx, x, _c(ctx, a["min"])))
    if a["max"] is not None:
        d = ctx.mul(d, _gt(ctx, _c(ctx, a["max"]), x))
    return ctx.broadcast_to(d, ctx.shape(x)) if ctx.shape(d) != ctx.shape(x) else d


_activation("clip", _clip, _clip_d, attrs={"min": None, "max": None}, monotone="increasing",
            doc="min(max(x, min), max) (ONNX Clip with constant bounds; relu6 = clip(0, 6)); "
                "derivative 1 strictly inside the bounds")


# --------------------------------------------------------------------------- leaky_relu
def _leaky(ctx, x, a):
    zero = ctx.zeros(())
    return ctx.add(ctx.maximum(x, zero), ctx.mul(_c(ctx, a["alpha"]), ctx.minimum(x, zero)))


def _leaky_d(ctx, x, y, a):
    h = ctx.heaviside(x)                                  # torch: x > 0 ? 1 : alpha
    return ctx.add(h, ctx.mul(_c(ctx, a["alpha"]), ctx.sub(ctx.ones(()), h)))


_activation("leaky_relu", _leaky, _leaky_d, attrs={"alpha": "0.01"},
            doc="x for x > 0, alpha * x otherwise, as max(x, 0) + alpha * min(x, 0)")


# -------------------------------------------------------------------------- hardsigmoid
def _hsig_z(ctx, x, a):
    return ctx.add(ctx.mul(_c(ctx, a["alpha"]), x), _c(ctx, a["beta"]))


def _hardsigmoid(ctx, x, a):
    return ctx.maximum(ctx.zeros(()), ctx.minimum(ctx.ones(()), _hsig_z(ctx, x, a)))


def _hardsigmoid_d(ctx, x, y, a):
    z = _hsig_z(ctx, x, a)
    inside = ctx.mul(ctx.heaviside(z), ctx.heaviside(ctx.sub(ctx.ones(()), z)))
    return ctx.mul(inside, _c(ctx, a["alpha"]))


_activation("hardsigmoid", _hardsigmoid, _hardsigmoid_d, attrs={"alpha": "0.2", "beta": "0.5"},
            doc="max(0, min(1, alpha * x + beta)) (ONNX HardSigmoid; torch's is alpha = 1/6)")


# ---------------------------------------------------------------------------- hardswish
def _hardswish(ctx, x, a):
    # torch's evaluation order: x * min(max(x + 3, 0), 6) / 6
    r = ctx.minimum(ctx.maximum(ctx.add(x, _c(ctx, 3)), ctx.zeros(())), _c(ctx, 6))
    return ctx.div(ctx.mul(x, r), _c(ctx, 6))


def _hardswish_d(ctx, x, y, a):
    # torch: x < -3: 0; -3 <= x <= 3: x / 3 + 1/2; x > 3: 1
    lo = _ge(ctx, x, _c(ctx, -3))
    above = _gt(ctx, x, _c(ctx, 3))
    mid = ctx.add(ctx.div(x, _c(ctx, 3)), _c(ctx, "0.5"))
    return ctx.add(ctx.mul(ctx.mul(lo, ctx.sub(ctx.ones(()), above)), mid), above)


_activation("hardswish", _hardswish, _hardswish_d,
            interval=_unimodal_interval("hardswish", _hardswish), doc="x * min(max(x + 3, 0), 6) / 6 (torch's order; ONNX HardSwish)")


# ---------------------------------------------------------------------------- elu, selu
def _elu_core(ctx, x, alpha):
    # expm1, not exp - 1: no cancellation near 0 (exp(x) - 1 in binary32 is ~1000 ulps
    # off there); expm1 is correctly rounded and increasing, so boxes stay tight
    zero = ctx.zeros(())
    return ctx.add(ctx.maximum(x, zero), ctx.mul(alpha, ctx.expm1(ctx.minimum(x, zero))))


def _elu_d_core(ctx, x, alpha):
    h = ctx.heaviside(x)                                  # x <= 0: alpha * exp(x)
    e = ctx.mul(alpha, ctx.exp(ctx.minimum(x, ctx.zeros(()))))
    return ctx.add(h, ctx.mul(ctx.sub(ctx.ones(()), h), e))


_activation("elu", lambda c, x, a: _elu_core(c, x, _c(c, a["alpha"])),
            lambda c, x, y, a: _elu_d_core(c, x, _c(c, a["alpha"])),
            attrs={"alpha": 1.0},
            doc="x for x > 0, alpha * expm1(x) otherwise (ONNX Elu)")

_activation("selu", lambda c, x, a: c.mul(_c(c, a["gamma"]), _elu_core(c, x, _c(c, a["alpha"]))),
            lambda c, x, y, a: c.mul(_c(c, a["gamma"]), _elu_d_core(c, x, _c(c, a["alpha"]))),
            attrs={"alpha": SELU_ALPHA, "gamma": SELU_GAMMA},
            doc="gamma * elu(x, alpha) (ONNX Selu; defaults are torch's constants)")


# ------------------------------------------------------------------ silu, mish, gelu_tanh
def _silu_d(ctx, x, y, a):
    s = ctx.sigmoid(x)                                    # s (1 + x (1 - s))
    return ctx.mul(s, ctx.add(ctx.ones(()), ctx.mul(x, ctx.sub(ctx.ones(()), s))))


def _silu(ctx, x, a):
    return ctx.mul(x, ctx.sigmoid(x))


_activation("silu", _silu, _silu_d, interval=_unimodal_interval("silu", _silu), doc="x * sigmoid(x) (torch SiLU / swish; ONNX exports it as Mul(x, Sigmoid(x)))")


def _mish_d(ctx, x, y, a):
    t = ctx.tanh(ctx.softplus(x))                         # t + x (1 - t^2) sigmoid(x)
    return ctx.add(t, ctx.mul(ctx.mul(x, ctx.sub(ctx.ones(()), ctx.square(t))), ctx.sigmoid(x)))


def _mish(ctx, x, a):
    return ctx.mul(x, ctx.tanh(ctx.softplus(x)))


_activation("mish", _mish, _mish_d, interval=_unimodal_interval("mish", _mish), doc="x * tanh(softplus(x)) (torch Mish, ONNX Mish)")


def _gelu_tanh_inner(ctx, x):
    # torch's order: sqrt(2/pi) * (x + 0.044715 * (x * x * x))
    cube = ctx.mul(ctx.mul(x, x), x)
    return ctx.mul(_c(ctx, SQRT_2_OVER_PI), ctx.add(x, ctx.mul(_c(ctx, GELU_TANH_KAPPA), cube)))


def _gelu_tanh(ctx, x, a):
    # 0.5 x (1 + tanh u) = x sigmoid(2 u) exactly; the sigmoid form has no cancellation
    # for x << 0, where torch's 1 + tanh(u) loses every digit (the value there is tiny
    # but not 0); sigmoid is correctly rounded in the binary formats
    u = _gelu_tanh_inner(ctx, x)
    return ctx.mul(x, ctx.sigmoid(ctx.mul(_c(ctx, 2), u)))


def _gelu_tanh_d(ctx, x, y, a):
    # d/dx x s(2u) = s + 2 x s (1 - s) u',  s = sigmoid(2u), u' = sqrt(2/pi) (1 + 3 kappa x^2)
    # (= torch's 0.5 (1 + t) + 0.5 x (1 - t^2) u' with t = tanh u, without its cancellation)
    s2 = ctx.sigmoid(ctx.mul(_c(ctx, 2), _gelu_tanh_inner(ctx, x)))
    du = ctx.mul(_c(ctx, SQRT_2_OVER_PI),
                 ctx.add(ctx.ones(()), ctx.mul(ctx.mul(_c(ctx, 3), _c(ctx, GELU_TANH_KAPPA)),
                                               ctx.square(x))))
    right = ctx.mul(ctx.mul(ctx.mul(_c(ctx, 2), x), ctx.mul(s2, ctx.sub(ctx.ones(()), s2))), du)
    return ctx.add(s2, right)


_activation("gelu_tanh", _gelu_tanh, _gelu_tanh_d,
            interval=_unimodal_interval("gelu_tanh", _gelu_tanh),
            doc="0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (torch gelu(approximate="
                "'tanh'), ONNX Gelu(approximate='tanh')), evaluated as x sigmoid(2 u)")

