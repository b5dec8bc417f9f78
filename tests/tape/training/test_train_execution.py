"""quickstart-mlp: eager and typed-graph transcripts agree digit for digit; CLI errors."""
from __future__ import annotations

import pytest

from scalarlab.experiments.cli import main
from scalarlab.tape.errors import TapeError
from scalarlab.tape.training.layers import Linear, Sequential
from scalarlab.tape.training.trainer import TrainingSession


def _run(capsys, *argv):
    rc = main(["quickstart-mlp", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize("arith,seed", [("float64", 2026), ("binary32", 7), ("bfloat16", 2026),
                                        ("rational", 3)])
def test_eager_and_typed_graph_transcripts_identical(capsys, arith, seed):
    common = ["--steps", "3", "--seed", str(seed), "--arithmetic", arith, "--log-every", "1",
              "--show-backend"]
    rc_e, eager, _ = _run(capsys, "--execution", "eager", *common)
    rc_g, graph, _ = _run(capsys, "--execution", "typed-graph", *common)
    assert rc_e == rc_g == 0
    assert eager == graph
    lines = eager.splitlines()
    assert lines[0] == f"== Quickstart: simple MLP training (seed={seed}, steps=3) =="
    assert lines[1] == ("target(heldout)    = [0.200195]" if arith == "bfloat16"
                        else "target(heldout)    = [0.200000]")   # 0.2 rounded once
    assert "relu: reference.relu provider=reference trust=checked vjp=tape reduction=n/a" in lines
    assert "dataset size = 25" in lines
    steps = [ln for ln in lines if ln.startswith("step ")]
    assert [s.split(":")[0] for s in steps] == ["step 0", "step 1", "step 2"]
    assert f"steps=3 arithmetic={arith} scalar=" in [ln.split("scalar=")[0] + "scalar="
                                                     for ln in lines if ln.startswith("steps=")][0]
    before = [ln for ln in lines if ln.startswith("mean_loss(before")][0].split("= ")[1]
    after = [ln for ln in lines if ln.startswith("mean_loss(after")][0].split("= ")[1]
    assert f"  loss={before} -> {after}" in lines
    assert lines[-1].startswith("trained(heldout) = [")


def test_seed_shaped_default_transcript(capsys):
    rc, out, _ = _run(capsys, "--steps", "2", "--seed", "2026")
    lines = out.splitlines()
    assert rc == 0 and len(lines) == 11
    prefixes = ["== Quickstart", "target(heldout)    = [", "untrained(heldout) = [",
                "dataset size = 25", "mean_loss(before training) = ", "step 0: loss=",
                "step 1: loss=", "mean_loss(after training) = ", "steps=2 arithmetic=binary32 scalar=float64",
                "  loss=", "trained(heldout) = ["]
    for ln, p in zip(lines, prefixes):
        assert ln.startswith(p), (ln, p)
    # different seeds give different untrained predictions (the seed is used)
    _, other, _ = _run(capsys, "--steps", "2", "--seed", "5")
    assert other.splitlines()[2] != lines[2]


@pytest.mark.parametrize("argv,needle", [
    (["--steps", "two"], "steps must be an integer"),
    (["--steps", "1", "--steps", "2"], "given more than once"),
    (["--bogus"], "unrecognized arguments"),
    (["--arithmetic", "float63"], "unknown arithmetic"),
    (["--execution", "compiled"], "invalid choice"),
    (["--steps", "-1"], ">= 0"),
])
def test_bad_flags_exit_2(capsys, argv, needle):
    with pytest.raises(SystemExit) as exc:
        main(["quickstart-mlp", *argv])
    assert exc.value.code == 2
    assert needle in capsys.readouterr().err


def test_typed_graph_rejects_cuda(capsys):
    rc, out, err = _run(capsys, "--execution", "typed-graph", "--device", "cuda")
    assert rc == 1 and out == ""
    assert "typed-graph execution runs on the cpu only" in err and "'cuda'" in err


def test_interval_context_rejected():
    with pytest.raises(TapeError, match="not a point context"):
        TrainingSession(Sequential(Linear(2, 1)), "interval:float64")


def test_eager_cuda_uses_the_plan_or_says_why(capsys):
    # float64 has no numba_cuda capsule: planning fails naming the op and the format
    rc, _, err = _run(capsys, "--device", "cuda", "--arithmetic", "float64")
    assert rc == 1 and "op linear" in err and "float64" in err


def test_json_report_matches_the_text(capsys):
    import json
    rc, text, _ = _run(capsys, "--steps", "2", "--arithmetic", "float64")
    rc2, js, _ = _run(capsys, "--steps", "2", "--arithmetic", "float64", "--json")
    rep = json.loads(js)["tables"]
    assert rc == rc2 == 0
    assert rep["lines"] == text.splitlines()
    assert rep["dataset_size"] == 25 and rep["target"] == "[0.200000]"
    assert len(rep["step_losses"]) == 2
    assert f"mean_loss(after training) = {rep['mean_loss_after']}" in rep["lines"]
