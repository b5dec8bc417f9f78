"""Wide tables fit the terminal (COLUMNS or the tty's width); without a terminal (a pipe,
a file) they keep their full width, one row per line."""
from __future__ import annotations

from collections import Counter

import pandas as pd
import pytest

from scalarlab.experiments import terminal
from scalarlab.experiments.cli import main


def _widest(text: str) -> int:
    return max(len(ln) for ln in text.splitlines())


def test_width_follows_columns_and_is_full_without_a_terminal(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert terminal.width() is None                 # pytest's stdout is not a terminal
    monkeypatch.setenv("COLUMNS", "90")
    assert terminal.width() == 90
    monkeypatch.setenv("COLUMNS", "12")             # too narrow to be worth fitting
    assert terminal.width() is None


def test_column_blocks_repeat_the_keys_and_keep_every_cell():
    df = pd.DataFrame({"name": ["alpha", "beta"], "context": ["binary32", "bfloat16"],
                       **{f"column_{i}": [i * 1.5, -i] for i in range(12)}})
    render = lambda d: d.to_string(index=False)     # noqa: E731
    full = render(df)
    assert terminal.column_blocks(df, render, keys=["name"], cols=None) == full
    assert terminal.column_blocks(df, render, keys=["name"], cols=_widest(full)) == full
    text = terminal.column_blocks(df, render, keys=["name", "context"], cols=60)
    blocks = text.split("\n\n")
    assert len(blocks) > 1 and _widest(text) <= 60
    seen = []
    for b in blocks:
        head = b.splitlines()[0].split()
        assert head[:2] == ["name", "context"]
        seen += head[2:]
        assert [ln.split()[0] for ln in b.splitlines()[1:]] == ["alpha", "beta"]
    assert seen == [f"column_{i}" for i in range(12)]


@pytest.mark.parametrize("cols", [80, 100, 140])
def test_contexts_fits_the_terminal_and_lists_every_operation(cols, monkeypatch, capsys):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert main(["contexts"]) == 0
    full = capsys.readouterr().out
    assert _widest(full) > 300                      # no terminal: one row per line
    monkeypatch.setenv("COLUMNS", str(cols))
    assert main(["contexts"]) == 0
    out = capsys.readouterr().out
    assert _widest(out) <= cols
    # nothing is lost: the same words (cells wrap at spaces only), the column labels aside
    # (a narrow terminal shows "format: ..." and "correctly rounded: ..." under each row)
    labels = {"format", "format:", "correctly", "rounded", "rounded:"}
    words = lambda text: Counter(w for w in text.split() if w not in labels)  # noqa: E731
    assert words(out) == words(full)
