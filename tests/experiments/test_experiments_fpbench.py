"""``scalarlab fpbench`` figures recomputed independently, sampling, and the CLI.

The independent evaluator below walks the FPCore expression itself (not the graph) with
gmpy2 in the format's context (MPFR: one correct rounding per operation, the format's
subnormals and overflow), and the oracle is mpmath at a fixed 8000 bits; ULP distances
are counted on IEEE bit patterns with ``struct``.  Same samples as the experiment.
"""
import json
import math
import struct
from fractions import Fraction
from pathlib import Path

import gmpy2
import mpmath
import numpy as np
import pandas as pd
import pytest

from scalarlab.experiments import fpbench as F
from scalarlab.experiments import sampling as S
from scalarlab.experiments.cli import main
from scalarlab.graph.importers.fpcore import Num, Sym, read_fpcore
from scalarlab.scalars import formats, get

DATA = Path(__file__).resolve().parents[1] / "data" / "fpbench"

#: (file, :name): straight-line benchmarks from six FPBench files, + - * / sqrt exp log
#: sin cos atan fabs and let.
CHECKED = [
    ("herbie.fpcore", "Complex square root"),
    ("herbie.fpcore", "Complex sine and cosine"),
    ("rump.fpcore", "Rump's example, from C program"),
    ("daisy.fpcore", "carthesianToPolar, radius"),
    ("daisy.fpcore", "instantaneousCurrent"),
    ("fptaylor-extra.fpcore", "delta4"),
    ("fptaylor-extra.fpcore", "exp1x"),
    ("fptaylor-extra.fpcore", "logexp"),
    ("fptaylor-extra.fpcore", "nonlin2"),
    ("hamming-ch3.fpcore", "NMSE example 3.1"),
    ("rosa.fpcore", "turbine1"),
    ("rosa.fpcore", "doppler1"),
]


def _program(file, name):
    return next(p for p in read_fpcore(DATA / file) if p.name == name)


def _mp_fraction(v) -> Fraction:
    sign, man, exp, _ = v._mpf_
    q = Fraction(int(man)) * Fraction(2) ** int(exp)
    return -q if sign else q


_CONST = {"PI": lambda mp: mp.pi, "E": lambda mp: mp.e}


_LOGIC = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
          ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
          "and": lambda *a: all(a), "or": lambda *a: any(a), "not": lambda a: not a}


def evaluate(expr, env, lib):
    """FPCore expression -> value, with ``lib`` giving literals, constants and ops."""
    if isinstance(expr, Num):
        return lib["lit"](expr.value)
    if isinstance(expr, Sym):
        return env[expr.name] if expr.name in env else lib["const"](expr.name)
    op, args = expr[0].name, expr[1:]
    if op in ("let", "let*"):
        inner = dict(env)
        for b in args[0]:
            inner[b[0].name] = evaluate(b[1], inner if op == "let*" else env, lib)
        return evaluate(args[1], inner, lib)
    if op == "if":                     # only the taken branch: an independent reading
        return evaluate(args[1] if evaluate(args[0], env, lib) else args[2], env, lib)
    vals = [evaluate(a, env, lib) for a in args]
    if op in ("<", "<=", ">", ">=", "==") and len(vals) > 2:
        return all(lib[op](a, b) for a, b in zip(vals, vals[1:]))
    if op == "-" and len(vals) == 1:
        return lib["neg"](vals[0])
    return lib[op](*vals)


def gmpy2_lib(ctx):
    def rnd(q):
        return gmpy2.mpfr(gmpy2.mpq(q.numerator, q.denominator))

    mp = mpmath.MPContext()
    mp.prec = 2000
    return {"lit": rnd, "const": lambda n: rnd(_mp_fraction(_CONST[n](mp))),
            "+": gmpy2.add, "-": gmpy2.sub, "*": gmpy2.mul, "/": gmpy2.div,
            "neg": lambda a: -a, "fabs": abs, "sqrt": gmpy2.sqrt, "exp": gmpy2.exp,
            "log": gmpy2.log, "sin": gmpy2.sin, "cos": gmpy2.cos, "atan": gmpy2.atan,
            "tan": gmpy2.tan, "tanh": gmpy2.tanh, "pow": lambda a, b: a ** b, "hypot": gmpy2.hypot,
            "atan2": gmpy2.atan2, "acos": gmpy2.acos, "asin": gmpy2.asin,
            "expm1": gmpy2.expm1, "log1p": gmpy2.log1p, "cbrt": gmpy2.cbrt,
            "fmax": gmpy2.maxnum, "fmin": gmpy2.minnum, **_LOGIC}


def mpmath_lib(mp):
    return {"lit": lambda q: mp.mpf(q.numerator) / q.denominator,
            "const": lambda n: _CONST[n](mp), "+": lambda a, b: a + b,
            "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a / b,
            "neg": lambda a: -a, "fabs": abs, "sqrt": mp.sqrt, "exp": mp.exp, "log": mp.log,
            "sin": mp.sin, "cos": mp.cos, "atan": mp.atan, "tan": mp.tan, "tanh": mp.tanh,
            "pow": mp.power, "hypot": mp.hypot, "atan2": mp.atan2, "acos": mp.acos,
            "asin": mp.asin, "expm1": mp.expm1, "log1p": mp.log1p, "cbrt": mp.cbrt,
            "fmax": max, "fmin": min, **_LOGIC}


def ordinal(x: float, fmt) -> int:
    """Signed position of a value among the format's values (binary32/64 bit patterns)."""
    if fmt.name == "binary64":
        b = struct.unpack("<q", struct.pack("<d", x))[0]
    else:
        b = struct.unpack("<i", struct.pack("<f", x))[0]
    return b if b >= 0 else -(b & ((1 << (63 if fmt.name == "binary64" else 31)) - 1))


def independent_bits(prog, X, fmt_name):
    fmt = formats.get(fmt_name)
    width = fmt.exp_bits + fmt.man_bits + 1
    mp = mpmath.MPContext()
    mp.prec = 8000
    out = []
    for row in X:
        with formats.gmpy2_context(fmt):
            lib = gmpy2_lib(None)
            env = {a: gmpy2.mpfr(float(v)) for a, v in zip(prog.arguments, row)}
            got = evaluate(prog.body, env, lib)
            exact = evaluate(prog.body, {a: mp.mpf(float(v)) for a, v in
                                         zip(prog.arguments, row)}, mpmath_lib(mp))
            sign, man, exp, bc = exact._mpf_
            if man and exp + bc < -2000:        # far below every subnormal: rounds to 0
                want = gmpy2.mpfr(0)
            elif man and exp + bc > 2000:       # far above every format: overflows
                want = gmpy2.mpfr("-inf" if sign else "inf")
            else:
                q = _mp_fraction(exact)
                want = gmpy2.mpfr(gmpy2.mpq(q.numerator, q.denominator))
        if isinstance(exact, mpmath.mpf) and not mp.isfinite(exact):
            raise AssertionError("the experiment kept a sample without a finite value")
        if not gmpy2.is_finite(got):      # NaN or inf where the exact value is finite
            out.append(float(width))
            continue
        d = abs(ordinal(float(got), fmt) - ordinal(float(want), fmt))
        out.append(math.log2(1 + d))
    return np.array(out)


@pytest.mark.parametrize("file, name", CHECKED)
def test_figures_recomputed_independently(file, name):
    prog = _program(file, name)
    assert prog.graph is not None, prog.skip
    for ctx_name, n in (("binary64", 12), ("binary32", 12)):
        run = F.run_benchmark(prog, get(ctx_name), samples=n, sampling="bitpattern", seed=3)
        r = run.row
        assert r["skip"] == "" and r["samples"] == n == len(run.x)
        fmt = formats.get(ctx_name)
        # samples are values of the format inside the precondition's box
        assert np.array_equal(formats.round_to_format(run.x, fmt), run.x)
        bounds, _ = prog.boxes()
        for j, a in enumerate(prog.arguments):
            b = bounds[a]
            if b.lo is not None:
                assert all(Fraction(v) >= b.lo for v in run.x[:, j])
            if b.hi is not None:
                assert all(Fraction(v) <= b.hi for v in run.x[:, j])
        bits = independent_bits(prog, run.x, ctx_name)
        np.testing.assert_allclose(run.bits, bits, rtol=0, atol=1e-12)
        assert r["mean_bits"] == pytest.approx(float(np.mean(bits)), abs=1e-12)
        assert r["max_bits"] == pytest.approx(float(np.max(bits)), abs=1e-12)
        assert r["pct_over_1bit"] == pytest.approx(100 * np.mean(bits > 1), abs=1e-9)
        if r["nonfinite"]:                # NaN / inf outputs: no finite ULP distance
            assert r["max_ulps"] == math.inf
            assert r["nonfinite"] == int(np.count_nonzero(~np.isfinite(run.values)))
        else:
            assert r["max_ulps"] == pytest.approx(2 ** float(np.max(bits)) - 1, rel=1e-9)


def test_bitpattern_reaches_every_binade_and_box_is_uniform():
    rng = np.random.default_rng(0)
    reg = [S.Region(Fraction(1, 2 ** 20), Fraction(1))]
    X, bits = S.draw(reg, "binary32", 4000, rng, "bitpattern")
    assert bits == [0] and X.min() >= 2.0 ** -20 and X.max() <= 1
    # 20 binades, equally likely: about half the samples lie below 2^-10
    assert 0.45 < np.mean(X < 2.0 ** -10) < 0.55
    Y, bits = S.draw(reg, "binary32", 4000, rng, "box")
    assert bits == [] and np.mean(Y < 0.5) == pytest.approx(0.5, abs=0.05)
    strict = [S.Region(Fraction(0), Fraction(1), lo_strict=True, hi_strict=True)]
    Z, _ = S.draw(strict, "binary16", 2000, rng, "bitpattern")
    assert Z.min() > 0 and Z.max() < 1
    with pytest.raises(S.ExperimentError, match="holds no finite"):
        S.draw([S.Region(Fraction(1, 3), Fraction(1, 3))], "binary16", 4, rng, "bitpattern")


def test_residual_precondition_is_checked_exactly():
    prog, = read_fpcore("(FPCore (a b) :pre (and (<= 0 a 1) (<= 0 b 1) (< (+ a b) 1)) "
                        "(- a b))")
    bounds, res = prog.boxes()
    smp = S.sample(S.regions_from_bounds(bounds, prog.arguments), prog.arguments, res,
                   "binary64", 500, np.random.default_rng(1), "box")
    assert len(smp.x) == 500 and smp.rejected > 100
    assert all(Fraction(a) + Fraction(b) < 1 for a, b in smp.x)


def test_pack_inputs_evaluates_bit_identically():
    from scalarlab import graph
    from scalarlab.experiments.cases import GraphCase
    prog, = read_fpcore("(FPCore (x y z) (/ (+ x (* y z)) (- z 3)))")
    g, p = S.pack_inputs(prog.graph, prog.payload)
    assert [n.op for n in g.nodes if n.op == "input"] == ["input"]
    X = np.random.default_rng(2).uniform(-2, 2, size=(64, 3))
    X = formats.round_to_format(X, "binary32")
    a = graph.denote(prog.graph, prog.payload, [X[:, 0], X[:, 1], X[:, 2]], "binary32")
    b = graph.denote(g, p, X, "binary32")
    assert np.array_equal(np.asarray(a), np.asarray(b))
    case = GraphCase("t", prog.graph, prog.payload)
    batch = S.split_columns(case, X)
    assert sorted(batch) == [0, 1, 2] and np.array_equal(batch[2], X[:, 2])


def test_fpbench_cli_smoke(tmp_path, capsys):
    out = tmp_path / "t.csv"
    files = [str(DATA / "herbie.fpcore"), str(DATA / "rump.fpcore")]
    assert main(["fpbench", *files, "--samples", "6", "--quiet", "--json", "--out",
                 str(out), "--contexts", "binary32,binary16"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "scalarlab-fpbench" and len(doc["rows"]) == 12
    df = pd.read_csv(out, keep_default_na=False)
    assert list(df.columns) == list(F.ROW_COLUMNS) and len(df) == 12
    assert not list(tmp_path.glob(".t.csv*"))              # no temporary file left
    ran = df[df["skip"] == ""]
    assert len(ran) >= 8 and (ran["samples"].astype(int) == 6).all()
    assert (ran["max_bits"].astype(float) >= ran["mean_bits"].astype(float)).all()
    # every draw is accounted for: kept, rejected by :pre, without a finite value, or
    # unsettled by the oracle
    assert (ran["samples"].astype(int) + ran["rejected_pre"].astype(int)
            + ran["invalid"].astype(int) + ran["unsettled"].astype(int)
            == ran["drawn"].astype(int)).all()
    assert (ran["invalid"].astype(int) > 0).any()
    for reason in df[df["skip"] != ""]["skip"]:
        assert reason.startswith("op ") and reason.endswith("not supported")
    # the same figures when the samples come from a file
    prog = _program("herbie.fpcore", "Complex square root")
    run = F.run_benchmark(prog, get("binary32"), samples=6, seed=0)
    np.save(tmp_path / "x.npy", run.x)
    assert main(["fpbench", files[0], "--only", "Complex square root", "--contexts",
                 "binary32", "--input-file", str(tmp_path / "x.npy"), "--json",
                 "--quiet"]) == 0
    row, = json.loads(capsys.readouterr().out)["rows"]
    assert row["mean_bits"] == pytest.approx(run.row["mean_bits"], abs=1e-12)


@pytest.mark.parametrize("argv, msg, code", [
    (["--out", "t.txt"], "unknown file type", 2),        # refused while parsing
    (["--samples", "0"], "--samples", 2),
    (["--contexts", "mpmath:100"], "no binary format", 1),
    (["--only", "zzz"], "no benchmark name", 1),
])
def test_fpbench_errors_are_one_line(argv, msg, code, capsys):
    try:
        rc = main(["fpbench", str(DATA / "herbie.fpcore"), "--quiet", *argv])
    except SystemExit as exc:                            # usage errors: argparse's exit 2
        rc = exc.code
    assert rc == code
    err = capsys.readouterr().err
    assert err.startswith("scalarlab fpbench: error: ") and msg in err
    assert err.count("\n") == 1


def test_compare_and_gaps_take_boxes_and_sample_files(tmp_path, capsys):
    f = tmp_path / "two.fpcore"
    f.write_text("(FPCore (x y) (- (* x x) (/ y 3)))")
    X = formats.round_to_format(np.random.default_rng(4).uniform(1, 2, size=(40, 2)),
                                "binary16")
    np.save(tmp_path / "x.npy", X)
    assert main(["compare", str(f), "--input-file", str(tmp_path / "x.npy"), "--contexts",
                 "binary16", "--json", "--quiet"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["meta"]["samples"] == 40
    out_row = [r for r in doc["rows"] if r["node"] == 5][0]
    assert main(["gaps", str(f), "--input-file", str(tmp_path / "x.npy"), "--context",
                 "binary16", "--json", "--quiet"]) == 0
    gdoc = json.loads(capsys.readouterr().out)
    ulps = [r for r in gdoc["rows"] if r["metric"] == "ulps"][0]
    assert ulps["max"] == out_row["max_ulps"] and gdoc["meta"]["samples"] == 40
    assert main(["gaps", str(f), "--box", "1:2,-1:1", "--samples", "50", "--sampling",
                 "bitpattern", "--context", "binary16", "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["meta"]["samples"] == 50
    assert main(["compare", str(f), "--box", "1:2", "--quiet"]) == 1
    assert "--box needs --samples" in capsys.readouterr().err


def test_program_without_arguments_and_no_valid_sample():
    progs = read_fpcore('(FPCore () :name "c" (+ 0.1 0.2))\n'
                        '(FPCore (x) :name "i" (+ x INFINITY))')
    for ctx_name in ("binary64", "binary32", "binary16"):
        fmt = formats.get(ctx_name)
        with formats.gmpy2_context(fmt):
            got = gmpy2.add(gmpy2.mpfr(gmpy2.mpq(1, 10)), gmpy2.mpfr(gmpy2.mpq(2, 10)))
            want = gmpy2.mpfr(gmpy2.mpq(3, 10))
        d = abs(ordinal(float(got), fmt) - ordinal(float(want), fmt)) if ctx_name != \
            "binary16" else None
        r = F.run_benchmark(progs[0], get(ctx_name), samples=50).row
        assert r["samples"] == 1 and r["skip"] == ""
        if d is not None:
            assert r["max_ulps"] == d
        assert (ctx_name, r["max_ulps"]) != ("binary64", 0)        # 0.1 + 0.2 != 0.3
    r = F.run_benchmark(progs[1], get("binary32"), samples=5).row
    assert r["samples"] == 0 and "no finite real value" in r["skip"]


def test_sweep_packs_several_inputs_and_takes_a_box(tmp_path, capsys):
    f = tmp_path / "two.fpcore"
    f.write_text("(FPCore (x y) (+ (* x x) (/ y x)))")
    assert main(["sweep", str(f), "--box", "1:2,-1:1", "--samples", "300", "--contexts",
                 "binary32", "--json", "--quiet"]) == 0
    row, = json.loads(capsys.readouterr().out)["rows"]
    # x^2 + y/x on [1, 2] x [-1, 1] ranges over [0, 4.5] exactly (corners (1,-1), (2,1))
    assert row["violations"] == 0 and row["radius"] == 1.0 and row["vertices"] == 4
    assert row["box_lo"] <= 0 and row["box_hi"] >= 4.5
    assert row["sampled_lo"] == 0 and row["sampled_hi"] == 4.5     # the vertices are hit


def _ops_of(e):
    """Operation names of an FPCore expression (let bindings' names excluded)."""
    out = set()
    if isinstance(e, list) and e and isinstance(e[0], Sym):
        if e[0].name in ("let", "let*"):
            for b in e[1]:
                out |= _ops_of(b[1])
            return out | _ops_of(e[2])
        out.add(e[0].name)
        for t in e[1:]:
            out |= _ops_of(t)
    return out


@pytest.mark.slow
def test_figures_recomputed_on_every_translated_benchmark():
    """Every FPBench benchmark that translates and uses operations the evaluator above
    knows: binary64 and binary32, 16 bit-pattern samples each, per-sample bits equal."""
    known = set(gmpy2_lib(None)) | {"-", "if", "!"}
    checked = 0
    for f in sorted(DATA.glob("*.fpcore")):
        for prog in read_fpcore(f):
            if prog.graph is None or not _ops_of(prog.body) <= known:
                continue
            if _ops_of(prog.body) & {"!"}:
                continue
            for ctx_name in ("binary64", "binary32"):
                run = F.run_benchmark(prog, get(ctx_name), samples=16, seed=7)
                if run.row["skip"]:
                    continue
                bits = independent_bits(prog, run.x, ctx_name)
                np.testing.assert_allclose(run.bits, bits, rtol=0, atol=1e-12,
                                           err_msg=f"{prog.name} {ctx_name}")
                checked += 1
    assert checked >= 200


@pytest.mark.parametrize("fmt", ["binary64", "binary32", "e4m3", "bfloat16"])
def test_ordinals_round_trip_in_every_format(fmt):
    from scalarlab.experiments.gaps import from_ordinals, ordinals
    f = formats.get(fmt)
    top = int(ordinals(np.array([f.max_finite]), f)[0])
    k = np.array([-top, -top + 1, -2, -1, 0, 1, 2, top - 1, top], dtype=np.int64)
    v = from_ordinals(k, f)
    assert np.array_equal(ordinals(v, f), k)
    assert v[0] == -f.max_finite and v[-1] == f.max_finite and v[5] == f.min_subnormal


@pytest.mark.parametrize("spec", ["json", "npy", "text"])
def test_box_specs(tmp_path, spec):
    pairs = [[-1, 2], [0.5, 0.75]]
    if spec == "json":
        path = tmp_path / "b.json"
        path.write_text(json.dumps(pairs))
        arg = str(path)
    elif spec == "npy":
        arg = str(tmp_path / "b.npy")
        np.save(arg, np.array(pairs, dtype=float))
    else:
        arg = "-1:2,0.5:0.75"
    regs = S.parse_box(arg, 2)
    assert [(r.lo, r.hi) for r in regs] == [(Fraction(-1), Fraction(2)),
                                            (Fraction(1, 2), Fraction(3, 4))]
    assert [r.lo for r in S.parse_box("-inf:3", 3)] == [None] * 3
    with pytest.raises(S.ExperimentError, match="2 intervals for 3"):
        S.parse_box(arg, 3)
    with pytest.raises(S.ExperimentError, match="lo 2 > hi 1"):
        S.parse_box("2:1", 1)


def test_precondition_conditions_evaluate_exactly():
    from scalarlab.graph.importers.fpcore import parse_sexprs
    e, = parse_sexprs("(and (< x INFINITY) (< (sqrt x) 2) (!= x 1 3) "
                      "(let ([y (* x x)]) (=> (> y 2) (< 0.1 (- y 2)))))")
    # sqrt(x) < 2 <=> x < 4; x != 1, 3; if x^2 > 2 then x^2 - 2 > 0.1 (exactly: 2.1)
    assert S.eval_condition(e, {"x": Fraction(3, 2)})
    assert not S.eval_condition(e, {"x": Fraction(5)})
    assert not S.eval_condition(e, {"x": Fraction(1)})
    assert S.eval_condition(e, {"x": Fraction(29, 20)})       # x^2 = 2.1025 > 2.1
    assert S.eval_condition(e, {"x": Fraction(7, 5)})         # x^2 = 1.96 <= 2
    assert not S.eval_condition(e, {"x": Fraction(29, 20) - Fraction(1, 100)})  # 2.0736


def test_draws_are_accounted_with_a_residual_precondition():
    prog = _program("rosa.fpcore", "triangle1")
    r = F.run_benchmark(prog, get("binary32"), samples=40, sampling="box", seed=2).row
    assert r["samples"] == 40 and r["rejected_pre"] > 0
    assert r["samples"] + r["rejected_pre"] + r["invalid"] + r["unsettled"] == r["drawn"]
