"""A-priori rounding-error bounds of the point contexts, for CROWN's ``execution`` guarantee.

CROWN bounds a linear function of the exact network.  The lab's point context of the
interval's base format (``interval:bfloat16`` -> ``bfloat16``) computes each node with
rounding: its value is ``f_k(executed inputs) + e_k``.  :class:`PointErrors` gives, per
node, an upper bound ``err_k >= |e_k|`` from facts of that context (unit roundoff,
subnormal spacing, overflow threshold, which functions are correctly rounded) and the
magnitudes of the node's execution-sound boxes; CROWN adds ``|Lambda_k| err_k`` in its
backward pass, so its boxes hold the executed values too.

Bounds used (u = 2^-p the unit roundoff of round-to-nearest, eta the largest absolute
error of one rounding in the subnormal range: half the smallest subnormal, or the
smallest normal where the format flushes):

* one correctly rounded operation with |exact result| <= Y: ``u Y + eta``;
* a function the context evaluates to a declared accuracy (float64's libm evaluators:
  ``f64_ulps`` of the function's record, tested against MPFR, and ``F64_ABS_ERR`` in
  the subnormal range;
  mpmath's functions, "accurate to ~1 ulp": 4 ulps are allowed);
* an affine node computed as sums of products (linear, conv2d, pools, sums, a constant
  added/multiplied/divided): every term passes through at most ``n`` roundings (n = the
  number of non-zero coefficients of the row + 2: the products, the sums, the bias and
  the rounding of a constant such as 1/count or a pad value), so, in any summation order, with or
  without FMA (Higham, Accuracy and Stability, Thm 3.1 and Lemma 3.1),
  ``|e| <= ((1 + u)^n - 1) (sum |m_j| |x_j| + |b|) + n eta``;
* ``linear`` in a binary format whose dot products are sequential (the binary contexts'
  documented order): also a running-error bound from interval partial sums over the
  box (:meth:`PointErrors.linear_sequential`); the smaller of the two is used;
* an op the backward pass does not cross whose interval box comes from its forward rule
  (matmul of two variable operands, reduce_sum_square, mse_loss): the same bound with
  n = the largest operand's size + 2 and the forward rule on the operands' magnitudes
  (``|a| + |b|`` and 0 for mse_loss's difference) as the sum of absolute terms;
* batchnorm_eval, ``(x - mean) inv gamma + beta`` with ``inv = 1/sqrt(var + eps)``:
  with m = inv gamma the exact coefficient, ``|e| <= gamma_12 (|m| (|x| + |mean|) +
  |beta|)`` (Higham's gamma_n = n u / (1 - n u): inv's roundings sit in a
  denominator), the caller passing ``|m| |mean| + |beta|`` as the offset magnitude;
* shape ops, negation, relu and max-pool are exact (0).

A result whose bound reaches the format's overflow threshold may be +-inf when executed:
its error is unbounded (``inf``), and CROWN falls back to the node's IBP box there.
Exact (rational) bases have no rounding: every bound is 0.
"""
from __future__ import annotations

import math

import numpy as np

from scalarlab.scalars.functions import F64_ABS_ERR, FUNCTIONS
from scalarlab.scalars.values import Interval

__all__ = ["PointErrors", "EXACT_AFFINE", "DOT_AFFINE", "BN_ROUNDINGS"]

#: affine ops whose point evaluation is exact (no arithmetic, or a sign change)
EXACT_AFFINE = frozenset({"flatten", "reshape", "permute", "neg", "broadcast_to", "detach",
                          "squeeze", "unsqueeze", "expand", "tile", "slice", "gather"})
#: affine ops computed as sums of products of the input with constants (see module doc)
DOT_AFFINE = frozenset({"linear", "conv1d", "conv2d", "conv3d", "avg_pool1d", "avg_pool2d",
                        "avg_pool3d", "global_avg_pool", "matmul", "pad", "sum", "reduce_sum",
                        "reduce_mean", "add", "sub", "mul", "div", "batchnorm_eval"})
#: roundings on one path of batchnorm_eval's evaluation ((x - mean) * inv * gamma + beta,
#: inv = 1 / sqrt(var + eps)): the conversions of mean, var, eps, gamma and beta, the
#: add, sqrt and division of inv, the subtraction, two products and the final add
BN_ROUNDINGS = 12


def _up(x):
    """One step up: float64 arithmetic below is rounded to nearest, then moved outward."""
    return np.nextafter(x, np.inf)


class PointErrors:
    """Rounding facts of the point context behind interval context ``ictx``."""

    def __init__(self, ictx):
        self.ictx = ictx
        kind = ictx.endpoint_kind
        self.exact = kind == "rational"
        #: dot products in a binary format, sequential left to right (not pairwise, not
        #: float64's native order): the running-error bound of linear applies
        self.sequential = (kind == "float" and ictx.fmt is not None
                           and ictx.base.reduction == "sequential")
        self.base = None if self.exact else ictx.base
        if self.exact:
            self.u, self.eta, self.max_finite, self.float64 = 0.0, 0.0, math.inf, False
        elif kind == "mpmath":
            # mpmath: unbounded exponent range, no underflow or overflow
            self.u, self.eta, self.max_finite, self.float64 = (
                math.ldexp(1.0, -int(self.base.prec)), 0.0, math.inf, False)
        else:
            fmt = self.base.fmt
            self.u = math.ldexp(1.0, -fmt.precision)
            self.eta = fmt.min_subnormal / 2 if fmt.subnormals else fmt.min_normal
            self.max_finite = fmt.max_finite
            self.float64 = ictx.float64_endpoints     # base float64 (no binary format)

    # ------------------------------------------------------------------ magnitudes
    def mag(self, v) -> np.ndarray:
        """max |t| over an interval value, as float64 rounded up (flat)."""
        lo, hi = np.asarray(v.lo), np.asarray(v.hi)
        if lo.dtype != np.float64 or hi.dtype != np.float64:    # mpmath / rational ends
            f = self.ictx.to_float64(v)
            lo, hi = np.asarray(f.lo, dtype=np.float64), np.asarray(f.hi, dtype=np.float64)
        return np.maximum(np.abs(lo), np.abs(hi)).reshape(-1)

    def _finish(self, err, ymag):
        """inf where the executed result may overflow (or the bound is not finite)."""
        with np.errstate(all="ignore"):
            bad = ~np.isfinite(err) | ~(_up(ymag + err) < self.max_finite)
        return np.where(bad, np.inf, err)

    # ---------------------------------------------------------------------- bounds
    def elementwise(self, op: str, ymag) -> np.ndarray:
        """Bound on |fl(s(z)) - s(z)| for an elementwise op with |s(z)| <= ymag."""
        ymag = np.asarray(ymag, dtype=np.float64)
        if self.exact or op in ("relu", "neg", "abs", "maximum", "minimum"):
            return np.zeros_like(ymag)
        with np.errstate(all="ignore"):
            if op in ("add", "sub", "mul", "div") or op in self.base.correctly_rounded:
                err = _up(_up(self.u * ymag) + self.eta)
            elif self.float64 and op in FUNCTIONS:
                # the evaluator's declared ulps bound (tested against MPFR); an ulp of a
                # value of magnitude <= Y is at most 2^-52 Y
                ulps = FUNCTIONS[op].f64_ulps
                err = _up(_up(ulps * 2.0 ** -52 * ymag) + F64_ABS_ERR)
            elif op in FUNCTIONS and self.eta == 0.0:          # mpmath: 4 ulps
                err = _up(8.0 * self.u * ymag)
            else:
                err = np.full_like(ymag, np.inf)    # no declared accuracy: no bound
        return self._finish(err, ymag)

    def affine(self, op: str, M: Interval, b: Interval, xmag, bmag=None) -> np.ndarray:
        """Bound per output of an affine node y = M x + b evaluated by the point context,
        |x| <= xmag elementwise (M an interval (n_v, n_u), b (n_v,)); ``bmag`` replaces
        |b| where the evaluation's constant terms are larger (batchnorm_eval)."""
        n_v = int(np.shape(b.lo)[0])
        if self.exact or op in EXACT_AFFINE:
            return np.zeros(n_v)
        if op not in DOT_AFFINE:
            return np.full(n_v, np.inf)
        m = self.mag(M).reshape(n_v, -1)
        bm = self.mag(b) if bmag is None else np.asarray(bmag, dtype=np.float64).reshape(-1)
        xm = np.asarray(xmag, dtype=np.float64).reshape(-1)
        n = np.count_nonzero(m, axis=1) + 2
        with np.errstate(all="ignore"):
            # sum of non-negative terms, each product and sum rounded to nearest in
            # float64: the exact sum is below fl(...) (1 + 2(k+1) 2^-53)
            s = np.where(m > 0, m * xm[None, :], 0.0).sum(axis=1) + bm
            s = _up(s * (1.0 + (m.shape[1] + 2) * 2.0 ** -52))
        return self.affine_sums(op, s, n)

    def affine_sums(self, op: str, s, n) -> np.ndarray:
        """The bound of :meth:`affine` from its ingredients: ``s >= sum |m_j| |x_j| + |b|``
        per output (float64, rounded up) and ``n`` >= the number of non-zero coefficients
        of the row + 2 (any upper bound is sound: theta_n grows with n).  CROWN's operator
        path gets s without forming M (see ibp/crown.py) and takes n = n_u + 2."""
        s = np.asarray(s, dtype=np.float64).reshape(-1)
        n_v = s.shape[0]
        if self.exact or op in EXACT_AFFINE:
            return np.zeros(n_v)
        if op not in DOT_AFFINE:
            return np.full(n_v, np.inf)
        n = np.broadcast_to(np.asarray(n, dtype=np.float64), (n_v,))
        if op == "batchnorm_eval":
            n = np.full(n_v, BN_ROUNDINGS)
        with np.errstate(all="ignore"):
            # theta_n <= (1 + u)^n - 1, computed with a relative margin (gamma_n where a
            # rounded value is divided by)
            theta = _up(np.expm1(n * math.log1p(self.u)) * (1.0 + 2.0 ** -40))
            if op == "batchnorm_eval":
                nu = n * self.u
                theta = np.where(nu < 0.5, _up(_up(nu) / (1.0 - nu) * (1.0 + 2.0 ** -40)),
                                 np.inf)
            err = _up(_up(theta * s) + _up(n * self.eta))
        return self._finish(err, s)

    def linear_sequential(self, M: Interval, b: Interval, X: Interval) -> np.ndarray:
        """Running-error bound per output of ``linear`` in a binary context whose dot
        products are sequential, left to right (one rounding per product and per addition,
        or per multiply-add), then ``+ b`` (M (n_v, n_u), b (n_v,), X (n_u,) intervals
        with float64 ends: X the execution-sound box of the input).

        With t_k = m_k x_k, s_k = t_1 + ... + t_k the exact partial sums and D_k a bound
        on |computed s_k - s_k|: the product, after the weight's conversion, is
        t_k (1 + theta_2) (+ 2 eta), and the k-th addition adds u |computed s_{k-1} +
        computed product| <= u (|s_k| + D_{k-1} + theta_2 |t_k| + 2 eta); so
        ``D_k <= D_{k-1} + (1 + u)(theta_2 |t_k| + 2 eta) + u (|s_k| + D_{k-1})``, and the
        bias adds ``u |b| + eta + u (|s_K + b| + D_K + u |b| + eta)``.  |s_k| is bounded
        over the box by interval partial sums, which cancel where the terms do, so the
        bound is far below gamma_n sum |t| on typical layers.  Zero columns of M (the
        input entries a row does not read) only add terms the evaluation skips, which
        can only raise the bound.  Every float64 step is rounded up."""
        m_lo, m_hi = np.asarray(M.lo, dtype=np.float64), np.asarray(M.hi, dtype=np.float64)
        x_lo = np.asarray(X.lo, dtype=np.float64).reshape(-1)
        x_hi = np.asarray(X.hi, dtype=np.float64).reshape(-1)
        u, eta = self.u, self.eta
        with np.errstate(all="ignore"):
            c = [m_lo * x_lo, m_lo * x_hi, m_hi * x_lo, m_hi * x_hi]
            p_lo = np.nextafter(np.minimum(np.minimum(c[0], c[1]), np.minimum(c[2], c[3])),
                                -np.inf)
            p_hi = _up(np.maximum(np.maximum(c[0], c[1]), np.maximum(c[2], c[3])))
            t = np.maximum(np.abs(p_lo), np.abs(p_hi))             # |t_k| <= t
            theta2 = _up(_up(2.0 * u) + _up(u * u))
            n_v, n_u = t.shape
            s_lo, s_hi = np.zeros(n_v), np.zeros(n_v)
            D = np.zeros(n_v)
            for k in range(n_u):
                s_lo = np.nextafter(s_lo + p_lo[:, k], -np.inf)
                s_hi = _up(s_hi + p_hi[:, k])
                prod = _up(_up(theta2 * t[:, k]) + 2.0 * eta)
                if k == 0:
                    D = prod
                    continue
                smag = np.maximum(np.abs(s_lo), np.abs(s_hi))
                D = _up(_up(D + _up(prod * (1.0 + u))) + _up(u * _up(smag + D)))
            bm = self.mag(b)
            b_lo = np.asarray(b.lo, dtype=np.float64).reshape(-1)
            b_hi = np.asarray(b.hi, dtype=np.float64).reshape(-1)
            ymag = np.maximum(np.abs(np.nextafter(s_lo + b_lo, -np.inf)),
                              np.abs(_up(s_hi + b_hi)))
            err = _up(_up(D + _up(u * bm) + eta)
                      + _up(u * _up(ymag + D + _up(u * bm) + eta)))
        return self._finish(err, ymag)

    def reduction(self, smag, n: int) -> np.ndarray:
        """Bound for an op computed as sums of n products (or terms) of its operands, in
        any order, whose absolute terms sum to at most ``smag`` per output (its forward
        rule on the operands' magnitudes): ``((1 + u)^n - 1) smag + n eta``."""
        smag = np.asarray(smag, dtype=np.float64).reshape(-1)
        if self.exact:
            return np.zeros_like(smag)
        with np.errstate(all="ignore"):
            theta = _up(math.expm1(n * math.log1p(self.u)) * (1.0 + 2.0 ** -40))
            err = _up(_up(theta * smag) + _up(n * self.eta))
        return self._finish(err, smag)
