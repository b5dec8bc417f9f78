"""docs/exchange.md's table of compare's figures on the zoo is what ``bench/figures_zoo.py``
measures: every model re-exported, imported and compared (slow: torch exports, about
30 s of CPU), and each row's lab figures -- normwise ulps, per-entry max ULPs, underflow,
both divergence nodes -- equal to the table's cells.  The float32 libraries' columns
depend on the machine's kernels (MLAS, oneDNN) and are not compared."""
from __future__ import annotations

import os
import sys

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DOC = os.path.join(ROOT, "docs", "exchange.md")
HEAD = "| model | context | normwise ulps of the scale |"


def doc_rows() -> dict:
    """(model, context) -> the cells of the figures table in docs/exchange.md."""
    text = open(DOC, encoding="utf-8").read()
    block = text[text.index(HEAD):].split("\n\n")[0].splitlines()[2:]
    rows = {}
    for line in block:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[(cells[0], cells[1])] = cells[2:]
    return rows


def test_doc_table_parses():
    """Default selection: the table is there, one row per model and context run."""
    rows = doc_rows()
    models = {m for m, _ in rows}
    assert models == {"resnet18", "mobilenet_v3_small", "bert-1", "gpt2-1", "vit-1"}
    assert len(rows) == 18
    nw = rows[("mobilenet_v3_small", "binary16")]
    assert nw[0] == "0.00" and nw[3].startswith("10 of 10")


@pytest.mark.slow
def test_doc_table_equals_a_regeneration(tmp_path):
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    sys.path.insert(0, os.path.join(ROOT, "tests", "importers"))
    import figures_zoo as FZ
    rows = doc_rows()
    seen = 0
    for model in FZ.DEFAULT_MODELS:
        for r in FZ.measure(model, str(tmp_path)):
            if r["what"] not in FZ.CONTEXTS or "error" in r:
                continue
            cells = rows[(model, r["what"])]
            nw = cells[0].split()[0]
            assert nw == ("inf" if r["normwise"] == float("inf") else f"{r['normwise']:.2f}"), \
                (model, r)
            assert cells[1] == FZ._fmt(r["max_ulps"], ".0f"), (model, r)
            assert cells[3].startswith(f"{r['underflow']} of {r['entries']}"), (model, r)
            new, old = (c.strip() for c in cells[4].split("/"))
            assert (new, old) == (FZ._fmt(r["new_div"]), FZ._fmt(r["old_div"])), (model, r)
            if model == "mobilenet_v3_small":     # the text: logits below 2^-25
                assert r["scale"] < 2.0 ** -25, r
            seen += 1
    assert seen == len(rows)
