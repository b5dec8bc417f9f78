"""``scalarlab tape-demo``: the seed's figures, exact in rational."""
import argparse
import json

import pytest

from scalarlab.experiments.commands import tape_demo
from scalarlab.scalars.errors import ScalarLabError


def main(argv):
    """Run the subcommand the way ``scalarlab`` does, without importing every command."""
    assert argv[0] == tape_demo.NAME
    parser = argparse.ArgumentParser(prog="scalarlab tape-demo")
    tape_demo.add_arguments(parser)
    return tape_demo.run(parser.parse_args(argv[1:]))


def test_text_output_float64(capsys):
    assert main(["tape-demo"]) == 0
    out = capsys.readouterr().out
    assert ('recorded nodes: [("x", []), ("mul", [0, 0]), ("mul", [0, 0]), ("add", [1, 2]), '
            '("sum", [3])]') in out
    assert "(output id, tape length) = (4, 5)" in out
    assert "forward = 22.500000" in out
    assert "gradient of node 0 = [12.000000, -6.000000]" in out
    assert "gradient of node 0 = [6.000000, -3.000000]" in out
    assert "reached = [0, 1, 4, 5]" in out
    assert "both branches live = [12.000000, -6.000000]" in out
    assert "second detached    = [6.000000, -3.000000]" in out


def test_json_rational_is_exact(capsys):
    assert main(["tape-demo", "--context", "rational", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)["tables"]
    assert rep["context"] == "rational"
    assert (rep["output_id"], rep["tape_length"]) == (4, 5)
    assert rep["forward"] == "45/2"
    assert rep["gradient"] == "[12, -6]"
    d = rep["detached"]
    assert d["nodes"] == [["x", []], ["mul", [0, 0]], ["mul", [0, 0]], ["detach", [2]],
                          ["add", [1, 3]], ["sum", [4]]]
    assert d["gradient"] == "[6, -3]"
    assert d["reached"] == [0, 1, 4, 5]
    assert rep["transform"] == {"live": "[12, -6]", "detached": "[6, -3]"}


def test_unknown_context_is_a_clean_error():
    with pytest.raises(ScalarLabError, match="unknown context 'nope'"):
        main(["tape-demo", "--context", "nope"])
