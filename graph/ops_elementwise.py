"""Elementwise op records: binary arithmetic with numpy broadcasting and unary maps.

Binary ops broadcast per numpy's rules on the PER-EXAMPLE shapes (batch axes are aligned
first).  Unary derivatives are expressed as ``dy/dx`` in context ops so VJP and JVP share
them and run over intervals and duals too.  The scalar functions (exp, log, tanh, ...)
get their records from :data:`scalars.functions.FUNCTIONS`: forward ``ctx.<name>``, the
declared derivative for JVP and VJP, the domain check, the monotone flag.

Over a dual context every record here computes the primal in the base context and the
tangent with its own JVP rule, so the op table is the one source of derivatives, kinks
included: relu'(0) = 0 although relu's forward is max(x, 0), whose ties split 1/2-1/2.
"""
from __future__ import annotations

import mpmath
import numpy as np

from scalarlab.scalars.dual import max_weight
from scalarlab.scalars.values import Dual
from scalarlab.scalars.errors import ContextError
from scalarlab.scalars.functions import FUNCTIONS
from scalarlab.scalars.functions_binary import BINARY_FUNCTIONS

from .axes import add_opt, align, broadcast_shapes, unbroadcast
from .errors import OpDataError
from .oprecord import OpRecord, register

# Constants for gelu, as decimal strings with ~1060 bits so every context (mpmath at high
# precision included) converts them with its own single correct rounding.
with mpmath.workdps(320):
    INV_SQRT2 = mpmath.nstr(1 / mpmath.sqrt(2), 318, strip_zeros=False)
    INV_SQRT_2PI = mpmath.nstr(1 / mpmath.sqrt(2 * mpmath.pi), 318, strip_zeros=False)

#: ``safe_log(x) = log(max(x, SAFE_LOG_TINY))``.  1e-12 (converted once per context) is
#: far below any activation scale yet a normal number in binary32/bfloat16; in formats
#: whose range ends above it (binary16, fp8) it rounds to 0 and the context's log(0) rule
#: applies.
SAFE_LOG_TINY = "1e-12"


# ----------------------------------------------------------------------------- binary
def _binary_shape(name):
    def shape(in_shapes, attrs, declared=None):
        return broadcast_shapes(name, in_shapes[0], in_shapes[1])
    return shape


def _aligned(ctx, a, b, nb):
    ra, rb = len(ctx.shape(a)), len(ctx.shape(b))
    if ra == rb:
        return a, b                         # same rank: nothing to insert
    r = max(ra, rb) - nb
    return align(ctx, a, nb, r), align(ctx, b, nb, r)


def _over_duals(forward, jvp):
    """``forward`` that, over a dual context, returns Dual(forward of the primals in the
    base, the record's ``jvp`` of the tangents) (nested duals recurse through the base)."""
    def run(ctx, args, attrs, nb):
        if not ctx.is_dual:
            return forward(ctx, args, attrs, nb)
        B = ctx.base
        ds = [a if isinstance(a, Dual) else ctx.convert(a) for a in args]
        prim = [d.primal for d in ds]
        y = run(B, prim, attrs, nb)
        t = jvp(B, prim, [d.tangent for d in ds], y, attrs, nb)
        return Dual(y, B.zeros(B.shape(y)) if t is None else t)
    return run


def _binary(name, f, da, db, jvp, *, doc="", affine=None):
    """Record for ``f(a, b)``; ``da(ctx, g, a, b, y)``/``db`` give unreduced cotangents."""
    def forward(ctx, args, attrs, nb):
        a, b = _aligned(ctx, args[0], args[1], nb)
        return f(ctx, a, b)

    def vjp(ctx, g, args, y, attrs, nb):
        a, b = _aligned(ctx, args[0], args[1], nb)
        return [unbroadcast(ctx, da(ctx, g, a, b, y), ctx.shape(args[0]), nb),
                unbroadcast(ctx, db(ctx, g, a, b, y), ctx.shape(args[1]), nb)]

    def jvp_rule(ctx, args, tans, y, attrs, nb):
        if tans[0] is None and tans[1] is None:
            return None
        a, b = _aligned(ctx, args[0], args[1], nb)
        r = len(ctx.shape(y)) - nb
        ta = None if tans[0] is None else align(ctx, tans[0], nb, r)
        tb = None if tans[1] is None else align(ctx, tans[1], nb, r)
        t = jvp(ctx, a, b, ta, tb, y)
        ys = ctx.shape(y)
        return t if ctx.shape(t) == ys else ctx.broadcast_to(t, ys)

    return register(OpRecord(name=name, arity=(2, 2), shape=_binary_shape(name),
                             forward=_over_duals(forward, jvp_rule), vjp=vjp, jvp=jvp_rule,
                             capsule=f"reference.{name}", elementwise=True, affine=affine,
                             doc=doc))


def _mul_opt(ctx, t, v):
    return None if t is None else ctx.mul(t, v)


_binary("add", lambda c, a, b: c.add(a, b),
        lambda c, g, a, b, y: g, lambda c, g, a, b, y: g,
        lambda c, a, b, ta, tb, y: add_opt(c, ta, tb), doc="a + b", affine="any")
_binary("sub", lambda c, a, b: c.sub(a, b),
        lambda c, g, a, b, y: g, lambda c, g, a, b, y: c.neg(g),
        lambda c, a, b, ta, tb, y: (c.neg(tb) if ta is None else ta if tb is None
                                    else c.sub(ta, tb)), doc="a - b", affine="any")
_binary("mul", lambda c, a, b: c.mul(a, b),
        lambda c, g, a, b, y: c.mul(g, b), lambda c, g, a, b, y: c.mul(g, a),
        lambda c, a, b, ta, tb, y: add_opt(c, _mul_opt(c, ta, b), _mul_opt(c, tb, a)),
        doc="a * b", affine="any")


def _div_jvp(c, a, b, ta, tb, y):
    # d(a/b) = (da - y db) / b
    num = add_opt(c, ta, None if tb is None else c.neg(c.mul(y, tb)))
    return c.div(num, b)


_binary("div", lambda c, a, b: c.div(a, b),
        lambda c, g, a, b, y: c.div(g, b),
        lambda c, g, a, b, y: c.neg(c.div(c.mul(g, y), b)), _div_jvp, doc="a / b",
        affine="first")


def _minmax(name, f, first_wins):
    # Weight of a: 1 where a wins, 0 where b wins, 1/2 at ties (torch); the same rule as
    # the dual context's maximum/minimum (scalars.dual.max_weight).
    def wa(c, a, b):
        return max_weight(c, a, b) if first_wins else max_weight(c, b, a)

    def wb(c, a, b):
        return c.sub(c.ones(()), wa(c, a, b))

    _binary(name, f,
            lambda c, g, a, b, y: c.mul(g, wa(c, a, b)),
            lambda c, g, a, b, y: c.mul(g, wb(c, a, b)),
            lambda c, a, b, ta, tb, y: add_opt(c, _mul_opt(c, ta, wa(c, a, b)),
                                               _mul_opt(c, tb, wb(c, a, b))),
            doc=f"elementwise {name}; the derivative splits ties equally (as torch)")


_minmax("max", lambda c, a, b: c.maximum(a, b), True)
_minmax("min", lambda c, a, b: c.minimum(a, b), False)


def _fma_record():
    """fma(a, b, c) = a*b + c with ONE rounding (the context's fma), broadcasting."""
    def forward(ctx, args, attrs, nb):
        r = max(len(ctx.shape(t)) for t in args) - nb
        a, b, c = (align(ctx, t, nb, r) for t in args)
        return ctx.fma(a, b, c)

    def vjp(ctx, g, args, y, attrs, nb):
        r = len(ctx.shape(y)) - nb
        a, b, _ = (align(ctx, t, nb, r) for t in args)
        return [unbroadcast(ctx, ctx.mul(g, b), ctx.shape(args[0]), nb),
                unbroadcast(ctx, ctx.mul(g, a), ctx.shape(args[1]), nb),
                unbroadcast(ctx, g, ctx.shape(args[2]), nb)]

    def jvp(ctx, args, tans, y, attrs, nb):
        if all(t is None for t in tans):
            return None
        r = len(ctx.shape(y)) - nb
        a, b, _ = (align(ctx, t, nb, r) for t in args)
        ta, tb, tc = (None if t is None else align(ctx, t, nb, r) for t in tans)
        t = add_opt(ctx, add_opt(ctx, _mul_opt(ctx, ta, b), _mul_opt(ctx, tb, a)), tc)
        ys = ctx.shape(y)
        return t if ctx.shape(t) == ys else ctx.broadcast_to(t, ys)

    register(OpRecord(name="fma", arity=(3, 3),
                      shape=lambda s, attrs, declared=None: broadcast_shapes("fma", *s),
                      forward=_over_duals(forward, jvp), vjp=vjp, jvp=jvp,
                      capsule="reference.fma", elementwise=True,
                      doc="a*b + c rounded once (IEEE fusedMultiplyAdd)"))


_fma_record()


def check_domain2(ctx, a, b, op: str, fn) -> None:
    """Point contexts: raise OpDataError where (a, b) lies outside the binary function's
    domain (pow of a negative base with a non-integer exponent, fmod by zero)."""
    if ctx.is_interval or ctx.is_dual:
        return
    x, y = np.asarray(a), np.asarray(b)
    if x.dtype.kind not in "fO" or y.dtype.kind not in "fO":
        return
    bad = np.asarray(fn.domain(x, y), dtype=bool)
    if not bad.any():
        return
    idx = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.ndim else ()
    shown = []
    for v in (a, b):
        try:
            shown.append(repr(float(np.broadcast_to(np.asarray(ctx.to_float64(v)),
                                                    bad.shape)[idx])))
        except (ContextError, TypeError, ValueError, IndexError):
            shown.append("?")
    raise OpDataError(f"{op} outside its domain ({fn.why}): x{list(idx)} = {shown[0]}, "
                      f"y{list(idx)} = {shown[1]}")


def _function2_record(fn):
    """The record of a binary function (scalars.functions_binary): a broadcasting binary op
    like add; forward ctx.<name> after the domain check, VJP/JVP from the partials."""
    name = fn.name

    def f(c, a, b):
        if fn.domain is not None:
            check_domain2(c, a, b, name, fn)
        return getattr(c, name)(a, b)

    def da(c, g, a, b, y):
        return c.mul(g, fn.partials(c, a, b, y)[0])

    def db(c, g, a, b, y):
        return c.mul(g, fn.partials(c, a, b, y)[1])

    def jvp(c, a, b, ta, tb, y):
        dx, dy = fn.partials(c, a, b, y)
        return add_opt(c, _mul_opt(c, ta, dx), _mul_opt(c, tb, dy))

    _binary(name, f, da, db, jvp, doc=fn.doc)


for _fn2 in BINARY_FUNCTIONS.values():
    _function2_record(_fn2)


# ------------------------------------------------------------------------------ unary
def _same_shape(in_shapes, attrs, declared=None):
    return tuple(in_shapes[0])


def _unary(name, f, dydx, *, monotone=None, doc="", fused=None):
    """Record for ``y = f(x)`` with derivative ``dydx(ctx, x, y)`` (a context value).

    ``fused``: the name of an optional context method ``m(g, x)`` returning the same
    values as ``mul(g, dydx(ctx, x, y))`` in one pass; contexts without it get the
    composition."""
    def times_dydx(ctx, g, x, y):
        m = getattr(ctx, fused, None) if fused else None
        return m(g, x) if m is not None else ctx.mul(g, dydx(ctx, x, y))

    def forward(ctx, args, attrs, nb):
        return f(ctx, args[0])

    def vjp(ctx, g, args, y, attrs, nb):
        return [times_dydx(ctx, g, args[0], y)]

    def jvp(ctx, args, tans, y, attrs, nb):
        return None if tans[0] is None else times_dydx(ctx, tans[0], args[0], y)

    return register(OpRecord(name=name, arity=(1, 1), shape=_same_shape,
                             forward=_over_duals(forward, jvp), vjp=vjp, jvp=jvp,
                             capsule=f"reference.{name}",
                             elementwise=True, monotone=monotone, doc=doc))


def check_domain(ctx, x, op: str, strict: bool, lo: float = 0.0) -> None:
    """Point contexts: raise OpDataError unless every entry is > lo (strict) or >= lo.

    Interval contexts decide with their own rules (a ContextError that IBP can turn into
    "no bound"); contexts without comparisons are left to their own log/sqrt.
    """
    if ctx.is_interval:
        return
    try:
        zero = ctx.zeros(()) if lo == 0 else ctx.full((), lo)
        ok = ctx.less(zero, x) if strict else np.logical_not(ctx.less(x, zero))
        ok = np.asarray(ok, dtype=bool)
    except ContextError:
        return
    if ok.all():
        return
    idx = tuple(int(i) for i in np.argwhere(~ok)[0]) if ok.ndim else ()
    try:
        shown = repr(float(np.asarray(ctx.to_float64(x))[idx]))
    except (ContextError, TypeError, ValueError, IndexError):
        shown = "?"
    if lo == 0:
        what = "NaN" if shown == "nan" else ("non-positive" if strict else "negative")
    else:
        what = "NaN" if shown == "nan" else f"{'<=' if strict else '<'} {lo:g}"
    raise OpDataError(f"{op} of a {what} value: x{list(idx)} = {shown}")


def check_outside(ctx, x, op: str, dom) -> None:
    """Point contexts: raise OpDataError at an entry outside ``dom``'s upper end or on
    one of its poles (asin(2), tgamma(-3)); intervals and duals use their own rules."""
    if ctx.is_interval or ctx.is_dual:
        return
    arr = np.asarray(x)
    if arr.dtype.kind not in "fO":
        return
    bad = dom.outside(arr)
    if arr.dtype.kind == "f":
        bad = bad | np.isnan(arr)
    if not bad.any():
        return
    idx = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.ndim else ()
    try:
        shown = repr(float(np.asarray(ctx.to_float64(x))[idx]))
    except (ContextError, TypeError, ValueError, IndexError):
        shown = "?"
    raise OpDataError(f"{op} of a value outside its domain ({dom.why}): x{list(idx)} = {shown}")


def _neg_record():
    def forward(ctx, args, attrs, nb):
        return ctx.neg(args[0])

    def vjp(ctx, g, args, y, attrs, nb):
        return [ctx.neg(g)]

    def jvp(ctx, args, tans, y, attrs, nb):
        return None if tans[0] is None else ctx.neg(tans[0])

    register(OpRecord(name="neg", arity=(1, 1), shape=_same_shape,
                      forward=_over_duals(forward, jvp), vjp=vjp, jvp=jvp, capsule="reference.neg", elementwise=True,
                      monotone="decreasing", affine="any", doc="-x"))


_neg_record()


def _sqrt(ctx, x):
    check_domain(ctx, x, "sqrt", strict=False)
    return ctx.sqrt(x)


def _safe_log(ctx, x):
    return ctx.log(ctx.maximum(x, ctx.convert(SAFE_LOG_TINY)))


def _safe_log_d(ctx, x, y):
    # 1/x where x > tiny, 0 where the clamp is active (the clamp's derivative).
    tiny = ctx.convert(SAFE_LOG_TINY)
    return ctx.div(ctx.heaviside(ctx.sub(x, tiny)), ctx.maximum(x, tiny))


def _gelu(ctx, x):
    # Exact (erf) GELU: x * 0.5 * (1 + erf(x / sqrt 2)), torch's evaluation order.
    half = ctx.convert("0.5")
    cdf = ctx.add(ctx.ones(()), ctx.erf(ctx.mul(x, ctx.convert(INV_SQRT2))))
    return ctx.mul(ctx.mul(x, half), cdf)


def _gelu_d(ctx, x, y):
    # Phi(x) + x phi(x), phi(x) = exp(-x^2/2) / sqrt(2 pi)
    half = ctx.convert("0.5")
    cdf = ctx.mul(half, ctx.add(ctx.ones(()), ctx.erf(ctx.mul(x, ctx.convert(INV_SQRT2)))))
    pdf = ctx.mul(ctx.exp(ctx.neg(ctx.mul(half, ctx.square(x)))), ctx.convert(INV_SQRT_2PI))
    return ctx.add(cdf, ctx.mul(x, pdf))


_unary("abs", lambda c, x: c.abs(x), lambda c, x, y: c.sign(x), doc="|x|; derivative sign(x)")
_unary("sqrt", _sqrt, lambda c, x, y: c.div(c.convert("0.5"), y), monotone="increasing",
       doc="sqrt(x); a negative entry is an error naming the node (point contexts)")


def _function_record(fn):
    """The record of a scalar function: forward ctx.<name> (after the domain check in
    point contexts), derivative and monotonicity as declared in scalars.functions."""
    method = fn.name
    dom = fn.domain

    def forward(ctx, x):
        if dom is not None:
            if dom.lo > -np.inf:
                check_domain(ctx, x, method, strict=dom.open, lo=dom.lo)
            if dom.has_hi or dom.poles is not None:
                check_outside(ctx, x, method, dom)
        return getattr(ctx, method)(x)

    doc = fn.doc + ("" if dom is None else
                    f"; an entry outside the domain ({dom.why}) is an error naming the "
                    f"node (point contexts)")
    _unary(method, forward, fn.derivative, monotone=fn.monotone, doc=doc)


for _fn in FUNCTIONS.values():
    if _fn.op:          # digamma is a helper of the vocabulary, not an IR op
        _function_record(_fn)

_unary("safe_log", _safe_log, _safe_log_d, monotone="increasing",
       doc=f"log(max(x, {SAFE_LOG_TINY}))")
_unary("relu", lambda c, x: c.maximum(x, c.zeros(())), lambda c, x, y: c.heaviside(x),
       monotone="increasing", doc="max(x, 0); derivative heaviside(x) (0 at x = 0)",
       fused="mul_heaviside")
_unary("gelu", _gelu, _gelu_d, doc="exact GELU x*Phi(x) with erf")
