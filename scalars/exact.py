"""Exact rationals (``rational``) and the object-array machinery it shares with
``mpmath`` and ``fp32-real`` (:mod:`scalars.fp32_real`).

Values are ``ndarray(dtype=object)``: gmpy2 ``mpq`` for ``rational``.  Arithmetic runs through numpy's object loops (one C
loop calling the gmpy2 operation per entry), so there is no Python loop per element.

``rational`` is exact; an operation whose result is not rational (``tanh``, non-square
``sqrt``) raises :class:`ContextError` instead of approximating.
"""
from __future__ import annotations

from fractions import Fraction

import gmpy2
import numpy as np

from .arrayshape import ArrayShapeOps
from .base import as_object_array, check_broadcast, object_result as _object_result
from .errors import ContextError
from .kernels import literals

MPQ = type(gmpy2.mpq(0))
MPZ = type(gmpy2.mpz(0))
MPFR = type(gmpy2.mpfr(0))

# binary64 as an MPFR context: the exact route from a rational/mpfr to the nearest double
# (subnormalize makes MPFR round on the subnormal grid once, using its ternary value).
_F64 = gmpy2.context(precision=53, emin=-1073, emax=1024, subnormalize=True)


def describe_value(v) -> str:
    """Name the kind of a value (and the context it belongs to) for error messages."""
    if isinstance(v, np.ndarray):
        if v.dtype == object:
            if v.size == 0:
                return "an empty object ndarray"
            t = type(v.flat[0])
            owner = {MPQ: "rational", MPFR: "fp32-real"}.get(t)
            if owner is None and "mpmath" in t.__module__:
                ctx = getattr(v.flat[0], "context", None)
                owner = f"mpmath:{ctx.prec}" if hasattr(ctx, "prec") else "mpmath"
            if owner is None:
                return f"an object ndarray of {t.__name__} (not a context value; use convert)"
            return f"an object ndarray of {t.__name__} (a {owner} value)"
        if v.dtype.kind == "c":
            return f"a {v.dtype} ndarray (a complex128 value)"
        if v.dtype.kind in "fiub":
            return f"a {v.dtype} ndarray (a float64/binary-format value)"
        return f"a {v.dtype} ndarray"
    cls = type(v).__name__
    if hasattr(v, "lo") and hasattr(v, "hi"):
        return f"an {cls} (an interval-context value)"
    if hasattr(v, "primal") and hasattr(v, "tangent"):
        return f"a {cls} (a dual-context value)"
    return f"a {cls} {v!r:.60}"


class ObjectArrayContext(ArrayShapeOps):
    """Shared machinery of contexts whose values are object arrays of one scalar type.

    Subclasses set ``leaf_type`` (the scalar class), ``leaf_label`` and implement
    ``_leaf(x)`` (one exact-or-once-rounded conversion) and ``_to_mpq(x)`` (exact value).
    """

    leaf_type: type = object
    leaf_label: str = "?"
    finite_only: bool = True   # False: +-inf are values too (mpmath)
    format_label: str = ""

    # ------------------------------------------------------------ value checks
    def _arr(self, v, op: str) -> np.ndarray:
        if isinstance(v, self.leaf_type):
            return _object_result(v)
        if (isinstance(v, np.ndarray) and v.dtype == object
                and (v.size == 0 or isinstance(v.flat[0], self.leaf_type))):
            # Arrays are homogeneous by construction (every op returns leaf_type entries),
            # so the first entry identifies the context without a pass over all entries.
            return v
        raise ContextError(
            f"context {self.name}: {op}: got {describe_value(v)}, not a {self.name} value "
            f"(expected ndarray(dtype=object) of {self.leaf_label}; use "
            f"scalars.get({self.name!r}).convert(...))")

    def _leaf_array(self, x) -> np.ndarray:
        return as_object_array(x, self._leaf)

    def properties(self) -> dict:
        p = super().properties()
        p["format"] = self.format_label
        return p

    # -------------------------------------------------------------- conversion
    def convert(self, x):
        if isinstance(x, np.ndarray) and x.dtype.kind == "c" or isinstance(x, complex):
            raise ContextError(f"context {self.name}: convert: complex values have no "
                               f"{self.name} value")
        if hasattr(x, "lo") and hasattr(x, "hi") or hasattr(x, "primal"):
            raise ContextError(f"context {self.name}: convert: got {describe_value(x)}; "
                               f"convert its components explicitly")
        if isinstance(x, np.ndarray) and x.dtype.kind == "f":
            bad = ~np.isfinite(x) if self.finite_only else np.isnan(x)
            if bad.any():
                raise self._nonfinite("convert", x[bad].reshape(-1)[0])
            return _object_result(np.frompyfunc(self._leaf, 1, 1)(x.astype(np.float64)))
        return self._leaf_array(x)

    def _nonfinite(self, op, value) -> ContextError:
        what = "finite values" if self.finite_only else "real numbers and +-inf"
        return ContextError(f"context {self.name}: {op}: {value} is not a real number; "
                            f"{self.name} holds {what} only")

    def to_float64(self, v) -> np.ndarray:
        """Nearest double to each exact value: one rounding, subnormals and overflow via MPFR."""
        a = self._arr(v, "to_float64")
        with _F64:
            r = np.frompyfunc(self._float_of, 1, 1)(a)
        return np.asarray(r, dtype=np.float64).reshape(a.shape)

    def _float_of(self, t) -> float:
        """float64 of one entry; runs inside the ``_F64`` context."""
        return float(gmpy2.mpfr(self._to_mpq(t)))

    def format(self, v, digits: int = 6) -> str:
        """Exact decimal rounding (half-even) of each value, ``%.{digits}f`` layout."""
        a = self._arr(v, "format")
        digits = int(digits)
        texts = [_fixed(self._to_mpq(t), digits) for t in a.reshape(-1)]
        if a.ndim == 0:
            return texts[0]
        return "[" + ", ".join(texts) + "]"

    def zeros(self, shape):
        return np.full(_shape(shape), self._leaf(0), dtype=object)

    def ones(self, shape):
        return np.full(_shape(shape), self._leaf(1), dtype=object)

    def full(self, shape, value):
        v = self.convert(value)
        if v.shape != ():
            raise ContextError(f"context {self.name}: full: fill value must be a scalar, "
                               f"got shape {list(v.shape)}")
        return np.full(_shape(shape), v[()], dtype=object)

    # -------------------------------------------------------- generic helpers
    # The element operations: numpy's object loops call the leaf type's own operators
    # (exact for mpq, rounded at the context's precision for mpf); fp32-real replaces
    # them by ufuncs of its MPFR context.
    _add, _sub, _mul, _div = np.add, np.subtract, np.multiply, np.divide
    _neg, _abs = np.negative, np.absolute
    _square = staticmethod(lambda x: x * x)
    _fma = staticmethod(lambda x, y, z: x * y + z)

    def _guard(self, op, thunk):
        """Run one whole-array operation (fp32-real turns MPFR's overflow into an error)."""
        return thunk()

    def _binary(self, op, f, a, b):
        a = self._arr(a, op); b = self._arr(b, op)
        check_broadcast(self, op, a.shape, b.shape)
        return _object_result(self._guard(op, lambda: f(a, b)))

    def _unary(self, op, f, a):
        a = self._arr(a, op)
        return _object_result(self._guard(op, lambda: f(a)))

    def _function_arg(self, fn, a):
        """The argument of a scalar function as an array, refused (naming op, context and
        the first value) where it is outside the function's domain."""
        a = self._arr(a, fn.name)
        if fn.domain is not None:
            bad = fn.domain.outside(a)
            if bad.any():
                raise self._first_bad(fn.name, bad, a, why=fn.domain.why)
        return a

    def _first_bad(self, op, mask, *arrays, why: str) -> ContextError:
        """Error naming the op, the context and the operand values at the first bad entry."""
        mask = np.asarray(mask, dtype=bool)
        idx = tuple(int(i) for i in np.argwhere(mask)[0]) if mask.ndim else ()
        shown = ", ".join(self._show(np.broadcast_to(x, mask.shape)[idx]) for x in arrays)
        where = f" at index {list(idx)}" if idx else ""
        return ContextError(f"context {self.name}: {op}({shown}){where}: {why}")

    def _show(self, t) -> str:
        return str(t)

    def _function2(self, fn, a, b):
        """pow, atan2, ... (scalars.functions_binary): the domain check (a ContextError naming
        op, context and both values), then the subclass's ``_function2_leaf`` per entry."""
        op = fn.name
        a = self._arr(a, op); b = self._arr(b, op)
        shape = check_broadcast(self, op, a.shape, b.shape)
        if fn.domain is not None:
            bad = np.broadcast_to(np.asarray(fn.domain(a, b), dtype=bool), shape)
            if bad.any():
                raise self._first_bad(op, bad, a, b, why=fn.why)
        leaf = self._function2_leaf(fn)
        return _object_result(np.frompyfunc(leaf, 2, 1)(a, b))

    def _function2_leaf(self, fn):
        raise self.unsupported(fn.name)

    # ------------------------------------------------------------- arithmetic
    def add(self, a, b): return self._binary("add", self._add, a, b)
    def sub(self, a, b): return self._binary("sub", self._sub, a, b)
    def mul(self, a, b): return self._binary("mul", self._mul, a, b)
    def square(self, a): return self._unary("square", self._square, a)
    # neg/abs are exact, but fp32-real runs them in its context so results keep 24 bits
    def neg(self, a): return self._unary("neg", self._neg, a)
    def abs(self, a): return self._unary("abs", self._abs, a)

    #: the leaf type raises ZeroDivisionError itself (mpq): div skips the scan for zeros
    #: and looks for the first one only when that happens
    _leaf_div_raises = False

    def div(self, a, b):
        a = self._arr(a, "div"); b = self._arr(b, "div")
        shape = check_broadcast(self, "div", a.shape, b.shape)
        if self._leaf_div_raises:
            try:
                return _object_result(self._guard("div", lambda: self._div(a, b)))
            except ZeroDivisionError:
                pass
        zero = np.broadcast_to(np.asarray(np.equal(b, 0), dtype=bool), shape)
        if zero.any():
            raise self._first_bad("div", zero, a, b, why="division by zero")
        return _object_result(self._guard("div", lambda: self._div(a, b)))

    def fma(self, a, b, c):
        a = self._arr(a, "fma"); b = self._arr(b, "fma"); c = self._arr(c, "fma")
        check_broadcast(self, "fma", a.shape, b.shape, c.shape)
        return _object_result(self._guard("fma", lambda: self._fma(a, b, c)))

    def sqrt(self, a):
        a = self._arr(a, "sqrt")
        neg = np.asarray(np.less(a, 0), dtype=bool)
        if neg.any():
            raise self._first_bad("sqrt", neg, a, why="negative argument has no real sqrt")
        return self._sqrt_nonneg(a)

    def _sqrt_nonneg(self, a):
        raise self.unsupported("sqrt")

    # ---------------------------------------------------------- order and such
    def maximum(self, a, b): return self._binary("maximum", np.maximum, a, b)
    def minimum(self, a, b): return self._binary("minimum", np.minimum, a, b)

    def less(self, a, b):
        a = self._arr(a, "less"); b = self._arr(b, "less")
        check_broadcast(self, "less", a.shape, b.shape)
        return np.asarray(np.less(a, b), dtype=bool)

    def heaviside(self, a):
        a = self._arr(a, "heaviside")
        pos = np.asarray(np.greater(a, 0), dtype=bool)
        return _object_result(np.where(pos, self._leaf(1), self._leaf(0)).astype(object))

    def sign(self, a):
        a = self._arr(a, "sign")
        pos = np.asarray(np.greater(a, 0), dtype=bool)
        neg = np.asarray(np.less(a, 0), dtype=bool)
        out = np.where(pos, self._leaf(1), np.where(neg, self._leaf(-1), self._leaf(0)))
        return _object_result(out.astype(object))

    def where(self, cond, a, b):
        cond = np.asarray(cond, dtype=bool)
        a = self._arr(a, "where"); b = self._arr(b, "where")
        check_broadcast(self, "where", cond.shape, a.shape, b.shape)
        return _object_result(np.where(cond, a, b).astype(object))

    def amax(self, a, axis=None, keepdims=False):
        a = self._arr(a, "amax")
        if a.size == 0:
            raise ContextError(f"context {self.name}: amax of an empty array {list(a.shape)}")
        try:
            return _object_result(np.max(a, axis=axis, keepdims=keepdims))
        except np.exceptions.AxisError as exc:
            raise ContextError(f"context {self.name}: amax axis={axis}: {exc}") from None

    def argmax(self, a, axis):
        a = self._arr(a, "argmax")
        if a.size == 0:
            raise ContextError(f"context {self.name}: argmax of an empty array "
                               f"{list(a.shape)}")
        try:
            return np.asarray(np.argmax(a, axis=axis))
        except np.exceptions.AxisError as exc:
            raise ContextError(f"context {self.name}: argmax axis={axis}: {exc}") from None

    # ------------------------------------------------------------- reductions
    def _add_reduce_last(self, a: np.ndarray) -> np.ndarray:
        """Left-to-right sum over the last axis of a C-contiguous array (one rounding each)."""
        return np.add.reduce(a, axis=-1)

    def sum(self, a, axis=None, keepdims=False):
        """Sequential sum: reduced axes are visited in C order, left to right."""
        a = self._arr(a, "sum")
        nd = a.ndim
        if axis is None:
            axes = tuple(range(nd))
        else:
            raw = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
            try:
                axes = tuple(sorted({_norm_axis(int(x), nd, self.name) for x in raw}))
            except TypeError:
                raise ContextError(f"context {self.name}: sum: bad axis {axis!r}") from None
        keep = [i for i in range(nd) if i not in axes]
        moved = np.transpose(a, keep + list(axes))
        rest = tuple(a.shape[i] for i in keep)
        n = int(np.prod([a.shape[i] for i in axes], dtype=np.int64))
        flat = np.ascontiguousarray(moved).reshape(rest + (n,))
        if n == 0:
            out = np.full(rest, self._leaf(0), dtype=object)
        else:
            out = _object_result(self._add_reduce_last(flat))
        if keepdims:
            out = out.reshape(tuple(1 if i in axes else a.shape[i] for i in range(nd)))
        return _object_result(out)

    def _matmul_raw(self, a, b):
        return np.matmul(a, b)

    def matmul(self, a, b):
        """numpy.matmul shape rules; each dot product summed left to right."""
        a = self._arr(a, "matmul"); b = self._arr(b, "matmul")
        if a.ndim == 0 or b.ndim == 0:
            raise ContextError(f"context {self.name}: matmul: operands must have at least "
                               f"one axis, got shapes {list(a.shape)} and {list(b.shape)}")
        ka = a.shape[-1]
        kb = b.shape[0] if b.ndim == 1 else b.shape[-2]
        if ka != kb:
            raise ContextError(f"context {self.name}: matmul: shapes {list(a.shape)} and "
                               f"{list(b.shape)} do not contract ({ka} != {kb})")
        try:
            if ka == 0:
                shape = np.matmul(np.zeros(a.shape), np.zeros(b.shape)).shape
                return np.full(shape, self._leaf(0), dtype=object)
            return _object_result(self._matmul_raw(a, b))
        except ValueError:
            raise ContextError(f"context {self.name}: matmul: shapes {list(a.shape)} and "
                               f"{list(b.shape)} do not broadcast") from None


def _shape(shape) -> tuple:
    """A shape given as an int or a sequence of ints."""
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(s) for s in shape)


def _norm_axis(ax: int, nd: int, name: str) -> int:
    if not -nd <= ax < max(nd, 1) or (nd == 0):
        raise ContextError(f"context {name}: sum: axis {ax} out of range for {nd}-d array")
    return ax % nd


def _fixed(q, digits: int) -> str:
    """``q`` rounded half-even to ``digits`` decimals, as ``"%.{digits}f"`` prints a float."""
    scaled = q * (MPZ(10) ** digits)
    n = gmpy2.f_div(scaled.numerator, scaled.denominator)  # mpz: no str() digit limit
    rem = scaled - n  # in [0, 1)
    if rem > gmpy2.mpq(1, 2) or (rem == gmpy2.mpq(1, 2) and n % 2 == 1):
        n += 1
    sign = "-" if (n < 0 or (n == 0 and q < 0)) else ""
    n = abs(n)
    s = n.digits().rjust(digits + 1, "0")
    body = s[:len(s) - digits] + ("." + s[len(s) - digits:] if digits > 0 else "")
    return sign + body


# ====================================================================== rational
def _mpq_leaf(x):
    """Exact rational value of one entry (ints, Fractions, mpq, floats, decimal strings)."""
    if isinstance(x, MPQ):
        return x
    if isinstance(x, (bool, np.bool_)):
        return gmpy2.mpq(int(x))
    if isinstance(x, (int, np.integer, MPZ)):
        return gmpy2.mpq(int(x))
    if isinstance(x, Fraction):
        return gmpy2.mpq(x.numerator, x.denominator)
    if isinstance(x, (float, np.floating)):
        xf = float(x)
        if xf != xf or xf in (float("inf"), float("-inf")):
            raise ContextError(f"context rational: convert: {xf} is not a rational number")
        return gmpy2.mpq(xf)  # every finite double is a dyadic rational: exact
    if isinstance(x, str):
        try:
            # bounded: a literal beyond 10^+-1000 is refused before 10^e is built
            f = literals.exact(x)
        except literals.LiteralError as exc:
            raise ContextError(f"context rational: convert: {exc}") from None
        return gmpy2.mpq(f.numerator, f.denominator)
    if isinstance(x, MPFR):
        if not gmpy2.is_finite(x):
            raise ContextError(f"context rational: convert: {x} is not a rational number")
        return gmpy2.mpq(x)
    if hasattr(x, "man_exp") or type(x).__name__ == "mpf":  # mpmath mpf: exact dyadic
        return _mpf_to_mpq(x, "rational")
    num, den = getattr(x, "numerator", None), getattr(x, "denominator", None)
    if num is not None and den is not None:
        return gmpy2.mpq(int(num), int(den))
    raise ContextError(f"context rational: convert: cannot convert {type(x).__name__} "
                       f"value {x!r} to an exact rational")


def _dyadic(man: int, exp: int):
    """The exact rational man * 2^exp (shifts: mpq powers depend on the gmpy2 context)."""
    if exp >= 0:
        return gmpy2.mpq(man << exp)
    return gmpy2.mpq(man, 1 << -exp)


def mpf_parts(x) -> tuple[int, int]:
    """(signed mantissa, exponent) of a finite mpmath mpf (``man_exp`` drops the sign)."""
    sign, man, exp, _ = x._mpf_
    return (-int(man) if sign else int(man)), int(exp)


def _mpf_to_mpq(x, name):
    import mpmath
    if not mpmath.isfinite(x):
        raise ContextError(f"context {name}: convert: {x} is not a finite real number")
    man, exp = mpf_parts(x)
    if man == 0:
        return gmpy2.mpq(0)
    return _dyadic(int(man), int(exp))


class RationalContext(ObjectArrayContext):
    """Exact arithmetic on gmpy2 ``mpq``: no rounding anywhere, order is irrelevant."""

    name = "rational"
    kind = "exact"
    exact = True
    exact_strings = True
    reduction = "sequential"
    leaf_type = MPQ
    leaf_label = "gmpy2.mpq"
    format_label = "exact rational (gmpy2 mpq)"
    correctly_rounded = frozenset({"add", "sub", "mul", "div", "fma", "neg", "abs", "square",
                                   "maximum", "minimum", "sum", "matmul"})
    description = ("exact rationals (gmpy2 mpq); sqrt only of perfect squares; "
                   "transcendental functions raise except at their rational points "
                   "(exp 0, log 1, sin 0, ...: scalars.functions)")

    _leaf_div_raises = True         # mpq / 0 raises ZeroDivisionError

    def _leaf(self, x):
        return _mpq_leaf(x)

    def _to_mpq(self, t):
        return t

    def exact_string(self, v) -> str:
        """Each entry as ``p/q`` (lowest terms, q > 0), in the bracket layout of format."""
        a = self._arr(v, "exact_string")
        texts = [f"{int(t.numerator)}/{int(t.denominator)}" for t in a.reshape(-1)]
        if a.ndim == 0:
            return texts[0]
        return "[" + ", ".join(texts) + "]"

    def _sqrt_nonneg(self, a):
        # mpq is kept in lowest terms, so sqrt(p/q) is rational iff p and q are squares.
        square = np.asarray(np.frompyfunc(
            lambda q: gmpy2.is_square(q.numerator) and gmpy2.is_square(q.denominator),
            1, 1)(a), dtype=bool)
        if not square.all():
            raise ContextError(
                f"context rational cannot compute sqrt honestly: sqrt({self._show_at(a, ~square)})"
                f" is irrational (only perfect rational squares have an exact sqrt)")
        root = np.frompyfunc(lambda q: gmpy2.mpq(gmpy2.isqrt(q.numerator),
                                                 gmpy2.isqrt(q.denominator)), 1, 1)
        return _object_result(root(a))

    def _show_at(self, a, mask):
        mask = np.asarray(mask, dtype=bool)
        idx = tuple(int(i) for i in np.argwhere(mask)[0]) if mask.ndim else ()
        where = f" at index {list(idx)}" if idx else ""
        return f"{a[idx]}{where}"

    def _function(self, fn, a):
        """exp, log, ... (scalars.functions): exact only at the entry's rational points
        (by Lindemann-Weierstrass there are no others); anywhere else a ContextError."""
        op = fn.name
        a = self._function_arg(fn, a)
        out = np.empty(a.shape, dtype=object)
        at = np.zeros(a.shape, dtype=bool)
        if fn.rational is not None:     # an exact rule (exp2 at integers, cbrt of cubes)
            flat, fo, fa = a.reshape(-1), out.reshape(-1), at.reshape(-1)
            for i in range(flat.size):
                v = fn.rational(flat[i])
                if v is not None:
                    fo[i], fa[i] = v, True
        for point, value in fn.rational_points.items():
            here = np.asarray(np.equal(a, point), dtype=bool)
            out[here] = gmpy2.mpq(value)
            at |= here
        if at.all():
            return out
        if fn.rational is not None:
            where = f"{op}({self._show_at(a, ~at)}) has no exact rational value here"
            only = ""
        elif fn.rational_points:
            where = f"{op}({self._show_at(a, ~at)}) is irrational"
            only = "; only " + ", ".join(f"{op}({p}) = {v}" for p, v in
                                         fn.rational_points.items()) + " is exact"
        else:
            where, only = f"{op} of a rational is irrational", ""
        raise ContextError(f"context rational cannot compute {op} honestly: {where}{only}")

    def _function2_leaf(self, fn):
        """The entry's exact rational rule (pow with an integer exponent, fmod, ...);
        elsewhere a ContextError naming op and context."""
        op = fn.name

        def leaf(x, y):
            v = None if fn.rational is None else fn.rational(x, y)
            if v is None:
                raise ContextError(f"context rational cannot compute {op} honestly: "
                                   f"{op}({x}, {y}) has no exact rational value here")
            return v
        return leaf

    def _matmul_raw(self, a, b):
        # Exact, so the order does not matter; numpy's object matmul is one C loop of
        # mpq multiply-adds (no Python loop per entry).
        return np.matmul(a, b)


CONTEXT_NAMES = {"rational": lambda get: RationalContext()}
