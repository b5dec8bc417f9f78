"""Dual-number contexts ``dual:BASE``: forward-mode derivatives in any base context.

A value is a :class:`Dual` ``(primal, tangent)`` of two base-context arrays of one shape;
each operation applies its derivative rule, written only against the base context's
vocabulary.  So ``dual:rational`` differentiates exactly (and raises exactly where the
rational context raises), ``dual:binary32`` rounds every primal and tangent operation in
binary32, and duals nest: ``dual:dual:float64`` carries second derivatives (the
Hessian-vector products of the tape run over duals).

Derivative conventions at kinks, the same as the graph op table's (whose records, over a
dual context, use their own JVP rules -- so relu'(0) = 0 there): ``abs'(0) = sign(0) = 0``;
``maximum``/``minimum`` split ties 1/2-1/2 (:func:`max_weight`, as torch); ``heaviside``,
``sign``, ``less`` and ``argmax`` act on primals and have zero tangent (they are piecewise
constant).  The functions' rules come from :mod:`scalars.functions`.
"""
from __future__ import annotations

from typing import Any

import numpy as np



def max_weight(ctx, a, b):
    """Weight of ``a`` in the derivative of max(a, b), as a ``ctx`` value: 1 where a > b,
    0 where a < b, 1/2 at ties (torch's convention).  The dual context and the graph op
    table's max/min records both use this one rule."""
    ha = ctx.heaviside(ctx.sub(a, b))
    hb = ctx.heaviside(ctx.sub(b, a))
    half = ctx.convert("0.5")
    return ctx.add(ha, ctx.mul(half, ctx.sub(ctx.sub(ctx.ones(()), ha), hb)))
from .base import Context, check_broadcast
from .errors import ContextError
from .values import Dual  # also importable from here, as before


class DualContext(Context):
    """Forward-mode dual numbers over ``base`` (any context with the full vocabulary)."""

    kind = "dual"
    is_dual = True

    def __init__(self, base: Context):
        self.base = base
        self.name = f"dual:{base.name}"
        self.fmt = base.fmt
        self.exact = base.exact
        self.reduction = base.reduction
        self.fma_dot = base.fma_dot
        self.correctly_rounded = frozenset()
        self.description = (f"forward-mode duals (primal, tangent) over {base.name}; every "
                            f"primal and tangent operation is a {base.name} operation")

    def properties(self) -> dict:
        p = super().properties()
        p["base"] = self.base.name
        return p

    def supports(self, op: str) -> bool:
        """A dual op works exactly when the base ops of its rule do."""
        return self.base.supports(op)

    # ----------------------------------------------------------------- plumbing
    def _d(self, v, op: str) -> Dual:
        """An operand as a Dual; point values become constants (zero tangent)."""
        if isinstance(v, Dual):
            return v
        if hasattr(v, "lo") and hasattr(v, "hi") and not self.base.is_interval:
            raise ContextError(f"context {self.name}: {op}: got an interval value; dual "
                               f"contexts take Dual values (use make/convert)")
        return self.convert(v)

    def _shape_of(self, v) -> tuple:
        return tuple(self.base.shape(v))

    def make(self, primal, tangent) -> Dual:
        """The dual number primal + tangent*eps (each converted into the base context)."""
        p = self.base.convert(primal)
        t = self.base.convert(tangent)
        sp, st = self._shape_of(p), self._shape_of(t)
        if sp != st:
            shape = check_broadcast(self, "make", sp, st)
            if shape != sp:
                raise ContextError(f"context {self.name}: make: tangent shape {list(st)} "
                                   f"does not fit primal shape {list(sp)}")
            t = self.base.broadcast_to(t, sp)
        return Dual(p, t)

    def convert(self, x: Any) -> Dual:
        """A constant: the base conversion of x with a zero tangent (a Dual is re-made)."""
        if isinstance(x, Dual):
            return self.make(x.primal, x.tangent)
        p = self.base.convert(x)
        return Dual(p, self.base.zeros(self._shape_of(p)))

    def to_float64(self, v) -> Dual:
        """A Dual of float64 arrays: the base's to_float64 of both parts."""
        v = self._d(v, "to_float64")
        return Dual(self.base.to_float64(v.primal), self.base.to_float64(v.tangent))

    def format(self, v, digits: int = 6) -> str:
        v = self._d(v, "format")
        p = self.base.format(v.primal, digits)
        t = self.base.format(v.tangent, digits)
        if self.base.is_dual:   # nested: keep the levels apart
            p, t = f"({p})", f"({t})"
        return f"{p} + eps {t}"

    def zeros(self, shape):
        return Dual(self.base.zeros(shape), self.base.zeros(shape))

    def ones(self, shape):
        return Dual(self.base.ones(shape), self.base.zeros(shape))

    def full(self, shape, value):
        return Dual(self.base.full(shape, value), self.base.zeros(shape))

    def _zeros_like(self, p):
        return self.base.zeros(self._shape_of(p))

    # --------------------------------------------------------------- arithmetic
    def add(self, a, b):
        a = self._d(a, "add"); b = self._d(b, "add")
        B = self.base
        return Dual(B.add(a.primal, b.primal), B.add(a.tangent, b.tangent))

    def sub(self, a, b):
        a = self._d(a, "sub"); b = self._d(b, "sub")
        B = self.base
        return Dual(B.sub(a.primal, b.primal), B.sub(a.tangent, b.tangent))

    def mul(self, a, b):
        a = self._d(a, "mul"); b = self._d(b, "mul")
        B = self.base
        return Dual(B.mul(a.primal, b.primal),
                    B.add(B.mul(a.tangent, b.primal), B.mul(a.primal, b.tangent)))

    def div(self, a, b):
        # (a/b)' = (a' - q b') / b with q = a/b
        a = self._d(a, "div"); b = self._d(b, "div")
        B = self.base
        q = B.div(a.primal, b.primal)
        return Dual(q, B.div(B.sub(a.tangent, B.mul(q, b.tangent)), b.primal))

    def fma(self, a, b, c):
        a = self._d(a, "fma"); b = self._d(b, "fma"); c = self._d(c, "fma")
        B = self.base
        t = B.add(B.add(B.mul(a.tangent, b.primal), B.mul(a.primal, b.tangent)), c.tangent)
        return Dual(B.fma(a.primal, b.primal, c.primal), t)

    def neg(self, a):
        a = self._d(a, "neg")
        return Dual(self.base.neg(a.primal), self.base.neg(a.tangent))

    def abs(self, a):
        a = self._d(a, "abs")
        B = self.base
        return Dual(B.abs(a.primal), B.mul(a.tangent, B.sign(a.primal)))
    def _lattice(self, op, a, b, wa):
        """max/min: tangent wa * a' + (1 - wa) * b' with the tie-splitting weight wa."""
        B = self.base
        wb = B.sub(B.ones(()), wa)
        t = B.add(B.mul(a.tangent, wa), B.mul(b.tangent, wb))
        y = getattr(B, op)(a.primal, b.primal)
        shape = self._shape_of(y)
        return Dual(y, t if self._shape_of(t) == shape else B.broadcast_to(t, shape))


    def sqrt(self, a):
        a = self._d(a, "sqrt")
        B = self.base
        s = B.sqrt(a.primal)
        return Dual(s, B.div(a.tangent, B.add(s, s)))

    def square(self, a):
        a = self._d(a, "square")
        B = self.base
        return Dual(B.square(a.primal), B.mul(B.add(a.primal, a.primal), a.tangent))

    def maximum(self, a, b):
        a = self._d(a, "maximum"); b = self._d(b, "maximum")
        return self._lattice("maximum", a, b, max_weight(self.base, a.primal, b.primal))

    def minimum(self, a, b):
        a = self._d(a, "minimum"); b = self._d(b, "minimum")
        return self._lattice("minimum", a, b, max_weight(self.base, b.primal, a.primal))

    # ---------------------------------------------------------------- functions
    def _function(self, fn, a):
        """exp, log, ...: y = f(x) in the base, tangent t * f'(x) with the entry's
        derivative (the same expression the graph op record's JVP uses)."""
        a = self._d(a, fn.name)
        B = self.base
        y = getattr(B, fn.name)(a.primal)
        return Dual(y, B.mul(a.tangent, fn.derivative(B, a.primal, y)))

    def _function2(self, fn, a, b):
        """pow, atan2, ...: z = f(x, y) in the base, tangent tx dz/dx + ty dz/dy with the
        entry's partials (the expressions the graph op record's JVP uses)."""
        a = self._d(a, fn.name); b = self._d(b, fn.name)
        B = self.base
        z = getattr(B, fn.name)(a.primal, b.primal)
        dx, dy = fn.partials(B, a.primal, b.primal, z)
        t = B.add(B.mul(a.tangent, dx), B.mul(b.tangent, dy))
        if B.shape(t) != B.shape(z):
            t = B.broadcast_to(t, B.shape(z))
        return Dual(z, t)

    # ------------------------------------------------------ piecewise constants
    def heaviside(self, a):
        a = self._d(a, "heaviside")
        return Dual(self.base.heaviside(a.primal), self._zeros_like(a.primal))

    def sign(self, a):
        a = self._d(a, "sign")
        return Dual(self.base.sign(a.primal), self._zeros_like(a.primal))

    def less(self, a, b) -> np.ndarray:
        a = self._d(a, "less"); b = self._d(b, "less")
        return self.base.less(a.primal, b.primal)

    def where(self, cond, a, b):
        a = self._d(a, "where"); b = self._d(b, "where")
        B = self.base
        return Dual(B.where(cond, a.primal, b.primal), B.where(cond, a.tangent, b.tangent))

    # --------------------------------------------------------------- reductions
    def sum(self, a, axis=None, keepdims: bool = False):
        a = self._d(a, "sum")
        B = self.base
        return Dual(B.sum(a.primal, axis, keepdims), B.sum(a.tangent, axis, keepdims))

    def argmax(self, a, axis: int) -> np.ndarray:
        a = self._d(a, "argmax")
        return self.base.argmax(a.primal, axis)

    def amax(self, a, axis=None, keepdims: bool = False):
        """Max of the primal; the tangent of the (first) maximising entry."""
        a = self._d(a, "amax")
        B = self.base
        shape = self._shape_of(a.primal)
        nd = len(shape)
        if nd == 0:
            return a
        if axis is None:
            axes = tuple(range(nd))
        else:
            axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
            for ax in axes:
                if not -nd <= int(ax) < nd:
                    raise ContextError(f"context {self.name}: amax: axis {ax} out of range "
                                       f"for shape {list(shape)}")
            axes = tuple(sorted(int(ax) % nd for ax in axes))
        keep = [i for i in range(nd) if i not in axes]
        kshape = tuple(shape[i] for i in keep)
        n = int(np.prod([shape[i] for i in axes], dtype=np.int64))
        perm = keep + list(axes)
        p2 = B.reshape(B.transpose(a.primal, perm), kshape + (n,))
        t2 = B.reshape(B.transpose(a.tangent, perm), kshape + (n,))
        idx = np.asarray(B.argmax(p2, len(kshape)))
        onehot = np.arange(n) == idx[..., None]
        primal = B.amax(p2, len(kshape))
        tangent = B.sum(B.where(onehot, t2, B.zeros(kshape + (n,))), len(kshape))
        if keepdims:
            out = tuple(1 if i in axes else s for i, s in enumerate(shape))
            primal, tangent = B.reshape(primal, out), B.reshape(tangent, out)
        return Dual(primal, tangent)

    def matmul(self, a, b):
        a = self._d(a, "matmul"); b = self._d(b, "matmul")
        B = self.base
        return Dual(B.matmul(a.primal, b.primal),
                    B.add(B.matmul(a.tangent, b.primal), B.matmul(a.primal, b.tangent)))

    # --------------------------------------------------------- shape operations
    def shape(self, v) -> tuple:
        return self._shape_of(self._d(v, "shape").primal)

    def _both(self, a, op, fn):
        a = self._d(a, op)
        return Dual(fn(a.primal), fn(a.tangent))

    def reshape(self, a, shape):
        return self._both(a, "reshape", lambda x: self.base.reshape(x, shape))

    def transpose(self, a, axes=None):
        return self._both(a, "transpose", lambda x: self.base.transpose(x, axes))

    def take(self, a, indices, axis: int):
        return self._both(a, "take", lambda x: self.base.take(x, indices, axis))

    def broadcast_to(self, a, shape):
        return self._both(a, "broadcast_to", lambda x: self.base.broadcast_to(x, shape))

    def concat(self, xs, axis: int = 0):
        xs = [self._d(x, "concat") for x in xs]
        return Dual(self.base.concat([x.primal for x in xs], axis),
                    self.base.concat([x.tangent for x in xs], axis))

    def stack(self, xs, axis: int = 0):
        xs = [self._d(x, "stack") for x in xs]
        return Dual(self.base.stack([x.primal for x in xs], axis),
                    self.base.stack([x.tangent for x in xs], axis))


# ---------------------------------------------------------------------- registry
# Registration data, read by scalars.registry (this module does not import the registry).
CONTEXT_NAMES = {f"dual:{b}": (lambda get, b=b: DualContext(get(b)))
                 for b in ("float64", "binary32", "rational", "mpmath:200")}
CONTEXT_FAMILIES = ((r"dual:(.+)", lambda m, get: DualContext(get(m.group(1))), "dual:BASE"),)
