"""The interval rule of the piecewise functions of :mod:`scalars.functions` (``pieces``).

Such an f is continuous and monotone between the critical points it declares
(``critical``), on its interval domain (``interval_domain`` or ``domain``), and tan is
increasing between its poles (``poles_at``).  Over an argument interval [a, b] inside the
domain, f therefore ranges between the smallest and the largest of

* f(a) and f(b), each rounded down and up by the endpoint arithmetic
  (:mod:`scalars.kernels.function_endpoints`: exactly directed for binary bases, the declared ulps
  bound for float64, mpmath widened, exact for rational);
* the limit at an open domain end that the interval touches (log1p at -1: -inf, atanh at
  +-1, tgamma at 0: +inf; a ContextError over rational endpoints when it is infinite);
* the value at every critical point that may lie inside (cosh: 1 at 0; tgamma and lgamma:
  their minimum at 1.4616...), given as a decimal bracket rounded outward.

For a monotone f this is [RD f(a), RU f(b)] (or reversed), the tightest enclosure.  An
interval reaching outside the domain is a ContextError naming op, context and interval
(tgamma/lgamma: the negative axis, a pole at every integer, is refused by name); an
interval that contains a pole of tan is the whole line (a ContextError over rational
endpoints); whether it does is decided exactly (a float64 phase test, MPFR argument
reduction where that test's margin cannot tell), so a box beside a pole stays finite.
tgamma and lgamma below 0 take their own rule (:func:`negative_gamma_interval`, convexity
between poles).  The binary functions' rules are below (:func:`binary_interval`).
"""
from __future__ import annotations

import math
from fractions import Fraction

import gmpy2
import numpy as np

from . import directed as D
from . import function_endpoints as FE
from .. import formats
from ..errors import ContextError
from ..functions import F64_ABS_ERR

_HUGE_PHASE = 2.0 ** 40   # beyond this, poles are located by MPFR argument reduction


def _mask(x) -> np.ndarray:
    return np.asarray(x, dtype=bool)


def _first(mask) -> tuple:
    return tuple(int(k) for k in np.argwhere(mask)[0]) if mask.ndim else ()


def _domain_masks(ctx, fn, dom, a):
    """(at_lo, at_hi): where the interval touches an open end; raise outside the domain."""
    E = ctx.ends
    shape = np.shape(a.lo)
    no = np.zeros(shape, dtype=bool)
    if dom is None:
        return no, no
    bad = _mask(np.less(a.lo, dom.lo))
    at_lo = no
    if dom.open:
        bad = bad | _mask(np.less_equal(a.hi, dom.lo))
        at_lo = _mask(np.equal(a.lo, dom.lo))
    at_hi = no
    if dom.has_hi:
        bad = bad | _mask(np.greater(a.hi, dom.hi))
        if dom.hi_open:
            bad = bad | _mask(np.greater_equal(a.lo, dom.hi))
            at_hi = _mask(np.equal(a.hi, dom.hi))
    if bad.any():
        i = _first(bad)
        raise ContextError(
            f"context {ctx.name}: {fn.name}: interval [{a.lo[i]}, {a.hi[i]}] at index "
            f"{list(i)} reaches outside the domain ({dom.why})")
    for at, lim in ((at_lo, dom.limit), (at_hi, dom.hi_limit)):
        if at.any() and E.kind == "rational" and not math.isfinite(lim):
            raise ContextError(
                f"context {ctx.name}: {fn.name}: an interval touching the domain end has "
                f"no finite bound (interval:rational has no infinite endpoints)")
    return at_lo, at_hi


def _may_hold_pole(ctx, fn, a) -> np.ndarray:
    """Mask: a pole offset + k period may lie in [lo, hi] (or NaN ends, or a box at least
    one period wide).  A float64 phase test with a relative margin of 2^-40 settles most
    boxes; those it cannot (a pole within the margin of an end, ends beyond 2^40) are
    decided exactly from the endpoints by MPFR argument reduction
    (:func:`scalars.kernels.function_endpoints.phase_inside`), so a box beside a pole is finite
    however close it comes, and a point box is never the whole line."""
    offset, period = fn.poles_at
    q, per = round(offset / (math.pi / 2)), round(period / (math.pi / 2))
    E = ctx.ends
    lo_f = np.asarray(E.to_f64_nearest(a.lo), dtype=np.float64)
    hi_f = np.asarray(E.to_f64_nearest(a.hi), dtype=np.float64)
    with np.errstate(all="ignore"):
        tl = (lo_f - offset) / period
        th = (hi_f - offset) / period
        # (x - offset)/period carries a float64 error far below 2^-40 (|t| + 1) (mpmath
        # ends: their float64 images add 2^-53 |x|)
        ml = 2.0 ** -40 * (np.abs(tl) + 1)
        mh = 2.0 ** -40 * (np.abs(th) + 1)
        maybe = ~(np.ceil(tl - ml) > np.floor(th + mh))
        surely = np.ceil(tl + ml) <= np.floor(th - mh)
        finite = np.isfinite(lo_f) & np.isfinite(hi_f)
        wide = ~(hi_f - lo_f < period)
        huge = ~(np.abs(lo_f) < _HUGE_PHASE) | ~(np.abs(hi_f) < _HUGE_PHASE)
    out = np.array(maybe | wide | ~finite)     # an array also for 0-d boxes
    redo = finite & ~wide & ((maybe & ~surely) | huge)
    if redo.any() and E.kind != "rational":    # (rational ends: tan only at 0 anyway)
        lo_e = np.broadcast_to(np.asarray(a.lo), redo.shape)
        hi_e = np.broadcast_to(np.asarray(a.hi), redo.shape)
        for i in zip(*np.nonzero(redo)) if redo.ndim else [()]:
            out[i] = FE.phase_inside(q, per, FE.exact_mpfr(lo_e[i]), FE.exact_mpfr(hi_e[i]))
    return out


def piecewise_interval(ctx, fn, a):
    """The enclosure of f over the Interval ``a`` in the interval context ``ctx``."""
    if fn.negative_branches:
        return negative_gamma_interval(ctx, fn, a)
    return _piecewise(ctx, fn, a)


def _piecewise(ctx, fn, a):
    E = ctx.ends
    dom = fn.interval_domain if fn.interval_domain is not None else fn.domain
    at_lo, at_hi = _domain_masks(ctx, fn, dom, a)
    lo_arg = E.wrap(np.where(at_lo, a.hi, a.lo))
    hi_arg = E.wrap(np.where(at_hi, a.lo, a.hi))
    both = at_lo & at_hi
    if both.any():    # (-1, 1) for atanh: any inner point will do, its value is replaced
        inner = E.full((), 0.5 * (dom.lo + dom.hi))
        lo_arg = E.wrap(np.where(both, inner, lo_arg))
        hi_arg = E.wrap(np.where(both, inner, hi_arg))
    d, u = E.func(fn, E.wrap(np.stack([lo_arg, hi_arg])))
    d0, d1, u0, u1 = (E.wrap(t) for t in (d[0], d[1], u[0], u[1]))
    if at_lo.any():
        lim = E.full((), dom.limit)
        d0, u0 = E.wrap(np.where(at_lo, lim, d0)), E.wrap(np.where(at_lo, lim, u0))
    if at_hi.any():
        lim = E.full((), dom.hi_limit)
        d1, u1 = E.wrap(np.where(at_hi, lim, d1)), E.wrap(np.where(at_hi, lim, u1))
    lo = E.wrap(np.minimum(d0, d1))
    hi = E.wrap(np.maximum(u0, u1))
    for x_lo, x_hi, v_lo, v_hi in fn.critical:
        inside = _mask(np.less_equal(a.lo, x_hi)) & _mask(np.greater_equal(a.hi, x_lo))
        if inside.any():
            vd = E.wrap(E.point(v_lo)[0])
            vu = E.wrap(E.point(v_hi)[1])
            lo = E.wrap(np.where(inside, np.minimum(lo, vd), lo))
            hi = E.wrap(np.where(inside, np.maximum(hi, vu), hi))
    if fn.poles_at is not None:
        lo, hi = ctx._whole(fn.name, _may_hold_pole(ctx, fn, a), lo, hi)
    return ctx._box(lo, hi)


# ====================================================================== binary
# The interval rules of scalars.functions_binary, by the entry's ``interval`` name.  Endpoint
# values f(x, y) are rounded down and up by MPFR directly (:func:`_dir2`): exactly
# directed on a binary grid (float64 included) and at mpmath's precision, exact over
# rational endpoints (or the rational context's ContextError).

def _dir2(ctx, fn, x, y):
    """(RD f(x, y), RU f(x, y)) of endpoint arrays x, y (broadcast) on the ends' grid."""
    E = ctx.ends
    x, y = np.broadcast_arrays(np.asarray(x), np.asarray(y))
    if E.kind == "rational":
        v = E.wrap(getattr(ctx.base, fn.name)(E.wrap(np.array(x)), E.wrap(np.array(y))))
        return v, v
    if E.kind == "float":
        x = np.asarray(x, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        lo = np.full(x.shape, np.nan)
        hi = np.full(x.shape, np.nan)
        todo = np.ones(x.shape, dtype=bool)
        if not E.grid.is_binary64:
            # fast path (as function_endpoints.func_dir): the float64 value v with
            # |v - f| <= f64_rel |v| + F64_ABS_ERR; where [v - m, v + m] rounds down and
            # up to single grid values, those are RD f and RU f
            with np.errstate(all="ignore"):
                v = fn.eval_f64(x, y)
                m = np.abs(v) * fn.f64_rel + F64_ABS_ERR
                d1, d2 = D.round_down(v - m, E.grid), D.round_down(v + m, E.grid)
                u1, u2 = D.round_up(v - m, E.grid), D.round_up(v + m, E.grid)
            ok = ((d1 == d2) & (u1 == u2) & np.isfinite(x) & np.isfinite(y)
                  & np.isfinite(d1) & np.isfinite(u2))
            lo, hi, todo = np.where(ok, d1, lo), np.where(ok, u2, hi), ~ok
        idx = np.flatnonzero(todo)
        if idx.size:
            xs, ys = x.reshape(-1)[idx].tolist(), y.reshape(-1)[idx].tolist()
            for mode, dest in (("down", lo), ("up", hi)):
                f = fn.mpfr_in(formats.gmpy2_context(E.grid, mode))
                vals = np.array([float(f(gmpy2.mpfr(s, 53), gmpy2.mpfr(t, 53)))
                                 for s, t in zip(xs, ys)], dtype=np.float64)
                # the format's own overflow rule (no-op for IEEE formats)
                dest.reshape(-1)[idx] = formats.round_to_format(vals, E.grid, mode)
        return E.wrap(lo), E.wrap(hi)
    # mpmath endpoints: MPFR at the endpoints' precision with (practically) unbounded
    # exponents; conversions both ways are exact
    L, mk = E.lib, E.mk
    res = []
    for rnd in (gmpy2.RoundDown, gmpy2.RoundUp):
        c = gmpy2.context(precision=E.prec, emin=gmpy2.get_emin_min(),
                          emax=gmpy2.get_emax_max(), round=rnd)
        f = fn.mpfr_in(c)

        def one(s, t):
            with c:
                r = f(_mpf_to_mpfr(s), _mpf_to_mpfr(t))
            return _mpfr_to_mpf(L, mk, r)
        res.append(E.wrap(np.frompyfunc(one, 2, 1)(x, y)))
    return res[0], res[1]


_mpf_to_mpfr = FE.mpf_to_mpfr


def _mpfr_to_mpf(L, mk, r):
    if gmpy2.is_nan(r):
        return mk(L.fnan)
    if gmpy2.is_infinite(r):
        return mk(L.finf if r > 0 else L.fninf)
    if r == 0:
        return mk(L.fzero)
    man, exp = r.as_mantissa_exp()
    return mk(L.from_man_exp(int(man), int(exp)))


def _refuse(ctx, fn, why):
    return ContextError(f"context {ctx.name}: {fn.name}: {why}")


def binary_interval(ctx, fn, a, b, shape):
    """The enclosure of f(a, b) for Intervals a, b (broadcast to ``shape``)."""
    rule = fn.interval
    if rule is None:
        raise _refuse(ctx, fn, fn.interval_why)
    if rule == "fmax":
        return ctx.maximum(a, b)
    if rule == "fmin":
        return ctx.minimum(a, b)
    if rule == "fdim":     # max(x - y, 0): x - y rounded outward, then the lattice max
        return ctx.maximum(ctx.sub(a, b), ctx.zeros(()))
    if rule == "hypot":    # increasing in |x| and |y|
        ax, ay = ctx.abs(a), ctx.abs(b)
        lo, _ = _dir2(ctx, fn, ax.lo, ay.lo)
        _, hi = _dir2(ctx, fn, ax.hi, ay.hi)
        return ctx._box(lo, hi)
    if rule == "copysign":
        return _copysign_interval(ctx, a, b, shape)
    if rule == "pow":
        return _pow_interval(ctx, fn, a, b, shape)
    if rule == "atan2":
        return _atan2_interval(ctx, fn, a, b, shape)
    if rule in ("fmod", "remainder"):
        return _quotient_interval(ctx, fn, a, b, shape, rule)
    raise _refuse(ctx, fn, f"unknown interval rule {rule!r}")


_PI_UP = float(np.nextafter(math.pi, math.inf))     # float64's pi lies below the real pi


def _atan2_interval(ctx, fn, y, x, shape):
    """atan2(y, x): off the branch cut's closure {x <= 0, y = 0} -- x > 0, or y > 0, or
    y < 0 on the whole box -- atan2 is monotone in each argument for the other fixed
    (d/dy = x/r^2, d/dx = -y/r^2 keep their signs), so the extremes are at the corners;
    elsewhere the box may straddle the cut (or hold the origin): [-pi, pi] rounded out."""
    E = ctx.ends
    ylo, yhi, xlo, xhi = (E.wrap(np.broadcast_to(t, shape)) for t in (y.lo, y.hi, x.lo, x.hi))
    off_cut = (_mask(np.greater(xlo, 0)) | _mask(np.greater(ylo, 0))
               | _mask(np.less(yhi, 0)))
    ys = E.wrap(np.stack([ylo, ylo, yhi, yhi]))
    xs = E.wrap(np.stack([xlo, xhi, xlo, xhi]))
    d, u = _dir2(ctx, fn, ys, xs)
    lo, hi = E.wrap(np.min(d, axis=0)), E.wrap(np.max(u, axis=0))
    if not off_cut.all():
        if E.kind == "rational":
            raise _refuse(ctx, fn, "a box touching the negative x axis or the origin has "
                                   "bounds +-pi, which interval:rational cannot hold")
        pi_lo, pi_hi = E.point(-_PI_UP)[0], E.point(_PI_UP)[1]
        lo = E.wrap(np.where(off_cut, lo, pi_lo))
        hi = E.wrap(np.where(off_cut, hi, pi_hi))
    return ctx._box(lo, hi)


def _fraction_end(E, v) -> Fraction:
    """The exact rational value of one finite endpoint."""
    if E.kind == "float":
        return Fraction(float(v))
    if E.kind == "mpmath":
        return E._exact(v)
    return Fraction(int(v.numerator), int(v.denominator))


def _quotient_interval(ctx, fn, x, y, shape, rule):
    """fmod / remainder: x - n y with n = trunc(x/y) (fmod) or x/y rounded half to even
    (remainder).  Both roundings are non-decreasing in x/y, and x/y is monotone in each
    argument off y = 0, so n is one integer over the box exactly when it is the same at
    the box's extreme quotients: an outward enclosure [q.lo, q.hi] of x/y settles most
    boxes, the exact quotients at the corners the rest (point boxes always).  There
    f = x - n y is linear, so its range is the hull of its exact corner values, rounded
    outward once: tight, and for a point box the exact IEEE result (fmod and remainder
    are exact operations).  Elsewhere the bounds |fmod| <= min(|x|, |y|) with the sign of
    x, |remainder| <= min(|x|, |y|/2).  A divisor interval holding 0 gives the whole line
    (f(x, 0) is undefined)."""
    E = ctx.ends
    zero_in = np.broadcast_to(_mask(np.less_equal(y.lo, 0)) & _mask(np.greater_equal(y.hi, 0)),
                              shape)
    xlo, xhi, ylo, yhi = (np.broadcast_to(t, shape) for t in (x.lo, x.hi, y.lo, y.hi))
    one = ctx.ones(())
    safe_y = ctx.where(zero_in, ctx.broadcast_to(one, shape), ctx.broadcast_to(y, shape)) \
        if zero_in.any() else y
    q = ctx.div(x, safe_y)
    qlo = np.broadcast_to(np.asarray(E.to_f64(q.lo, "down"), dtype=np.float64), shape)
    qhi = np.broadcast_to(np.asarray(E.to_f64(q.hi, "up"), dtype=np.float64), shape)
    rnd = np.trunc if rule == "fmod" else np.rint
    with np.errstate(all="ignore"):
        n_lo, n_hi = rnd(qlo), rnd(qhi)
        q_finite = np.isfinite(n_lo) & np.isfinite(n_hi)
        finite = np.ones(shape, dtype=bool)     # finite ends (a quotient may overflow)
        for t in (xlo, xhi, ylo, yhi):
            if E.kind == "float":
                finite &= np.isfinite(np.asarray(t, dtype=np.float64))
            elif E.kind == "mpmath":
                finite &= np.asarray(np.frompyfunc(
                    lambda v: v._mpf_ not in (E.lib.finf, E.lib.fninf, E.lib.fnan), 1, 1)(t),
                    dtype=bool)
        same = finite & q_finite & (n_lo == n_hi) & ~zero_in
        point = _mask(np.equal(xlo, xhi)) & _mask(np.equal(ylo, yhi))
        near = finite & ~same & ~zero_in & ((q_finite & (n_hi - n_lo <= 1)) | point)
    if E.kind == "rational":
        near = ~zero_in & ~same
    rnd_q = math.trunc if rule == "fmod" else round      # round(): half to even
    ints = {}
    for i in zip(*np.nonzero(same | near)) if len(shape) else ([()] if (same | near) else []):
        X = (_fraction_end(E, xlo[i]), _fraction_end(E, xhi[i]))
        Y = (_fraction_end(E, ylo[i]), _fraction_end(E, yhi[i]))
        if same[i]:
            n = int(n_lo[i])
        else:
            ns = {rnd_q(a / b) for a in X for b in Y}
            if len(ns) != 1:
                continue
            n = ns.pop()
        vals = [a - n * b for a in X for b in Y]
        ints[i] = (min(vals), max(vals))
    # the generic bound
    ax, ay = ctx.abs(x), ctx.abs(y)
    ay_hi = E.wrap(np.broadcast_to(ay.hi, shape))
    if rule == "remainder":
        ay_hi = ctx.ends.mul(ay_hi, E.full((), 0.5))[1]
    m = E.wrap(np.minimum(E.wrap(np.broadcast_to(ax.hi, shape)), ay_hi))
    zero = E.full((), 0)
    if rule == "fmod":
        xpos = np.broadcast_to(_mask(np.greater_equal(x.lo, 0)), shape)
        xneg = np.broadcast_to(_mask(np.less_equal(x.hi, 0)), shape)
        glo = np.where(xpos, zero, E.neg(m))
        ghi = np.where(xneg, zero, m)
    else:
        glo, ghi = E.neg(m), m
    lo = E.wrap(np.array(np.broadcast_to(glo, shape), copy=True))
    hi = E.wrap(np.array(np.broadcast_to(ghi, shape), copy=True))
    if ints:
        keys = list(ints)
        d = E.point(np.array([ints[k][0] for k in keys] + [ints[k][1] for k in keys],
                             dtype=object))
        for j, k in enumerate(keys):
            lo[k] = d[0][j]
            hi[k] = d[1][len(keys) + j]
    lo, hi = ctx._whole(fn.name, zero_in, lo, hi)
    return ctx._box(lo, hi)


def _copysign_interval(ctx, a, b, shape):
    """|a| where b > 0, -|a| where b < 0, their hull where b reaches 0 (a zero endpoint
    may be -0, whose sign copysign would copy)."""
    E = ctx.ends
    m = ctx.abs(a)
    lo_m, hi_m = (E.wrap(np.broadcast_to(t, shape)) for t in (m.lo, m.hi))
    pos = np.broadcast_to(_mask(np.greater(b.lo, 0)), shape)
    neg = np.broadcast_to(_mask(np.less(b.hi, 0)), shape)
    lo = np.where(pos, lo_m, E.neg(hi_m))
    hi = np.where(neg, E.neg(lo_m), hi_m)
    return ctx._box(E.wrap(lo), E.wrap(hi))


def _is_int(E, v):
    if E.kind == "float":
        with np.errstate(invalid="ignore"):
            return np.isfinite(v) & (v == np.floor(v))

    def one(t):
        try:
            return bool(t == int(t))
        except (ValueError, OverflowError, TypeError, ArithmeticError):
            return False
    return np.asarray(np.frompyfunc(one, 1, 1)(v), dtype=bool)


def _pow_interval(ctx, fn, a, b, shape):
    """x^y over a box.

    * base >= 0: x^y is monotone in x for fixed y and in y for fixed x (C pow's limits
      at 0 and inf included), so its extremes over the box are at the four corners.
    * base reaching below 0 with a point integer exponent n: x^n is monotone on each side
      of 0, so the extremes are at the ends and at 0 when 0 is inside (where x^n is 0
      for n > 0, 1 for n = 0, a pole for n < 0: +inf for even n, the whole line for odd
      n -- a zero upper end counts as inside).
    * otherwise (non-integer or non-point exponent over negative bases) x^y is undefined
      at some points of the box: a ContextError naming op, context and both intervals.
    """
    E = ctx.ends
    alo, ahi, blo, bhi = (E.wrap(np.broadcast_to(t, shape)) for t in (a.lo, a.hi, b.lo, b.hi))
    zero = E.full((), 0)
    nonneg = _mask(np.greater_equal(alo, 0))
    alo = E.wrap(np.where(E.is_zero(alo), zero, alo))        # -0 is the base +0
    ahi = E.wrap(np.where(E.is_zero(ahi), zero, ahi))
    integer = _mask(np.equal(blo, bhi)) & _is_int(E, blo)
    bad = ~nonneg & ~integer
    if bad.any():
        i = _first(bad)
        raise _refuse(ctx, fn, f"base interval [{alo[i]}, {ahi[i]}] at index {list(i)} "
                               f"reaches below 0 and the exponent [{blo[i]}, {bhi[i]}] is "
                               f"not one integer: x^y is undefined at some of its points")
    # corners (every element; only the non-negative ones use all four)
    xs = E.wrap(np.stack([alo, alo, ahi, ahi]))
    ys = E.wrap(np.stack([blo, bhi, blo, bhi]))
    d, u = _dir2(ctx, fn, xs, ys)
    lo = E.wrap(np.min(d, axis=0)) if E.kind == "float" else E.wrap(np.min(d, axis=0))
    hi = E.wrap(np.max(u, axis=0))
    # a zero base end may be -0, and C's pow(-0, y) is -inf for a negative odd integer y:
    # where the exponent box may hold one, the lower end is -inf (sound for either zero)
    zero_end = nonneg & E.is_zero(alo)
    if zero_end.any():
        ylo = np.asarray(E.to_f64(blo, "down"), dtype=np.float64)
        yhi = np.asarray(E.to_f64(bhi, "up"), dtype=np.float64)
        with np.errstate(all="ignore"):
            k_lo, k_hi = np.ceil(ylo), np.minimum(np.floor(yhi), -1.0)
            odd_neg = (k_hi >= k_lo) & ((k_hi - k_lo >= 1) | (np.fmod(k_hi, 2) != 0))
        flag = zero_end & odd_neg
        if flag.any():
            if E.kind == "rational":
                raise _refuse(ctx, fn, "0 to a negative odd power is unbounded below "
                                       "(interval:rational has no infinite endpoints)")
            lo = E.wrap(np.where(flag, E.full((), -math.inf), lo))
    neg = ~nonneg
    if neg.any():
        # integer n: the ends (corners 0 and 2 use blo = n), plus 0 when inside
        lo_n = E.wrap(np.minimum(d[0], d[2]))
        hi_n = E.wrap(np.maximum(u[0], u[2]))
        inside = _mask(np.greater_equal(ahi, 0))
        npos = _mask(np.greater(blo, 0))
        nzero = E.is_zero(blo)
        nneg = ~npos & ~nzero
        odd = np.zeros(shape, dtype=bool)
        if nneg.any() or npos.any():
            two = E.full((), 2)
            with np.errstate(all="ignore"):
                half = E.wrap(np.true_divide(blo, two)) if E.kind == "float" else \
                    E.wrap(np.frompyfunc(lambda t: t / 2, 1, 1)(blo))
            odd = ~_is_int(E, half)
        # 0 inside: value 0 (n > 0), 1 (n = 0); poles for n < 0
        at0 = E.wrap(np.where(npos, zero, E.full((), 1)))
        lo_n = E.wrap(np.where(inside & ~nneg, np.minimum(lo_n, at0), lo_n))
        hi_n = E.wrap(np.where(inside & ~nneg, np.maximum(hi_n, at0), hi_n))
        pole = inside & nneg
        if pole.any():
            big = E.full((), math.inf) if E.kind != "rational" else None
            if big is None:
                raise _refuse(ctx, fn, "a negative integer power over an interval "
                                       "containing 0 is unbounded (interval:rational has "
                                       "no infinite endpoints)")
            hi_n = E.wrap(np.where(pole, big, hi_n))
            lo_n, hi_n = ctx._whole(fn.name, pole & odd, lo_n, hi_n)
        lo = E.wrap(np.where(neg, lo_n, lo))
        hi = E.wrap(np.where(neg, hi_n, hi))
    return ctx._box(lo, hi)


# ============================================================ tgamma/lgamma below 0
# Between two poles, (-k, -k+1), log|Gamma| is convex (its second derivative, trigamma,
# is positive) and so is |Gamma| (log-convex); Gamma has the sign (-1)^k there.  So over
# [a, b] inside one branch the extremes of log|Gamma| and |Gamma| are at the ends, except
# the minimum, which lies inside where digamma changes sign.  That minimum is bracketed by
# bisection on digamma's directed signs (256 bits) and bounded below by convexity:
# g(x) >= g(c1) + min(0, g'(c1)) (c2 - c1) on [c1, c2].  Every value is computed with
# directed rounding (MPFR at 256 bits, then onto the endpoint grid in the same direction),
# so the enclosure is sound; the ends are RD/RU of the exact values unless a grid point
# lies within 2^-256 of them.
_WP = 256


def _grid_round(E, r, mode):
    """An mpfr rounded onto the endpoint grid downward ("down") or upward ("up")."""
    if E.kind == "float":
        with formats.gmpy2_context(E.grid, mode):
            v = float(+r)
        return float(formats.round_to_format(np.array(v), E.grid, mode))
    c = gmpy2.context(precision=E.prec, emin=gmpy2.get_emin_min(), emax=gmpy2.get_emax_max(),
                      round=gmpy2.RoundDown if mode == "down" else gmpy2.RoundUp)
    with c:
        v = +r
    return _mpfr_to_mpf(E.lib, E.mk, v)


def _end_mpfr(E, t):
    return gmpy2.mpfr(float(t), 53) if E.kind == "float" else _mpf_to_mpfr(t)


def _negative_branch(fn, E, a, b, k):
    """(lo, hi) endpoint values of tgamma/lgamma over [a, b] inside the negative branch
    (-k, -k + 1).

    Every mpfr operation runs in a directed context method (negation and abs included):
    Python's operators on mpfr values round to gmpy2's global context (53 bits by
    default), which turned 256-bit bounds into wrong-way 53-bit ones."""
    wide = dict(precision=_WP, emin=gmpy2.get_emin_min(), emax=gmpy2.get_emax_max())
    dn = gmpy2.context(round=gmpy2.RoundDown, **wide)
    up = gmpy2.context(round=gmpy2.RoundUp, **wide)
    log = fn.name == "lgamma"
    x0, x1 = _end_mpfr(E, a), _end_mpfr(E, b)
    sign = -1 if k % 2 else 1

    def g_dn(c, x):           # lower bound of f(x) (f = lgamma or Gamma itself)
        return c.lgamma(x)[0] if log else c.gamma(x)

    lows = [g_dn(dn, x0), g_dn(dn, x1)]
    highs = [g_dn(up, x0), g_dn(up, x1)]
    interior = None
    f1, f2 = dn.digamma(x0), up.digamma(x1)
    if not (f1 >= 0 or f2 <= 0):
        # Bracket digamma's root: the minimum of g over [a, b] stays in [c1, c2] while
        # digamma(c1) <= 0 <= digamma(c2) is certified by directed values.  The trial
        # point is regula falsi's (Illinois: the kept end's value halved when one end
        # moves twice running), a bisection when that leaves (c1, c2); only the
        # certified signs matter for soundness, the trial point only for speed
        # (~10 steps from a 2^-30 bracket instead of ~110 bisections).
        c1, c2 = x0, x1
        tol = dn.mul(dn.abs(x0), 2.0 ** -140)   # the bound then errs by ~g''(x*) 2^-280
        last = 0
        for _ in range(2 * _WP):
            w = up.sub(c2, c1)
            if w < tol:
                break
            mid = None
            if f1 < 0 < f2:
                mid = dn.add(c1, dn.mul(w, dn.div(dn.minus(f1), dn.sub(f2, f1))))
            if mid is None or not (c1 < mid < c2):
                mid = dn.div(dn.add(c1, c2), 2)
                if not (c1 < mid < c2):
                    break
            v = up.digamma(mid)
            if v <= 0:
                c1, f1 = mid, v
                if last == 1:
                    f2 = dn.div(f2, 2)
                last = 1
                continue
            v = dn.digamma(mid)
            if v >= 0:
                c2, f2 = mid, v
                if last == 2:
                    f1 = dn.div(f1, 2)
                last = 2
                continue
            break                   # the sign is not certified: the root is within 2^-250
        # g = log|Gamma| or |Gamma| (convex): g(x) >= g(c1) + min(0, g'(c1)) (c2 - c1)
        if log:
            g_lo = dn.lgamma(c1)[0]
            slope = dn.digamma(c1)
        else:
            # RD |Gamma(c1)| and RU |Gamma(c1)|: negation is exact at 256 bits
            g_lo = dn.gamma(c1) if sign > 0 else dn.minus(up.gamma(c1))
            g_hi = up.gamma(c1) if sign > 0 else up.minus(dn.gamma(c1))
            psi = dn.digamma(c1)
            slope = dn.mul(psi, g_hi if psi < 0 else g_lo)
        bound = g_lo if slope >= 0 else dn.add(g_lo, dn.mul(slope, up.sub(c2, c1)))
        interior = bound                       # a lower bound of min g on [a, b]
    if interior is not None:
        if log or sign > 0:
            lows.append(interior)
        else:                                  # Gamma = -|Gamma|: its maximum is -min|Gamma|
            highs.append(up.minus(interior))
    return _grid_round(E, min(lows), "down"), _grid_round(E, max(highs), "up")


def negative_gamma_interval(ctx, fn, a):
    """tgamma/lgamma over intervals below 0 (each inside one branch between poles); the
    other entries through the piecewise rule (x > 0); a pole inside is a ContextError."""
    E = ctx.ends
    neg = np.asarray(np.less(a.hi, 0), dtype=bool)
    if not neg.any() or E.kind == "rational":
        return _piecewise(ctx, fn, a)
    lo_f = np.asarray(E.to_f64_nearest(a.lo), dtype=np.float64)
    flat_neg = np.flatnonzero(neg.reshape(-1))
    los, his = [], []
    for i in flat_neg:
        lo_e, hi_e = a.lo.reshape(-1)[i], a.hi.reshape(-1)[i]
        fl = math.floor(lo_f.reshape(-1)[i]) if math.isfinite(lo_f.reshape(-1)[i]) else None
        # one branch: no integer in [lo, hi] (checked exactly on the endpoints)
        if fl is None or not (fl < lo_e and hi_e < fl + 1):
            idx = list(np.unravel_index(i, neg.shape)) if neg.ndim else []
            raise ContextError(
                f"context {ctx.name}: {fn.name}: interval [{lo_e}, {hi_e}] at index "
                f"{[int(t) for t in idx]} contains a pole (a non-positive integer)")
        lo_v, hi_v = _negative_branch(fn, E, lo_e, hi_e, -int(fl))
        los.append(lo_v)
        his.append(hi_v)
    one = E.full(np.shape(a.lo), 1)
    rest = _piecewise(ctx, fn, type(a)(E.wrap(np.where(neg, one, a.lo)),
                                                E.wrap(np.where(neg, one, a.hi))))
    lo, hi = E.wrap(np.array(rest.lo, copy=True)), E.wrap(np.array(rest.hi, copy=True))
    lo.reshape(-1)[flat_neg] = los
    hi.reshape(-1)[flat_neg] = his
    return ctx._box(lo, hi)
