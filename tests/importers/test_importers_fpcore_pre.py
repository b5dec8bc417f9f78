"""FPCore preconditions compiled to IR graphs: sampling boxes from conjuncts (fabs, fmin,
fmax, chains, closed constants) and residual conditions decided by the fold in the
rational context or in interval contexts -- checked against exact rationals and mpmath."""
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from scalarlab.experiments import sampling as S
from scalarlab.graph.importers.fpcore import FPCoreError, parse_sexprs, read_fpcore
from scalarlab.graph.importers.fpcore_pre import constant_enclosure


def _one(src):
    p, = read_fpcore(src)
    return p


def _q(v) -> Fraction:
    sign, man, exp, _ = v._mpf_
    q = Fraction(int(man)) * Fraction(2) ** int(exp)
    return -q if sign else q


def _sample(p, n=200, sampling="box", seed=0):
    b, r = p.boxes()
    regions = S.regions_from_bounds(b, p.arguments)
    return S.sample(regions, p.arguments, r, "binary64", n, np.random.default_rng(seed),
                    sampling)


def test_unary_product_in_a_precondition_is_the_factor():
    p = _one("(FPCore (x) :pre (and (<= -1 x 1) (< 0 (* x))) x)")
    b, r = p.boxes()
    assert b["x"].lo == 0 and b["x"].lo_strict and b["x"].hi == 1 and r == []
    smp = _sample(p, 300, "bitpattern")
    assert len(smp.x) == 300 and np.all(smp.x > 0) and np.all(smp.x <= 1)


def test_every_factor_of_a_variadic_product_counts():
    # (* 2 x 0) is exactly 0 for every x: every draw is accepted (the old evaluator
    # multiplied two factors and rejected the nonzero x); (* 2 x 3) != 0 unless x = 0
    p = _one("(FPCore (x) :pre (and (<= -1 x 1) (== (* 2 x 0) 0)) x)")
    smp = _sample(p, 86)
    assert smp.drawn == 86 and smp.rejected == 0 and len(smp.x) == 86
    q = _one("(FPCore (x) :pre (and (<= -1 x 1) (< 0 (* 2 x 3))) x)")
    _, r = q.boxes()
    assert [c.text for c in r] == ["(< 0 (* 2 x 3))"] and r[0].rational
    smp = _sample(q, 100, seed=3)
    assert len(smp.x) == 100 and np.all(smp.x > 0)
    assert smp.rejected == smp.drawn - 100 > 0 and smp.undecided == 0


def test_bounds_through_fabs_fmin_fmax_chains_and_constants():
    p = _one("""(FPCore (x y z w) :pre (and (<= (fabs x) 1) (> 2 (fabs w))
                  (>= (fmin y z) (- (PI))) (<= (fmax y z) 1e-3) (<= -4 z y 7/2)) x)""")
    b, r = p.boxes()
    assert (b["x"].lo, b["x"].hi, b["x"].lo_strict) == (-1, 1, False)
    assert (b["w"].lo, b["w"].hi, b["w"].lo_strict, b["w"].hi_strict) == (-2, 2, True, True)
    mp = mpmath.MPContext()
    mp.prec = 600
    # -pi (irrational): the inward end of the enclosure, within 2^-250 of it
    assert _q(-mp.pi) < b["y"].lo < _q(-mp.pi) + Fraction(1, 2 ** 250)
    assert b["z"].lo == b["y"].lo and b["z"].hi == b["y"].hi == Fraction(1, 1000)
    assert [c.text for c in r] == ["(<= z y)"]
    smp = _sample(p, 200, seed=1)
    x, y, z, w = smp.x.T
    assert len(smp.x) == 200 and np.all(np.abs(x) <= 1) and np.all(np.abs(w) < 2)
    assert np.all(z <= y) and np.all(y <= 1e-3) and np.all(z >= -np.pi)
    assert np.all([Fraction(v) > _q(-mp.pi) for v in y])


def test_a_fabs_bound_samples_the_whole_box_not_one_value():
    # qlog's precondition: 256 samples spread over [-1, 1], none rejected
    p = _one("(FPCore (x) :pre (<= (fabs x) 1) (/ (log (- 1 x)) (log (+ 1 x))))")
    smp = _sample(p, 256, "bitpattern")
    assert len(smp.x) == 256 and smp.rejected == 0 and len(np.unique(smp.x)) > 250
    assert np.all(np.abs(smp.x) <= 1) and np.any(smp.x < 0) and np.any(smp.x > 0)


def test_fabs_lower_bounds_and_fmin_upper_bounds_stay_conditions():
    p = _one("(FPCore (x y) :pre (and (<= -4 x 4) (<= -4 y 4) (>= (fabs x) 1) "
             "(<= (fmin x y) 0)) x)")
    b, r = p.boxes()
    assert (b["x"].lo, b["x"].hi) == (-4, 4)
    assert [c.text for c in r] == ["(>= (fabs x) 1)", "(<= (fmin x y) 0)"]
    smp = _sample(p, 150, seed=2)
    x, y = smp.x.T
    assert np.all(np.abs(x) >= 1) and np.all(np.minimum(x, y) <= 0)


def test_irrational_conditions_are_decided_by_intervals_like_mpmath():
    p = _one("(FPCore (x) :pre (and (<= 0 x 3) (< (sin (* x x)) (/ E 3))) x)")
    _, (cond,) = p.boxes()
    assert not cond.rational
    xs = np.linspace(0, 3, 97)
    d = cond.decide(xs[:, None])
    mp = mpmath.MPContext()
    mp.prec = 300
    want = [mp.sin(mp.mpf(float(v)) ** 2) < mp.e / 3 for v in xs]
    assert list(d.true) == want and not d.undecided.any() and not d.failed.any()


def test_undecidable_and_undefined_samples_are_rejected_and_counted():
    # sqrt(x)^2 == x is true for x = 4 exactly (rational ops would decide it) but the
    # interval contexts never decide an equality of irrational values: x = 2 is
    # undecided at every precision; sqrt of a negative is undefined: rejected
    p = _one("(FPCore (x) :pre (== (* (sqrt x) (sqrt x)) x) x)")
    _, (cond,) = p.boxes()
    d = cond.decide(np.array([[2.0], [-1.0], [0.5]]), precisions=(64, 128))
    assert list(d.undecided) == [True, False, True] and list(d.failed) == [False, True, False]
    assert not d.true.any()
    q = _one("(FPCore (x) :pre (< (sqrt x) 2) x)")
    _, (c2,) = q.boxes()
    d = c2.decide(np.array([[-3.0], [1.0], [4.0], [3.999]]))
    assert list(d.true) == [False, True, False, True] and list(d.failed) == [True] + [False] * 3


def test_rational_conditions_are_exact_at_the_boundary():
    # x*x < 2 at the binary64 values next to sqrt(2): decided exactly
    p = _one("(FPCore (x) :pre (< (* x x) 2) x)")
    _, (cond,) = p.boxes()
    assert cond.rational
    s = np.sqrt(2.0)
    xs = np.array([np.nextafter(s, 0), s, np.nextafter(s, 3)])
    d = cond.decide(xs[:, None])
    assert list(d.true) == [Fraction(float(v)) ** 2 < 2 for v in xs] == [True, False, False]


def test_named_fpcores_and_lets_in_preconditions():
    p, q = read_fpcore("""(FPCore sq (t) (* t t))
        (FPCore (x) :pre (and (<= -2 x 2) (let ([s (sq x)]) (> s 1/4))) x)""")
    _, (cond,) = q.boxes()
    assert cond.rational
    xs = np.array([[-1.0], [0.25], [0.5], [0.75]])
    assert list(cond.decide(xs).true) == [True, False, False, True]


def test_constant_enclosures():
    e, = parse_sexprs("(- (PI))")
    lo, hi = constant_enclosure(e)
    mp = mpmath.MPContext()
    mp.prec = 600
    assert lo < _q(-mp.pi) < hi and hi - lo < Fraction(1, 2 ** 250)
    e, = parse_sexprs("(+ 1/3 (* 2 0.25) 1)")
    assert constant_enclosure(e) == (Fraction(11, 6), Fraction(11, 6))
    for text, want in (("INFINITY", "inf"), ("(- INFINITY)", "-inf"), ("(sqrt -1)", None),
                       ("(+ x 1)", None), ("(< 1 2)", None)):
        e, = parse_sexprs(text)
        assert constant_enclosure(e) == want, text


def test_untranslatable_precondition_is_a_clear_error():
    p = _one("(FPCore (x) :pre (frob x) x)")
    with pytest.raises(FPCoreError, match=r"precondition \(frob x\): op frob not supported"):
        p.boxes()
    with pytest.raises(S.ExperimentError, match="op frob"):
        S.eval_condition(parse_sexprs("(frob x)")[0], {"x": Fraction(1)})


def test_a_chain_bounds_the_terms_between_its_constants():
    p = _one("(FPCore (x y w) :pre (and (<= -2 x y 2) (< w (fabs x) 1/2)) x)")
    b, r = p.boxes()
    assert (b["x"].lo, b["x"].hi) == (Fraction(-1, 2), Fraction(1, 2))   # fabs x < 1/2
    assert b["x"].hi_strict and b["x"].lo_strict
    assert (b["y"].lo, b["y"].hi) == (-2, 2)
    assert b["w"].lo is None and b["w"].hi == Fraction(1, 2) and b["w"].hi_strict
    assert [c.text for c in r] == ["(<= x y)", "(< w (fabs x))"]
    smp = _sample(p, 300, "bitpattern", seed=4)
    x, y, w = smp.x.T
    assert np.all((-2 <= x) & (x <= y) & (y <= 2)) and np.all((w < np.abs(x)) & (np.abs(x) < 0.5))
    # the box holds every satisfying point: the accepted set is the precondition's
    assert smp.rejected < smp.drawn


def test_precondition_annotations_follow_the_program_precision():
    p = _one("""(FPCore (x) :precision binary32
                 :pre (and (<= 0 x 2) (< (! :precision binary32 (* x x)) 2)) x)""")
    _, (cond,) = p.boxes()
    assert cond.rational and list(cond.decide(np.array([[1.0], [1.5]])).true) == [True, False]
