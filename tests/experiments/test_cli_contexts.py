"""``scalarlab contexts``: the table and the JSON agree with the registry."""
import json

from scalarlab import scalars
from scalarlab.experiments.cli import main

REQUIRED = {"float64", "rational", "fp32-real", "mpmath:200", "mpmath:53", "complex128"}


def test_json_lists_every_registered_context(capsys):
    assert main(["contexts", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["format"] == "scalarlab-contexts" and "versions" in data["meta"]
    rows = {r["name"]: r for r in data["rows"]}
    assert set(scalars.names()) <= set(rows) and REQUIRED <= set(rows)
    assert "mpmath:PREC" in data["families"]
    assert rows["rational"]["exact"] is True and rows["rational"]["reduction"] == "sequential"
    assert rows["float64"]["reduction"] == "native" and rows["float64"]["exact"] is False
    assert "sigmoid" in rows["fp32-real"]["correctly_rounded"]
    assert "tanh" not in rows["mpmath:200"]["correctly_rounded"]
    assert rows["complex128"]["correctly_rounded"] == ["add", "neg", "sub"]
    for name, row in rows.items():  # every row is the context's own properties()
        assert row["kind"] == scalars.get(name).properties()["kind"]
        assert row["interval"] == scalars.get(name).is_interval


def test_table_has_a_row_per_context(capsys):
    assert main(["contexts"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[:5] == ["name", "kind", "exact", "interval", "dual"]
    for name in scalars.names():
        assert any(line.split()[0] == name for line in lines[1:] if line.strip()), name
    row = next(line for line in lines if line.startswith("rational "))
    assert row.split()[1:3] == ["exact", "yes"]


def test_name_filter_and_unknown_name(capsys):
    assert main(["contexts", "--json", "--name", "mpmath:123"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["name"] for r in rows] == ["mpmath:123"] and "123-bit" in rows[0]["format"]
    assert main(["contexts", "--name", "nope"]) == 1
    err = capsys.readouterr().err
    assert "unknown context 'nope'" in err and "rational" in err
