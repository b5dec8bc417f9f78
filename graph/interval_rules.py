"""Op-specific interval rules (``OpRecord.interval``), tighter than the generic fold.

The generic interval fold runs an op's forward rule in interval arithmetic, which treats
every occurrence of an operand as an independent value: ``x - mean(x)`` forgets that
``x_i`` is part of the mean, ``x * Phi(x)`` forgets that both factors move together.  The
rules here use what is known about each op's exact range instead.  Each rule

* encloses the exact result at every point of the input box (proved by
  ``tests/graph/test_graph_interval_rules.py`` against exact sampling and vertices), and
* is intersected with the generic rule's box, so it is never looser than the fold (both
  boxes enclose the true range, so their intersection does).

The rules are attached to the op records by :func:`attach` (called once, from
``graph.optable`` after every op family registered), so the op families stay unchanged.
Attaching a rule to a new op is one line in :data:`RULES`, e.g. for a SiLU record
``"silu": lambda rec: unimodal_rule(rec.forward, SILU_MINIMUM)``.

max/min pooling and ``max``/``min`` need no rule: the interval context's ``amax``,
``maximum`` and ``minimum`` are endpointwise and exact.  Division of independent operands
is already the exact range in the interval context (``div`` with a divisor away from 0).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import mpmath
import numpy as np

from scalarlab.scalars.interval import Interval

from .axes import norm_axis
from .oprecord import OPS

__all__ = ["Unimodal", "GELU_MINIMUM", "SILU_MINIMUM", "GELU_TANH_MINIMUM",
           "unimodal_rule", "log_softmax_rule", "layernorm_rule", "RULES", "attach"]


def _intersect(ctx, a, b) -> Interval:
    """The intersection of two enclosures of the same values (exact: max/min of ends)."""
    return Interval(ctx.maximum(a, b).lo, ctx.minimum(a, b).hi)


def _point(v) -> Interval:
    return Interval(v, v)


# ------------------------------------------------------------------ unimodal activations
@dataclass(frozen=True)
class Unimodal:
    """f decreases on (-inf, x*] and increases on [x*, inf) with minimum f(x*).

    Decimal strings (from mpmath at 60 digits, see :func:`_minimum_of`): ``x_below`` <
    x* < ``x_above`` and ``f_below`` < f(x*); each context converts them with its own
    rounding, and the rule takes the outward end."""

    name: str
    x_below: str
    x_above: str
    f_below: str


def _minimum_of(name, f, df, guess) -> Unimodal:
    """x* (root of f') and a lower bound of f(x*) as decimal strings enclosing them by a
    margin of 1e-40 (far above mpmath's error at 60 digits, far below any float ulp)."""
    with mpmath.workdps(60):
        xs = mpmath.findroot(df, mpmath.mpf(guess))
        fm = f(xs)
        eps = mpmath.mpf("1e-40")
        return Unimodal(name, mpmath.nstr(xs - eps, 50), mpmath.nstr(xs + eps, 50),
                        mpmath.nstr(fm - eps, 50))


def _gelu_mp(x):
    return x * mpmath.ncdf(x)


def _silu_mp(x):
    return x / (1 + mpmath.exp(-x))


def _gelu_tanh_mp(x):
    c = mpmath.sqrt(2 / mpmath.pi)
    return x / 2 * (1 + mpmath.tanh(c * (x + mpmath.mpf("0.044715") * x ** 3)))


# The constants below are what _minimum_of gives (mpmath, 60 digits); they are spelled
# out so that importing the op table runs no root finder, and
# tests/graph/test_graph_interval_rules_ops.py recomputes and checks them.
#: exact GELU x Phi(x): minimum near x = -0.7518, value near -0.16997
GELU_MINIMUM = Unimodal("gelu", "-0.75179152469356445745790494677952403966457115342345",
                        "-0.75179152469356445745790494677952403966437115342345",
                        "-0.16997120747990366169386847098243392283295239241824")
#: SiLU x sigmoid(x): minimum near x = -1.2785, value near -0.27846
SILU_MINIMUM = Unimodal("silu", "-1.2784645427610737951093587390229801554395774886197",
                        "-1.2784645427610737951093587390229801554393774886197",
                        "-0.27846454276107379510935873902298015543957748861975")
#: tanh-approximated GELU: minimum near x = -0.7525, value near -0.17004
GELU_TANH_MINIMUM = Unimodal("gelu_tanh",
                             "-0.75246142207101625848795444328891609060549217803763",
                             "-0.75246142207101625848795444328891609060529217803763",
                             "-0.17004075057125405063906742798755568357719297500585")


def unimodal_rule(forward, m: Unimodal):
    """Interval rule of a unimodal activation ``forward`` (its record's forward rule).

    For [lo, hi]: entirely left of x*: [f(hi), f(lo)]; entirely right: [f(lo), f(hi)];
    otherwise [f(x*), max(f(lo), f(hi))] (the maximum of a function that decreases then
    increases lies at an end).  f(lo), f(hi) are the generic rule at the point intervals
    [lo, lo], [hi, hi] (enclosures of the exact values), f(x*) is bounded below by the
    constant ``m.f_below``.  Intersected with the generic box."""
    def rule(ctx, args, attrs, nb):
        x = args[0]
        generic = forward(ctx, args, attrs, nb)
        ends = forward(ctx, [Interval(np.stack([x.lo, x.hi]), np.stack([x.lo, x.hi]))],
                       attrs, nb + 1)
        f_lo = Interval(ends.lo[0], ends.hi[0])
        f_hi = Interval(ends.lo[1], ends.hi[1])
        xb = ctx.convert(m.x_below).lo               # <= x_below < x*
        xa = ctx.convert(m.x_above).hi               # >= x_above > x*
        fmin = ctx.convert(m.f_below).lo             # <= f(x*)
        left = np.asarray(np.less_equal(x.hi, xb), dtype=bool)     # decreasing part
        right = np.asarray(np.greater_equal(x.lo, xa), dtype=bool)  # increasing part
        top = ctx.maximum(f_lo, f_hi).hi
        lo = np.where(left, f_hi.lo, np.where(right, f_lo.lo, fmin))
        hi = np.where(left, f_lo.hi, np.where(right, f_hi.hi, top))
        tight = ctx.make(lo, hi) if lo.dtype != object else Interval(lo, hi)
        return _intersect(ctx, tight, generic)
    return rule


# --------------------------------------------------------------------------- log_softmax
def _axis(op, ctx, x, attrs, nb):
    return nb + norm_axis(op, attrs["axis"], len(ctx.shape(x)) - nb)


def log_softmax_rule(forward):
    """log_softmax coordinate i as ``-log(sum_j exp(x_j - x_i))`` with the j = i term
    exactly 1 (the form of softmax's rule): x_i appears in every term with the same
    effect, every x_j once, so interval arithmetic gives the exact range up to rounding.
    The sum is >= 1, so the result is <= 0; the upper end is clamped to 0 (exact: every
    log_softmax value is <= 0).  Intersected with the generic box."""
    def rule(ctx, args, attrs, nb):
        x = args[0]
        a = _axis("log_softmax", ctx, x, attrs, nb)
        s = tuple(ctx.shape(x))
        n = s[a]
        xi = ctx.reshape(x, s[:a + 1] + (1,) + s[a + 1:])
        xj = ctx.reshape(x, s[:a] + (1,) + s[a:])
        terms = ctx.exp(ctx.sub(xj, xi))
        diagonal = np.eye(n, dtype=bool).reshape((n, n) + (1,) * (len(s) - a - 1))
        terms = ctx.where(diagonal, ctx.ones(()), terms)
        tight = ctx.neg(ctx.log(ctx.sum(terms, axis=a + 1)))
        generic = forward(ctx, args, attrs, nb)
        both = _intersect(ctx, tight, generic)
        return Interval(both.lo, ctx.minimum(both, ctx.zeros(())).hi)
    return rule


# ----------------------------------------------------------------------------- layernorm
def layernorm_rule(forward):
    """layernorm with x_i - mean(x) written as ``((n - 1) x_i - sum_{j != i} x_j) / n``
    (x_i once), the variance from those differences, and the normalised value clamped to
    [-sqrt(n - 1), sqrt(n - 1)]: with d = x - mean, sum d = 0 and sum d^2 = n var, so
    d_i^2 (1 + 1/(n-1)) <= n var, i.e. |d_i| / sqrt(var + eps) <= sqrt(n - 1).  Then
    gamma and beta as in the forward rule; intersected with the generic box."""
    def rule(ctx, args, attrs, nb):
        x, gamma, beta, eps = args
        r = len(ctx.shape(x)) - nb
        a = norm_axis("layernorm", attrs["axis"], r)
        axes = tuple(range(nb + a, nb + r))
        shape = ctx.shape(x)
        n = 1
        for ax in axes:
            n *= int(shape[ax])
        total = ctx.sum(x, axis=axes, keepdims=True)
        # sum_{j != i} x_j: lower end RD(RD(sum lo) - lo_i), upper end RU(RU(sum hi) - hi_i)
        # (point-interval subtractions give exactly those directed differences)
        others_lo = ctx.sub(_point(ctx.broadcast_to(Interval(total.lo, total.lo), shape).lo),
                            _point(x.lo)).lo
        others_hi = ctx.sub(_point(ctx.broadcast_to(Interval(total.hi, total.hi), shape).hi),
                            _point(x.hi)).hi
        others = Interval(others_lo, others_hi)
        nn = ctx.convert(n)
        d = ctx.div(ctx.sub(ctx.mul(x, ctx.convert(n - 1)), others), nn)
        var = ctx.div(ctx.sum(ctx.square(d), axis=axes, keepdims=True), nn)
        inv = ctx.div(ctx.ones(()), ctx.sqrt(ctx.add(var, eps)))
        xhat = ctx.mul(d, inv)
        k = ctx.sqrt(ctx.convert(n - 1))
        xhat = _intersect(ctx, xhat, Interval(ctx.neg(k).lo, k.hi))
        tight = ctx.add(ctx.mul(xhat, gamma), beta)
        return _intersect(ctx, tight, forward(ctx, args, attrs, nb))
    return rule


# ------------------------------------------------------------------------------ attaching
#: op name -> factory(record) -> interval rule.  softmax keeps its rule in ops_reduce.
RULES = {
    "log_softmax": lambda rec: log_softmax_rule(rec.forward),
    "layernorm": lambda rec: layernorm_rule(rec.forward),
    "gelu": lambda rec: unimodal_rule(rec.forward, GELU_MINIMUM),
}


def attach() -> None:
    """Set ``interval`` on the records named in :data:`RULES` (idempotent)."""
    for name, make in RULES.items():
        rec = OPS[name]
        if rec.interval is None:
            OPS[name] = dataclasses.replace(rec, interval=make(rec))
