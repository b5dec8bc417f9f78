"""``mpmath:PREC``: mpmath binary floating point at PREC bits, the lab's real-number oracle.

Each precision gets its own private ``mpmath.MPContext`` (prec fixed at PREC), so values
carry their precision with them and nothing touches mpmath's global ``mp`` state.  Values
are ``ndarray(dtype=object)`` of that context's ``mpf``; arithmetic runs through numpy's
object loops.  ``+ - * / sqrt fma`` are correctly rounded (mpmath rounds every basic
operation to nearest); ``exp log tanh sin cos erf`` come from mpmath's libmp at PREC bits
(accurate to about an ulp, not guaranteed correctly rounded); sigmoid and softplus are
evaluated with 32 guard bits and rounded once to PREC.  Reductions are sequential.
"""
from __future__ import annotations

import mpmath
import numpy as np
from mpmath import libmp

from .base import check_broadcast
from .errors import ContextError
from .exact import (MPFR, MPQ, ObjectArrayContext, _dyadic, _mpq_leaf, _object_result,
                    mpf_parts)
from .registry import register_family, register_name

_MPF_BASE = mpmath.ctx_mp_python._mpf
_RND = libmp.round_nearest
_GUARD = 32  # extra bits for the composite functions (sigmoid, softplus)
MAX_PREC = 1 << 20


class MpmathContext(ObjectArrayContext):
    """mpmath ``mpf`` at a fixed precision; ops round to nearest at PREC bits."""

    kind = "multiprecision"
    reduction = "sequential"
    leaf_label = "mpmath mpf"
    finite_only = False
    correctly_rounded = frozenset({"add", "sub", "mul", "div", "fma", "sqrt", "square",
                                   "neg", "abs", "maximum", "minimum"})

    def __init__(self, prec: int):
        if not 2 <= prec <= MAX_PREC:
            raise ContextError(f"context mpmath:{prec}: precision must be between 2 and "
                               f"{MAX_PREC} bits")
        self.prec = int(prec)
        self.name = f"mpmath:{self.prec}"
        self.format_label = f"mpmath mpf, {self.prec}-bit significand, unbounded exponent"
        self.description = (f"mpmath at {self.prec} bits (real-number oracle); basic ops "
                            f"correctly rounded, functions accurate to ~1 ulp; sequential sums")
        self.mp = mpmath.MPContext()
        self.mp.prec = self.prec
        self.leaf_type = self.mp.mpf
        self._make = self.mp.make_mpf
        self._zero = self._make(libmp.fzero)
        self._wide = mpmath.MPContext()
        self._wide.prec = self.prec + _GUARD

    # ------------------------------------------------------------ conversion
    def _leaf(self, x):
        p = self.prec
        if isinstance(x, self.leaf_type):
            return x
        if isinstance(x, _MPF_BASE):  # an mpf of another precision: round once
            return self._make(libmp.mpf_pos(x._mpf_, p, _RND))
        if isinstance(x, (float, np.floating)):
            xf = float(x)
            if xf != xf:
                raise ContextError(f"context {self.name}: convert: NaN is not a real number")
            # from_float is exact for finite doubles when p >= 53, else one rounding;
            # +-inf are kept (interval endpoints of the whole line need them).
            return self._make(libmp.from_float(xf, p, _RND))
        if isinstance(x, (bool, np.bool_)):
            return self._make(libmp.from_int(int(x), p, _RND))
        if isinstance(x, (int, np.integer)):
            return self._make(libmp.from_int(int(x), p, _RND))
        if isinstance(x, MPFR):
            if x != x:
                raise ContextError(f"context {self.name}: convert: NaN is not a real number")
            if x in (float("inf"), float("-inf")):
                return self._make(libmp.from_float(float(x), p, _RND))
        try:
            q = _mpq_leaf(x)
        except ContextError as exc:
            raise ContextError(str(exc).replace("context rational", f"context {self.name}"))
        # from_rational: the exact rational rounded once to nearest at PREC bits.
        return self._make(libmp.from_rational(int(q.numerator), int(q.denominator), p, _RND))

    def _to_mpq(self, t):
        if not self.mp.isfinite(t):
            raise ContextError(f"context {self.name}: {t} has no exact rational value")
        man, exp = mpf_parts(t)
        if man == 0:
            return MPQ(0)
        return _dyadic(int(man), int(exp))

    def _float_of(self, t) -> float:
        if not self.mp.isfinite(t):
            return float(t)  # +-inf
        man, exp = mpf_parts(t)
        mag = int(exp) + int(man).bit_length()  # |t| < 2^mag
        if mag > 1100:  # mpf exponents are unbounded: avoid building a huge rational
            return float("inf") if man > 0 else float("-inf")
        if mag < -1100:
            return 0.0 if man >= 0 else -0.0
        return super()._float_of(t)

    def _text(self, t, digits: int) -> str:
        if not self.mp.isfinite(t):
            return str(t)
        man, exp = mpf_parts(t)
        if man != 0 and int(exp) + int(man).bit_length() < -4 * digits - 8:
            return ("-" if man < 0 else "") + "0." + "0" * digits if digits else (
                "-0" if man < 0 else "0")  # far below half a unit in the last place
        if int(exp) + int(man).bit_length() > 20000:  # thousands of digits: use e-notation
            return mpmath.nstr(t, max(digits, 1) + 1, min_fixed=1, max_fixed=0)
        from .exact import _fixed
        return _fixed(self._to_mpq(t), digits)

    def format(self, v, digits: int = 6) -> str:
        a = self._arr(v, "format")
        texts = [self._text(t, int(digits)) for t in a.reshape(-1)]
        return texts[0] if a.ndim == 0 else "[" + ", ".join(texts) + "]"

    # ----------------------------------------------------------- arithmetic
    def add(self, a, b): return self._binary("add", np.add, a, b)
    def sub(self, a, b): return self._binary("sub", np.subtract, a, b)
    def mul(self, a, b): return self._binary("mul", np.multiply, a, b)
    def square(self, a): return self._unary("square", lambda x: x * x, a)

    def div(self, a, b):
        a = self._arr(a, "div"); b = self._arr(b, "div")
        shape = check_broadcast(self, "div", a.shape, b.shape)
        zero = np.broadcast_to(np.asarray(np.equal(b, 0), dtype=bool), shape)
        if zero.any():
            raise self._first_bad("div", zero, a, b, why="division by zero")
        return _object_result(np.divide(a, b))

    def fma(self, a, b, c):
        a = self._arr(a, "fma"); b = self._arr(b, "fma"); c = self._arr(c, "fma")
        check_broadcast(self, "fma", a.shape, b.shape, c.shape)
        p, make = self.prec, self._make
        # exact product (prec=0), then one rounding of the sum
        f = np.frompyfunc(lambda x, y, z: make(libmp.mpf_add(
            libmp.mpf_mul(x._mpf_, y._mpf_), z._mpf_, p, _RND)), 3, 1)
        return _object_result(f(a, b, c))

    def _lib(self, op, fn, a):
        a = self._arr(a, op)
        p, make = self.prec, self._make
        return _object_result(np.frompyfunc(lambda x: make(fn(x._mpf_, p, _RND)), 1, 1)(a))

    def sqrt(self, a):
        a = self._arr(a, "sqrt")
        neg = np.asarray(np.less(a, 0), dtype=bool)
        if neg.any():
            raise self._first_bad("sqrt", neg, a, why="negative argument has no real sqrt")
        return self._lib("sqrt", libmp.mpf_sqrt, a)

    def log(self, a):
        a = self._arr(a, "log")
        bad = np.asarray(np.less_equal(a, 0), dtype=bool)
        if bad.any():
            raise self._first_bad("log", bad, a, why="log of a non-positive value")
        return self._lib("log", libmp.mpf_log, a)

    def exp(self, a): return self._lib("exp", libmp.mpf_exp, a)
    def tanh(self, a): return self._lib("tanh", libmp.mpf_tanh, a)
    def sin(self, a): return self._lib("sin", libmp.mpf_sin, a)
    def cos(self, a): return self._lib("cos", libmp.mpf_cos, a)
    def erf(self, a): return self._lib("erf", libmp.mpf_erf, a)

    def sigmoid(self, a):
        wp = self.prec + _GUARD

        def one(x):
            # 1 / (1 + exp(-x)) at PREC+32 bits, then the division rounds to PREC.
            e = libmp.mpf_exp(libmp.mpf_neg(x), wp, _RND)
            return libmp.mpf_div(libmp.fone, libmp.mpf_add(libmp.fone, e, wp, _RND),
                                 self.prec, _RND)
        return self._lib("sigmoid", lambda x, p, r: one(x), a)

    def softplus(self, a):
        wp = self.prec + _GUARD

        def one(x):
            # max(x, 0) + log1p(exp(-|x|)): no overflow for large |x|.
            e = libmp.mpf_exp(libmp.mpf_neg(libmp.mpf_abs(x)), wp, _RND)
            l1p = self._wide.log1p(self._wide.make_mpf(e))._mpf_  # accurate for tiny e
            base = x if libmp.mpf_sign(x) > 0 else libmp.fzero
            return libmp.mpf_add(base, l1p, self.prec, _RND)
        return self._lib("softplus", lambda x, p, r: one(x), a)


def _family(m):
    return MpmathContext(int(m.group(1)))


register_family(r"mpmath:(\d+)", _family, "mpmath:PREC")
register_name("mpmath:200", lambda: MpmathContext(200))
register_name("mpmath:53", lambda: MpmathContext(53))
