"""graph.batch_layout: source transposes and reshapes that move or merge batch axes,
replayed on real arrays.  The torch ``nn.MultiheadAttention`` export sequence (batch
moved inwards, merged with the heads, moved back) is translated into IR nodes and
evaluated by the fold; the result equals torch's module.  What the IR cannot express is
refused with a message saying why."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from scalarlab import graph
from scalarlab.graph import Graph, Node, OpKind, Payload
from scalarlab.graph.batch_layout import Layout
from scalarlab.graph.optable import OPS, ShapeRuleError, full_attrs


class Builder:
    """Appends IR nodes with the op table's shape rules; values are (node id, layout)."""

    def __init__(self, eshape):
        self.nodes = [Node(0, [], "input", list(eshape))]
        self.payload = Payload()

    def add(self, op, parents, params=None, **attrs):
        rec = OPS[op]
        shape = rec.shape([self.nodes[p].out_shape for p in parents], full_attrs(rec, attrs))
        i = len(self.nodes)
        self.nodes.append(Node(i, list(parents), OpKind(op, **attrs), list(shape)))
        if params is not None:
            self.payload.set(i, params, op=op)
        return i

    def const(self, value):
        v = np.asarray(value, dtype=np.float64)
        i = len(self.nodes)
        self.nodes.append(Node(i, [], "const", list(v.shape)))
        self.payload.set(i, {"value": v}, op="const")
        return i

    def steps(self, i, steps):
        for op, attrs in steps:
            i = self.add(op, [i], **attrs)
        return i

    def canon(self, v):
        i, lay = v
        perm, lay = lay.canonical()
        return (i if perm is None else self.add("permute", [i], perm=perm)), lay

    def transpose(self, v, perm):
        return v[0], v[1].transpose(perm)

    def reshape(self, v, target, bs):
        steps, lay = v[1].reshape(target, bs)
        return self.steps(v[0], steps), lay

    def matmul_const(self, v, W):
        i, lay = self.canon(v)
        return self.add("matmul", [i, self.const(W)]), lay.resize(-1, W.shape[1])

    def add_const(self, v, c):
        i, lay = self.canon(v)
        shape, conv = lay.const_shape(np.shape(c))
        return self.add("add", [i, self.const(conv(c))]), lay

    def mul_const(self, v, c):
        i, lay = self.canon(v)
        return self.add("mul", [i, self.const(c)]), lay

    def gather0(self, v, index):
        i, lay = v
        return self.add("gather", [i], indices=index, axis=lay.axis(0, "gather")), lay.remove_axis(0)

    def matmul(self, a, b):
        pa, pb, lay = a[1].matmul(b[1])
        ia = a[0] if pa is None else self.add("permute", [a[0]], perm=pa)
        ib = b[0] if pb is None else self.add("permute", [b[0]], perm=pb)
        return self.add("matmul", [ia, ib]), lay

    def softmax(self, v, axis):
        return self.add("softmax", [v[0]], axis=v[1].axis(axis, "softmax")), v[1]

    def graph(self, out):
        return Graph(self.nodes, out)


def mha_by_layouts(m, L, E, H, N):
    """The IR graph of torch's MHA export (batch_first): the source ops of
    ``torch.onnx.export(nn.MultiheadAttention)`` replayed through Layout.  ``N`` is the
    batch size the source reshape targets were computed with."""
    hd = E // H
    Win = m.in_proj_weight.detach().numpy().T              # [E, 3E]
    bin_ = m.in_proj_bias.detach().numpy()
    Wo = m.out_proj.weight.detach().numpy().T
    bo = m.out_proj.bias.detach().numpy()
    b = Builder((L, E))
    x = (0, Layout.leading(1, (L, E)))
    t = b.transpose(x, [1, 0, 2])                          # [L, N, E]
    qkv = b.add_const(b.matmul_const(t, Win), bin_)        # [L, N, 3E]
    qkv = b.reshape(qkv, [L, N, 3, E], [N])                # unflatten
    qkv = b.reshape(qkv, [1, L, N, 3, E], [N])             # unsqueeze(0)
    qkv = b.transpose(qkv, [3, 1, 2, 0, 4])                # [3, L, N, 1, E]
    qkv = b.reshape(qkv, [3, L, N, E], [N])                # squeeze(3)
    heads = []
    for k in range(3):
        u = b.gather0(qkv, k)                              # [L, N, E]
        u = b.reshape(u, [L, N * H, hd], [N])
        heads.append(b.transpose(u, [1, 0, 2]))            # [N*H, L, hd]
    q, k_, v = heads
    q = b.mul_const(q, 1 / np.sqrt(hd))
    kt = b.transpose(k_, [0, 2, 1])                        # [N*H, hd, L]
    att = b.softmax(b.matmul(q, kt), -1)                   # [N*H, L, L]
    o = b.matmul(att, v)                                   # [N*H, L, hd]
    o = b.transpose(o, [1, 0, 2])                          # [L, N*H, hd]
    o = b.reshape(o, [L * N, E], [N])
    o = b.add_const(b.matmul_const(o, Wo), bo)
    o = b.reshape(o, [L, N, E], [N])
    o = b.transpose(o, [1, 0, 2])                          # [N, L, E]
    o = b.canon(o)
    return b.graph(o[0]), b.payload, o[1]


@pytest.mark.parametrize("N", [3, 4])
def test_multihead_attention_export_sequence_through_layouts(N):
    torch.manual_seed(0)
    L, E, H = 5, 8, 2
    m = torch.nn.MultiheadAttention(E, H, batch_first=True).double().eval()
    g, p, out = mha_by_layouts(m, L, E, H, N)
    assert out.is_leading()
    x = np.random.default_rng(0).standard_normal((N, L, E))
    y = graph.denote(g, p, x, "float64")
    want = m(*(torch.tensor(x),) * 3, need_weights=False)[0].detach().numpy()
    np.testing.assert_allclose(out.to_source(y), want, rtol=1e-12, atol=1e-13)
    # the graph is per example: another batch size evaluates the same model
    x2 = np.random.default_rng(1).standard_normal((2, L, E))
    want2 = m(*(torch.tensor(x2),) * 3, need_weights=False)[0].detach().numpy()
    np.testing.assert_allclose(graph.denote(g, p, x2, "float64"), want2, rtol=1e-12, atol=1e-13)


def test_reshape_and_transpose_bookkeeping_replays_numpy():
    """Random-ish source chains on a real batched array: the IR steps plus to_source
    reproduce numpy's transpose/reshape exactly."""
    N = 3
    x = np.arange(N * 4 * 6, dtype=np.float64).reshape(N, 4, 6)
    b = Builder((4, 6))
    v = (0, Layout.leading(1, (4, 6)))
    src = x
    for op, arg in [("t", [2, 0, 1]), ("r", [3, 2, N * 4]), ("t", [2, 1, 0]), ("r", [N, 4, 2, 3]),
                    ("t", [0, 3, 1, 2]), ("r", [N * 3, 8])]:
        if op == "t":
            v, src = b.transpose(v, arg), np.transpose(src, arg)
        else:
            v, src = b.reshape(v, arg, [N]), src.reshape(arg)
        y = graph.denote(b.graph(v[0]), b.payload, x, "float64")
        assert np.array_equal(v[1].to_source(y), src)


def test_residual_add_in_a_moved_layout():
    """[N, L, E] -> [L, N, E]; y = t + relu(t) with both operands in the moved layout."""
    N, L, E = 3, 4, 5
    x = np.random.default_rng(3).standard_normal((N, L, E))
    b = Builder((L, E))
    t = b.transpose((0, Layout.leading(1, (L, E))), [1, 0, 2])
    r = (b.add("relu", [t[0]]), t[1])
    pa, pb, lay = t[1].binary(r[1], "add")
    assert pa is None and pb is None
    y = (b.add("add", [t[0], r[0]]), lay)
    got = y[1].to_source(graph.denote(b.graph(y[0]), b.payload, x, "float64"))
    tx = np.transpose(x, (1, 0, 2))
    assert np.array_equal(got, tx + np.maximum(tx, 0))
    with pytest.raises(ShapeRuleError, match=r"add: the batch axes sit differently"):
        t[1].binary(Layout.leading(1, (L, E)), "add")


def test_what_the_ir_cannot_express_is_refused_with_the_reason():
    lay = Layout.leading(1, (4, 6)).transpose([1, 0, 2])          # [4, N, 6]
    with pytest.raises(ShapeRuleError, match=r"softmax: source axis 1 holds a batch axis \(layout \[e0, b0, e1\]\): the op would mix examples"):
        lay.axis(1, "softmax")
    with pytest.raises(ShapeRuleError, match=r"reshape: the source reshape \[4, 3, 6\] -> \[4, 2, 9\] .* splits batch axis 0 \(of size 3\)"):
        lay.reshape([4, 2, 9], [3])
    with pytest.raises(ShapeRuleError, match=r"cuts through per-example factors merged with a batch axis"):
        Layout.leading(1, (6, 4)).transpose([1, 0, 2]).reshape([4, 18], [3])
    with pytest.raises(ShapeRuleError, match=r"batch sizes \[1\] must be >= 2"):
        lay.reshape([4, 6], [1])
    with pytest.raises(ShapeRuleError, match=r"matmul: the batch axes sit differently in the operands"):
        Layout.leading(1, (2, 4, 6)).matmul(Layout.leading(1, (2, 6, 5)).transpose([1, 0, 2, 3]))
    merged = lay.reshape([4 * 3, 6], [3])[1]                      # [4*N, 6]
    assert str(merged) == "[e0*b0, e1]"
    with pytest.raises(ShapeRuleError, match=r"constant varies along a source axis that holds a batch axis"):
        merged.const_shape((12, 1))
    shape, conv = merged.const_shape((6,))
    assert shape == (1, 6) and conv(np.arange(6.0)).shape == (1, 6)


def _random_target(rng, shape, N):
    """A random reshape target of the same size: regroup the prime factors of the
    per-example size around the batch axis N (kept whole, possibly merged)."""
    total = int(np.prod(shape))
    rest = total // N
    factors = []
    k = rest
    for p in (2, 3, 5, 7):
        while k % p == 0:
            factors.append(p)
            k //= p
    rng.shuffle(factors)
    cut = sorted(rng.choice(len(factors) + 1, size=rng.integers(0, 3), replace=True))
    dims, prev = [], 0
    for c in list(cut) + [len(factors)]:
        dims.append(int(np.prod(factors[prev:c])) if c > prev else 1)
        prev = c
    dims = [d for d in dims if d != 1] or [1]
    pos = rng.integers(0, len(dims) + 1)
    if rng.random() < 0.5 and dims:                       # merge N with a neighbour
        j = min(pos, len(dims) - 1)
        dims[j] *= N
    else:
        dims.insert(pos, N)
    return dims


def test_random_transpose_reshape_chains_replay_numpy_or_are_refused():
    """Random chains: every accepted step reproduces numpy exactly; refusals are
    ShapeRuleErrors (the chain stops there)."""
    N = 7
    accepted = refused = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        eshape = (4, 6, 5)
        x = np.arange(N * 120, dtype=np.float64).reshape((N,) + eshape)
        b = Builder(eshape)
        v = (0, Layout.leading(1, eshape))
        src = x
        for _ in range(5):
            if rng.random() < 0.5:
                perm = list(rng.permutation(src.ndim))
                v, src = b.transpose(v, perm), np.transpose(src, perm)
            else:
                target = _random_target(rng, src.shape, N)
                try:
                    v = b.reshape(v, target, [N])
                except ShapeRuleError:
                    refused += 1
                    break
                src = src.reshape(target)
            accepted += 1
            y = graph.denote(b.graph(v[0]), b.payload, x, "float64")
            assert np.array_equal(v[1].to_source(y), src)
    print(f"accepted {accepted} steps, refused {refused} chains")
    assert accepted > 100 and refused < accepted
