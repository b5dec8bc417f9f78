"""``scalarlab eval --device / --show-backend``: the plan runs, lines in the seed's format."""
import json

from scalarlab.experiments.cli import main


def test_show_backend_lines_and_value(capsys):
    assert main(["eval", "six-node", "--context", "binary32", "--show-backend"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "relu: reference.relu provider=reference trust=checked vjp=tape reduction=n/a" in out
    assert "sum: reference.reduce_sum provider=reference trust=checked vjp=tape reduction=sequential" in out
    assert sum(1 for line in out if line.startswith("linear:")) == 1  # first selection only
    assert out[-1] == "node 5 tanh out=[]: 0.027713"


def test_device_cuda_in_simulator_matches_reference(capsys):
    # tests/conftest.py enables the CUDA simulator
    assert main(["eval", "six-node", "--device", "cuda", "--all", "--json"]) == 0
    cuda = json.loads(capsys.readouterr().out)
    assert main(["eval", "six-node", "--context", "binary32", "--all", "--json"]) == 0
    ref = json.loads(capsys.readouterr().out)
    assert cuda["meta"]["context"] == "binary32"
    # linear and relu orders match the reference: bit-identical values
    for nid in (0, 1, 2, 3):
        assert cuda["rows"][nid]["exact"] == ref["rows"][nid]["exact"]


def test_device_cuda_refuses_float64(capsys):
    assert main(["eval", "six-node", "--device", "cuda", "--context", "float64"]) == 1
    assert "float64" in capsys.readouterr().err
