"""fpbench figures recomputed by an independent Arb evaluator written here.

The evaluator walks the FPCore s-expression itself (not the lab's graph): the exact value
is an Arb ball at a fixed 4096 bits (16384 where that does not decide), ``if`` takes the
branch its condition proves, and a sample's reference is decided when both ends of the
ball, as exact rationals, round alike in gmpy2's format context.  The format's value is
computed by gmpy2 in the same context, one correctly rounded operation at a time (IEEE:
``log(0) = -inf``, NaN outside a domain).  Per sample: bits = log2(1 + ordinal distance),
counted on IEEE bit patterns with ``struct``; a NaN or an infinity scores the format's
width (Herbie's counting).  Same samples as the experiment.
"""
import math
import struct
from fractions import Fraction
from pathlib import Path

import flint
import gmpy2
import numpy as np
import pytest

from scalarlab.experiments import fpbench as F
from scalarlab.graph.importers.fpcore import Num, Sym, read_fpcore
from scalarlab.scalars import formats, get

DATA = Path(__file__).resolve().parents[1] / "data" / "fpbench"

QLOG = '(FPCore (x) :name "qlog" :pre (<= (fabs x) 1) (/ (log (- 1 x)) (log (+ 1 x))))'
BRANCH = '(FPCore (x) :name "branch" (if (< x 0) (sqrt (- x)) (sqrt x)))'


def _file_prog(file, name):
    return next(p for p in read_fpcore(DATA / file) if p.name == name)


class Undecided(Exception):
    """The ball does not decide a condition or a domain at this precision."""


def _ball_lib():
    arb = flint.arb

    def lit(q: Fraction):
        return arb(flint.fmpq(q.numerator, q.denominator))

    def log(a):
        if not a > 0:
            raise Undecided if not a <= 0 else ValueError("log of a value <= 0")
        return a.log()

    def sqrt(a):
        if not a >= 0:
            raise Undecided if not a < 0 else ValueError("sqrt of a negative value")
        return a.sqrt()

    def div(a, b):
        if b.is_zero():
            raise ValueError("division by zero")
        if not (b > 0 or b < 0):
            raise Undecided
        return a / b

    def pow_(a, b):
        if not a > 0:
            raise Undecided
        return a ** b

    def cmp(op):
        def f(a, b):
            yes, no = {"<": (a < b, a >= b), ">": (a > b, a <= b), "<=": (a <= b, a > b),
                       ">=": (a >= b, a < b)}[op]
            if not (yes or no):
                raise Undecided
            return yes
        return f

    return {"lit": lit, "const": {"PI": arb.pi, "E": lambda: arb(1).exp()},
            "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
            "/": div, "neg": lambda a: -a, "fabs": abs, "sqrt": sqrt, "log": log,
            "exp": lambda a: a.exp(), "pow": pow_, "sin": lambda a: a.sin(),
            "cos": lambda a: a.cos(), **{op: cmp(op) for op in ("<", ">", "<=", ">=")}}


def _float_lib():
    """gmpy2 in the current (format) context: one correct rounding per operation."""
    def lit(q: Fraction):
        return gmpy2.mpfr(gmpy2.mpq(q.numerator, q.denominator))

    def cmp(op):
        return {"<": lambda a, b: a < b, ">": lambda a, b: a > b,
                "<=": lambda a, b: a <= b, ">=": lambda a, b: a >= b}[op]

    pi = gmpy2.const_pi
    return {"lit": lit, "const": {"PI": pi, "E": lambda: gmpy2.exp(1)},
            "+": gmpy2.add, "-": gmpy2.sub, "*": gmpy2.mul, "/": gmpy2.div,
            "neg": lambda a: -a, "fabs": abs, "sqrt": gmpy2.sqrt, "log": gmpy2.log,
            "exp": gmpy2.exp, "pow": lambda a, b: a ** b, "sin": gmpy2.sin,
            "cos": gmpy2.cos, **{op: cmp(op) for op in ("<", ">", "<=", ">=")}}


def walk(e, env, lib):
    """The value of an FPCore expression under ``lib`` (only the taken ``if`` branch)."""
    if isinstance(e, Num):
        return lib["lit"](e.value)
    if isinstance(e, Sym):
        return env[e.name] if e.name in env else lib["const"][e.name]()
    op, args = e[0].name, e[1:]
    if op in ("let", "let*"):
        inner = dict(env)
        for b in args[0]:
            inner[b[0].name] = walk(b[1], inner if op == "let*" else env, lib)
        return walk(args[1], inner, lib)
    if op == "if":
        return walk(args[1] if walk(args[0], env, lib) else args[2], env, lib)
    vals = [walk(a, env, lib) for a in args]
    if op == "-" and len(vals) == 1:
        return lib["neg"](vals[0])
    return lib[op](*vals)


def _exact(ball) -> tuple:
    """Both ends of a ball as exact Fractions (mid -+ rad, no rounding)."""
    m, e = ball.mid().man_exp()
    r, f = ball.rad().mid().man_exp()
    mid = Fraction(int(m)) * Fraction(2) ** int(e)
    rad = Fraction(int(r)) * Fraction(2) ** int(f)
    return mid - rad, mid + rad


def exact_rounded(prog, row, fmt):
    """The exact value of ``prog`` at ``row`` rounded into ``fmt``, or None if undecided
    at 16384 bits."""
    for prec in (4096, 16384):
        old = flint.ctx.prec
        flint.ctx.prec = prec
        try:
            env = {a: flint.arb(float(v)) for a, v in zip(prog.arguments, row)}
            try:
                ball = walk(prog.body, env, _ball_lib())
            except Undecided:
                continue
            if not ball.is_finite():
                continue
            # far outside the format (exponents of millions of bits: no Fraction of them)
            tiny = flint.arb(2) ** (fmt.emin - fmt.man_bits - 2)   # quarter subnormal
            if abs(ball).upper() < tiny:
                return 0.0
            if abs(ball).lower() > flint.arb(2) ** (fmt.emax + 2):
                return math.inf if ball > 0 else -math.inf
            if not (abs(ball).upper() < flint.arb(2) ** (fmt.emax + 2)
                    and (ball.is_zero() or abs(ball).lower() > tiny)):
                continue
            lo, hi = _exact(ball)
        finally:
            flint.ctx.prec = old
        with formats.gmpy2_context(fmt):
            a = gmpy2.mpfr(gmpy2.mpq(lo.numerator, lo.denominator))
            b = gmpy2.mpfr(gmpy2.mpq(hi.numerator, hi.denominator))
        if a == b:
            return float(a)
    return None


def ordinal(x: float, fmt) -> int:
    if fmt.name == "binary64":
        b = struct.unpack("<q", struct.pack("<d", x))[0]
        return b if b >= 0 else -(b & ((1 << 63) - 1))
    b = struct.unpack("<i", struct.pack("<f", x))[0]
    return b if b >= 0 else -(b & ((1 << 31) - 1))


def independent_bits(prog, X, fmt):
    width = fmt.exp_bits + fmt.man_bits + 1
    out = []
    for row in X:
        want = exact_rounded(prog, row, fmt)
        assert want is not None and math.isfinite(want), \
            f"{prog.name}: the experiment kept {row}, whose value Arb does not settle"
        with formats.gmpy2_context(fmt):
            got = walk(prog.body, {a: gmpy2.mpfr(float(v)) for a, v in
                                   zip(prog.arguments, row)}, _float_lib())
        if not gmpy2.is_finite(got):
            out.append(float(width))
        else:
            out.append(math.log2(1 + abs(ordinal(float(got), fmt) - ordinal(want, fmt))))
    return np.array(out)


CASES = [
    (lambda: read_fpcore(QLOG)[0], 24),
    (lambda: read_fpcore(BRANCH)[0], 24),
    (lambda: _file_prog("rosa.fpcore", "squareRoot3"), 24),
    (lambda: _file_prog("herbie.fpcore", "Probabilities in a clustering algorithm"), 16),
]


@pytest.mark.parametrize("make, n", CASES, ids=["qlog", "if-sqrt", "squareRoot3",
                                                "clustering-pow-exp"])
@pytest.mark.parametrize("ctx_name", ["binary64", "binary32"])
def test_per_sample_bits_equal_an_independent_arb_evaluation(make, n, ctx_name):
    prog = make()
    fmt = formats.get(ctx_name)
    run = F.run_benchmark(prog, get(ctx_name), samples=n, seed=11)
    assert run.row["skip"] == "" and run.row["samples"] == n == len(run.x)
    bits = independent_bits(prog, run.x, fmt)
    np.testing.assert_allclose(run.bits, bits, rtol=0, atol=1e-12, err_msg=prog.name)
    assert run.row["mean_bits"] == pytest.approx(float(np.mean(bits)), abs=1e-12)
    # the targets the experiment scored against are the independently settled values
    want = np.array([exact_rounded(prog, r, fmt) for r in run.x])
    assert np.array_equal(run.target, want)


def test_qlog_is_mostly_nan_in_binary64_and_every_sample_counts():
    prog = read_fpcore(QLOG)[0]
    fmt = formats.get("binary64")
    run = F.run_benchmark(prog, get("binary64"), samples=48, seed=2)
    bits = independent_bits(prog, run.x, fmt)
    assert run.row["samples"] == 48 and np.mean(bits) > 55
    assert np.array_equal(run.bits, bits)
