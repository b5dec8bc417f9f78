"""Every bad day listed in the CLI robustness issue: one line ``scalarlab <cmd>: error: ...``
with a documented nonzero exit status (1 error or failed check, 2 bad command line, 130
interrupted), never a traceback; plus a fuzz test of every subcommand with bad flag values."""
from __future__ import annotations

import errno
import os
import random
import re
import signal
import socket
import subprocess
import sys

import numpy as np
import pytest

from scalarlab.experiments.cli import build_parser, main

LINE = re.compile(r"scalarlab [a-z-]+: (error: .+|interrupted.*)")


def _run(argv, capsys):
    """``(status, stdout, stderr lines)`` of an in-process call; usage errors exit 2."""
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, [ln for ln in err.splitlines() if ln.strip()]


def _one_error_line(err, cmd):
    assert len(err) == 1, err
    assert err[0].startswith(f"scalarlab {cmd}: error: "), err[0]
    assert "Traceback" not in err[0] and "internal error" not in err[0]
    return err[0]


@pytest.fixture
def nan_graph(tmp_path):
    """six-node with one NaN weight, as a graph file without a built-in input."""
    from scalarlab import graph
    from scalarlab.graph import examples
    g, p, _ = examples.six_node_mlp()
    p = graph.Payload(p)
    e = dict(p.get(1))
    w = np.array(e["W"], dtype=object).copy()
    w[0, 1] = "nan"
    e["W"] = w
    p.set(1, e)
    path = tmp_path / "nan.json"
    graph.save(path, g, p)
    return str(path)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# (argv, exit status, text in the one error line); the list, one by one
USAGE_CASES = [
    (["sweep", "--out", "/nonexistent/t.csv"], "directory /nonexistent does not exist"),
    (["sweep", "--shard-size", "0"], "--shard-size: must be >= 1, got 0"),
    (["sweep", "--workers", "-2"], "--workers: must be >= 1, got -2"),
    (["sweep", "--scheduler", "nonsense"], "is not a Dask scheduler address"),
    (["compare", "--radius", "1e308"], "--radius: must be <= 1e+300"),
    (["gaps", "--radius", "1e308"], "--radius: must be <= 1e+300"),
    (["reduction-order", "--radius", "1e308"], "--radius: must be <= 1e+300"),
    (["compare", "--oracle-limit", "1", "--check-samples", "0"], "--check-samples: must be >= 1"),
    (["sweep", "--radii", "nan"], "--radii: 'nan' is not a decimal number"),
    (["sweep", "--radii", ""], "--radii: no numbers given"),
    (["compare", "--contexts", "binary32,,"], "empty item in 'binary32,,'"),
    (["compare", "--oracle-limit", "-1"], "--oracle-limit: must be >= 0, got -1"),
    (["ir-axis-ops", "--leading", "-3"], "--leading: must be >= 1, got -3"),
    (["sweep", "--radius", "0.1"], "unrecognized arguments: --radius"),
    (["compare", "--contexts", "binary99"], "unknown context 'binary99'"),
    (["sweep", "--samples", "-5"], "--samples: must be >= 0, got -5"),
]


@pytest.mark.parametrize("argv, text", USAGE_CASES, ids=[" ".join(c[0]) for c in USAGE_CASES])
def test_bad_flag_values_are_one_usage_line(argv, text, capsys):
    rc, out, err = _run(argv, capsys)
    assert rc == 2 and out == ""
    line = _one_error_line(err, argv[0])
    assert text in line and line.endswith(f"(see scalarlab {argv[0]} --help)")


def test_runtime_errors_are_one_line_exit_1(tmp_path, nan_graph, capsys):
    strings = tmp_path / "strings.npy"
    np.save(strings, np.array(["a", "b", "c", "d"]))
    port = _free_port()
    cases = [
        (["compare", "--input", str(strings), "--quiet"], "dtype <U1 is not a real number type"),
        (["sweep", "--scheduler", f"tcp://127.0.0.1:{port}", "--connect-timeout", "0.5",
          "--samples", "5", "--radii", "0.1", "--contexts", "binary32", "--quiet"],
         "Dask cluster not reachable"),
        (["sweep", nan_graph, "--samples", "5", "--quiet"], "has no built-in input; give --input"),
        (["check", nan_graph], "payload entry 1 field 'W': 1 non-finite value(s), first at [0, 1]"),
        (["report", "--graphs", "six-node,nine-node", "--out", str(tmp_path / "r")],
         "nine-node: neither a built-in graph nor a file"),
    ]
    for argv, text in cases:
        rc, _, err = _run(argv, capsys)
        assert rc == 1, argv
        assert text in _one_error_line(err, argv[0]), argv


def test_checks_that_checked_nothing_exit_nonzero(nan_graph, capsys):
    rc, out, err = _run(["sweep", "--contexts", "rational", "--samples", "5", "--radii",
                         "0.05", "--quiet"], capsys)
    assert rc == 1 and "interval:rational" in out
    assert "1 row(s) checked nothing" in _one_error_line(err, "sweep")
    rc, out, err = _run(["sweep", nan_graph, "--input", "0.3,-0.2,0.1,0.4", "--samples", "5",
                         "--radii", "0.05", "--contexts", "binary32", "--quiet"], capsys)
    assert rc == 1 and "no output box" in _one_error_line(err, "sweep")
    rc, out, err = _run(["graph-semantics", nan_graph, "--input", "0.3,-0.2,0.1,0.4",
                         "--samples", "5"], capsys)
    assert rc == 1 and "no box for the output node 5" in _one_error_line(err, "graph-semantics")
    assert "all" not in out.splitlines()[-1]
    rc, out, err = _run(["check", nan_graph, "--allow-nonfinite"], capsys)
    assert rc == 0 and out.startswith("ok (with 1 non-finite") and "warning" in err[0]
    rc, out, _ = _run(["check", "six-node"], capsys)
    assert rc == 0 and out == "ok\n"


@pytest.mark.parametrize("cmd", [
    ["compare", "--quiet", "--contexts", "binary32"],
    ["eval", "six-node"],
    ["gaps", "--quiet", "--samples", "10"],
    ["sweep", "--samples", "5", "--radii", "0.1", "--contexts", "binary32", "--quiet"],
    ["graph-semantics", "--samples", "5"],
])
def test_negative_numbers_after_options(cmd, capsys):
    rc, out, err = _run([*cmd, "--input", "-0.3,0.2,-0.1,0.4"], capsys)
    assert rc == 0 and not err, err
    rc2, out2, _ = _run([*cmd, "--input=-0.3,0.2,-0.1,0.4"], capsys)
    assert out2 == out                           # glued form reads the same input
    if cmd[0] == "sweep":                        # negative radius is refused, not misparsed
        rc, _, err = _run([*cmd[:3], "--radii", "-0.1", *cmd[5:]], capsys)
        assert rc == 2 and "--radii: -0.1 must be >= 0" in err[0]


def test_other_fixes(capsys):
    rc, out, _ = _run(["reduction-order", "--formats", "float64", "--samples", "3", "--quiet"],
                      capsys)
    assert rc == 0 and "binary64: sequential=binary64" in out
    rc, out, _ = _run(["compare", "--contexts", "binary32", "--quiet", "--json"], capsys)
    import json
    assert json.loads(out)["rows"][0]["shape"] == [4]
    rc, out, _ = _run(["--version"], capsys)
    assert rc == 0 and re.match(r"scalarlab \S+ \(numpy \S+, gmpy2 \S+, mpmath \S+", out)


def test_every_option_help_states_its_default():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, p in sub.choices.items():
        text = p.format_help()
        for a in p._actions:
            if (a.option_strings and a.nargs != 0 and a.default is not None
                    and a.dest != "help"):
                assert a.help, f"{name} {a.option_strings[0]}: no help"
                assert "default" in p._get_formatter()._get_help_string(a), \
                    f"{name} {a.option_strings[0]}"
        assert "usage: scalarlab " + name in text


def test_ctrl_c_in_process_is_one_line_130(monkeypatch, capsys):
    from scalarlab.experiments import compare as C

    def interrupted(*a, **kw):
        raise KeyboardInterrupt
    monkeypatch.setattr(C, "compare", interrupted)
    rc, out, err = _run(["compare", "--quiet"], capsys)
    assert rc == 130 and err == ["scalarlab compare: interrupted (outputs not replaced)"]


def _env():
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("SCALARLAB_TRACEBACK", None)
    return env


def test_full_stdout_in_a_real_process():
    """``--json > /dev/full``: the failed flush of stdout is one line, exit 1."""
    assert os.path.exists("/dev/full"), "Linux provides /dev/full"
    cmd = [sys.executable, "-m", "scalarlab.experiments"]
    with open("/dev/full", "w") as full:
        res = subprocess.run([*cmd, "contexts", "--json"], stdout=full,
                             stderr=subprocess.PIPE, text=True, env=_env(), timeout=120)
    assert res.returncode == 1
    lines = res.stderr.strip().splitlines()
    assert lines == [f"scalarlab contexts: error: standard output: "
                     f"{os.strerror(errno.ENOSPC)}"], lines


@pytest.mark.slow
def test_ctrl_c_in_a_real_process():
    """SIGINT during training: one line, exit 130 (in-process: test_ctrl_c_in_process)."""
    cmd = [sys.executable, "-m", "scalarlab.experiments"]
    # SIGINT as an interactive shell leaves it: pytest run as a background job inherits
    # it ignored, and Python keeps an ignored SIGINT ignored
    proc = subprocess.Popen([*cmd, "quickstart-mlp", "--steps", "100000", "--arithmetic",
                             "float64"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=_env(),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        for line in proc.stdout:                      # wait until the training loop runs
            if line.startswith("step 0"):
                break
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:                       # pragma: no cover
            proc.kill()
            proc.wait()
    assert proc.returncode == 130
    assert err.strip().splitlines() == ["scalarlab quickstart-mlp: interrupted (outputs not "
                                        "replaced)"]


# --------------------------------------------------------------------------- fuzz
# Values that are wrong for every flag that takes one (numbers, names, files, lists).
BAD_VALUES = ["", "abc", "nan", "inf", "-inf", "1e999", ",", "1,,2", "-", "1.5.2", "0x1p3",
              "-7", "/nonexistent/dir/f.csv", "binary99", "-0.3,0.2", "3/0", " ", "1e-999999"]
# Flags that keep a command cheap when the fuzzed value happens to be accepted.
CHEAP = {"sweep": ["--samples", "4", "--radii", "0.1", "--contexts", "binary32"],
         "gaps": ["--samples", "8"], "reduction-order": ["--samples", "4"],
         "report": ["--samples", "2", "--gap-samples", "2", "--graphs", "concat-axis"],
         "quickstart-mlp": ["--steps", "1"], "provider-diff": ["--samples", "2"]}
# report --out takes any directory name (checked in test_cli_outputs_atomic): a fuzzed
# value would just run the report
NOT_FUZZED = {("report", "out")}
NEEDS = {"check": ["six-node"], "eval": ["six-node"], "show": ["six-node"],
         "export": ["six-node", "-o", "fuzz.onnx"], "import": ["/nonexistent/m.onnx", "-o",
                                                            "fuzz.json"]}


def _fuzz_cases(n_per_flag=2, seed=15):
    rng = random.Random(seed)
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    cases = []
    for name, p in sorted(sub.choices.items()):
        for a in p._actions:
            if not a.option_strings or a.nargs == 0 or (name, a.dest) in NOT_FUZZED:
                continue
            flag = a.option_strings[-1]
            for v in rng.sample(BAD_VALUES, n_per_flag):
                base = list(NEEDS.get(name, []))
                if flag in base:                      # the fuzzed flag replaces its default
                    i = base.index(flag)
                    del base[i:i + 2]
                cheap = CHEAP.get(name, [])
                extra = [t for i, t in enumerate(cheap) if not (
                    (i % 2 == 0 and t == flag) or (i % 2 == 1 and cheap[i - 1] == flag))]
                cases.append([name, *base, *extra, "--quiet" if "--quiet" in
                              p._option_string_actions else None, flag, v])
        cases.append([name, "no-such-graph-or-file.json"])
    return [[t for t in c if t is not None] for c in cases]


@pytest.mark.parametrize("per_flag, seed", [
    (1, 15), pytest.param(len(BAD_VALUES), 0, marks=pytest.mark.slow, id="every-value")])
def test_fuzz_every_subcommand_with_bad_flag_values(per_flag, seed, tmp_path, monkeypatch,
                                                    capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SCALARLAB_TRACEBACK", raising=False)
    cases = _fuzz_cases(per_flag, seed)
    assert len(cases) > 80
    for argv in cases:
        rc, out, err = _run(argv, capsys)
        assert rc in (0, 1, 2), (argv, rc, err)
        assert not any("Traceback" in ln for ln in err), (argv, err)
        if rc:
            lines = [ln for ln in err if ln.startswith("scalarlab")]
            assert len(lines) == 1 and LINE.fullmatch(lines[0]), (argv, err)
