"""The scalar functions' interval rule (graph/interval_rules.function_rule): the box of
``f`` over an argument box holds the exact values (mpmath at 200 bits) and what the lab's
point context of the base computes there: float64's libm within the declared
``f64_ulps``, mpmath within 4 ulps.  Binary formats round their functions correctly, so
their box is the generic one, unwidened."""
from __future__ import annotations

import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.graph import Graph, Node, denote_all
from scalarlab.graph.interval_rules import real_rule
from scalarlab.graph.optable import OPS
from scalarlab.scalars.functions import FUNCTIONS
from scalarlab.scalars.functions_binary import BINARY_FUNCTIONS

UNARY = sorted(n for n in OPS if n in FUNCTIONS)
BINARY = sorted(n for n in OPS if n in BINARY_FUNCTIONS)
# argument ranges inside every domain (acosh needs >= 1, atanh/asin/acos |x| <= 1)
RANGE = {"acosh": (1.2, 4.0), "log": (1e-3, 50.0), "log2": (1e-3, 50.0),
         "log10": (1e-3, 50.0), "exp": (-30.0, 30.0), "tgamma": (0.3, 6.0),
         "lgamma": (0.3, 6.0), "two-argument": (0.5, 3.0)}


def _boxes(name, n, rng):
    lo, hi = RANGE.get(name, (-0.95, 0.95))
    a = rng.uniform(lo, hi, n)
    w = rng.choice([0.0, 1e-12, 1e-6, 1e-2], n) * np.maximum(np.abs(a), 1e-3)
    return a, np.minimum(a + w, hi)


def _points(a, b, rng, k=8):
    t = rng.uniform(0, 1, (k, a.size))
    return np.vstack([a, b, a + t * (b - a)])


@pytest.mark.parametrize("base", ["float64", "mpmath:60"])
@pytest.mark.parametrize("name", UNARY)
def test_unary_function_box_holds_point_runs_and_exact_values(name, base):
    rng = np.random.default_rng(len(name) * 7 + len(base))
    ictx, pctx = scalars.get(f"interval:{base}"), scalars.get(base)
    g = Graph([Node(0, [], "input", [12]), Node(1, [0], name, [12])])
    a, b = _boxes(name, 12, rng)
    box = denote_all(g, {}, ictx.make(a, b), ictx)[1]
    pts = _points(a, b, rng)
    run = np.asarray(denote_all(g, {}, pts, pctx)[1], dtype=object)
    lo, hi = np.asarray(box.lo, dtype=object), np.asarray(box.hi, dtype=object)
    assert all(lo[i] <= v <= hi[i] for r in run for i, v in enumerate(r)), name
    exact = np.asarray(denote_all(g, {}, pts[:4], scalars.get("mpmath:200"))[1], dtype=object)
    assert all(lo[i] <= v <= hi[i] for r in exact for i, v in enumerate(r)), name


@pytest.mark.parametrize("name", UNARY + BINARY)
def test_float64_box_widened_by_the_declared_error_only(name):
    """interval:float64: the rule's box is the generic box widened by f64_ulps relative
    (nothing for exact evaluators); interval:binary32: exactly the generic box."""
    rng = np.random.default_rng(3)
    k = 2 if name in BINARY else 1
    a, b = _boxes(name if k == 1 else "two-argument", 6, rng)
    for base in ("float64", "binary32"):
        ictx = scalars.get(f"interval:{base}")
        args = [ictx.make(a, b)] * k
        rec = OPS[name]
        got = rec.interval(ictx, args, {}, 0)
        generic = real_rule(rec)(ictx, args, {}, 0)
        glo, ghi = np.asarray(generic.lo, np.float64), np.asarray(generic.hi, np.float64)
        lo, hi = np.asarray(got.lo, np.float64), np.asarray(got.hi, np.float64)
        f = FUNCTIONS.get(name) or BINARY_FUNCTIONS[name]
        if base == "binary32" or not f.f64_ulps:
            assert np.array_equal(lo, glo) and np.array_equal(hi, ghi), (name, base)
        else:
            rel = f.f64_ulps * 2.0 ** -52
            assert np.all(lo < glo) and np.all(hi > ghi), name
            assert np.all(glo - lo <= 2 * rel * np.abs(glo) + 1e-300), name
            assert np.all(hi - ghi <= 2 * rel * np.abs(ghi) + 1e-300), name


@pytest.mark.parametrize("name", BINARY)
def test_binary_function_box_holds_float64_runs(name):
    rng = np.random.default_rng(11)
    ictx, pctx = scalars.get("interval:float64"), scalars.get("float64")
    g = Graph([Node(0, [], "input", [10]), Node(1, [], "input", [10]),
               Node(2, [0, 1], name, [10])])
    a = rng.uniform(0.5, 3.0, (2, 10))
    b = a + rng.choice([0.0, 1e-9, 1e-3], (2, 10))
    box = denote_all(g, {}, {0: ictx.make(a[0], b[0]), 1: ictx.make(a[1], b[1])}, ictx)[2]
    lo, hi = np.asarray(box.lo, np.float64), np.asarray(box.hi, np.float64)
    t = rng.uniform(0, 1, (2, 6, 10))
    x = a[:, None, :] + t * (b - a)[:, None, :]
    run = np.asarray(denote_all(g, {}, {0: x[0], 1: x[1]}, pctx)[2], dtype=np.float64)
    assert np.all((lo <= run) & (run <= hi)), name
