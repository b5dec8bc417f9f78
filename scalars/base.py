"""The scalar-context contract: one method vocabulary, on whole arrays, in every context.

A *context* gives meaning to arithmetic.  Every package above ``scalars`` (the IR fold,
the tape, IBP, the experiments) is written only against the methods listed here, so the
same graph or program runs exactly, in MPFR, in any IEEE binary format, over intervals or
over duals by passing another context.

Value representations (``ctx.shape(v)`` works on all of them):

* float64, binary formats: ``numpy.ndarray`` of float64 (binary-format entries are exactly
  representable in the format); complex128: complex ndarray.
* rational (gmpy2 ``mpq``), mpmath (``mpf``), fp32-real (``mpfr``): ``ndarray(dtype=object)``.
* intervals: :class:`scalars.values.Interval` ``(lo, hi)`` of base-context arrays.
* duals: :class:`scalars.values.Dual` ``(primal, tangent)`` of base-context arrays.

Scalars are 0-d arrays (shape ``()``).  Broadcasting follows numpy's rules; a shape that
does not broadcast is a :class:`ContextError` naming the op, the context and both shapes.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Any, Iterable, Sequence

import numpy as np

from .errors import ContextError
from .kernels import literals
from .functions import FUNCTIONS
from .functions_binary import BINARY_FUNCTIONS

# Every method name of the vocabulary, grouped as DESIGN.md lists them.  Tests iterate
# over these; ``Context.supports(op)`` answers whether a context can do one honestly.
ELEMENTWISE_BINARY = ("add", "sub", "mul", "div", "maximum", "minimum")
# The functions (exp, log, ...) are declared once in scalars.functions.
TRANSCENDENTAL = tuple(FUNCTIONS)
ELEMENTWISE_UNARY = ("neg", "abs", "sqrt", "square", *TRANSCENDENTAL)
# The binary functions (pow, atan2, ...) are declared once in scalars.functions_binary.
BINARY_TRANSCENDENTAL = tuple(BINARY_FUNCTIONS)
VOCABULARY = (
    "convert", "to_float64", "format", "zeros", "ones", "full",
    *ELEMENTWISE_BINARY, *ELEMENTWISE_UNARY, *BINARY_TRANSCENDENTAL, "fma",
    "sum", "amax", "matmul", "heaviside", "sign", "where", "less", "argmax",
    "reshape", "transpose", "concat", "stack", "take", "broadcast_to", "shape",
)


class Context:
    """Base class of all scalar contexts.  Subclasses override the arithmetic.

    Capability flags (read these instead of ``isinstance``):

    ``name``               registry name (``"binary32"``, ``"interval:mpmath:200"``, ...)
    ``exact``              results are exact (rational)
    ``is_interval``        values are :class:`Interval` enclosures
    ``is_dual``            values are :class:`Dual` pairs
    ``fmt``                the :class:`scalars.formats.Format` of the values, or ``None``
    ``correctly_rounded``  frozenset of op names whose results are correctly rounded
    ``reduction``          ``"sequential"``, ``"pairwise"`` or ``"native"``
    ``fma_dot``            dot products round once per multiply-add (fma) instead of twice
    ``kind``               short family label used in listings
    ``exact_strings``      ``exact_string(v)`` gives each entry's exact text
    ``mp``                 the ``mpmath.MPContext`` of an mpmath-valued context, else ``None``
    ``accumulation``       the :class:`Format` sums and dot products accumulate in before one
                           rounding to ``fmt`` (mixed precision ``STORAGE@ACCUM``), else ``None``

    Interval contexts add ``endpoint_kind``, ``endpoint_format``, ``float64_endpoints`` and
    ``has_base(ctx)`` (``ctx`` is the base whose point runs the boxes also enclose).
    """

    name: str = "?"
    kind: str = "?"
    exact: bool = False
    is_interval: bool = False
    is_dual: bool = False
    fmt = None
    correctly_rounded: frozenset = frozenset()
    reduction: str = "native"
    fma_dot: bool = False
    exact_strings: bool = False
    mp = None
    accumulation = None
    description: str = ""

    # ------------------------------------------------------------------ helpers
    def fail(self, op: str, why: str) -> ContextError:
        """Build the standard error: names the context and the op."""
        return ContextError(f"context {self.name}: {op}: {why}")

    def unsupported(self, op: str, why: str = "") -> ContextError:
        extra = f" ({why})" if why else ""
        return ContextError(f"context {self.name} cannot compute {op} honestly{extra}")

    def supports(self, op: str) -> bool:
        """True when ``op`` can be computed in this context without raising by design."""
        return op in VOCABULARY

    def properties(self) -> dict:
        """A JSON-able description used by ``scalarlab contexts``."""
        return {
            "name": self.name,
            "kind": self.kind,
            "exact": self.exact,
            "interval": self.is_interval,
            "dual": self.is_dual,
            "format": None if self.fmt is None else self.fmt.name,
            "reduction": self.reduction + ("+fma" if self.fma_dot else ""),
            "correctly_rounded": sorted(self.correctly_rounded),
            "description": self.description,
        }

    def __repr__(self) -> str:
        return f"<context {self.name}>"

    # ------------------------------------------------------------- vocabulary
    # Conversion.  ``convert`` accepts float64 arrays, Python/numpy ints and floats,
    # ``Fraction``/``mpq``, decimal strings and nested lists of these; each entry is
    # converted with ONE correct rounding into the context.
    def convert(self, x: Any): raise self.unsupported("convert")
    def to_float64(self, v) -> np.ndarray: raise self.unsupported("to_float64")
    def format(self, v, digits: int = 6) -> str: raise self.unsupported("format")
    def zeros(self, shape): raise self.unsupported("zeros")
    def ones(self, shape): raise self.unsupported("ones")
    def full(self, shape, value): raise self.unsupported("full")

    # Elementwise arithmetic (numpy broadcasting).
    def add(self, a, b): raise self.unsupported("add")
    def sub(self, a, b): raise self.unsupported("sub")
    def mul(self, a, b): raise self.unsupported("mul")
    def div(self, a, b): raise self.unsupported("div")
    def fma(self, a, b, c): raise self.unsupported("fma")           # a*b + c, one rounding
    def neg(self, a): raise self.unsupported("neg")
    def abs(self, a): raise self.unsupported("abs")
    def sqrt(self, a): raise self.unsupported("sqrt")
    def square(self, a): raise self.unsupported("square")            # a*a (tight for intervals)
    def maximum(self, a, b): raise self.unsupported("maximum")
    def minimum(self, a, b): raise self.unsupported("minimum")
    # The functions of scalars.functions (exp, log, tanh, ...): one method each, generated
    # below, calling this hook with the function's entry.  A context family implements
    # the hook once, reading the entry (float64 evaluator, MPFR, derivative, ...).
    def _function(self, fn, a): raise self.unsupported(fn.name)
    # Likewise the binary functions of scalars.functions_binary (pow, atan2, ...): the hook
    # ``_function2(fn, a, b)`` (numpy broadcasting of a and b).
    def _function2(self, fn, a, b): raise self.unsupported(fn.name)

    # Piecewise helpers, as context values: heaviside(x) = 1 where x > 0 else 0;
    # sign(x) in {-1, 0, 1}.  Interval contexts return enclosures ([0, 1] across 0).
    def heaviside(self, a): raise self.unsupported("heaviside")
    def sign(self, a): raise self.unsupported("sign")
    # Comparisons return plain numpy bool arrays (point contexts only).
    def less(self, a, b) -> np.ndarray: raise self.unsupported("less")
    def where(self, cond, a, b): raise self.unsupported("where")

    # Reductions.  ``sum`` follows ``self.reduction`` (sequential = left to right, one
    # rounding per addition).  ``axis`` is an int, a tuple of ints or None (all axes).
    def sum(self, a, axis=None, keepdims: bool = False): raise self.unsupported("sum")
    def amax(self, a, axis=None, keepdims: bool = False): raise self.unsupported("amax")
    def argmax(self, a, axis: int) -> np.ndarray: raise self.unsupported("argmax")
    # matmul follows numpy.matmul's shape rules (batched, 1-d promotion); dot products
    # round each product and each addition (sequential) unless ``fma_dot``.
    def matmul(self, a, b): raise self.unsupported("matmul")

    # A layer's product and bias.  The linear and conv rules call these, so a context
    # decides where a bias is added: here, after the product's rounding, with an ``add`` of
    # its own; a mixed-precision context adds it inside the accumulator before the one
    # rounding to storage, as torch, oneDNN and cuBLAS do (scalars/mixed.py).
    def matmul_add(self, a, b, c):
        """``a @ b + c``, ``c`` broadcast onto the product."""
        return self.add(self.matmul(a, b), c)

    def affine(self, x, W, b):
        """A dense layer ``x W^T + b`` (``W`` is [out, in])."""
        return self.matmul_add(x, self.transpose(W), b)

    # Shape operations: never round, work on every value representation.
    def shape(self, v) -> tuple: raise self.unsupported("shape")
    def reshape(self, a, shape): raise self.unsupported("reshape")
    def transpose(self, a, axes=None): raise self.unsupported("transpose")
    def concat(self, xs: Sequence, axis: int = 0): raise self.unsupported("concat")
    def stack(self, xs: Sequence, axis: int = 0): raise self.unsupported("stack")
    def take(self, a, indices, axis: int): raise self.unsupported("take")
    def broadcast_to(self, a, shape): raise self.unsupported("broadcast_to")


def _function_method(fn):
    def method(self, a):
        return self._function(fn, a)
    method.__name__ = method.__qualname__ = fn.name
    method.__doc__ = f"{fn.doc} (elementwise; declared in scalars.functions)"
    return method


for _fn in FUNCTIONS.values():
    setattr(Context, _fn.name, _function_method(_fn))


def _function2_method(fn):
    def method(self, a, b):
        return self._function2(fn, a, b)
    method.__name__ = method.__qualname__ = fn.name
    method.__doc__ = f"{fn.doc} (elementwise, broadcasting; declared in scalars.functions_binary)"
    return method


for _fn2 in BINARY_FUNCTIONS.values():
    setattr(Context, _fn2.name, _function2_method(_fn2))


def is_decimal_string(x) -> bool:
    return isinstance(x, str)


def to_fraction(x) -> Fraction:
    """Exact rational value of a Python number, numpy scalar, mpq or decimal string."""
    if isinstance(x, Fraction):
        return x
    if isinstance(x, str):
        # bounded: a literal beyond 10^+-1000 is refused before 10^e is built
        return literals.exact(x)
    if isinstance(x, (bool, np.bool_)):
        return Fraction(int(x))
    if isinstance(x, (int, np.integer)):
        return Fraction(int(x))
    if isinstance(x, (float, np.floating)):
        xf = float(x)
        if xf != xf or xf in (float("inf"), float("-inf")):
            raise ContextError(f"{xf} has no exact rational value")
        return Fraction(xf)
    man_exp = getattr(x, "man_exp", None)  # mpmath mpf: exact (mantissa, exponent)
    if man_exp is not None and hasattr(x, "_mpf_"):
        import mpmath
        if not mpmath.isfinite(x):
            raise ContextError(f"{x} has no exact rational value")
        sign, man, exp, _ = x._mpf_   # man_exp drops the sign
        q = Fraction(int(man)) * (Fraction(2) ** int(exp))
        return -q if sign else q
    # gmpy2 mpq / mpz / mpfr and anything with numerator/denominator
    num = getattr(x, "numerator", None)
    den = getattr(x, "denominator", None)
    if num is not None and den is not None:
        return Fraction(int(num), int(den))
    try:
        import gmpy2
        if isinstance(x, type(gmpy2.mpfr(0))):
            return Fraction(*map(int, gmpy2.mpq(x).as_integer_ratio()))
    except ImportError:  # pragma: no cover
        pass
    raise ContextError(f"cannot convert {type(x).__name__} value {x!r} to an exact number")


def as_object_array(x: Any, leaf) -> np.ndarray:
    """Nested lists / arrays / scalars -> object ndarray with ``leaf`` applied per entry."""
    if isinstance(x, np.ndarray) and x.dtype != object:
        arr = x
    else:
        arr = np.asarray(x, dtype=object) if not isinstance(x, np.ndarray) else x
    out = np.empty(arr.shape, dtype=object)
    flat_in = arr.reshape(-1)
    flat_out = out.reshape(-1)
    for i in range(flat_in.size):
        flat_out[i] = leaf(flat_in[i].item() if isinstance(flat_in[i], np.generic) else flat_in[i])
    return out


def fixed_text(a: np.ndarray, digits: int) -> str:
    """float64 values as fixed-point text with ``digits`` decimals: one number for a 0-d
    array, else the flat entries in brackets (the layout every context's format uses)."""
    a = np.asarray(a)
    if a.ndim == 0:
        return f"{float(a):.{digits}f}"
    return "[" + ", ".join(f"{float(t):.{digits}f}" for t in a.reshape(-1)) + "]"


def object_result(r) -> np.ndarray:
    """numpy returns a bare object for 0-d object results; keep values as ndarrays."""
    if isinstance(r, np.ndarray):
        return r
    out = np.empty((), dtype=object)
    out[()] = r
    return out


def reduction_axes(ctx: Context, shape, axis, op: str) -> tuple:
    """The sorted, non-negative axes a reduction over ``axis`` (None: all) of ``shape`` covers,
    or a ContextError naming op, context and shape for an axis out of range or repeated."""
    nd = len(shape)
    if axis is None:
        return tuple(range(nd))
    if isinstance(axis, (int, np.integer)):
        axis = (int(axis),)
    out = []
    for ax in axis:
        ax = int(ax)
        if not -nd <= ax < nd:
            raise ContextError(f"context {ctx.name}: {op}: axis {ax} out of range for "
                               f"shape {list(shape)}")
        out.append(ax % nd)
    if len(set(out)) != len(out):
        raise ContextError(f"context {ctx.name}: {op}: repeated axis in {list(axis)}")
    return tuple(sorted(out))


def check_where_condition(ctx: Context, cond, value_types: tuple) -> np.ndarray:
    """``where``'s condition as a boolean array; an enclosure value (``value_types``) or a
    non-boolean array is a ContextError naming the context."""
    if isinstance(cond, value_types):
        name = type(cond).__name__
        article = "an" if name[:1].lower() in "aeiou" else "a"
        raise ContextError(f"context {ctx.name}: where: the condition must be a boolean "
                           f"array, got {article} {name}")
    cond = np.asarray(cond)
    if cond.dtype != bool:
        raise ContextError(f"context {ctx.name}: where: the condition must be a boolean "
                           f"array, got dtype {cond.dtype}")
    return cond


def check_broadcast(ctx: Context, op: str, *shapes: Iterable[int]) -> tuple:
    """Broadcast shapes or raise a ContextError naming op, context and all shapes."""
    if len(shapes) == 2 and shapes[0] == shapes[1]:
        return tuple(shapes[0])             # equal shapes: nothing to check
    try:
        return np.broadcast_shapes(*[tuple(s) for s in shapes])
    except ValueError:
        shown = " vs ".join(str(list(s)) for s in shapes)
        raise ContextError(f"context {ctx.name}: {op}: shapes do not broadcast: {shown}") from None
