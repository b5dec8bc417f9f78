"""Interval contexts ``interval:BASE``: sound enclosures with exactly directed endpoints.

A value is an :class:`Interval` ``(lo, hi)`` of two base-context arrays.  Every operation
returns an interval that contains the exact real result of the operation at *every* point
of its operand intervals (the enclosure property IBP relies on).

Endpoints are rounded outward with *exact* directed rounding in the base format, not by a
blanket widening:

* ``float64`` and binary bases (binary32, bfloat16, binary16, e4m3, ...): ``+ - * / sqrt``
  through :mod:`scalars.directed` (float64 result + error-free transformation gives the
  exact sign of the error, then RD/RU onto the format's grid).  The endpoints of the
  functions of :mod:`scalars.functions` (exp, log, ...) are correctly rounded down/up for
  binary bases (fast float64 path + MPFR fallback, :mod:`scalars.function_endpoints`); for
  the ``float64`` base too (compiled double-double kernels for exp, log, tanh, sigmoid and
  softplus, :mod:`scalars.f64_endpoint_kernels`; a long double evaluation for the other
  functions and the undecided entries, MPFR for the ones within ~2^-60 of a float64:
  :func:`function_endpoints.func_dir_f64`).
* ``rational``: exact endpoints (gmpy2 ``mpq``).  Functions run through the rational
  context, so they raise :class:`ContextError` except at its rational points (exp [0, 0]).
  There are no infinite endpoints: division by an interval containing 0 raises.
* ``mpmath:PREC``: mpmath's correctly rounded ``mpf_add/mul/div/sqrt`` with rounding
  ``'f'``/``'c'``; functions are evaluated at PREC+40 bits and widened by
  ``2^-(PREC+30) |v|`` (mpmath's elementary functions are accurate to a few ulps at the
  working precision, so this is 2^10 times the expected error) before directed rounding.

Conventions: division by an interval containing 0 gives the whole line ``[-inf, inf]``
(float and mpmath bases); a NaN in any endpoint gives the whole line, never a narrow box;
``sqrt``/``log`` of an interval reaching below 0 raise (the real function is undefined
there), ``log`` of ``[0, b]`` has lower end ``-inf``; ``0 * inf`` inside the product rule
counts as 0 (the zero is attained, the infinity is only a bound).  ``less`` and ``argmax``
are not meaningful on intervals and raise.  ``matmul`` uses Rump's midpoint-radius
algorithm with a rigorous rounding-error term for float/binary bases (BLAS speed) and the
endpoint algorithm (sequential, directed) for rational/mpmath; both are public.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from . import directed as D
from . import function_endpoints as FE
from . import interval_kernels as IK
from . import interval_affine as IA
from . import grid_kernels as GK
from . import function_intervals as FI
from .arrayshape import ArrayShapeOps
from .base import Context, check_broadcast
from .errors import ContextError
from .f64_matmul import product as _product
from .formats import Format, binary64
from .functions import FUNCTIONS
from .values import Interval  # also importable from here, as before

_TWO_PI_SAFE = 7.0        # an interval at least this wide (> 2 pi) covers a whole period
_HUGE_PHASE = 2.0 ** 40   # beyond this, extrema are located by MPFR argument reduction


def _obj(r) -> np.ndarray:
    """numpy returns bare objects for 0-d object results; keep values as ndarrays."""
    if isinstance(r, np.ndarray):
        return r
    out = np.empty((), dtype=object)
    out[()] = r
    return out


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
    narrower binary format), rounded outward by :mod:`scalars.directed`."""

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


class _ShapeHelper(ArrayShapeOps):
    """Shape operations on one endpoint array, with the interval context's name in errors."""

    def __init__(self, name):
        self.name = name


# ================================================================== the context
class IntervalContext(Context):
    """Intervals over a base context; see the module docstring for the guarantees."""

    kind = "interval"
    is_interval = True
    reduction = "sequential"

    def __init__(self, base_name: str, resolve):
        """``resolve(name)`` returns the context called ``name`` (the registry's ``get``,
        passed in so that this module does not import the registry)."""
        base_name = base_name.strip()
        self.base_name = base_name
        self._resolve = resolve
        self.name = f"interval:{base_name}"
        self._base = None
        if base_name == "float64":
            self._base = resolve("float64")
            self.ends = _FloatEnds(binary64)
            self.fmt = None
            self.matmul_algorithm = "midpoint-radius"
            self.correctly_rounded = frozenset(FUNCTIONS) | frozenset({
                "add", "sub", "mul", "div", "sqrt", "square", "neg", "abs", "maximum",
                "minimum", "sum"})
            self.description = ("intervals with float64 endpoints: + - * / sqrt and the "
                                "functions exactly directed (EFTs; long double fast path, "
                                "MPFR near rounding boundaries); matmul midpoint-radius")
        elif base_name == "rational":
            self._base = resolve("rational")
            self.ends = _RationalEnds(self._base)
            self.fmt = None
            self.exact = True
            self.matmul_algorithm = "endpoint"
            self.correctly_rounded = frozenset({"add", "sub", "mul", "div", "square", "neg",
                                                "abs", "maximum", "minimum", "sum", "matmul"})
            self.description = ("intervals with exact rational endpoints; functions only at "
                                "rational points; no infinite endpoints")
        elif base_name.startswith("mpmath:"):
            self._base = resolve(base_name)
            self.ends = _MpmathEnds(self._base)
            self.fmt = None
            self.matmul_algorithm = "endpoint"
            self.correctly_rounded = frozenset({"add", "sub", "mul", "div", "sqrt", "square",
                                                "neg", "abs", "maximum", "minimum", "sum"})
            self.description = (f"intervals with {base_name} endpoints: + - * / sqrt "
                                f"directed by mpmath; functions widened by "
                                f"2^-(PREC+{_MpmathEnds.WIDEN})")
        else:
            fmt = self._binary_format(base_name)
            self.fmt = fmt
            self.ends = _FloatEnds(fmt)
            self.matmul_algorithm = "midpoint-radius"
            self.correctly_rounded = frozenset(FUNCTIONS) | frozenset({
                "add", "sub", "mul", "div", "sqrt", "square", "neg", "abs", "maximum",
                "minimum", "sum"})
            self.description = (f"intervals with {base_name} endpoints: every endpoint "
                                f"correctly rounded down/up (EFTs, MPFR fallback); matmul "
                                f"midpoint-radius")
        self._shape_ops = _ShapeHelper(self.name)

    def _binary_format(self, base_name: str):
        """The Format of a binary base; a clear error for anything else."""
        ctx = None
        try:
            ctx = self._resolve(base_name)
        except ContextError:
            ctx = None
        if ctx is not None:
            probe = None
            try:
                probe = ctx.convert(0.5)
            except Exception:  # noqa: BLE001 - any failure means "not a float64-valued base"
                probe = None
            if (ctx.is_interval or ctx.is_dual or ctx.fmt is None or ctx.exact
                    or not isinstance(probe, np.ndarray)
                    or probe.dtype not in (np.float64, np.float32)):
                raise ContextError(
                    f"context {self.name}: base {base_name!r} is not supported; an interval "
                    f"base must be float64, a binary format (binary32, bfloat16, "
                    f"binary(E,M), ...), rational or mpmath:PREC")
            self._base = ctx
            return ctx.fmt
        try:
            from . import formats
            return formats.get(base_name)
        except Exception as exc:  # formats raises its own error type for unknown names
            raise ContextError(
                f"unknown interval base {base_name!r} in {self.name!r}: use float64, a "
                f"binary format (binary32, bfloat16, binary16, e4m3, binary(E,M), ...), "
                f"rational or mpmath:PREC ({exc})") from None

    # ------------------------------------------------------- declared capabilities
    @property
    def endpoint_kind(self) -> str:
        """How endpoints are stored: ``"float"`` (float64 arrays on a binary grid),
        ``"rational"`` (gmpy2 mpq) or ``"mpmath"`` (mpf)."""
        return self.ends.kind

    @property
    def endpoint_format(self):
        """The :class:`Format` grid of float endpoints (binary64 for float64), else None."""
        return self.ends.grid if self.ends.kind == "float" else None

    @property
    def float64_endpoints(self) -> bool:
        """Endpoints are hardware float64 (base float64): an outward-rounded float64 pair
        is already a value of this context."""
        return self.ends.kind == "float" and self.fmt is None

    def supports(self, op: str) -> bool:
        """less/argmax never; functions over rational endpoints only at rational points."""
        if op in ("less", "argmax"):
            return False
        if self.ends.kind == "rational" and (op == "sqrt" or op in FUNCTIONS):
            return False
        return super().supports(op)

    @property
    def base(self):
        """The base context (resolved lazily for binary formats)."""
        if self._base is None:
            self._base = self._resolve(self.base_name)
        return self._base

    def properties(self) -> dict:
        p = super().properties()
        p["base"] = self.base_name
        p["matmul"] = self.matmul_algorithm
        if self.fmt is None:
            p["format"] = self.base_name
        return p

    # ------------------------------------------------------------- value plumbing
    def _box(self, lo, hi) -> Interval:
        """Build a result; a NaN in either endpoint becomes the whole line."""
        E = self.ends
        lo, hi = E.wrap(lo), E.wrap(hi)
        if E.kind == "float":
            # min/max propagate NaN: one reduction per endpoint array (one when lo is hi)
            # instead of two isnan masks; the mask is built only when a NaN is present
            if lo.size == 0 or not (np.isnan(lo.min()) or (hi is not lo and np.isnan(hi.max()))):
                return Interval(lo, hi)
        if E.kind != "rational":
            bad = E.isnan(lo) | E.isnan(hi)
            if bad.any():
                lo = np.where(bad, E.full((), -math.inf), lo)
                hi = np.where(bad, E.full((), math.inf), hi)
                lo, hi = E.wrap(lo), E.wrap(hi)
        return Interval(lo, hi)

    def _whole(self, op: str, mask, lo, hi):
        """Set the whole line where ``mask``; rational endpoints cannot, so raise."""
        mask = np.asarray(mask, dtype=bool)
        if not mask.any():
            return lo, hi
        E = self.ends
        if E.kind == "rational":
            raise ContextError(f"context {self.name}: {op}: the result is unbounded "
                               f"(interval:rational has no infinite endpoints)")
        lo = np.where(mask, E.full((), -math.inf), lo)
        hi = np.where(mask, E.full((), math.inf), hi)
        return E.wrap(lo), E.wrap(hi)

    def _iv(self, v, op: str) -> Interval:
        """An operand as an Interval of this context.

        Point values (arrays, numbers, strings) are accepted and converted to their
        tightest enclosure; intervals with endpoints of another kind are re-rounded
        outward.  Duals are refused.
        """
        if isinstance(v, Interval):
            if self.ends.ok(v.lo) and self.ends.ok(v.hi):
                return v
            return self.make(v.lo, v.hi)
        if hasattr(v, "primal") and hasattr(v, "tangent"):
            raise ContextError(f"context {self.name}: {op}: got a dual value; interval "
                               f"contexts take Interval values (use convert)")
        return self.convert(v)

    def _pair(self, a, b, op):
        a = self._iv(a, op); b = self._iv(b, op)
        shape = check_broadcast(self, op, a.shape, b.shape)
        return a, b, shape

    @staticmethod
    def _bcast(shape, *xs):
        return [np.broadcast_to(x, shape) for x in xs]

    def _coarse(self) -> bool:
        """Float endpoints on a binary grid coarser than float64 (scalars.grid_kernels)."""
        return self.ends.kind == "float" and not self.ends.grid.is_binary64

    def _dual_round(self, fn, los, his):
        """Apply a directed op to stacked operands: RD of the ``los`` set, RU of ``his``.

        One vectorised call on both halves (the EFT cost is paid once).
        """
        args = [np.stack([np.asarray(l), np.asarray(h)]) for l, h in zip(los, his)]
        d, u = fn(*args)
        return self.ends.wrap(d[0]), self.ends.wrap(u[1])

    # ------------------------------------------------------------- conversion
    def make(self, lo, hi) -> Interval:
        """The interval [lo, hi]: lo rounded down and hi rounded up into the base format.

        Raises when lo > hi somewhere (naming the first such pair); NaN -> whole line.
        """
        lo_d, _ = self.ends.point(lo)
        _, hi_u = self.ends.point(hi)
        shape = check_broadcast(self, "make", np.shape(lo_d), np.shape(hi_u))
        lo_d = self.ends.wrap(np.broadcast_to(lo_d, shape).copy())
        hi_u = self.ends.wrap(np.broadcast_to(hi_u, shape).copy())
        box = self._box(lo_d, hi_u)
        bad = np.asarray(np.greater(box.lo, box.hi), dtype=bool)
        if bad.any():
            i = tuple(int(k) for k in np.argwhere(bad)[0])
            raise ContextError(f"context {self.name}: make: lower end {box.lo[i]} exceeds "
                               f"upper end {box.hi[i]} at index {list(i)}")
        return box

    def convert(self, x: Any) -> Interval:
        """A point value -> its tightest enclosure [RD x, RU x] (from the exact value of
        x: decimal strings and fractions are not rounded first); an Interval is re-rounded
        outward into this base."""
        if isinstance(x, Interval):
            return self.make(x.lo, x.hi)
        if hasattr(x, "primal") and hasattr(x, "tangent"):
            raise ContextError(f"context {self.name}: convert: got a dual value; convert "
                               f"its primal explicitly")
        if isinstance(x, np.ndarray) and x.dtype.kind == "c" or isinstance(x, complex):
            raise ContextError(f"context {self.name}: convert: complex values have no "
                               f"interval enclosure here")
        if self.ends.kind == "float" and self.ends.grid.is_binary64:
            w0 = IA.point_snapshot(x)     # a cached dense-layer weight: no NaN scan
            if w0 is not None:
                return Interval(w0, w0)
        try:
            lo, hi = self.ends.point(x)
        except ContextError as exc:
            raise ContextError(f"context {self.name}: convert: {exc}") from None
        return self._box(lo, hi)

    def to_float64(self, v) -> Interval:
        """An Interval of float64 arrays enclosing v (lo rounded down, hi rounded up)."""
        v = self._iv(v, "to_float64")
        return Interval(self.ends.to_f64(v.lo, "down"), self.ends.to_f64(v.hi, "up"))

    def width(self, v):
        """Upper bound of hi - lo in the base context (exact for rational)."""
        v = self._iv(v, "width")
        return self.ends.sub(v.hi, v.lo)[1]

    def midpoint(self, v) -> np.ndarray:
        """A float64 point inside every interval (nearest float64 to the midpoint)."""
        f = self.to_float64(v)
        with np.errstate(all="ignore"):
            m = f.lo * 0.5 + f.hi * 0.5
        return np.clip(np.where(np.isfinite(m), m, np.where(np.isfinite(f.lo), f.lo, f.hi)),
                       f.lo, f.hi)

    def contains(self, v, x) -> np.ndarray:
        """Elementwise lo <= x <= hi for a point value x (exact comparison)."""
        v = self._iv(v, "contains")
        p = self.convert(x)
        return (np.asarray(np.less_equal(v.lo, p.lo), dtype=bool)
                & np.asarray(np.greater_equal(v.hi, p.hi), dtype=bool))

    def format(self, v, digits: int = 6) -> str:
        v = self._iv(v, "format")
        lo = ", ".join(self.ends.text(v.lo, int(digits)))
        hi = ", ".join(self.ends.text(v.hi, int(digits)))
        return f"[{lo}] .. [{hi}]"

    def zeros(self, shape): return self._box(self.ends.full(shape, 0), self.ends.full(shape, 0))
    def ones(self, shape): return self._box(self.ends.full(shape, 1), self.ends.full(shape, 1))

    def full(self, shape, value):
        p = self.convert(value)
        if p.shape != ():
            raise ContextError(f"context {self.name}: full: fill value must be a scalar, got "
                               f"shape {list(p.shape)}")
        return Interval(self.ends.wrap(np.broadcast_to(p.lo, tuple(shape)).copy()),
                        self.ends.wrap(np.broadcast_to(p.hi, tuple(shape)).copy()))

    # --------------------------------------------------------------- arithmetic
    def add(self, a, b):
        a, b, shape = self._pair(a, b, "add")
        if self.ends.kind == "float" and self.ends.grid.is_binary64:
            # one fused compiled pass for both endpoints (the bias add of a linear layer)
            r = D.add_pair_dir(a.lo, a.hi, b.lo, b.hi, shape)
            if r is not None:
                lo, hi, nan = r
                # the kernel reports NaN (inf + -inf): only then the whole-line pass
                return self._box(lo, hi) if nan else Interval(lo, hi)
        if self._coarse():                  # compiled, same roundings as add_dir
            r = GK.add_grid(a.lo, a.hi, b.lo, b.hi, shape, self.ends.grid)
            if r is not None:
                return self._box(*r)
        alo, blo, ahi, bhi = self._bcast(shape, a.lo, b.lo, a.hi, b.hi)
        lo, hi = self._dual_round(self.ends.add, [alo, blo], [ahi, bhi])
        return self._box(lo, hi)

    def sub(self, a, b):
        a, b, shape = self._pair(a, b, "sub")
        if self.ends.kind == "float" and self.ends.grid.is_binary64:
            # a - b = a + (-b) exactly (IEEE subtraction adds the negation): the fused
            # float64 addition pass, as add
            r = D.add_pair_dir(a.lo, a.hi, np.negative(b.hi), np.negative(b.lo), shape)
            if r is not None:
                lo, hi, nan = r
                return self._box(lo, hi) if nan else Interval(lo, hi)
        if self.ends.kind == "float":       # any float grid, binary64 included
            r = GK.add_grid(a.lo, a.hi, b.lo, b.hi, shape, self.ends.grid, neg=True)
            if r is not None:
                return self._box(*r)
        alo, bhi, ahi, blo = self._bcast(shape, a.lo, b.hi, a.hi, b.lo)
        lo, hi = self._dual_round(self.ends.sub, [alo, bhi], [ahi, blo])
        return self._box(lo, hi)

    def neg(self, a):
        a = self._iv(a, "neg")
        return Interval(self.ends.neg(a.hi), self.ends.neg(a.lo))

    def _products(self, a, b, shape, fn):
        """min of RD and max of RU over the four endpoint combinations of fn(a, b)."""
        E = self.ends
        xs = [a.lo, a.lo, a.hi, a.hi]
        ys = [b.lo, b.hi, b.lo, b.hi]
        X = np.stack([np.broadcast_to(x, shape) for x in xs])
        Y = np.stack([np.broadcast_to(y, shape) for y in ys])
        d, u = fn(X, Y)
        d, u = E.wrap(d), E.wrap(u)
        if fn == E.mul and E.kind != "rational":
            # 0 * inf: the zero is attained exactly, the infinity is only a bound.
            zero = E.is_zero(X) | E.is_zero(Y)
            if zero.any():
                z = E.full((), 0)
                d = E.wrap(np.where(zero, z, d)); u = E.wrap(np.where(zero, z, u))
        nan = E.isnan(d) | E.isnan(u)
        lo = _obj(np.min(d, axis=0)) if E.kind != "float" else np.min(d, axis=0)
        hi = _obj(np.max(u, axis=0)) if E.kind != "float" else np.max(u, axis=0)
        if E.kind != "rational":
            lo, hi = self._whole("mul", nan.any(axis=0), lo, hi)
        return lo, hi

    def mul(self, a, b):
        a, b, shape = self._pair(a, b, "mul")
        if self.ends.kind == "float":       # any float grid, binary64 included
            r = GK.mul_grid(a.lo, a.hi, b.lo, b.hi, shape, self.ends.grid)
            if r is not None:
                return self._box(*r)
        lo, hi = self._products(a, b, shape, self.ends.mul)
        return self._box(lo, hi)

    def div(self, a, b):
        a, b, shape = self._pair(a, b, "div")
        E = self.ends
        if E.kind == "float" and E.grid.is_binary64:    # compiled two-quotient pass
            fast = IK.div_f64(a.lo, a.hi, b.lo, b.hi, shape)
            if fast is not None:
                return self._box(*fast)
        if self._coarse():
            fast = GK.div_grid(a.lo, a.hi, b.lo, b.hi, shape, E.grid)
            if fast is not None:
                return self._box(*fast)
        blo, bhi = (E.wrap(np.broadcast_to(t, shape)) for t in (b.lo, b.hi))
        straddle = (np.asarray(np.less_equal(blo, 0), dtype=bool)
                    & np.asarray(np.greater_equal(bhi, 0), dtype=bool))
        if straddle.any():
            if E.kind == "rational":
                i = tuple(int(k) for k in np.argwhere(straddle)[0])
                raise ContextError(
                    f"context {self.name}: div: divisor interval [{blo[i]}, {bhi[i]}] at "
                    f"index {list(i)} contains 0; the quotient is unbounded and "
                    f"interval:rational has no infinite endpoints")
            one = E.full((), 1)
            blo = E.wrap(np.where(straddle, one, blo)); bhi = E.wrap(np.where(straddle, one, bhi))
        lo, hi = self._products(a, Interval(blo, bhi), shape, E.div)
        lo, hi = self._whole("div", straddle, lo, hi)
        return self._box(lo, hi)

    def fma(self, a, b, c):
        """a*b + c as an outward-rounded product followed by an outward-rounded sum (the
        enclosure of the exact a*b + c; may be one rounding wider than a fused op)."""
        return self.add(self.mul(a, b), c)

    def _check_domain(self, op, a):
        """Raise when an interval reaches below 0 (sqrt) / is not positive (log)."""
        bad = np.asarray(np.less(a.lo, 0), dtype=bool)
        if bad.any():
            i = tuple(int(k) for k in np.argwhere(bad)[0])
            raise ContextError(
                f"context {self.name}: {op}: interval [{a.lo[i]}, {a.hi[i]}] at index "
                f"{list(i)} contains negative values, where {op} is undefined")

    def sqrt(self, a):
        a = self._iv(a, "sqrt")
        self._check_domain("sqrt", a)
        if self.ends.kind == "float" and self.ends.grid.is_binary64:
            fast = IK.sqrt_f64(a.lo, a.hi)          # compiled, exactly directed
            if fast is not None:
                return self._box(*fast)
        if self._coarse():
            fast = GK.sqrt_grid(a.lo, a.hi, self.ends.grid)
            if fast is not None:
                return self._box(*fast)
        lo, hi = self._dual_round(self.ends.sqrt, [a.lo], [a.hi])
        return self._box(lo, hi)

    def square(self, a):
        """Tight square: [min^2, max^2] of |x|, with 0 as the lower end across 0."""
        a = self._iv(a, "square")
        E = self.ends
        pos = np.asarray(np.greater_equal(a.lo, 0), dtype=bool)
        neg = np.asarray(np.less_equal(a.hi, 0), dtype=bool) & ~pos
        small = E.wrap(np.where(pos, a.lo, np.where(neg, E.neg(a.hi), E.full((), 0))))
        big = E.wrap(np.where(pos, a.hi, np.where(neg, E.neg(a.lo),
                                                  np.maximum(E.neg(a.lo), a.hi))))
        lo, hi = self._dual_round(E.mul, [small, small], [big, big])
        return self._box(lo, hi)

    def abs(self, a):
        a = self._iv(a, "abs")
        E = self.ends
        pos = np.asarray(np.greater_equal(a.lo, 0), dtype=bool)
        neg = np.asarray(np.less_equal(a.hi, 0), dtype=bool) & ~pos
        lo = np.where(pos, a.lo, np.where(neg, E.neg(a.hi), E.full((), 0)))
        hi = np.where(pos, a.hi, np.where(neg, E.neg(a.lo), np.maximum(E.neg(a.lo), a.hi)))
        return self._box(lo, hi)

    def _lattice(self, fn, a, b, op):
        """Endpointwise max/min (exact); float endpoints go into recycled result arrays
        (see directed.recycled_empty: a ReLU layer's outputs are large)."""
        a, b, shape = self._pair(a, b, op)
        if self.ends.kind == "float":
            lo = fn(a.lo, b.lo, out=D.recycled_empty(shape))
            hi = fn(a.hi, b.hi, out=D.recycled_empty(shape))
            return self._box(lo, hi)
        return self._box(fn(a.lo, b.lo), fn(a.hi, b.hi))

    def maximum(self, a, b):
        if self.ends.kind == "float" and isinstance(a, Interval) and isinstance(b, Interval):
            r = _relu_fast(a, b)        # max(x, 0) of a large float box: one fused pass
            if r is not None:
                return self._box(r[0], r[1]) if r[2] else Interval(r[0], r[1])
        return self._lattice(np.maximum, a, b, "maximum")

    def minimum(self, a, b):
        return self._lattice(np.minimum, a, b, "minimum")

    # ----------------------------------------------------------------- functions
    def _function(self, fn, a):
        """exp, log, ... (scalars.functions): the entry's shape decides the endpoints --
        monotone: f of each end (rounded down / up); periodic: the ends plus the extreme
        values wherever an extremum may lie inside; a domain end is raised on or, for an
        open end touched by the interval, replaced by f's limit there."""
        a = self._iv(a, fn.name)
        if fn.pieces:     # exp2 ... lgamma: the generic rule (scalars.function_intervals)
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
            # one compiled pass: RD f(lo), RU f(hi) (scalars.f64_endpoint_kernels)
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
        """pow, hypot, fmax, fmin, copysign (scalars.functions2): the rules of
        scalars.function_intervals; atan2, fmod, remainder raise a ContextError."""
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
        # from the exact endpoints (scalars.function_endpoints.phase_inside), so that an
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

    def less(self, a, b):
        raise ContextError(f"context {self.name}: less: comparison of intervals is not a "
                           f"boolean (overlapping intervals are neither less nor not less)")

    def argmax(self, a, axis):
        raise ContextError(f"context {self.name}: argmax: the position of the maximum is "
                           f"not determined by intervals")

    def where(self, cond, a, b):
        if isinstance(cond, Interval):
            raise ContextError(f"context {self.name}: where: the condition must be a boolean "
                               f"array, got an Interval")
        cond = np.asarray(cond)
        if cond.dtype != bool:
            raise ContextError(f"context {self.name}: where: the condition must be a boolean "
                               f"array, got dtype {cond.dtype}")
        a, b, shape = self._pair(a, b, "where")
        check_broadcast(self, "where", cond.shape, shape)
        return self._box(np.where(cond, a.lo, b.lo), np.where(cond, a.hi, b.hi))

    # ---------------------------------------------------------------- reductions
    def _axes(self, shape, axis, op):
        nd = len(shape)
        if axis is None:
            return tuple(range(nd))
        if isinstance(axis, (int, np.integer)):
            axis = (int(axis),)
        out = []
        for ax in axis:
            ax = int(ax)
            if not -nd <= ax < nd:
                raise ContextError(f"context {self.name}: {op}: axis {ax} out of range for "
                                   f"shape {list(shape)}")
            out.append(ax % nd)
        if len(set(out)) != len(out):
            raise ContextError(f"context {self.name}: {op}: repeated axis in {list(axis)}")
        return tuple(sorted(out))

    def _reduce_layout(self, x, axes, op):
        """Move the reduced axes last and merge them: (..., n)."""
        nd = x.ndim
        keep = [i for i in range(nd) if i not in axes]
        y = np.transpose(x, keep + list(axes))
        kshape = tuple(x.shape[i] for i in keep)
        n = int(np.prod([x.shape[i] for i in axes], dtype=np.int64))
        return y.reshape(kshape + (n,)), kshape

    def _keepdims(self, r, shape, axes):
        out = [1 if i in axes else s for i, s in enumerate(shape)]
        return r.reshape(out)

    def sum(self, a, axis=None, keepdims: bool = False):
        """Sequential sum along the axes, left to right, each addition rounded outward."""
        a = self._iv(a, "sum")
        E = self.ends
        lo_in, hi_in = np.asarray(a.lo), np.asarray(a.hi)
        if lo_in.ndim == 0:
            return Interval(lo_in, hi_in)
        axes = self._axes(lo_in.shape, axis, "sum")
        lo2, kshape = self._reduce_layout(lo_in, axes, "sum")
        hi2, _ = self._reduce_layout(hi_in, axes, "sum")
        n = lo2.shape[-1]
        if n == 0:
            lo = E.full(kshape, 0); hi = E.full(kshape, 0)
        elif E.kind == "rational":
            lo = _obj(np.sum(lo2, axis=-1)); hi = _obj(np.sum(hi2, axis=-1))
        else:
            fast = (IK.sum_f64(lo2, hi2) if E.kind == "float" and E.grid.is_binary64
                    else GK.sum_grid(lo2, hi2, E.grid) if self._coarse()
                    else None)                    # compiled, same order and roundings
            if fast is not None:
                lo, hi = fast
            else:
                lo, hi = E.wrap(lo2[..., 0].copy()), E.wrap(hi2[..., 0].copy())
                for k in range(1, n):
                    lo, hi = self._dual_round(E.add, [lo, lo2[..., k]],
                                              [hi, hi2[..., k]])
        if keepdims:
            lo = self._keepdims(E.wrap(lo), lo_in.shape, axes)
            hi = self._keepdims(E.wrap(hi), hi_in.shape, axes)
        return self._box(lo, hi)

    def amax(self, a, axis=None, keepdims: bool = False):
        a = self._iv(a, "amax")
        lo_in, hi_in = np.asarray(a.lo), np.asarray(a.hi)
        if lo_in.ndim == 0:
            return Interval(lo_in, hi_in)
        axes = self._axes(lo_in.shape, axis, "amax")
        lo2, _ = self._reduce_layout(lo_in, axes, "amax")
        hi2, _ = self._reduce_layout(hi_in, axes, "amax")
        if lo2.shape[-1] == 0:
            raise ContextError(f"context {self.name}: amax: reduction over an empty axis")
        lo = np.max(lo2, axis=-1); hi = np.max(hi2, axis=-1)
        if keepdims:
            lo = self._keepdims(self.ends.wrap(lo), lo_in.shape, axes)
            hi = self._keepdims(self.ends.wrap(hi), hi_in.shape, axes)
        return self._box(lo, hi)

    # -------------------------------------------------------------------- matmul
    def _matmul_shapes(self, a: Interval, b: Interval):
        sa, sb = a.shape, b.shape
        if len(sa) == 0 or len(sb) == 0:
            raise ContextError(f"context {self.name}: matmul: operands must have at least one "
                               f"axis, got shapes {list(sa)} and {list(sb)}")
        ka = sa[-1]
        kb = sb[0] if len(sb) == 1 else sb[-2]
        if ka != kb:
            raise ContextError(f"context {self.name}: matmul: shapes {list(sa)} and "
                               f"{list(sb)} do not contract ({ka} != {kb})")
        try:
            np.broadcast_shapes(sa[:-2], sb[:-2])
        except ValueError:
            raise ContextError(f"context {self.name}: matmul: batch shapes of {list(sa)} and "
                               f"{list(sb)} do not broadcast") from None
        return ka

    def matmul(self, a, b):
        a = self._iv(a, "matmul"); b = self._iv(b, "matmul")
        if self.matmul_algorithm == "midpoint-radius":
            if self.ends.grid.is_binary64 and _cheap_ld(a, b):
                r = self.matmul_midrad_ld(a, b)
                if r is not None:
                    return r
            return self.matmul_midrad(a, b)
        return self.matmul_endpoint(a, b)

    def affine(self, x, W, b, x_prep=None):
        """``x W^T + b`` (a dense layer): ``add(matmul(x, transpose(W)), b)``, the same
        endpoints bitwise; for float64 endpoints, a point ``W`` and a 2-d ``x`` in fused
        compiled passes with |W| cached per weight array (:mod:`scalars.interval_affine`).
        ``x_prep``: the third item of an :meth:`affine_relu` result whose relu value is
        ``x`` (its operand pass, already done); ignored for any other ``x`` (checked by
        identity: endpoint arrays are immutable by convention, as everywhere here)."""
        x = self._iv(x, "linear"); W = self._iv(W, "linear"); b = self._iv(b, "linear")
        if self.ends.kind == "float" and self.ends.grid.is_binary64 and W.lo is W.hi:
            r = IA.affine_midrad(x.lo, x.hi, W.lo, b.lo, b.hi, prep=_prep_of(x_prep, x))
            if r is not None:
                lo, hi, nan = r
                return self._box(lo, hi) if nan else Interval(lo, hi)
        return self.add(self.matmul(x, self.transpose(W)), b)

    def affine_relu(self, x, W, b, x_prep=None):
        """``(y, r, r_prep)``: ``y = affine(x, W, b)`` and, when the fused pass ran,
        ``r = maximum(y, 0)`` from the same pass (bitwise what ``maximum(y, zeros(()))``
        gives) with ``r_prep`` for a following ``affine(r, ...)``; else ``r`` and
        ``r_prep`` are None (the caller applies relu itself)."""
        x = self._iv(x, "linear"); W = self._iv(W, "linear"); b = self._iv(b, "linear")
        if self.ends.kind == "float" and self.ends.grid.is_binary64 and W.lo is W.hi:
            r = IA.affine_midrad(x.lo, x.hi, W.lo, b.lo, b.hi, relu=True,
                                 prep=_prep_of(x_prep, x))
            if r is not None:
                lo, hi, nan, rlo, rhi, prep = r
                if not nan:
                    rv = Interval(rlo, rhi)
                    return Interval(lo, hi), rv, (rv, prep)
                return self._box(lo, hi), None, None
            # the fused pass declined: what affine would run after it declines too
            return self.add(self.matmul(x, self.transpose(W)), b), None, None
        return self.affine(x, W, b), None, None

    def matmul_midrad_ld(self, a, b):
        """Midpoint-radius in long double (:mod:`scalars.dot_enclosure`): about one float64
        ulp of excess per endpoint instead of the a-priori n 2^-53 bound; float64 base and
        1-d/2-d finite operands only (else None).  ``matmul`` uses it for products of up
        to ``dot_enclosure.CHEAP_MACS`` multiply-adds."""
        from . import dot_enclosure
        a = self._iv(a, "matmul"); b = self._iv(b, "matmul")
        self._matmul_shapes(a, b)
        if not self.ends.grid.is_binary64 or a.lo.ndim > 2 or b.lo.ndim > 2:
            return None
        r = dot_enclosure.matmul_midrad_ld(a.lo, a.hi, b.lo, b.hi)
        return None if r is None else Interval(r[0], r[1])

    def matmul_endpoint(self, a, b):
        """Endpoint algorithm: for each k, min/max of the four directed products, added
        sequentially over k with outward rounding (exact for rational endpoints)."""
        a = self._iv(a, "matmul"); b = self._iv(b, "matmul")
        n = self._matmul_shapes(a, b)
        E = self.ends
        va, vb = a.shape[-1:] == a.shape, len(b.shape) == 1
        alo, ahi = (t[None, :] if va else t for t in (a.lo, a.hi))
        blo, bhi = (t[:, None] if vb else t for t in (b.lo, b.hi))
        # (..., m, n) x (..., n, p): terms (..., m, p) for each k
        out_shape = np.broadcast_shapes(alo.shape[:-2], blo.shape[:-2]) + (alo.shape[-2],
                                                                          blo.shape[-1])
        lo = hi = None
        for k in range(n):
            ta = Interval(alo[..., :, k:k + 1], ahi[..., :, k:k + 1])
            tb = Interval(blo[..., k:k + 1, :], bhi[..., k:k + 1, :])
            plo, phi = self._products(ta, tb, out_shape, E.mul)
            if lo is None:
                lo, hi = E.wrap(plo), E.wrap(phi)
            elif E.kind == "rational":
                lo, hi = _obj(np.add(lo, plo)), _obj(np.add(hi, phi))
            else:
                lo, hi = self._dual_round(E.add, [lo, plo], [hi, phi])
        if lo is None:
            lo = E.full(out_shape, 0); hi = E.full(out_shape, 0)
        if va:
            lo, hi = lo[..., 0, :], hi[..., 0, :]
        if vb:
            lo, hi = lo[..., 0], hi[..., 0]
        return self._box(E.wrap(lo), E.wrap(hi))

    def matmul_midrad(self, a, b):
        """Rump's midpoint-radius product with a rigorous bound on the float64 rounding.

        A in <mA, rA>, B in <mB, rB>.  The real product lies in
        <mA mB, |mA| rB + rA (|mB| + rB)>.  C = fl(mA @ mB) (``f64_matmul.product``: any
        order, fma or not) satisfies |C - mA mB| <= gamma_n |mA||mB| + NZ eta, with
        gamma_n = n u/(1 - n u), u = 2^-53, eta = 2^-1074 and NZ <= n the number of
        products (underflow).  So
            R  >=  (gamma_n |mA| + rA) (|mB| + rB) + |mA| rB + n eta
        bounds everything; it is evaluated with as few BLAS products as the operands
        allow: 1 when either side is a point matrix (the IBP case: interval activations
        times point weights), 2 otherwise.  All terms are non-negative, so the float64
        evaluation is at most a factor (1 - gamma_n)(1 - 2^-52)^4 below the exact value;
        the slack factor (1 + (n + 10) 2^-52) covers that, and (3n + 3) eta the
        underflows.  Radii of the operands are rounded up exactly: r = max(RU(hi - m),
        RU(m - lo)), the sign of each subtraction's error from TwoSum, one ulp up only
        where it was inexact (always one ulp where the EFT is not trusted).  [C - R, C + R] is rounded outward onto
        the base grid with exactly directed rounding.  Float/binary bases only;
        non-finite operands fall back to :meth:`matmul_endpoint`.
        """
        a = self._iv(a, "matmul"); b = self._iv(b, "matmul")
        n = self._matmul_shapes(a, b)
        E = self.ends
        if E.kind != "float":
            return self.matmul_endpoint(a, b)
        if a.lo.ndim <= 2 and b.lo.ndim <= 2:
            r = self._matmul_midrad_2d(a, b, n)
            if r is None:
                return self.matmul_endpoint(a, b)
            return r
        arrs = [a.lo] + ([] if a.hi is a.lo else [a.hi]) + [b.lo] + ([] if b.hi is b.lo else [b.hi])
        if not all(np.isfinite(t).all() for t in arrs):
            return self.matmul_endpoint(a, b)
        with np.errstate(all="ignore"):
            mA, rA = _mid_rad(a)
            mB, rB = _mid_rad(b)
            va, vb = mA.ndim == 1, mB.ndim == 1   # numpy's 1-d promotion, undone below
            if va:
                mA = mA[None, :]; rA = None if rA is None else rA[None, :]
            if vb:
                mB = mB[:, None]; rB = None if rB is None else rB[:, None]
            C = _product(mA, mB)
            u = 2.0 ** -53
            gamma = (n * u) / (1.0 - n * u) * (1.0 + 2.0 ** -50)
            aA, aB = np.abs(mA), np.abs(mB)
            if rB is None and rA is None:
                R = gamma * _product(aA, aB)
            elif rB is None:
                R = _product(gamma * aA + rA, aB)
            elif rA is None:
                R = _product(aA, gamma * aB + rB)
            else:
                R = _product(gamma * aA + rA, aB + rB) + _product(aA, rB)
            if not np.all(np.isfinite(R)):
                return self.matmul_endpoint(a, b)
            R = R * (1.0 + (n + 10) * 2.0 ** -52)
            # underflow: only where some product can be non-zero (row of A x column of B)
            nzA = np.any((aA > 0) if rA is None else (aA + rA > 0), axis=-1, keepdims=True)
            nzB = np.any((aB > 0) if rB is None else (aB + rB > 0), axis=-2, keepdims=True)
            R = R + np.where(nzA & nzB, (3 * n + 3) * 2.0 ** -1074, 0.0)
            if va:
                C, R = C[..., 0, :], R[..., 0, :]
            if vb:
                C, R = C[..., 0], R[..., 0]
            lo, hi = D.midrad_dir(C, R, E.grid)
        return self._box(lo, hi)

    def _matmul_midrad_2d(self, a, b, n):
        """:meth:`matmul_midrad` for 1-d/2-d operands with the same formulas, in compiled
        passes: one over each operand (midpoint, radius, |mid|, finiteness and the
        non-zero lines for the underflow term together) and one fused pass for the final
        radius and the directed endpoints.  None when an operand or the radius is not
        finite (the caller uses the endpoint algorithm)."""
        E = self.ends
        u = 2.0 ** -53
        gamma = (n * u) / (1.0 - n * u) * (1.0 + 2.0 ** -50)
        va, vb = a.lo.ndim == 1, b.lo.ndim == 1   # numpy's 1-d promotion, undone below
        alo, ahi = (t[None, :] if va else t for t in (a.lo, a.hi))
        blo, bhi = (t[:, None] if vb else t for t in (b.lo, b.hi))
        with np.errstate(all="ignore"):
            # A side: contraction over axis 1; B side: over axis 0
            mA, rA, aA, gA, nzA, fin = _midrad_side(a.lo is a.hi, alo, ahi, gamma, 1, "mm.A")
            if not fin:
                return None
            mB, rB, aB, gB, nzB, fin = _midrad_side(b.lo is b.hi, blo, bhi, gamma, 0, "mm.B")
            if not fin:
                return None
            # C and R are temporaries of this call: reused work arrays (see D.scratch)
            cshape = (mA.shape[0], mB.shape[1])
            C = _product(mA, mB, out=D.scratch("mm.C", cshape))
            R = D.scratch("mm.R", cshape)
            if rB is None and rA is None:
                np.multiply(gamma, _product(aA, aB, out=R), out=R)
            elif rB is None:
                _product(gA, aB, out=R)          # gA = gamma |mA| + rA
            elif rA is None:
                _product(aA, gB, out=R)          # gB = gamma |mB| + rB
            else:
                R = _product(gA, aB + rB) + _product(aA, rB)
            r = D.midrad2d_dir(C, R, 1.0 + (n + 10) * 2.0 ** -52, (3 * n + 3) * 2.0 ** -1074,
                               nzA, nzB, E.grid)
        if r is None:
            return None
        lo, hi = r
        if va:
            lo, hi = lo[0, :], hi[0, :]
        if vb:
            lo, hi = lo[..., 0], hi[..., 0]
        return Interval(lo, hi)   # finite C and R: no NaN can come out (midrad2d_dir)

    # ------------------------------------------------------------ shape operations
    def shape(self, v) -> tuple:
        return self._iv(v, "shape").shape

    def _both(self, fn, a, op):
        a = self._iv(a, op)
        if a.lo is a.hi:   # a point value stays one array (matmul spots it by identity)
            v = self.ends.wrap(fn(a.lo))
            return Interval(v, v)
        return Interval(self.ends.wrap(fn(a.lo)), self.ends.wrap(fn(a.hi)))

    def reshape(self, a, shape):
        return self._both(lambda x: self._shape_ops.reshape(x, shape), a, "reshape")

    def transpose(self, a, axes=None):
        return self._both(lambda x: self._shape_ops.transpose(x, axes), a, "transpose")

    def take(self, a, indices, axis: int):
        return self._both(lambda x: self._shape_ops.take(x, indices, axis), a, "take")

    def broadcast_to(self, a, shape):
        return self._both(lambda x: self._shape_ops.broadcast_to(x, shape), a, "broadcast_to")

    def concat(self, xs, axis: int = 0):
        xs = [self._iv(x, "concat") for x in xs]
        return Interval(self.ends.wrap(self._shape_ops.concat([x.lo for x in xs], axis)),
                        self.ends.wrap(self._shape_ops.concat([x.hi for x in xs], axis)))

    def stack(self, xs, axis: int = 0):
        xs = [self._iv(x, "stack") for x in xs]
        return Interval(self.ends.wrap(self._shape_ops.stack([x.lo for x in xs], axis)),
                        self.ends.wrap(self._shape_ops.stack([x.hi for x in xs], axis)))


def _prep_of(token, x):
    """The operand pass in an ``affine_relu`` token when it belongs to ``x`` itself."""
    if token is None or token[0] is not x:
        return None
    return token[1]


def _relu_fast(a: Interval, b: Interval):
    """(max(a.lo, 0), max(a.hi, 0), any NaN) in one pass when ``b`` is the point 0 and
    ``a`` a large float64 box (relu's rule); else None."""
    lo, hi = a.lo, a.hi
    if (np.shape(b.lo) != () or np.shape(b.hi) != () or b.lo != 0 or b.hi != 0
            or np.signbit(b.lo) or np.signbit(b.hi)
            or not isinstance(lo, np.ndarray) or not isinstance(hi, np.ndarray)
            or lo.dtype != np.float64 or hi.dtype != np.float64 or lo.shape != hi.shape
            or lo.size < (1 << 14)):
        return None
    return IA.relu_pair(lo, hi)


def _cheap_ld(a, b) -> bool:
    """A 1-d/2-d product small enough for the long double midpoint-radius product."""
    from .dot_enclosure import AVAILABLE, CHEAP_MACS
    sa, sb = np.shape(a.lo), np.shape(b.lo)
    if not AVAILABLE or len(sa) > 2 or len(sb) > 2 or not sa or not sb:
        return False
    m = sa[0] if len(sa) == 2 else 1
    p = sb[1] if len(sb) == 2 else 1
    return m * sa[-1] * p <= CHEAP_MACS


def _midrad_side(point: bool, lo, hi, gamma: float, axis: int, key: str):
    """(mid, radius or None, |mid|, gamma|mid| + r or None, nonzero mask, all finite) of one
    matmul operand, contracted over ``axis``; a point operand has no radius."""
    if point:
        a, nz, fin = D.abs_scan(lo, axis, key=key)
        return lo, None, a, None, nz, fin
    res = IA.midrad_prep_fast(lo, hi, gamma, axis, key)      # same values, fewer passes
    m, r, a, g, nz, fin, eq = res if res is not None else D.midrad_prep(lo, hi, gamma, axis,
                                                                         key=key)
    if eq:
        # lo == hi: a point after all; |lo| itself (the computed midpoint of a subnormal
        # can differ from lo)
        a = np.abs(lo)
        return lo, None, a, None, np.any(a > 0, axis=axis), fin
    return m, r, a, g, nz, fin


def _mid_rad(v: Interval):
    """(midpoint, radius rounded up) of float endpoints; radius None for a point value.

    The radius is max(RU(hi - m), RU(m - lo)) with exactly directed rounding (see
    directed.midrad_prep), so [m - r, m + r] contains [lo, hi]; the same values as the
    2-d fast path of matmul_midrad."""
    lo, hi = v.lo, v.hi
    if lo is hi:
        return lo, None
    shape = np.shape(lo)
    m, r, _, _, _, _, eq = D.midrad_prep(np.reshape(lo, (1, -1)), np.reshape(hi, (1, -1)), 0.0)
    if eq:
        return lo, None
    return m.reshape(shape), r.reshape(shape)


# ---------------------------------------------------------------------- registry
# Registration data, read by scalars.registry (this module does not import the registry).
CONTEXT_NAMES = {f"interval:{b}": (lambda get, b=b: IntervalContext(b, get))
                 for b in ("float64", "binary32", "bfloat16", "binary16", "rational",
                           "mpmath:200")}
CONTEXT_FAMILIES = ((r"interval:(.+)", lambda m, get: IntervalContext(m.group(1), get),
                     "interval:BASE"),)
