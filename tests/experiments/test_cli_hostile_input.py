"""Hostile input decided at once (issues 27 and 30): huge literals, absurd counts, files that
are no files or malformed ones, payload strings that are no numbers, odd paths and comma
lists.  Each case ends with one line ``scalarlab CMD: error: ...`` and exit 1 or 2 (never
3), or with the correct result (a float context rounds 1e999999999 to inf)."""
from __future__ import annotations

import io
import json
import os

import numpy as np
import pytest

from scalarlab.experiments.cli import main
from scalarlab.graph import examples, files
from scalarlab import graph


def _run(argv, capsys):
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, [ln for ln in err.splitlines() if ln.strip()]


def _fails(argv, capsys, text, status=(1, 2)):
    rc, out, err = _run(argv, capsys)
    assert rc in ((status,) if isinstance(status, int) else status), (argv, rc, err)
    assert len(err) == 1 and err[0].startswith(f"scalarlab {argv[0]}: error: "), err
    assert "internal error" not in err[0] and "Traceback" not in err[0]
    assert text in err[0], (text, err[0])
    return err[0]


def _payload_graph(tmp_path, value, name="p.json"):
    """six-node with one weight replaced by the text ``value``."""
    g, p, _ = examples.six_node_mlp()
    p = graph.Payload(p)
    e = dict(p.get(1))
    w = np.array(e["W"], dtype=object).copy()
    w[0, 1] = value
    e["W"] = w
    p.set(1, e)
    path = tmp_path / name
    graph.save(path, g, p)
    return str(path)


# ----------------------------------------------------------------------------- literals
def test_huge_input_literals_round_in_float_contexts_and_are_refused_by_exact_ones(capsys):
    rc, out, err = _run(["eval", "six-node", "--input", "1e999999999,-1e-999999999,0,0",
                         "--all", "--json"], capsys)
    assert rc == 0 and not err
    node0 = json.loads(out)["rows"][0]
    assert node0["exact"][:2] == ["inf", "-0.0"], node0
    rc, out, _ = _run(["eval", "six-node", "--input", "1e999999999,0,0,0", "--context",
                       "binary16", "--all", "--json"], capsys)
    assert rc == 0 and json.loads(out)["rows"][0]["exact"][0] == "inf"
    for ctx in ("rational", "mpmath:100", "interval:float64"):
        _fails(["eval", "six-node", "--input", "1e999999999,0,0,0", "--context", ctx], capsys,
               "'1e999999999' is too large to read exactly", 1)


@pytest.mark.parametrize("argv, text", [
    (["sweep", "--box", "0:1e999999999", "--samples", "3", "--quiet"], "too large"),
    (["sweep", "--box", "1e-999999999:1", "--samples", "3", "--quiet"], "too small"),
    (["sweep", "--radii", "1e999999999"], "too large to read exactly"),
    (["compare", "--input", "1e999999999,0,0,0", "--quiet"], "too large to read exactly"),
    (["compare", "--samples", "99999999999999999999999", "--quiet"], "must be <= 1000000000"),
    (["sweep", "--samples", "5,1" + "0" * 4000], "expected an integer <= 1000000000"),
    (["eval", "six-node", "--input", "1" * 5000 + ",0,0,0"], "more than 4000 digits"),
])
def test_huge_literals_and_counts_in_arguments(argv, text, capsys):
    _fails(argv, capsys, text)


def test_huge_payload_strings(tmp_path, capsys):
    big = _payload_graph(tmp_path, "1e999999999")
    rc, out, _ = _run(["eval", big, "--input", "0.1,0.2,0.3,0.4"], capsys)
    assert rc == 0                                   # float64: the weight is inf
    _fails(["eval", big, "--input", "0.1,0.2,0.3,0.4", "--context", "rational"], capsys,
           "too large to read exactly", 1)
    _fails(["check", big], capsys, "non-finite value(s), first at [0, 1]: 1e999999999", 1)


@pytest.mark.parametrize("body, want", [("1e999999999", "inf"),
                                        ("(digits 1 999999999 10)", "inf"),
                                        ("0x1p999999999", "inf"),
                                        ("1e-999999999", "0.5")])
def test_huge_fpcore_literals(tmp_path, body, want, capsys):
    f = tmp_path / "big.fpcore"
    f.write_text(f"(FPCore (x) (+ x {body}))")
    rc, out, err = _run(["eval", str(f), "--input", "0.5", "--json"], capsys)
    assert rc == 0, err
    assert json.loads(out)["rows"][0]["exact"] == want


# -------------------------------------------------------------------------------- files
def _npy_header(shape) -> bytes:
    from numpy.lib import format as F
    b = io.BytesIO()
    F.write_array_header_1_0(b, {"descr": "<f8", "fortran_order": False, "shape": shape})
    return b.getvalue()


def test_files_that_are_no_regular_files(tmp_path, capsys):
    fifo = tmp_path / "g.json"
    os.mkfifo(fifo)                                  # no writer: opening it would block
    link = tmp_path / "zero.fpcore"
    link.symlink_to("/dev/zero")
    (tmp_path / "d.json").mkdir()
    _fails(["eval", str(fifo)], capsys, "a FIFO (named pipe); only regular files are read", 1)
    _fails(["eval", "/dev/zero"], capsys, "a device; only regular files are read", 1)
    _fails(["eval", str(link)], capsys, "a device; only regular files are read", 1)
    _fails(["eval", str(tmp_path / "d.json")], capsys, "a directory, not a file", 1)
    _fails(["fpbench", str(link)], capsys, "a device", 2)
    _fails(["sweep", "--box", str(fifo), "--samples", "3", "--quiet"], capsys, "FIFO", 1)
    npy = tmp_path / "z.npy"
    npy.symlink_to("/dev/zero")
    _fails(["compare", "--input-file", str(npy), "--quiet"], capsys, "a device", (1, 2))


def test_size_cap_is_checked_before_reading(tmp_path, capsys, monkeypatch):
    g = tmp_path / "g.json"
    examples_g, p, _ = examples.six_node_mlp()
    graph.save(g, examples_g, p)
    monkeypatch.setenv(files.ENV, "0.0001")          # about 100 bytes
    _fails(["eval", str(g)], capsys, "over the input size cap of 0.0 MiB (set "
           "SCALARLAB_MAX_INPUT_MB to read larger files)", 1)
    monkeypatch.setenv(files.ENV, "lots")
    _fails(["eval", str(g)], capsys, "SCALARLAB_MAX_INPUT_MB='lots': expected a positive", 1)
    monkeypatch.setenv(files.ENV, "10")
    rc, _, _ = _run(["check", str(g)], capsys)
    assert rc == 0


def test_malformed_arrays(tmp_path, capsys):
    np.save(tmp_path / "empty.npy", np.zeros((0, 4)))
    np.save(tmp_path / "obj.npy", np.array([1, 2, 3, 4], dtype=object), allow_pickle=True)
    (tmp_path / "dims.npy").write_bytes(_npy_header((1,) * 65) + b"\0" * 8)
    (tmp_path / "huge.npy").write_bytes(_npy_header((10 ** 9, 10 ** 9)) + b"\0" * 8)
    np.savez(tmp_path / "ok.npz", **{"0": np.zeros(4)})
    whole = (tmp_path / "ok.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "junk.npz").write_bytes(b"PK\x03\x04" + b"\x00" * 40)
    for flag in ("--input-file", "--input"):
        _fails(["compare", flag, str(tmp_path / "empty.npy"), "--quiet"], capsys,
               "the array is empty", (1, 2))
        _fails(["compare", flag, str(tmp_path / "obj.npy"), "--quiet"], capsys,
               "Object arrays cannot be loaded", (1, 2))
        _fails(["compare", flag, str(tmp_path / "dims.npy"), "--quiet"], capsys,
               "maximum supported dimension", (1, 2))
        _fails(["compare", flag, str(tmp_path / "huge.npy"), "--quiet"], capsys, "", (1, 2))
    _fails(["eval", "six-node", "--input-file", str(tmp_path / "empty.npy")], capsys,
           "the array is empty", 1)
    _fails(["eval", "six-node", "--input-file", str(tmp_path / "obj.npy")], capsys,
           "Object arrays", 1)
    for name in ("cut.npz", "junk.npz"):
        _fails(["eval", "six-node", "--input-file", str(tmp_path / name)], capsys,
               "cannot read", 1)
        _fails(["eval", "six-node", "--payload", str(tmp_path / name)], capsys,
               "cannot read", 1)


def test_onnx_tensors_declaring_impossible_shapes(tmp_path, capsys):
    from onnx import TensorProto, helper

    def model(dims, raw, name):
        t = TensorProto(name="W", data_type=TensorProto.DOUBLE, dims=dims, raw_data=raw)
        x = helper.make_tensor_value_info("x", TensorProto.DOUBLE, [1, abs(dims[0])])
        y = helper.make_tensor_value_info("y", TensorProto.DOUBLE, [1, dims[1]])
        g = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], "g", [x],
                              [y], [t])
        path = tmp_path / name
        path.write_bytes(helper.make_model(
            g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
        return str(path)
    cases = [(model([10 ** 9, 10 ** 9], b"", "huge.onnx"), "declares shape [1000000000"),
             (model([3, 2], b"\0" * 8, "short.onnx"), "does not fill the declared shape"),
             (model([-3, 2], b"\0" * 8, "neg.onnx"), "negative dimension")]
    for path, text in cases:
        _fails(["eval", path], capsys, f"ONNX initializer 'W': ", 1)
        _fails(["import", path, "-o", str(tmp_path / "m.json")], capsys, text, 1)


# ------------------------------------------------------------------------------- check
@pytest.mark.parametrize("value, text", [
    ("banana", "'banana' at [0, 1] is not a number"),
    ("1/0", "'1/0' at [0, 1] is not a number ('1/0': division by zero)"),
    ("0x1p999999999", "'0x1p999999999' at [0, 1] is not a number"),
])
def test_check_validates_payload_strings(tmp_path, value, text, capsys):
    path = _payload_graph(tmp_path, value)
    line = _fails(["check", path], capsys, text, 1)
    assert "payload entry 1 field 'W'" in line
    _fails(["check", path, "--allow-nonfinite"], capsys, text, 1)


# ----------------------------------------------------------------------- paths, lists
def test_an_existing_path_is_a_file_whatever_its_name(tmp_path, capsys):
    f = tmp_path / "prog (1).fpcore"
    f.write_text("(FPCore (x) :pre (<= 0 x 1) (+ x 1))")
    rc, out, err = _run(["eval", str(f), "--input", "0.5", "--json"], capsys)
    assert rc == 0 and json.loads(out)["rows"][0]["exact"] == "1.5", err
    rc, out, err = _run(["fpbench", str(f), "--samples", "3", "--quiet"], capsys)
    assert rc == 0, err


def test_comma_lists_split_only_at_top_level(capsys):
    from scalarlab.experiments import argtypes as T
    assert T.split_top("binary(5,10),e4m3") == ["binary(5,10)", "e4m3"]
    assert T.split_top("a,(b,c),[d,e]),f") == ["a", "(b,c)", "[d,e])", "f"]
    rc, out, err = _run(["compare", "--contexts", "binary(5,10),e4m3", "--quiet", "--json"],
                        capsys)
    assert rc == 0, err
    assert {r["context"] for r in json.loads(out)["rows"]} == {"binary(5,10)", "e4m3"}
    rc, out, err = _run(["reduction-order", "--formats", "binary(5,10)", "--samples", "3",
                         "--quiet"], capsys)
    assert rc == 0, err
    _fails(["compare", "--contexts", "binary(5,10),binary(5,10)"], capsys,
           "binary(5,10) given more than once", 2)
