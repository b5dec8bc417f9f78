"""Op-specific interval rules (``OpRecord.interval``), tighter than the generic fold.

The generic interval fold runs an op's forward rule in interval arithmetic, which treats
every occurrence of an operand as an independent value: ``x - mean(x)`` forgets that
``x_i`` is part of the mean, ``x * Phi(x)`` forgets that both factors move together.  The
rules here use what is known about each op's exact range instead.  Each rule

* encloses the exact result at every point of the input box (proved by
  ``tests/graph/test_graph_interval_rules.py`` against exact sampling and vertices), and
* is intersected with the generic rule's box, so it is never looser than the fold (both
  boxes enclose the true range, so their intersection does).

Two guarantees (README, "Two guarantees"): a box is ``real``-sound when it holds the exact
real result over the input box, and ``execution``-sound when it also holds every value the
lab's own point context of the interval context's format computes for inputs in the box
(its documented evaluation order).  The generic fold gives both for ops it runs in the
point context's own order (monotone rounding: RD(a) <= RN(a) <= RU(a) step by step); the
rules above are reformulations, so they are only ``real``-sound by themselves.
:func:`execution_sound` widens such a rule by the a-priori rounding-error bound of the
op's POINT evaluation in that format (:class:`PointRounding`: unit roundoff, function
accuracy, underflow spacing; the bound is computed in the interval context's own directed
arithmetic, so it is itself a theorem) and only then intersects with the generic box.
Dot products (linear, matmul, conv) and, for float64's native sums, reductions are run in
the interval context by a different algorithm than in the point context (midpoint-radius
products, sequential sums), so their rules add the gamma_n bound of the point sum.

Dot products of coarse formats (binary16, bfloat16, fp8) with sequential point sums take
the interval context's endpoint products instead, which mirror the point ones.

The rules are attached to the op records by :func:`attach` (called once, from
``graph.optable`` after every op family registered), so the op families stay unchanged.
Attaching a rule to a new op is one line in :data:`RULES`, wrapped by
:func:`execution_sound` with the bound of the op's point evaluation (a real-only rule
would break the execution guarantee every IBP box claims).

max/min pooling and ``max``/``min`` need no rule: the interval context's ``amax``,
``maximum`` and ``minimum`` are endpointwise and exact.  Division of independent operands
is already the exact range in the interval context (``div`` with a divisor away from 0).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from fractions import Fraction

import mpmath
import numpy as np

from scalarlab.scalars.errors import ContextError
from scalarlab.scalars.values import Interval

from .axes import norm_axis
from .oprecord import OPS

__all__ = ["Unimodal", "GELU_MINIMUM", "SILU_MINIMUM", "GELU_TANH_MINIMUM",
           "unimodal_rule", "log_softmax_rule", "layernorm_rule", "RULES", "attach",
           "PointRounding", "point_rounding", "execution_sound", "guarantees", "REAL",
           "EXECUTION", "real_rule"]


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
def _layernorm_parts(ctx, args, attrs, nb):
    """(tight box, variance box, normalised-value box, n, axes) of the layernorm rule
    (the two inner boxes feed its execution bound)."""
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
    return tight, var, xhat, n, axes


def layernorm_rule(forward):
    """layernorm with x_i - mean(x) written as ``((n - 1) x_i - sum_{j != i} x_j) / n``
    (x_i once), the variance from those differences, and the normalised value clamped to
    [-sqrt(n - 1), sqrt(n - 1)]: with d = x - mean, sum d = 0 and sum d^2 = n var, so
    d_i^2 (1 + 1/(n-1)) <= n var, i.e. |d_i| / sqrt(var + eps) <= sqrt(n - 1).  Then
    gamma and beta as in the forward rule; intersected with the generic box."""
    def rule(ctx, args, attrs, nb):
        tight = _layernorm_parts(ctx, args, attrs, nb)[0]
        return _intersect(ctx, tight, forward(ctx, args, attrs, nb))
    return rule


# ------------------------------------------------------------- the two guarantees
REAL = "real"
EXECUTION = "execution"


@dataclass(frozen=True)
class PointRounding:
    """How the lab's point context of an interval context's base rounds, as far as the
    execution bounds need it.

    ``u``: unit roundoff of + - * / sqrt (RN(a) = a (1 + d) + e with |d| <= u, |e| <= eta);
    ``eta``: the subnormal spacing (largest absolute error of one rounding into the
    subnormal range, an upper bound of half of it), 0 where the exponent is unbounded;
    ``kind``: "binary" (IEEE-exact emulated format: functions correctly rounded),
    "float64" (hardware: libm functions within their declared ``f64_ulps``), "mpmath"
    (P-bit significand, unbounded exponent; functions trusted to 2 ulps) or "exact";
    ``sequential``: the point context's sums run left to right, as the interval
    context's do, so a plain sum is mirrored (monotone rounding keeps the point sum
    inside); ``mirrored_dot``: its dot products are too (mpmath's sequential products
    and sums, like the interval context's endpoint algorithm)."""

    point: str
    kind: str
    u: Fraction
    eta: Fraction
    sequential: bool
    mirrored_dot: bool
    correctly_rounded: frozenset = frozenset()

    def gamma(self, n: int):
        """gamma_n = n u / (1 - n u) (Higham): the relative error bound of n roundings in
        a product or of a sum of n + 1 terms in any order; None where n u >= 1/2."""
        q = n * self.u
        if q >= Fraction(1, 2):
            return None
        return q / (1 - q)

    def func(self, *names):
        """(relative, absolute) error of the point context's evaluation of the scalar
        functions ``names`` (the largest of them), or None when the lab makes no claim."""
        if self.kind == "exact":
            return Fraction(0), Fraction(0)
        if self.kind == "binary":
            if all(n in self.correctly_rounded for n in names):
                return self.u, self.eta
            return None
        if self.kind == "mpmath":
            return 4 * self.u, Fraction(0)
        from scalarlab.scalars.functions import F64_ABS_ERR, FUNCTIONS
        ulps = max(FUNCTIONS[n].f64_ulps for n in names)
        # k ulps of a normal result are at most k 2^-52 of its magnitude
        return max(ulps, 1) * Fraction(1, 2 ** 52), Fraction(F64_ABS_ERR) + self.eta


_POINT_ROUNDING: dict = {}


def point_rounding(ctx) -> PointRounding:
    """The :class:`PointRounding` of interval context ``ctx``'s base (cached by name)."""
    pr = _POINT_ROUNDING.get(ctx.name)
    if pr is not None:
        return pr
    kind_of_ends = ctx.endpoint_kind
    if kind_of_ends == "rational" or ctx.exact:
        pr = PointRounding(ctx.base_name, "exact", Fraction(0), Fraction(0), True, True)
    elif kind_of_ends == "mpmath":
        prec = int(ctx.base.prec)
        pr = PointRounding(ctx.base_name, "mpmath", Fraction(1, 2 ** prec), Fraction(0),
                           True, True)
    else:
        base = ctx.base
        seq = base.reduction == "sequential"
        if ctx.fmt is None:                         # hardware float64
            pr = PointRounding(base.name, "float64", Fraction(1, 2 ** 53),
                               Fraction(2) ** -1074, seq, False)
        else:
            fmt = ctx.fmt
            eta = Fraction(fmt.min_subnormal if fmt.subnormals else fmt.min_normal)
            pr = PointRounding(base.name, "binary", Fraction(1, 2 ** (fmt.man_bits + 1)),
                               eta, seq, False,
                               frozenset(base.correctly_rounded))
    _POINT_ROUNDING[ctx.name] = pr
    return pr


def guarantees(ctx) -> tuple:
    """The guarantees every box of interval context ``ctx`` carries: both (the rules
    here add the point evaluation's bound where they reformulate an op)."""
    return (REAL, EXECUTION)


_CONSTANTS: dict = {}


def _k(ctx, q) -> Interval:
    """An enclosure of the exact constant ``q`` (a Fraction) in ``ctx`` (cached: the
    bounds use a few constants per context, and interval values are never mutated)."""
    key = (ctx.name, Fraction(q))
    v = _CONSTANTS.get(key)
    if v is None:
        if len(_CONSTANTS) > 4096:
            _CONSTANTS.clear()
        v = _CONSTANTS[key] = ctx.convert(key[1])
    return v


def _up(v: Interval) -> Interval:
    """The upper end of ``v`` as a point interval (a bound used where only upper bounds
    enter an increasing formula)."""
    return Interval(v.hi, v.hi)


def _widen(ctx, box: Interval, rel: Interval, extra: Interval) -> Interval:
    """[lo - (rel |lo| + extra), hi + (rel |hi| + extra)], every step rounded outward.

    A point value p = f(1 + t) + e with |t| <= rel, |e| <= extra and f in [lo, hi] lies
    inside: f -> f + rel |f| is increasing (rel < 1), so p <= hi + rel |hi| + extra."""
    wl = ctx.add(ctx.mul(rel, ctx.abs(_point(box.lo))), extra).hi
    wh = ctx.add(ctx.mul(rel, ctx.abs(_point(box.hi))), extra).hi
    return Interval(ctx.sub(_point(box.lo), _point(wl)).lo,
                    ctx.add(_point(box.hi), _point(wh)).hi)


def _row_spread(ctx, x: Interval, axis, keepdims=True) -> Interval:
    """An upper bound of max_j x_j - min_j x_j over the box along ``axis`` (>= 0)."""
    top = ctx.amax(_point(x.hi), axis=axis, keepdims=keepdims).hi
    neg_bottom = ctx.amax(_point(ctx.neg(x).hi), axis=axis, keepdims=keepdims).hi
    return _up(ctx.add(_point(top), _point(neg_bottom)))


def _clamp(ctx, box: Interval, lo=None, hi=None) -> Interval:
    out_lo, out_hi = box.lo, box.hi
    if lo is not None:
        out_lo = ctx.maximum(_point(out_lo), _k(ctx, lo)).lo
    if hi is not None:
        out_hi = ctx.minimum(_point(out_hi), _k(ctx, hi)).hi
    return Interval(out_lo, out_hi)


def execution_sound(real, forward, bound):
    """Wrap a ``real``-sound rule so that its box is ``execution``-sound too.

    ``bound(ctx, pr, args, attrs, nb, box) -> box'`` widens the real box by the a-priori
    error of the op's point evaluation (or returns None: no bound, the generic box is
    used).  The widened box is intersected with the generic fold's box, which is
    execution-sound where it mirrors the point evaluation op by op.  (For float64 and
    mpmath that takes their functions to be faithful, within one ulp: then the generic
    box's correctly rounded endpoints hold them; the bounds here use the larger declared
    errors, ``PointRounding.func``.)"""
    def rule(ctx, args, attrs, nb):
        pr = point_rounding(ctx)
        box = real(ctx, args, attrs, nb)
        if pr.kind == "exact":
            return box
        try:
            out = bound(ctx, pr, args, attrs, nb, box)
        except (ContextError, ZeroDivisionError, ArithmeticError):
            out = None                  # e.g. a denominator bound reaching 0: no bound
        generic = forward(ctx, args, attrs, nb)
        if out is None:
            return generic
        return _intersect(ctx, out, generic)
    rule.real = real
    rule.bound = bound
    return rule


# softmax / log_softmax, point evaluation (ops_reduce): m = amax(x) (exact), z = x - m,
# e = exp(z), S = sum(e) (any order), y = e / S, or y = z - log(S).  u is the unit
# roundoff, (uf, ef) the error of exp; D_i >= m - x_i over the box (per coordinate: the
# row's largest upper end minus x_i's lower end), D the row's spread:
#   RN(x_j - m) = (x_j - m)(1 + d), so exp(z^_j) = e_j exp(t u D_j), |t| <= 1;
#   e^_j = exp(z^_j)(1 + f) + a, |f| <= uf, |a| <= ef;
#   the row's maximum gives z = 0 and e = 1 exactly, so S >= 1, and the other terms move S
#   by at most sum_j e_j |exp(t u D_j) - 1| <= (n - 1) u / 2 (sup_z e^-z (e^uz - 1) =
#   (1-u)^(1/u) u / (1-u) <= u / (e (1-u)), and e^-z (1 - e^-uz) <= u e^(u/2 - 1)) or
#   by the factor exp(+-u D): S^ / S in [s_lo, s_hi] with
#     s_hi = (1 + g)(min(exp(u D), 1 + (n-1) u / 2)(1 + uf) + n ef),
#     s_lo = (1 - g)(max(exp(-u D), 1 - (n-1) u / 2)(1 - uf) - n ef), g = gamma_{n-1};
#   y^_i = e^_i / S^ (1 + d') + a': with P_i = exp(u D_i)(1 + uf), Q_i = exp(-u D_i)(1 -
#   uf): y^ <= y P_i (1 + u) / s_lo + ef (1 + u) / s_lo + eta, y^ >= y Q_i (1 - u) / s_hi
#   - ef - eta, and 0 <= y^ <= 1.
def _softmax_factors(ctx, pr, x, a, n, names):
    f = pr.func(*names)
    g = pr.gamma(max(n - 1, 0))
    if f is None or g is None or pr.u > Fraction(1, 8):
        return None
    uf, ef = f
    one = ctx.ones(())
    U, UF = _k(ctx, pr.u), _k(ctx, uf)
    top = ctx.amax(_point(x.hi), axis=a, keepdims=True).hi
    d_i = _up(ctx.sub(_point(top), _point(x.lo)))                # >= m - x_i (>= 0)
    uDi = ctx.mul(U, ctx.maximum(d_i, ctx.zeros(())))
    uD = ctx.mul(U, _row_spread(ctx, x, a))
    P = ctx.mul(ctx.exp(uDi), ctx.add(one, UF))
    Q = ctx.mul(ctx.exp(ctx.neg(uDi)), ctx.sub(one, UF))
    half = _k(ctx, Fraction(max(n - 1, 0), 2) * pr.u)
    grow = ctx.minimum(_up(ctx.exp(uD)), _up(ctx.add(one, half)))
    shrink = ctx.maximum(Interval(ctx.exp(ctx.neg(uD)).lo, ctx.exp(ctx.neg(uD)).lo),
                         Interval(ctx.sub(one, half).lo, ctx.sub(one, half).lo))
    G, nEF = _k(ctx, g), _k(ctx, n * ef)
    s_lo = ctx.mul(ctx.sub(one, G), ctx.sub(ctx.mul(shrink, ctx.sub(one, UF)), nEF))
    s_hi = ctx.mul(ctx.add(one, G), ctx.add(ctx.mul(grow, ctx.add(one, UF)), nEF))
    if not np.all(np.asarray(s_lo.lo > 0)):
        return None
    return dict(one=one, U=U, UF=UF, uD=uDi, P=P, Q=Q, s_lo=s_lo, s_hi=s_hi,
                EF=_k(ctx, ef), ETA=_k(ctx, pr.eta))


def _softmax_bound(ctx, pr, args, attrs, nb, box):
    x = args[0]
    a = _axis("softmax", ctx, x, attrs, nb)
    n = int(ctx.shape(x)[a])
    k = _softmax_factors(ctx, pr, x, a, n, ("exp",))
    if k is None:
        return None
    one, U = k["one"], k["U"]
    r_up = ctx.div(ctx.mul(k["P"], ctx.add(one, U)), k["s_lo"])
    a_up = ctx.add(ctx.div(ctx.mul(k["EF"], ctx.add(one, U)), k["s_lo"]), k["ETA"])
    r_lo = ctx.div(ctx.mul(k["Q"], ctx.sub(one, U)), k["s_hi"])
    a_lo = ctx.add(k["EF"], k["ETA"])
    hi = ctx.add(ctx.mul(_point(box.hi), r_up), a_up).hi
    lo = ctx.sub(ctx.mul(_point(box.lo), r_lo), a_lo).lo
    return _clamp(ctx, Interval(lo, hi), 0, 1)


# log_softmax: y^ = RN(z^_i - L^), |z^_i - z_i| <= u D, L^ = log(S^)(1 + f) + a with
# |log S^ - log S| <= Lr = max(log upper(S^/S), -log lower(S^/S)) and 0 <= log S^ <=
# log n + Lr (1 <= S <= n); so |y^ - y| <= u |y| + (1 + u)(u D + Lr + uf (log n + Lr) + ef
# + eta), and y^ <= 0 (z^ <= 0 <= L^).
def _log_softmax_bound(ctx, pr, args, attrs, nb, box):
    x = args[0]
    a = _axis("log_softmax", ctx, x, attrs, nb)
    n = int(ctx.shape(x)[a])
    k = _softmax_factors(ctx, pr, x, a, n, ("exp", "log"))
    if k is None:
        return None
    one, U = k["one"], k["U"]
    lr = _up(ctx.maximum(_up(ctx.log(k["s_hi"])), _up(ctx.neg(ctx.log(k["s_lo"])))))
    logn = ctx.log(_k(ctx, n))
    err = ctx.add(ctx.add(ctx.add(k["uD"], lr), ctx.mul(k["UF"], ctx.add(logn, lr))),
                  ctx.add(k["EF"], k["ETA"]))
    out = _widen(ctx, box, U, ctx.mul(err, ctx.add(one, U)))
    return _clamp(ctx, out, hi=0)


# layernorm, point evaluation (ops_reduce._ln_stats): mu = sum(x) / n, d = x - mu,
# var = sum(d^2) / n, inv = 1 / sqrt(var + eps), xhat = d inv, y = xhat gamma + beta.
#   mu^ = mu - delta, |delta| <= e_mu = gamma_{n+1} mean|x| + eta (one shift for all j);
#   d^_j = (d_j + delta)(1 + e_j), and sum_j (d_j + delta)^2 = n (var + delta^2) because
#   sum_j d_j = 0, so var^ = (var + delta^2) (1 + t), |t| <= rho_v = (1+u)^2 (1 +
#   gamma_{n+1}) - 1, plus (n + 1) eta of underflow;
#   w = var + eps >= w_min: |w^ / w - 1| <= r_w = (rho_v + (e_mu^2 (1 + rho_v)
#   + (n + 1) eta) / w_min)(1 + u) + u;
#   inv^ / inv in [(1 + r_w)^-1/2 (1-u)/(1+u), (1 - r_w)^-1/2 (1+u)/(1-u)] = 1 +- r_inv;
#   xhat^ = (d + delta) inv (1 + e)(1 +- r_inv)(1 + e'): with f1 = (1+u)^2 (1 + r_inv),
#   |xhat^ - xhat| <= E_x = X (f1 - 1) + e_mu inv_max f1 + eta, X >= |xhat|,
#   inv_max = w_min^-1/2;
#   |y^ - y| <= u |y| + (1 + u) |gamma| (E_x (1 + u) + u X) + 2 eta.
# Independently of the box, |xhat^_i| <= sqrt(n) K: d^_i^2 <= sum_j d^_j^2 <= n var^ /
# (1 - gamma_{n+1}) (+ underflow), and the roundings of + eps, sqrt and 1/. cost at most
# K = (1+u)^2 / ((1-u)^(3/2) (1-gamma_{n+1})^(1/2)); so y^ lies in beta + [-1, 1]
# |gamma| (sqrt(n) K + sqrt((n+1) eta / eps)(1+u)^2)(1+u), rounded once more.
def _layernorm_bound(ctx, pr, args, attrs, nb, box, parts):
    x, gamma, beta, eps = args
    _, var, xhat, n, axes = parts
    g1 = pr.gamma(n + 1)
    if g1 is None:
        return None
    one = ctx.ones(())
    U, G1, ETA = _k(ctx, pr.u), _k(ctx, g1), _k(ctx, pr.eta)
    u1 = ctx.add(one, U)
    eps_iv = eps if isinstance(eps, Interval) else ctx.convert(eps)
    gm = _up(ctx.abs(gamma))
    if not np.all(np.asarray(eps_iv.lo > 0)):
        return None
    # the box-free clamp
    K = ctx.div(ctx.square(u1), ctx.mul(ctx.mul(ctx.sub(one, U), ctx.sqrt(ctx.sub(one, U))),
                                        ctx.sqrt(ctx.sub(one, G1))))
    under = ctx.div(ctx.sqrt(_k(ctx, (n + 1) * pr.eta)), ctx.sqrt(_point(eps_iv.lo)))
    xp = ctx.add(ctx.mul(ctx.sqrt(_k(ctx, n)), K), ctx.mul(under, ctx.square(u1)))
    p = _up(ctx.mul(ctx.mul(gm, xp), u1))
    clamp = ctx.add(beta, Interval(ctx.neg(p).lo, p.hi))
    # the bound around the real box
    # the mean's error: gamma_{n-1} sum |x_j| for the sum, one rounding for / n
    m_row = _up(ctx.div(ctx.sum(_up(ctx.abs(x)), axis=axes, keepdims=True), _k(ctx, n)))
    e_mu = _up(ctx.add(ctx.mul(G1, m_row), ETA))
    rho_v = ctx.sub(ctx.mul(ctx.square(u1), ctx.add(one, G1)), one)
    v_lo = ctx.maximum(_point(var.lo), ctx.zeros(()))
    w_lo = ctx.add(v_lo, _point(eps_iv.lo)).lo
    w_min = Interval(w_lo, w_lo)
    small = ctx.add(ctx.mul(ctx.square(e_mu), ctx.add(one, rho_v)),
                    _k(ctx, (n + 1) * pr.eta))
    r_w = _up(ctx.add(ctx.mul(ctx.add(rho_v, ctx.div(small, w_min)), u1), U))
    if not np.all(np.asarray(r_w.hi < 1)):
        return clamp
    k_up = ctx.sub(ctx.div(u1, ctx.mul(ctx.sub(one, U), ctx.sqrt(ctx.sub(one, r_w)))), one)
    k_dn = ctx.sub(one, ctx.div(ctx.sub(one, U), ctx.mul(u1, ctx.sqrt(ctx.add(one, r_w)))))
    r_inv = _up(ctx.maximum(_up(k_up), _up(k_dn)))
    inv_max = _up(ctx.div(one, ctx.sqrt(w_min)))
    X = _up(ctx.abs(xhat))
    f1 = ctx.mul(ctx.square(u1), ctx.add(one, r_inv))
    e_x = ctx.add(ctx.add(ctx.mul(X, ctx.sub(f1, one)), ctx.mul(ctx.mul(e_mu, inv_max), f1)),
                  ETA)
    extra = ctx.add(ctx.mul(ctx.mul(gm, ctx.add(ctx.mul(e_x, u1), ctx.mul(U, X))), u1),
                    _k(ctx, 2 * pr.eta))
    return _intersect(ctx, _widen(ctx, box, U, extra), clamp)


def layernorm_execution_rule(forward):
    """:func:`layernorm_rule` widened by the point evaluation's bound (above)."""
    def real(ctx, args, attrs, nb):
        return layernorm_rule(forward)(ctx, args, attrs, nb)

    def rule(ctx, args, attrs, nb):
        pr = point_rounding(ctx)
        parts = _layernorm_parts(ctx, args, attrs, nb)
        generic = forward(ctx, args, attrs, nb)
        box = _intersect(ctx, parts[0], generic)
        if pr.kind == "exact":
            return box
        try:
            out = _layernorm_bound(ctx, pr, args, attrs, nb, box, parts)
        except (ContextError, ZeroDivisionError, ArithmeticError):
            out = None
        return generic if out is None else _intersect(ctx, out, generic)

    def bound(ctx, pr, args, attrs, nb, box):
        parts = _layernorm_parts(ctx, args, attrs, nb)
        return _layernorm_bound(ctx, pr, args, attrs, nb, box, parts)
    rule.real = real
    rule.bound = bound
    return rule


# Unimodal activations: the point value is f(x)(1 + t) + e, |t| <= rel, |e| <= extra,
# with M >= |x| over the box:
#   silu  x sigmoid(x):          rel (1 + uf)(1 + u) - 1,     extra M ef (1 + u) + eta
#   mish  x tanh(softplus(x)):   rel (1 + uf)^2 (1 + u) - 1,  extra 2 M ef (1 + u) + eta
#         (tanh(s (1 + t)) / tanh(s) lies in [1 - |t|, 1 + |t|] for s > 0: tanh concave)
#   gelu_tanh x sigmoid(2 c (x + k x^3)): the argument t carries gamma_7 |t| (+ 8 eta), and
#         |log sigmoid(t') - log sigmoid(t)| <= |t' - t|, so
#         rel exp(gamma_7 T + 8 eta)(1 + uf)(1 + u) - 1, T >= 1.6 (M + 0.045 M^3)
#   hardswish x min(max(x + 3, 0), 6) / 6: rel gamma_3, extra 2 eta (clamping a relative
#         error keeps it relative)
#   gelu (x 0.5)(1 + erf(x c)): |erf(x^c^) - erf(xc)| <= (2/sqrt pi) gamma_2 (c M), so
#         the factor (1 + erf) has absolute error E1 = 0.8 gamma_2 M + uf + ef and
#         |y^ - y| <= u (2 + u) |y| + (M / 2)(1 + u)^2 E1 + 2 eta.
def _activation_bound(name):
    def bound(ctx, pr, args, attrs, nb, box):
        x = args[0]
        one = ctx.ones(())
        U, ETA = _k(ctx, pr.u), _k(ctx, pr.eta)
        M = _up(ctx.abs(x))
        funcs = {"silu": ("sigmoid",), "mish": ("softplus", "tanh"),
                 "gelu_tanh": ("sigmoid",), "gelu": ("erf",), "hardswish": ()}[name]
        f = pr.func(*funcs) if funcs else (Fraction(0), Fraction(0))
        if f is None:
            return None
        UF, EF = _k(ctx, f[0]), _k(ctx, f[1])
        u1 = ctx.add(one, U)
        if name == "silu":
            rel = ctx.sub(ctx.mul(ctx.add(one, UF), u1), one)
            extra = ctx.add(ctx.mul(ctx.mul(M, EF), u1), ETA)
        elif name == "mish":
            rel = ctx.sub(ctx.mul(ctx.square(ctx.add(one, UF)), u1), one)
            extra = ctx.add(ctx.mul(ctx.mul(ctx.mul(_k(ctx, 2), M), EF), u1), ETA)
        elif name == "gelu_tanh":
            g7 = pr.gamma(7)
            if g7 is None:
                return None
            G7 = _k(ctx, g7)
            cube = ctx.mul(ctx.mul(M, M), M)
            T = _up(ctx.mul(_k(ctx, Fraction(8, 5)),
                            ctx.add(M, ctx.mul(_k(ctx, Fraction(45, 1000)), cube))))
            d = _up(ctx.add(ctx.mul(G7, T), _k(ctx, 8 * pr.eta)))   # >= |t^ - t|
            # (a) relative: sigmoid(t^) / sigmoid(t) in [exp(-d), exp(d)]
            rel = ctx.sub(ctx.mul(ctx.mul(ctx.exp(d), ctx.add(one, UF)), u1), one)
            extra = ctx.add(ctx.mul(ctx.mul(M, EF), u1), ETA)
            # (b) absolute, for saturated sigmoids: |sigmoid(t^) - sigmoid(t)| <= d
            # max sigmoid' between them <= d min(1/4, exp(-t_min)), with |xi| >= t_min =
            # 1.59 (m + 0.0447 m^3)(1 - gamma_7) - 8 eta, m = min |x| over the box
            m = Interval(ctx.abs(x).lo, ctx.abs(x).lo)
            m3 = ctx.mul(ctx.mul(m, m), m)
            t_min = ctx.sub(ctx.mul(ctx.mul(_k(ctx, Fraction(159, 100)),
                                            ctx.add(m, ctx.mul(_k(ctx, Fraction(447, 10000)),
                                                               m3))),
                                    ctx.sub(one, G7)), _k(ctx, 8 * pr.eta))
            t_min = ctx.maximum(Interval(t_min.lo, t_min.lo), ctx.zeros(()))
            slope = ctx.minimum(ctx.exp(ctx.neg(t_min)), _k(ctx, Fraction(1, 4)))
            extra_b = ctx.add(ctx.mul(ctx.mul(M, ctx.add(ctx.mul(ctx.mul(_up(slope), d),
                                                                 ctx.add(one, UF)), EF)), u1),
                              ETA)
            rel_b = ctx.sub(ctx.mul(ctx.add(one, UF), u1), one)
            return _intersect(ctx, _widen(ctx, box, _up(rel), _up(extra)),
                              _widen(ctx, box, _up(rel_b), _up(extra_b)))
        elif name == "hardswish":
            rel = _k(ctx, pr.gamma(3))
            extra = _k(ctx, 2 * pr.eta)
        else:                                                        # gelu
            g2 = pr.gamma(2)
            e1 = ctx.add(ctx.add(ctx.mul(_k(ctx, Fraction(4, 5) * g2), M), UF), EF)
            rel = ctx.mul(U, ctx.add(_k(ctx, 2), U))
            extra = ctx.add(ctx.mul(ctx.mul(ctx.mul(_k(ctx, Fraction(1, 2)), M),
                                            ctx.square(u1)), e1), ctx.mul(_k(ctx, 2), ETA))
        return _widen(ctx, box, _up(rel), _up(extra))
    return bound


# Dot products: the interval context's product (midpoint-radius: a real enclosure) is not
# the point context's sum of rounded products, so the box is widened by the point sum's
# error in any order, gamma_n sum_k |x_k| |w_k| (+ |b|) + n eta (Higham's bound; fma or
# not, sequential, pairwise, blocked or BLAS alike), where n counts the roundings
# (products, additions and the bias addition).  sum_k |x_k||w_k| + |b| is the op's own
# forward rule on the magnitudes, run in the interval context (an upper end).
def _dot_count(name):
    def count(ctx, args, nb):
        if name == "linear":
            return int(ctx.shape(args[1])[-1]) + 1
        if name == "matmul":
            return int(ctx.shape(args[0])[-1])
        w = ctx.shape(args[1])                       # conv weight [O, C/G, k...]
        n = 1
        for d in w[1:]:
            n *= int(d)
        return n + 1
    return count


def _magnitude(ctx, a) -> Interval:
    """max(|lo|, |hi|) as a point interval (exact: abs of a float is exact)."""
    if not isinstance(a, Interval):
        a = ctx.convert(a)
    lo, hi = np.asarray(a.lo), np.asarray(a.hi)
    if lo.dtype == object or hi.dtype == object:
        return _up(ctx.abs(a))
    m = np.abs(lo) if a.lo is a.hi else np.maximum(np.abs(lo), np.abs(hi))
    return Interval(m, m)


def _magnitudes(ctx, args):
    return [_magnitude(ctx, a) for a in args]


class _EndpointProducts:
    """An interval context whose matmul is its endpoint algorithm (directed products
    added left to right): run through an op's forward rule it mirrors a sequential point
    context's dot products op by op (RN(s + RN(x w)) >= RD(RD(s_lo) + RD(p_lo)), fma or
    not), so the box holds the point values without an a-priori bound."""

    def __init__(self, ctx):
        self._ctx = ctx

    def __getattr__(self, name):
        return getattr(self._ctx, name)

    def matmul(self, a, b):
        return self._ctx.matmul_endpoint(a, b)

    def matmul_add(self, a, b, c):
        return self._ctx.add(self.matmul(a, b), c)

    def affine(self, x, W, b, x_prep=None):
        return self.matmul_add(x, self._ctx.transpose(W), b)


#: a coarse format (unit roundoff >= 2^-12: binary16, bfloat16, fp8) with sequential point
#: sums takes the mirrored endpoint products (tight: the actual roundings) instead of the
#: a-priori gamma_n bound (worst case: n u of the magnitudes, several of its ulps)
COARSE_U = Fraction(1, 2 ** 12)


def dot_rule(forward, count, fast_dense=False):
    """Interval rule of a dot-product op: the forward rule's box plus the point sum's
    gamma_n bound (none where the interval context mirrors the point one, mpmath; the
    mirrored endpoint products for coarse formats with sequential sums)."""
    def rule(ctx, args, attrs, nb):
        pr = point_rounding(ctx)
        if pr.kind == "exact" or pr.mirrored_dot:
            return forward(ctx, args, attrs, nb)
        if pr.kind == "binary" and pr.sequential and pr.u >= COARSE_U:
            return forward(_EndpointProducts(ctx), args, attrs, nb)
        y = forward(ctx, args, attrs, nb)
        n = count(ctx, args, nb)
        g = pr.gamma(n)
        if g is None:       # n u >= 1/2: no a-priori bound, the whole line
            return _whole_line(ctx, y)
        fast = _dense_extra(ctx, pr, args, g, n) if fast_dense else None
        if fast is not None:
            return _widen_by(ctx, y, fast)
        mag = forward(ctx, _magnitudes(ctx, args), attrs, nb)
        extra = ctx.add(ctx.mul(_k(ctx, g), _up(mag)), _k(ctx, n * pr.eta))
        return _widen(ctx, y, ctx.zeros(()), _up(extra))
    return rule


#: float64 roundings in _dense_extra's few steps after the product: (1 + 2^-53)^8 < 1 + 2^-49
_F64_STEPS = 1.0 + 2.0 ** -49


def _dense_extra(ctx, pr, args, g, n):
    """For ``linear`` over float endpoints with point W and b: gamma_n (M |W|^T + |b|) +
    n eta (M = max(|lo|, |hi|)) as a float64 upper bound, from ONE float64 product (the
    interval machinery's magnitude product costs several passes).  fl(M |W|^T) of
    non-negative terms in any order is within gamma_k of the exact sum (k = in features,
    float64's gamma, plus k 2^-1074 of underflow), so dividing by (1 - gamma_k) bounds it
    from above; the few steps after it round to nearest, each at most 2^-53 relative,
    covered by _F64_STEPS, and 2^-1070 covers their underflows.  None where the operands
    are not plain float64 arrays (the general path then runs)."""
    x, W, b = args[:3]
    if not (isinstance(x, Interval) and isinstance(W, Interval) and isinstance(b, Interval)):
        return None
    if W.lo is not W.hi and not np.array_equal(W.lo, W.hi):
        return None
    arrs = (x.lo, x.hi, W.lo, b.lo, b.hi)
    if not all(isinstance(a, np.ndarray) and a.dtype == np.float64 for a in arrs):
        return None
    k = int(W.lo.shape[-1])
    gk = k * 2.0 ** -53 / (1 - k * 2.0 ** -53 * _F64_STEPS)
    if not gk < 0.5:
        return None
    with np.errstate(all="ignore"):
        m = np.abs(x.lo) if x.lo is x.hi else np.maximum(np.abs(x.lo), np.abs(x.hi))
        # imported here: the op table (which imports this module) loads no Numba
        from scalarlab.scalars.kernels.f64_matmul import product as f64_product
        p = f64_product(m, np.abs(W.lo).T)      # any order: the bound holds for all
        s = (p + k * 2.0 ** -1074) / (1 - gk) + np.maximum(np.abs(b.lo), np.abs(b.hi))
        e = (s * float(g) + float(n * pr.eta)) * (_F64_STEPS * (1 + 2.0 ** -52)) \
            + 2.0 ** -1070
    # float(g), float(n eta): round-to-nearest conversions of exact rationals, within
    # 2^-53 relative (one of the steps above)
    return e


def _widen_by(ctx, y, e):
    """[lo - e, hi + e] rounded outward (e a float64 array of upper bounds)."""
    e = np.where(np.isnan(e), np.inf, e)         # inf * 0 in the magnitudes: no bound
    if ctx.float64_endpoints:                                               # float64 ends
        with np.errstate(all="ignore"):
            # RN(lo - e) is within half an ulp of lo - e: one step down is below it
            lo = np.nextafter(np.asarray(y.lo) - e, -np.inf)
            hi = np.nextafter(np.asarray(y.hi) + e, np.inf)
        lo = np.where(np.isnan(lo), -np.inf, lo)
        hi = np.where(np.isnan(hi), np.inf, hi)
        return Interval(lo, hi)
    eb = ctx.make(e, e)
    return Interval(ctx.sub(_point(y.lo), _point(eb.hi)).lo,
                    ctx.add(_point(y.hi), _point(eb.hi)).hi)


def _whole_line(ctx, y):
    lo = np.full(np.shape(y.lo), -np.inf)
    return ctx.make(lo, -lo)


# Sums in a point context whose order is not sequential (float64's numpy sums are
# pairwise): the same gamma_n bound on the magnitudes, n = summed entries per output.
def _window_count(attrs) -> int:
    """Entries one average-pooling window sums (its kernel volume)."""
    k = attrs["kernel_size"]
    n = 1
    for v in (k if isinstance(k, (list, tuple)) else [k]):
        n *= int(v)
    return n


def reduction_rule(forward, count=None):
    """Interval rule of a summing op: the forward box, plus (for a point context whose
    sums are not sequential) gamma_n of the magnitudes; ``count(attrs)`` = entries per
    output (default: input size over output size), plus one for a division."""
    def rule(ctx, args, attrs, nb):
        y = forward(ctx, args, attrs, nb)
        pr = point_rounding(ctx)
        if pr.kind == "exact" or pr.sequential:
            return y
        if count is not None:
            n = count(attrs) + 1
        else:
            size_in = int(np.prod(ctx.shape(args[0])[nb:], dtype=np.int64))
            size_out = int(np.prod(ctx.shape(y)[nb:], dtype=np.int64))
            n = max(size_in // max(size_out, 1), 1) + 1
        g = pr.gamma(n)
        if g is None:
            return _whole_line(ctx, y)
        mag = forward(ctx, _magnitudes(ctx, args[:1]) + list(args[1:]), attrs, nb)
        extra = ctx.add(ctx.mul(_k(ctx, g), _up(ctx.abs(mag))), _k(ctx, n * pr.eta))
        return _widen(ctx, y, ctx.zeros(()), _up(extra))
    return rule


# Scalar functions (exp, tanh, pow, ...): the generic box has the exact function's
# directed ends, which hold a correctly rounded point result (the binary formats).  The
# float64 context evaluates them with libm, within the function's declared ``f64_ulps``
# (k ulps of a normal result are at most k 2^-52 of its magnitude, a subnormal one adds
# at most the subnormal spacing), and mpmath within 4 of its ulps: the box is widened
# by that for the execution guarantee.  An exact evaluator (``f64_ulps`` 0: floor, fmin,
# ...) needs nothing.
def _function_ulps(name) -> int:
    from scalarlab.scalars.functions import FUNCTIONS
    from scalarlab.scalars.functions_binary import BINARY_FUNCTIONS
    fn = FUNCTIONS.get(name) or BINARY_FUNCTIONS[name]
    return int(fn.f64_ulps)


def function_rule(forward, name):
    """Interval rule of a scalar-function op: the forward box, widened by the point
    context's declared evaluation error where that context does not round it
    correctly (float64's libm, mpmath)."""
    ulps = _function_ulps(name)

    def rule(ctx, args, attrs, nb):
        box = forward(ctx, args, attrs, nb)
        pr = point_rounding(ctx)
        if not ulps or pr.kind not in ("float64", "mpmath"):
            return box
        if pr.kind == "float64":
            from scalarlab.scalars.functions import F64_ABS_ERR
            rel, extra = ulps * Fraction(1, 2 ** 52), Fraction(F64_ABS_ERR) + pr.eta
        else:
            rel, extra = 4 * pr.u, Fraction(0)
        return _widen(ctx, box, _k(ctx, rel), _k(ctx, extra))
    rule.real = forward
    return rule


def real_rule(rec):
    """The ``real``-sound rule of a record (its own rule before the execution bound), or
    None where the interval rule is not a reformulation (dot products, reductions)."""
    return getattr(rec.interval, "real", None)


# ------------------------------------------------------------------------------ attaching

#: op name -> factory(record) -> interval rule.  softmax and the activations of
#: ops_activation keep their real-sound rules in their records; attach wraps them.
RULES = {
    "log_softmax": lambda rec: execution_sound(log_softmax_rule(rec.forward), rec.forward,
                                               _log_softmax_bound),
    "layernorm": lambda rec: layernorm_execution_rule(rec.forward),
    "gelu": lambda rec: execution_sound(unimodal_rule(rec.forward, GELU_MINIMUM),
                                        rec.forward, _activation_bound("gelu")),
    "softmax": lambda rec: execution_sound(rec.interval, rec.forward, _softmax_bound),
    **{name: (lambda name: lambda rec: execution_sound(
        rec.interval, rec.forward, _activation_bound(name)))(name)
       for name in ("silu", "mish", "gelu_tanh", "hardswish")},
    "linear": lambda rec: dot_rule(rec.forward, _dot_count("linear"), fast_dense=True),
    **{name: (lambda name: lambda rec: dot_rule(rec.forward, _dot_count(name)))(name)
       for name in ("matmul", "conv1d", "conv2d", "conv3d")},
    **{name: lambda rec: reduction_rule(rec.forward)
       for name in ("sum", "reduce_sum", "reduce_mean", "global_avg_pool",
                    "reduce_sum_square")},
    **{name: lambda rec: reduction_rule(rec.forward, _window_count)
       for name in ("avg_pool1d", "avg_pool2d", "avg_pool3d")},
}


def attach() -> None:
    """Set ``interval`` on the records named in :data:`RULES` (idempotent: a record whose
    rule is already one of these is left alone)."""
    from scalarlab.scalars.functions import FUNCTIONS
    from scalarlab.scalars.functions_binary import BINARY_FUNCTIONS

    # every op that is a scalar function of the vocabulary gets function_rule (one entry
    # in scalars/functions*.py is still the whole recipe for a new function)
    functions = {name: (lambda name: lambda rec: function_rule(rec.forward, name))(name)
                 for name in OPS if (name in FUNCTIONS or name in BINARY_FUNCTIONS)
                 and name not in RULES and OPS[name].interval is None}
    for name, make in {**RULES, **functions}.items():
        rec = OPS[name]
        if not getattr(rec.interval, "_attached", False):
            rule = make(rec)
            rule._attached = True
            OPS[name] = dataclasses.replace(rec, interval=rule)
