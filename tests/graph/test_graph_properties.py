"""Property tests: random and mutated graphs, payloads and JSON files raise nothing but
GraphError / ContextError, whatever the checkers or the fold are given; and a
100,000-node chain validates and evaluates (no recursion anywhere)."""
from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings, strategies as st

from scalarlab import graph
from scalarlab import scalars
from scalarlab.graph import Graph, Node, OpKind, Payload, examples
from scalarlab.graph.optable import OPS, full_attrs
from scalarlab.scalars.errors import ContextError

ALLOWED = (graph.GraphError, ContextError)
OP_NAMES = sorted(OPS)

small_int = st.integers(min_value=-3, max_value=4)
shape_st = st.lists(st.integers(min_value=0, max_value=4), min_size=0, max_size=3)
attr_value = st.one_of(small_int, st.lists(small_int, max_size=4), st.booleans(), st.none(),
                       st.sampled_from(["x", 1.5]))


@st.composite
def random_graph(draw):
    n = draw(st.integers(min_value=1, max_value=7))
    nodes = []
    for i in range(n):
        op = draw(st.sampled_from(OP_NAMES + ["bogus"]))
        rec = OPS.get(op)
        k = draw(st.integers(min_value=0, max_value=3))
        parents = [draw(st.integers(min_value=-1, max_value=n)) for _ in range(k)]
        names = list(rec.attrs) if rec else []
        attrs = {}
        for a in names + ["junk"]:
            if draw(st.integers(0, 3)) > 0:
                attrs[a] = draw(attr_value)
        if a == "junk" and draw(st.booleans()):
            attrs.pop("junk", None)
        nid = i if draw(st.integers(0, 20)) else draw(small_int)
        nodes.append(Node(nid, parents, OpKind(op, **attrs), draw(shape_st)))
    return Graph(nodes)


def _payload_for(g, rng, correct):
    p = Payload()
    for n in g.nodes:
        rec = OPS.get(n.kind.op)
        if rec is None or not rec.params:
            continue
        try:
            shapes = rec.param_shapes([g.nodes[q].out_shape for q in n.parents],
                                      full_attrs(rec, n.kind.attrs), n.out_shape)
        except Exception:   # the graph is invalid: any shapes will do
            shapes = {name: (2,) for name in rec.params}
        vals = {}
        for name in rec.params:
            s = shapes[name] if correct else tuple(rng.integers(0, 3, size=rng.integers(0, 3)))
            vals[name] = rng.uniform(0.5, 1.5, size=s)
        p.set(n.id, vals)
    return p


def _exercise(g, payload, rng, contexts=("float64", "rational")):
    try:
        graph.check_well_formed(g)
        graph.check_shapes(g)
        graph.check_payload(g, payload)
        graph.listing(g)
        graph.to_dot(g)
        ids = g.input_ids()
        x = {i: rng.uniform(-1, 1, size=(2,) + g.nodes[i].out_shape) for i in ids}
        for ctxname in contexts:
            graph.denote_all(g, payload, x if ids else None, ctxname)
            graph.denote_all(g, payload, x if ids else None, ctxname, partial=True)
        return True
    except ALLOWED:
        return False


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_graph(), st.booleans(), st.integers(0, 2 ** 31))
def test_random_graphs_raise_only_graph_or_context_errors(g, correct, seed):
    rng = np.random.default_rng(seed)
    _exercise(g, _payload_for(g, rng, correct), rng)


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-3, 8), st.floats(allow_nan=False),
                      st.text(max_size=4), st.lists(st.integers(-2, 6), max_size=3))


@st.composite
def mutated_doc(draw):
    g, p, _ = draw(st.sampled_from([examples.six_node_mlp, examples.layernorm_axis,
                                    examples.concat_axis]))()
    doc = graph.fileformat.to_json(g, p)
    for _ in range(draw(st.integers(1, 4))):
        # walk to a random container and change / delete / insert something
        path = []
        cur = doc
        while isinstance(cur, (dict, list)) and cur and draw(st.integers(0, 3)):
            key = draw(st.sampled_from(sorted(cur.keys()) if isinstance(cur, dict) else list(range(len(cur)))))
            path.append(key)
            cur = cur[key]
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["set", "delete", "insert"]))
        if not path:
            continue
        key = path[-1]
        if action == "set":
            parent[key] = draw(json_leaf)
        elif action == "delete":
            del parent[key]
        elif isinstance(parent, list):
            parent.insert(key, copy.deepcopy(draw(json_leaf)))
        else:
            parent[draw(st.text(max_size=3))] = draw(json_leaf)
    return doc


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_doc(), st.integers(0, 2 ** 31))
def test_mutated_json_files_raise_only_graph_or_context_errors(doc, seed):
    rng = np.random.default_rng(seed)
    try:
        g, p = graph.loads(json.dumps(doc), "mutated.json")
    except ALLOWED:
        return
    _exercise(g, p, rng)


def test_unmutated_documents_load_and_evaluate():
    rng = np.random.default_rng(0)
    for make in (examples.six_node_mlp, examples.layernorm_axis, examples.concat_axis):
        g, p, _ = make()
        g2, p2 = graph.loads(json.dumps(graph.fileformat.to_json(g, p)))
        assert g2 == g and _exercise(g2, p2, rng, ("float64", "binary32"))


# 20,000 nodes are 20 times the recursion limit; the hundred thousand under -m slow
@pytest.mark.parametrize("n", [20_000, pytest.param(100_000, marks=pytest.mark.slow)])
def test_hundred_thousand_node_chain_validates_and_evaluates(n):
    nodes = [Node(0, [], "input", [3])]
    nodes += [Node(i, [i - 1], "neg" if i % 2 else "relu", [3]) for i in range(1, n)]
    g = Graph(nodes)
    graph.check_shapes(g)
    x = np.array([[1.5, -2.0, 0.25], [-1.5, 2.0, -0.25]])
    vals = graph.denote_all(g, Payload(), x, "float64")
    want = x
    for i in (1, 2, 3, 4):
        want = -want if i % 2 else np.maximum(want, 0.0)
    # after neg, relu, neg, relu every entry is 0 (+0: relu of -0 is max(-0, 0)) and
    # stays there; the last op (odd index) is a neg
    assert len(vals) == n and np.array_equal(vals[1], -x) and np.array_equal(vals[4], want)
    assert np.array_equal(vals[-1], np.zeros((2, 3))) and vals[-1].shape == (2, 3)


UNARY = ["neg", "abs", "relu", "tanh", "sigmoid", "softplus", "sin", "cos", "gelu", "exp",
         "safe_log", "detach"]
BINARY = ["add", "sub", "mul", "max", "min"]


@st.composite
def valid_graph(draw):
    """A random VALID DAG (fan-out, shared parents, axis ops) with a matching payload."""
    shapes = [(2, 3)]
    nodes = [Node(0, [], "input", [2, 3])]
    payload = Payload()
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 31)))
    for i in range(1, draw(st.integers(2, 9))):
        kind = draw(st.sampled_from(["unary", "binary", "axis", "linear", "shape"]))
        a = draw(st.integers(0, i - 1))
        sa = shapes[a]
        if kind == "unary" or (kind in ("axis", "shape", "linear") and not sa):
            kind, op, parents = OpKind(draw(st.sampled_from(UNARY))), None, [a]
        elif kind == "binary":
            same = [j for j in range(i) if shapes[j] == sa or shapes[j] == sa[-1:]]
            kind, parents = OpKind(draw(st.sampled_from(BINARY))), [a, draw(st.sampled_from(same))]
        elif kind == "axis":
            op = draw(st.sampled_from(["softmax", "log_softmax", "reduce_sum", "reduce_mean", "layernorm"]))
            ax = draw(st.integers(-len(sa), len(sa) - 1))
            kind, parents = OpKind(op, axis=ax), [a]
            if op == "layernorm":
                tail = sa[ax % len(sa):]
                payload.set(i, {"gamma": rng.uniform(0.5, 1.5, tail), "beta": rng.uniform(-1, 1, tail)})
        elif kind == "linear":
            o = draw(st.integers(1, 4))
            kind, parents = OpKind("linear"), [a]
            payload.set(i, {"W": rng.uniform(-1, 1, (o, sa[-1])), "b": rng.uniform(-1, 1, o)})
        else:
            op = draw(st.sampled_from(["flatten", "permute", "concat", "reshape"]))
            if op == "permute":
                kind = OpKind("permute", perm=list(rng.permutation(len(sa)).tolist()))
                parents = [a]
            elif op == "concat":
                kind, parents = OpKind("concat", axis=draw(st.integers(0, len(sa) - 1))), [a, a]
            elif op == "reshape":
                kind, parents = OpKind("reshape", shape=[-1]), [a]
            else:
                kind, parents = OpKind("flatten"), [a]
        rec = OPS[kind.op]
        declared = None
        if kind.op == "linear":
            declared = sa[:-1] + (payload.get(i)["W"].shape[0],)
        out = tuple(rec.shape([shapes[p] for p in parents], full_attrs(rec, kind.attrs), declared))
        nodes.append(Node(i, parents, kind, out))
        shapes.append(out)
    return Graph(nodes), payload


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_graph(), st.integers(0, 2 ** 31))
def test_valid_random_graphs_batched_equals_per_sample_and_boxes_enclose(gp, seed):
    g, payload = gp
    note(graph.listing(g))
    graph.check_shapes(g)
    graph.check_payload(g, payload)
    rng = np.random.default_rng(seed)
    xs = rng.uniform(-1, 1, size=(3, 2, 3)).astype(np.float32).astype(np.float64)
    ctx = scalars.get("binary32")
    table = graph.denote_all(g, payload, xs, ctx)
    for k in range(3):
        single = graph.denote_all(g, payload, xs[k], ctx)
        for tb, ts in zip(table, single):
            assert np.array_equal(tb[k], ts)
    # the same graph over a box around sample 0 encloses the float64 values at points
    ictx = scalars.get("interval:float64")
    from scalarlab.scalars.values import Interval
    boxes = graph.denote_all(g, payload, Interval(xs[0] - 1e-3, xs[0] + 1e-3), ictx, partial=True)
    pts = xs[0] + rng.uniform(-1e-3, 1e-3, size=(8, 2, 3))
    for v, b in zip(graph.denote_all(g, payload, pts, "float64"), boxes):
        if b is not None:
            lo, hi = np.asarray(b.lo), np.asarray(b.hi)
            slack = 1e-12 * (1 + np.abs(v))
            assert (lo <= v + slack).all() and (v - slack <= hi).all()
