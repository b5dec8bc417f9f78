"""Compiled, exactly directed float64 endpoints of exp, log, tanh, sigmoid and softplus.

For a float64 argument x each kernel computes f(x) as an unevaluated double-double
``H + L`` (``H = RN(H + L)``, exact TwoSum split) with a *proven* bound
``|H + L - f(x)| <= E_f |H|``.  With ``e = E_f |H|`` far below half an ulp of H:

* ``L > e``: f(x) lies strictly between H and next(H): RD = H, RU = next(H);
* ``L < -e``: f(x) lies strictly between prev(H) and H: RD = prev(H), RU = H;
* otherwise (|L| <= e: f(x) within e of the float64 H, which includes every exact case
  such as exp(0) = 1) the entry is *flagged* and the caller settles it through the long
  double / MPFR path (:func:`scalars.kernels.function_endpoints.func_dir_f64`).

(Strictness: |L| <= ulp(H)/2, or ulp_below(H)/2 when H is a power of two and L < 0, and
e < ulp(H)/4, so ``H + L +- e`` never reaches the next float64 beyond H.)  Arguments where
the answer is known in closed form are settled in the kernel (exp(0) = 1, log(1) = 0,
tanh(+-0) = +-0, sigmoid(0) = 1/2, tiny |x| where f(x) = f(0) + x f'(0) + tiny, saturated
tails); arguments whose results leave the normal range (exp beyond [-707, 709], sigmoid
and softplus below -680, log of 0 / inf, non-finite x) are flagged.

Notation: u = 2^-53 (unit roundoff), rho = max |r| of a reduced argument.  Every bound
below is a sum of absolute terms, each one rounding (<= u |value|) or one neglected term;
they are written out generously and the declared ``E_f`` carries a further margin >= 2^1.5
(tanh, whose decisions use the bound at the argument: >= 2^0.8).
``tests/scalars/test_f64_endpoint_kernels.py`` measures the actual error against MPFR on
random and adversarial arguments and checks it stays under ``E_f / 8`` (measured over
6 x 10^4 arguments: exp 2^-85.0, log 2^-73.0, tanh 2^-75.1, sigmoid 2^-85.1, softplus
2^-74.1, expm1 2^-75.2).

exp (E_EXP = 2^-76)
    Reduction: k = round(x 512/ln2), x = k ln2/512 + r, j = k mod 512, m = k div 512,
    e^x = 2^m 2^(j/512) e^r.  ln2/512 = L1 + L2 + L3: L1 has 33 significant bits, so k L1
    is exact for |k| < 2^20 (|x| <= 709.8 gives |k| <= 524,314); r1 = fma(-k, L1, x) is
    exact (|r1| < 2^-10 and r1 is a multiple of 2^-63 when k != 0, r1 = x when k = 0);
    r = r1 - k L2 - k L3 as (rh, rl): TwoProduct(k, L2) and TwoSum are exact, the two
    roundings of rl <= 2^-115, the truncation |k (ln2/512 - L1 - L2 - L3)| <= 2^-128.
    So |r - rh - rl| <= 2^-114, rho <= 2^-10.5 (1 + 2^-11).
    Polynomial: e^r - 1 = r + r^2/2 + r^3 P(r), P the Taylor polynomial of degree 4
    (1/6 ... 1/5040); truncation rho^8/8! <= 2^-99.  r^2/2 = s/2 + se/2 + rh rl + rl^2/2
    with (s, se) = TwoProduct(rh, rh) exact; r + s/2 by TwoSum (exact); the rl terms of
    r^3/6 (rh^2 rl / 2) are added, the rest (<= 2^-125) neglected.  The cubic part
    c = rh s P(rh) carries <= 8 roundings: <= 8u rho^3/6 <= 2^-84.1; the five additions of
    the tail (magnitude <= 2^-33.9) <= 5u 2^-33.9 <= 2^-84.7.  |e1 - (e^r - 1)| <= 2^-82.9
    (and <= 2^-72.9 |e^r - 1| relatively, the terms scaling with r^3).
    Table: 2^(j/512) = Th + Tl + d, |d| <= 2^-106 Th (MPFR at 200 bits, rounded twice).
    Result T (1 + e1) = Th + Th u1 + (Tl + Th tail + Tl u1), Th u1 by TwoProduct: the tail
    (<= 2^-32) takes <= 5 roundings <= 2^-82.7; Tl * tail neglected <= 2^-85; the e1 error
    times T <= 2^-81.9.  Total <= 2^-80.5 absolute on a value >= 0.999: relative <= 2^-80.4.
    Decided on the unscaled [1, 2) value, then RD/RU times 2^m is exact (normal range).
expm1 (used by tanh; E_EXPM1 = 2^-69)
    2^m T (1 + e1) - 1 with 2^m Th - 1 by TwoSum (exact): for k = 0 relative <= 2^-72.9
    (above); for k != 0 (|x| >= ln2/1024, so E = e^x - 1 >= 2^-10.53 for x > 0) the
    absolute 2^-80.4 e^x of exp plus the tail's own roundings (<= 2^-82.7) give
    <= 2^-80.3 (E + 1), i.e. relative <= 2^-80.3 (1 + 1/E) <= 2^-69.7.
tanh (E_TANH = 2^-67)
    tanh |x| = E/(E + 2), E = expm1(2|x|) (2|x| is exact); E + 2 by TwoSum plus one
    rounding (<= 2^-105); the double-double quotient: inv = RN(1/Bh), qh = RN(Eh inv)
    (within 2.01u of the quotient), remainder Eh - qh Bh by TwoProduct (Sterbenz: Eh - p
    exact) with four roundings on a value <= 4u |E| (<= 2^-102 relative), ql = rem inv
    (<= 2^-102.4).  Relative <= 2 eps_E + 2^-101 with eps_E the relative error of E:
    <= 2^-71.8 + 2^-79.3 (1 + 1/E), the second term only where E > 2^-11 (k != 0
    there).  The decision uses the bound at its argument, |q| (2^-70.5 + 2^-78.5 (1 + 1/E))
    when Eh > 2^-11 (margins 2^1.3 and 2^0.8), written |q| (2^-70.5 + 2^-78.5) +
    2^-78.5 (1 + 10^-6) / Bh since |q|/E = 1/(E + 2) (Bh, qh within 2^-50 of E + 2, q);
    at most E_TANH |q| over the range: the usual |x| ~ 1 gets ~2^-70.4 instead of 2^-67.
    |x| < 2^-30: x - x^3/3 < tanh x < x so (prev x, x) (mirrored for x < 0);
    |x| >= 19.5: 1 - tanh |x| < 2 e^-39 < 2^-54, so (1 - 2^-53, 1).
sigmoid (E_SIGMOID = 2^-74)
    x >= 0: 1/(1 + e^-x); x < 0: e^x/(1 + e^x); e^(+-x) as the scaled double-double of exp
    (relative <= 2^-80.4, plus <= 2^-1075 absolute from scaling, <= 2^-94 relative for
    x >= -680); 1 + E by TwoSum plus one rounding; the quotient as for tanh.  Relative
    <= 2 2^-80.4 + 2^-100 <= 2^-79.3.  |x| < 2^-60: (1/2, next) or (prev, 1/2);
    x >= 37.5: 1 - sigmoid x < e^-37.5 < 2^-54, so (1 - 2^-53, 1).
log (E_LOG = 2^-69)
    x = 2^e m, 1 <= m < 2 (subnormal x scaled by 2^54 first); i = round(512 (m - 1)),
    c_i = RN(1/(1 + i/512)) (c_0 = 1, c_512 = 1/2 exactly); m c_i = p + pe by TwoProduct,
    r = (p - 1) + pe (Sterbenz, then TwoSum: exact), |r| <= 2^-10 + 2^-52.
    log x = K ln2 + Lg_i + log1p(r) with K = e (+1 for i = 512), Lg_i = -log(c_i) (0 for
    i = 0 and 512) as a double-double (<= 2^-106 relative), ln2 = LN2H + LN2L (LN2H with
    42 bits so K LN2H is exact for |K| < 2^11; truncation and the rounding of K LN2L
    <= 2^-84).  log1p(r) = r - r^2/2 + r^3 Q(r), Q of degree 5 (1/3 ... -1/8):
    truncation rho^9/9 <= 2^-93 relative to r; r^2/2 as for exp (exact parts plus rh rl,
    rh^2 rl added for r^3/3); the cubic part <= 8u rho^2/3 <= 2^-72.3 relative to r, the
    tail's roundings <= 2^-74 relative to r.  Either K = 0 and Lg_i = 0 and the result is
    log1p(r) alone (relative <= 2^-71.8), or |log x| >= 2^-11 and the absolute error
    <= 2^-83 + 2^-84 + 2^-100 is <= 2^-71.4 relative.
softplus (E_SOFTPLUS = 2^-67)
    t = e^-|x| (exp, relative 2^-80.4); log1p(t): t <= 2^-10 by the series above (relative
    <= 2^-71.8); otherwise log(1 + t) = log(Bh) + Bl/Bh with 1 + t = Bh + Bl (TwoSum, one
    rounding), the neglected (Bl/Bh)^2/2 <= 2^-105 (log result >= 2^-10.1, relative
    <= 2^-70 + 2^-90).  An error relative eps in t moves log1p(t) by at most eps relative.
    x > 0: x + log1p(e^-x), all terms positive (no cancellation).  Relative <= 2^-69.9.
    x >= 40: softplus x - x < e^-x < ulp(x), so (x, next x).

The kernels are plain loops over float64 arrays (no Python objects); one kernel per
function, each compiled (``cache=True``) when first used.  Tables are computed at import by gmpy2 (MPFR) at 200 bits.
"""
from __future__ import annotations

import math

import gmpy2
import numba
import numpy as np

from .eft import f2i, fma, i2f, two_prod, two_sum
from .flat import flat_f64, writable

_jit = numba.njit(cache=True, error_model="numpy")
# Helpers that call only leaf functions are plain compiled functions (LLVM inlines them);
# the ones that call such helpers, and the per-function bodies, are inlined by Numba, so
# that no call is nested more than two deep in a kernel loop (deeper calls stay calls
# and stop LLVM's loop vectoriser).  Numba-level inlining is what costs compile time, so
# each kernel inlines one function body once.
_inl = numba.njit(cache=True, error_model="numpy")
_ir = numba.njit(cache=True, error_model="numpy", inline="always")

#: function codes of the compiled endpoints (names of scalars.functions entries)
CODES = {"exp": 0, "log": 1, "tanh": 2, "sigmoid": 3, "softplus": 4}

#: declared relative error bounds (module docstring): the decision margin of each function
E_EXP = 2.0 ** -76
E_EXPM1 = 2.0 ** -69
E_TANH = 2.0 ** -67
_TANH_REL = 2.0 ** -70.5          # tanh: E_TANH bounds _TANH_REL + _TANH_ABS (1 + 1/E)
_TANH_ABS = 2.0 ** -78.5
E_SIGMOID = 2.0 ** -74
E_LOG = 2.0 ** -69
E_SOFTPLUS = 2.0 ** -67
BOUNDS = {"exp": E_EXP, "log": E_LOG, "tanh": E_TANH, "sigmoid": E_SIGMOID,
          "softplus": E_SOFTPLUS}


# ------------------------------------------------------------------------ constants
def _dd(v):
    """(hi, lo) float64 pair of an mpfr value: hi = RN(v), lo = RN(v - hi)."""
    with gmpy2.context(precision=53):
        h = float(+v)
    with gmpy2.context(precision=200):
        r = v - gmpy2.mpfr(h)
    with gmpy2.context(precision=53):
        return h, float(+r)


def _tables():
    with gmpy2.context(precision=200):
        ln2 = gmpy2.const_log2()
        q = ln2 / 512
        # L1: q truncated to 33 significant bits; L2, L3 the next two double pieces
        e = gmpy2.get_exp(q)                       # q = 0.1xxx * 2^e
        l1 = gmpy2.mpfr(math.floor(q * 2 ** (33 - e))) / 2 ** (33 - e)
        l2 = gmpy2.mpfr(float(q - l1))
        l3 = gmpy2.mpfr(float(q - l1 - l2))
        el = gmpy2.get_exp(ln2)
        h42 = gmpy2.mpfr(math.floor(ln2 * 2 ** (42 - el))) / 2 ** (42 - el)
        exp_hi = np.empty(512)
        exp_lo = np.empty(512)
        for j in range(512):
            exp_hi[j], exp_lo[j] = _dd(gmpy2.exp2(gmpy2.mpfr(j) / 512))
        c = np.empty(513)
        lg_hi = np.empty(513)
        lg_lo = np.empty(513)
        for i in range(513):
            ci = float(1 / (1 + gmpy2.mpfr(i) / 512)) if 0 < i < 512 else (1.0 if i == 0 else 0.5)
            c[i] = ci
            if i in (0, 512):
                lg_hi[i] = lg_lo[i] = 0.0        # c_0 = 1; c_512 = 1/2 is K + 1
            else:
                lg_hi[i], lg_lo[i] = _dd(-gmpy2.log(gmpy2.mpfr(ci)))
        consts = np.array([float(512 / ln2), float(l1), float(l2), float(l3),
                           float(h42), float(ln2 - h42)])
    return exp_hi, exp_lo, c, lg_hi, lg_lo, consts


_EXP_HI, _EXP_LO, _LOG_C, _LG_HI, _LG_LO, _K = _tables()
_INV_L, _L1, _L2, _L3, _LN2H, _LN2L = (float(v) for v in _K)
_SHIFTER = 6755399441055744.0                  # 1.5 * 2^52: round to nearest integer
_ONE_DN = 1.0 - 2.0 ** -53
_HALF_DN = 0.5 - 2.0 ** -54


# ------------------------------------------------------------------------ helpers
@_inl
def _next(h):
    b = f2i(h)
    return i2f(np.int64(1) if (b << 1) == 0 else (b - 1 if b < 0 else b + 1))


@_inl
def _prev(h):
    b = f2i(h)
    return i2f(np.int64(-9223372036854775807) if (b << 1) == 0
               else (b + 1 if b < 0 else b - 1))


@_inl
def _decide(h, l, E):
    """(RD, RU, decided) of the real h + l known within E |h| (h = RN(h + l))."""
    e = abs(h) * E
    above = l > e
    below = l < -e
    d = h if above else _prev(h)
    u = _next(h) if above else h
    return d, u, above | below


@_inl
def _decide_abs(h, l, e):
    """(RD, RU, decided) of the real h + l known within e (h = RN(h + l), e < ulp(h)/4)."""
    above = l > e
    below = l < -e
    d = h if above else _prev(h)
    u = _next(h) if above else h
    return d, u, above | below


@_inl
def _pow2(m):
    return i2f((np.int64(m) + 1023) << 52)


@_inl
def _dd_div(ah, al, bh, bl):
    """(ah + al) / (bh + bl) as a double-double (bh + bl > 0, bh = RN(bh + bl)): one
    division; qh = ah * (1/bh) is within 2 ulps of the quotient, so p = qh bh lies within
    a factor 2 of ah (Sterbenz: ah - p exact) and the remainder is exact up to its last
    three roundings; ql = rem (1/bh) (relative 2^-51 on a term <= 2^-50 |q|)."""
    inv = 1.0 / bh
    qh = ah * inv
    p, pe = two_prod(qh, bh)
    rem = (((ah - p) - pe) + al) - qh * bl
    return two_sum(qh, rem * inv)


@_inl
def _exp_core(x):
    """(m, H, L): e^x = 2^m (H + L (1 +- 2^-80.4)), H + L in [0.998, 2.002], for
    |x| <= 745 finite (module docstring)."""
    kf = (x * _INV_L + _SHIFTER) - _SHIFTER
    k = np.int64(kf)
    j = k & 511
    m = k >> 9
    r1 = fma(-kf, _L1, x)
    p, pe = two_prod(kf, _L2)
    rh, rt = two_sum(r1, -p)
    rl = (rt - pe) - kf * _L3
    s, se = two_prod(rh, rh)
    u1, ue = two_sum(rh, 0.5 * s)
    c = rh * s * (1.0 / 6 + rh * (1.0 / 24 + rh * (1.0 / 120 + rh * (1.0 / 720
                                                                      + rh * (1.0 / 5040)))))
    tail = ((((rl + ue) + 0.5 * se) + rh * rl) + 0.5 * s * rl) + c
    th = _EXP_HI[j]
    tl = _EXP_LO[j]
    q, qe = two_prod(th, u1)
    h0, h0e = two_sum(th, q)
    t2 = (((h0e + qe) + tl) + th * tail) + tl * u1
    return m, th, tl, u1, tail, h0, t2


@_ir
def _exp_dd(x):
    """e^x as a scaled double-double (relative <= 2^-80.4) for -680 <= x <= 709."""
    m, th, tl, u1, tail, h0, t2 = _exp_core(x)
    h, l = two_sum(h0, t2)
    sc = _pow2(m)
    return h * sc, l * sc


@_ir
def _expm1_dd(x):
    """e^x - 1 as a double-double (relative <= 2^-70.8) for |x| <= 40."""
    m, th, tl, u1, tail, h0, t2 = _exp_core(x)
    sc = _pow2(m)
    d, de = two_sum(th * sc, -1.0)
    q, qe = two_prod(th * sc, u1)
    a, ae = two_sum(d, q)
    t = ((ae + de) + qe) + sc * ((tl + th * tail) + tl * u1)
    return two_sum(a, t)


@_inl
def _log1p_poly(rh, rl):
    """(u, tail): log1p(rh + rl) = u + tail for |rh + rl| <= 2^-10 + 2^-52 (relative
    <= 2^-71.8, module docstring)."""
    s, se = two_prod(rh, rh)
    u, ue = two_sum(rh, -0.5 * s)
    c = rh * s * (1.0 / 3 + rh * (-0.25 + rh * (0.2 + rh * (-1.0 / 6 + rh * (1.0 / 7
                                                                          + rh * -0.125)))))
    tail = ((((rl + ue) - 0.5 * se) - rh * rl) + s * rl) + c
    return u, tail


@_ir
def _log_dd(x, extra):
    """log(x) + extra as a double-double, x > 0 finite (subnormals too), |extra| <= 2^-52:
    relative <= 2^-71.4 (module docstring)."""
    sub = x < 2.2250738585072014e-308
    xs = x * 18014398509481984.0 if sub else x          # 2^54
    b = f2i(xs)
    e = ((b >> 52) & 0x7FF) - 1023 - (54 if sub else 0)
    frac = b & np.int64(0xFFFFFFFFFFFFF)
    i = (frac + (np.int64(1) << 42)) >> 43
    mm = i2f(frac | (np.int64(1023) << 52))
    K = e + (i >> 9)
    c = _LOG_C[i]
    p, pe = two_prod(mm, c)
    rh, rl = two_sum(p - 1.0, pe)
    u, tail = _log1p_poly(rh, rl)
    kf = np.float64(K)
    a, ae = two_sum(kf * _LN2H, _LG_HI[i])
    bb, be = two_sum(a, u)
    t = ((((ae + be) + kf * _LN2L) + _LG_LO[i]) + tail) + extra
    return two_sum(bb, t)


@_ir
def _tanh_dd(a):
    """tanh a = E/(E + 2), E = expm1(2a), for 2^-30 <= a < 19.5."""
    eh, el = _expm1_dd(2.0 * a)
    bh, bl = two_sum(2.0, eh)
    bl = bl + el
    qh, ql = _dd_div(eh, el, bh, bl)
    return qh, ql, eh, bh


@_ir
def _sigmoid_dd(x):
    """1/(1 + e^-x) for x >= 0, e^x/(1 + e^x) for x < 0 (-680 <= x <= 37.5)."""
    eh, el = _exp_dd(-abs(x))
    bh, bl = two_sum(1.0, eh)
    bl = bl + el
    pos = x >= 0.0
    return _dd_div(1.0 if pos else eh, 0.0 if pos else el, bh, bl)


@_ir
def _softplus_dd(x):
    """max(x, 0) + log1p(e^-|x|) for -680 <= x < 40."""
    th, tl = _exp_dd(-abs(x))
    # both branches computed, one selected (straight-line code vectorises)
    series = th <= 0.0009765625                         # 2^-10: the series
    yu, yt = _log1p_poly(th if series else 0.0, tl if series else 0.0)
    ph, pl = two_sum(yu, yt)
    bh, bl = two_sum(1.0, th)
    bl = bl + tl
    gh, gl = _log_dd(bh, bl / bh)
    yh = ph if series else gh
    yl = pl if series else gl
    pos = x > 0.0
    sh, sl = two_sum(x if pos else 0.0, yh)
    zh, zl = two_sum(sh, sl + yl)
    return (zh if pos else yh), (zl if pos else yl)


# ------------------------------------------------------------------- per function
@_ir
def _exp_end(x):
    ok_range = (x >= -707.0) & (x <= 709.0)
    xc = x if ok_range else 1.0
    m, th, tl, u1, tail, h0, t2 = _exp_core(xc)
    h, l = two_sum(h0, t2)
    d, u, ok = _decide(h, l, E_EXP)
    sc = _pow2(m)
    d = d * sc
    u = u * sc
    tiny = abs(x) < 8.673617379884035e-19               # 2^-60
    d = (1.0 if x >= 0.0 else _ONE_DN) if tiny else d
    u = (_next(1.0) if x > 0.0 else 1.0) if tiny else u
    return d, u, (ok & ok_range) | tiny, h * sc, l * sc


@_ir
def _log_end(x):
    ok_range = (x > 0.0) & (x <= 1.7976931348623157e308)
    xc = x if ok_range else 2.0
    h, l = _log_dd(xc, 0.0)
    d, u, ok = _decide(h, l, E_LOG)
    one = x == 1.0
    d = 0.0 if one else d
    u = 0.0 if one else u
    return d, u, (ok & ok_range) | one, h, l


@_ir
def _tanh_end(x):
    a = abs(x)
    mid = (a >= 9.313225746154785e-10) & (a < 19.5)     # 2^-30
    ac = a if mid else 1.0
    qh, ql, eh, bh = _tanh_dd(ac)
    # the bound at this argument (module docstring): |q| (REL + ABS (1 + 1/E)), at most
    # E_TANH |q|; |q|/E = 1/(E + 2) (one division, shared by LLVM with the quotient's)
    far = eh > 0.00048828125                            # 2^-11
    e = abs(qh) * (_TANH_REL + (_TANH_ABS if far else 0.0)) \
        + ((_TANH_ABS * 1.000001) * (1.0 / bh) if far else 0.0)
    d, u, ok = _decide_abs(qh, ql, e)
    small = a < 9.313225746154785e-10
    big = (a >= 19.5) & (a <= 1.7976931348623157e308)
    d = _prev(a) if small else (_ONE_DN if big else d)
    u = a if small else (1.0 if big else u)
    neg = x < 0.0
    dd = -u if neg else d
    uu = (0.0 - d) if neg else u                        # RU of tanh(-5e-324) is +0
    zero = x == 0.0
    dd = x if zero else dd
    uu = x if zero else uu
    return dd, uu, (ok & mid) | small | big, (-qh if neg else qh), (-ql if neg else ql)


@_ir
def _sigmoid_end(x):
    mid = (x >= -680.0) & (x < 37.5) & (abs(x) >= 8.673617379884035e-19)
    xc = x if mid else 1.0
    qh, ql = _sigmoid_dd(xc)
    d, u, ok = _decide(qh, ql, E_SIGMOID)
    tiny = abs(x) < 8.673617379884035e-19
    big = (x >= 37.5) & (x <= 1.7976931348623157e308)
    d = (0.5 if x >= 0.0 else _HALF_DN) if tiny else (_ONE_DN if big else d)
    u = (_next(0.5) if x > 0.0 else 0.5) if tiny else (1.0 if big else u)
    return d, u, (ok & mid) | tiny | big, qh, ql


@_ir
def _softplus_end(x):
    mid = (x >= -680.0) & (x < 40.0)
    xc = x if mid else 1.0
    yh, yl = _softplus_dd(xc)
    d, u, ok = _decide(yh, yl, E_SOFTPLUS)
    big = (x >= 40.0) & (x <= 1.7976931348623157e308)
    d = x if big else d
    u = _next(x) if big else u
    return d, u, (ok & mid) | big, yh, yl


# ------------------------------------------------------------------------ kernels
# One kernel per function (compiled when its function is first used), both ends of an
# interval in one iteration (two independent evaluations side by side: ~1.4x faster than
# one end per pass).  (A conditional store in the loop stops the vectoriser: the
# double-double values for tests come from :func:`dd_kernel`.)
@_ir
def _store(i, d, okd, u, oku, lo, hi, tl, th):
    lo[i] = d
    hi[i] = u
    tl[i] = not okd
    th[i] = not oku
    return np.int64(not okd) + np.int64(not oku)


# Five copies on purpose: an end-function argument is called un-inlined (5-6x slower); a closure never hits the disk cache.
@_jit
def exp_kernel(xl, xh, lo, hi, tl, th):
    """lo = RD e^xl, hi = RU e^xh elementwise; tl / th flag the ends left undecided (the
    value there is meaningless).  Returns the number of flags."""
    n = 0
    for i in range(xl.size):
        d, _u, okd, _h, _l = _exp_end(xl[i])
        _d, u, oku, _h2, _l2 = _exp_end(xh[i])
        n += _store(i, d, okd, u, oku, lo, hi, tl, th)
    return n


@_jit
def log_kernel(xl, xh, lo, hi, tl, th):
    """:func:`exp_kernel` for log."""
    n = 0
    for i in range(xl.size):
        d, _u, okd, _h, _l = _log_end(xl[i])
        _d, u, oku, _h2, _l2 = _log_end(xh[i])
        n += _store(i, d, okd, u, oku, lo, hi, tl, th)
    return n


@_jit
def tanh_kernel(xl, xh, lo, hi, tl, th):
    """:func:`exp_kernel` for tanh."""
    n = 0
    for i in range(xl.size):
        d, _u, okd, _h, _l = _tanh_end(xl[i])
        _d, u, oku, _h2, _l2 = _tanh_end(xh[i])
        n += _store(i, d, okd, u, oku, lo, hi, tl, th)
    return n


@_jit
def sigmoid_kernel(xl, xh, lo, hi, tl, th):
    """:func:`exp_kernel` for sigmoid."""
    n = 0
    for i in range(xl.size):
        d, _u, okd, _h, _l = _sigmoid_end(xl[i])
        _d, u, oku, _h2, _l2 = _sigmoid_end(xh[i])
        n += _store(i, d, okd, u, oku, lo, hi, tl, th)
    return n


@_jit
def softplus_kernel(xl, xh, lo, hi, tl, th):
    """:func:`exp_kernel` for softplus."""
    n = 0
    for i in range(xl.size):
        d, _u, okd, _h, _l = _softplus_end(xl[i])
        _d, u, oku, _h2, _l2 = _softplus_end(xh[i])
        n += _store(i, d, okd, u, oku, lo, hi, tl, th)
    return n


KERNELS = {"exp": exp_kernel, "log": log_kernel, "tanh": tanh_kernel,
           "sigmoid": sigmoid_kernel, "softplus": softplus_kernel}


def run(name: str, xl, xh):
    """(lo, hi, tl, th, count) of the kernel for ``name`` on 1-d float64 arrays of one
    length: RD f(xl), RU f(xh), the flags and their number."""
    lo = np.empty(xl.size)
    hi = np.empty(xl.size)
    tl = np.empty(xl.size, dtype=np.bool_)
    th = np.empty(xl.size, dtype=np.bool_)
    count = KERNELS[name](xl, xh, lo, hi, tl, th)
    return lo, hi, tl, th, count


@_jit
def dd_kernel(code, x, h, l):
    """The double-double value each decision is made from (tests of the error bounds):
    codes of :data:`CODES`, and 5 for the e^x - 1 tanh is built from (|x| <= 40)."""
    for i in range(x.size):
        t = x[i]
        if code == 0:
            r = _exp_end(t)
        elif code == 1:
            r = _log_end(t)
        elif code == 2:
            r = _tanh_end(t)
        elif code == 3:
            r = _sigmoid_end(t)
        elif code == 4:
            r = _softplus_end(t)
        else:
            a, b = _expm1_dd(t)
            r = (a, a, True, a, b)
        h[i] = r[3]
        l[i] = r[4]


def double_double(name: str, x):
    """(h, l): the double-double f(x) the decisions are made from (tests)."""
    x = writable(np.ascontiguousarray(x, dtype=np.float64))
    h = np.empty(x.size)
    l = np.empty(x.size)
    dd_kernel(5 if name == "expm1" else CODES[name], x, h, l)
    return h, l


def endpoints(name: str, xl, xh, settle):
    """(RD f(xl), RU f(xh)) on the float64 grid for ``name`` in :data:`CODES`, float64
    arrays of one shape; flagged ends go to ``settle(x) -> (RD f(x), RU f(x))`` (arrays,
    the long double / MPFR path); NaN arguments give NaN."""
    return endpoints_counted(name, xl, xh, settle)[:2]


def endpoints_counted(name: str, xl, xh, settle):
    """:func:`endpoints` and the number of NaN ends (only a flagged end, settled outside
    the kernel, can be NaN: the count looks at those alone)."""
    shape = np.shape(xh)
    H = flat_f64(xh)
    same = xl is xh
    L = H if same else flat_f64(xl, shape)
    lo, hi, tl, th, count = run(name, L, H)
    nans = 0
    if count:
        il = flagged(tl)
        if il.size:
            lo[il] = settle(L[il])[0]
            nans += int(np.isnan(lo[il]).sum())
        ih = flagged(th)
        if ih.size:
            hi[ih] = settle(H[ih])[1]
            nans += int(np.isnan(hi[ih]).sum())
    return lo.reshape(shape), hi.reshape(shape), nans


@_jit
def flagged(todo):
    """Indices of the flagged entries of ``todo``."""
    count = 0
    for i in range(todo.size):
        count += np.int64(todo[i])
    idx = np.empty(count, dtype=np.int64)
    a = 0
    for i in range(todo.size):
        if todo[i]:
            idx[a] = i
            a += 1
    return idx
