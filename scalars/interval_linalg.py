"""Reductions, matmul and the fused affine layers of the interval contexts: a mixin of
:class:`scalars.interval.IntervalContext` (midpoint-radius for float/binary bases,
the endpoint algorithm for rational/mpmath), with its module-level helpers.
"""
from __future__ import annotations

import numpy as np

from .kernels import directed as D
from .kernels import interval_f64 as IK
from .kernels import interval_affine as IA
from .kernels import grid as GK
from .base import reduction_axes
from .errors import ContextError
from .kernels.f64_matmul import product as _product
from .interval_ends import _obj
from .values import Interval


class IntervalLinalg:
    """sum, amax, matmul and affine of an interval context (mixin; see the module
    docstring)."""

    # ---------------------------------------------------------------- reductions
    def _axes(self, shape, axis, op):
        return reduction_axes(self, shape, axis, op)

    def _reduce_layout(self, x, axes, op):
        """Move the reduced axes last and merge them: (..., n)."""
        nd = x.ndim
        keep = [i for i in range(nd) if i not in axes]
        y = np.transpose(x, keep + list(axes))
        kshape = tuple(x.shape[i] for i in keep)
        n = int(np.prod([x.shape[i] for i in axes], dtype=np.int64))
        return y.reshape(kshape + (n,)), kshape

    def _keepdims(self, r, shape, axes):
        out = [1 if i in axes else s for i, s in enumerate(shape)]
        return r.reshape(out)

    def sum(self, a, axis=None, keepdims: bool = False):
        """Sequential sum along the axes, left to right, each addition rounded outward."""
        a = self._iv(a, "sum")
        E = self.ends
        if np.ndim(a.lo) == 0:
            return Interval(np.asarray(a.lo), np.asarray(a.hi))
        shape, axes, lo2, hi2, kshape = self._reduction(a, axis, "sum")
        n = lo2.shape[-1]
        if n == 0:
            lo = E.full(kshape, 0); hi = E.full(kshape, 0)
        elif E.kind == "rational":
            lo = _obj(np.sum(lo2, axis=-1)); hi = _obj(np.sum(hi2, axis=-1))
        else:
            fast = (IK.sum_f64(lo2, hi2) if E.kind == "float" and E.grid.is_binary64
                    else GK.sum_grid(lo2, hi2, E.grid) if self._coarse()
                    else None)                    # compiled, same order and roundings
            if fast is not None:
                lo, hi = fast
            else:
                lo, hi = E.wrap(lo2[..., 0].copy()), E.wrap(hi2[..., 0].copy())
                for k in range(1, n):
                    lo, hi = self._dual_round(E.add, [lo, lo2[..., k]],
                                              [hi, hi2[..., k]])
        return self._reduced(lo, hi, shape, axes, keepdims)

    def amax(self, a, axis=None, keepdims: bool = False):
        a = self._iv(a, "amax")
        if np.ndim(a.lo) == 0:
            return Interval(np.asarray(a.lo), np.asarray(a.hi))
        shape, axes, lo2, hi2, _ = self._reduction(a, axis, "amax")
        if lo2.shape[-1] == 0:
            raise ContextError(f"context {self.name}: amax: reduction over an empty axis")
        lo = np.max(lo2, axis=-1); hi = np.max(hi2, axis=-1)
        return self._reduced(lo, hi, shape, axes, keepdims)

    def _reduction(self, a: Interval, axis, op: str):
        """A reduction's operand: its shape, the reduced axes, both endpoint arrays with
        those axes flattened last, and the kept shape."""
        lo_in, hi_in = np.asarray(a.lo), np.asarray(a.hi)
        axes = self._axes(lo_in.shape, axis, op)
        lo2, kshape = self._reduce_layout(lo_in, axes, op)
        hi2, _ = self._reduce_layout(hi_in, axes, op)
        return lo_in.shape, axes, lo2, hi2, kshape

    def _reduced(self, lo, hi, shape, axes, keepdims: bool) -> Interval:
        """The reduction's box, with the reduced axes kept as length 1 when asked."""
        if keepdims:
            lo = self._keepdims(self.ends.wrap(lo), shape, axes)
            hi = self._keepdims(self.ends.wrap(hi), shape, axes)
        return self._box(lo, hi)

    # -------------------------------------------------------------------- matmul
    def _matmul_shapes(self, a: Interval, b: Interval):
        sa, sb = a.shape, b.shape
        if len(sa) == 0 or len(sb) == 0:
            raise ContextError(f"context {self.name}: matmul: operands must have at least one "
                               f"axis, got shapes {list(sa)} and {list(sb)}")
        ka = sa[-1]
        kb = sb[0] if len(sb) == 1 else sb[-2]
        if ka != kb:
            raise ContextError(f"context {self.name}: matmul: shapes {list(sa)} and "
                               f"{list(sb)} do not contract ({ka} != {kb})")
        try:
            np.broadcast_shapes(sa[:-2], sb[:-2])
        except ValueError:
            raise ContextError(f"context {self.name}: matmul: batch shapes of {list(sa)} and "
                               f"{list(sb)} do not broadcast") from None
        return ka

    def matmul(self, a, b):
        a = self._iv(a, "matmul"); b = self._iv(b, "matmul")
        if self.matmul_algorithm == "midpoint-radius":
            if self.ends.grid.is_binary64 and _cheap_ld(a, b):
                r = self.matmul_midrad_ld(a, b)
                if r is not None:
                    return r
            return self.matmul_midrad(a, b)
        return self.matmul_endpoint(a, b)

    def affine(self, x, W, b, x_prep=None):
        """``x W^T + b`` (a dense layer): ``add(matmul(x, transpose(W)), b)``, the same
        endpoints bitwise; for float64 endpoints, a point ``W`` and a 2-d ``x`` in fused
        compiled passes with |W| cached per weight array (:mod:`scalars.kernels.interval_affine`).
        ``x_prep``: the third item of an :meth:`affine_relu` result whose relu value is
        ``x`` (its operand pass, already done); ignored for any other ``x`` (checked by
        identity: endpoint arrays are immutable by convention, as everywhere here)."""
        x = self._iv(x, "linear"); W = self._iv(W, "linear"); b = self._iv(b, "linear")
        if self.ends.kind == "float" and self.ends.grid.is_binary64 and W.lo is W.hi:
            r = IA.affine_midrad(x.lo, x.hi, W.lo, b.lo, b.hi, prep=_prep_of(x_prep, x))
            if r is not None:
                lo, hi, nan = r
                return self._box(lo, hi) if nan else Interval(lo, hi)
        return self.add(self.matmul(x, self.transpose(W)), b)

    def affine_relu(self, x, W, b, x_prep=None):
        """``(y, r, r_prep)``: ``y = affine(x, W, b)`` and, when the fused pass ran,
        ``r = maximum(y, 0)`` from the same pass (bitwise what ``maximum(y, zeros(()))``
        gives) with ``r_prep`` for a following ``affine(r, ...)``; else ``r`` and
        ``r_prep`` are None (the caller applies relu itself)."""
        x = self._iv(x, "linear"); W = self._iv(W, "linear"); b = self._iv(b, "linear")
        if self.ends.kind == "float" and self.ends.grid.is_binary64 and W.lo is W.hi:
            r = IA.affine_midrad(x.lo, x.hi, W.lo, b.lo, b.hi, relu=True,
                                 prep=_prep_of(x_prep, x))
            if r is not None:
                lo, hi, nan, rlo, rhi, prep = r
                if not nan:
                    rv = Interval(rlo, rhi)
                    return Interval(lo, hi), rv, (rv, prep)
                return self._box(lo, hi), None, None
            # the fused pass declined: what affine would run after it declines too
            return self.add(self.matmul(x, self.transpose(W)), b), None, None
        return self.affine(x, W, b), None, None

    def matmul_midrad_ld(self, a, b):
        """Midpoint-radius in long double (:mod:`scalars.kernels.dot_enclosure`): about one float64
        ulp of excess per endpoint instead of the a-priori n 2^-53 bound; float64 base and
        1-d/2-d finite operands only (else None).  ``matmul`` uses it for products of up
        to ``dot_enclosure.CHEAP_MACS`` multiply-adds."""
        from .kernels import dot_enclosure
        a = self._iv(a, "matmul"); b = self._iv(b, "matmul")
        self._matmul_shapes(a, b)
        if not self.ends.grid.is_binary64 or a.lo.ndim > 2 or b.lo.ndim > 2:
            return None
        r = dot_enclosure.matmul_midrad_ld(a.lo, a.hi, b.lo, b.hi)
        return None if r is None else Interval(r[0], r[1])

    def matmul_endpoint(self, a, b):
        """Endpoint algorithm: for each k, min/max of the four directed products, added
        sequentially over k with outward rounding (exact for rational endpoints)."""
        a = self._iv(a, "matmul"); b = self._iv(b, "matmul")
        n = self._matmul_shapes(a, b)
        E = self.ends
        va, vb = a.shape[-1:] == a.shape, len(b.shape) == 1
        alo, ahi = (t[None, :] if va else t for t in (a.lo, a.hi))
        blo, bhi = (t[:, None] if vb else t for t in (b.lo, b.hi))
        # (..., m, n) x (..., n, p): terms (..., m, p) for each k
        out_shape = np.broadcast_shapes(alo.shape[:-2], blo.shape[:-2]) + (alo.shape[-2],
                                                                          blo.shape[-1])
        lo = hi = None
        for k in range(n):
            ta = Interval(alo[..., :, k:k + 1], ahi[..., :, k:k + 1])
            tb = Interval(blo[..., k:k + 1, :], bhi[..., k:k + 1, :])
            plo, phi = self._products(ta, tb, out_shape, E.mul)
            if lo is None:
                lo, hi = E.wrap(plo), E.wrap(phi)
            elif E.kind == "rational":
                lo, hi = _obj(np.add(lo, plo)), _obj(np.add(hi, phi))
            else:
                lo, hi = self._dual_round(E.add, [lo, plo], [hi, phi])
        if lo is None:
            lo = E.full(out_shape, 0); hi = E.full(out_shape, 0)
        if va:
            lo, hi = lo[..., 0, :], hi[..., 0, :]
        if vb:
            lo, hi = lo[..., 0], hi[..., 0]
        return self._box(E.wrap(lo), E.wrap(hi))

    def matmul_midrad(self, a, b):
        """Rump's midpoint-radius product with a rigorous bound on the float64 rounding.

        A in <mA, rA>, B in <mB, rB>.  The real product lies in
        <mA mB, |mA| rB + rA (|mB| + rB)>.  C = fl(mA @ mB) (``f64_matmul.product``: any
        order, fma or not) satisfies |C - mA mB| <= gamma_n |mA||mB| + NZ eta, with
        gamma_n = n u/(1 - n u), u = 2^-53, eta = 2^-1074 and NZ <= n the number of
        products (underflow).  So
            R  >=  (gamma_n |mA| + rA) (|mB| + rB) + |mA| rB + n eta
        bounds everything; it is evaluated with as few BLAS products as the operands
        allow: 1 when either side is a point matrix (the IBP case: interval activations
        times point weights), 2 otherwise.  All terms are non-negative, so the float64
        evaluation is at most a factor (1 - gamma_n)(1 - 2^-52)^4 below the exact value;
        the slack factor (1 + (n + 10) 2^-52) covers that, and (3n + 3) eta the
        underflows.  Radii of the operands are rounded up exactly: r = max(RU(hi - m),
        RU(m - lo)), the sign of each subtraction's error from TwoSum, one ulp up only
        where it was inexact (always one ulp where the EFT is not trusted).  [C - R, C + R] is rounded outward onto
        the base grid with exactly directed rounding.  Float/binary bases only;
        non-finite operands fall back to :meth:`matmul_endpoint`.
        """
        a = self._iv(a, "matmul"); b = self._iv(b, "matmul")
        n = self._matmul_shapes(a, b)
        E = self.ends
        if E.kind != "float":
            return self.matmul_endpoint(a, b)
        if a.lo.ndim <= 2 and b.lo.ndim <= 2:
            r = self._matmul_midrad_2d(a, b, n)
            if r is None:
                return self.matmul_endpoint(a, b)
            return r
        arrs = [a.lo] + ([] if a.hi is a.lo else [a.hi]) + [b.lo] + ([] if b.hi is b.lo else [b.hi])
        if not all(np.isfinite(t).all() for t in arrs):
            return self.matmul_endpoint(a, b)
        with np.errstate(all="ignore"):
            mA, rA = _mid_rad(a)
            mB, rB = _mid_rad(b)
            va, vb = mA.ndim == 1, mB.ndim == 1   # numpy's 1-d promotion, undone below
            if va:
                mA = mA[None, :]; rA = None if rA is None else rA[None, :]
            if vb:
                mB = mB[:, None]; rB = None if rB is None else rB[:, None]
            C = _product(mA, mB)
            u = 2.0 ** -53
            gamma = (n * u) / (1.0 - n * u) * (1.0 + 2.0 ** -50)
            aA, aB = np.abs(mA), np.abs(mB)
            if rB is None and rA is None:
                R = gamma * _product(aA, aB)
            elif rB is None:
                R = _product(gamma * aA + rA, aB)
            elif rA is None:
                R = _product(aA, gamma * aB + rB)
            else:
                R = _product(gamma * aA + rA, aB + rB) + _product(aA, rB)
            if not np.all(np.isfinite(R)):
                return self.matmul_endpoint(a, b)
            R = R * (1.0 + (n + 10) * 2.0 ** -52)
            # underflow: only where some product can be non-zero (row of A x column of B)
            nzA = np.any((aA > 0) if rA is None else (aA + rA > 0), axis=-1, keepdims=True)
            nzB = np.any((aB > 0) if rB is None else (aB + rB > 0), axis=-2, keepdims=True)
            R = R + np.where(nzA & nzB, (3 * n + 3) * 2.0 ** -1074, 0.0)
            if va:
                C, R = C[..., 0, :], R[..., 0, :]
            if vb:
                C, R = C[..., 0], R[..., 0]
            lo, hi = D.midrad_dir(C, R, E.grid)
        return self._box(lo, hi)

    def _matmul_midrad_2d(self, a, b, n):
        """:meth:`matmul_midrad` for 1-d/2-d operands with the same formulas, in compiled
        passes: one over each operand (midpoint, radius, |mid|, finiteness and the
        non-zero lines for the underflow term together) and one fused pass for the final
        radius and the directed endpoints.  None when an operand or the radius is not
        finite (the caller uses the endpoint algorithm)."""
        E = self.ends
        u = 2.0 ** -53
        gamma = (n * u) / (1.0 - n * u) * (1.0 + 2.0 ** -50)
        va, vb = a.lo.ndim == 1, b.lo.ndim == 1   # numpy's 1-d promotion, undone below
        alo, ahi = (t[None, :] if va else t for t in (a.lo, a.hi))
        blo, bhi = (t[:, None] if vb else t for t in (b.lo, b.hi))
        with np.errstate(all="ignore"):
            # A side: contraction over axis 1; B side: over axis 0
            mA, rA, aA, gA, nzA, fin = _midrad_side(a.lo is a.hi, alo, ahi, gamma, 1, "mm.A")
            if not fin:
                return None
            mB, rB, aB, gB, nzB, fin = _midrad_side(b.lo is b.hi, blo, bhi, gamma, 0, "mm.B")
            if not fin:
                return None
            # C and R are temporaries of this call: reused work arrays (see D.scratch)
            cshape = (mA.shape[0], mB.shape[1])
            C = _product(mA, mB, out=D.scratch("mm.C", cshape))
            R = D.scratch("mm.R", cshape)
            if rB is None and rA is None:
                np.multiply(gamma, _product(aA, aB, out=R), out=R)
            elif rB is None:
                _product(gA, aB, out=R)          # gA = gamma |mA| + rA
            elif rA is None:
                _product(aA, gB, out=R)          # gB = gamma |mB| + rB
            else:
                R = _product(gA, aB + rB) + _product(aA, rB)
            r = D.midrad2d_dir(C, R, 1.0 + (n + 10) * 2.0 ** -52, (3 * n + 3) * 2.0 ** -1074,
                               nzA, nzB, E.grid)
        if r is None:
            return None
        lo, hi = r
        if va:
            lo, hi = lo[0, :], hi[0, :]
        if vb:
            lo, hi = lo[..., 0], hi[..., 0]
        return Interval(lo, hi)   # finite C and R: no NaN can come out (midrad2d_dir)


def _prep_of(token, x):
    """The operand pass in an ``affine_relu`` token when it belongs to ``x`` itself."""
    if token is None or token[0] is not x:
        return None
    return token[1]


def _relu_fast(a: Interval, b: Interval):
    """(max(a.lo, 0), max(a.hi, 0), any NaN) in one pass when ``b`` is the point 0 and
    ``a`` a large float64 box (relu's rule); else None."""
    lo, hi = a.lo, a.hi
    if (np.shape(b.lo) != () or np.shape(b.hi) != () or b.lo != 0 or b.hi != 0
            or np.signbit(b.lo) or np.signbit(b.hi)
            or not isinstance(lo, np.ndarray) or not isinstance(hi, np.ndarray)
            or lo.dtype != np.float64 or hi.dtype != np.float64 or lo.shape != hi.shape
            or lo.size < (1 << 14)):
        return None
    return IA.relu_pair(lo, hi)


def _cheap_ld(a, b) -> bool:
    """A 1-d/2-d product small enough for the long double midpoint-radius product."""
    from .kernels.dot_enclosure import AVAILABLE, CHEAP_MACS
    sa, sb = np.shape(a.lo), np.shape(b.lo)
    if not AVAILABLE or len(sa) > 2 or len(sb) > 2 or not sa or not sb:
        return False
    m = sa[0] if len(sa) == 2 else 1
    p = sb[1] if len(sb) == 2 else 1
    return m * sa[-1] * p <= CHEAP_MACS


def _midrad_side(point: bool, lo, hi, gamma: float, axis: int, key: str):
    """(mid, radius or None, |mid|, gamma|mid| + r or None, nonzero mask, all finite) of one
    matmul operand, contracted over ``axis``; a point operand has no radius."""
    if point:
        a, nz, fin = D.abs_scan(lo, axis, key=key)
        return lo, None, a, None, nz, fin
    res = IA.midrad_prep_fast(lo, hi, gamma, axis, key)      # same values, fewer passes
    m, r, a, g, nz, fin, eq = res if res is not None else D.midrad_prep(lo, hi, gamma, axis,
                                                                         key=key)
    if eq:
        # lo == hi: a point after all; |lo| itself (the computed midpoint of a subnormal
        # can differ from lo)
        a = np.abs(lo)
        return lo, None, a, None, np.any(a > 0, axis=axis), fin
    return m, r, a, g, nz, fin


def _mid_rad(v: Interval):
    """(midpoint, radius rounded up) of float endpoints; radius None for a point value.

    The radius is max(RU(hi - m), RU(m - lo)) with exactly directed rounding (see
    directed.midrad_prep), so [m - r, m + r] contains [lo, hi]; the same values as the
    2-d fast path of matmul_midrad."""
    lo, hi = v.lo, v.hi
    if lo is hi:
        return lo, None
    shape = np.shape(lo)
    m, r, _, _, _, _, eq = D.midrad_prep(np.reshape(lo, (1, -1)), np.reshape(hi, (1, -1)), 0.0)
    if eq:
        return lo, None
    return m.reshape(shape), r.reshape(shape)
