"""Ball contexts ``ball:K``: a multi-float64 midpoint and a float64 radius that encloses
the exact real value, at the speed of float64 BLAS.

A value is a :class:`Ball`: ``mid`` holds ``c <= K`` float64 components (shape
``(c,) + shape``, the value being their exact sum: ``K`` components carry about ``53 K``
bits) and ``rad`` an upper bound of the distance to the exact real result (``None`` on a
converted float64 value: exact).  Every operation returns a ball holding the exact result
at every point of its operand balls.  Why a ball and not an interval: the rounding error
of a K-component midpoint is about ``2^-53K`` relative, so the radius starts ~2^-159 (K=3)
instead of ~2^-53, and its growth through a deep network (it grows by ``|W|`` per layer,
2^41 to 2^58 over mobilenet_v3_small / resnet18) still leaves it far below a float64
ulp: the correctly rounded float64 value, not only the binary32 one, is then proved.

How each op keeps the enclosure:

* ``add``/``sub``/``sum``: the exact sum of all components, rounded to K components by
  :func:`multifloat.renorm` (its error bound goes to the radius); radii add, rounded up.
* ``mul``: the component products split exactly (TwoProd: ``p + e = a b`` with an fma;
  a product below 2^-960 may lose its error term to underflow: 2^-1074 to the radius per
  such product), products of components whose orders add to K or more are bounded instead
  of kept; radius ``|a| r_b + |b| r_a + r_a r_b`` rounded up.
* ``div``: K steps of a multi-float long division (float64 quotient digit, exact residual
  ``r - q b`` by TwoProd and renorm); the final residual, the operands' radii and the
  renorm errors over a rounded-down lower bound of ``|b|`` give the radius.  A divisor
  ball that holds 0 is a ContextError.
* ``matmul``: with one point operand (a weight), the error-free BLAS product of
  :mod:`scalars.kernels.multifloat` (Ozaki splitting) and ``|W| r`` rounded up for the
  radius; otherwise (both balls, or a batched weight such as a grouped convolution's) the
  exact products summed by renorm, radius by a rounded-up nonnegative product.
* ``maximum``/``minimum``/``amax``/``abs``: the branch is taken where the balls decide it
  (outward float64 ends, then the exact difference of the midpoints for near-ties; equal
  balls -- one value twice in a pooling window -- are the result whichever is taken); a
  ball that straddles the kink becomes the hull, a float64 midpoint-radius ball.  ``heaviside``/``sign`` give the hull of their values at the ends.
  ``less`` and ``argmax`` answer where the balls decide and raise where they overlap:
  never a silent branch.
* ``sqrt`` and the functions of :mod:`scalars.functions` (exp, tanh, erf, sigmoid, ...):
  per entry in Arb (python-flint ``arb``, rigorous balls) at ``53 K + 32`` bits when the
  ball is tight (relative radius below 2^-45); a wider ball goes through
  ``interval:float64`` (exactly directed endpoints), since its radius, not the midpoint's
  precision, is what the result carries.  Functions Arb does not provide here (floor,
  ceil, ...) take the interval path too.
* Shape ops (reshape, transpose, take, concat, stack, broadcast_to) move the components
  and the radius alike and never round.

A non-finite input, an overflow or a radius that is no longer finite raises a
ContextError naming the op: a ball never holds a NaN.  ``to_float64`` is the float64
rounding of the midpoint (the components summed from the leading one).
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from .base import (BINARY_TRANSCENDENTAL, VOCABULARY, Context, check_broadcast,
                   check_where_condition, reduction_axes, to_fraction)
from .errors import ContextError
from .functions import FUNCTIONS
from .kernels import multifloat as MF
from .values import Ball, Dual, Interval

#: The precisions offered by name (components of float64 in the midpoint).
K_RANGE = range(2, 7)
DEFAULT_K = 3
#: Below this relative radius a function is evaluated per entry in Arb at 53 K + 32 bits;
#: above it through interval:float64 (the result is as wide as its operand anyway).
ARB_MAX_REL_RADIUS = 2.0 ** -45
#: |product| below this: TwoProd's error term may have underflowed (inexact by less than
#: one subnormal unit, 2^-1074), which the radius then carries.
_TINY_PRODUCT = 2.0 ** -960
_SUB = 2.0 ** -1074

# Arb's name for each function of scalars.functions it evaluates (a function missing here
# goes through interval:float64).
_ARB = {
    "exp": lambda x, A: x.exp(), "log": lambda x, A: x.log(), "tanh": lambda x, A: x.tanh(),
    "sigmoid": lambda x, A: 1 / (1 + (-x).exp()),
    "softplus": lambda x, A: (x.exp().log1p() if x < 0 else x + (-x).exp().log1p()),
    "sin": lambda x, A: x.sin(), "cos": lambda x, A: x.cos(), "erf": lambda x, A: x.erf(),
    "atan": lambda x, A: x.atan(), "exp2": lambda x, A: (x * A(2).log()).exp(),
    "expm1": lambda x, A: x.expm1(), "log10": lambda x, A: x.log() / A(10).log(),
    "log2": lambda x, A: x.log() / A(2).log(), "log1p": lambda x, A: x.log1p(),
    "cbrt": lambda x, A: (x.root(3) if x >= 0 else -((-x).root(3))),
    "tan": lambda x, A: x.tan(), "asin": lambda x, A: x.asin(), "acos": lambda x, A: x.acos(),
    "sinh": lambda x, A: x.sinh(), "cosh": lambda x, A: x.cosh(),
    "asinh": lambda x, A: x.asinh(), "acosh": lambda x, A: x.acosh(),
    "atanh": lambda x, A: x.atanh(), "erfc": lambda x, A: x.erfc(),
    "tgamma": lambda x, A: x.gamma(), "lgamma": lambda x, A: x.lgamma(),
    "digamma": lambda x, A: x.digamma(), "sqrt": lambda x, A: x.sqrt(),
}


# ------------------------------------------------------------------ rounded-up helpers
def _up(x, m: int = 1):
    """An upper bound of an exact nonnegative quantity whose float64 value ``x`` came from
    ``m`` round-to-nearest operations on nonnegative terms: ``(1+u)^m <= 1 + (m+2) 2^-52``
    and one ulp more for the multiplication; an exact 0 stays 0 (nonnegative terms only
    sum to 0 when every term is 0; products that underflow use :func:`_mul_up`)."""
    with np.errstate(over="ignore", invalid="ignore"):
        r = np.nextafter(x * (1.0 + (m + 2) * 2.0 ** -52), np.inf)
    return np.where(x == 0, 0.0, r)


def _mul_up(a, b):
    """Upper bound of ``a * b`` for nonnegative float64 arrays (a product that underflows
    to 0 is below 2^-1075: the next float up, 2^-1074, bounds it)."""
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        p = a * b
        r = np.nextafter(p * (1.0 + 2.0 ** -51), np.inf)
    return np.where((a == 0) | (b == 0), 0.0, r)


def _div_up(a, b):
    """Upper bound of ``a / b`` for ``a >= 0``, ``b > 0``."""
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        r = np.nextafter((a / b) * (1.0 + 2.0 ** -51), np.inf)
    return np.where(a == 0, 0.0, r)


def _add_up(*terms):
    """Upper bound of the sum of nonnegative float64 arrays (``None`` terms are 0)."""
    terms = [t for t in terms if t is not None]
    if not terms:
        return None
    s = terms[0]
    for t in terms[1:]:
        s = s + t
    return _up(s, len(terms))


def _abs_sum(mid):
    """Upper bound of ``|sum of the components|``: the sum of their magnitudes, rounded up."""
    if mid.shape[0] == 1:
        return np.abs(mid[0])
    return _up(np.sum(np.abs(mid), axis=0), mid.shape[0])


# ================================================================== the context
class BallContext(Context):
    """Multi-float64 midpoint, float64 radius; see the module docstring."""

    kind = "ball"
    reduction = "native"           # sums are exact up to the radius: no order to name

    def __init__(self, k: int, resolve):
        """``k`` float64 components in the midpoint; ``resolve(name)`` is the registry's
        ``get`` (the wide-ball fallback resolves interval:float64 through it)."""
        if int(k) not in K_RANGE:
            raise ContextError(f"context ball:{k}: the number of float64 components must be "
                               f"{K_RANGE.start}..{K_RANGE.stop - 1}")
        self.k = int(k)
        self.name = f"ball:{self.k}"
        self._resolve = resolve
        self._slice_cache: dict = {}
        self.description = (f"midpoint-radius balls: {self.k} float64 components "
                            f"(~{53 * self.k} bits) of midpoint, a rounded-up float64 radius "
                            f"enclosing the exact value; error-free BLAS matmul, functions "
                            f"in Arb")

    def properties(self) -> dict:
        p = super().properties()
        p["components"] = self.k
        p["format"] = f"{self.k} x float64 + radius"
        return p

    def supports(self, op: str) -> bool:
        """Every op of the vocabulary but the binary functions (pow, atan2, ...)."""
        return op in VOCABULARY and op not in BINARY_TRANSCENDENTAL

    # ------------------------------------------------------------- plumbing
    def _b(self, v, op: str) -> Ball:
        if isinstance(v, Ball):
            return v
        if isinstance(v, (Interval, Dual)):
            raise ContextError(f"context {self.name}: {op}: got {type(v).__name__} value; "
                               f"ball contexts take Ball values (use convert)")
        return self.convert(v)

    def _check(self, op: str, mid, rad):
        """A result with a non-finite midpoint or radius is an overflow: refuse it."""
        bad = ~np.isfinite(mid[0])
        if rad is not None:
            bad |= ~np.isfinite(rad)
        if bad.any():
            i = tuple(int(t) for t in np.argwhere(bad)[0]) if bad.ndim else ()
            what = ("the radius overflowed" if np.isfinite(mid[0][i]) else
                    "the midpoint overflowed (or an operand was not finite)")
            raise ContextError(f"context {self.name}: {op}: {what} at index {list(i)}")
        return Ball(mid, rad)

    def _renorm(self, parts, op="renorm"):
        """``(M, err)``: K components of the exact sum of ``parts`` (an array whose first
        axis runs over the parts) and the rounding error bound."""
        try:
            with np.errstate(all="ignore"):
                return MF.renorm(parts, self.k)
        except ValueError as exc:        # a part or the sum is not finite
            raise ContextError(f"context {self.name}: {op}: the midpoint overflowed (or an "
                               f"operand was not finite): {exc}") from None

    @staticmethod
    def _pad(mid, c):
        if mid.shape[0] >= c:
            return mid
        return np.concatenate([mid, np.zeros((c - mid.shape[0],) + mid.shape[1:])])

    @staticmethod
    def _rad(b: Ball, shape=None):
        r = b.rad
        if r is None:
            r = np.zeros(b.shape)
        return r if shape is None else np.broadcast_to(r, shape)

    def _pair(self, a, b, op):
        a = self._b(a, op)
        b = self._b(b, op)
        shape = check_broadcast(self, op, a.shape, b.shape)
        return a, b, tuple(shape)

    @staticmethod
    def _bmid(b: Ball, shape):
        return _mid_to(b.mid, shape)

    @staticmethod
    def _brad(b: Ball, shape):
        return None if b.rad is None else np.broadcast_to(b.rad, tuple(shape))

    def ends(self, v):
        """Outward float64 ends ``(lo, hi)`` of every ball: the components summed in
        float64 with an error bound ``(c + 1) 2^-52 sum|m_i|`` (c components), plus the
        radius, rounded outward; a one-component exact ball gives its value twice."""
        v = self._b(v, "ends")
        m = v.mid
        with np.errstate(all="ignore"):
            s = m[0].copy()
            for i in range(1, m.shape[0]):
                s = s + m[i]
            w = None
            if m.shape[0] > 1:
                w = _up(np.sum(np.abs(m), axis=0) * ((m.shape[0] + 1) * 2.0 ** -52), 1)
            w = _add_up(w, v.rad)
            if w is None:
                return s, s
            lo = np.where(w == 0, s, np.nextafter(s - w, -np.inf))
            hi = np.where(w == 0, s, np.nextafter(s + w, np.inf))
        return lo, hi

    def _hull(self, lo, hi):
        """The ball ``[lo, hi]`` (float64 ends): float64 midpoint, radius rounded up."""
        with np.errstate(all="ignore"):
            m = 0.5 * lo + 0.5 * hi
            m = np.minimum(np.maximum(m, lo), hi)
            r = np.maximum(hi - m, m - lo)
            r = np.where(lo == hi, 0.0, np.nextafter(r, np.inf))
        return m[None], r

    # ------------------------------------------------------------- conversion
    def convert(self, x: Any) -> Ball:
        """float64 (and float32, small int) values exactly; fractions, decimal strings and
        large ints as K components of their exact value plus the remainder's bound."""
        if isinstance(x, Ball):
            return x
        if isinstance(x, (Interval, Dual)):
            raise ContextError(f"context {self.name}: convert: got {type(x).__name__}; "
                               f"convert a point value")
        arr = x if isinstance(x, np.ndarray) else None
        if arr is None:
            try:
                arr = np.asarray(x)
            except (ValueError, TypeError) as exc:
                raise ContextError(f"context {self.name}: convert: {exc}") from None
        if arr.dtype.kind == "c":
            raise ContextError(f"context {self.name}: convert: complex values have no ball "
                               f"here")
        if arr.dtype.kind == "f" or arr.dtype.kind == "b" or (
                arr.dtype.kind in "iu" and (arr.size == 0
                                            or np.max(np.abs(arr.astype(object))) <= 2 ** 53)):
            a = np.asarray(arr, dtype=np.float64)
            bad = ~np.isfinite(a)
            if bad.any():
                i = tuple(int(t) for t in np.argwhere(bad)[0]) if bad.ndim else ()
                raise ContextError(f"context {self.name}: convert: non-finite value "
                                   f"{a[i]} at index {list(i)} has no ball")
            # no copy: a payload weight's Ball is a view of the stored array, so its
            # Ozaki slices are found again in the next chunk (values are never mutated)
            return Ball(a.reshape((1,) + a.shape), None)
        flat = np.asarray(arr, dtype=object).reshape(-1)
        mid = np.zeros((self.k, flat.size))
        rad = np.zeros(flat.size)
        for j, e in enumerate(flat):
            try:
                q = to_fraction(e.item() if isinstance(e, np.generic) else e)
            except ContextError as exc:
                raise ContextError(f"context {self.name}: convert: {exc}") from None
            comps, r = self._fraction_parts(q)
            mid[:, j] = comps
            rad[j] = r
        shape = arr.shape
        return self._check("convert", mid.reshape((self.k,) + shape), rad.reshape(shape))

    def _fraction_parts(self, q: Fraction):
        """K float64 components of ``q`` (each the nearest float64 of what remains: exact
        int/int division in Python) and an upper bound of the rest."""
        comps = []
        for _ in range(self.k):
            try:
                c = q.numerator / q.denominator if q else 0.0
            except OverflowError:
                raise ContextError(f"context {self.name}: convert: a value beyond the "
                                   f"float64 range") from None
            comps.append(c)
            q = q - Fraction(c)
        r = abs(q)
        f = float(r.numerator / r.denominator) if r else 0.0
        if Fraction(f) < r:
            f = math.nextafter(f, math.inf)
        return comps, f

    def to_float64(self, v) -> np.ndarray:
        """The float64 nearest the midpoint (ties to even)."""
        v = self._b(v, "to_float64")
        if v.mid.shape[0] == 1:
            return v.mid[0].copy()
        return self.midpoint_dd(v)[0]

    def midpoint_dd(self, v):
        """The midpoint as a double-double ``(hi, lo)``: ``hi`` the float64 nearest it
        (ties to even), ``lo`` the float64 nearest ``midpoint - hi``.

        A two-component renorm can lose a tail below ``hi``'s half-ulp (1 + 2^-53 +
        10^-70 renormalises to (1, 2^-53) and rounds to even, down): the remainder
        ``midpoint - hi``, itself renormalised, moves ``hi`` one ulp where it exceeds half
        the gap on its side, or equals it with a tail beyond."""
        v = self._b(v, "midpoint_dd")
        if v.mid.shape[0] == 1:
            return v.mid[0].copy(), np.zeros(v.shape)
        with np.errstate(all="ignore"):
            M = MF.renorm(v.mid, 2)[0]
            hi = M[0] + M[1]
            D = MF.renorm(np.concatenate([v.mid, -hi[None]]), 2)[0]
            up, dn = np.nextafter(hi, np.inf), np.nextafter(hi, -np.inf)
            hu, hd = (up - hi) * 0.5, (hi - dn) * 0.5
            go_up = (D[0] > hu) | ((D[0] == hu) & (D[1] > 0))
            go_dn = (-D[0] > hd) | ((-D[0] == hd) & (D[1] < 0))
            fin = np.isfinite(hi)
            new = np.where(go_up & fin, up, np.where(go_dn & fin, dn, hi))
            moved = new != hi
            if moved.any():
                D = np.where(moved, MF.renorm(np.concatenate([v.mid, -new[None]]), 2)[0], D)
            lo = np.where(fin, D[0] + D[1], 0.0)
        return new, lo

    def radius(self, v) -> np.ndarray:
        v = self._b(v, "radius")
        return self._rad(v).copy()

    def format(self, v, digits: int = 6) -> str:
        v = self._b(v, "format")
        m = np.asarray(self.to_float64(v)).reshape(-1)
        r = self._rad(v).reshape(-1)
        body = ", ".join(f"{a:.{int(digits)}g} +/- {b:.2g}" for a, b in zip(m, r))
        return body if v.shape == () else f"[{body}]"

    def zeros(self, shape):
        return Ball(np.zeros((1,) + tuple(shape)), None)

    def ones(self, shape):
        return Ball(np.ones((1,) + tuple(shape)), None)

    def full(self, shape, value):
        p = self.convert(value)
        if p.shape != ():
            raise ContextError(f"context {self.name}: full: fill value must be a scalar, got "
                               f"shape {list(p.shape)}")
        return self.broadcast_to(p, tuple(shape))

    # ------------------------------------------------------------- arithmetic
    def add(self, a, b):
        a, b, shape = self._pair(a, b, "add")
        parts = np.concatenate([self._bmid(a, shape), self._bmid(b, shape)])
        M, err = self._renorm(parts, "add")
        return self._check("add", M, _add_up(self._brad(a, shape), self._brad(b, shape), err))

    def neg(self, a):
        a = self._b(a, "neg")
        return Ball(np.negative(a.mid), a.rad)

    def sub(self, a, b):
        return self.add(a, self.neg(self._b(b, "sub")))

    def _products(self, ma, mb, keep):
        """Exact parts of the products of components ``i + j < keep`` (TwoProd), the
        magnitude bound of the dropped ones, and the underflow allowance."""
        from .kernels.eft import prod_err
        parts, dropped, tiny = [], [], None
        with np.errstate(all="ignore"):
            for i in range(ma.shape[0]):
                for j in range(mb.shape[0]):
                    if i + j >= keep:
                        dropped.append(_mul_up(np.abs(ma[i]), np.abs(mb[j])))
                        continue
                    p = ma[i] * mb[j]
                    parts.append(p)
                    parts.append(prod_err(ma[i], mb[j]))
                    t = (np.abs(p) < _TINY_PRODUCT) & (p != 0) | ((p == 0) & (ma[i] != 0)
                                                                  & (mb[j] != 0))
                    if t.any():
                        t = np.where(t, _SUB, 0.0)
                        tiny = t if tiny is None else tiny + t
        return parts, dropped, tiny

    def mul(self, a, b):
        a, b, shape = self._pair(a, b, "mul")
        ma, mb = self._bmid(a, shape), self._bmid(b, shape)
        parts, dropped, tiny = self._products(ma, mb, self.k)
        M, err = self._renorm(np.stack(parts), "mul")
        ra, rb = self._brad(a, shape), self._brad(b, shape)
        terms = [err, tiny, *dropped]
        if rb is not None:
            terms.append(_mul_up(_abs_sum(ma), rb))
        if ra is not None:
            terms.append(_mul_up(_abs_sum(mb), ra))
        if ra is not None and rb is not None:
            terms.append(_mul_up(ra, rb))
        return self._check("mul", M, _add_up(*terms))

    def square(self, a):
        return self.mul(a, a)

    def fma(self, a, b, c):
        """a*b + c: the ball of the product, then the sum (an enclosure of the exact value)."""
        return self.add(self.mul(a, b), c)

    def _lower_abs(self, b: Ball, op: str, shape):
        """A rounded-down lower bound of |x| over the ball; refuse a ball holding 0."""
        mb = self._bmid(b, shape)
        rest = None
        if mb.shape[0] > 1:
            rest = _up(np.sum(np.abs(mb[1:]), axis=0), mb.shape[0])
        w = _add_up(rest, self._brad(b, shape))
        a0 = np.abs(mb[0])
        with np.errstate(all="ignore"):
            lb = a0 if w is None else np.where(
                w == 0, a0, np.nextafter((a0 - w) * (1.0 - 2.0 ** -51), -np.inf))
        bad = ~(lb > 0)
        if bad.any():
            i = tuple(int(t) for t in np.argwhere(bad)[0]) if bad.ndim else ()
            lo, hi = self.ends(Ball(mb, self._brad(b, shape)))
            raise ContextError(f"context {self.name}: {op}: the divisor ball "
                               f"[{lo[i]!r}, {hi[i]!r}] at index {list(i)} contains 0")
        return lb

    def div(self, a, b):
        a, b, shape = self._pair(a, b, "div")
        lb = self._lower_abs(b, "div", shape)
        ma, mb = self._bmid(a, shape), self._bmid(b, shape)
        with np.errstate(all="ignore"):
            b0 = mb[0] if mb.shape[0] == 1 else mb[0] + mb[1]
            res = ma
            qs, errs = [], []
            for _ in range(self.k):
                # the digit from the whole residual (a renorm may leave a leading 0 when
                # the residual cancels exactly)
                q = np.sum(res, axis=0) / b0
                q = np.where(np.isfinite(q), q, 0.0)
                qs.append(q)
                p, _, tiny = self._products(q[None], mb, mb.shape[0])
                res, err = self._renorm(np.concatenate([res, -np.stack(p)]), "div")
                errs += [err, tiny]
            Q, qerr = self._renorm(np.stack(qs), "div")
        # a'/b' - Q = (a' - q b')/b' + (q - Q) for every a' in A, b' in B (q = sum qs):
        # |a' - q b'| <= |a_m - q b_m| + r_a + |q| r_b, |a_m - q b_m| <= |res| + errs.
        ra, rb = self._brad(a, shape), self._brad(b, shape)
        num = _add_up(_abs_sum(res), *errs, ra,
                      None if rb is None else _mul_up(_add_up(_abs_sum(Q), qerr), rb))
        return self._check("div", Q, _add_up(_div_up(num, lb), qerr))

    def _lattice(self, a, b, op, take_a_if):
        """maximum/minimum: the operand the ends decide, the hull where they do not."""
        a, b, shape = self._pair(a, b, op)
        la, ha = self.ends(a)
        lb, hb = self.ends(b)
        la, ha, lb, hb = (np.broadcast_to(t, shape) for t in (la, ha, lb, hb))
        pick_a, pick_b = (np.array(t) for t in take_a_if(la, ha, lb, hb))
        c = max(a.mid.shape[0], b.mid.shape[0])
        ma, mb = self._pad(self._bmid(a, shape), c), self._pad(self._bmid(b, shape), c)
        und = ~(pick_a | pick_b)
        if und.any():
            # the float64 ends are ~2^-52 wide: near-ties (equal values above all) are
            # decided on the exact difference of the midpoints
            ra_, rb_ = self._rad(a, shape)[und], self._rad(b, shape)[und]
            same = np.all(ma[:, und] == mb[:, und], axis=0) & (ra_ == rb_)
            a_ge = self._surely_ge(ma[:, und], ra_, mb[:, und], rb_) | same
            b_ge = self._surely_ge(mb[:, und], rb_, ma[:, und], ra_)
            first, second = (a_ge, b_ge) if op == "maximum" else (b_ge, a_ge)
            pick_a[und] = first
            pick_b[und] = second & ~first
        ra, rb = self._rad(a, shape), self._rad(b, shape)
        if (pick_a | pick_b).all():
            # every entry decided (a ReLU of a tight ball, nearly always): no hull to build
            return self._check(op, np.where(pick_a, ma, mb), np.where(pick_a, ra, rb))
        if op == "maximum":
            hm, hr = self._hull(np.maximum(la, lb), np.maximum(ha, hb))
        else:
            hm, hr = self._hull(np.minimum(la, lb), np.minimum(ha, hb))
        hm = self._pad(hm, c)
        mid = np.where(pick_a, ma, np.where(pick_b, mb, hm))
        rad = np.where(pick_a, ra, np.where(pick_b, rb, hr))
        return self._check(op, mid, rad)

    def maximum(self, a, b):
        return self._lattice(a, b, "maximum", lambda la, ha, lb, hb: (la >= hb, lb >= ha))

    def minimum(self, a, b):
        return self._lattice(a, b, "minimum", lambda la, ha, lb, hb: (ha <= lb, hb <= la))

    def abs(self, a):
        a = self._b(a, "abs")
        lo, hi = self.ends(a)
        pos, neg = lo >= 0, hi <= 0
        hm, hr = self._hull(np.zeros_like(lo), np.maximum(-lo, hi))
        c = a.mid.shape[0]
        mid = np.where(pos, a.mid, np.where(neg, -a.mid, self._pad(hm, c)))
        rad = np.where(pos | neg, self._rad(a), hr)
        return self._check("abs", mid, rad)

    def _monotone_step(self, a, f, op):
        """A nondecreasing step function of the value: exact where both ends agree, the
        hull [f(lo), f(hi)] elsewhere."""
        a = self._b(a, op)
        lo, hi = self.ends(a)
        m, r = self._hull(f(lo), f(hi))
        return Ball(m, r)

    def heaviside(self, a):
        return self._monotone_step(a, lambda t: (t > 0).astype(np.float64), "heaviside")

    def sign(self, a):
        return self._monotone_step(a, np.sign, "sign")

    def less(self, a, b) -> np.ndarray:
        """``a < b`` where the balls decide it; overlapping balls raise (no silent branch)."""
        a, b, shape = self._pair(a, b, "less")
        la, ha = (np.broadcast_to(t, shape) for t in self.ends(a))
        lb, hb = (np.broadcast_to(t, shape) for t in self.ends(b))
        yes, no = ha < lb, la >= hb
        bad = ~(yes | no)
        if bad.any():
            i = tuple(int(t) for t in np.argwhere(bad)[0]) if bad.ndim else ()
            raise ContextError(f"context {self.name}: less: the balls [{la[i]!r}, {ha[i]!r}] "
                               f"and [{lb[i]!r}, {hb[i]!r}] at index {list(i)} overlap; "
                               f"the comparison is not decided")
        return np.array(yes)

    def where(self, cond, a, b):
        cond = check_where_condition(self, cond, (Ball, Interval))
        a, b, shape = self._pair(a, b, "where")
        shape = tuple(check_broadcast(self, "where", cond.shape, shape))
        c = max(a.mid.shape[0], b.mid.shape[0])
        ma, mb = self._pad(self._bmid(a, shape), c), self._pad(self._bmid(b, shape), c)
        mid = np.where(cond, ma, mb)
        if a.rad is None and b.rad is None:
            return Ball(mid, None)
        return Ball(mid, np.where(cond, self._rad(a, shape), self._rad(b, shape)))

    # ------------------------------------------------------------- functions
    def sqrt(self, a):
        a = self._b(a, "sqrt")
        lo, _ = self.ends(a)
        bad = lo < 0
        if bad.any():
            i = tuple(int(t) for t in np.argwhere(bad)[0]) if bad.ndim else ()
            raise ContextError(f"context {self.name}: sqrt: the ball at index {list(i)} "
                               f"reaches {lo[i]!r} < 0, where sqrt is undefined")
        return self._apply("sqrt", a)

    def _function(self, fn, a):
        return self._apply(fn.name, self._b(a, fn.name))

    def _apply(self, name: str, a: Ball) -> Ball:
        """Arb per entry where the ball is tight, interval:float64 where it is wide (or
        Arb has no rule for the function)."""
        lo, hi = self.ends(a)
        with np.errstate(all="ignore"):
            mag = np.maximum(np.abs(lo), np.abs(hi))
            wide = (hi - lo) > 2 * ARB_MAX_REL_RADIUS * mag
        if name not in _ARB:
            wide = np.ones(a.shape, dtype=bool)
        mid = np.zeros((self.k,) + a.shape)
        rad = np.zeros(a.shape)
        if wide.any():
            ictx = self._resolve("interval:float64")
            f = getattr(ictx, name)
            try:
                iv = f(Interval(lo[wide], hi[wide]))
            except ContextError as exc:
                raise ContextError(f"context {self.name}: {name}: {exc}") from None
            m, r = self._hull(np.asarray(iv.lo, dtype=np.float64),
                              np.asarray(iv.hi, dtype=np.float64))
            mid[0][wide] = m[0]
            rad[wide] = r
        tight = ~wide
        if tight.any():
            m, r = self._arb_entries(name, a, tight)
            mid[:, tight] = m
            rad[tight] = r
        return self._check(name, mid, rad)

    def _arb_entries(self, name, a: Ball, mask):
        """Arb evaluation of the entries ``mask``: (K, n) components and (n,) radii."""
        import flint
        A = flint.arb
        fn = _ARB[name]
        comps = a.mid[:, mask]
        rads = self._rad(a)[mask]
        n = comps.shape[1]
        out_m = np.zeros((self.k, n))
        out_r = np.zeros(n)
        old = flint.ctx.prec
        flint.ctx.prec = 53 * self.k + 32
        try:
            for j in range(n):
                x = A(0)
                for i in range(comps.shape[0]):
                    x = x + A(float(comps[i, j]))
                if rads[j]:
                    x = x + A(0, float(rads[j]))
                y = fn(x, A)
                if not y.is_finite():
                    raise ContextError(
                        f"context {self.name}: {name}: no finite enclosure at entry {j} "
                        f"(x = {float(comps[0, j])!r} +/- {float(rads[j]):.2g}): outside "
                        f"the domain or overflow")
                rem = y.mid()
                for i in range(self.k):
                    c = float(rem)
                    out_m[i, j] = c
                    rem = rem - A(c)
                bound = (abs(rem) + y.rad()).upper()
                f = float(bound)
                if A(f) < bound:
                    f = math.nextafter(f, math.inf)
                out_r[j] = f
        finally:
            flint.ctx.prec = old
        return out_m, out_r

    # ------------------------------------------------------------- reductions
    def _axes(self, a: Ball, axis, op):
        return reduction_axes(self, a.shape, axis, op)

    def _kept_shape(self, shape, axes, keepdims):
        return tuple(1 if i in axes else s for i, s in enumerate(shape)) if keepdims else \
            tuple(s for i, s in enumerate(shape) if i not in axes)

    def sum(self, a, axis=None, keepdims: bool = False):
        """The exact sum of every component of the summed entries, renormalised to K."""
        a = self._b(a, "sum")
        axes = self._axes(a, axis, "sum")
        shape = a.shape
        out_shape = self._kept_shape(shape, axes, keepdims)
        rest = tuple(i for i in range(len(shape)) if i not in axes)
        n = math.prod(shape[i] for i in axes)
        m = np.transpose(a.mid, (0,) + tuple(i + 1 for i in axes) + tuple(i + 1 for i in rest))
        m = m.reshape((a.mid.shape[0] * n,) + tuple(shape[i] for i in rest))
        if m.shape[0] == 0:
            return self.zeros(out_shape)
        M, err = self._renorm(m, "sum")
        r = None
        if a.rad is not None:
            r = _up(np.sum(a.rad, axis=axes), n)
        rad = _add_up(r, err)
        return self._check("sum", M.reshape((M.shape[0],) + out_shape),
                           rad.reshape(out_shape))

    def _flat_last(self, a: Ball, axes):
        """The entries reduced over ``axes`` moved to one last axis."""
        shape = a.shape
        rest = tuple(i for i in range(len(shape)) if i not in axes)
        perm = rest + axes
        n = math.prod(shape[i] for i in axes)
        lead = tuple(shape[i] for i in rest)
        mid = np.transpose(a.mid, (0,) + tuple(i + 1 for i in perm)).reshape(
            (a.mid.shape[0],) + lead + (n,))
        rad = np.transpose(self._rad(a), perm).reshape(lead + (n,))
        return mid, rad, lead, n

    def _top(self, a: Ball, axis, op, same_ok=True):
        a = self._b(a, op)
        axes = self._axes(a, axis, op)
        mid, rad, lead, n = self._flat_last(a, axes)
        if n == 0:
            raise ContextError(f"context {self.name}: {op}: empty reduction")
        lo, hi = self.ends(Ball(mid, rad))
        i = np.argmax(lo, axis=-1)[..., None]
        top_lo = np.take_along_axis(lo, i, -1)[..., 0]
        others = hi.copy()
        np.put_along_axis(others, i, -np.inf, -1)
        decided = np.array(top_lo >= np.max(others, axis=-1))
        und = ~decided
        if und.any():
            # near-ties (a window holding one value twice, equal activations): the top
            # entry is the maximum where it is surely >= every other entry, exactly
            mu, ru, iu = mid[:, und], rad[und], i[und]            # (c, U, n), (U, n)
            tm = np.take_along_axis(mu, iu[None], -1)             # (c, U, 1)
            tr = np.take_along_axis(ru, iu, -1)
            # an entry whose ball is the top's own (one value twice) cannot exceed it:
            # the maximum then lies in that ball whichever it is
            ge = self._surely_ge(np.broadcast_to(tm, mu.shape), np.broadcast_to(tr, ru.shape),
                                 mu, ru)
            if same_ok:                         # amax, not argmax: the value, not where
                ge |= np.all(mu == tm, axis=0) & (ru == tr)
            ge |= np.arange(n) == iu
            decided[und] = np.all(ge, axis=-1)
        return a, axes, mid, rad, lo, hi, i, top_lo, decided

    def _surely_ge(self, ma, ra, mb, rb) -> np.ndarray:
        """Is every real of ball ``a`` >= every real of ball ``b``?  The exact sum
        ``ma - mb - (ra + rb)`` renormalised to two components ``P`` with error ``err``:
        yes when ``fl(P0 + P1)`` exceeds ``|t| 2^-51 + err`` (with slack) or all of it is
        exactly 0."""
        with np.errstate(all="ignore"):
            w = _add_up(ra, rb)
            parts = np.concatenate([ma, -mb, -w[None]])
            P, err = MF.renorm(parts, 2)
            t = P[0] + P[1]
            pos = t > np.nextafter((np.abs(t) * 2.0 ** -51 + err) * (1.0 + 2.0 ** -50),
                                   np.inf)
            return pos | ((P[0] == 0) & (P[1] == 0) & (err == 0))

    def amax(self, a, axis=None, keepdims: bool = False):
        """The entry the balls prove largest; the hull [max lo, max hi] where undecided."""
        a, axes, mid, rad, lo, hi, i, top_lo, decided = self._top(a, axis, "amax")
        pm = np.take_along_axis(mid, i[None], -1)[..., 0]
        pr = np.take_along_axis(rad, i, -1)[..., 0]
        hm, hr = self._hull(top_lo, np.max(hi, axis=-1))
        c = mid.shape[0]
        out_mid = np.where(decided, pm, self._pad(hm, c))
        out_rad = np.where(decided, pr, hr)
        out_shape = self._kept_shape(a.shape, axes, keepdims)
        return self._check("amax", out_mid.reshape((c,) + out_shape), out_rad.reshape(out_shape))

    def argmax(self, a, axis: int) -> np.ndarray:
        a, axes, mid, rad, lo, hi, i, top_lo, decided = self._top(a, axis, "argmax",
                                                                  same_ok=False)
        if not decided.all():
            j = tuple(int(t) for t in np.argwhere(~decided)[0]) if decided.ndim else ()
            raise ContextError(f"context {self.name}: argmax: the balls do not decide the "
                               f"largest entry at {list(j)} (they overlap)")
        return i[..., 0]

    # ------------------------------------------------------------- matmul
    def matmul(self, a, b):
        a = self._b(a, "matmul")
        b = self._b(b, "matmul")
        sa, sb = a.shape, b.shape
        if len(sa) == 0 or len(sb) == 0:
            raise ContextError(f"context {self.name}: matmul: scalar operand "
                               f"({list(sa)} @ {list(sb)})")
        va, vb = len(sa) == 1, len(sb) == 1
        if va:
            a = self.reshape(a, (1,) + sa)
        if vb:
            b = self.reshape(b, sb + (1,))
        if a.shape[-1] != b.shape[-2]:
            raise ContextError(f"context {self.name}: matmul: inner dimensions differ: "
                               f"{list(sa)} @ {list(sb)}")
        batch = check_broadcast(self, "matmul", a.shape[:-2], b.shape[:-2])
        out = self._matmul2(a, b, tuple(batch))
        shape = out.shape
        if va:
            shape = shape[:-2] + shape[-1:]
        if vb:
            shape = shape[:-1]
        return self.reshape(out, shape) if shape != out.shape else out

    @staticmethod
    def _point(v: Ball) -> bool:
        return v.rad is None and v.mid.shape[0] == 1

    def _matmul2(self, a: Ball, b: Ball, batch):
        pa, pb = self._point(a), self._point(b)
        # one point operand (a weight, batched for grouped convolutions): the error-free
        # BLAS product, |W| r rounded up for the radius
        if pb:                              # a point data operand too (the input)
            W = b.mid[0]
            M, err = self._mf("matmul", MF.matmul_left, a.mid, W, self.k,
                              A_slices=self._slices(W, MF.split_cols))
            rad = err
            if a.rad is not None:
                rad = _add_up(self._mf("matmul", MF.abs_matmul_up, a.rad, np.abs(W)), err)
            return self._check("matmul", M, rad)
        if pa and not pb:
            W = a.mid[0]
            M, err = self._mf("matmul", MF.matmul, W, b.mid, self.k,
                              A_slices=self._slices(W, MF.split_rows))
            rad = err
            if b.rad is not None:
                rad = _add_up(self._mf("matmul", MF.abs_matmul_up, np.abs(W), b.rad), err)
            return self._check("matmul", M, rad)
        return self._matmul_products(a, b)

    def _mf(self, op, f, *args, **kw):
        """A multifloat kernel call; its refusal (a non-finite operand) as a ContextError."""
        try:
            with np.errstate(all="ignore"):
                return f(*args, **kw)
        except ValueError as exc:
            raise ContextError(f"context {self.name}: {op}: {exc}") from None

    def clear_cache(self) -> None:
        """Drop the cached weight slices (about 6x the weights: 0.56 GB for resnet18), for
        a caller done with a graph's ball passes."""
        self._slice_cache.clear()

    def _slices(self, W, split):
        """A weight's Ozaki slices, cached: the same weight meets every chunk of samples.
        Keyed by the array's memory, shape and strides (the cache holds the array, so the
        memory cannot be reused by another one while the entry lives)."""
        key = (W.__array_interface__["data"][0], W.shape, W.strides, split.__name__)
        hit = self._slice_cache.get(key)
        if hit is not None:
            return hit[1]
        if len(self._slice_cache) >= 128:      # bounded: a weight's slices are ~6x it
            self._slice_cache.clear()
        S = self._mf("matmul", split, W)
        self._slice_cache[key] = (W, S)
        return S

    def _matmul_products(self, a: Ball, b: Ball):
        """Both balls, or a batched weight: every product split exactly (TwoProd) and the
        products summed over the inner axis by renorm; memory ``n`` times the result."""
        A = a.mid[..., :, :, None]                      # (ca, ..., p, n, 1)
        B = b.mid[..., None, :, :]                      # (cb, ..., 1, n, m)
        shape = check_broadcast(self, "matmul", A.shape[1:], B.shape[1:])
        Ab, Bb = _mid_to(A, shape), _mid_to(B, shape)
        parts, dropped, tiny = self._products(Ab, Bb, self.k)
        P = np.stack(parts)                             # (q, ..., p, n, m)
        P = np.moveaxis(P, -2, 1)                       # (q, n, ..., p, m)
        P = P.reshape((P.shape[0] * P.shape[1],) + P.shape[2:])
        M, err = self._renorm(P, "matmul")
        extra = [t for t in [*dropped, tiny] if t is not None]
        rad = err
        if extra:
            rad = _add_up(rad, _up(np.sum(_add_up(*extra), axis=-2), shape[-2]))
        absA, absB = _abs_sum(a.mid), _abs_sum(b.mid)
        if b.rad is not None:
            rad = _add_up(rad, self._mf("matmul", MF.abs_matmul_up, absA, b.rad))
        if a.rad is not None:
            rad = _add_up(rad, self._mf("matmul", MF.abs_matmul_up, a.rad, absB))
        if a.rad is not None and b.rad is not None:
            rad = _add_up(rad, self._mf("matmul", MF.abs_matmul_up, a.rad, b.rad))
        return self._check("matmul", M, rad)

    # ------------------------------------------------------------- shape operations
    def shape(self, v) -> tuple:
        return self._b(v, "shape").shape

    def _move(self, a, op, f_mid, f_rad):
        a = self._b(a, op)
        try:
            return Ball(f_mid(a.mid), None if a.rad is None else f_rad(a.rad))
        except (ValueError, IndexError, np.exceptions.AxisError) as exc:
            raise ContextError(f"context {self.name}: {op}: {exc} (shape "
                               f"{list(a.shape)})") from None

    def reshape(self, a, shape):
        shape = tuple(int(s) for s in shape)
        return self._move(a, "reshape", lambda m: m.reshape((m.shape[0],) + shape),
                          lambda r: r.reshape(shape))

    def transpose(self, a, axes=None):
        a = self._b(a, "transpose")
        nd = len(a.shape)
        axes = tuple(range(nd))[::-1] if axes is None else tuple(int(p) for p in axes)
        if sorted(axes) != list(range(nd)):
            raise ContextError(f"context {self.name}: transpose: perm {list(axes)} is not a "
                               f"permutation of the {nd} axes of {list(a.shape)}")
        return self._move(a, "transpose",
                          lambda m: np.transpose(m, (0,) + tuple(p + 1 for p in axes)),
                          lambda r: np.transpose(r, axes))

    def take(self, a, indices, axis: int):
        a = self._b(a, "take")
        nd = len(a.shape)
        if not -nd <= int(axis) < nd:
            raise ContextError(f"context {self.name}: take: axis {axis} out of range for "
                               f"shape {list(a.shape)}")
        ax = int(axis) % nd
        idx = np.asarray(indices)
        return self._move(a, "take", lambda m: np.take(m, idx, axis=ax + 1),
                          lambda r: np.take(r, idx, axis=ax))

    def broadcast_to(self, a, shape):
        a = self._b(a, "broadcast_to")
        shape = tuple(int(s) for s in shape)
        check_broadcast(self, "broadcast_to", a.shape, shape)
        return self._move(a, "broadcast_to",
                          lambda m: _mid_to(m, shape).copy(),
                          lambda r: np.broadcast_to(r, shape).copy())

    def _join(self, xs, axis, op, join):
        xs = [self._b(x, op) for x in xs]
        if not xs:
            raise ContextError(f"context {self.name}: {op}: nothing to join")
        c = max(x.mid.shape[0] for x in xs)
        nd = len(xs[0].shape) + (1 if op == "stack" else 0)
        if not -nd <= int(axis) < max(nd, 1):
            raise ContextError(f"context {self.name}: {op}: axis {axis} out of range")
        ax = int(axis) % max(nd, 1)
        try:
            mid = join([self._pad(x.mid, c) for x in xs], axis=ax + 1)
            rad = None
            if any(x.rad is not None for x in xs):
                rad = join([self._rad(x) for x in xs], axis=ax)
        except ValueError as exc:
            shapes = ", ".join(str(list(x.shape)) for x in xs)
            raise ContextError(f"context {self.name}: {op} axis={axis}: incompatible shapes "
                               f"{shapes}") from exc
        return Ball(mid, rad)

    def concat(self, xs, axis: int = 0):
        return self._join(xs, axis, "concat", np.concatenate)

    def stack(self, xs, axis: int = 0):
        return self._join(xs, axis, "stack", np.stack)


def _mid_to(mid, shape):
    """Components ``(c,) + s`` broadcast to ``(c,) + shape`` (numpy's rule on the value
    axes: the component axis stays in front)."""
    shape = tuple(shape)
    nd = mid.ndim - 1
    if nd < len(shape):
        mid = mid.reshape((mid.shape[0],) + (1,) * (len(shape) - nd) + mid.shape[1:])
    return np.broadcast_to(mid, (mid.shape[0],) + shape)


# ---------------------------------------------------------------------- registry
# Registration data, read by scalars.registry (this module does not import the registry).
CONTEXT_NAMES = {f"ball:{k}": (lambda get, k=k: BallContext(k, get)) for k in K_RANGE}
CONTEXT_FAMILIES = ((r"ball:(\d+)", lambda m, get: BallContext(int(m.group(1)), get),
                     "ball:K"),)
