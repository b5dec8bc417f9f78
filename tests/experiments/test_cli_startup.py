"""Starting the CLI costs what the command needs: ``--help``/``--version`` read the light
command table only (no numpy, no op table, no context), a command imports its own module
and no other command's; plus the conventions every parser shares (no abbreviations, a
missing optional dependency is an install hint, help texts are literal)."""
from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys

import pytest

from scalarlab.experiments import commands
from scalarlab.experiments.cli import COMMANDS, build_parser, main


def _modules_after(argv) -> set:
    """The modules a fresh interpreter holds after ``scalarlab ARGV`` (exit status 0)."""
    code = ("import sys\nfrom scalarlab.experiments.cli import main\n"
            "try:\n    main(%r)\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            "print('\\n'.join(sorted(sys.modules)), file=sys.stderr)\n" % (list(argv),))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    return set(res.stderr.split())


def test_the_light_table_names_every_command_module_once():
    mods = {m.name for m in pkgutil.iter_modules(commands.__path__)
            if not m.name.startswith("_")}
    assert sorted(e.module for e in COMMANDS.values()) == sorted(mods)
    for name, entry in COMMANDS.items():
        mod = importlib.import_module(f"{commands.__name__}.{entry.module}")
        assert mod.NAME == name and callable(mod.run) and callable(mod.add_arguments)
        assert "%%" not in entry.help and "\n" not in entry.help


@pytest.mark.parametrize("argv", [["--help"], ["--version"]])
def test_help_and_version_import_no_numerics(argv):
    loaded = _modules_after(argv)
    heavy = {"numpy", "pandas", "mpmath", "gmpy2", "numba", "scalarlab.scalars",
             "scalarlab.graph", "scalarlab.experiments.outputs"}
    assert not heavy & loaded, heavy & loaded
    assert not any(m.startswith("scalarlab.experiments.commands.") for m in loaded)


def test_a_command_imports_its_own_module_only():
    loaded = _modules_after(["show", "six-node"])
    cmds = {m for m in loaded if m.startswith("scalarlab.experiments.commands.")}
    assert cmds == {"scalarlab.experiments.commands.show"}


def test_abbreviations_are_refused(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["compare", "--context", "binary32", "--quiet"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["scalarlab compare: error: unrecognized arguments: --context "
                   "(see scalarlab compare --help)"]
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert not parser.allow_abbrev
    assert all(not p.allow_abbrev for p in sub.choices.values())


def test_fpbench_help_has_a_literal_percent(capsys):
    with pytest.raises(SystemExit):
        main(["fpbench", "--help"])
    out = capsys.readouterr().out
    assert "% samples over 1 bit" in " ".join(out.split()) and "%%" not in out
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "% samples over 1" in " ".join(out.split()) and "%%" not in out


def test_missing_optional_dependency_is_an_install_hint(monkeypatch, capsys, tmp_path):
    for name in [m for m in sys.modules if m == "dask" or m.startswith(("dask.",
                                                                        "distributed"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "dask", None)      # import dask -> ModuleNotFoundError
    monkeypatch.delenv("SCALARLAB_TRACEBACK", raising=False)
    rc = main(["sweep", "--workers", "1", "--samples", "4", "--radii", "0.1", "--contexts",
               "binary32", "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1
    assert err == ["scalarlab sweep: error: this needs dask, an optional dependency that is "
                   "not installed: pip install 'scalarlab[dask]'"]


def test_version_names_the_installed_versions(capsys):
    import gmpy2
    import mpmath
    import numpy
    with pytest.raises(SystemExit):
        main(["--version"])
    out = capsys.readouterr().out
    assert f"numpy {numpy.__version__}," in out and f"mpmath {mpmath.__version__}," in out
    assert f"gmpy2 {gmpy2.version()}," in out


def test_aliases_on_the_command_line(capsys):
    assert main(["contexts"]) == 0
    out = capsys.readouterr().out
    assert ("aliases (also inside interval:/dual: names): float32 -> binary32, fp32 -> "
            "binary32, single -> binary32, float16 -> binary16, fp16 -> binary16, half -> "
            "binary16, bf16 -> bfloat16, double -> float64") in out
    assert main(["contexts", "--json", "--name", "bf16"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["aliases"]["bf16"] == "bfloat16" and doc["aliases"]["double"] == "float64"
    assert [r["format"] for r in doc["rows"]] == ["bfloat16"]
    assert main(["compare", "--contexts", "fp32,half", "--quiet", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["meta"]["contexts"] == ["binary32", "binary16"]
    assert {r["context"] for r in doc["rows"]} == {"binary32", "binary16"}
    assert main(["compare", "--contexts", "fp32,binary32"]) == 1     # the same context twice
    assert capsys.readouterr().err.strip() == ("scalarlab compare: error: --contexts: "
                                               "binary32 given more than once")


def test_sweep_centre_file_and_refused_input_file(tmp_path, capsys):
    import numpy as np
    np.save(tmp_path / "c.npy", np.array([0.3, -0.2, 0.1, 0.4]))
    argv = ["sweep", "--radii", "0.01", "--samples", "8", "--contexts", "bf16", "--quiet",
            "--json"]
    assert main([*argv, "--center-file", str(tmp_path / "c.npy")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["meta"]["center_source"] == "--center-file"
    assert doc["meta"]["center"] == ["0.3", "-0.2", "0.1", "0.4"]
    assert doc["meta"]["contexts"] == ["bfloat16"]
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--input-file", str(tmp_path / "c.npy")])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "give the box centre with --center-file" in err[0], err
    assert main([*argv, "--center-file", str(tmp_path / "c.npy"), "--box", "0:1"]) == 1
    assert "--box replaces --center-file" in capsys.readouterr().err


def _run_fresh(code: str) -> str:
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


def test_op_table_loads_no_numba_and_float64_builds_its_ufuncs_on_use():
    # (The float64 context compiles nothing of its own until an operation needs it.)
    out = _run_fresh(
        "import sys\n"
        "import scalarlab.graph.optable\n"
        "print('numba' in sys.modules)\n"
        "import scalarlab.scalars.float64\n"
        "import scalarlab.scalars.kernels.f64_libm as L\n"
        "print('scalarlab.scalars.formats' in sys.modules, 'numba' in sys.modules)\n"
        "print('scalarlab.scalars.kernels.f64_matmul' in sys.modules,\n"
        "      [f._ufunc is None for f in (L.erf_f64, L.heaviside_f64)])\n"
        "import numpy as np\n"
        "c = scalarlab.scalars.float64.Float64Context()\n"
        "print(c.heaviside(np.array([-1.0, 0.0, 2.0])).tolist(),\n"
        "      [f._ufunc is None for f in (L.erf_f64, L.heaviside_f64)])\n")
    # (scalars.formats, which the context imports, loads its rounding kernels and Numba
    # on the first rounding: tests/scalars/test_rounding_mode_kernels.py)
    assert out.split("\n")[:4] == ["False", "True False", "False [True, True]",
                                    "[0.0, 0.0, 1.0] [True, False]"]


def test_a_plain_compare_compiles_only_the_kernels_it_runs():
    # A dispatcher's signatures list what it compiled or loaded from the on-disk cache in
    # this process: the default compare (FAST formats, unfused, nearest-even; binary32 in
    # hardware: a bias add and a sequential sum) needs one sequential matmul loop, the
    # float pass of nearest-even, one binary32 op and one binary32 sum order.
    out = _run_fresh(
        "from scalarlab.experiments.cli import main\n"
        "assert main(['compare', '--quiet']) == 0\n"
        "from scalarlab.scalars.kernels import binary_format as K, rounding as R\n"
        "from scalarlab.scalars.kernels import binary32_hw as H, f64_libm as L\n"
        "def used(mod, prefix):\n"
        "    return sorted(n for n, f in vars(mod).items() if n.startswith(prefix)\n"
        "                  and getattr(f, 'signatures', None))\n"
        "print('@', used(K, 'matmul_sequential_'))\n"
        "print('@', used(R.kernels(), 'round_bits'))\n"
        "print('@', used(H, ('add32', 'sub32', 'mul32', 'div32', 'sum32')))\n"
        "print('@', L.erf_f64._ufunc is None, L.gamma_f64._ufunc is None)\n")
    mine = [line[2:] for line in out.splitlines() if line.startswith("@ ")]
    assert mine == ["['matmul_sequential_fast']", "['round_bits_nearest_even_float']",
                    "['add32', 'sum32_sequential']", "True True"]


#: what no command's --help may import: the parsers read their defaults, choices and
#: example names from experiments/defaults.py (issue 27)
HELP_MUST_NOT_LOAD = ("numpy", "pandas", "numba", "torch", "onnx", "onnxruntime", "mpmath",
                      "gmpy2", "scalarlab.scalars", "scalarlab.graph",
                      "scalarlab.graph.optable")


def test_every_command_help_loads_no_numerics():
    """Every ``CMD --help`` builds its parser without numpy, pandas, Numba, torch, ONNX,
    the contexts or the op table.  One fresh interpreter runs each command's help in turn
    and reports which of those it holds after each: since none may load any, this is what
    a fresh interpreter per command would show (the first offender is named)."""
    code = ("import sys, io, contextlib\n"
            "from scalarlab.experiments.cli import main\n"
            "for cmd in %r:\n"
            "    with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            "        try:\n"
            "            main([cmd, '--help'])\n"
            "        except SystemExit as e:\n"
            "            assert not e.code, (cmd, e.code)\n"
            "    assert 'usage: scalarlab ' + cmd in out.getvalue(), cmd\n"
            "    print('@', cmd, ' '.join(m for m in %r if m in sys.modules))\n"
            % (list(COMMANDS), HELP_MUST_NOT_LOAD))
    out = _run_fresh(code)
    held = {line.split()[1]: line.split()[2:] for line in out.splitlines()
            if line.startswith("@ ")}
    assert list(held) == list(COMMANDS)
    assert {c: h for c, h in held.items() if h} == {}


def test_parser_defaults_have_one_definition():
    """The light table's copies agree with the modules that use them (the example names
    and the ONNX opset, which live below the experiments layer), and the experiments
    re-export the same objects."""
    from scalarlab.experiments import (bound, compare, compare_table, defaults as D, fpbench,
                                       gaps, libm_audit, reduction_order, reference,
                                       sampling, tables)
    from scalarlab.graph import examples
    from scalarlab.graph.exporters.onnx import DEFAULT_OPSET
    assert list(D.EXAMPLE_NAMES) == examples.names()
    assert D.ONNX_DEFAULT_OPSET == DEFAULT_OPSET
    pairs = [(compare.DEFAULT_CONTEXTS, D.COMPARE_CONTEXTS),
             (compare.DEFAULT_THRESHOLD_BITS, D.COMPARE_THRESHOLD_BITS),
             (compare_table.DEFAULT_DIVERGENCE_ULPS, D.DEFAULT_DIVERGENCE_ULPS),
             (gaps.SAMPLINGS, D.GAPS_SAMPLINGS), (sampling.SAMPLINGS, D.SAMPLINGS),
             (fpbench.DEFAULT_CONTEXTS, D.FPBENCH_CONTEXTS),
             (fpbench.DEFAULT_SAMPLES, D.FPBENCH_SAMPLES),
             (fpbench.MAX_ORACLE_BITS, D.FPBENCH_MAX_ORACLE_BITS),
             (libm_audit.LIBRARIES, D.LIBM_LIBRARIES), (libm_audit.FORMATS, D.LIBM_FORMATS),
             (reduction_order.DEFAULT_FORMATS, D.REDUCTION_FORMATS),
             (bound.DEFAULT_FORMATS, D.BOUND_FORMATS), (bound.DEFAULT_TOL, D.BOUND_TOL),
             (reference.DEFAULT_REFERENCE, D.DEFAULT_REFERENCE),
             (reference.DEFAULT_ORACLE_LIMIT, D.DEFAULT_ORACLE_LIMIT),
             (tables.OUT_SUFFIXES, D.OUT_SUFFIXES)]
    assert all(a is b for a, b in pairs)


def test_a_lazy_module_loads_on_first_use():
    out = _run_fresh(
        "import sys\n"
        "from scalarlab.experiments.lazy_import import lazy\n"
        "cs = lazy('colorsys')\n"
        "was = 'colorsys' in sys.modules\n"
        "print(was, cs.hls_to_rgb(0.0, 0.5, 0.0)[0], 'colorsys' in sys.modules)\n")
    assert out.split() == ["False", "0.5", "True"]
