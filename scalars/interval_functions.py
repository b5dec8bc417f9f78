"""The elementwise functions of the interval contexts (exp, log, sin, ..., the
two-argument functions, heaviside, sign): a mixin of
:class:`scalars.interval.IntervalContext`, written against its plumbing (``_iv``,
``_box``, ``ends``).
"""
from __future__ import annotations

import math

import numpy as np

from .kernels import function_endpoints as FE
from .kernels import grid as GK
from .kernels import function_intervals as FI
from .errors import ContextError
from .functions import FUNCTIONS
from .values import Interval

_TWO_PI_SAFE = 7.0        # an interval at least this wide (> 2 pi) covers a whole period
_HUGE_PHASE = 2.0 ** 40   # beyond this, extrema are located by MPFR argument reduction


class IntervalFunctions:
    """Elementwise functions of an interval context (mixin; see the module docstring)."""

    # ----------------------------------------------------------------- functions
    def _function(self, fn, a):
        """exp, log, ... (scalars.functions): the entry's shape decides the endpoints --
        monotone: f of each end (rounded down / up); periodic: the ends plus the extreme
        values wherever an extremum may lie inside; a domain end is raised on or, for an
        open end touched by the interval, replaced by f's limit there."""
        a = self._iv(a, fn.name)
        if fn.pieces:     # exp2 ... lgamma: the generic rule (scalars.kernels.function_intervals)
            return FI.piecewise_interval(self, fn, a)
        if fn.periodic is not None:
            return self._periodic(fn, a)
        E = self.ends
        lo_arg, hi_arg, at_end = a.lo, a.hi, None
        # float ends: one reduction settles the usual case, every lower end strictly
        # inside the domain (NaN fails the test and takes the full checks)
        inside = (fn.domain is not None and E.kind == "float" and np.size(a.lo) > 0
                  and float(np.min(a.lo)) > fn.domain.lo)
        if fn.domain is not None and not inside:
            dom = fn.domain
            bad = np.asarray(np.less(a.lo, dom.lo), dtype=bool)
            if bad.any():
                i = tuple(int(k) for k in np.argwhere(bad)[0])
                below = "negative values" if dom.lo == 0 else f"values below {dom.lo:g}"
                raise ContextError(
                    f"context {self.name}: {fn.name}: interval [{a.lo[i]}, {a.hi[i]}] at "
                    f"index {list(i)} contains {below}, where {fn.name} is undefined")
            at_end = np.asarray(np.equal(a.lo, dom.lo), dtype=bool) if dom.open else None
            if at_end is not None and at_end.any():
                if E.kind == "rational" and not math.isfinite(dom.limit):
                    raise ContextError(
                        f"context {self.name}: {fn.name}: interval touching {dom.lo:g} has "
                        f"no finite bound (interval:rational has no infinite endpoints)")
                # any point inside the domain will do: its value is replaced below
                lo_arg = E.wrap(np.where(at_end, a.hi, a.lo))
        if (self._coarse() and fn.name in GK.FUNC_CODES and FUNCTIONS.get(fn.name) is fn
                and fn.monotone == "increasing"):
            # one compiled pass: RD f(lo), RU f(hi), MPFR for the unsettled ends
            lo, hi = GK.func_pair(fn, np.broadcast_to(lo_arg, np.shape(hi_arg)), hi_arg,
                                  E.grid, lambda t: FE.mpfr_func_dir(fn, t, E.grid))
        elif (E.kind == "float" and E.grid.is_binary64 and fn.name in FE.F64K.CODES
                and FUNCTIONS.get(fn.name) is fn and fn.monotone == "increasing"):
            # one compiled pass: RD f(lo), RU f(hi) (scalars.kernels.f64_endpoints)
            lo, hi, nans = FE.func_pair_f64(fn, lo_arg, hi_arg, counted=True)
            if nans == 0 and at_end is None:
                return Interval(E.wrap(lo), E.wrap(hi))     # no NaN end: no NaN scan
        elif fn.monotone == "decreasing":
            lo, hi = self._dual_round(lambda x: E.func(fn, x), [hi_arg], [lo_arg])
        else:
            lo, hi = self._dual_round(lambda x: E.func(fn, x), [lo_arg], [hi_arg])
        if at_end is not None and at_end.any():
            side = "hi" if fn.monotone == "decreasing" else "lo"
            lim = E.full((), dom.limit)
            if side == "lo":
                lo = E.wrap(np.where(at_end, lim, lo))
            else:
                hi = E.wrap(np.where(at_end, lim, hi))
        return self._box(lo, hi)

    def _function2(self, fn, a, b):
        """pow, hypot, fmax, fmin, copysign (scalars.functions_binary): the rules of
        scalars.kernels.function_intervals; atan2, fmod, remainder raise a ContextError."""
        a, b, shape = self._pair(a, b, fn.name)
        return FI.binary_interval(self, fn, a, b, shape)

    def _periodic(self, fn, a):
        """sin/cos: endpoint values, plus the extreme values wherever an extremum may lie
        inside (the phases of fn.periodic, period 2 pi)."""
        name = fn.name
        E = self.ends
        if E.kind == "rational":
            same = np.asarray(np.equal(a.lo, a.hi), dtype=bool)
            if not same.all():
                raise ContextError(f"context {self.name}: {name}: not rational on a "
                                   f"non-degenerate interval")
            v = getattr(self.ends.base, name)(a.lo)
            return Interval(v, v)
        lo_f = np.asarray(E.to_f64_nearest(a.lo), dtype=np.float64)
        hi_f = np.asarray(E.to_f64_nearest(a.hi), dtype=np.float64)
        with np.errstate(all="ignore"):
            # at least a whole period: both extrema (NaN too); narrower boxes -- 6.5 wide
            # included -- get +-1 only where the phase test puts an extremum inside
            full = ~((hi_f - lo_f) < _TWO_PI_SAFE)
            huge = ~full & (~(np.abs(lo_f) < _HUGE_PHASE) | ~(np.abs(hi_f) < _HUGE_PHASE))
            # t = (x - phase) / 2pi carries a float64 error below 2^-48 (|t| + 1) (mpmath
            # ends: their float64 images err by 2^-53 |x| more); the margin 2^-40 (|t| + 1)
            # makes the test conservative: an extremum that might lie inside is assumed to.
            has, unsure = [], []
            for ph in (fn.periodic.maximum, fn.periodic.minimum):
                tl = (lo_f - ph) / (2 * math.pi)
                th = (hi_f - ph) / (2 * math.pi)
                m_l = 2.0 ** -40 * (np.abs(tl) + 1)
                m_h = 2.0 ** -40 * (np.abs(th) + 1)
                has.append(np.array(np.ceil(tl - m_l) <= np.floor(th + m_h)))   # 0-d too
                # "maybe" but not "surely": the margin decided it
                unsure.append(has[-1] & ~(np.ceil(tl + m_l) <= np.floor(th - m_h)))
        # beyond 2^40, or where the float64 phase's margin decided, reduce exactly in MPFR
        # from the exact endpoints (scalars.kernels.function_endpoints.phase_inside), so that an
        # extremum counts only when it lies inside and point intervals get their
        # correctly rounded endpoints at any argument
        lo_e, hi_e = np.asarray(a.lo), np.asarray(a.hi)
        for h, u, ph in zip(has, unsure, (fn.periodic.maximum, fn.periodic.minimum)):
            redo = (huge | u) & ~full
            if redo.any():
                h[redo] = FE.extremum_inside(ph, np.broadcast_to(lo_e, redo.shape)[redo],
                                             np.broadcast_to(hi_e, redo.shape)[redo])
        ends = E.wrap(np.stack([a.lo, a.hi]))
        d, u = E.func(fn, ends)
        lo = np.minimum(E.wrap(d[0]), E.wrap(d[1]))
        hi = np.maximum(E.wrap(u[0]), E.wrap(u[1]))
        top, bottom = E.full((), fn.range[1]), E.full((), fn.range[0])
        hi = E.wrap(np.where(has[0] | full, top, hi))
        lo = E.wrap(np.where(has[1] | full, bottom, lo))
        lo, hi = self._whole(name, np.isnan(lo_f) | np.isnan(hi_f), lo, hi)
        return self._box(lo, hi)

    def heaviside(self, a):
        """heaviside(x) = 1 for x > 0 else 0: [1,1] above 0, [0,0] at or below, [0,1] across."""
        a = self._iv(a, "heaviside")
        E = self.ends
        one, zero = E.full((), 1), E.full((), 0)
        lo = np.where(np.asarray(np.greater(a.lo, 0), dtype=bool), one, zero)
        hi = np.where(np.asarray(np.greater(a.hi, 0), dtype=bool), one, zero)
        return self._box(lo, hi)

    def sign(self, a):
        a = self._iv(a, "sign")
        E = self.ends
        one, zero, mone = E.full((), 1), E.full((), 0), E.full((), -1)

        def sg(x):
            return np.where(np.asarray(np.greater(x, 0), dtype=bool), one,
                            np.where(np.asarray(np.less(x, 0), dtype=bool), mone, zero))
        return self._box(sg(a.lo), sg(a.hi))
