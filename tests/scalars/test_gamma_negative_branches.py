"""tgamma and lgamma over boxes holding a negative branch's extremum, on every branch.

Between the poles -k and -k + 1, Gamma has one extremum c_k (the root of digamma): a
maximum of Gamma for odd k (Gamma < 0 there), a minimum for even k, and a minimum of
log|Gamma| for every k.  The oracle is Arb (python-flint): c_k is bracketed by a ball on
which Arb proves digamma's sign change, so Gamma of that ball holds Gamma(c_k); the box
ends are checked against MPFR in the matching directed context.  The boxes are those of
issue 23 (relative half-width 1e-9, and two float64 steps) in interval:float64 on every
branch where Gamma(c_k) is a normal or subnormal float64, and in interval:mpmath:200 on
branches 1..30.
"""
from __future__ import annotations

from fractions import Fraction

import flint
import gmpy2
import mpmath
import numpy as np
import pytest

from scalarlab import scalars

B64 = dict(precision=53, emin=-1073, emax=1024, subnormalize=True)
ORACLE_PREC = 700


def _arb_fraction(x) -> Fraction:
    man, exp = x.man_exp()
    man, exp = int(man), int(exp)
    return Fraction(man * 2 ** exp) if exp >= 0 else Fraction(man, 2 ** -exp)


def _ends(ball):
    """Exact rational ends of an Arb ball."""
    return _arb_fraction(ball.lower()), _arb_fraction(ball.upper())


def _extremum(k):
    """(c, ends of a ball holding Gamma(c_k), likewise log|Gamma(c_k)|); c is a 400-bit
    approximation of c_k."""
    with mpmath.workprec(400):
        lo, hi = mpmath.mpf(-k), mpmath.mpf(-k + 1)
        c = mpmath.findroot(mpmath.digamma, (lo + mpmath.mpf(1) / (2 * k + 4),
                                             hi - mpmath.mpf(1) / (2 * k + 4)),
                            solver="anderson")
    old = flint.ctx.prec
    flint.ctx.prec = ORACLE_PREC
    try:
        cm = flint.arb(mpmath.nstr(c, 130))
        eps = abs(cm) * flint.arb(2) ** -380
        left, right = cm - eps, cm + eps
        # digamma is increasing on the branch: a proven sign change brackets c_k
        assert left.digamma() < 0 < right.digamma(), k
        ball = left.union(right)          # holds c_k
        g = ball.gamma()
        lg = abs(g).log()
        # exact ends, read while the precision is high (lower() rounds to it)
        return c, _ends(g), _ends(lg)
    finally:
        flint.ctx.prec = old


ALL_BRANCHES = list(range(1, 181))
# the default run: the first eight branches and every eleventh one after (both parities)
SOME_BRANCHES = list(range(1, 9)) + list(range(9, 181, 11)) + [177, 178]
_EXT = {}


def extremum(k):
    if k not in _EXT:
        _EXT[k] = _extremum(k)
    return _EXT[k]


def _round(q: Fraction, rnd) -> float:
    with gmpy2.context(round=rnd, **B64):
        return float(gmpy2.mpfr(gmpy2.mpq(q.numerator, q.denominator)))


def _mpfr_at(name, x: float, rnd):
    with gmpy2.context(round=rnd, **B64) as c:
        X = gmpy2.mpfr(x, 53)
        return float(c.gamma(X) if name == "tgamma" else c.lgamma(X)[0])


def _float64_box(c, kind):
    cf = float(c)
    if kind == "rel1e-9":
        return cf * (1 + 1e-9), cf * (1 - 1e-9)
    return (float(np.nextafter(np.nextafter(cf, -np.inf), -np.inf)),
            float(np.nextafter(np.nextafter(cf, np.inf), np.inf)))


@pytest.mark.parametrize("name", ["tgamma", "lgamma"])
@pytest.mark.parametrize("kind", ["rel1e-9", "4ulps"])
def test_float64_branch_extrema_are_enclosed_and_tight(name, kind):
    """lo = RD(min f), hi = RU(max f) over the box: the tightest float64 enclosure."""
    _check_float64(name, kind, SOME_BRANCHES)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tgamma", "lgamma"])
@pytest.mark.parametrize("kind", ["rel1e-9", "4ulps"])
def test_float64_every_branch_extremum_is_enclosed_and_tight(name, kind):
    _check_float64(name, kind, ALL_BRANCHES)


def _check_float64(name, kind, branches):
    ctx = scalars.get("interval:float64")
    ks, a, b = [], [], []
    for k in branches:
        c, g, _ = extremum(k)
        if name == "tgamma" and _round(g[1], gmpy2.RoundUp) == 0.0:
            continue        # Gamma(c_k) below the smallest subnormal: no branch to test
        lo, hi = _float64_box(c, kind)
        assert -k < lo < hi < -k + 1
        ks.append(k); a.append(lo); b.append(hi)
    assert len(ks) >= len(branches) - 3
    r = getattr(ctx, name)(ctx.make(np.array(a), np.array(b)))
    n_odd = 0
    for i, k in enumerate(ks):
        c, g, lg = extremum(k)
        ball = g if name == "tgamma" else lg
        inner_lo, inner_hi = ball
        end_vals = [_mpfr_at(name, a[i], gmpy2.RoundDown), _mpfr_at(name, b[i], gmpy2.RoundDown)]
        end_up = [_mpfr_at(name, a[i], gmpy2.RoundUp), _mpfr_at(name, b[i], gmpy2.RoundUp)]
        if name == "tgamma" and k % 2:            # maximum inside, minimum at an end
            n_odd += 1
            assert Fraction(r.hi[i]) >= inner_hi, (k, r.hi[i])
            want_hi = _round(inner_hi, gmpy2.RoundUp)
            assert want_hi == _round(inner_lo, gmpy2.RoundUp)      # the ball decides it
            assert r.hi[i] == want_hi, (k, r.hi[i], want_hi)
            assert r.lo[i] == min(end_vals), k
        else:                                      # minimum inside, maximum at an end
            assert Fraction(r.lo[i]) <= inner_lo, (k, r.lo[i])
            want_lo = _round(inner_lo, gmpy2.RoundDown)
            assert want_lo == _round(inner_hi, gmpy2.RoundDown)
            assert r.lo[i] == want_lo, (k, r.lo[i], want_lo)
            assert r.hi[i] == max(end_up), k
    if name == "tgamma":
        assert n_odd >= len(ks) // 2 - 1


def test_issue_reproducer():
    ctx = scalars.get("interval:float64")
    r = ctx.tgamma(ctx.make([-2.6107208710548657], [-2.6107208658334238]))
    _, g, _ = extremum(3)
    assert Fraction(r.hi[0]) >= g[1]
    assert r.hi[0] == -0.8881363584012418


def _mpf_fraction(v) -> Fraction:
    sign, man, exp, _ = v._mpf_
    q = Fraction(int(man) * 2 ** int(exp)) if exp >= 0 else Fraction(int(man), 2 ** -int(exp))
    return -q if sign else q


@pytest.mark.parametrize("name", ["tgamma", "lgamma"])
@pytest.mark.parametrize("rel", [-30, -190])
@pytest.mark.parametrize("ks", [[1, 2, 3, 4, 5, 10, 17, 24, 29, 30],
                                pytest.param(list(range(1, 31)), marks=pytest.mark.slow)],
                         ids=["some", "all"])
def test_mpmath200_branch_extrema_are_enclosed(name, rel, ks):
    """interval:mpmath:200, branches 1..30, boxes c_k (1 -+ 2^rel): the interior
    extremum lies inside and the box is tight to 2^-195 relative at that end."""
    m = scalars.get("interval:mpmath:200")
    a, b = [], []
    with mpmath.workprec(200):
        for k in ks:
            c = +extremum(k)[0]
            a.append(c * (1 + mpmath.mpf(2) ** rel))
            b.append(c * (1 - mpmath.mpf(2) ** rel))
    r = getattr(m, name)(m.make(a, b))
    for i, k in enumerate(ks):
        _, g, lg = extremum(k)
        ball = g if name == "tgamma" else lg
        inner_lo, inner_hi = ball
        lo, hi = _mpf_fraction(r.lo[i]), _mpf_fraction(r.hi[i])
        assert lo <= inner_lo and inner_hi <= hi, (name, k)
        tol = abs(inner_hi) * Fraction(1, 2 ** 195)
        if name == "tgamma" and k % 2:
            assert hi - inner_hi <= tol, (k, float(hi - inner_hi))
        else:
            assert inner_lo - lo <= tol, (k, float(inner_lo - lo))
