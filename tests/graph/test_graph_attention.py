"""Scaled dot-product attention in the IR with batch axes: matmul of two activations
(q @ k^T), permute of the last two per-example axes, softmax, matmul with v; values vs
torch and gradients vs torch autograd through the tape."""
from __future__ import annotations

import numpy as np
import torch

from scalarlab import graph
from scalarlab.graph import Graph, Node, OpKind, Payload
from scalarlab.tape import TapeBuilder, backward

H, L, D = 2, 5, 4


def attention_graph():
    """x [H, L, D] (per example) -> softmax(q k^T / 2) v with q, k, v linear maps of x."""
    n = [Node(0, [], "input", [H, L, D]),
         Node(1, [0], OpKind("linear", out_features=D), [H, L, D]),      # q
         Node(2, [0], OpKind("linear", out_features=D), [H, L, D]),      # k
         Node(3, [0], OpKind("linear", out_features=D), [H, L, D]),      # v
         Node(4, [2], OpKind("permute", perm=[0, 2, 1]), [H, D, L]),     # k^T
         Node(5, [1, 4], "matmul", [H, L, L]),
         Node(6, [], "const", []),
         Node(7, [5, 6], "mul", [H, L, L]),
         Node(8, [7], OpKind("softmax", axis=-1), [H, L, L]),
         Node(9, [8, 3], "matmul", [H, L, D])]
    rng = np.random.default_rng(0)
    w = {i: {"W": rng.standard_normal((D, D)), "b": rng.standard_normal(D)} for i in (1, 2, 3)}
    p = Payload(dict(w))
    p.set(6, {"value": np.asarray(0.5)}, op="const")
    return Graph(n), p, w


def test_batched_attention_matches_torch_sdpa():
    g, p, w = attention_graph()
    x = np.random.default_rng(1).standard_normal((3, H, L, D))        # batch 3
    y = graph.denote(g, p, x, "float64")
    tx = torch.tensor(x)
    q, k, v = (torch.nn.functional.linear(tx, torch.tensor(w[i]["W"]), torch.tensor(w[i]["b"]))
               for i in (1, 2, 3))
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=0.5)
    np.testing.assert_allclose(y, want.numpy(), rtol=1e-12, atol=1e-13)
    # one batched call equals per-example calls
    for b in range(3):
        np.testing.assert_allclose(graph.denote(g, p, x[b], "float64"), y[b], rtol=1e-13, atol=1e-14)


def test_attention_gradients_through_the_tape_match_autograd():
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((H, L, D)) for _ in range(3))
    b = TapeBuilder("float64")
    iq, ik, iv = b.leaf(q), b.leaf(k), b.leaf(v)
    kt = b.apply("permute", ik, perm=[0, 2, 1])
    s = b.apply("softmax", b.apply("matmul", iq, kt), axis=-1)
    y = b.apply("matmul", s, iv)
    seed = rng.standard_normal((H, L, D))
    grads = backward(b.tape, y, seed=seed)
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    ty = torch.softmax(tq @ tk.transpose(-1, -2), dim=-1) @ tv
    ty.backward(torch.tensor(seed))
    for i, t in zip((iq, ik, iv), (tq, tk, tv)):
        np.testing.assert_allclose(grads[i], t.grad.numpy(), rtol=1e-12, atol=1e-13)
