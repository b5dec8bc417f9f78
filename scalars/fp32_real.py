"""The rounded-real FP32 context (``fp32-real``): the seeds' rounded-real FP32.

binary32's 24-bit significand and gradual underflow (subnormal grid 2^-149) but no upper
exponent cutoff, so it never overflows (up to MPFR's own exponent range, about
2^(2^30); beyond that a ContextError, never inf).  Every operation rounds once, to
nearest-even, through an MPFR context.  Values are ``ndarray(dtype=object)`` of gmpy2
``mpfr``, run through numpy's object loops like :mod:`scalars.exact`'s rationals.
"""
from __future__ import annotations


import gmpy2
import numpy as np

from .kernels import correct_rounding
from .errors import ContextError
from .base import object_result as _object_result
from .exact import _F64, MPFR, ObjectArrayContext, _mpq_leaf
from .functions import FUNCTIONS
from .functions_binary import BINARY_FUNCTIONS

# MPFR's default exponent range (gmpy2 cannot go past it): the "unbounded" exponent.
_EMAX = (1 << 30) - 1
_EMIN = 1 - (1 << 30)


# ===================================================================== fp32-real
# binary32's significand and subnormal grid, MPFR's whole exponent range above.
# subnormalize=True makes gmpy2 call mpfr_subnormalize with the ternary value of the
# operation, so results below 2^-126 are rounded once onto the 2^-149 grid (no double
# rounding).  trap_overflow turns the far end of MPFR's range into an exception.
FP32_REAL = gmpy2.context(precision=24, emin=-148, emax=_EMAX, subnormalize=True,
                          round=gmpy2.RoundToNearest, trap_overflow=True)


def _working(prec: int, rnd):
    """Wide, directed working context for the Ziv loop (no subnormals, full range)."""
    return gmpy2.context(precision=prec, emin=_EMIN, emax=_EMAX, round=rnd,
                         subnormalize=False)


def _ufunc(f, nin):
    return np.frompyfunc(f, nin, 1)


class Fp32RealContext(ObjectArrayContext):
    """binary32 precision and gradual underflow on unbounded-exponent reals (MPFR)."""

    name = "fp32-real"
    kind = "rounded-real"
    reduction = "sequential"
    leaf_type = MPFR
    leaf_label = "gmpy2.mpfr (24-bit)"
    format_label = "fp32-real (p=24, subnormals to 2^-149, no overflow)"
    correctly_rounded = frozenset({"add", "sub", "mul", "div", "fma", "sqrt", "square",
                                   "neg", "abs", "maximum", "minimum", *FUNCTIONS,
                                   *BINARY_FUNCTIONS})
    description = ("binary32 significand and gradual underflow, unbounded exponent (never "
                   "overflows); every op correctly rounded (MPFR; sigmoid/softplus by a "
                   "Ziv loop); sum/matmul sequential")

    def __init__(self):
        c = FP32_REAL
        self._add = _ufunc(c.add, 2)
        self._sub = _ufunc(c.sub, 2)
        self._mul = _ufunc(c.mul, 2)
        self._div = _ufunc(c.div, 2)
        self._fma = _ufunc(c.fma, 3)
        self._sqrt = _ufunc(c.sqrt, 1)
        self._square = _ufunc(c.square, 1)
        self._round = _ufunc(c.plus, 1)
        self._neg = _ufunc(c.minus, 1)
        self._abs = _ufunc(c.abs, 1)
        self._fn = {fn.name: _ufunc(getattr(c, fn.mpfr), 1)
                    for fn in FUNCTIONS.values() if fn.mpfr is not None}
        self._zero, self._one = c.plus(0), c.plus(1)

    def _leaf(self, x):
        if isinstance(x, (float, np.floating)):
            xf = float(x)
            if xf != xf or xf in (float("inf"), float("-inf")):
                raise self._nonfinite("convert", xf)
            return self._guard("convert", lambda: FP32_REAL.plus(gmpy2.mpfr(xf, 53)))
        if isinstance(x, MPFR):
            if not gmpy2.is_finite(x):
                raise self._nonfinite("convert", x)
            return self._guard("convert", lambda: FP32_REAL.plus(x))  # exact input, one rounding
        q = _mpq_leaf(x)

        def once():
            # mpfr_set_q rounds the exact rational once to 24 bits; gmpy2 then subnormalizes
            # with the ternary value, so the 2^-149 grid is reached without double rounding.
            with FP32_REAL:
                return gmpy2.mpfr(q)
        return self._guard("convert", once)

    def _float_of(self, t) -> float:
        return float(_F64.plus(t))  # t is exact at 24 bits: one rounding to binary64

    def _guard(self, op, thunk):
        try:
            return thunk()
        except gmpy2.OverflowResultError:
            raise ContextError(f"context {self.name}: {op}: result exceeds MPFR's exponent "
                               f"range (about 2^(2^30)); fp32-real cannot represent it") from None

    def _to_mpq(self, t):
        return gmpy2.mpq(t)

    def _show(self, t) -> str:
        if isinstance(t, MPFR):
            f = float(t)
            return format(f, ".9g") if f not in (float("inf"), float("-inf")) else str(t)
        return str(t)

    # add, sub, mul, div, fma, square, neg, abs: the base's methods over the MPFR ufuncs
    # set in __init__ (neg/abs are exact, but run in the context so results keep 24 bits)
    def _sqrt_nonneg(self, a):
        return _object_result(self._sqrt(a))

    def _function(self, fn, a):
        """exp, log, ... (scalars.functions): MPFR's correctly rounded function where the
        entry names one; compositions (sigmoid, softplus) by Ziv's loop on the entry's
        directed bounds (correct_rounding.ziv), which ends because their values at
        nonzero dyadic arguments are transcendental (Lindemann-Weierstrass)."""
        op = fn.name
        a = self._function_arg(fn, a)
        if fn.mpfr is not None:
            return self._unary(op, self._fn[op], a)
        one = _ufunc(lambda x: correct_rounding.ziv(fn, x, FP32_REAL, 64), 1)
        return _object_result(self._guard(op, lambda: one(a)))

    def _function2_leaf(self, fn):
        """MPFR's correctly rounded function in the fp32-real context (an exact
        function's result is representable, so that is exact too)."""
        f = fn.mpfr_in(FP32_REAL)
        return lambda x, y: self._guard(fn.name, lambda: f(x, y))

    def _add_reduce_last(self, a):
        # numpy's object reduce is a plain left-to-right loop (never pairwise) and each
        # addition is the context's rounded add.
        return self._add.reduce(a, axis=-1) if a.shape[-1] > 1 else a[..., 0].copy()

    def _matmul_raw(self, a, b):
        # Sequential dot products, product rounded then sum rounded: run numpy's object
        # matmul (a C loop doing s = a0*b0; s = s + ai*bi) inside the fp32-real context.
        with gmpy2.context(FP32_REAL):
            return self._guard("matmul", lambda: np.matmul(a, b))


# Registration data, read by scalars.registry (this module does not import the registry).
CONTEXT_NAMES = {"fp32-real": lambda get: Fp32RealContext()}
