"""Interval contexts ``interval:BASE``: sound enclosures with exactly directed endpoints.

A value is an :class:`Interval` ``(lo, hi)`` of two base-context arrays.  Every operation
returns an interval that contains the exact real result of the operation at *every* point
of its operand intervals (the enclosure property IBP relies on).

Endpoints are rounded outward with *exact* directed rounding in the base format, not by a
blanket widening:

* ``float64`` and binary bases (binary32, bfloat16, binary16, e4m3, ...): ``+ - * / sqrt``
  through :mod:`scalars.kernels.directed` (float64 result + error-free transformation gives the
  exact sign of the error, then RD/RU onto the format's grid).  The endpoints of the
  functions of :mod:`scalars.functions` (exp, log, ...) are correctly rounded down/up for
  binary bases (fast float64 path + MPFR fallback, :mod:`scalars.kernels.function_endpoints`); for
  the ``float64`` base too (compiled double-double kernels for exp, log, tanh, sigmoid and
  softplus, :mod:`scalars.kernels.f64_endpoints`; a long double evaluation for the other
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

The class is assembled from three rooms: endpoint arithmetic per base
(:mod:`scalars.interval_ends`), the functions (:mod:`scalars.interval_functions`) and the
reductions, matmul and affine layers (:mod:`scalars.interval_linalg`); this module holds
the value plumbing, conversions, arithmetic, comparisons and shape operations.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .kernels import directed as D
from .kernels import interval_f64 as IK
from .kernels import interval_affine as IA
from .kernels import grid as GK
from .arrayshape import ArrayShapeOps
from .base import Context, check_broadcast, check_where_condition, object_result as _obj
from .errors import ContextError
from .formats import binary64
from .functions import FUNCTIONS
from .interval_ends import _FloatEnds, _MpmathEnds, _RationalEnds
from .interval_functions import IntervalFunctions
from . import interval_linalg as LA
from .interval_linalg import IntervalLinalg
from .values import Interval  # also importable from here, as before


class _ShapeHelper(ArrayShapeOps):
    """Shape operations on one endpoint array, with the interval context's name in errors."""

    def __init__(self, name):
        self.name = name


# ================================================================== the context
class IntervalContext(IntervalFunctions, IntervalLinalg, Context):
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

    def has_base(self, ctx) -> bool:
        """``ctx`` is this context's base (the point context whose runs the ``execution``
        guarantee speaks of), whatever name or alias either was asked for by."""
        return ctx is self.base or ctx.name == self.base.name

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
        """Float endpoints on a binary grid coarser than float64 (scalars.kernels.grid)."""
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
        E = self.ends
        small, big = self._abs_ends(self._iv(a, "square"))
        small, big = E.wrap(small), E.wrap(big)
        lo, hi = self._dual_round(E.mul, [small, small], [big, big])
        return self._box(lo, hi)

    def abs(self, a):
        return self._box(*self._abs_ends(self._iv(a, "abs")))

    def _abs_ends(self, a: Interval):
        """The ends of |x| over [lo, hi] (exact: negations and comparisons): [lo, hi] when
        lo >= 0, [-hi, -lo] when hi <= 0, else [0, max(-lo, hi)]."""
        E = self.ends
        pos = np.asarray(np.greater_equal(a.lo, 0), dtype=bool)
        neg = np.asarray(np.less_equal(a.hi, 0), dtype=bool) & ~pos
        lo = np.where(pos, a.lo, np.where(neg, E.neg(a.hi), E.full((), 0)))
        hi = np.where(pos, a.hi, np.where(neg, E.neg(a.lo), np.maximum(E.neg(a.lo), a.hi)))
        return lo, hi

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
            r = LA._relu_fast(a, b)     # max(x, 0) of a large float box: one fused pass
            if r is not None:
                return self._box(r[0], r[1]) if r[2] else Interval(r[0], r[1])
        return self._lattice(np.maximum, a, b, "maximum")

    def minimum(self, a, b):
        return self._lattice(np.minimum, a, b, "minimum")

    def less(self, a, b):
        raise ContextError(f"context {self.name}: less: comparison of intervals is not a "
                           f"boolean (overlapping intervals are neither less nor not less)")

    def argmax(self, a, axis):
        raise ContextError(f"context {self.name}: argmax: the position of the maximum is "
                           f"not determined by intervals")

    def where(self, cond, a, b):
        cond = check_where_condition(self, cond, (Interval,))
        a, b, shape = self._pair(a, b, "where")
        check_broadcast(self, "where", cond.shape, shape)
        return self._box(np.where(cond, a.lo, b.lo), np.where(cond, a.hi, b.hi))

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


# ---------------------------------------------------------------------- registry
# Registration data, read by scalars.registry (this module does not import the registry).
CONTEXT_NAMES = {f"interval:{b}": (lambda get, b=b: IntervalContext(b, get))
                 for b in ("float64", "binary32", "bfloat16", "binary16", "rational",
                           "mpmath:200")}
CONTEXT_FAMILIES = ((r"interval:(.+)", lambda m, get: IntervalContext(m.group(1), get),
                     "interval:BASE"),)
