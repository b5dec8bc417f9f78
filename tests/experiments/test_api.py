"""The Python API (``scalarlab.compare``, ``gaps``, ``sweep``, ``fpbench``) returns the
commands' own tables: the same columns and values as the CSV that ``--out`` writes, and
``attrs["meta"]`` = the ``--json`` document's meta (the command line aside)."""
from __future__ import annotations

import doctest
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import scalarlab
from scalarlab.experiments import api
from scalarlab.experiments.cli import main
from scalarlab.experiments.errors import ExperimentError

FPCORE = '(FPCore (x) :name "cancel" :pre (<= 1 x 2) (- (+ x 1e-8) x))\n'


def _cli(argv, capsys):
    rc = main(argv)
    out = capsys.readouterr().out
    assert rc == 0, out
    return json.loads(out)


def _same_meta(api_meta, cli_meta):
    drop = ("command", "versions")
    assert {k: v for k, v in api_meta.items() if k not in drop} == \
        {k: v for k, v in cli_meta.items() if k not in drop}
    assert api_meta["command"].endswith("(Python API)")


def _same_table(df, doc, csv_path):
    csv = pd.read_csv(csv_path, keep_default_na=False, na_values=[""])
    assert list(df.columns) == list(csv.columns) == list(doc["rows"][0])
    assert len(df) == len(csv) == len(doc["rows"])
    for col in df.columns:
        a, b = df[col].to_numpy(), csv[col].to_numpy()
        if a.dtype.kind == "f":
            np.testing.assert_array_equal(a, b.astype(float), err_msg=col)
        else:
            assert [str(v) for v in a] == [("" if isinstance(v, float) and v != v else str(v))
                                           for v in b] or \
                [str(v) for v in a] == [str(v) for v in b], col


@pytest.mark.parametrize("kind, call, argv", [
    ("compare", lambda: scalarlab.compare("six-node", contexts=["fp32", "bf16"], samples=20,
                                          seed=3),
     ["compare", "six-node", "--contexts", "binary32,bfloat16", "--samples", "20",
      "--seed", "3"]),
    ("gaps", lambda: scalarlab.gaps("six-node", context="half", samples=50,
                                    inputs=[0.25, -0.5, "0.1", 0.375]),
     ["gaps", "six-node", "--context", "binary16", "--samples", "50", "--input",
      "0.25,-0.5,0.1,0.375"]),
    ("sweep", lambda: scalarlab.sweep("six-node", contexts="float64,bf16", radii=[0.01, 0.5],
                                      samples=[30]),
     ["sweep", "six-node", "--contexts", "float64,bfloat16", "--radii", "0.01,0.5",
      "--samples", "30"]),
])
def test_api_table_equals_the_cli_csv_and_meta(kind, call, argv, tmp_path, monkeypatch,
                                               capsys):
    monkeypatch.chdir(tmp_path)
    df = call()
    doc = _cli([*argv, "--quiet", "--json"], capsys)
    assert main([*argv, "--quiet", "--out", "t.csv"]) == 0
    capsys.readouterr()
    _same_table(df, doc, tmp_path / "t.csv")
    _same_meta(df.attrs["meta"], doc["meta"])


def test_fpbench_api_equals_the_cli(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.fpcore").write_text(FPCORE)
    df = scalarlab.fpbench(tmp_path / "c.fpcore", contexts=["bf16", "half"], samples=32)
    argv = ["fpbench", "c.fpcore", "--contexts", "bfloat16,binary16", "--samples", "32",
            "--quiet"]
    doc = _cli([*argv, "--json"], capsys)
    assert main([*argv, "--out", "t.csv"]) == 0
    capsys.readouterr()
    _same_table(df, doc, tmp_path / "t.csv")
    meta = dict(df.attrs["meta"], files=doc["meta"]["files"])      # the path as given
    _same_meta(meta, doc["meta"])


def test_graph_objects_and_context_objects(tmp_path):
    from scalarlab import scalars
    from scalarlab.graph import examples
    g, p, x0 = examples.six_node_mlp()
    by_name = scalarlab.compare("six-node", contexts=["binary32"])
    by_tuple = scalarlab.compare((g, p, x0), contexts=[scalars.get("binary32")])
    by_graph = scalarlab.compare(g, payload=p, inputs=list(x0), contexts="binary32")
    cols = [c for c in by_name.columns if c != "graph"]
    pd.testing.assert_frame_equal(by_name[cols], by_tuple[cols])
    pd.testing.assert_frame_equal(by_name[cols], by_graph[cols])
    assert by_graph.attrs["meta"]["graph"]["sha256"] == \
        by_name.attrs["meta"]["graph"]["sha256"]
    assert by_graph.attrs["meta"]["input_source"] == "--input"
    assert [v["context"] for v in by_name.attrs["verdicts"]] == ["binary32"]


@pytest.mark.parametrize("call, message", [
    (lambda: scalarlab.compare(samples=0), "scalarlab.compare(): samples=: must be >= 1"),
    (lambda: scalarlab.compare(contexts=["binary99"]),
     "scalarlab.compare(): contexts=: unknown context 'binary99'"),
    (lambda: scalarlab.gaps(context="rational"), "rational"),
    (lambda: scalarlab.sweep(radii=[-1]), "scalarlab.sweep(): radii=: "),
    (lambda: scalarlab.compare(object()), "graph must be a built-in name"),
    (lambda: scalarlab.compare("six-node", payload={}), "payload= goes with a Graph"),
    (lambda: scalarlab.fpbench([]), "no FPCore file named"),
    (lambda: scalarlab.compare(samples=True), "samples=True"),
])
def test_bad_arguments_raise_one_clear_error(call, message):
    with pytest.raises(scalarlab.scalars.ScalarLabError) as exc:
        call()
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_unknown_keyword_is_a_type_error():
    with pytest.raises(TypeError):
        scalarlab.compare(sample=3)           # noqa: the real keyword is samples


def test_docstring_examples_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = doctest.testmod(api, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert res.attempted >= 10 and res.failed == 0, res


def test_import_scalarlab_stays_cheap_and_the_api_is_lazy():
    code = ("import sys, scalarlab\nassert 'numpy' not in sys.modules\n"
            "assert 'compare' in dir(scalarlab)\n"
            "f = scalarlab.compare\nassert 'scalarlab.experiments.api' in sys.modules\n"
            "assert f.__module__ == 'scalarlab.experiments.api'\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    with pytest.raises(AttributeError):
        scalarlab.no_such_function               # noqa: B018
    assert isinstance(ExperimentError("x"), scalarlab.scalars.ScalarLabError)
