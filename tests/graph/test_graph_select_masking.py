"""Masked evaluation of ``select`` in the fold (graph/fold.py): each branch runs only on
the batch rows that take it, so a guarded domain error (sqrt or log of a negative) never
reaches a row that does not take it.  Values against oracles (gmpy2/MPFR in the binary
contexts, exact rationals, mpmath, interval branches evaluated alone), nested selects in
random topological orders, shared branch nodes, tangents, errors on rows that need the
node, ``partial``, and a 100,000-node chain."""
from __future__ import annotations

import math
from fractions import Fraction

import gmpy2
import mpmath
import numpy as np
import pytest

from scalarlab import graph, scalars
from scalarlab.graph import Graph, Node, OpKind, Payload
from scalarlab.scalars import formats
from scalarlab.scalars.base import to_fraction
from scalarlab.scalars.values import Dual
from scalarlab.scalars.errors import ScalarLabError
from scalarlab.graph.errors import GraphError


class Expr:
    """A tiny expression builder: ``build`` emits its nodes in a chosen topological order
    (so branch nodes may come before the condition), with the const payload."""

    def __init__(self):
        self.ops: list = []            # (op, parents, value)

    def node(self, op, *parents, value=None) -> int:
        self.ops.append((op, list(parents), value))
        return len(self.ops) - 1

    def x(self):
        return self.node("input")

    def c(self, v):
        return self.node("const", value=v)

    def build(self, order=None):
        """``(graph, payload, new id of each expression index)``; ``order`` a list of
        expression indices in a topological order (default: creation order)."""
        order = list(range(len(self.ops))) if order is None else order
        new = {old: k for k, old in enumerate(order)}
        nodes, pay = [], {}
        for old in order:
            op, parents, value = self.ops[old]
            k = new[old]
            if op in ("input", "const"):
                nodes.append(Node(k, [], op, []))
                if op == "const":
                    pay[k] = {"const": {"value": value}}
            else:
                nodes.append(Node(k, [new[p] for p in parents], OpKind(op), []))
        out = new[len(self.ops) - 1]
        return Graph(nodes, output=out), Payload(pay), new

    def random_order(self, rng):
        """A random topological order (inputs first: the fold keeps their ids apart)."""
        n = len(self.ops)
        indeg = [len(set(p)) for _, p, _ in self.ops]
        users: list = [[] for _ in range(n)]
        for i, (_, ps, _) in enumerate(self.ops):
            for p in set(ps):
                users[p].append(i)
        ready = [i for i in range(n) if indeg[i] == 0]
        order = []
        while ready:
            k = ready.pop(int(rng.integers(len(ready))))
            order.append(k)
            for u in users[k]:
                indeg[u] -= 1
                if indeg[u] == 0:
                    ready.append(u)
        return order


def abs_sqrt():
    """(if (< x 0) (sqrt (- x)) (sqrt x)), branch nodes before the condition."""
    e = Expr()
    x = e.x()
    a = e.node("sqrt", e.node("neg", x))
    b = e.node("sqrt", x)
    e.node("select", e.node("lt", x, e.c("0")), a, b)
    return e


MIXED = np.array([-4.0, 9.0, -2.25, 0.25, 0.0, -0.0, 1e-300, -7.5e10, 3.0, -1.0])


def _mpfr_sqrt_abs(x, fmt):
    with formats.gmpy2_context(fmt):
        return [float(gmpy2.sqrt(gmpy2.mpfr(abs(float(t))))) for t in x]


@pytest.mark.parametrize("cname", ["float64", "binary32", "binary16"])
def test_abs_sqrt_over_mixed_signs_matches_mpfr(cname):
    ctx = scalars.get(cname)
    g, p, ids = abs_sqrt().build()
    x = ctx.convert(MIXED)
    vals, rows = graph.denote_rows(g, p, x, ctx)
    got = np.asarray(ctx.to_float64(vals[g.output]), dtype=np.float64)
    xs = np.asarray(ctx.to_float64(x), dtype=np.float64)
    assert got.tolist() == _mpfr_sqrt_abs(xs, ctx.fmt)
    neg = xs < 0
    # the branches ran on their rows only; the others hold no value (NaN)
    assert rows[ids[2]].tolist() == neg.tolist() and rows[ids[3]].tolist() == (~neg).tolist()
    assert np.isnan(np.asarray(ctx.to_float64(vals[ids[3]]), dtype=float)[neg]).all()
    assert rows[g.output] is None and rows[ids[0]] is None


def test_abs_sqrt_exact_in_rationals_and_mpmath():
    q = scalars.get("rational")
    g, p, _ = abs_sqrt().build()
    xs = ["-9/4", "16/25", "-1", "0", "49", "-1/1024"]
    got = [to_fraction(v) for v in graph.denote(g, p, q.convert(xs), q)]
    assert got == [Fraction(3, 2), Fraction(4, 5), 1, 0, 7, Fraction(1, 32)]
    m = scalars.get("mpmath:120")
    y = graph.denote(g, p, m.convert(MIXED), m)
    with mpmath.workprec(120):
        want = [mpmath.sqrt(abs(mpmath.mpf(float(t)))) for t in MIXED]
    assert list(y) == want


def test_abs_sqrt_single_sample_takes_one_branch():
    g, p, ids = abs_sqrt().build()
    for t, want in ((-6.25, 2.5), (6.25, 2.5)):
        vals, rows = graph.denote_rows(g, p, np.array(t), "float64")
        assert float(vals[g.output]) == want
        taken, other = (ids[2], ids[3]) if t < 0 else (ids[3], ids[2])
        assert rows[taken] is None and not rows[other] and np.isnan(vals[other])
    q = scalars.get("rational")
    assert to_fraction(graph.denote(g, p, q.convert("-9/16"), q).item()) == Fraction(3, 4)


def test_abs_sqrt_over_intervals_takes_decided_branches_and_hulls_undecided_ones():
    iv = scalars.get("interval:float64")
    e = Expr()
    x = e.x()
    a = e.node("sqrt", e.node("neg", x))
    b = e.node("mul", x, e.c("3"))           # defined everywhere: an undecided row runs it
    e.node("select", e.node("lt", x, e.c("0")), a, b)
    g, p, ids = e.build()
    box = iv.make([-4.0, 1.0, 2.0, -9.0], [-1.0, 2.0, 2.0, -9.0])
    vals, rows = graph.denote_rows(g, p, box, iv)
    y = vals[g.output]
    # decided rows: the branch's own interval value, evaluated alone
    ga = Graph([Node(0, [], "input", []), Node(1, [0], OpKind("neg"), []),
                Node(2, [1], OpKind("sqrt"), [])])
    ya = graph.denote(ga, Payload(), iv.make([-4.0, -9.0], [-1.0, -9.0]), iv)
    assert (y.lo[[0, 3]].tolist(), y.hi[[0, 3]].tolist()) == (ya.lo.tolist(), ya.hi.tolist())
    assert (y.lo[1], y.hi[1], y.lo[2], y.hi[2]) == (3.0, 6.0, 6.0, 6.0)
    assert rows[ids[a]].tolist() == [True, False, False, True]
    # an undecided condition runs both branches on that row and takes the hull
    e2 = Expr()
    x = e2.x()
    a = e2.node("mul", x, e2.c("2"))
    b = e2.node("sqrt", x)
    e2.node("select", e2.node("lt", x, e2.c("1")), a, b)
    g2, p2, ids2 = e2.build()
    box = iv.make([0.5, -3.0, 4.0], [4.0, -2.0, 9.0])
    vals, rows = graph.denote_rows(g2, p2, box, iv)
    y = vals[g2.output]
    assert rows[ids2[b]].tolist() == [True, False, True]           # sqrt: never on [-3,-2]
    s = iv.sqrt(iv.make([0.5], [4.0]))
    assert y.lo[0] == min(1.0, s.lo[0]) and y.hi[0] == max(8.0, s.hi[0])
    assert (y.lo[1], y.hi[1], y.lo[2], y.hi[2]) == (-6.0, -4.0, 2.0, 3.0)
    for t in np.linspace(0.5, 4.0, 41):                             # encloses the points
        v = 2 * t if t < 1 else math.sqrt(t)
        assert y.lo[0] <= v <= y.hi[0]


def _nested():
    """(if (< x 0) (if (< (sqrt (- x)) 2) (log (- x)) (sqrt (- (- x) 4)))
                   (if (< x 9) (log (+ x 1)) (sqrt (- x 9))))
    The inner conditions read branch-exclusive nodes; ``nx`` = (- x) is shared by the
    outer then-branch's condition and both its branches; every leaf has a domain error
    on the rows that do not take it."""
    e = Expr()
    x = e.x()
    nx = e.node("neg", x)
    r = e.node("sqrt", nx)
    l1 = e.node("log", nx)
    s1 = e.node("sqrt", e.node("sub", nx, e.c("4")))
    inner1 = e.node("select", e.node("lt", r, e.c("2")), l1, s1)
    l2 = e.node("log", e.node("add", x, e.c("1")))
    s2 = e.node("sqrt", e.node("sub", x, e.c("9")))
    inner2 = e.node("select", e.node("lt", x, e.c("9")), l2, s2)
    e.node("select", e.node("lt", x, e.c("0")), inner1, inner2)
    return e


def _nested_oracle(xs, fmt):
    out = []
    with formats.gmpy2_context(fmt):
        for t in xs:
            t = gmpy2.mpfr(float(t))
            if t < 0:
                out.append(gmpy2.log(-t) if gmpy2.sqrt(-t) < 2 else gmpy2.sqrt(-t - 4))
            else:
                out.append(gmpy2.log(t + 1) if t < 9 else gmpy2.sqrt(t - 9))
    return [float(v) for v in out]


@pytest.mark.parametrize("seed", range(6))
def test_nested_selects_in_random_node_orders_match_mpfr(seed):
    ctx = scalars.get("binary32")
    e = _nested()
    order = None if seed == 0 else e.random_order(np.random.default_rng(seed))
    g, p, _ = e.build(order)
    xs = ctx.convert(np.array([-9.0, -3.0, -0.5, 0.0, 2.5, 8.75, 9.0, 25.0, -4.0, -16.0]))
    y = np.asarray(ctx.to_float64(graph.denote(g, p, xs, ctx)), dtype=np.float64)
    want = _nested_oracle(ctx.to_float64(xs), ctx.fmt)
    assert y.tolist() == want
    # two batch axes: the same values
    y2 = graph.denote(g, p, ctx.reshape(xs, (2, 5)), ctx)
    assert np.asarray(ctx.to_float64(y2), dtype=np.float64).reshape(-1).tolist() == want
    # one sample at a time: only the taken path runs
    for k, t in enumerate(np.asarray(ctx.to_float64(xs))):
        one = graph.denote(g, p, ctx.convert(np.array(t)), ctx)
        assert float(ctx.to_float64(one)) == want[k]


def test_nested_selects_in_mpmath_match_mpmath():
    m = scalars.get("mpmath:100")
    g, p, _ = _nested().build(_nested().random_order(np.random.default_rng(11)))
    xs = [-9.0, -3.0, -0.5, 0.0, 2.5, 8.75, 9.0, 25.0]
    y = graph.denote(g, p, m.convert(np.array(xs)), m)
    with mpmath.workprec(100):
        want = [mpmath.log(-mpmath.mpf(t)) if t < 0 and math.sqrt(-t) < 2 else
                mpmath.sqrt(-mpmath.mpf(t) - 4) if t < 0 else
                mpmath.log(mpmath.mpf(t) + 1) if t < 9 else mpmath.sqrt(mpmath.mpf(t) - 9)
                for t in xs]
    assert list(y) == want


def test_guarded_log_and_a_node_shared_with_an_unguarded_consumer():
    """(+ (if (> x 0) (log x) 0) (* x x)): log only on positive rows; x feeds the select's
    condition, its branch and another consumer; the branch node ``log x`` also feeds a
    consumer that needs it on every row when that consumer is the output -- then the
    domain error is real and raised, naming the node."""
    e = Expr()
    x = e.x()
    lg = e.node("log", x)
    sel = e.node("select", e.node("gt", x, e.c("0")), lg, e.c("0"))
    e.node("add", sel, e.node("mul", x, x))
    g, p, ids = e.build()
    b32 = scalars.get("binary32")
    xs = b32.convert(np.array([-2.0, 0.5, 0.0, 3.0, -0.0]))
    y = np.asarray(b32.to_float64(graph.denote(g, p, xs, b32)), dtype=np.float64)
    with formats.gmpy2_context(formats.binary32):
        want = [float((gmpy2.log(gmpy2.mpfr(t)) if t > 0 else 0) + gmpy2.mpfr(t) * t)
                for t in b32.to_float64(xs)]
    assert y.tolist() == want
    # the same log read unconditionally by a second output: evaluated on every row
    e.node("add", sel, lg)
    g2, p2, ids2 = e.build()
    with pytest.raises(ScalarLabError, match=rf"log {ids2[lg]}: log of a non-positive") \
            as info:
        graph.denote_all(g2, p2, xs, b32)
    assert "through a select" not in str(info.value)       # it runs on every row
    errors: dict = {}
    vals = graph.denote_all(g2, p2, xs, b32, partial=True, errors=errors)
    assert vals[ids2[lg]] is None and vals[len(e.ops) - 1] is None
    assert vals[ids2[sel]] is None                         # a dependent of the failed node
    assert errors == {ids2[lg]: str(info.value)}           # only the node that failed


def test_error_on_a_row_that_takes_the_branch_names_node_and_rows():
    e = Expr()
    x = e.x()
    s = e.node("sqrt", x)                    # guarded by x < 0: wrong guard, real error
    e.node("select", e.node("lt", x, e.c("0")), s, x)
    g, p, ids = e.build()
    with pytest.raises(ScalarLabError, match=rf"sqrt {ids[s]} \(on the 2 batch rows that "
                                           rf"reach it through a select: 1, 3;"):
        graph.denote(g, p, np.array([1.0, -4.0, 2.0, -1.0]), "binary32")
    with pytest.raises(GraphError, match=rf"sqrt {ids[s]}"):
        graph.denote(g, p, np.array(-4.0), "float64")          # single sample: raises too
    assert float(graph.denote(g, p, np.array(4.0), "float64")) == 4.0
    # partial: the node and its dependents are None, the condition is computed
    errors: dict = {}
    vals = graph.denote_all(g, p, np.array([1.0, -4.0]), "binary32", partial=True,
                            errors=errors)
    assert vals[ids[s]] is None and vals[g.output] is None and vals[ids[3]] is not None
    assert list(errors) == [ids[s]]
    assert errors[ids[s]].startswith(f"IR eval: sqrt {ids[s]} (on the 1 batch rows that "
                                      f"reach it through a select: 1;")
    vals = graph.denote_all(g, p, np.array([1.0, 4.0]), "binary32", partial=True)
    assert vals[g.output].tolist() == [1.0, 4.0]


def test_condition_reading_a_branch_node_and_one_node_in_both_branches():
    """select(lt(y, 2), y, sqrt(y - 4)) with y = x * x: y is the condition's operand and
    the then-branch; select(c, z, z) reads z on every row."""
    e = Expr()
    x = e.x()
    y = e.node("mul", x, x)
    s = e.node("sqrt", e.node("sub", y, e.c("4")))
    z = e.node("neg", y)
    inner = e.node("select", e.node("lt", y, e.c("2")), y, s)
    e.node("add", inner, e.node("select", e.node("gt", x, e.c("0")), z, z))
    g, p, ids = e.build(e.random_order(np.random.default_rng(3)))
    xs = np.array([1.0, -3.0, 0.5, 2.5])
    vals, rows = graph.denote_rows(g, p, xs, "float64")
    want = [(t * t if t * t < 2 else math.sqrt(t * t - 4)) - t * t for t in xs]
    assert vals[g.output].tolist() == want
    assert rows[ids[z]] is None and rows[ids[s]].tolist() == [False, True, False, True]


def test_dual_tangents_follow_the_masks():
    """d/dx |x|^(1/2) = sign(x) / (2 sqrt|x|): the tangent of each row is its branch's,
    exactly the dual context's sqrt rule on that branch; finite differences agree."""
    g, p, ids = abs_sqrt().build()
    xs = np.array([-4.0, 9.0, -0.25, 2.0, -1e6])
    d = graph.denote(g, p, Dual(xs, np.ones_like(xs)), "dual:float64")
    r = np.sqrt(np.abs(xs))
    assert d.primal.tolist() == r.tolist()
    assert d.tangent.tolist() == (np.sign(xs) / (2 * r)).tolist()
    h = 1e-7 * np.maximum(1, np.abs(xs))
    fd = (np.sqrt(np.abs(xs + h)) - np.sqrt(np.abs(xs - h))) / (2 * h)
    assert np.allclose(d.tangent, fd, rtol=1e-6)
    # nested: tangents against the exact derivatives of each piece
    g2, p2, _ = _nested().build()
    xs = np.array([-9.0, -3.0, -0.5, 2.5, 25.0])
    d = graph.denote(g2, p2, Dual(xs, np.ones_like(xs)), "dual:float64")
    want = [1 / (2 * math.sqrt(-t - 4)) * -1 if t < 0 and math.sqrt(-t) >= 2 else
            1 / t if t < 0 else 1 / (t + 1) if t < 9 else 1 / (2 * math.sqrt(t - 9))
            for t in xs]
    assert np.allclose(d.tangent, want, rtol=1e-15, atol=0)


def _unmasked(e, x, ctx):
    """What the fold computed before masking: every node on every row by the op table's
    forward rule (one batch axis), selects picking between two full branches."""
    from scalarlab.graph.optable import OPS
    n = len(ctx.shape(x))
    vals = []
    for op, ps, v in e.ops:
        if op == "input":
            vals.append(x)
        elif op == "const":
            vals.append(ctx.broadcast_to(ctx.convert(v), (n and ctx.shape(x)[0],)))
        else:
            vals.append(OPS[op].forward(ctx, [vals[q] for q in ps], {}, 1))
    return vals[-1]


@pytest.mark.parametrize("cname", ["float64", "binary16", "rational", "interval:float64",
                                   "interval:binary32", "dual:float64"])
@pytest.mark.parametrize("seed", range(4))
def test_random_select_dags_equal_the_unmasked_fold(seed, cname):
    """Random DAGs of add/mul/neg/lt/select (total ops, nested and shared selects, random
    node orders): the masked fold gives exactly the values of evaluating every node on
    every row and picking -- where both branches exist, masking changes nothing (interval
    hulls of undecided rows, dual tangents and exact rationals included)."""
    rng = np.random.default_rng(seed)
    ctx = scalars.get(cname)
    e = Expr()
    pool = [e.x(), e.c(str(rng.integers(-3, 4))), e.c("0.5")]
    for _ in range(int(rng.integers(8, 30))):
        op = rng.choice(["add", "mul", "neg", "select", "select"])
        pick = lambda: pool[int(rng.integers(len(pool)))]  # noqa: E731
        if op == "neg":
            pool.append(e.node("neg", pick()))
        elif op == "select":
            pool.append(e.node("select", e.node("lt", pick(), pick()), pick(), pick()))
        else:
            pool.append(e.node(op, pick(), pick()))
    e.node("add", pool[-1], pool[-2])
    xs = np.round(rng.uniform(-2, 2, 40), 3)
    if ctx.is_interval:
        x = ctx.make(xs, xs + rng.choice([0.0, 0.25, 1.5], 40))
    elif ctx.is_dual:
        x = Dual(xs, rng.standard_normal(40))
    else:
        x = ctx.convert(xs)
    g, p, _ = e.build(e.random_order(rng))
    got, want = graph.denote_all(g, p, x, ctx)[g.output], _unmasked(e, x, ctx)
    parts = ((got.lo, want.lo), (got.hi, want.hi)) if ctx.is_interval else \
        ((got.primal, want.primal), (got.tangent, want.tangent)) if ctx.is_dual else \
        ((got, want),)
    for a, b in parts:
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype == object:
            assert a.tolist() == b.tolist()
        else:
            assert np.array_equal(a, b, equal_nan=True)


@pytest.mark.parametrize("n", [20_000, pytest.param(100_000, marks=pytest.mark.slow)])
def test_long_chain_inside_a_branch(n):
    """(if (< x 0) (sqrt (- (- ... (- x)))) (sqrt x)) with n - 1 negations: the chain runs
    only on the rows with x < 0 (compactly, in two rounds of loops, no recursion); the
    100,000-node case is the slow variant (the select-free one is in test_graph_properties)."""
    # n even: node n - 1 = (-1)^(n-1) x = -x
    nodes = [Node(0, [], "input", [])]
    nodes += [Node(i, [i - 1], OpKind("neg"), []) for i in range(1, n)]
    nodes += [Node(n, [n - 1], OpKind("sqrt"), []), Node(n + 1, [0], OpKind("sqrt"), []),
              Node(n + 2, [], "const", []), Node(n + 3, [0, n + 2], OpKind("lt"), []),
              Node(n + 4, [n + 3, n, n + 1], OpKind("select"), [])]
    g = Graph(nodes)
    p = Payload({n + 2: {"const": {"value": "0"}}})
    xs = np.array([4.0, -2.25, 0.0, -16.0, 1e-310])
    vals, rows = graph.denote_rows(g, p, xs, "float64")
    assert vals[n + 4].tolist() == np.sqrt(np.abs(xs)).tolist()
    assert rows[n // 2].tolist() == (xs < 0).tolist() and rows[n + 1].tolist() == \
        (xs >= 0).tolist()
    assert vals[n - 2][[1, 3]].tolist() == [-2.25, -16.0]


@pytest.mark.parametrize("cname", ["float64", "binary32", "rational", "mpmath:60",
                                   "fp32-real", "interval:float64", "interval:mpmath:80"])
def test_rows_without_value_read_as_nan_or_the_whole_line(cname):
    """A branch node's table value covers the whole batch: its rows without value read
    as NaN through ``to_float64`` (the whole line over intervals), never as a number."""
    ctx = scalars.get(cname)
    g, p, ids = abs_sqrt().build()
    x = ctx.convert(np.array([-4.0, 9.0, -0.25]))
    vals, rows = graph.denote_rows(g, p, x, ctx)
    v = vals[ids[3]]                                  # sqrt x: row 1 only
    # rationals have no NaN: their rows without value hold a float NaN, which is no
    # rational value (to_float64 refuses the array), read entry by entry here
    f = [float(t) for t in v] if cname == "rational" else ctx.to_float64(v)
    if ctx.is_interval:
        assert f.lo.tolist() == [-np.inf, 3.0, -np.inf] and f.hi.tolist() == [np.inf, 3.0,
                                                                                np.inf]
    else:
        f = np.asarray(f, dtype=np.float64)
        assert f[1] == 3.0 and np.isnan(f[[0, 2]]).all()
    assert rows[ids[3]].tolist() == [False, True, False]


def test_denote_of_an_inner_node_runs_its_ancestors_only():
    g, p, ids = abs_sqrt().build()
    assert graph.denote(g, p, np.array([-4.0, -9.0]), "float64", ids[2]).tolist() == [2, 3]
    with pytest.raises(ScalarLabError, match=rf"sqrt {ids[2]}: sqrt of a negative"):
        graph.denote(g, p, np.array([-4.0, 9.0]), "float64", ids[2])   # asked for: runs


def test_planned_run_hands_kernels_the_rows_that_take_each_branch():
    """The kernel planner's run (the fold's per-node kernel hook) masks the same way:
    kernels see the compact rows (nb = 1) and give the fold's values."""
    from scalarlab.graph import plan as P
    g, p, _ = _nested().build(_nested().random_order(np.random.default_rng(5)))
    x = np.array([-9.0, -3.0, -0.5, 0.0, 2.5, 8.75, 9.0, 25.0])
    got = P.run_planned(g, p, x, P.default_policy("cpu", "binary32"))[g.output]
    b32 = scalars.get("binary32")
    assert np.asarray(b32.to_float64(got)).tolist() == _nested_oracle(x, formats.binary32)


def _lazy_value(e, out, t):
    """One sample by the lazy reading of the expression (a select evaluates only the
    branch it takes): the value, or None when a node it evaluates is out of domain."""
    memo: dict = {}
    stack = [out]
    while stack:                             # explicit stack: post-order, lazy selects
        k = stack[-1]
        if k in memo:
            stack.pop()
            continue
        op, ps, v = e.ops[k]
        if op == "select":
            if ps[0] not in memo:
                stack.append(ps[0])
                continue
            c = memo[ps[0]]
            if c is None:
                memo[k] = None
                continue
            pick = ps[1] if c > 0 else ps[2]
            if pick not in memo:
                stack.append(pick)
                continue
            memo[k] = memo[pick]
            continue
        todo = [p for p in ps if p not in memo]
        if todo:
            stack.extend(todo)
            continue
        a = [memo[p] for p in ps]
        if any(q is None for q in a):
            memo[k] = None
        elif op == "input":
            memo[k] = t
        elif op == "const":
            memo[k] = float(v)
        elif op == "sqrt":
            memo[k] = math.sqrt(a[0]) if a[0] >= 0 else None
        else:
            memo[k] = {"add": lambda: a[0] + a[1], "mul": lambda: a[0] * a[1],
                       "neg": lambda: -a[0], "lt": lambda: float(a[0] < a[1])}[op]()
    return memo[out]


@pytest.mark.parametrize("seed", range(12))
def test_random_guarded_dags_equal_the_lazy_reading_sample_by_sample(seed):
    """Random DAGs with sqrt (a domain error below 0), shared nodes and selects nested at
    random, in random node orders: on the samples whose lazy reading is defined the
    masked fold never raises and gives the lazy value, bit for bit (float64; one and two
    batch axes)."""
    rng = np.random.default_rng(100 + seed)
    e = Expr()
    pool = [e.x(), e.c(str(rng.integers(-2, 3))), e.c("0.5")]
    for _ in range(int(rng.integers(10, 40))):
        pick = lambda: pool[int(rng.integers(len(pool)))]  # noqa: E731
        op = rng.choice(["add", "mul", "neg", "sqrt", "sqrt", "select", "select", "select"])
        if op in ("neg", "sqrt"):
            pool.append(e.node(op, pick()))
        elif op == "select":
            pool.append(e.node("select", e.node("lt", pick(), pick()), pick(), pick()))
        else:
            pool.append(e.node(op, pick(), pick()))
    e.node("add", pool[-1], pool[-2])
    out = len(e.ops) - 1
    xs = rng.uniform(-3, 3, 200)
    want = [_lazy_value(e, out, t) for t in xs]
    ok = np.array([w is not None for w in want])
    g, p, ids = e.build(e.random_order(rng))
    xv = xs[ok]
    if not ok.any():            # the output reads no x and is out of domain: it raises
        with pytest.raises(ScalarLabError, match=r"sqrt \d+"):
            graph.denote(g, p, xs, "float64")
        return
    # (an output that does not read x has no batch axes: denote runs its ancestors only)
    got = np.broadcast_to(graph.denote(g, p, xv, "float64"), xv.shape)
    assert got.tolist() == [w for w in want if w is not None]
    k = len(xv) - len(xv) % 2
    got2 = np.broadcast_to(graph.denote(g, p, xv[:k].reshape(2, -1), "float64"), (2, k // 2))
    assert got2.reshape(-1).tolist() == got[:k].tolist()
    if not ok.all():                         # a sample whose lazy reading fails raises
        with pytest.raises(ScalarLabError, match=r"sqrt \d+"):
            graph.denote(g, p, xs, "float64")


@pytest.mark.parametrize("cname", ["interval:float64", "interval:binary32"])
def test_abs_sqrt_over_decided_boxes_is_the_directed_mpfr_enclosure(cname):
    """(if (< x 0) (sqrt (- x)) (sqrt x)) over boxes on either side of 0 (and points):
    each row runs one branch, whose endpoints are MPFR's sqrt rounded down and up."""
    iv = scalars.get(cname)
    g, p, ids = abs_sqrt().build()
    lo = np.array([-4.0, 0.25, -2.25, 0.0, 1e-30, -3.0, 2.0])
    hi = np.array([-1.0, 9.0, -2.25, 0.0, 2e-30, -2.0, 3.0])
    vals, rows = graph.denote_rows(g, p, iv.make(lo, hi), iv)
    y = iv.to_float64(vals[g.output])
    fmt = formats.binary64 if cname == "interval:float64" else formats.binary32
    box = iv.to_float64(iv.make(lo, hi))             # the boxes as the context holds them
    want_lo, want_hi = [], []
    for a, b in zip(box.lo, box.hi):
        a, b = (-b, -a) if b < 0 else (a, b)
        with formats.gmpy2_context(fmt, "down"):
            want_lo.append(float(gmpy2.sqrt(gmpy2.mpfr(float(a)))))
        with formats.gmpy2_context(fmt, "up"):
            want_hi.append(float(gmpy2.sqrt(gmpy2.mpfr(float(b)))))
    assert y.lo.tolist() == want_lo and y.hi.tolist() == want_hi
    assert rows[ids[2]].tolist() == (hi < 0).tolist()
