"""Hardware float64: numpy, BLAS and the platform libm exactly as they are.

This context makes no rounding promise beyond IEEE's for + - * / sqrt (numpy's ufuncs);
``exp`` and friends come from libm (faithful, not guaranteed correctly rounded), sums and
matmul use numpy's pairwise summation and BLAS (order unspecified): ``reduction="native"``.
"""
from __future__ import annotations

from fractions import Fraction

import gmpy2
import numpy as np

from .arrayshape import ArrayShapeOps
from .base import as_object_array, check_broadcast, to_fraction
from .errors import ContextError


def _exact_to_float64(x) -> float:
    """One correct rounding (nearest-even) of an exact number or decimal string to float64."""
    if isinstance(x, (float, np.floating)):
        return float(x)
    if isinstance(x, (int, np.integer, bool, np.bool_)):
        return float(Fraction(int(x)))  # correctly rounded, raises OverflowError when huge
    if isinstance(x, str):
        s = x.strip()
        try:
            return float(s)  # Python's float() of a decimal string is correctly rounded
        except ValueError:
            return float(to_fraction(s))
    return float(to_fraction(x))  # Fraction.__float__ is correctly rounded


def float64_array(x, ctx_name: str = "float64") -> np.ndarray:
    """Convert anything the vocabulary accepts to a float64 ndarray, one rounding each."""
    if isinstance(x, np.ndarray) and x.dtype.kind in "fiub":
        return x.astype(np.float64, copy=False)
    if isinstance(x, (float, np.floating)):
        return np.asarray(x, dtype=np.float64)
    if hasattr(x, "lo") and hasattr(x, "hi"):
        raise ContextError(f"context {ctx_name}: convert: got an interval value; "
                           f"convert its endpoints explicitly")
    try:
        return as_object_array(x, _exact_to_float64).astype(np.float64)
    except OverflowError as exc:
        raise ContextError(f"context {ctx_name}: convert: value too large for float64: {exc}")


# ---------------------------------------------------------------- fused multiply-add
# numpy has no fma ufunc, so it is emulated with error-free transformations (Boldo &
# Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms using
# rounding to odd", IEEE TC 2008):
#     (uh, ul) = TwoProduct(a, b)        a*b = uh + ul exactly (Dekker/Veltkamp)
#     (th, tl) = TwoSum(c, uh)           c + uh = th + tl exactly (Knuth)
#     v = RO(tl + ul)                    rounded to odd: keeps a sticky bit
#     z = RN(th + v)                     = RN(a*b + c), the correctly rounded fma
# Round-to-odd is built from TwoSum: if the sum is inexact and its last significand bit
# is even, step one ulp toward the error.  The transformations are exact only without
# overflow/underflow, so the fast path is restricted to operands where every partial
# result is a normal double (bounds below); the rest (rare) goes to MPFR per element.
_SPLITTER = 134217729.0  # 2^27 + 1
_F64_MPFR = gmpy2.context(precision=53, emin=-1073, emax=1024, subnormalize=True)


def _two_sum(a, b):
    s = a + b
    bv = s - a
    return s, (a - (s - bv)) + (b - bv)


def _split(a):
    g = _SPLITTER * a
    hi = g - (g - a)
    return hi, a - hi


def _two_product(a, b):
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _add_round_odd(a, b):
    s, e = _two_sum(a, b)
    even = (s.view(np.int64) & 1) == 0
    step = (e != 0) & even
    if step.any():
        s = np.where(step, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)
    return s


def fma_f64(a, b, c) -> np.ndarray:
    """Correctly rounded a*b + c on float64 arrays (broadcast), IEEE special cases kept."""
    shape = np.broadcast_shapes(np.shape(a), np.shape(b), np.shape(c))
    a, b, c = (np.ascontiguousarray(np.broadcast_to(np.asarray(t, dtype=np.float64), shape))
               .reshape(-1) for t in (a, b, c))
    with np.errstate(all="ignore"):
        aa, ab, ac = np.abs(a), np.abs(b), np.abs(c)
        # |a|,|b| in [2^-500, 2^500): no overflow in the split or product, and with
        # |a*b| >= 2^-800 and c = 0 or |c| in [2^-800, 2^1000) every exact partial term is
        # a multiple of 2^-905, so no intermediate is subnormal and the result is finite.
        safe = ((aa >= 2.0**-500) & (aa < 2.0**500) & (ab >= 2.0**-500) & (ab < 2.0**500)
                & (aa * ab >= 2.0**-800)
                & ((ac == 0) | ((ac >= 2.0**-800) & (ac < 2.0**1000))))
        out = np.empty(a.shape)
        uh, ul = _two_product(a[safe], b[safe])
        th, tl = _two_sum(c[safe], uh)
        out[safe] = th + _add_round_odd(tl, ul)
        rest = ~safe
        if rest.any():
            ar, br, cr = a[rest], b[rest], c[rest]
            finite = np.isfinite(ar) & np.isfinite(br) & np.isfinite(cr)
            zero_prod = (ar == 0) | (br == 0)
            # a product of zero is exact, so the native sum is the fused result (signs
            # of zero included); infinite/NaN factors: the native expression is IEEE's.
            r = ar * br + cr
            # finite factors with a non-finite addend: the (finite) product cannot matter
            # even when the native product overflows (inf - inf would be a false NaN).
            fin_ab = np.isfinite(ar) & np.isfinite(br)
            r = np.where(fin_ab & ~np.isfinite(cr), cr, r)
            hard = np.flatnonzero(finite & ~zero_prod)
            if hard.size:
                with _F64_MPFR:  # MPFR fma: exact product+sum, one rounding, subnormals
                    r[hard] = [float(gmpy2.fma(gmpy2.mpfr(x), gmpy2.mpfr(y), gmpy2.mpfr(z)))
                               for x, y, z in zip(ar[hard].tolist(), br[hard].tolist(),
                                                  cr[hard].tolist())]
            out[rest] = r
    return out.reshape(shape)


class Float64Context(ArrayShapeOps):
    name = "float64"
    kind = "hardware"
    reduction = "native"
    correctly_rounded = frozenset({"add", "sub", "mul", "div", "sqrt", "neg", "abs",
                                   "square", "fma", "maximum", "minimum"})
    description = "hardware IEEE binary64 via numpy/BLAS/libm (sums and matmul in native order)"

    def _arr(self, v, op: str) -> np.ndarray:
        """A float64 value of this context; other contexts' values are named and refused.

        numpy returns scalars for 0-d operands, so numpy float scalars count as 0-d
        arrays; integer/bool/narrower float arrays are widened to float64.
        """
        if isinstance(v, np.ndarray):
            if v.dtype == np.float64:
                return v
            if v.dtype.kind in "iub" or (v.dtype.kind == "f" and v.dtype.itemsize < 8):
                return v.astype(np.float64)  # (ints beyond 2^53: one rounding, as convert)
        elif isinstance(v, (np.floating, np.integer)) and not isinstance(v, np.longdouble):
            return np.asarray(v, dtype=np.float64)
        from .exact import describe_value
        raise ContextError(f"context {self.name}: {op}: got {describe_value(v)}, not a "
                           f"{self.name} value (expected a float64 ndarray; use "
                           f"scalars.get({self.name!r}).convert(...))")

    def convert(self, x):
        return float64_array(x, self.name)

    def to_float64(self, v):
        return np.asarray(self._arr(v, "to_float64"), dtype=np.float64)

    def format(self, v, digits: int = 6):
        a = np.asarray(self.to_float64(v))
        if a.ndim == 0:
            return f"{float(a):.{digits}f}"
        return "[" + ", ".join(f"{float(t):.{digits}f}" for t in a.reshape(-1)) + "]"

    def zeros(self, shape): return np.zeros(tuple(shape))
    def ones(self, shape): return np.ones(tuple(shape))
    def full(self, shape, value): return np.full(tuple(shape), float(self.convert(value)))

    def _bin(self, op, f, a, b):
        a = self._arr(a, op); b = self._arr(b, op)
        check_broadcast(self, op, a.shape, b.shape)
        with np.errstate(all="ignore"):
            return np.asarray(f(a, b))

    def _un(self, op, f, a):
        a = self._arr(a, op)
        with np.errstate(all="ignore"):
            return np.asarray(f(a))

    def add(self, a, b): return self._bin("add", np.add, a, b)
    def sub(self, a, b): return self._bin("sub", np.subtract, a, b)
    def mul(self, a, b): return self._bin("mul", np.multiply, a, b)
    def div(self, a, b): return self._bin("div", np.divide, a, b)
    def maximum(self, a, b): return self._bin("maximum", np.maximum, a, b)
    def minimum(self, a, b): return self._bin("minimum", np.minimum, a, b)

    def fma(self, a, b, c):
        """a*b + c with ONE rounding (IEEE fusedMultiplyAdd), vectorised; see ``fma_f64``."""
        a = self._arr(a, "fma"); b = self._arr(b, "fma"); c = self._arr(c, "fma")
        check_broadcast(self, "fma", a.shape, b.shape, c.shape)
        return fma_f64(a, b, c)

    def neg(self, a): return self._un("neg", np.negative, a)
    def abs(self, a): return self._un("abs", np.abs, a)
    def sqrt(self, a): return self._un("sqrt", np.sqrt, a)
    def square(self, a): return self._un("square", np.square, a)
    def exp(self, a): return self._un("exp", np.exp, a)
    def log(self, a): return self._un("log", np.log, a)
    def tanh(self, a): return self._un("tanh", np.tanh, a)
    def sin(self, a): return self._un("sin", np.sin, a)
    def cos(self, a): return self._un("cos", np.cos, a)

    def sigmoid(self, a):
        a = self._arr(a, "sigmoid")
        with np.errstate(all="ignore"):
            # 1/(1+e^-x) for x >= 0 and e^x/(1+e^x) for x < 0: no overflow either side.
            e = np.exp(-np.abs(a))
            return np.asarray(np.where(a >= 0, 1.0 / (1.0 + e), e / (1.0 + e)))

    def softplus(self, a):
        a = self._arr(a, "softplus")
        with np.errstate(all="ignore"):
            return np.asarray(np.maximum(a, 0.0) + np.log1p(np.exp(-np.abs(a))))

    def erf(self, a):
        from .kernels import erf_f64
        return np.asarray(erf_f64(self._arr(a, "erf")))

    def heaviside(self, a): return (self._arr(a, "heaviside") > 0).astype(np.float64)
    def sign(self, a): return np.asarray(np.sign(self._arr(a, "sign")))
    def less(self, a, b): return self._bin("less", np.less, a, b)

    def _reduce(self, op, f, a, **kw):
        a = self._arr(a, op)
        try:
            with np.errstate(all="ignore"):
                return np.asarray(f(a, **kw))
        except np.exceptions.AxisError as exc:
            raise ContextError(f"context {self.name}: {op}: {exc}") from None
        except ValueError as exc:  # e.g. max of an empty array
            raise ContextError(f"context {self.name}: {op} of shape {list(a.shape)}: "
                               f"{exc}") from None

    def sum(self, a, axis=None, keepdims=False):
        return self._reduce("sum", np.sum, a, axis=axis, keepdims=keepdims)

    def amax(self, a, axis=None, keepdims=False):
        return self._reduce("amax", np.max, a, axis=axis, keepdims=keepdims)

    def argmax(self, a, axis):
        return self._reduce("argmax", np.argmax, a, axis=axis)

    def matmul(self, a, b):
        a = self._arr(a, "matmul"); b = self._arr(b, "matmul")
        try:
            with np.errstate(all="ignore"):  # native: inf/NaN propagate as BLAS gives them
                return np.asarray(np.matmul(a, b))
        except ValueError:
            raise ContextError(f"context {self.name}: matmul: shapes {list(a.shape)} and "
                               f"{list(b.shape)} do not contract") from None
