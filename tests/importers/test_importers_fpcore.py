"""The FPCore reader: every FPBench benchmark, numbers, constants, binding forms,
preconditions, refusals -- checked against exact rationals, gmpy2 and mpmath."""
from fractions import Fraction
from pathlib import Path

import gmpy2
import mpmath
import numpy as np
import pytest

from scalarlab import graph
from scalarlab.graph import examples
from scalarlab.graph.importers.fpcore import (CONSTANTS, FPCoreError, const_value,
                                              precondition_boxes, read_fpcore)
from scalarlab.graph.optable import OPS
from scalarlab.scalars import formats

DATA = Path(__file__).resolve().parents[1] / "data" / "fpbench"
FILES = sorted(DATA.glob("*.fpcore"))


def _exact(payload, i):
    v = payload.get(i)["value"]
    v = v.item() if isinstance(v, np.ndarray) else v
    return Fraction(str(v)) if isinstance(v, str) else Fraction(v)


def _q(v) -> Fraction:
    """An exact context value (gmpy2 mpq, mpmath mpf) as a Fraction."""
    v = np.asarray(v, dtype=object).reshape(-1)[0]
    if hasattr(v, "_mpf_"):
        sign, man, exp, _ = v._mpf_
        q = Fraction(int(man)) * Fraction(2) ** int(exp)
        return -q if sign else q
    return Fraction(int(v.numerator), int(v.denominator))


def _walk(e):
    yield e
    if isinstance(e, list):
        for t in e:
            yield from _walk(t)


def test_every_fpbench_benchmark_reads_and_translates_or_says_why():
    assert len(FILES) == 12 and (DATA / "LICENSE.txt").exists()
    progs = [p for f in FILES for p in read_fpcore(f)]
    assert len(progs) == 136
    for p in progs:
        heads = {t[0].name for t in _walk(p.body) if isinstance(t, list) and t
                 and hasattr(t[0], "name")}
        if p.graph is None:
            assert p.skip, p.name
            if p.skip.startswith("op "):            # only ops the table lacks
                op = p.skip.split()[1]
                assert op not in OPS, p.skip
            elif heads & {"while", "while*"}:
                assert "loop" in p.skip or "precision" in p.skip, (p.name, p.skip)
            else:
                assert any(w in p.skip for w in ("array", "cast", "precision")), p.skip
        else:
            assert p.skip is None
            graph.check_well_formed(p.graph)
            graph.check_shapes(p.graph)
            # one input node per argument, in argument order, all scalar
            assert [n.id for n in p.graph.nodes if n.op == "input"] == \
                list(range(len(p.arguments)))
            assert all(n.out_shape == () for n in p.graph.nodes)
            assert not heads & {"while", "while*", "array", "cast"}
    by_name = {p.name: p for p in progs}
    assert by_name["Odometry"].skip.startswith("while*")
    assert "array" in by_name[next(n for n in by_name if
                                   by_name[n].source.endswith("apron.fpcore"))].skip \
        or "while" in by_name[next(n for n in by_name if
                                   by_name[n].source.endswith("apron.fpcore"))].skip
    # straight-line benchmarks without missing ops all translate
    assert sum(p.graph is not None for p in progs) >= 100


def test_numbers_are_exact_and_annotated_literals_are_rounded():
    src = """(FPCore (x) :name "nums" :precision binary64
      (+ (+ (+ 0.1 1/3) (+ 0x1.8p-3 -.25)) (+ (digits 5 -1 10) (! :precision binary32 0.1))))"""
    p, = read_fpcore(src)
    consts = {n.id: _exact(p.payload, n.id) for n in p.graph.nodes if n.op == "const"}
    vals = sorted(consts.values())
    f32 = Fraction(float(np.float32(0.1)))
    assert f32 == Fraction(gmpy2.mpq(gmpy2.mpfr("0.1", 24)))
    assert vals == sorted([Fraction(1, 10), Fraction(1, 3), Fraction(3, 16), Fraction(-1, 4),
                           Fraction(1, 2), f32])
    # the rational context evaluates the graph exactly
    y = graph.denote(p.graph, p.payload, {0: np.array("0", dtype=object)}, "rational")
    assert _q(y) == sum(vals, Fraction(0))


@pytest.mark.parametrize("fmt", ["binary16", "binary32", "binary64"])
def test_constants_round_like_the_real_constant(fmt):
    """Each named constant's payload string, rounded once into a format, equals the real
    constant (mpmath at 2000 bits) rounded once by MPFR in that format."""
    f = formats.get(fmt)
    mp = mpmath.MPContext()
    mp.prec = 2000
    real = {"E": mp.e, "LOG2E": 1 / mp.log(2), "LOG10E": 1 / mp.log(10), "LN2": mp.log(2),
            "LN10": mp.log(10), "PI": mp.pi, "PI_2": mp.pi / 2, "PI_4": mp.pi / 4,
            "M_1_PI": 1 / mp.pi, "M_2_PI": 2 / mp.pi, "M_2_SQRTPI": 2 / mp.sqrt(mp.pi),
            "SQRT2": mp.sqrt(2), "SQRT1_2": 1 / mp.sqrt(2)}
    assert set(real) | {"INFINITY", "NAN", "TRUE", "FALSE"} == set(CONSTANTS)
    for name, v in real.items():
        s = const_value(name)
        assert abs(mp.mpf(s) - v) <= abs(v) * mp.mpf(10) ** -118
        sign, man, exp, _ = v._mpf_
        q = Fraction(int(man)) * Fraction(2) ** int(exp)
        with formats.gmpy2_context(f):
            want = gmpy2.mpfr(gmpy2.mpq(q.numerator, q.denominator))
        got = formats.round_fraction(Fraction(s), f, "nearest_even")
        assert got == float(want), name
        # ... and at the 200-bit oracle's precision too
        with gmpy2.context(precision=200):
            assert gmpy2.mpfr(gmpy2.mpq(Fraction(s).numerator, Fraction(s).denominator)) == \
                gmpy2.mpfr(gmpy2.mpq(q.numerator, q.denominator)), name


def test_let_star_if_and_comparisons():
    src = """(FPCore (a b) :name "lets" :pre (and (<= -2 a 2) (< 0 b 3))
      (let* ([s (+ a b)] [t (* s s)]) (let ([s 1] [u s]) (- t u))))"""
    p, = read_fpcore(src)
    ops = [n.op for n in p.graph.nodes]
    assert ops.count("add") == 1 and ops.count("mul") == 1       # bound names are shared
    x = {0: np.array(["1/2"], dtype=object), 1: np.array(["3/4"], dtype=object)}
    s = Fraction(5, 4)
    assert _q(graph.denote(p.graph, p.payload, x, "rational")) == s * s - s
    assert _q(graph.denote(p.graph, p.payload, x, "mpmath:200")) == s * s - s
    cond, = read_fpcore("(FPCore (x) (if (< x 0) (- x) (+ x 1)))")
    if {"lt", "select"} <= set(OPS):
        assert cond.graph is not None
        assert [n.op for n in cond.graph.nodes][-1] == "select"
        out = graph.denote(cond.graph, cond.payload, np.array([-2.0, 3.0]), "float64")
        assert list(np.asarray(out)) == [2.0, 4.0]
    else:
        assert cond.skip == f"op {'lt' if 'lt' not in OPS else 'select'} not supported"


def test_refusals_name_the_form():
    loop, = read_fpcore("(FPCore (x) :name \"L\" (while (< i 3) ([i 0 (+ i 1)]) i))")
    assert loop.graph is None and loop.skip.startswith("while: loops are not supported")
    arr, = read_fpcore("(FPCore (x) (array x x))")
    assert "array" in arr.skip
    mixed, = read_fpcore("(FPCore (x) :precision binary64 (! :precision binary32 (+ x 1)))")
    assert "mixed precision" in mixed.skip
    same, = read_fpcore("(FPCore ((! :precision binary64 x)) (! :precision binary64 (+ x 1)))")
    assert same.skip is None and [n.op for n in same.graph.nodes] == ["input", "const", "add"]
    unknown, = read_fpcore("(FPCore (x) (frobnicate x))")
    assert "frobnicate" in unknown.skip
    with pytest.raises(FPCoreError, match="line 2"):
        read_fpcore("(FPCore (x)\n (+ x 1]")
    with pytest.raises(FPCoreError, match="never closed"):
        read_fpcore("(FPCore (x) (+ x 1)")
    with pytest.raises(FPCoreError, match="no body"):
        read_fpcore("(FPCore (x) :name \"n\")")


def test_precondition_boxes_and_residual():
    p, = read_fpcore("""(FPCore (v w r) :pre (and (<= -4.5 v -0.3) (< 0.4 w (* 2 PI))
                          (>= 7.8 r) (> (+ v w) 0)) (+ v w r))""")
    b, res = precondition_boxes(p.pre, p.arguments)
    assert (b["v"].lo, b["v"].hi) == (Fraction(-9, 2), Fraction(-3, 10))
    assert b["w"].lo == Fraction(2, 5) and b["w"].lo_strict
    # 2 pi is irrational: the bound is the inward (lower) end of a 256-bit enclosure,
    # so strictness is implied and no binary64 value is lost
    mp = mpmath.MPContext()
    mp.prec = 600
    two_pi = 2 * mp.pi
    assert not b["w"].hi_strict and b["w"].hi < _q(two_pi) and _q(two_pi) - b["w"].hi < \
        Fraction(1, 2 ** 250)
    assert b["r"].lo is None and b["r"].hi == Fraction(39, 5) and not b["r"].finite
    assert [c.text for c in res] == ["(> (+ v w) 0)"] and res[0].rational


def test_scalarlab_reads_fpcore_where_it_takes_a_graph(tmp_path):
    f = tmp_path / "two.fpcore"
    f.write_text('(FPCore (x) :name "one" (* x x))\n(FPCore (x y) :name "two" (- x y))\n')
    g1, p1, x0 = examples.resolve(str(f))
    g2, p2, _ = examples.resolve(f"{f}#2")
    assert [n.op for n in g1.nodes] == ["input", "mul"] and x0 is None
    assert [n.op for n in g2.nodes] == ["input", "input", "sub"]
    y = graph.denote(g2, p2, [np.array([3.0]), np.array([0.5])], "binary32")
    assert float(np.asarray(y)[0]) == 2.5


def test_predicates_are_boolean_ops():
    p, = read_fpcore("(FPCore (x) (if (signbit x) (- x) x))")
    if {"signbit", "select"} <= set(OPS):
        assert [n.op for n in p.graph.nodes] == ["input", "signbit", "neg", "select"]
    else:
        assert p.skip.startswith("op ") and p.skip.endswith("not supported")
    bad, = read_fpcore("(FPCore (x) (+ (isnan x) 1))")
    assert bad.skip in ("boolean (isnan x) used as a number", "op isnan not supported")
