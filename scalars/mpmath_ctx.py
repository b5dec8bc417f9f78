"""``mpmath:PREC``: mpmath binary floating point at PREC bits, the lab's real-number oracle.

Each precision gets its own private ``mpmath.MPContext`` (prec fixed at PREC), so values
carry their precision with them and nothing touches mpmath's global ``mp`` state.  Values
are ``ndarray(dtype=object)`` of that context's ``mpf``; arithmetic runs through numpy's
object loops.  ``+ - * / sqrt fma`` are correctly rounded (mpmath rounds every basic
operation to nearest); the functions of :mod:`scalars.functions` come from mpmath's libmp
at PREC bits where mpmath has them (accurate to about an ulp, not guaranteed correctly
rounded); compositions (sigmoid, softplus) are evaluated with 32 guard bits and rounded
once to PREC.  Reductions are sequential.
"""
from __future__ import annotations

import mpmath
import numpy as np
from mpmath import libmp

from .base import check_broadcast, object_result as _object_result
from .errors import ContextError
from .exact import MPFR, MPQ, ObjectArrayContext, _dyadic, _mpq_leaf, mpf_parts

_MPF_BASE = mpmath.ctx_mp_python._mpf
_RND = libmp.round_nearest
_GUARD = 32  # extra bits for the composite functions (sigmoid, softplus)
MAX_PREC = 1 << 20


# Results whose binary exponent would pass 2^62 (exp of 1e19, pow(0.5, exp(1e13))) are
# refused by name: mpmath's exponents are unbounded Python integers, and building such a
# result asks GMP for an integer of ~2^62 bits, which aborts the whole process.
_EXP_CAP = 62
_GROWS = frozenset({"exp", "exp2", "expm1", "sinh", "cosh", "tgamma"})
# ... but only toward +inf for the increasing exponentials: exp(x) for x <= -2^62 (GPT-2's
# additive attention mask is -3.4e38) is a tiny positive value that mpmath builds by
# shifting an exponent, no big integer; every rounded op on it compares exponents.  Only
# its exact rational (``_to_mpq``) would need 2^|e|: that is refused by name instead.
_GROWS_UP_ONLY = frozenset({"exp", "exp2", "expm1"})


def _log2_mag(x_mpf) -> int:
    """floor(log2 |x|) + 1 of a finite nonzero mpf (its exponent plus bit count)."""
    return int(x_mpf[2]) + int(x_mpf[3])


def _pow_too_big(x_mpf, y_mpf) -> bool:
    """Whether |y log2|x|| may exceed 2^_EXP_CAP (x, y finite; x not 0 or +-1)."""
    if not x_mpf[1] or not y_mpf[1]:
        return False
    e = _log2_mag(x_mpf)            # log2|x| lies in [e - 1, e)
    lg = max(abs(e), abs(e - 1))
    if lg == 0:                      # 1/2 <= |x| < 1 ... |x| < 2: |log2|x|| <= 1
        lg = 1
    return _log2_mag(y_mpf) + lg.bit_length() > _EXP_CAP


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
        if abs(int(exp)) > 1 << _EXP_CAP:
            raise ContextError(f"context {self.name}: {mpmath.nstr(t, 8)} has a binary "
                               f"exponent beyond 2^{_EXP_CAP}: its exact rational is too "
                               f"large to build")
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
    # add, sub, mul, square, div: the base's numpy object loops over mpf operators
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

    def _sqrt_nonneg(self, a):
        return self._lib("sqrt", libmp.mpf_sqrt, a)

    def _function2_leaf(self, fn):
        """pow, atan2, hypot: ``mpmath2`` at PREC+32 bits rounded once to PREC (NaN where
        mpmath's result is not real); the exact functions (fmod, remainder, fmax, fmin,
        copysign): their exact rational value rounded once; infinite or NaN operands by
        float64's special cases (exact there)."""
        p, make, wide = self.prec, self._make, self._wide
        special = (libmp.finf, libmp.fninf, libmp.fnan)

        def leaf(x, y):
            if x._mpf_ in special or y._mpf_ in special:
                return make(libmp.from_float(float(fn.eval_f64(float(x), float(y))), p, _RND))
            if fn.name == "pow" and _pow_too_big(x._mpf_, y._mpf_) \
                    and abs(x) != 1 and x != 0:
                raise ContextError(
                    f"context {self.name}: pow: pow({mpmath.nstr(x, 8)}, "
                    f"{mpmath.nstr(y, 8)}) has a binary exponent beyond 2^{_EXP_CAP}, "
                    f"which this context cannot hold")
            if fn.mpmath2 is None:
                v = fn.rational(self._to_mpq(x), self._to_mpq(y))
                if v is None:
                    return make(libmp.fnan)
                return make(libmp.from_rational(int(v.numerator), int(v.denominator), p, _RND))
            v = fn.mpmath2(wide, wide.make_mpf(x._mpf_), wide.make_mpf(y._mpf_))
            if not isinstance(v, wide.mpf):
                return make(libmp.fnan)
            return make(libmp.mpf_pos(v._mpf_, p, _RND))
        return leaf

    def _function(self, fn, a):
        """exp, log, ... (scalars.functions): mpmath's libmp function at PREC bits where the
        entry names one; a composition (sigmoid, softplus) at PREC+32 bits, rounded once."""
        a = self._function_arg(fn, a)
        if fn.name in _GROWS:
            up_only = fn.name in _GROWS_UP_ONLY
            huge = np.asarray(np.frompyfunc(lambda x: x._mpf_[1] != 0 and x._mpf_ not in (
                libmp.finf, libmp.fninf, libmp.fnan) and _log2_mag(x._mpf_) > _EXP_CAP
                and not (up_only and x._mpf_[0]), 1, 1)(a), dtype=bool)
            if np.any(huge):
                raise self._first_bad(fn.name, huge, a, why=(
                    f"|x| >= 2^{_EXP_CAP}: the result's binary exponent is beyond what this "
                    f"context can hold"))
        if isinstance(fn.mpmath, str):
            return self._lib(fn.name, getattr(libmp, "mpf_" + fn.mpmath), a)
        wide, p = self._wide, self.prec
        return self._lib(fn.name, lambda x, _p, _r: libmp.mpf_pos(
            fn.mpmath(wide, wide.make_mpf(x))._mpf_, p, _RND), a)


# Registration data, read by scalars.registry (this module does not import the registry).
CONTEXT_NAMES = {"mpmath:200": lambda get: MpmathContext(200),
                 "mpmath:53": lambda get: MpmathContext(53)}
CONTEXT_FAMILIES = ((r"mpmath:(\d+)", lambda m, get: MpmathContext(int(m.group(1))),
                     "mpmath:PREC"),)
