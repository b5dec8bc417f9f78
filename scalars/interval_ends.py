"""Endpoint arithmetic of the interval contexts, one class per kind of base.

``_FloatEnds`` (float64 arrays on a binary grid: exactly directed rounding through
:mod:`scalars.kernels.directed`), ``_RationalEnds`` (exact gmpy2 ``mpq``) and ``_MpmathEnds``
(mpmath ``mpf`` rounded with ``'f'``/``'c'``) share one small interface (point, add, ...,
to_f64, text) that :class:`scalars.interval.IntervalContext` is written against.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .kernels import directed as D
from .kernels import function_endpoints as FE
from .kernels import grid as GK
from .base import object_result as _obj
from .errors import ContextError
from .formats import Format


def _fraction_of(x) -> Fraction:
    """Exact value of one input entry (float, int, Fraction, mpq, mpf, decimal string)."""
    from .base import to_fraction
    if hasattr(x, "_mpf_"):
        return _mpf_fraction(x._mpf_)
    return to_fraction(x)


def _mpf_fraction(raw) -> Fraction:
    """Exact value of a finite raw mpmath number (sign, man, exp, bc)."""
    sign, man, exp, _ = raw
    if man == 0:
        if exp != 0:  # inf / nan are encoded with man == 0 and exp != 0
            raise ContextError(f"{raw} has no exact rational value")
        return Fraction(0)
    v = Fraction(int(man)) * (Fraction(2) ** int(exp))
    return -v if sign else v


def _is_special_float(x) -> bool:
    return isinstance(x, (float, np.floating)) and not math.isfinite(float(x))


# ============================================================ endpoint arithmetics
class _FloatEnds:
    """Endpoints as float64 arrays on the grid of a :class:`formats.Format` (binary64 or a
    narrower binary format), rounded outward by :mod:`scalars.kernels.directed`."""

    kind = "float"

    def __init__(self, grid: Format):
        self.grid = grid

    def ok(self, x) -> bool:
        return isinstance(x, np.ndarray) and x.dtype == np.float64

    def wrap(self, x):
        return np.asarray(x, dtype=np.float64)

    def full(self, shape, value: float):
        return np.full(tuple(shape), float(value))

    def isnan(self, x):
        return np.isnan(x)

    def is_zero(self, x):
        return x == 0

    # ---- directed rounding of inputs
    def point(self, x):
        """(RD, RU) of every entry of a point value, from its exact value."""
        if isinstance(x, np.ndarray) and x.dtype.kind == "f":
            # no copy for float64 input (as the float64 context's convert)
            x = x.astype(np.float64, copy=False)
            if self.grid.is_binary64:
                # exact already: one (read-only by convention) array for both endpoints,
                # which also lets matmul recognise a point operand by identity
                return x, x
            # one compiled pass, the values of D.round_down / D.round_up (weights of a
            # dense layer are converted on every IBP call)
            return GK.round_pair(x, x, self.grid)
        if isinstance(x, (float, np.floating)):
            x = np.asarray(float(x))
            return D.round_down(x, self.grid), D.round_up(x, self.grid)
        if isinstance(x, list):
            try:
                t = np.asarray(x)
            except ValueError:
                t = None
            if t is not None and t.dtype.kind == "f":
                return self.point(t)
        arr = np.asarray(x, dtype=object) if not isinstance(x, np.ndarray) else x
        flat = arr.reshape(-1)
        lo = np.empty(flat.size); hi = np.empty(flat.size)
        exact_idx, exact_vals = [], []
        for i, t in enumerate(flat):
            t = t.item() if isinstance(t, np.generic) else t
            if _is_special_float(t):
                lo[i] = hi[i] = float(t)
                continue
            if hasattr(t, "_mpf_"):
                from mpmath import libmp
                if t._mpf_ in (libmp.finf, libmp.fninf, libmp.fnan):
                    lo[i] = hi[i] = float(t)
                    continue
            exact_idx.append(i)
            exact_vals.append(_fraction_of(t))
        if exact_idx:
            d, u = D.exact_dir(exact_vals, self.grid)
            lo[exact_idx] = d
            hi[exact_idx] = u
        return lo.reshape(arr.shape), hi.reshape(arr.shape)

    # ---- directed arithmetic: each returns (RD, RU)
    def add(self, a, b): return D.add_dir(a, b, self.grid)
    def sub(self, a, b): return D.sub_dir(a, b, self.grid)
    def mul(self, a, b): return D.mul_dir(a, b, self.grid)
    def div(self, a, b): return D.div_dir(a, b, self.grid)
    def sqrt(self, a): return D.sqrt_dir(a, self.grid)

    def func(self, fn, x):
        x = np.asarray(x, dtype=np.float64)
        if self.grid.is_binary64:
            return FE.func_dir_f64(fn, x)
        return FE.func_dir(fn, x, self.grid)

    def neg(self, x): return -x

    def to_f64(self, x, side):
        return np.asarray(x, dtype=np.float64).copy()

    def to_f64_nearest(self, x):
        return np.asarray(x, dtype=np.float64)

    def text(self, x, digits):
        return [f"{float(t):.{digits}f}" for t in np.asarray(x).reshape(-1)]


class _RationalEnds:
    """Exact endpoints: gmpy2 ``mpq`` object arrays; every operation is exact."""

    kind = "rational"

    def __init__(self, base):
        self.base = base
        from .exact import MPQ
        self.leaf = MPQ

    def ok(self, x) -> bool:
        return (isinstance(x, np.ndarray) and x.dtype == object
                and (x.size == 0 or isinstance(x.flat[0], self.leaf)))

    def wrap(self, x):
        return _obj(x)

    def full(self, shape, value):
        return np.full(tuple(shape), self.leaf(Fraction(value)), dtype=object)

    def isnan(self, x):
        return np.zeros(np.shape(x), dtype=bool)

    def is_zero(self, x):
        return np.asarray(np.equal(x, 0), dtype=bool)

    def point(self, x):
        v = self.base.convert(x)
        return v, v

    def _pair(self, r):
        r = _obj(r)
        return r, r

    def add(self, a, b): return self._pair(np.add(a, b))
    def sub(self, a, b): return self._pair(np.subtract(a, b))
    def mul(self, a, b): return self._pair(np.multiply(a, b))
    def div(self, a, b): return self._pair(np.divide(a, b))
    def sqrt(self, a): return self._pair(self.base.sqrt(a))
    def func(self, fn, x): return self._pair(getattr(self.base, fn.name)(x))
    def neg(self, x): return _obj(np.negative(x))

    def to_f64(self, x, side):
        d, u = D.exact_dir([Fraction(int(t.numerator), int(t.denominator))
                            for t in np.asarray(x).reshape(-1)])
        return (d if side == "down" else u).reshape(np.shape(x))

    def to_f64_nearest(self, x):
        return self.base.to_float64(x)

    def text(self, x, digits):
        a = np.asarray(x).reshape(-1)
        return [self.base.format(_obj(t), digits) for t in a]


class _MpmathEnds:
    """Endpoints as mpf object arrays of an ``mpmath:PREC`` context, directed via libmp."""

    kind = "mpmath"
    GUARD = 40          # working precision of the functions: PREC + GUARD
    WIDEN = 30          # widen function values by 2^-(PREC+WIDEN) |v|

    def __init__(self, base):
        import mpmath
        from mpmath import libmp
        self.base = base
        self.lib = libmp
        self.prec = base.prec
        self.leaf = base.leaf_type
        self.mk = base.mp.make_mpf
        self.wide = mpmath.MPContext()
        self.wide.prec = self.prec + self.GUARD

    def ok(self, x) -> bool:
        return (isinstance(x, np.ndarray) and x.dtype == object
                and (x.size == 0 or isinstance(x.flat[0], self.leaf)))

    def wrap(self, x):
        return _obj(x)

    def _raw(self, value):
        L = self.lib
        if isinstance(value, float) and math.isinf(value):
            return L.finf if value > 0 else L.fninf
        f = Fraction(value)
        return L.from_rational(f.numerator, f.denominator, self.prec, L.round_nearest)

    def full(self, shape, value):
        return np.full(tuple(shape), self.mk(self._raw(value)), dtype=object)

    def isnan(self, x):
        fnan = self.lib.fnan
        return np.asarray(np.frompyfunc(lambda t: t._mpf_ == fnan, 1, 1)(x), dtype=bool)

    def is_zero(self, x):
        fz = self.lib.fzero
        return np.asarray(np.frompyfunc(lambda t: t._mpf_ == fz, 1, 1)(x), dtype=bool)

    def _one_point(self, t, rnd):
        L, p = self.lib, self.prec
        t = t.item() if isinstance(t, np.generic) else t
        if hasattr(t, "_mpf_"):
            return self.mk(L.mpf_pos(t._mpf_, p, rnd))
        if isinstance(t, (float, np.floating)):
            return self.mk(L.from_float(float(t), p, rnd))
        f = _fraction_of(t)
        return self.mk(L.from_rational(f.numerator, f.denominator, p, rnd))

    def point(self, x):
        L = self.lib
        arr = np.asarray(x, dtype=object) if not isinstance(x, np.ndarray) else x
        if arr.dtype != object:
            arr = arr.astype(object)
        with np.errstate(all="ignore"):
            lo = np.frompyfunc(lambda t: self._one_point(t, L.round_floor), 1, 1)(arr)
            hi = np.frompyfunc(lambda t: self._one_point(t, L.round_ceiling), 1, 1)(arr)
        return _obj(lo), _obj(hi)

    def _bin(self, fn, a, b):
        L, p, mk = self.lib, self.prec, self.mk
        lo = np.frompyfunc(lambda x, y: mk(fn(x._mpf_, y._mpf_, p, L.round_floor)), 2, 1)(a, b)
        hi = np.frompyfunc(lambda x, y: mk(fn(x._mpf_, y._mpf_, p, L.round_ceiling)), 2, 1)(a, b)
        return _obj(lo), _obj(hi)

    def add(self, a, b): return self._bin(self.lib.mpf_add, a, b)
    def sub(self, a, b): return self._bin(self.lib.mpf_sub, a, b)
    def mul(self, a, b): return self._bin(self.lib.mpf_mul, a, b)
    def div(self, a, b): return self._bin(self.lib.mpf_div, a, b)

    def sqrt(self, a):
        L, p, mk = self.lib, self.prec, self.mk
        lo = np.frompyfunc(lambda x: mk(L.mpf_sqrt(x._mpf_, p, L.round_floor)), 1, 1)(a)
        hi = np.frompyfunc(lambda x: mk(L.mpf_sqrt(x._mpf_, p, L.round_ceiling)), 1, 1)(a)
        return _obj(lo), _obj(hi)

    def _value(self, fn, x):
        """f(x) at PREC+GUARD bits (raw mpf tuple)."""
        w = self.wide
        X = w.make_mpf(x)
        f = getattr(w, fn.mpmath) if isinstance(fn.mpmath, str) else fn.mpmath
        v = f(X) if isinstance(fn.mpmath, str) else f(w, X)
        return v._mpf_

    def _func_one(self, fn, x, rnd_lo: bool):
        L, p = self.lib, self.prec
        raw = x._mpf_
        if raw == L.fnan:
            return self.mk(L.fnan)
        v = self._value(fn, raw)
        if v in (L.finf, L.fninf, L.fnan, L.fzero):
            return self.mk(v)
        if not fn.f64_ulps:
            # exact functions (ceil ... nearbyint): the wide value is the integer itself,
            # which PREC bits hold (x has PREC bits); no widening
            return self.mk(L.mpf_pos(v, p, L.round_floor if rnd_lo else L.round_ceiling))
        delta = L.mpf_shift(L.mpf_abs(v), -(p + self.WIDEN))
        if rnd_lo:
            r = L.mpf_sub(v, delta, p, L.round_floor)
        else:
            r = L.mpf_add(v, delta, p, L.round_ceiling)
        return self.mk(r)

    def func(self, fn, x):
        rlo, rhi = fn.range
        L = self.lib
        clo = self.mk(self._raw(rlo)) if math.isfinite(rlo) else None
        chi = self.mk(self._raw(rhi)) if math.isfinite(rhi) else None

        def one(t, lower):
            r = self._func_one(fn, t, lower)
            if r._mpf_ == L.fnan:
                return r
            # intersect with the function's range (sound, and keeps tanh <= 1 etc.)
            if clo is not None and r < clo:
                return clo
            if chi is not None and r > chi:
                return chi
            return r
        lo = _obj(np.frompyfunc(lambda t: one(t, True), 1, 1)(x))
        hi = _obj(np.frompyfunc(lambda t: one(t, False), 1, 1)(x))
        return lo, hi

    def neg(self, x):
        return _obj(np.frompyfunc(lambda t: self.mk(self.lib.mpf_neg(t._mpf_)), 1, 1)(x))

    def _exact(self, t) -> Fraction:
        return _mpf_fraction(t._mpf_)

    def to_f64(self, x, side):
        a = np.asarray(x).reshape(-1)
        out = np.empty(a.size)
        idx, vals = [], []
        for i, t in enumerate(a):
            if t._mpf_ in (self.lib.finf, self.lib.fninf, self.lib.fnan):
                out[i] = float(t)
            else:
                idx.append(i); vals.append(self._exact(t))
        if idx:
            d, u = D.exact_dir(vals)
            out[idx] = d if side == "down" else u
        return out.reshape(np.shape(x))

    def to_f64_nearest(self, x):
        # within one float64 ulp (all that the callers need), from the exact value
        return self.to_f64(x, "down")

    def text(self, x, digits):
        out = []
        for t in np.asarray(x).reshape(-1):
            raw = t._mpf_
            if raw in (self.lib.finf, self.lib.fninf, self.lib.fnan):
                out.append(str(float(t)))
            else:
                out.append(_fixed_text(_mpf_fraction(raw), digits))
        return out


def _fixed_text(q: Fraction, digits: int) -> str:
    """Exact value rounded half-even to ``digits`` decimals, ``%.{digits}f`` layout."""
    scaled = q * 10 ** digits
    n = round(scaled)                     # Fraction.__round__ is half-even
    neg = q < 0
    n = abs(n)
    s = str(n).rjust(digits + 1, "0")
    body = s[:-digits] + "." + s[-digits:] if digits > 0 else s
    return ("-" if neg else "") + body
