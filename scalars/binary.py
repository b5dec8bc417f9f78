"""IEEE binary-format contexts: binary64/32/16, bfloat16, tf32, e5m2, e4m3 and binary(E,M).

Values are float64 arrays whose entries are values of the format; binary32 (however
built: ``binary32``, ``+fma``, ``/pairwise``, ``binary(8,23)``) stores float32 arrays
instead and computes on them in hardware float32 (:class:`Binary32Context`,
:mod:`scalars.binary32_store`).  Every elementwise
operation (+ - * / sqrt fma, the functions of :mod:`scalars.functions`, convert) returns
the correctly rounded (nearest-even) result of the exact operation on those values, with
the format's overflow, subnormals and NaN rules (:mod:`scalars.formats`).  How:

* + - * / sqrt fma run in Numba kernels (:mod:`scalars.kernels.binary_format`): float64 and one
  rounding where the 2p+2 rule makes that exact, error-free transformations elsewhere;
  the IEEE binary64 format is the hardware itself.
* functions (exp, log, ...): the entry's float64 evaluator, trusted to
  ``FAST_PATH_MARGIN`` times its declared ulps bound (2^-45 relative for 4 ulps); where
  that interval straddles a rounding boundary MPFR settles the element
  (:mod:`scalars.kernels.correct_rounding`).  binary64 itself goes to MPFR for every element
  (correct, about a microsecond per element).
* sum and matmul have an order.  Context names say which:

  ``<fmt>``            sequential, left to right, one rounding per product and per addition
  ``<fmt>+fma``        sequential, one rounding per multiply-add (fused dot products)
  ``<fmt>/pairwise``   the pairwise tree of :func:`scalars.kernels.binary_format.sum_pairwise`:
                       level by level, adjacent pairs (0,1), (2,3), ... added with one
                       rounding each, an odd last entry carried up unchanged

  where ``<fmt>`` is a named format or ``binary(E,M)``.  In every order the first term
  starts the accumulator (no ``0 +`` step, so a sum of one ``-0`` is ``-0``); an empty
  sum is ``+0``.  ``sum`` over several axes reduces them in C order of those axes.
"""
from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import numpy as np

from .kernels import binary32_hw as H
from .kernels import binary32_matmul as BM
from .kernels import binary32_pairwise as PW
from .kernels import binary_format as K
from .kernels import correct_rounding
from .kernels import literals
from . import formats
from .arrayshape import ArrayShapeOps
from .base import check_broadcast, fixed_text
from .binary32_store import Float32Storage
from .errors import ContextError, FormatError
from .functions import F64_ABS_ERR, FUNCTIONS
from .functions_binary import BINARY_FUNCTIONS

NAMED_FORMATS = tuple(formats.NAMED)   # one context per named Format
REDUCTIONS = ("sequential", "pairwise")
_SUFFIXES = {"": ("sequential", False), "+fma": ("sequential", True),
             "/pairwise": ("pairwise", False)}
_ELEMENTWISE_CR = ("convert", "add", "sub", "mul", "div", "fma", "sqrt", "square", "neg",
                   "abs", "maximum", "minimum", *FUNCTIONS, *BINARY_FUNCTIONS)
_BINOPS = {"add": K.ADD, "sub": K.SUB, "mul": K.MUL, "div": K.DIV}
_NP_BINOPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}


def _is_binary64(fmt) -> bool:
    return (fmt.exp_bits == 11 and fmt.man_bits == 52 and fmt.subnormals and fmt.has_inf
            and not fmt.saturate and fmt.nan_encoding == "ieee")


def arithmetic_path(fmt) -> int:
    """Which kernel path (binary_kernels.FAST / NATIVE / STICKY) serves ``fmt``.

    FAST needs p <= 25 (so that float64's 53 >= 2p + 2 bits make one final rounding of a
    float64 + - * / sqrt result exact) and an exponent range in which every product and
    quotient of two format values, subnormals included, is a normal float64.
    """
    if _is_binary64(fmt):
        return K.NATIVE
    p, emin, emax = fmt.precision, fmt.emin, fmt.emax
    tiny = emin - fmt.man_bits if fmt.subnormals else emin      # exponent of min value
    fits = (2 * (emax + 1) <= 1023 and 2 * tiny >= -1022
            and (emax + 1) - tiny <= 1023 and tiny - (emax + 1) >= -1022)
    return K.FAST if p <= 25 and fits and fmt.subnormals else K.STICKY


class BinaryContext(ArrayShapeOps):
    """IEEE arithmetic in the binary format ``fmt`` (see the module docstring).

    ``fma_dot``: dot products round once per multiply-add; ``reduction``: ``"sequential"``
    or ``"pairwise"`` order for sum and matmul (pairwise has no fused variant).
    """

    kind = "binary"
    exact_strings = True
    storage = "float64"

    def __new__(cls, fmt=None, **kwargs):
        # binary32 keeps float32 storage (scalars.binary32_store), however it is built
        if cls is BinaryContext and fmt is not None:    # (None: unpickling, copy)
            try:
                if formats.get(fmt) == formats.binary32:
                    cls = Binary32Context
            except (FormatError, TypeError, ValueError):
                pass               # __init__ reports it
        return super().__new__(cls)

    def __init__(self, fmt, *, fma_dot: bool = False, reduction: str = "sequential"):
        try:
            fmt = formats.get(fmt)
        except FormatError as exc:
            raise ContextError(f"binary context: {exc}") from None
        if reduction not in REDUCTIONS:
            raise ContextError(f"binary context {fmt.name}: unknown reduction {reduction!r}; "
                               f"valid: {', '.join(REDUCTIONS)}")
        if fma_dot and reduction != "sequential":
            raise ContextError(f"binary context {fmt.name}: fma_dot needs the sequential "
                               f"order (a pairwise tree has no multiply-add chain)")
        if fmt.man_bits == 52 and not _is_binary64(fmt):
            raise ContextError(f"binary context {fmt.name}: a 53-bit significand is only "
                               f"supported as IEEE binary64 itself")
        self.fmt = fmt
        self.fma_dot = bool(fma_dot)
        self.reduction = reduction
        suffix = "+fma" if fma_dot else ("/pairwise" if reduction == "pairwise" else "")
        self.name = fmt.name + suffix
        self._path = arithmetic_path(fmt)
        self._spec = fmt.spec
        self._hw32 = fmt == formats.binary32      # hardware float32 is exactly binary32
        self.correctly_rounded = frozenset(_ELEMENTWISE_CR)
        order = {"sequential": "sequential sums and dot products",
                 "pairwise": "pairwise-tree sums and dot products"}[reduction]
        self.description = (f"IEEE {fmt.name} (p={fmt.precision}), correctly rounded "
                            f"elementwise ops, {order}, one rounding per "
                            f"{'multiply-add' if fma_dot else 'product and per addition'}")

    def properties(self) -> dict:
        d = super().properties()
        d.update({
            "fma_dot": self.fma_dot,
            "precision": self.fmt.precision,
            "emin": self.fmt.emin,
            "emax": self.fmt.emax,
            "max_finite": self.fmt.max_finite,
            "subnormals": self.fmt.subnormals,
            "overflow": ("max_finite" if self.fmt.saturate else
                         "inf" if self.fmt.has_inf else "nan"),
            "arithmetic": {K.FAST: "float64 then one rounding (p <= 25, 2p+2 rule)",
                           K.NATIVE: "hardware binary64",
                           K.STICKY: "error-free transformations + round-to-odd, MPFR "
                                     "where they could underflow"}[self._path],
            "transcendentals": ("MPFR per element" if self._path == K.NATIVE else
                                "float64 evaluator within 32x its declared ulps bound, "
                                "MPFR near rounding boundaries"),
            "naming": "<format> sequential; <format>+fma fused dot products; "
                      "<format>/pairwise pairwise tree",
        })
        return d

    # ------------------------------------------------------------------ values
    def _val(self, v, op: str, which: str = "operand") -> np.ndarray:
        """A float64 array of format values, or a ContextError naming op and context."""
        if isinstance(v, (float, np.floating)) and not isinstance(v, np.ndarray):
            v = np.asarray(v, dtype=np.float64)
        if not isinstance(v, np.ndarray) or v.dtype != np.float64:
            got = (type(v).__name__ if not isinstance(v, np.ndarray) else
                   f"dtype {v.dtype} (a value of another context? convert it first)")
            raise ContextError(f"context {self.name}: {op}: {which}: expected a float64 array "
                               f"of {self.fmt.name} values, got {got}")
        if self._path != K.NATIVE and v.size:
            flat = _flat(v, v.shape)
            if self._hw32 and not H.nonmembers(flat):
                return v           # every entry is binary32 bit for bit
            bad = K.first_nonmember(self._path, flat, self._spec)
            if bad >= 0:
                idx = tuple(int(i) for i in np.unravel_index(bad, v.shape))
                raise ContextError(f"context {self.name}: {op}: {which} holds "
                                   f"{float(flat[bad])!r} at index {idx}, which is not a "
                                   f"{self.fmt.name} value (convert it with this "
                                   f"context's convert first)")
        return v

    def _operands(self, op: str, *vals):
        names = ("first operand", "second operand", "third operand")
        arrs = [self._val(v, op, names[k]) for k, v in enumerate(vals)]
        shape = check_broadcast(self, op, *(a.shape for a in arrs))
        return shape, [_flat(a, shape) for a in arrs]

    def _settle(self, op, out, unsafe, flats):
        idx = np.flatnonzero(unsafe)
        if idx.size:
            out[idx] = correct_rounding.settle(op, self.fmt, flats, idx)
        return out

    def _round(self, x: np.ndarray) -> np.ndarray:
        """Nearest-even rounding of a float64 array onto the format."""
        if self._path == K.NATIVE:
            return np.asarray(x, dtype=np.float64)
        if self._hw32 and type(x) is np.ndarray and x.dtype == np.float64:
            out = np.empty(x.shape)
            if H.round32(_flat(x, x.shape), out.reshape(-1), H.PROBE) == H.OK:
                return out
        return formats.round_to_format(x, self.fmt)

    # ------------------------------------------------------------------ conversion
    def _leaf(self, x) -> float:
        if isinstance(x, (float, np.floating)):
            return float(self._round(np.asarray(float(x))))
        if isinstance(x, str):
            s = x.strip()
            try:
                # a literal beyond 10^+-1000 becomes a stand-in beyond the format's range
                # that rounds to the same value (+-inf/max or +-0/min subnormal)
                q = literals.for_rounding(s)
            except literals.NotALiteral:
                try:
                    f = float(s)
                except ValueError:
                    f = 0.0
                if math.isfinite(f):
                    raise ContextError(f"context {self.name}: convert: cannot read {x!r} as "
                                       f"an exact decimal or fraction") from None
                return float(self._round(np.asarray(f)))
            except literals.LiteralError as exc:
                raise ContextError(f"context {self.name}: convert: {exc}") from None
            return formats.round_fraction(q, self.fmt)
        if isinstance(x, (complex, np.complexfloating)):
            raise ContextError(f"context {self.name}: convert: complex value {x!r} has no "
                               f"{self.fmt.name} value")
        try:
            return formats.round_fraction(x, self.fmt)
        except ContextError as exc:
            raise ContextError(f"context {self.name}: convert: {exc}") from None

    def convert(self, x):
        """float64 arrays: one nearest-even rounding each; ints, Fractions, mpq, decimal
        strings: one correct rounding of the exact value (never through float64)."""
        if hasattr(x, "lo") and hasattr(x, "hi"):
            raise ContextError(f"context {self.name}: convert: got an interval value; "
                               f"convert its endpoints explicitly")
        if isinstance(x, np.ndarray) and x.dtype.kind == "f":
            return self._round(x if x.dtype == np.float64 else x.astype(np.float64))
        if isinstance(x, np.ndarray) and x.dtype.kind in "biu":
            if x.size == 0 or x.dtype.kind == "b" or int(np.abs(x.astype(object)).max()) <= 2 ** 53:
                return self._round(x.astype(np.float64))   # exact in float64
        if isinstance(x, (float, np.floating)):
            return self._round(np.asarray(float(x)))
        if isinstance(x, np.ndarray) and x.dtype.kind == "c":
            raise ContextError(f"context {self.name}: convert: complex array has no "
                               f"{self.fmt.name} value")
        arr = np.asarray(x, dtype=object) if not isinstance(x, np.ndarray) else x
        if arr.dtype != object:
            arr = arr.astype(object)
        out = np.empty(arr.shape, dtype=np.float64)
        fi, fo = arr.reshape(-1), out.reshape(-1)
        for i in range(fi.size):
            v = fi[i]
            fo[i] = self._leaf(v.item() if isinstance(v, np.generic) else v)
        return out

    def to_float64(self, v):
        return np.array(self._val(v, "to_float64"), dtype=np.float64)

    def format(self, v, digits: int = 6):
        return fixed_text(self.to_float64(v), digits)

    def exact_string(self, v) -> str:
        """Shortest decimal per entry that rounds back to the same value in this format
        (nearest-even), in the brackets of :meth:`format`."""
        a = np.asarray(self.to_float64(v))
        strs = shortest_decimals(a.reshape(-1), self.fmt)
        return strs[0] if a.ndim == 0 else "[" + ", ".join(strs) + "]"

    def zeros(self, shape): return np.zeros(tuple(shape))
    def ones(self, shape): return self._round(np.ones(tuple(shape)))

    def full(self, shape, value):
        v = self.convert(value)
        if np.ndim(v) != 0:
            raise ContextError(f"context {self.name}: full: fill value must be a scalar, got "
                               f"shape {list(np.shape(v))}")
        return np.full(tuple(shape), float(v))

    # ------------------------------------------------------------------ arithmetic
    def _binary(self, op, a, b):
        shape, (x, y) = self._operands(op, a, b)
        if self._path == K.NATIVE:
            with np.errstate(all="ignore"):
                return np.asarray(_NP_BINOPS[op](x, y)).reshape(shape)
        out = np.empty(x.size)
        if self._path == K.FAST:
            K.binary_fast(_BINOPS[op], x, y, out, self._spec)
        else:
            unsafe = np.zeros(x.size, dtype=np.uint8)
            K.binary_sticky(_BINOPS[op], x, y, out, unsafe, self._spec)
            self._settle(op, out, unsafe, (x, y))
        return out.reshape(shape)

    def add(self, a, b): return self._binary("add", a, b)
    def sub(self, a, b): return self._binary("sub", a, b)
    def mul(self, a, b): return self._binary("mul", a, b)
    def div(self, a, b): return self._binary("div", a, b)
    def square(self, a): return self._binary("mul", a, a)

    def fma(self, a, b, c):
        shape, (x, y, z) = self._operands("fma", a, b, c)
        out = np.empty(x.size)
        unsafe = np.zeros(x.size, dtype=np.uint8)
        K.fma_kernel(self._path, x, y, z, out, unsafe, self._spec)
        self._settle("fma", out, unsafe, (x, y, z))
        return out.reshape(shape)

    def sqrt(self, a):
        shape, (x,) = self._operands("sqrt", a)
        out = np.empty(x.size)
        unsafe = np.zeros(x.size, dtype=np.uint8)
        K.sqrt_kernel(self._path, x, out, unsafe, self._spec)
        self._settle("sqrt", out, unsafe, (x,))
        return out.reshape(shape)

    def _function(self, fn, a):
        """exp, log, ... (scalars.functions): the float64 evaluator rounded once where its
        declared error bound cannot straddle a rounding boundary, MPFR elsewhere."""
        shape, (x,) = self._operands(fn.name, a)
        out = np.empty(x.size)
        unsafe = np.zeros(x.size, dtype=np.uint8)
        if self._path == K.NATIVE:
            unsafe[:] = 1                 # binary64: libm is not correctly rounded
        else:
            y = fn.eval_f64(x)
            K.round_checked(self._path, x, y, fn.f64_rel, F64_ABS_ERR, out, unsafe, self._spec)
        self._settle(fn, out, unsafe, (x,))
        return out.reshape(shape)

    def _function2(self, fn, a, b):
        """pow, atan2, ... (scalars.functions_binary): an exact function's float64 value is the
        real result, rounded once onto the format; the others as _function (the float64
        evaluator where its bound cannot straddle a rounding boundary, MPFR elsewhere)."""
        shape, (x, y) = self._operands(fn.name, a, b)
        v = fn.eval_f64(x, y)
        if fn.exact:
            return self._round(v).reshape(shape)
        out = np.empty(x.size)
        unsafe = np.zeros(x.size, dtype=np.uint8)
        # round_checked sends a non-finite value at finite arguments to MPFR: one flag
        # array stands for both arguments' finiteness
        finite = np.where(np.isfinite(x) & np.isfinite(y), 0.0, np.inf)
        K.round_checked(self._path, finite, v, fn.f64_rel, F64_ABS_ERR, out, unsafe,
                        self._spec)
        self._settle(fn, out, unsafe, (x, y))
        return out.reshape(shape)

    # Exact operations: the result of each is a format value already.
    # np.negative/np.abs turn 0-d arrays into numpy scalars: keep values ndarrays
    def neg(self, a): return np.asarray(np.negative(self._val(a, "neg")))
    def abs(self, a): return np.asarray(np.abs(self._val(a, "abs")))

    def _exact_pair(self, op, a, b):
        """Both operands checked, broadcast shape checked; no broadcast copies."""
        x = self._val(a, op, "first operand")
        y = self._val(b, op, "second operand")
        shape = check_broadcast(self, op, x.shape, y.shape)
        return shape, x, y

    def maximum(self, a, b):
        shape, x, y = self._exact_pair("maximum", a, b)
        return np.asarray(np.maximum(x, y)).reshape(shape)

    def minimum(self, a, b):
        shape, x, y = self._exact_pair("minimum", a, b)
        return np.asarray(np.minimum(x, y)).reshape(shape)

    def heaviside(self, a):
        return (self._val(a, "heaviside") > 0).astype(np.float64)

    def sign(self, a):
        return np.asarray(np.sign(self._val(a, "sign")), dtype=np.float64)

    def less(self, a, b):
        shape, (x, y) = self._operands("less", a, b)
        return np.less(x, y).reshape(shape)

    def where(self, cond, a, b):
        a = self._val(a, "where", "second operand")
        b = self._val(b, "where", "third operand")
        return super().where(cond, a, b)

    # ------------------------------------------------------------------ reductions
    def _axes(self, op, ndim, axis):
        if axis is None:
            return tuple(range(ndim))
        items = axis if isinstance(axis, (tuple, list)) else (axis,)
        out = []
        for ax in items:
            if not isinstance(ax, (int, np.integer)) or isinstance(ax, bool):
                raise ContextError(f"context {self.name}: {op}: axis must be an int, a tuple "
                                   f"of ints or None, got {axis!r}")
            if not -ndim <= int(ax) < ndim:
                raise ContextError(f"context {self.name}: {op}: axis {int(ax)} out of range "
                                   f"for a value with {ndim} axes")
            a = int(ax) % ndim
            if a in out:
                raise ContextError(f"context {self.name}: {op}: axis {a} repeated in {axis!r}")
            out.append(a)
        return tuple(sorted(out))

    def sum(self, a, axis=None, keepdims: bool = False):
        a = self._val(a, "sum")
        axes = self._axes("sum", a.ndim, axis)
        keep = [d for d in range(a.ndim) if d not in axes]
        n = int(np.prod([a.shape[d] for d in axes], dtype=np.int64))
        rshape = tuple(a.shape[d] for d in keep)
        R = int(np.prod(rshape, dtype=np.int64))
        x2 = np.ascontiguousarray(np.transpose(a, list(axes) + keep)).reshape(n, R)
        if not x2.flags.writeable:
            x2 = x2.copy()
        out = np.empty(R)
        unsafe = np.zeros(R, dtype=np.uint8)
        pairwise = self.reduction == "pairwise"
        if pairwise:
            K.sum_pairwise(self._path, x2, out, unsafe, self._spec)
        else:
            K.sum_sequential(self._path, x2, out, unsafe, self._spec)
        for r in np.flatnonzero(unsafe):
            out[r] = correct_rounding.emulate_reduction(self.fmt, x2[:, r], None,
                                                        fused=False, pairwise=pairwise)
        res = out.reshape(rshape)
        if keepdims:
            res = res.reshape(tuple(1 if d in axes else a.shape[d] for d in range(a.ndim)))
        return res

    def amax(self, a, axis=None, keepdims: bool = False):
        return self._amax(self._val(a, "amax"), axis, keepdims)

    def _amax(self, a, axis, keepdims):
        """np.max of the stored values ``a`` over ``axis`` (binary32 storage calls it on its
        float32 arrays); an empty reduction is refused."""
        axes = self._axes("amax", a.ndim, axis)
        if a.size == 0 or any(a.shape[d] == 0 for d in axes):
            raise ContextError(f"context {self.name}: amax: empty reduction over shape "
                               f"{list(a.shape)} has no maximum")
        return np.asarray(np.max(a, axis=axes, keepdims=keepdims))

    def argmax(self, a, axis):
        a = self._val(a, "argmax")
        if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
            raise ContextError(f"context {self.name}: argmax: axis must be an int, got {axis!r}")
        (ax,) = self._axes("argmax", a.ndim, axis)
        if a.shape[ax] == 0:
            raise ContextError(f"context {self.name}: argmax: axis {ax} of shape "
                               f"{list(a.shape)} is empty")
        return np.asarray(np.argmax(a, axis=ax))

    def _narrow32(self, v):
        """float32 copy of a float64 array of binary32 values, or None (not applicable or
        a non-member, which the emulated membership check then reports)."""
        if type(v) is not np.ndarray or v.dtype != np.float64:
            return None
        if not v.flags.c_contiguous and v.T.flags.c_contiguous:
            t = self._narrow32(v.T)          # a transposed weight: no float64 copy
            return None if t is None else t.T
        out = np.empty(v.shape, dtype=np.float32)
        if H.narrow(np.ascontiguousarray(v).reshape(-1), out.reshape(-1)):
            return None
        return out

    def matmul(self, a, b):
        a32 = b32 = None
        if self._hw32 and not H.flush_to_zero(H.PROBE):
            a32 = self._narrow32(a)
            b32 = self._narrow32(b) if a32 is not None else None
        if b32 is None:
            a32 = None
            a = self._val(a, "matmul", "first operand")
            b = self._val(b, "matmul", "second operand")
        if a.ndim == 0 or b.ndim == 0:
            raise ContextError(f"context {self.name}: matmul: operands must have at least "
                               f"one axis, got shapes {list(a.shape)} and {list(b.shape)}")
        a2 = a[None, :] if a.ndim == 1 else a
        b2 = b[:, None] if b.ndim == 1 else b
        M, Ka = a2.shape[-2:]
        Kb, N = b2.shape[-2:]
        if Ka != Kb:
            raise ContextError(f"context {self.name}: matmul: shapes {list(a.shape)} and "
                               f"{list(b.shape)} do not contract ({Ka} != {Kb})")
        try:
            batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
        except ValueError:
            raise ContextError(f"context {self.name}: matmul: batch dimensions of "
                               f"{list(a.shape)} and {list(b.shape)} do not broadcast") from None
        nb = int(np.prod(batch, dtype=np.int64))
        if a2.shape[:-2] != batch:
            a2 = np.broadcast_to(a2, batch + (M, Ka))
        if b2.shape[:-2] != batch:
            b2 = np.broadcast_to(b2, batch + (Kb, N))
        pairwise = self.reduction == "pairwise"
        if a32 is not None:
            # binary32 in hardware float32: the same IEEE rounding, vector registers,
            # blocked (scalars.kernels.binary32_matmul); same order as the emulation.
            a3 = a32[None, :] if a32.ndim == 1 else a32
            b3 = b32[:, None] if b32.ndim == 1 else b32
            if a3.shape[:-2] != batch:
                a3 = np.broadcast_to(a3, batch + (M, Ka))
            if b3.shape[:-2] != batch:
                b3 = np.broadcast_to(b3, batch + (Kb, N))
            o = np.empty((nb, M, N), dtype=np.float32)     # binary32 storage is float32
            b3 = b3.reshape(nb, Kb, N)
            bt = np.swapaxes(b3, 1, 2)
            if not bt.flags.writeable and bt.flags.c_contiguous:
                bt = bt.copy()           # one array type for the kernels (scalars.kernels.flat)
            if pairwise:         # scalars.kernels.binary32_pairwise: the same tree per output
                tr = not b3.flags.c_contiguous and bt.flags.c_contiguous
                PW.matmul32_pairwise(_c3(a3.reshape(nb, M, Ka)), bt if tr else _c3(b3), o, tr)
            elif not b3.flags.c_contiguous and bt.flags.c_contiguous:
                BM.matmul32(self.fma_dot, _c3(a3.reshape(nb, M, Ka)), bt, o, True)
            else:
                BM.matmul32(self.fma_dot, _c3(a3.reshape(nb, M, Ka)), _c3(b3), o, False)
            res = o.reshape(batch + (M, N))
            if a.ndim == 1:
                res = res[..., 0, :]
            if b.ndim == 1:
                res = res[..., 0]
            return res if res.flags.c_contiguous else res.copy(order="C")
        A = _c3(a2.reshape(nb, M, Ka))
        B = _c3(b2.reshape(nb, Kb, N))
        out = np.empty((nb, M, N))
        unsafe = np.zeros((nb, M, N), dtype=np.uint8)
        if pairwise:
            K.matmul_pairwise(self._path, A, B, out, unsafe, self._spec)
        else:
            K.matmul_sequential(self._path, self.fma_dot, A, B, out, unsafe, self._spec)
        for q, i, j in np.argwhere(unsafe):
            out[q, i, j] = correct_rounding.emulate_reduction(
                self.fmt, A[q, i, :], B[q, :, j], fused=self.fma_dot, pairwise=pairwise)
        res = out.reshape(batch + (M, N))
        if a.ndim == 1:
            res = res[..., 0, :]
        if b.ndim == 1:
            res = res[..., 0]
        return res.copy(order="C")       # (np.ascontiguousarray would make 0-d into 1-d)


def _flat(a: np.ndarray, shape) -> np.ndarray:
    """``a`` broadcast to ``shape`` as a writable C-contiguous 1-d float64 array (one
    array type for the kernels, so each keeps one compiled signature)."""
    if a.shape != tuple(shape):
        a = np.broadcast_to(a, shape)
    f = np.ascontiguousarray(a).reshape(-1)
    return f if f.flags.writeable else f.copy()


def _c3(a: np.ndarray) -> np.ndarray:
    """Writable C-contiguous copy-if-needed of a 3-d operand."""
    a = np.ascontiguousarray(a)
    return a if a.flags.writeable else a.copy()


class Binary32Context(Float32Storage, BinaryContext):
    """binary32 with float32 storage: what ``BinaryContext("binary32", ...)`` builds (also
    ``+fma`` and ``/pairwise``); see :mod:`scalars.binary32_store`."""


# ---------------------------------------------------------------------- shortest decimals
def _decimal_text(neg: bool, digits: str, exp10: int) -> str:
    """Python-repr-like text of 0.d1d2... scaled so that d1 sits at 10^exp10."""
    sign = "-" if neg else ""
    if -4 <= exp10 < 16:
        if exp10 >= len(digits) - 1:
            body = digits + "0" * (exp10 - len(digits) + 1) + ".0"
        elif exp10 >= 0:
            body = digits[:exp10 + 1] + "." + digits[exp10 + 1:]
        else:
            body = "0." + "0" * (-exp10 - 1) + digits
    else:
        body = digits[0] + ("." + digits[1:] if len(digits) > 1 else "") + f"e{exp10:+03d}"
    return sign + body


def shortest_decimals(values: np.ndarray, fmt) -> list[str]:
    """For each format value, the shortest decimal that rounds back to it (nearest-even in
    ``fmt``); among equally short ones the nearest.  The rounding interval around x is
    [x - gap_below/2, x + gap_above/2] (both ends are float64 numbers), closed when x's
    significand is even (ties go to x).  For each digit count the nearest decimal and the
    nearest one on the other side of x are tried: by convexity of the interval one of them
    is inside if any decimal of that length is."""
    fmt = formats.get(fmt)
    vals = np.asarray(values, dtype=np.float64).reshape(-1)
    q_all = formats.ulp(np.abs(vals), fmt)
    out = []
    for x, q in zip(vals.tolist(), q_all.tolist()):
        if math.isnan(x):
            out.append("nan")
            continue
        if math.isinf(x):
            out.append("-inf" if x < 0 else "inf")
            continue
        if x == 0.0:
            out.append("-0.0" if math.copysign(1.0, x) < 0 else "0.0")
            continue
        ax = abs(x)
        even = int(ax / q) % 2 == 0          # ax / q is the integer significand
        mant, _ = math.frexp(ax)
        if not fmt.subnormals and ax == fmt.min_normal:
            below, lo_closed = fmt.min_normal, False    # the tie at min_normal/2 goes to 0
        else:
            below = q / 2 if (mant == 0.5 and ax > fmt.min_normal) else q
            lo_closed = even
        lo, hi = ax - below / 2, ax + q / 2              # exact in float64

        def inside(d: Decimal) -> bool:
            v = float(d)   # correctly rounded, so strict float comparisons are exact ones
            if lo < v < hi:
                return True
            if v == lo:
                fd = Fraction(d)
                return fd > Fraction(lo) or (lo_closed and fd == Fraction(lo))
            if v == hi:
                fd = Fraction(d)
                return fd < Fraction(hi) or (even and fd == Fraction(hi))
            return False

        found = None
        for nd in range(1, 20):
            d0 = Decimal(f"{ax:.{nd - 1}e}")
            if inside(d0):
                found = d0
                break
            step = Decimal(1).scaleb(d0.adjusted() - nd + 1)
            d1 = d0 + step if d0 < Decimal(ax) else d0 - step
            if d1 > 0 and inside(d1):
                found = d1
                break
        sign, digits, exp = found.normalize().as_tuple()
        dstr = "".join(map(str, digits))
        out.append(_decimal_text(x < 0, dstr, exp + len(dstr) - 1))
    return out


# ---------------------------------------------------------------------- registration
def _make(fmt_name: str, suffix: str) -> BinaryContext:
    reduction, fused = _SUFFIXES[suffix]
    return BinaryContext(fmt_name, fma_dot=fused, reduction=reduction)


def _named_variant(m, get):
    return _make(m.group(1), m.group(2))


def _family(m, get):
    return _make(f"binary({int(m.group(1))},{int(m.group(2))})", m.group(3) or "")


# Registration data, read by scalars.registry (this module does not import the registry).
CONTEXT_NAMES = {
    **{nm: (lambda get, nm=nm: _make(nm, "")) for nm in NAMED_FORMATS},
    "binary32+fma": lambda get: _make("binary32", "+fma"),
    "binary32/pairwise": lambda get: _make("binary32", "/pairwise"),
}
CONTEXT_FAMILIES = (
    (r"(" + "|".join(NAMED_FORMATS) + r")(\+fma|/pairwise)", _named_variant,
     "<format>+fma, <format>/pairwise"),
    (r"binary\(\s*(\d+)\s*,\s*(\d+)\s*\)(\+fma|/pairwise)?", _family, "binary(E,M)"),
)
