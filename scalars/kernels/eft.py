"""Error-free transformations (EFTs) on float64: the one implementation in scalarlab.

An EFT writes the exact result of one floating-point operation as the rounded result plus
an error term that is itself a float64, with no approximation:

* :func:`two_sum` -- ``a + b = s + e`` exactly, ``s = RN(a + b)`` (Knuth's TwoSum: six
  flops, no branch, no precondition on the order of |a| and |b|);
* :func:`two_prod` -- ``a * b = p + e`` exactly, ``p = RN(a * b)``, with ``e`` from one
  fused multiply-add (exact as long as ``e`` does not underflow, i.e. |p| >= 2^-969 or so);
* :func:`err_fma` -- the sign-exact error of ``r = fma(a, b, c)`` (Boldo & Muller's ErrFma);
* :func:`to_odd` -- round-to-odd at 53 bits of an EFT pair ``r + t`` (the sticky bit that
  makes a later rounding to p <= 51 bits correct, Boldo & Melquiond 2008);
* :func:`fma` -- the correctly rounded ``a * b + c`` (LLVM's ``llvm.fma``: the FMA
  instruction, or libm's exact ``fma``/``fmaf`` where the CPU has none).

These are Numba functions on float64 *scalars*, meant to be called from other compiled
kernels (:mod:`scalars.kernels.binary_format`, :mod:`scalars.kernels.directed`); Numba keeps IEEE
semantics (no fast-math, no contraction of ``a*b + c`` into an fma), which the EFTs need.
Array versions with numpy broadcasting are ufuncs built on first call: :data:`fma_f64` and
:data:`prod_err`.
Overflow anywhere makes an EFT meaningless (inf - inf); callers check finiteness.
"""
from __future__ import annotations

import math

import numba
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .lazy_ufunc import lazy_vectorize

# Compiled once and linked into each calling kernel, where LLVM inlines them.  Numba's
# on-disk cache of a *calling* module does not notice edits here: after changing this file,
# delete scalars/__pycache__/*.nbi and *.nbc (or touch the calling modules).
_eft = numba.njit(cache=True, error_model="numpy")


# ---------------------------------------------------------------- LLVM intrinsics
@intrinsic
def f2i(typingctx, x):
    """Bit pattern of a float64 as int64 (an LLVM bitcast, free)."""
    sig = types.int64(types.float64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))
    return sig, codegen


@intrinsic
def i2f(typingctx, x):
    """float64 with the given int64 bit pattern."""
    sig = types.float64(types.int64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return sig, codegen


@intrinsic
def fma(typingctx, a, b, c):
    """Correctly rounded a*b + c in float64 or float32 (``llvm.fma``: the FMA instruction,
    or libm's exact ``fma``/``fmaf`` where the CPU has none)."""
    if not (isinstance(a, types.Float) and a == b == c):
        return None
    sig = a(a, b, c)
    width = a.bitwidth

    def codegen(context, builder, signature, args):
        t = ir.FloatType() if width == 32 else ir.DoubleType()
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(t, [t, t, t]),
                                            f"llvm.fma.f{width}")
        return builder.call(fn, args)
    return sig, codegen


# ---------------------------------------------------------------- transformations
@_eft
def two_sum(a, b):
    """(s, e): s = RN(a + b) and a + b = s + e exactly (Knuth).  a - b is two_sum(a, -b):
    IEEE defines subtraction as the addition of the negation, signed zeros included."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@_eft
def two_prod(a, b):
    """(p, e): p = RN(a * b) and a * b = p + e, e = fma(a, b, -p).  Exact whenever e does
    not underflow (the exact error is a multiple of 2^-1074 only if a*b's quantum is)."""
    p = a * b
    return p, fma(a, b, -p)


@_eft
def err_fma(a, b, c, r):
    """Sign-exact error of r = fma(a, b, c): a*b + c - r as one float64 whose sign is that
    of the exact error (Boldo & Muller's ErrFma; no underflow or overflow assumed)."""
    u1, u2 = two_prod(a, b)
    al, z = two_sum(c, u2)
    b1, b2 = two_sum(u1, al)
    g = (b1 - r) + b2
    return g + z


@_eft
def to_odd(r, t):
    """Round-to-odd at 53 bits of the exact value r + t (r = RN_53, |t| <= ulp(r)/2): move
    r one ulp toward the exact value when inexact and r's last bit is even."""
    if t != 0.0 and abs(r) < math.inf:
        b = f2i(r)
        if (b & 1) == 0:
            if (t > 0.0) == (r > 0.0):
                b += 1
            else:
                b -= 1
            r = i2f(b)
    return r


# ---------------------------------------------------------------- array versions
# Built on first call (scalars.kernels.lazy_ufunc): every kernel module imports this one,
# and an eager ufunc costs its build in every process that imports any kernel.
@lazy_vectorize("float64(float64, float64, float64)")
def fma_f64(a, b, c):
    """Correctly rounded a*b + c on float64 arrays (numpy broadcasting), IEEE special
    cases (signed zeros, inf, NaN, subnormals) as the hardware operation gives them."""
    return fma(a, b, c)


@lazy_vectorize("float64(float64, float64)")
def prod_err(a, b):
    """The error term of :func:`two_prod`: a*b - RN(a*b), elementwise (exact where it does
    not underflow; NaN where the product overflows)."""
    return two_prod(a, b)[1]
