"""Integer inputs (token ids, positions, masks) in the lab's jobs: the input node declares
its element type (``dtype``), and compare, gaps, sweep and IBP boxes hold such an input
exactly -- at the given value or drawn from a sample file, never rounded to a format,
never widened by a radius or perturbed by a sampler -- and refuse a non-integer for it
with a one-line error."""
from __future__ import annotations

import argparse
import json
from fractions import Fraction

import numpy as np
import pytest

from scalarlab import graph as G
from scalarlab import scalars
from scalarlab.experiments import cases as CS
from scalarlab.experiments import gaps as GP
from scalarlab.experiments import sampling as SM
from scalarlab.experiments.cli import main as cli_main
from scalarlab.experiments.command_args import batch_from_args
from scalarlab.experiments.errors import ExperimentError
from scalarlab.graph import Graph, Node, OpKind
from scalarlab.graph.payload import Payload
from scalarlab.ibp import Box
from scalarlab.ibp.box import held_entries
from scalarlab.ibp.sweep import sweep

TABLE = np.array([[0.5, -1.25, 2.0], [0.125, 0.75, -0.5], [1.5, 0.25, -2.5],
                  [-0.75, 1.0, 0.375], [0.0625, -0.875, 1.125]])


def _embed_graph(with_real=False):
    """ids [4] (int64) -> rows of a 5 x 3 table -> tanh -> sum; with ``with_real`` a real
    input x [3] is added to every row first (a mixed graph)."""
    nodes = [Node(0, [], OpKind("input", dtype="int64"), [4]),
             Node(1, [], "const", [5, 3]),
             Node(2, [1, 0], OpKind("take", axis=0), [4, 3])]
    if with_real:
        nodes += [Node(3, [], "input", [3]), Node(4, [2, 3], "add", [4, 3])]
    nodes += [Node(len(nodes), [len(nodes) - 1], "tanh", [4, 3])]
    nodes += [Node(len(nodes), [len(nodes) - 1], "sum", [])]
    p = Payload()
    p.set(1, {"value": TABLE}, op="const")
    return Graph(nodes), p


def _oracle(ids, x=None):
    """The exact-in-mpmath value of the embed graph at one sample."""
    import mpmath
    mp = mpmath.MPContext()
    mp.prec = 120
    rows = TABLE[np.asarray(ids, dtype=np.int64)]
    if x is not None:
        rows = [[mp.mpf(a) + mp.mpf(b) for a, b in zip(r, x)] for r in rows]
    return float(mp.fsum(mp.tanh(mp.mpf(v)) for r in rows for v in r))


@pytest.fixture
def embed_file(tmp_path):
    g, p = _embed_graph()
    path = tmp_path / "embed.json"
    G.save(str(path), g, p)
    return path


def test_input_node_declares_its_element_type_and_survives_the_file(embed_file):
    g, _ = G.load(str(embed_file))
    assert g.nodes[0].kind == OpKind("input", dtype="int64")
    assert json.loads(embed_file.read_text())["nodes"][0]["kind"] == {"op": "input",
                                                                       "dtype": "int64"}
    case = CS.load_case(str(embed_file))
    assert CS.integer_inputs(case) == {0: "int64"}
    bad = Graph([Node(0, [], OpKind("input", dtype="float16x"), [2])])
    with pytest.raises(G.GraphError, match="dtype must be 'float' or one of bool"):
        G.validate.check_shapes(bad)


def test_box_samples_hold_integer_inputs_and_perturb_real_ones():
    g, p = _embed_graph(with_real=True)
    case = CS.GraphCase("mixed", g, p)
    center = {0: np.array([[1, 4, 0, 2]], dtype=np.float64),
              3: np.array([[0.25, -0.5, 0.125]])}
    x = CS.box_samples(center, 0.5, 64, seed=3, case=case)
    assert x[0].shape == (64, 4) and (x[0] == center[0]).all()
    assert x[3].shape == (64, 3) and np.abs(x[3] - center[3]).max() <= 0.5
    assert len(np.unique(x[3][:, 0])) == 64                    # the real input does vary
    # without the case (or for a real input) the same draw widens everything
    y = CS.box_samples(center, 0.5, 64, seed=3)
    assert not (y[0] == center[0]).all()


def test_compare_cli_samples_keep_ids_and_agree_with_mpmath(embed_file, tmp_path, capsys):
    out = tmp_path / "cmp.json"
    code = cli_main(["compare", str(embed_file), "--input", "1,4,0,2", "--samples", "16",
                     "--radius", "0.5", "--contexts", "float64,binary32", "--quiet",
                     "--out", str(out)])
    assert code == 0
    doc = json.loads(out.read_text())
    rows = {(r["context"], r["node"]): r for r in doc["rows"]}
    # the 16 samples are the centre: the output row is one value's error, float64 exact
    # to 1 ulp of the sum of 12 tanh
    assert rows[("float64", 0)]["max_abs_err"] == 0.0
    assert rows[("binary32", 0)]["max_abs_err"] == 0.0           # ids are never rounded
    assert rows[("float64", 4)]["max_ulps"] <= 2
    args = argparse.Namespace(input="1,4,0,2", samples=16, radius=0.5, seed=0,
                              input_file=None, box=None)
    x, _ = batch_from_args(CS.load_case(str(embed_file)), args)
    assert (CS.as_float64(x) == [[1, 4, 0, 2]]).all()
    got = G.denote(*G.load(str(embed_file)), CS.as_float64(x)[:1], "float64")
    assert abs(float(got[0]) - _oracle([1, 4, 0, 2])) <= 4 * 2.0 ** -52 * 3


def test_gaps_holds_ids_unrounded_and_draws_real_inputs_in_the_format():
    g, p = _embed_graph(with_real=True)
    case = CS.GraphCase("mixed", g, p)
    center = {0: np.array([[3, 1, 1, 4]], dtype=np.float64),
              3: np.array([[0.3, -0.2, 0.1]])}
    fmt = scalars.get("binary16").fmt
    for sampling in ("box", "bitpattern"):
        x = GP.sample_inputs(center, 0.05, 40, 7, fmt, sampling, case)
        assert (x[0] == center[0]).all(), sampling
        from scalarlab.scalars import formats
        assert (formats.round_to_format(x[3], fmt, "nearest_even") == x[3]).all()
        assert np.abs(x[3] - center[3]).max() <= 0.05
    res = GP.gaps(case, scalars.get("binary32"), samples=30, radius=0.05, seed=1,
                  center=center, reference="mpmath:120")
    assert res.ulps.max() <= 4
    # a given batch (--input-file / --box) is rounded into the format except the ids
    batch = {0: np.array([[2049.0, 1, 0, 2]]), 3: np.array([[1 / 3, 0.1, 0.7]])}
    held = CS.map_real_inputs(case, batch, lambda a: a * 0)
    assert held[0][0, 0] == 2049.0 and (held[3] == 0).all()


def test_non_integer_values_for_integer_inputs_are_refused(embed_file, tmp_path, capsys):
    case = CS.load_case(str(embed_file))
    with pytest.raises(ExperimentError, match=r"--input: input node 0 holds int64 .* entry "
                                              r"\[0, 2\] is 0.5; give an integer"):
        CS.center_of(case, "1,4,0.5,2")
    f = tmp_path / "ids.npy"
    np.save(f, np.array([[1, 2, 3, 4], [0, 1.5, 2, 3]]))
    with pytest.raises(ExperimentError, match=r"row 1 column 1 is 1.5.*input node 0, which "
                                              r"holds int64"):
        SM.load_input_file(str(f), case)
    with pytest.raises(ExperimentError, match=r"--box entry 0: input node 0 holds int64 .* "
                                              r"give one integer as n:n"):
        SM.box_batch(case, SM.parse_box("0:3", 4), 5, 0)
    # CLI: one line, exit 1
    code = cli_main(["compare", str(embed_file), "--input", "1,4,0.5,2", "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and "holds int64" in err[0]
    code = cli_main(["gaps", str(embed_file), "--input-file", str(f), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and "row 1 column 1 is 1.5" in err[0]
    # bool inputs: 0/1 only
    gb = Graph([Node(0, [], OpKind("input", dtype="bool"), [2]), Node(1, [0], "neg", [2])])
    with pytest.raises(ExperimentError, match="give 0 or 1"):
        CS.center_of(CS.GraphCase("mask", gb, Payload()), "1,2")


def test_box_and_file_samples_keep_ids(embed_file, tmp_path):
    case = CS.load_case(str(embed_file))
    x = SM.box_batch(case, SM.parse_box("3:3,1:1,4:4,0:0", 4), 6, 0, fmt="binary16",
                     sampling="bitpattern")
    assert (x == [[3, 1, 4, 0]]).all()
    f = tmp_path / "ids.npy"
    np.save(f, np.array([[1, 2, 3, 4], [0, 4, 2, 3]], dtype=np.int64))
    x, _ = SM.load_input_file(str(f), case)
    assert x.tolist() == [[1, 2, 3, 4], [0, 4, 2, 3]]


def test_ibp_box_holds_integer_entries_exactly():
    c = np.array([3.0, 0.1, 7.0])
    b = Box.from_center_radius(c, 0.25, held=np.array([True, False, True]))
    lo, hi = b.exact_ends()
    assert lo[0] == hi[0] == 3 and lo[2] == hi[2] == 7
    assert lo[1] == Fraction(0.1) - Fraction(1, 4) and hi[1] == Fraction(0.1) + Fraction(1, 4)
    assert b.lo[1] <= 0.1 - 0.25 and b.hi[1] >= 0.1 + 0.25
    bd = Box.from_center_radius(c, "0.05", held=np.array([True, False, True]))
    lo, hi = bd.exact_ends()
    assert lo[0] == hi[0] == 3 and hi[1] - lo[1] == Fraction(1, 10)
    bx = Box.from_center_radius(np.array(["3", "0.1"], dtype=object), "0.5",
                                held=np.array([True, False]))
    assert bx.lo[0] == bx.hi[0] == 3 and bx.hi[1] - bx.lo[1] == 1
    iv = b.to_interval(scalars.get("interval:binary32"))
    assert iv.lo[0] == iv.hi[0] == 3.0


def test_sweep_never_widens_ids_and_boxes_contain_point_runs():
    g, p = _embed_graph()
    assert held_entries(g).tolist() == [True] * 4
    center = np.array([1.0, 4.0, 0.0, 2.0])
    df = sweep(g, p, center, ["0.5", "3"], ["float64", "binary32"], [20], seed=1,
               methods=["ibp", "crown"])
    assert (df["violations"] == 0).all() and (df["failures"] == 0).all()
    want = _oracle([1, 4, 0, 2])
    for _, r in df.iterrows():
        # the box is the point value's enclosure: no radius reached the ids
        assert r["box_lo"] <= want <= r["box_hi"]
        assert r["box_width"] <= (1e-5 if r["context"] == "binary32" else 1e-13)
        assert r["sampled_width"] == 0.0


def test_sweep_cli_packs_a_mixed_graph_and_zeroes_the_ids_radius(tmp_path, capsys):
    g, p = _embed_graph(with_real=True)
    path = tmp_path / "mixed.json"
    G.save(str(path), g, p)
    case = CS.load_case(str(path))
    radii = SM.held_radii(case, ["0.05"])
    assert radii[0].tolist() == [0, 0, 0, 0, "0.05", "0.05", "0.05"]
    out = tmp_path / "sw.json"
    code = cli_main(["sweep", str(path), "--input", "1,4,0,2,0.3,-0.2,0.1", "--radii", "0.05",
                     "--samples", "30", "--contexts", "float64", "--method", "ibp,crown",
                     "--out", str(out), "--quiet"])
    assert code == 0
    doc = json.loads(out.read_text())
    assert all(r["violations"] == 0 and r["radius"] == 0.05 for r in doc["rows"])
    lo = min(r["sampled_lo"] for r in doc["rows"])
    hi = max(r["sampled_hi"] for r in doc["rows"])
    # the sampled outputs move with x alone: within 12 * 0.05 of the centre value
    centre = _oracle([1, 4, 0, 2], [0.3, -0.2, 0.1])
    assert centre - 0.6 <= lo <= centre <= hi <= centre + 0.6
    code = cli_main(["sweep", str(path), "--input", "1,4,0.5,2,0.3,-0.2,0.1", "--quiet"])
    assert code == 1 and "holds int64" in capsys.readouterr().err


def test_packed_inputs_keep_a_common_integer_type():
    ids = Node(0, [], OpKind("input", dtype="int64"), [2])
    mask = Node(1, [], OpKind("input", dtype="bool"), [2])
    g = Graph([ids, mask, Node(2, [0, 1], "mul", [2])])
    gp, _ = SM.pack_inputs(g, Payload())
    assert gp.nodes[0].kind == OpKind("input", dtype="int64")
    g2 = Graph([ids, Node(1, [], OpKind("input", dtype="int64"), [2]),
                Node(2, [0, 1], "add", [2])])
    assert SM.pack_inputs(g2, Payload())[0].nodes[0].kind.attrs == {"dtype": "int64"}
    g3, _ = SM.pack_inputs(_embed_graph(with_real=True)[0], Payload())
    assert g3.nodes[0].kind.attrs == {}


def test_a_bool_input_reads_a_bool_file_and_only_it(tmp_path):
    g = Graph([Node(0, [], OpKind("input", dtype="bool"), [3]), Node(1, [], "input", [3]),
               Node(2, [0, 1], "mul", [3])])
    case = CS.GraphCase("masked", g, Payload())
    f = tmp_path / "m.npy"
    np.save(f, np.array([[True, False, True, 0.5, 0.25, 2.0]], dtype=object).astype(float))
    x, _ = SM.load_input_file(str(f), case)
    assert x[0].tolist() == [[1, 0, 1]] and x[1].tolist() == [[0.5, 0.25, 2.0]]
    np.save(f, np.array([[True, False, True, True, False, True]]))
    x, _ = SM.load_input_file(str(f), case)
    assert x[0].tolist() == [[1, 0, 1]] and x[1].tolist() == [[1, 0, 1]]
    np.save(f, np.array([[2, 0, 1, 0.5, 0.25, 2.0]]))
    with pytest.raises(ExperimentError, match="row 0 column 0 is 2.0.*must hold 0 or 1"):
        SM.load_input_file(str(f), case)
    # a graph without bool inputs still refuses bool files
    b = tmp_path / "b.npy"
    np.save(b, np.ones((2, 4), dtype=bool))
    with pytest.raises(ExperimentError, match="dtype bool holds truth values"):
        SM.load_input_file(str(b), CS.GraphCase("embed", *_embed_graph()))
