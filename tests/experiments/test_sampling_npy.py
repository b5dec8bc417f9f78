"""The one ``.npy`` reader (``--input-file``, ``--box file.npy``): exact float64 values or
a clear error naming the flag, the file and what is wrong."""
from fractions import Fraction

import numpy as np
import pytest

from scalarlab.experiments import cases as CS
from scalarlab.experiments import sampling as S
from scalarlab.experiments.npy_input import read_npy
from scalarlab.graph.importers.fpcore import read_fpcore


def _case(args="x y"):
    p, = read_fpcore(f"(FPCore ({args}) (+ {args}))")
    return CS.GraphCase("t", p.graph, p.payload)


def _save(tmp_path, arr, name="a.npy"):
    f = tmp_path / name
    np.save(f, arr)
    return str(f)


def test_float_and_integer_arrays_are_read_exactly(tmp_path):
    for arr in (np.array([[0.1, -2.5], [3.0, 1e-310]]),
                np.array([[0.1, -2.5]], dtype=np.float32),
                np.array([[1, -2], [2 ** 53, 7]], dtype=np.int64),
                np.array([[1, 2]], dtype=np.uint8)):
        got = read_npy(_save(tmp_path, arr), "--input-file")
        assert got.dtype == np.float64 and got.shape == arr.shape
        assert [Fraction(float(v)) for v in got.ravel()] == \
            [Fraction(int(v)) if arr.dtype.kind in "iu" else Fraction(float(v))
             for v in arr.ravel()]
    batch, what = S.load_input_file(_save(tmp_path, np.array([[1.0, 2.0], [3.0, 4.0]])),
                                    _case())
    assert list(batch[0]) == [1.0, 3.0] and list(batch[1]) == [2.0, 4.0]
    assert what.startswith("2 samples from ")


@pytest.mark.parametrize("arr, message", [
    (np.array([[True, False]]), "dtype bool holds truth values, not real numbers"),
    (np.array([[1 + 2j, 0]]), "dtype complex128 is not a real number type"),
    (np.array([["1", "2"]]), "dtype <U1 is not a real number type"),
    (np.array(1.5), r"a single number \(0-d array\)"),
    (np.zeros((0, 2)), r"the array is empty \(shape \[0, 2\]\)"),
    (np.array([[1.0, np.nan]]), r"entry \[0, 1\] is nan; NaN and infinities are not a sample"),
    (np.array([[1.0, 2.0], [-np.inf, 0]]), r"entry \[1, 0\] is -inf"),
    (np.array([[2 ** 53 + 1, 0]], dtype=np.int64),
     r"integer entry 9007199254740993 at \[0, 0\] is not a float64 value"),
])
def test_refused_arrays_say_why(tmp_path, arr, message):
    f = _save(tmp_path, arr)
    with pytest.raises(S.ExperimentError, match=f"--input-file {f}: {message}"):
        read_npy(f, "--input-file")
    with pytest.raises(S.ExperimentError, match=message):
        S.load_input_file(f, _case())


def test_unreadable_files(tmp_path):
    with pytest.raises(S.ExperimentError, match="no such file"):
        read_npy(str(tmp_path / "none.npy"), "--input-file")
    with pytest.raises(S.ExperimentError, match="expected a .npy file"):
        read_npy(str(tmp_path / "x.csv"), "--input-file")
    bad = tmp_path / "bad.npy"
    bad.write_bytes(b"not numpy")
    with pytest.raises(S.ExperimentError, match="not a readable .npy array"):
        read_npy(str(bad), "--input-file")
    obj = tmp_path / "obj.npy"
    np.save(obj, np.array([[Fraction(1, 3)]], dtype=object), allow_pickle=True)
    with pytest.raises(S.ExperimentError, match="not a readable .npy array"):
        read_npy(str(obj), "--input-file")
    with pytest.raises(S.ExperimentError, match=r"array shape \[2, 3\]; expected \[N, 2\]"):
        S.load_input_file(_save(tmp_path, np.ones((2, 3))), _case())


def test_box_files_read_exact_bounds_and_open_ends(tmp_path):
    f = _save(tmp_path, np.array([[0.1, 2.0], [-np.inf, 0.5]]))
    r = S.parse_box(f, 2)
    assert (r[0].lo, r[0].hi) == (Fraction(0.1), Fraction(2))     # the float64 value 0.1
    assert r[1].lo is None and r[1].hi == Fraction(1, 2)
    with pytest.raises(S.ExperimentError, match=r"array shape \[2, 3\]; expected \[k, 2\]"):
        S.parse_box(_save(tmp_path, np.ones((2, 3)), "b.npy"), 2)
    with pytest.raises(S.ExperimentError, match="NaN is not a sample"):
        S.parse_box(_save(tmp_path, np.array([[np.nan, 1.0]]), "c.npy"), 1)
    with pytest.raises(S.ExperimentError, match="dtype bool"):
        S.parse_box(_save(tmp_path, np.array([[False, True]]), "d.npy"), 1)


def test_sampling_gives_up_early_when_nothing_is_accepted_and_says_so():
    p, = read_fpcore("(FPCore (x) :pre (and (<= -1 x 1) (> (* x x) 4)) x)")
    b, r = p.boxes()
    smp = S.sample(S.regions_from_bounds(b, p.arguments), p.arguments, r, "binary64", 50,
                   np.random.default_rng(0))
    # max_draw is 200 n = 10000, but 4096 draws without one accepted end it
    assert len(smp.x) == 0 and smp.short and smp.asked == 50
    assert smp.drawn == smp.rejected and 4096 <= smp.drawn < 4096 + 100
