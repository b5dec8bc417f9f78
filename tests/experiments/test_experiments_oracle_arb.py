"""The proven Arb oracle (``experiments/oracle.py``) and Herbie's counting in fpbench,
compare and gaps.

Oracles: rounding decisions against ``formats.round_fraction`` (integer arithmetic) and
gmpy2 in the format's context; exact values from exact rationals and mpmath.
"""
import json
import math
from fractions import Fraction

import flint
import mpmath
import numpy as np
import pytest

from scalarlab.experiments import fpbench as F
from scalarlab.experiments import metrics
from scalarlab.experiments import oracle as O
from scalarlab.experiments.cli import main
from scalarlab.graph.importers.fpcore import read_fpcore
from scalarlab.scalars import formats, get

B64 = formats.get("binary64")
B32 = formats.get("binary32")
B16 = formats.get("binary16")

KAHAN = """(FPCore (y) :name "Kahan's monster"
  (let* ((s (sqrt (+ (* y y) 1)))
         (q (- (fabs (- y s)) (/ 1 (+ y s))))
         (z (* q q)))
    (if (== z 0) 1 (/ (- (exp z) 1) z))))"""
QLOG = """(FPCore (x) :name "qlog" :pre (<= (fabs x) 1)
  (/ (log (- 1 x)) (log (+ 1 x))))"""


def _prog(text):
    prog, = read_fpcore(text)
    assert prog.graph is not None, prog.skip
    return prog


# ------------------------------------------------------------------------ rounding
@pytest.mark.parametrize("fmt", [B64, B32, B16])
def test_round_exact_matches_integer_rounding(fmt):
    """man * 2^exp rounded by gmpy2 in the format's context equals the lab's integer
    rounding, around ties, subnormals, the underflow to 0 and the overflow to inf."""
    g = formats.gmpy2_context(fmt)
    rng = np.random.default_rng(5)
    p = fmt.man_bits + 1
    tiny = fmt.emin - fmt.man_bits                 # exponent of the smallest subnormal
    cases = []
    for e in (tiny - 3, tiny - 2, tiny - 1, tiny, tiny + 3, fmt.emin - 1, fmt.emin,
              0, fmt.emax - 1, fmt.emax, fmt.emax + 1, fmt.emax + 3):
        for _ in range(12):
            m = int(rng.integers(1, 1 << 62)) | 1
            extra = int(rng.integers(0, 40))
            man = (m << extra) | int(rng.integers(0, 2))
            # place the value at 2^e..2^(e+1)
            bl = man.bit_length()
            cases.append((man, e - bl + 1))
        # exact ties: p+1 significant bits ending in 1 (half an ulp) at the exponent
        half = (1 << p) | 1
        cases.append((half, e - p))
        cases.append((half + 2, e - p))
    for man, exp in cases:
        for s in (1, -1):
            got = O.round_exact(s * man, exp, fmt, g)
            want = formats.round_fraction(Fraction(s * man) * Fraction(2) ** exp, fmt)
            assert got == want and math.copysign(1, got) == math.copysign(1, want), \
                (man, exp, got, want)
    assert O.round_exact(1, 10 ** 15, fmt, g) == math.inf       # no big integer is built
    assert O.round_exact(-1, -10 ** 15, fmt, g) == 0.0
    assert math.copysign(1, O.round_exact(-1, -10 ** 15, fmt, g)) == -1


def test_balls_settle_only_inside_one_rounding_interval():
    arb = flint.arb
    g = formats.gmpy2_context(B64)
    one_ulp = 2.0 ** -52
    with O.working_precision(200):
        mid = arb(1) + arb(one_ulp) / 2               # the tie between 1 and 1 + ulp
        assert O.round_ball(mid, B64, g) == (1.0, 1.0)         # exact tie: to even
        above = mid + arb(2.0 ** -120)
        assert O.round_ball(above, B64, g) == (1.0 + one_ulp,) * 2
        straddle = arb(mid, 2.0 ** -120)             # a ball around the tie
        lo, hi = O.round_ball(straddle, B64, g)
        assert lo == 1.0 and hi == 1.0 + one_ulp       # two intervals: not settled
        zero = arb(0, 2.0 ** -1200)                  # +-tiny: every value rounds to 0
        lo, hi = O.round_ball(zero, B64, g)
        assert lo == hi == 0.0
        big = arb(2) ** 2000
        assert O.round_ball(big, B64, g) == (math.inf, math.inf)


def test_constants_are_exact_balls():
    with O.working_precision(3000):
        pi, st = O.const_ball(read_fpcore("(FPCore () PI)")[0].payload.get(0)["value"], "t")
        assert st == O.OK and pi.contains(flint.arb.pi()) and pi.rad() < flint.arb(2) ** -2900
        third, _ = O.const_ball("1/3", "t")
        assert (third * 3).contains(1) and third.rad() < flint.arb(2) ** -2900
        _, st = O.const_ball(float("inf"), "t")
        assert st == O.INVALID


# --------------------------------------------------------------------- oracle decisions
def test_reference_decides_domain_conditions_and_settles():
    mp = mpmath.MPContext()
    mp.prec = 4000
    prog = _prog(QLOG)
    X = np.array([[0.5], [1.0], [-1.0], [0.0], [1e-300], [-0.75]])
    r = O.reference(prog.graph, prog.payload, X, B64)
    # log(0) at x = +-1 and 0/0 at x = 0: not real; the rest settle to the correctly
    # rounded exact value (mpmath at 4000 bits, far from a tie here)
    assert list(r.outcome) == [O.SETTLED, O.NOT_REAL, O.NOT_REAL, O.NOT_REAL, O.SETTLED,
                               O.SETTLED]
    for i in (0, 4, 5):
        x = mp.mpf(X[i, 0])
        exact = mp.log(1 - x) / mp.log(1 + x)
        assert r.target[i] == float(exact)
    assert r.bits[4] > 1000          # 1 - 1e-300 needs ~1000 bits to leave 1


def test_if_takes_only_the_branch_of_each_sample():
    prog = _prog("(FPCore (x) (if (< x 0) (sqrt (- x)) (sqrt x)))")
    X = np.array([[-4.0], [9.0], [0.0], [-2.0]])
    r = O.reference(prog.graph, prog.payload, X, B64)
    assert list(r.outcome) == [O.SETTLED] * 4
    assert list(r.target) == [2.0, 3.0, 0.0, math.sqrt(2.0)]


def test_node_figures_skip_the_samples_a_branch_does_not_take():
    """(- x) runs only on negative samples: its figure (and the divergence node) is not
    made of the NaN fillers of the samples that take the other branch."""
    prog = _prog('(FPCore (x) :name "abs-sqrt" :pre (<= -4 x 4) '
                 '(if (< x 0) (sqrt (- x)) (sqrt x)))')
    run = F.run_benchmark(prog, get("binary64"), samples=64, seed=1)
    assert run.row["samples"] == 64 and run.row["max_bits"] == 0
    assert run.row["divergence_node"] is None
    assert max(run.node_max_bits) == 0


def test_kahans_monster_is_unsettled_never_zero_bits():
    prog = _prog(KAHAN)
    X = np.array([[0.5], [3.0], [1e10], [0.0]])
    r = O.reference(prog.graph, prog.payload, X, B64, max_bits=2048)
    # the exact value is 1 everywhere; q is an exact 0 only at y = 0 (sqrt(1) = 1),
    # elsewhere no ball decides (== z 0): unsettled, not scored
    assert list(r.outcome) == [O.UNSETTLED] * 3 + [O.SETTLED] and r.target[3] == 1.0
    for ctx in ("binary64", "binary32"):
        row = F.run_benchmark(prog, get(ctx), samples=20, seed=1).row
        assert row["samples"] == 0 and row["unsettled"] == row["drawn"] > 0
        assert "unsettled" in row["skip"] and math.isnan(row["mean_bits"])


def test_huge_exponents_are_decided_without_big_integers():
    prog = _prog("(FPCore (l w) (pow l (exp w)))")
    X = np.array([[0.5, 1.26e13], [2.0, 3.0], [-2.0, 0.0], [0.9999, -1e300]])
    r = O.reference(prog.graph, prog.payload, X, B64, max_bits=1024)
    assert list(r.outcome) == [O.SETTLED] * 4
    assert r.target[0] == 0.0 and r.target[2] == -2.0 and r.target[3] == 1.0
    assert r.target[1] == float(mpmath.mpf(2) ** mpmath.exp(3))
    for ctx in ("binary64", "binary32"):
        run = F.run_benchmark(prog, get(ctx), x=X)
        assert run.row["skip"] == "" and run.row["samples"] >= 3


# ---------------------------------------------------------------- Herbie's counting
def test_qlog_counts_every_sample_with_a_finite_exact_value():
    prog = _prog(QLOG)
    run = F.run_benchmark(prog, get("binary64"), samples=128, seed=0)
    r = run.row
    # bit patterns in [-1, 1] are mostly tiny: log(1 - x) = log(1 + x) = 0 in binary64,
    # 0/0 = NaN where the exact value is about -1: counted at 64 bits, not dropped
    assert r["samples"] == 128 and r["invalid"] == 0 and r["unsettled"] == 0
    assert r["nonfinite"] == int(np.count_nonzero(np.isnan(run.values))) > 100
    assert np.all(run.bits[np.isnan(run.values)] == 64.0)
    assert r["mean_bits"] > 60
    assert r["mean_bits"] == pytest.approx(float(np.mean(run.bits)))


def test_log_of_an_underflowed_square_is_scored():
    prog = _prog("(FPCore (x) (log (* x x)))")
    X = np.array([[1e-200], [0.5]])
    run = F.run_benchmark(prog, get("binary64"), x=X)
    assert run.row["samples"] == 2 and run.row["context_failures"] == 0
    assert run.values[0] == -math.inf and list(run.bits) == [64.0, 0.0]
    assert run.row["nonfinite"] == 1


def test_metrics_score_nonfinite_outputs_at_the_format_width():
    v = np.array([np.nan, np.inf, -np.inf, 1.0, np.nan])
    r = np.array([1.0, 1.0, 2.0 ** 1000, 1.0, np.nan])
    z = np.zeros(5)
    e = metrics.entry_errors(v, z, r, z, B64)
    assert list(e.bits) == [64.0, 64.0, 64.0, 0.0, 0.0]
    e = metrics.entry_errors(v, z, r, z, B32)
    assert list(e.bits[:3]) == [32.0] * 3


def test_compare_and_gaps_score_what_the_format_computes(tmp_path, capsys):
    f = tmp_path / "l.fpcore"
    f.write_text("(FPCore (x) (log (* x x)))")
    np.save(tmp_path / "x.npy", np.array([[1e-200], [0.5], [3.0], [1e-170]]))
    assert main(["compare", str(f), "--input-file", str(tmp_path / "x.npy"), "--contexts",
                 "binary64", "--json", "--quiet"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    out = [r for r in rows if r["node"] == 2][0]
    assert out["evaluated"] and out["max_bits"] == 64.0 and out["nonfinite"] == 2
    assert out["mean_bits"] == pytest.approx(32.0, abs=0.01)
    assert main(["gaps", str(f), "--input-file", str(tmp_path / "x.npy"), "--context",
                 "binary64", "--json", "--quiet"]) == 0
    bits = [r for r in json.loads(capsys.readouterr().out)["rows"] if r["metric"] == "bits"][0]
    assert bits["max"] == 64.0 and bits["samples"] == 4


# ------------------------------------------------------------- guard, alts, warnings
def test_one_failing_benchmark_is_a_row_and_the_table_is_written(tmp_path, capsys,
                                                                 monkeypatch):
    f = tmp_path / "two.fpcore"
    f.write_text('(FPCore (x) :name "a" :pre (<= 1 x 2) (+ x 1))\n'
                 '(FPCore (x) :name "b" :pre (<= 1 x 2) (* x 3))')
    real = F.run_benchmark

    def boom(prog, ctx, **kw):
        if prog.name == "a":
            raise OverflowError("mpz overflow (simulated)")
        return real(prog, ctx, **kw)
    monkeypatch.setattr(F, "run_benchmark", boom)
    out = tmp_path / "t.csv"
    assert main(["fpbench", str(f), "--samples", "8", "--quiet", "--out", str(out),
                 "--contexts", "binary32"]) == 0
    text = out.read_text()
    assert "error: OverflowError: mpz overflow (simulated)" in text
    capsys.readouterr()


def test_alts_run_on_the_originals_samples():
    prog = _prog('(FPCore (x) :name "sq" :pre (<= 1 x 1e6) (- (sqrt (+ x 1)) (sqrt x)))')
    alt = _prog("(FPCore (x) (/ 1 (+ (sqrt (+ x 1)) (sqrt x))))")
    bad = _prog("(FPCore (x) (log (- x x)))")       # never real: every sample invalid
    prog.alts = [alt, bad]
    runs = F.guarded_runs(prog, get("binary64"), alts=True, samples=64, seed=2)
    assert [r.row["variant"] for r in runs] == ["", "alt 1", "alt 2"]
    orig, a1, a2 = runs
    assert np.array_equal(orig.x, a1.x) and a1.row["samples"] == 64
    assert a1.row["benchmark"] == orig.row["benchmark"] == "sq"
    assert a1.row["mean_bits"] < orig.row["mean_bits"]      # the rewrite is accurate
    assert a2.row["samples"] == 0 and a2.row["invalid"] == 64 and a2.row["skip"]


def test_fewer_samples_than_asked_warn_from_the_command(tmp_path, capsys):
    f = tmp_path / "few.fpcore"
    # bit patterns of [0, 1] in binary16: about 10 of its 15361 values have x^2 >= 0.99,
    # so the draws run out before 50 samples are accepted
    f.write_text('(FPCore (x) :name "few" :pre (and (<= 0 x 1) (>= (* x x) 0.99)) (+ x 1))')
    rc = main(["fpbench", str(f), "--samples", "50", "--quiet", "--contexts", "binary16",
               "--json"])
    cap = capsys.readouterr()
    row, = json.loads(cap.out)["rows"]
    assert rc == 0 and 0 < row["samples"] < row["asked"] == 50
    assert f"warning: few in binary16: {row['samples']} of 50 samples" in cap.err


def test_targets_follow_the_formats_own_overflow_rule():
    """MPFR overflows only to inf; E4M3FN has NaN above 464 and no inf, binary16 inf."""
    prog = _prog("(FPCore (x) (* x 1))")
    X = np.array([[440.0], [470.0], [65504.0], [1e5]])
    r = O.reference(prog.graph, prog.payload, X, formats.get("e4m3"))
    assert list(r.outcome) == [O.SETTLED] + [O.OUT_OF_RANGE] * 3 and r.target[0] == 448.0
    r = O.reference(prog.graph, prog.payload, X, B16)
    assert list(r.outcome) == [O.SETTLED] * 3 + [O.OUT_OF_RANGE]
    assert list(r.target[:3]) == [440.0, 470.0, 65504.0]
