"""README.md and docs/*.md run as pasted, in order.

Each document is read into steps, in the order they appear:
- every ``scalarlab ...`` line of a shell block (a fence without a language; ``$ ``
  prompts, ``VAR=value`` prefixes and ``... && scalarlab ...`` included; lines of other
  programs such as ``pip`` or ``python bench/...`` are not run), run in-process through
  the CLI's ``main`` and expected to exit 0.  In a block with ``$`` prompts, the lines
  after a command are its printed output and are compared with what it prints (``...``
  stands for any text, whitespace runs are equal);
- every ``python`` block: a block of ``>>>`` lines is a doctest (outputs compared, with
  ELLIPSIS and NORMALIZE_WHITESPACE), any other block is executed as a script.  Each block
  gets a fresh namespace: snippets are self-contained.
``text`` and ``json`` blocks are not run.  A document's steps share one scratch folder in
which ``tests/data`` is the repository's, so a file a step uses must be made by an earlier
step of the same document.  Each document is one test in the default selection (about
15 s for the README, 35 s for all of them on a loaded machine); the heavy commands (the
full report, all of FPBench, the CUDA simulator) need only the repository's data and run
once each, on their own, under ``-m slow``.
"""
from __future__ import annotations

import doctest
import glob
import re
import shlex
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest

from scalarlab.experiments.cli import main

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCUMENTS = [README] + sorted((ROOT / "docs").glob("*.md"))
HEAVY = ("scalarlab report --out scalarlab-report", "scalarlab provider-diff",
         "scalarlab fpbench tests/data/fpbench/*.fpcore")     # all of FPBench: minutes
SHELL_FENCES = ("", "sh", "shell", "bash", "console")
DOCTEST_FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@dataclass
class Step:
    kind: str          # "sh", "py" or "doctest"
    text: str          # the command line or the code
    line: int          # where it starts in the document
    output: str | None = None     # a shell command's printed output, when the doc shows it

    @property
    def heavy(self) -> bool:
        return self.kind == "sh" and any(h in self.text for h in HEAVY)


def _shell_command(line: str) -> str | None:
    """The ``scalarlab ...`` part of a shell line (comment and prompt dropped), or None."""
    text = line.strip()
    if text.startswith("$ "):
        text = text[2:]
    text = re.split(r"\s#", text, maxsplit=1)[0].strip()
    for part in text.split("&&"):
        part = part.strip()
        words = shlex.split(part) if part else []
        while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
            words = words[1:]
        if words and words[0] == "scalarlab":
            return part
    return None


def read_steps(path: Path) -> list[Step]:
    steps, fence, body, start = [], None, [], 0
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.startswith("```"):
            if fence is None:
                fence, body, start = line[3:].strip(), [], n + 1
                continue
            steps.extend(_block_steps(fence, body, start))
            fence = None
            continue
        if fence is not None:
            body.append(line)
    assert fence is None, f"{path.name}: unclosed code block from line {start - 1}"
    return steps


def _block_steps(fence: str, body: list[str], start: int) -> list[Step]:
    if fence == "python":
        code = "\n".join(body) + "\n"
        kind = "doctest" if body and body[0].startswith(">>>") else "py"
        return [Step(kind, code, start)]
    if fence not in SHELL_FENCES:
        return []
    prompted = any(b.startswith("$ ") for b in body)
    steps = []
    for i, line in enumerate(body):
        if prompted and not line.startswith("$ "):
            continue                                   # a printed output line
        cmd = _shell_command(line)
        if cmd is None:
            continue
        output = None
        if prompted:
            j = i + 1
            while j < len(body) and not body[j].startswith("$ "):
                j += 1
            output = "\n".join(body[i + 1:j]) + "\n" if j > i + 1 else None
        steps.append(Step("sh", cmd, start + i, output))
    return steps


STEPS = {p.name: read_steps(p) for p in DOCUMENTS}


def test_the_documents_have_their_examples():
    readme = STEPS["README.md"]
    assert sum(s.kind == "sh" for s in readme) >= 15
    assert sum(s.kind in ("py", "doctest") for s in readme) >= 5
    every = [s for steps in STEPS.values() for s in steps]
    for h in HEAVY:
        assert any(h in s.text for s in every if s.kind == "sh"), h
    assert len(DOCUMENTS) >= 9, [p.name for p in DOCUMENTS]


def test_the_reader_finds_commands_outputs_and_snippets(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("text\n```\nscalarlab show six-node   # c\npip install x && scalarlab eval a\n"
                   "bench/gpu_check.sh\n```\n```\n$ scalarlab tape-demo\nline 1\nline 2\n"
                   "$ NUMBA_X=1 scalarlab check six-node\n```\n```python\n>>> 1 + 1\n2\n```\n"
                   "```python\nx = 1\n```\n```text\nscalarlab sweep [GRAPH]\n```\n"
                   "```json\n{}\n```\n")
    steps = read_steps(doc)
    assert [(s.kind, s.text, s.output) for s in steps] == [
        ("sh", "scalarlab show six-node", None), ("sh", "scalarlab eval a", None),
        ("sh", "scalarlab tape-demo", "line 1\nline 2\n"),
        ("sh", "NUMBA_X=1 scalarlab check six-node", None),
        ("doctest", ">>> 1 + 1\n2\n", None), ("py", "x = 1\n", None)]
    assert [s.line for s in steps] == [3, 4, 8, 11, 14, 18]


def _scratch(tmp_path: Path) -> Path:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "data").symlink_to(ROOT / "tests" / "data")
    return tmp_path


def _run_shell(step: Step, monkeypatch, capsys, where: str):
    words = shlex.split(step.text)
    env = {}
    while words[0] != "scalarlab":
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    with monkeypatch.context() as m:
        for key, value in env.items():
            m.setenv(key, value)
        args = [a for w in words[1:] for a in (sorted(glob.glob(w)) if "*" in w else [w])]
        capsys.readouterr()
        rc = main(args)
        out, err = capsys.readouterr()
    assert rc == 0, f"{where}: {step.text}: exit {rc}: {err[-2000:]}"
    assert "error" not in err, f"{where}: {step.text}: {err[-2000:]}"
    if step.output is not None:
        checker = doctest.OutputChecker()
        assert checker.check_output(step.output, out, DOCTEST_FLAGS), (
            f"{where}: {step.text}: the printed output differs from the document's:\n"
            f"--- document\n{step.output}--- now\n{out}")


def _run_python(step: Step, path: Path, where: str):
    if step.kind == "py":
        try:
            exec(compile(step.text, where, "exec"), {"__name__": "__snippet__"})
        except Exception:
            pytest.fail(f"{where}: the snippet raised:\n{traceback.format_exc(limit=-3)}")
        return
    test = doctest.DocTestParser().get_doctest(step.text, {"__name__": "__snippet__"},
                                               where, str(path), step.line - 1)
    report = []
    runner = doctest.DocTestRunner(optionflags=DOCTEST_FLAGS)
    runner.run(test, out=report.append, clear_globs=True)
    assert runner.failures == 0, f"{where}:\n" + "".join(report)


def _run_document(path: Path, steps: list[Step], tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(_scratch(tmp_path))
    for step in steps:
        where = f"{path.relative_to(ROOT)}:{step.line}"
        if step.kind == "sh":
            _run_shell(step, monkeypatch, capsys, where)
        else:
            _run_python(step, path, where)


def _documents():
    return [pytest.param(p, id=p.name) for p in DOCUMENTS
            if any(not s.heavy for s in STEPS[p.name])]


@pytest.mark.parametrize("path", _documents())
def test_document_runs_as_pasted(path, tmp_path, monkeypatch, capsys):
    steps = [s for s in STEPS[path.name] if not s.heavy]
    _run_document(path, steps, tmp_path, monkeypatch, capsys)


def _heavy_commands():
    """Each heavy command once (README repeats some of the docs'), with where it is."""
    seen = {}
    for p in DOCUMENTS:
        for s in STEPS[p.name]:
            if s.heavy and s.text not in seen:
                seen[s.text] = (p, s)
    return [pytest.param(p, s, id=f"{p.name}:{s.line}") for p, s in seen.values()]


@pytest.mark.slow
@pytest.mark.parametrize("path, step", _heavy_commands())
def test_document_heavy_commands_run(path, step, tmp_path, monkeypatch, capsys):
    """The heavy commands need only the repository's data, so they run on their own."""
    _run_document(path, [step], tmp_path, monkeypatch, capsys)


def test_quick_start_is_two_commands_and_ci_runs_the_second():
    text = README.read_text()
    block = text.split("## Quick start", 1)[1].split("```", 2)[1].strip().splitlines()
    assert len(block) == 2, block
    assert block[0].startswith("pip install -e . && scalarlab compare"), block
    assert block[1] == "pip install -e '.[test]' && python -m pytest", block
    # .ci/run may add -q and say python3; otherwise it runs the README's test command
    norm = lambda s: re.sub(r"\s+", " ", s.replace("python3", "python").replace(" -q", ""))
    ci = [norm(line).strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert any(line.endswith(norm(block[1])) for line in ci), (block[1], ci)


def test_readme_stays_short_and_every_extra_is_explained():
    import tomllib
    lines = README.read_text().splitlines()
    assert len(lines) <= 400, len(lines)
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    install = README.read_text().split("## Install", 1)[1].split("\n## ", 1)[0]
    for name in extras:
        assert f"| `{name}` |" in install, name
    for path in DOCUMENTS[1:]:
        assert f"(docs/{path.name})" in README.read_text(), path.name

