"""Fused float64 loops of CROWN's backward pass (Numba): the same outward-rounded
arithmetic as :mod:`ibp.crown_ops` and ``crown._scale_columns``, one pass over the
coefficient matrix instead of one numpy temporary per operation.

Every rounded-to-nearest result v is moved outward with ``up(v) = (v + |v| 2^-52) +
eta`` / ``dn(v) = (v - |v| 2^-52) - eta`` (eta = 2^-1074): ``|v| 2^-52`` is at least
one ulp of a normal v and exact or within the subnormals otherwise, so up(v) is above
the exact value v rounds, and dn(v) below (crown_ops._up / _dn, the same formulas).  A
contraction into an FMA only removes roundings, so the bounds hold with or without one.
Each kernel reports ``ok = False`` when it meets a non-finite value: the caller then
takes the numpy path, which handles infinities.
"""
from __future__ import annotations

import numba
import numpy as np

__all__ = ["midrad", "apply_z", "apply_ends", "scale_diag", "relax_rows", "collapse_rows"]

_ETA = 2.0 ** -1074
_ULP = 2.0 ** -52


@numba.njit(cache=True, inline="always")
def _up(v):
    return (v + abs(v) * _ULP) + _ETA


@numba.njit(cache=True, inline="always")
def _dn(v):
    return (v - abs(v) * _ULP) - _ETA


@numba.njit(cache=True)
def midrad(lo, hi):
    """crown_ops._midrad on flat arrays: (mid, rad, all finite)."""
    n = lo.size
    mid, rad = np.empty(n), np.empty(n)
    ok = True
    for k in range(n):
        m = 0.5 * lo[k] + 0.5 * hi[k]
        r = ((hi[k] - lo[k]) * (0.5 + 2.0 ** -50) + abs(m) * 2.0 ** -51) + 8 * _ETA
        mid[k], rad[k] = m, r
        if not (np.isfinite(m) and np.isfinite(r)):
            ok = False
    return mid, rad, ok


@numba.njit(cache=True)
def apply_z(mid, rad, g):
    """``up(up(g |mid|) + rad)`` on flat arrays (crown_ops._apply's Z)."""
    n = mid.size
    z = np.empty(n)
    for k in range(n):
        z[k] = _up(_up(g * abs(mid[k])) + rad[k])
    return z


@numba.njit(cache=True)
def apply_ends(P, T, c1, c2):
    """``R = up(up(T c1) + c2)``, ``(dn(P - R), up(P + R))`` on flat arrays, and whether
    all are finite (crown_ops._apply's last step)."""
    n = P.size
    lo, hi = np.empty(n), np.empty(n)
    ok = True
    for k in range(n):
        R = _up(_up(T[k] * c1) + c2)
        a, b = _dn(P[k] - R), _up(P[k] + R)
        lo[k], hi[k] = a, b
        if not (np.isfinite(a) and np.isfinite(b)):
            ok = False
    return lo, hi, ok


@numba.njit(cache=True, inline="always")
def _prod_ends(a, b, c, d):
    """dn / up of the smallest / largest of the four products of [a, b] x [c, d]."""
    p1, p2, p3, p4 = a * c, a * d, b * c, b * d
    return _dn(min(min(p1, p2), min(p3, p4))), _up(max(max(p1, p2), max(p3, p4)))


@numba.njit(cache=True)
def scale_diag(lo, hi, dlo, dhi):
    """Lambda (rows, n) times the diagonal [dlo, dhi] (n,) entrywise, outward
    (crown_ops.scale_intervals); ok False on a NaN."""
    R, n = lo.shape
    olo, ohi = np.empty((R, n)), np.empty((R, n))
    ok = True
    for k in range(n):
        if not (np.isfinite(dlo[k]) and np.isfinite(dhi[k])):
            ok = False
    for r in range(R):
        for k in range(n):
            a, b = _prod_ends(lo[r, k], hi[r, k], dlo[k], dhi[k])
            olo[r, k], ohi[r, k] = a, b
            # finite operands only (min/max would hide a NaN of 0 x inf)
            if not (np.isfinite(a) and np.isfinite(b) and np.isfinite(lo[r, k])
                    and np.isfinite(hi[r, k])):
                ok = False
    return olo, ohi, ok


@numba.njit(cache=True)
def relax_rows(lo, hi, al_lo, al_hi, au_lo, au_hi, bl_lo, bl_hi, bu_lo, bu_hi):
    """One relaxed node crossed by Lambda (rows, n), slopes al, au >= 0 per column:
    ``Lambda+ al + Lambda- au`` (crown._scale_columns's ends) and the offset ``Lambda+ bl
    + Lambda- bu`` per row (interval products, sums rounded outward after every step),
    and whether every result is finite."""
    R, n = lo.shape
    olo, ohi = np.empty((R, n)), np.empty((R, n))
    clo, chi = np.zeros(R), np.zeros(R)
    ok = True
    for k in range(n):          # finite operands only (min/max would hide a NaN)
        for v in (al_lo[k], al_hi[k], au_lo[k], au_hi[k], bl_lo[k], bl_hi[k], bu_lo[k],
                  bu_hi[k]):
            if not np.isfinite(v):
                ok = False
    for r in range(R):
        slo, shi = 0.0, 0.0
        for k in range(n):
            pl, ph = max(lo[r, k], 0.0), max(hi[r, k], 0.0)
            nl, nh = min(lo[r, k], 0.0), min(hi[r, k], 0.0)
            a = _dn(_dn(pl * al_lo[k]) + _dn(nl * au_hi[k]))
            b = _up(_up(ph * al_hi[k]) + _up(nh * au_lo[k]))
            olo[r, k], ohi[r, k] = a, b
            if not (np.isfinite(a) and np.isfinite(b) and np.isfinite(lo[r, k])
                    and np.isfinite(hi[r, k])):
                ok = False
            if (bl_lo[k] != 0.0 or bl_hi[k] != 0.0) and (pl != 0.0 or ph != 0.0):
                x, y = _prod_ends(pl, ph, bl_lo[k], bl_hi[k])
                slo, shi = _dn(slo + x), _up(shi + y)
            if (bu_lo[k] != 0.0 or bu_hi[k] != 0.0) and (nl != 0.0 or nh != 0.0):
                x, y = _prod_ends(nl, nh, bu_lo[k], bu_hi[k])
                slo, shi = _dn(slo + x), _up(shi + y)
        clo[r], chi[r] = slo, shi
        if not (np.isfinite(slo) and np.isfinite(shi)):
            ok = False
    return olo, ohi, clo, chi, ok


@numba.njit(cache=True)
def collapse_rows(lo, hi, mag):
    """An interval Lambda (rows, n) as a float matrix P and a per-row charge s with
    ``|(Lambda - P) z| <= s`` for every exact Lambda in [lo, hi] and |z| <= mag
    (crown._collapse): P = fl(lo/2 + hi/2) (lo itself where lo == hi, radius 0), the
    radius ``up(max(hi - P, P - lo))`` and ``s = sum_k rad_k mag_k`` with every product
    and sum rounded up; ok False on a non-finite value."""
    R, n = lo.shape
    P = np.empty((R, n))
    s = np.zeros(R)
    ok = True
    for k in range(n):
        if not np.isfinite(mag[k]):
            ok = False
    for r in range(R):
        acc = 0.0
        for k in range(n):
            a, b = lo[r, k], hi[r, k]
            if a == b:
                P[r, k] = a
                if not np.isfinite(a):
                    ok = False
                continue
            m = 0.5 * a + 0.5 * b
            P[r, k] = m
            rad = _up(max(b - m, m - a))
            if mag[k] != 0.0:
                acc = _up(acc + _up(rad * mag[k]))
            if not (np.isfinite(m) and np.isfinite(rad)):
                ok = False
        s[r] = acc
        if not np.isfinite(acc):
            ok = False
    return P, s, ok
