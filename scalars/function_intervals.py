"""The interval rule of the piecewise functions of :mod:`scalars.functions` (``pieces``).

Such an f is continuous and monotone between the critical points it declares
(``critical``), on its interval domain (``interval_domain`` or ``domain``), and tan is
increasing between its poles (``poles_at``).  Over an argument interval [a, b] inside the
domain, f therefore ranges between the smallest and the largest of

* f(a) and f(b), each rounded down and up by the endpoint arithmetic
  (:mod:`scalars.function_endpoints`: exactly directed for binary bases, the declared ulps
  bound for float64, mpmath widened, exact for rational);
* the limit at an open domain end that the interval touches (log1p at -1: -inf, atanh at
  +-1, tgamma at 0: +inf; a ContextError over rational endpoints when it is infinite);
* the value at every critical point that may lie inside (cosh: 1 at 0; tgamma and lgamma:
  their minimum at 1.4616...), given as a decimal bracket rounded outward.

For a monotone f this is [RD f(a), RU f(b)] (or reversed), the tightest enclosure.  An
interval reaching outside the domain is a ContextError naming op, context and interval
(tgamma/lgamma: the negative axis, a pole at every integer, is refused by name); an
interval that may contain a pole of tan is the whole line (a ContextError over rational
endpoints).  The point test for "may contain" is conservative (float64 with a relative
margin of 2^-40), so the rule is sound and loses tightness only within that margin.
"""
from __future__ import annotations

import math

import numpy as np

from .errors import ContextError

_HUGE_PHASE = 2.0 ** 40   # beyond this, locating poles is not worth it: the whole line


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
    """Conservative mask: a pole offset + k period may lie in [lo, hi] (or NaN ends)."""
    offset, period = fn.poles_at
    E = ctx.ends
    lo_f = np.asarray(E.to_f64_nearest(a.lo), dtype=np.float64)
    hi_f = np.asarray(E.to_f64_nearest(a.hi), dtype=np.float64)
    with np.errstate(all="ignore"):
        tl = (lo_f - offset) / period
        th = (hi_f - offset) / period
        # (x - offset)/period carries a float64 error far below 2^-40 (|t| + 1)
        kl = np.ceil(tl - 2.0 ** -40 * (np.abs(tl) + 1))
        kh = np.floor(th + 2.0 ** -40 * (np.abs(th) + 1))
        return (~(kl > kh) | ~(np.abs(lo_f) < _HUGE_PHASE) | ~(np.abs(hi_f) < _HUGE_PHASE)
                | ~(hi_f - lo_f < period))


def piecewise_interval(ctx, fn, a):
    """The enclosure of f over the Interval ``a`` in the interval context ``ctx``."""
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
