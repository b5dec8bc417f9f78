"""Live progress (issue 31): the fold's per-node hook, the cost-weighted bar of
experiments/progress.py, and the commands' header before the work on stderr; silent when
stderr is not a terminal, stdout unchanged."""
from __future__ import annotations

import io
import json
import sys
import time

import numpy as np
import pytest

from scalarlab import graph, scalars
from scalarlab.experiments import cases as CS
from scalarlab.experiments import progress
from scalarlab.experiments.cli import main
from scalarlab.graph import Graph, Node, OpKind, Payload

BAR = "\r"            # tqdm draws and redraws a bar after a carriage return


class FakeTTY(io.StringIO):
    """A terminal standing in for stderr."""

    def isatty(self):
        return True


@pytest.fixture
def six():
    return CS.load_case("six-node")


def _conv_case():
    rng = np.random.default_rng(3)
    g = Graph([Node(0, [], "input", [2, 6, 7]),
               Node(1, [0], OpKind("conv2d", kernel_size=3, out_channels=4, padding=1),
                    [4, 6, 7]),
               Node(2, [1], "relu", [4, 6, 7]),
               Node(3, [2], "flatten", [168]),
               Node(4, [3], "linear", [3]),
               Node(5, [4], "tanh", [3])])
    p = Payload()
    p.set(1, {"weight": rng.standard_normal((4, 2, 3, 3)), "bias": rng.standard_normal(4)},
          op="conv2d")
    p.set(4, {"W": rng.standard_normal((3, 168)), "b": rng.standard_normal(3)}, op="linear")
    return g, p, rng.standard_normal((2, 2, 6, 7))


# ------------------------------------------------------------------------ the fold hook
def test_fold_reports_each_node_once_in_order_and_values_are_unchanged(six):
    x = CS.box_samples(CS.center_of(six, None), 0.05, 3, 0, six)
    seen = []
    ctx = scalars.get("float64")
    vals = graph.denote_all(six.graph, six.payload, x, ctx, on_node=seen.append)
    assert seen == [1, 2, 3, 4, 5]                    # every node but the input, in order
    plain = graph.denote_all(six.graph, six.payload, x, ctx)
    for a, b in zip(vals, plain):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    # partial: a node that fails is reported (it ran), its dependents are not
    g, p, xc = _conv_case()
    seen.clear()
    errors = {}
    out = graph.denote_all(g, p, xc, "rational", partial=True, errors=errors,
                           on_node=seen.append)
    assert seen == [1, 2, 3, 4, 5] and out[5] is None and list(errors) == [5]
    assert "tanh" in errors[5]


def test_fold_with_select_reports_every_node_it_ran():
    # (if (< x 0) (sqrt (- x)) (sqrt x)): the masked fold runs the branches on their rows
    g = Graph([Node(0, [], "input", []), Node(1, [0], "neg", []), Node(2, [1], "sqrt", []),
               Node(3, [0], "sqrt", []), Node(4, [], "const", []),
               Node(5, [0, 4], "lt", []), Node(6, [5, 2, 3], "select", [])])
    p = Payload({4: {"const": {"value": "0"}}})
    x = np.array([-4.0, 9.0, -2.25, 0.25])
    seen = []
    got = graph.denote_all(g, p, x, "float64", on_node=seen.append)
    assert np.asarray(got[6]).tolist() == [2.0, 3.0, 1.5, 0.5]
    assert sorted(set(seen)) == [1, 2, 3, 4, 5, 6] and seen[-1] == 6
    assert 5 in seen[:seen.index(2)]            # the condition ran before its branch


def test_node_costs_weight_dot_products_by_fan_in(six):
    g, _, _ = _conv_case()
    costs = progress.node_costs(g)
    assert costs[0] == 0                                   # the input is converted only
    assert costs[1] == 4 * 6 * 7 * (2 * 3 * 3)             # outputs x C_in x 3 x 3
    assert costs[2] == 168 and costs[3] == 168             # elementwise, shape op
    assert costs[4] == 3 * 168                             # linear: out x in
    assert costs[5] == 3 * progress.FUNCTION_WEIGHT        # a scalar function
    six_costs = progress.node_costs(six.graph)
    assert six_costs == [0, 5 * 4, 5, 3 * 5, 3, progress.FUNCTION_WEIGHT]  # sum: its input
    m = Graph([Node(0, [], "input", [3, 4]), Node(1, [0, 0], "mul", [3, 4]),
               Node(2, [0], "relu", [3, 4])])
    assert progress.node_costs(m) == [0, 12, 12]


def test_evaluation_bar_advances_by_node_cost_per_chunk_and_names_the_running_node(six):
    out = io.StringIO()
    ev = progress.Evaluation(six.graph, samples=10, chunk_rows=4, desc="reference x",
                             stream=out)
    try:
        per = sum(progress.node_costs(six.graph))
        assert ev.bar.total == per * 10
        ev.chunk(0, 4)
        assert ev.postfix() == "chunk 1/3, node 1 linear (1/5)"
        ev.node_done(1)
        assert ev.bar.n == 20 * 4 and ev.postfix() == "chunk 1/3, node 2 relu (2/5)"
        ev.node_done(2)
        assert ev.bar.n == 25 * 4
        ev.end_chunk()                                     # the chunk's boundary, exactly
        assert ev.bar.n == per * 4
        ev.chunk(8, 2)
        assert ev.bar.n == per * 8 and ev.postfix().startswith("chunk 3/3, node 1 ")
        for i in (1, 2, 3, 4, 5):
            ev.node_done(i)
        ev.end_chunk()
        assert ev.bar.n == ev.bar.total
    finally:
        ev.close()
    text = out.getvalue()
    assert "reference x:" in text and "node 1 linear (1/5)" in text


def test_ticker_redraws_while_a_node_runs(six, monkeypatch):
    monkeypatch.setattr(progress, "TICK_S", 0.01)
    out = io.StringIO()
    ev = progress.Evaluation(six.graph, samples=1, chunk_rows=1, desc="slow", stream=out)
    try:
        ev.chunk(0, 1)
        drawn = out.getvalue().count(BAR)
        deadline = time.monotonic() + 10            # no update from the fold meanwhile
        while out.getvalue().count(BAR) < drawn + 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert out.getvalue().count(BAR) >= drawn + 3
    finally:
        ev.close()
    assert not ev._ticker._thread.is_alive()


def test_silent_stand_in_keeps_the_fold_hook_none(six):
    ev = progress.evaluation(six.graph, 10, 4, "x")       # pytest's stderr is no TTY
    assert ev.node_done is None
    with progress.session(True, io.StringIO()):
        assert progress.evaluation(six.graph, 10, 4, "x", quiet=True).node_done is None
        shown = progress.evaluation(six.graph, 10, 4, "x")
        assert shown.node_done is not None
        shown.close()


def test_wanted_precedence_and_environment(monkeypatch):
    monkeypatch.delenv(progress.ENV, raising=False)
    assert not progress.wanted(stream=io.StringIO())
    assert progress.wanted(stream=FakeTTY())
    assert progress.wanted(force=True, stream=io.StringIO())
    assert not progress.wanted(quiet=True, force=True, stream=FakeTTY())
    monkeypatch.setenv(progress.ENV, "1")
    assert progress.wanted(stream=io.StringIO())
    monkeypatch.setenv(progress.ENV, "0")
    assert not progress.wanted(stream=FakeTTY())
    assert progress.wanted(force=True, stream=FakeTTY())


# ---------------------------------------------------------------------------- the CLI
def _run(argv, capsys, monkeypatch, tty):
    """``(status, stdout, stderr)`` of an in-process run; ``tty``: stderr is a terminal."""
    capsys.readouterr()
    if tty:
        fake = FakeTTY()
        monkeypatch.setattr(sys, "stderr", fake)
    rc = main(argv)
    got = capsys.readouterr()
    if tty:
        monkeypatch.setattr(sys, "stderr", sys.__stderr__)
        return rc, got.out, fake.getvalue()
    return rc, got.out, got.err


def _from_header(err: str, first: str) -> str:
    """stderr from the header's first line on, checking that nothing was drawn before it
    (a cold Numba cache may put the first-run notice, one plain line, ahead of it)."""
    assert first in err, err
    k = err.index(first)
    assert BAR not in err[:k] and (k == 0 or err[k - 1] == "\n"), err
    return err[k:]


COMPARE = ["compare", "--contexts", "binary32", "--samples", "257",
           "--reference", "mpmath:200"]   # the oracle on every sample: 2 chunks


def test_compare_header_comes_before_the_progress_and_stdout_is_unchanged(capsys,
                                                                          monkeypatch):
    monkeypatch.delenv(progress.ENV, raising=False)
    rc, out_tty, err = _run(COMPARE, capsys, monkeypatch, tty=True)
    assert rc == 0
    head = _from_header(err, "scalarlab compare: graph six-node (6 nodes, output node 5)\n")
    head = head.split(BAR)[0]
    assert "  reference  : mpmath:200 (asked" in head and "  samples    : 257\n" in head
    assert "seed 0" in head
    bars = err.split(BAR)[1:]
    assert any(b.startswith("reference mpmath:200:") and "chunk 2/2" in b for b in bars)
    assert any(b.startswith("binary32:") and "node " in b for b in bars)
    # stderr not a terminal: nothing there, and stdout is the same table
    rc, out, err = _run(COMPARE, capsys, monkeypatch, tty=False)
    assert rc == 0 and err == "" and out == out_tty
    # --quiet on a terminal: silent
    rc, out, err = _run(COMPARE + ["--quiet"], capsys, monkeypatch, tty=True)
    assert rc == 0 and err == ""


def test_forced_progress_keeps_json_stdout_and_a_bad_variable_is_one_line(capsys,
                                                                          monkeypatch):
    argv = ["compare", "--contexts", "binary32", "--json"]
    monkeypatch.delenv(progress.ENV, raising=False)
    rc, plain, err = _run(argv, capsys, monkeypatch, tty=False)
    assert rc == 0 and err == ""
    rc, forced, err = _run(argv + ["--progress"], capsys, monkeypatch, tty=False)
    assert rc == 0 and BAR in _from_header(err, "scalarlab compare: graph six-node")
    a, b = json.loads(plain), json.loads(forced)
    for doc in (a, b):                          # provenance that differs between runs
        doc.get("meta", {}).pop("command", None)
        doc.get("meta", {}).pop("created", None)
    assert a == b
    monkeypatch.setenv(progress.ENV, "1")
    rc, _, err = _run(argv, capsys, monkeypatch, tty=False)
    assert rc == 0 and BAR in _from_header(err, "scalarlab compare: graph six-node")
    monkeypatch.setenv(progress.ENV, "maybe")
    rc, out, err = _run(argv, capsys, monkeypatch, tty=False)
    assert rc == 1 and out == ""
    assert err.strip().splitlines() == [
        "scalarlab compare: error: SCALARLAB_PROGRESS='maybe': give 1 (progress on "
        "stderr even when it is not a terminal) or 0 (never)"]


@pytest.mark.parametrize("argv, first", [
    (["gaps", "--samples", "20"], "scalarlab gaps: graph six-node, node 5 (tanh)"),
    (["sweep", "six-node", "--radii", "0.01", "--samples", "20", "--contexts", "float64"],
     "scalarlab sweep: graph six-node (6 nodes)"),
    (["bound", "tests/data/fpbench/apron.fpcore", "--only", "Circle", "--samples", "0",
      "--budget", "0.05"], "scalarlab bound: tests/data/fpbench/apron.fpcore"),
    (["fpbench", "tests/data/fpbench/apron.fpcore", "--only", "Circle", "--samples", "5",
      "--contexts", "binary64"], "scalarlab fpbench: "),
])
def test_every_table_command_prints_its_header_first(argv, first, capsys, monkeypatch):
    from pathlib import Path
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    monkeypatch.delenv(progress.ENV, raising=False)
    rc, out, err = _run(argv, capsys, monkeypatch, tty=True)
    assert rc in (0, 1), err
    assert _from_header(err, first), err
    rc2, out2, err2 = _run(argv, capsys, monkeypatch, tty=False)
    assert (rc2, out2, err2.count(BAR)) == (rc, out, 0)
    assert first not in err2
