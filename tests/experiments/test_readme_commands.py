"""Every ``scalarlab ...`` command line in README.md runs and exits 0.

Commands are read from the README's shell blocks (``$ `` prompts, ``VAR=value`` prefixes
and ``... && scalarlab ...`` included; synopsis lines with ``[optional]`` parts are not
commands) and run in-process in a scratch directory that holds the files the examples
name (``g.json``, ``my.json``).  The two heavy ones (the full default report, the CUDA
simulator) run in the ``slow`` selection.
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from scalarlab.experiments.cli import main

README = Path(__file__).resolve().parents[2] / "README.md"
HEAVY = ("scalarlab report --out scalarlab-report", "scalarlab provider-diff",
         "scalarlab fpbench tests/data/fpbench/*.fpcore")     # all of FPBench: minutes


def readme_commands() -> list[str]:
    cmds, fence = [], None
    for line in README.read_text().splitlines():
        if line.startswith("```"):
            fence = None if fence is not None else line[3:].strip()
            continue
        if fence is None or fence in ("python", "json"):
            continue
        text = line.strip()
        if text.startswith("$ "):
            text = text[2:]
        text = re.split(r"\s#", text, maxsplit=1)[0].strip()       # drop the comment
        for part in text.split("&&"):
            part = part.strip()
            words = shlex.split(part) if part else []
            while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
                words = words[1:]
            if not words or words[0] != "scalarlab":
                continue
            if any(w.startswith("[") for w in words) or "|" in words:
                continue                                   # a synopsis, not a command
            cmds.append(part)
    return cmds


COMMANDS = readme_commands()


def test_the_readme_has_its_examples():
    assert len(COMMANDS) >= 20
    for h in HEAVY:
        assert any(c.startswith(h) or h in c for c in COMMANDS), h


def _params():
    out = []
    for c in COMMANDS:
        marks = [pytest.mark.slow] if any(h in c for h in HEAVY) else []
        out.append(pytest.param(c, marks=marks, id=c[:60]))
    return out


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    from scalarlab import graph
    from scalarlab.graph import examples
    g, p, _ = examples.six_node_mlp()
    for name in ("g.json", "my.json"):
        graph.save(tmp_path / name, g, p)
    # the FPCore examples: the vendored FPBench files, a two-program file, a sample file
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "data").symlink_to(README.parent / "tests" / "data")
    (tmp_path / "prog.fpcore").write_text(
        "(FPCore (x) :name \"one\" :pre (<= 0 x 1) (- (sqrt (+ x 1)) (sqrt x)))\n"
        "(FPCore (x y) :name \"two\" (/ (- (* x x) (* y y)) (+ x y)))\n")
    import numpy as np
    np.save(tmp_path / "x.npy", np.linspace(0.01, 1, 20).reshape(20, 1))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("command", _params())
def test_readme_command_runs(command, scratch, monkeypatch, capsys):
    words = shlex.split(command.split("&&")[-1].strip())
    while words[0] != "scalarlab":
        key, _, value = words.pop(0).partition("=")
        monkeypatch.setenv(key, value)
    import glob
    args = [a for w in words[1:] for a in (sorted(glob.glob(w)) if "*" in w else [w])]
    if args[:1] == ["import"] and not (scratch / args[1]).exists():
        assert main(["export", "six-node", "-o", args[1]]) == 0     # the example before it
    rc = main(args)
    out, err = capsys.readouterr()
    assert rc == 0, f"{command}: exit {rc}: {err[-2000:]}"
    assert "error" not in err, err
