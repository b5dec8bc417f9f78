"""``mpmath:PREC`` contexts: precision, correct rounding of basic ops, independence of
mpmath's global state.  Oracles: mpmath at much higher precision, exact Fractions, MPFR."""
from fractions import Fraction

import gmpy2
import mpmath
import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.scalars.exact import mpf_parts
from scalarlab.scalars import ContextError

M200 = scalars.get("mpmath:200")
M53 = scalars.get("mpmath:53")


def q_of(t):
    man, exp = mpf_parts(t)
    return Fraction(man) * Fraction(2) ** exp


def mpfr_round(q, prec):
    """The exact rational q rounded once to nearest at ``prec`` bits (MPFR oracle)."""
    with gmpy2.context(precision=prec, emin=-(1 << 30) + 1, emax=(1 << 30) - 1):
        return Fraction(gmpy2.mpq(gmpy2.mpfr(gmpy2.mpq(q.numerator, q.denominator))))


def test_registered_names_and_family():
    assert {"mpmath:200", "mpmath:53"} <= set(scalars.names())
    assert scalars.get("mpmath:300").prec == 300
    assert scalars.get("mpmath:300") is scalars.get("mpmath:300")
    with pytest.raises(ContextError, match="precision"):
        scalars.get("mpmath:1")


def test_exp1_at_200_bits_is_e_to_200_bits_and_differs_at_53():
    e200 = M200.exp(M200.convert(1))[()]
    e53 = M53.exp(M53.convert(1))[()]
    with mpmath.workprec(400):
        e_ref = +mpmath.e
        err200 = abs(mpmath.mpf(e200) - e_ref) / e_ref
        err53 = abs(mpmath.mpf(e53) - e_ref) / e_ref
    assert err200 <= mpmath.mpf(2) ** -199 and err53 <= mpmath.mpf(2) ** -52
    assert err53 > mpmath.mpf(2) ** -120  # 53 bits really is 53 bits
    assert e200.context.prec == 200 and q_of(e200) != q_of(e53)
    with mpmath.workprec(200):
        assert mpmath.mpf(e200) == +mpmath.e  # mpmath's own 200-bit e
    assert float(M53.to_float64(M53.exp(M53.convert(1)))) == float(np.exp(1.0))


def test_global_mpmath_state_untouched():
    before = mpmath.mp.prec
    M200.tanh(M200.convert([0.5]))
    M200.sigmoid(M200.convert([0.5]))
    assert mpmath.mp.prec == before


@pytest.mark.parametrize("prec", [24, 53, 200])
def test_basic_ops_correctly_rounded(prec):
    ctx = scalars.get(f"mpmath:{prec}")
    rng = np.random.default_rng(prec)
    a = [Fraction(int(n), int(d)) for n, d in zip(rng.integers(-10**9, 10**9, 200),
                                                  rng.integers(1, 10**9, 200))]
    b = [Fraction(int(n), int(d)) for n, d in zip(rng.integers(1, 10**9, 200),
                                                  rng.integers(1, 10**9, 200))]
    A, B = ctx.convert(np.array(a, dtype=object)), ctx.convert(np.array(b, dtype=object))
    qa, qb = [q_of(t) for t in A], [q_of(t) for t in B]
    assert qa == [mpfr_round(x, prec) for x in a]  # convert: one rounding
    for op, f in [("add", lambda x, y: x + y), ("sub", lambda x, y: x - y),
                  ("mul", lambda x, y: x * y), ("div", lambda x, y: x / y)]:
        got = [q_of(t) for t in getattr(ctx, op)(A, B)]
        assert got == [mpfr_round(f(x, y), prec) for x, y in zip(qa, qb)], op
    got = [q_of(t) for t in ctx.fma(A, B, A)]
    assert got == [mpfr_round(x * y + x, prec) for x, y in zip(qa, qb)]
    with gmpy2.context(precision=prec):
        want = [Fraction(gmpy2.mpq(gmpy2.sqrt(gmpy2.mpfr(gmpy2.mpq(y.numerator, y.denominator)))))
                for y in qb]
    assert [q_of(t) for t in ctx.sqrt(B)] == want


@pytest.mark.parametrize("op", ["exp", "log", "tanh", "sin", "cos", "erf", "sigmoid", "softplus"])
def test_functions_within_an_ulp(op):
    x = [-30.5, -1.25, -1e-9, 0.5, 3.0, 40.0] if op != "log" else [1e-30, 0.5, 2.0, 1e30]
    got = getattr(M200, op)(M200.convert(np.array(x)))
    with mpmath.workprec(400):
        ref = {"exp": mpmath.exp, "log": mpmath.log, "tanh": mpmath.tanh, "sin": mpmath.sin,
               "cos": mpmath.cos, "erf": mpmath.erf,
               "sigmoid": lambda t: 1 / (1 + mpmath.exp(-t)),
               "softplus": lambda t: mpmath.log(1 + mpmath.exp(t))}[op]
        for g, t in zip(got, x):
            r = ref(mpmath.mpf(t))
            assert abs(mpmath.mpf(g) - r) <= abs(r) * mpmath.mpf(2) ** -199, (op, t)


def test_softplus_sigmoid_tails_keep_relative_accuracy():
    x = M200.convert([-1000.0, 1000.0])
    sp = M200.softplus(x)
    sg = M200.sigmoid(x)
    with mpmath.workprec(400):
        tail = mpmath.exp(-1000)
        assert abs(mpmath.mpf(sp[0]) / tail - 1) < mpmath.mpf(2) ** -190
        assert abs(mpmath.mpf(sg[0]) / tail - 1) < mpmath.mpf(2) ** -190
        assert mpmath.mpf(sp[1]) == 1000  # 1000 + e^-1000 rounds to 1000 at 200 bits


def test_sequential_sum_and_matmul():
    t = Fraction(1, 2**53)
    v = M53.convert([1, t, t])  # each 1 + 2^-53 is a tie -> 1
    assert q_of(M53.sum(v)[()]) == 1
    assert q_of(M53.sum(M53.convert([t, t, 1]))[()]) == 1 + 2 * t
    m = M53.matmul(M53.convert([[1, 1, 1]]), M53.convert([[1], [t], [t]]))
    assert q_of(m[0, 0]) == 1
    assert M200.sum(M200.zeros((2, 0)), axis=1).shape == (2,)


def test_errors_name_op_and_values():
    with pytest.raises(ContextError, match=r"mpmath:200: log\(-1\.0\) at index \[0\]"):
        M200.log(M200.convert([-1.0]))
    with pytest.raises(ContextError, match=r"sqrt\(-4\.0\).*negative"):
        M200.sqrt(M200.convert([-4.0]))
    with pytest.raises(ContextError, match=r"div\(1\.0, 0\.0\)"):
        M200.div(M200.convert([1.0]), M200.convert([0.0]))
    with pytest.raises(ContextError, match=r"mpmath:200: add: got an object ndarray of mpf "
                                           r"\(a mpmath:53 value\)"):
        M200.add(M200.convert([1]), M53.convert([1]))
    with pytest.raises(ContextError, match="float64/binary-format value"):
        M200.mul(M200.convert([1]), np.ones(1))
    with pytest.raises(ContextError, match="NaN|nan"):
        M200.convert(np.array([np.nan]))
    with pytest.raises(ContextError, match="broadcast"):
        M200.add(M200.zeros(2), M200.zeros(3))


def test_format_to_float64_and_infinities():
    v = M200.convert(["0.1", "-2.5", "1e-70"])
    assert M200.format(v, 4) == "[0.1000, -2.5000, 0.0000]"
    np.testing.assert_array_equal(M200.to_float64(v), [0.1, -2.5, 1e-70])
    inf = M200.convert(np.array([np.inf, -np.inf]))  # whole-line interval endpoints
    assert list(M200.to_float64(inf)) == [np.inf, -np.inf]
    huge = M200.exp(M200.convert([1e10, -1e10]))
    assert list(M200.to_float64(huge)) == [np.inf, 0.0]
    assert "e+4342944819" in M200.format(huge, 3)


def test_results_beyond_the_exponent_range_are_refused_not_aborted():
    """pow(0.5, exp(1.26e13)) would ask GMP for an integer of ~2^45 bits (the process
    aborts): the context refuses it by name, as it does exp of |x| >= 2^62; results
    that fit (pow(0.5, 1e10) = 2^-1e10) are still computed."""
    import numpy as np
    import pytest
    from scalarlab import scalars
    from scalarlab.scalars.errors import ContextError

    c = scalars.get("mpmath:100")
    big = c.exp(c.convert(np.array([1.26e13])))
    with pytest.raises(ContextError, match="pow.*beyond 2\\^62"):
        c.pow(c.convert(np.array([0.5])), big)
    with pytest.raises(ContextError, match="exp.*2\\^62"):
        c.exp(c.convert(np.array([2.0 ** 70])))
    with pytest.raises(ContextError, match="cosh"):
        c.cosh(c.convert(np.array([-2.0 ** 63])))
    v = c.pow(c.convert(np.array([0.5, 1.0, -1.0])), c.convert(np.array([1e10, 1e300, 2e300])))
    import mpmath
    assert v[0] == mpmath.ldexp(1, -10 ** 10) and v[1] == 1 and v[2] == 1


def test_exp_of_a_huge_negative_argument_is_a_tiny_value():
    """exp(-3.4e38) (softmax over GPT-2's additive attention mask) is computed: a positive
    value 2^-4.9e38 that sums, products and divisions handle by exponent; its exact
    rational is refused by name (not a process abort); exp of a huge positive argument
    stays refused."""
    import mpmath
    import numpy as np
    import pytest
    from scalarlab import scalars
    from scalarlab.scalars.errors import ContextError

    c = scalars.get("mpmath:200")
    x = c.convert(np.array([-3.4e38, -2.0 ** 70, 0.5]))
    mp = mpmath.MPContext()
    mp.prec = 200
    for name in ("exp", "exp2", "expm1"):
        got = getattr(c, name)(x)
        f = (lambda t: mp.power(2, t)) if name == "exp2" else getattr(mp, name)
        want = [f(mp.mpf(t)) for t in (-3.4e38, -2.0 ** 70, 0.5)]
        assert [g._mpf_ for g in got] == [w._mpf_ for w in want], name
    e = c.exp(x)
    assert 0 < e[0] < e[1] < 1e-300
    s = c.div(e, c.sum(e, axis=0))
    assert list(c.to_float64(s)) == [0.0, 0.0, 1.0]
    with pytest.raises(ContextError, match="beyond 2\\^62"):
        c._to_mpq(e[0])
    with pytest.raises(ContextError, match="exp.*2\\^62"):
        c.exp(c.convert(np.array([2.0 ** 70])))
