"""``:alt`` forms: each is a translated program of its own with the benchmark's
arguments and precondition (what ``fpbench --alts`` measures side by side)."""
from fractions import Fraction
from pathlib import Path

import numpy as np

from scalarlab import graph
from scalarlab.graph.importers.fpcore import read_fpcore

DATA = Path(__file__).resolve().parents[1] / "data" / "fpbench"


def test_every_alt_is_a_program_with_the_same_arguments():
    p, = read_fpcore("""(FPCore (x y) :name "diff of squares" :pre (<= 0 y x 10)
        :alt (* (+ x y) (- x y))
        :alt (! :herbie-platform c (fma x x (- (* y y))))
        :alt (while (< i 3) ([i 0 (+ i 1)]) i)
        (- (* x x) (* y y)))""")
    assert p.skip is None and len(p.alts) == 3
    a1, a2, a3 = p.alts
    assert [a.name for a in p.alts] == [f"diff of squares (alt {k})" for k in (1, 2, 3)]
    for a in p.alts:
        assert a.arguments == p.arguments and a.pre is p.pre and a.index == p.index
        assert a.alts == [] and a.properties.get("alt") is None
    assert [n.op for n in a1.graph.nodes] == ["input", "input", "add", "sub", "mul"]
    assert a2.graph.nodes[a2.graph.output].op == "fma" and a2.annotations
    assert a3.graph is None and "loops are not supported" in a3.skip
    # the same exact value as the original (rational context)
    x = [np.array(["7/2", "1/3"], dtype=object), np.array(["5/4", "1/7"], dtype=object)]
    want = graph.denote(p.graph, p.payload, x, "rational")
    for a in (a1, a2):
        assert list(graph.denote(a.graph, a.payload, x, "rational")) == list(want)
    # the same sampling boxes
    (b, r), (b1, r1) = p.boxes(), a1.boxes()
    assert {k: (v.lo, v.hi) for k, v in b.items()} == {k: (v.lo, v.hi) for k, v in b1.items()}
    assert [c.text for c in r] == [c.text for c in r1] == ["(<= y x)"]
    assert b["y"].lo == 0 and b["x"].hi == Fraction(10)


def test_alts_may_call_named_fpcores():
    p, _ = read_fpcore("""(FPCore (x) :alt (sq2 x) (* (* x x) 2))
                          (FPCore sq2 (t) (* 2 (* t t)))""")
    a, = p.alts
    y = graph.denote(a.graph, a.payload, np.array([3.0]), "float64")
    assert float(np.asarray(y)[0]) == 18.0


def test_no_alt_no_alts_and_vendored_files_read():
    p, = read_fpcore("(FPCore (x) (+ x 1))")
    assert p.alts == []
    progs = [q for f in sorted(DATA.glob("*.fpcore")) for q in read_fpcore(f)]
    with_alts = [q for q in progs if q.alts]
    # graphics.fpcore's TNG eigenvalue benchmark has two :alt forms (the only ones)
    assert [(q.name, len(q.alts)) for q in with_alts] == \
        [("An eigenvalue calculation from TNG", 2)]
    assert all(a.graph is not None for a in with_alts[0].alts)
