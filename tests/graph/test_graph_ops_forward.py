"""Every op's forward rule, through the fold, against an independent reference in several
contexts; batched evaluation against per-sample evaluation."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from scalarlab import graph
from scalarlab import scalars
from scalarlab.graph import Graph, Node, OpKind, Payload
from scalarlab.graph.optable import OPS, full_attrs
from scalarlab.scalars.base import to_fraction

from graph_opcases import CASES, make_args, reference, to_fractions

TOL = {"float64": (1e-12, 1e-13), "binary32": (2e-5, 2e-6), "mpmath:200": (1e-12, 1e-13),
       "fp32-real": (2e-5, 2e-6)}


def build(c):
    """A graph: one input per parent, then the op node; payload from the params."""
    rec = OPS[c["op"]]
    k = len(c["parents"])
    attrs = full_attrs(rec, c["attrs"])
    out = rec.shape([tuple(s) for s in c["parents"]], attrs)
    nodes = [Node(i, [], "input", s) for i, s in enumerate(c["parents"])]
    nodes.append(Node(k, list(range(k)), OpKind(c["op"], **c["attrs"]), out))
    return Graph(nodes)


def run_case(c, ctx, seed=0, batch=()):
    rng = np.random.default_rng(seed)
    parents, params = make_args(c, rng, batch)
    g = build(c)
    k = len(parents)
    payload = Payload({k: dict(zip(c["params"], params))}) if params else Payload()
    vals = graph.denote_all(g, payload, {i: p for i, p in enumerate(parents)}, ctx)
    return vals[k], parents, params


def ids(c):
    return c["name"]


# fp32-real (exact arithmetic on binary32 inputs, an object-array context like mpmath:200)
# runs every case under -m slow; its arithmetic has its own tests in tests/scalars
@pytest.mark.parametrize("ctxname", ["float64", "binary32", "mpmath:200",
                                     pytest.param("fp32-real", marks=pytest.mark.slow)])
@pytest.mark.parametrize("c", CASES, ids=ids)
def test_forward_matches_reference(c, ctxname):
    ctx = scalars.get(ctxname)
    y, parents, params = run_case(c, ctx)
    ref = reference(c, parents, params)
    got = np.asarray(ctx.to_float64(y))
    assert got.shape == ref.shape
    rtol, atol = TOL[ctxname]
    np.testing.assert_allclose(got, ref.astype(np.float64), rtol=rtol, atol=atol)
    if ctxname == "binary32":
        assert np.array_equal(got.astype(np.float32).astype(np.float64), got), \
            "binary32 values must be representable in binary32"


EXACT = [c for c in CASES if c["exact"]]


@pytest.mark.parametrize("c", EXACT, ids=ids)
def test_forward_exact_in_rational(c):
    ctx = scalars.get("rational")
    y, parents, params = run_case(c, ctx, seed=3)
    ref = reference(c, [to_fractions(p) for p in parents], [to_fractions(p) for p in params])
    got = np.asarray(y, dtype=object)
    assert got.shape == ref.shape
    for a, b in zip(got.reshape(-1), ref.reshape(-1)):
        assert to_fraction(a) == Fraction(b)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "sqrt"])
def test_binary32_elementwise_is_correctly_rounded(op):
    """binary32 + - * / sqrt equal IEEE float32 arithmetic (numpy float32 is correctly rounded)."""
    c = next(c for c in CASES if c["op"] == op)
    y, parents, _ = run_case(c, scalars.get("binary32"), seed=5)
    p32 = [p.astype(np.float32) for p in parents]
    f = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
         "sqrt": np.sqrt}[op]
    assert np.array_equal(np.asarray(y), f(*p32).astype(np.float64))


@pytest.mark.parametrize("op", ["exp", "tanh", "sigmoid", "softplus", "gelu", "softmax", "layernorm"])
def test_irrational_ops_raise_in_rational(op):
    c = next(c for c in CASES if c["op"] == op)
    with pytest.raises(scalars.ContextError):
        run_case(c, scalars.get("rational"))


# every case in binary32 and float64, the exact ones in rational (an irrational op has no
# rational value; running relu in its place repeated one case 47 times)
BATCH_CASES = [pytest.param(c, ctxname, id=f"{c['name']}-{ctxname}")
               for c in CASES for ctxname in ("binary32", "rational", "float64")
               if c["exact"] or ctxname != "rational"]


@pytest.mark.parametrize("c, ctxname", BATCH_CASES)
def test_batched_equals_per_sample(c, ctxname):
    """One call over a [2, 3] batch equals six single calls, bit for bit.  float64 uses
    BLAS (reduction="native"), whose summation order depends on the operand shapes, so
    contractions there agree to rounding level only; every other op is bit-exact."""
    ctx = scalars.get(ctxname)
    rng = np.random.default_rng(11)
    parents, params = make_args(c, rng, batch=(2, 3))
    g = build(c)
    k = len(parents)
    payload = Payload({k: dict(zip(c["params"], params))}) if params else Payload()
    yb = graph.denote(g, payload, {i: p for i, p in enumerate(parents)}, ctx)
    blas = ctxname == "float64" and c["op"] in ("matmul", "linear", "conv2d")
    for idx in np.ndindex(2, 3):
        ys = graph.denote(g, payload, {i: p[idx] for i, p in enumerate(parents)}, ctx)
        a, b = np.asarray(yb[idx]), np.asarray(ys)
        if blas:
            np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)
        else:
            assert a.shape == b.shape and all(x == y for x, y in zip(a.reshape(-1), b.reshape(-1)))


def test_every_registered_op_has_a_case():
    covered = {c["op"] for c in CASES} | {"input", "const"}
    assert covered == set(OPS)
    for rec in OPS.values():
        assert rec.capsule == (None if rec.name in ("input", "const", "detach") else
                               "reference.reduce_sum" if rec.name == "sum" else
                               "reference.reshape" if rec.name == "flatten" else
                               f"reference.{rec.name}")


@pytest.mark.parametrize("ctxname", ["float64", "binary32", "rational"])
def test_const_nodes_broadcast_over_the_batch(ctxname):
    ctx = scalars.get(ctxname)
    g = Graph([Node(0, [], "input", [3]), Node(1, [], "const", [3]),
               Node(2, [0, 1], "mul", [3]), Node(3, [2], "sum", [])])
    p = Payload({1: {"const": {"value": np.array(["0.5", "-2", "1/3"], dtype=object)}}})
    xs = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    vals = graph.denote_all(g, p, xs, ctx)
    assert ctx.shape(vals[1]) == (2, 3)
    want = [Fraction(1, 2) - 4 + 1, 2 - 10 + 2]
    got = [to_fraction(t) for t in np.asarray(vals[3], dtype=object).reshape(-1)]
    if ctxname == "rational":
        assert got == want
    else:
        np.testing.assert_allclose([float(t) for t in got], [float(t) for t in want], rtol=1e-7)
    rec = OPS["const"]
    assert np.array_equal(rec.vjp(scalars.get("float64"), np.ones((2, 3)), [np.zeros(3)], None, {}, 1)[0],
                          np.full(3, 2.0))
    with pytest.raises(graph.GraphError, match=r"IR eval: const 1: payload value shape mismatch: \[2\] vs expected \[3\]"):
        graph.denote(g, {1: {"value": np.zeros(2)}}, xs, ctx)
