"""FPCore 2.0 dialect: named FPCore calls, variadic arithmetic, chained comparisons,
annotations, cast, digits, every constant and every operation the lab has -- checked
against exact rationals, gmpy2 (MPFR) in matching formats and mpmath."""
from fractions import Fraction

import gmpy2
import mpmath
import numpy as np
import pytest

from scalarlab import graph
from scalarlab.graph.importers.fpcore import CONSTANTS, read_fpcore
from scalarlab.graph.importers.fpcore_build import OP_NAMES
from scalarlab.scalars import formats


def _q(v) -> Fraction:
    v = np.asarray(v, dtype=object).reshape(-1)[0]
    if hasattr(v, "_mpf_"):
        sign, man, exp, _ = v._mpf_
        q = Fraction(int(man)) * Fraction(2) ** int(exp)
        return -q if sign else q
    return Fraction(int(v.numerator), int(v.denominator))


def _ops(p):
    return [n.op for n in p.graph.nodes]


def test_calls_of_named_fpcores_are_inlined():
    progs = read_fpcore("""
        (FPCore (a b) :name "user" (- (sq (+ a b)) (twice a)))
        (FPCore sq (t) (* t t))
        (FPCore twice (t) :precision binary64 (+ t t))
        (FPCore (x) :name "arity" (sq x x))
        (FPCore loop1 (x) (loop2 x))
        (FPCore loop2 (x) (+ 1 (loop1 x)))
        (FPCore self (x) (self x))
        (FPCore (x) :name "unknown" (nosuch x))
        (FPCore (x) :precision binary32 :name "mixed" (wide x))
        (FPCore wide (x) :precision binary64 (* x 2))""")
    user = progs[0]
    assert user.skip is None and _ops(user) == ["input", "input", "add", "mul", "add", "sub"]
    x = {0: np.array(["1/3"], dtype=object), 1: np.array(["1/2"], dtype=object)}
    s = Fraction(5, 6)
    assert _q(graph.denote(user.graph, user.payload, x, "rational")) == s * s - Fraction(2, 3)
    by = {p.name: p for p in progs}
    assert by["arity"].skip == "sq takes 1 argument, (sq x x) gives 2"
    assert by["loop1"].skip.startswith("recursive call loop1 -> loop2 -> loop1")
    assert by["self"].skip.startswith("recursive call self -> self")
    assert "op nosuch not supported" in by["unknown"].skip
    assert "mixed precision" in by["mixed"].skip


def test_variadic_arithmetic_folds_left_to_right():
    p, = read_fpcore("(FPCore (x y z w) (+ (- x y z) (* x y z w) (+ x y z)))")
    assert _ops(p).count("sub") == 2 and _ops(p).count("mul") == 3 and \
        _ops(p).count("add") == 4
    # in binary32 the order shows: (((x - y) - z) + ...) rounded at each step
    rng = np.random.default_rng(5)
    X = [formats.round_to_format(rng.standard_normal(64) * 10.0 ** rng.integers(-8, 8, 64),
                                 "binary32", "nearest_even") for _ in range(4)]
    got = np.asarray(graph.denote(p.graph, p.payload, X, "binary32"), dtype=np.float64)
    with formats.gmpy2_context(formats.get("binary32")):
        for k in range(64):
            x, y, z, w = (gmpy2.mpfr(float(c[k])) for c in X)
            want = ((x - y) - z) + (((x * y) * z) * w)
            want = want + ((x + y) + z)
            assert got[k] == float(want)
    one, = read_fpcore("(FPCore (x) (+ (* x) (+ x) (- x)))")
    assert _ops(one) == ["input", "neg", "add", "add"]
    div, = read_fpcore("(FPCore (x y z) (/ x y z))")
    assert _ops(div) == ["input"] * 3 + ["div", "div"]
    assert [list(div.graph.nodes[i].parents) for i in (3, 4)] == [[0, 1], [3, 2]]
    bad, = read_fpcore("(FPCore (x) (/ x))")
    assert bad.skip == "/ takes 2 or more arguments: (/ x)"


def test_chained_and_pairwise_comparisons():
    p, = read_fpcore("(FPCore (a b c) (if (and (< a b c) (!= a b c) (>= c b)) 1 0))")
    cases = [(1, 2, 3), (1, 3, 2), (2, 2, 3), (0, 1, 1)]
    X = [np.array([float(t[j]) for t in cases]) for j in range(3)]
    got = list(np.asarray(graph.denote(p.graph, p.payload, X, "float64")))
    assert got == [1.0 if (a < b < c and len({a, b, c}) == 3 and c >= b) else 0.0
                   for a, b, c in cases] == [1.0, 0.0, 0.0, 0.0]


def test_let_if_cast_and_boolean_branches():
    p, = read_fpcore("""(FPCore (x) (let* ([y (* x x)] [c (if (< x 0) (< y 4) (> y 9))])
                              (cast (if c (- y) (let ([y 1] [z y]) (+ y z))))))""")
    X = np.array([-1.0, -3.0, 4.0, 2.0])

    def want(x):
        y = x * x
        c = y < 4 if x < 0 else y > 9
        return -y if c else 1 + y
    assert list(np.asarray(graph.denote(p.graph, p.payload, X, "float64"))) == \
        [want(v) for v in X]


def test_annotations_are_recorded_and_literals_rounded():
    p, = read_fpcore("""(FPCore (x) :precision binary64
        (+ (! :precision binary64 :description "same" (* x 2)) (! :precision binary32 0.1)))""")
    assert p.skip is None
    assert [a[1] for a in p.annotations] == [{"precision": "binary64", "description": "same"},
                                            {"precision": "binary32"}]
    c = [n.id for n in p.graph.nodes if n.op == "const"]
    vals = {_q(graph.denote(p.graph, p.payload, np.array("0", dtype=object), "rational", i))
            for i in c}
    assert vals == {Fraction(2), Fraction(float(np.float32(0.1)))}
    rnd, = read_fpcore("(FPCore (x) (! :round toZero (+ x 1)))")
    assert "rounding mode" in rnd.skip
    integer, = read_fpcore("(FPCore (x) (! :precision integer (+ x 1)))")
    assert "mixed precision" in integer.skip


def test_loops_and_tensors_have_clear_skip_reasons():
    for form in ("(while (< i 3) ([i 0 (+ i 1)]) i)", "(while* (< i 3) ([i 0 (+ i 1)]) i)",
                 "(for ([i 3]) ([s 0 (+ s i)]) s)", "(for* ([i 3]) ([s 0 (+ s i)]) s)"):
        p, = read_fpcore(f"(FPCore (x) {form})")
        assert p.graph is None and p.skip == (
            f"{form[1:form.index(' ')]}: loops are not supported (the IR has no loop node, "
            f"and unrolling a data-dependent trip count is not the same program)")
    t, = read_fpcore("(FPCore (x) (tensor ([i 3]) x))")
    assert t.skip.startswith("tensor: tensors are not supported")
    a, = read_fpcore("(FPCore ((v 3)) (ref v 0))")
    assert a.skip.startswith("tensor argument (v 3): tensors are not supported")


def test_literals_hex_rational_digits():
    p, = read_fpcore("(FPCore () (+ 0x1.8p-3 -7/4 (digits -5 -2 10) (digits 3 4 2) 0x.8 1.))")
    y = _q(graph.denote(p.graph, p.payload, None, "rational"))
    assert y == Fraction(3, 16) - Fraction(7, 4) - Fraction(5, 100) + 48 + Fraction(1, 2) + 1


def test_every_constant_translates_and_encloses_the_real_constant():
    mp = mpmath.MPContext()
    mp.prec = 600
    real = {"E": mp.e, "LOG2E": 1 / mp.log(2), "LOG10E": 1 / mp.log(10), "LN2": mp.log(2),
            "LN10": mp.log(10), "PI": mp.pi, "PI_2": mp.pi / 2, "PI_4": mp.pi / 4,
            "M_1_PI": 1 / mp.pi, "M_2_PI": 2 / mp.pi, "M_2_SQRTPI": 2 / mp.sqrt(mp.pi),
            "SQRT2": mp.sqrt(2), "SQRT1_2": 1 / mp.sqrt(2)}
    from scalarlab.graph.importers.fpcore_pre import constant_enclosure
    from scalarlab.graph.importers.fpcore import Sym
    for name in CONSTANTS:
        p, = read_fpcore(f"(FPCore () (if (< 0 1) {name} ({name})))" if name not in
                         ("TRUE", "FALSE") else f"(FPCore () (if {name} 1 0))")
        assert p.skip is None, name
        v = np.asarray(graph.denote(p.graph, p.payload, None, "float64")).item()
        if name in real:
            assert v == float(mp.mpf(real[name])), name        # one correct rounding
            lo, hi = constant_enclosure(Sym(name))              # the exact-constant graph
            assert lo < _q(real[name]) < hi and hi - lo < Fraction(1, 2 ** 240), name
        elif name == "INFINITY":
            assert v == np.inf
        elif name == "NAN":
            assert np.isnan(v)
        else:
            assert v == (1.0 if name == "TRUE" else 0.0)


_UNARY_MP = {"fabs": "fabs", "exp": "exp", "exp2": lambda mp, x: mp.mpf(2) ** x,
             "expm1": "expm1", "log": "log", "log10": "log10",
             "log2": lambda mp, x: mp.log(x, 2), "log1p": "log1p", "sqrt": "sqrt",
             "cbrt": "cbrt", "sin": "sin", "cos": "cos", "tan": "tan", "asin": "asin",
             "acos": "acos", "atan": "atan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh",
             "asinh": "asinh", "acosh": None, "atanh": "atanh", "erf": "erf",
             "erfc": "erfc", "tgamma": "gamma", "lgamma": "loggamma", "ceil": "ceil",
             "floor": "floor", "trunc": lambda mp, x: mp.floor(x) if x >= 0 else mp.ceil(x),
             "round": lambda mp, x: mp.floor(x + mp.mpf(1) / 2),
             "nearbyint": "nint"}
_BINARY_MP = {"pow": "power", "hypot": "hypot", "atan2": "atan2",
              "fmax": lambda mp, a, b: max(a, b), "fmin": lambda mp, a, b: min(a, b),
              "fdim": lambda mp, a, b: max(a - b, 0),
              "copysign": lambda mp, a, b: abs(a) if b >= 0 else -abs(a),
              "fmod": "fmod", "remainder": lambda mp, a, b: a - b * mp.nint(a / b)}


@pytest.mark.parametrize("op", sorted(_UNARY_MP) + sorted(_BINARY_MP) + ["fma"])
def test_every_operation_translates_and_agrees_with_mpmath(op):
    """Each FPCore operation of the lab becomes its op and evaluates, in binary64, to
    mpmath's value rounded once (atan2/pow/... at points where float64 is exact enough)."""
    n = 3 if op == "fma" else 2 if op in _BINARY_MP else 1
    args = " ".join("xyz"[:n])
    p, = read_fpcore(f"(FPCore ({args}) ({op} {args}))")
    assert p.skip is None and _ops(p)[-1] == OP_NAMES.get(op, op)
    point = {"acosh": (1.75,), "atan2": (0.625, -1.5), "pow": (1.5, 2.25),
             "fmod": (5.5, 1.25), "remainder": (5.5, 1.25), "fma": (1.5, 2.25, -0.5)}
    xs = point.get(op, (0.375, 1.625)[:n])
    got = float(np.asarray(graph.denote(p.graph, p.payload, [np.array([v]) for v in xs],
                                        "binary64")).item())
    mp = mpmath.MPContext()
    mp.prec = 300
    if op == "fma":
        want = mp.mpf(xs[0]) * xs[1] + xs[2]
    else:
        f = (_UNARY_MP if n == 1 else _BINARY_MP)[op] or "acosh"
        fn = getattr(mp, f) if isinstance(f, str) else (lambda *a: f(mp, *a))
        want = fn(*[mp.mpf(v) for v in xs])
    q = _q(want)
    with gmpy2.context(precision=53):
        assert got == float(gmpy2.mpfr(gmpy2.mpq(q.numerator, q.denominator))), op


def test_a_repeated_name_keeps_the_first_definition_and_builtins_win():
    progs = read_fpcore("""(FPCore f (x) (+ x 1))
        (FPCore f (x) (+ x 2))
        (FPCore exp (x) (* x 0))
        (FPCore (y) :name "user" (+ (f y) (exp 0)))""")
    assert progs[1].graph is not None and "already defined by FPCore #1" in progs[1].notes[0]
    y = graph.denote(progs[3].graph, progs[3].payload, np.array(["5"], dtype=object),
                     "rational")
    assert _q(y) == 7                                 # (5 + 1) + exp(0)
