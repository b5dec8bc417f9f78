"""checkpoint(f, x): recomputation in the reverse pass, same gradients, fewer tape nodes."""
from __future__ import annotations

import numpy as np
import pytest

from scalarlab.tape import EagerOps, Session, grad
from scalarlab.tape.training.recompute import checkpoint

RNG = np.random.default_rng(5)
W = [RNG.normal(size=(4, 4)) / 2 for _ in range(6)]
B = [RNG.normal(size=4) for _ in range(6)]
X0 = RNG.normal(size=(3, 4))


def _run(ctx, use_ck, calls):
    def seg(ops, h, *wb):
        calls.append(ops.interpreter)
        for w, b in zip(wb[0::2], wb[1::2]):
            h = ops.tanh(ops.linear(h, w, b)) if ctx != "rational" else \
                ops.relu(ops.linear(h, w, b))
        return h

    s = Session(ctx)
    ops = EagerOps(s)
    ws = [s.leaf(w, "W") for w in W]
    bs = [s.leaf(b, "b") for b in B]
    h = s.leaf(X0, "x")
    for i in (0, 3):
        args = [a for j in range(i, i + 3) for a in (ws[j], bs[j])]
        h = checkpoint(ops, seg, h, *args) if use_ck else seg(ops, h, *args)
    out = ops.sum(ops.mul(h, h))
    g = s.backward(out)
    return s, s.value(out), [g[s.resolve(w)] for w in ws] + [g[s.resolve(b)] for b in bs] + \
        [g[s.resolve(ops.session._handle(12))]]


@pytest.mark.parametrize("ctx", ["float64", "binary32", "rational"])
def test_same_gradients_and_real_recomputation(ctx):
    plain_calls, ck_calls = [], []
    s0, v0, g0 = _run(ctx, False, plain_calls)
    s1, v1, g1 = _run(ctx, True, ck_calls)
    assert (v0 == v1) if ctx == "rational" else np.array_equal(v0, v1)
    for a, b in zip(g0, g1):
        assert (np.asarray(a) == np.asarray(b)).all()
    # intermediates of f are not on the tape: one node per segment instead of six
    assert len(s0.tape) == 13 + 12 + 2 and len(s1.tape) == 13 + 2 + 2
    assert [n for n, _ in s1.tape.nodes()].count("checkpoint") == 2
    # f ran once per segment forward (plain: nothing recorded) and once more per segment
    # in the reverse pass (eager: recorded on a private tape), last segment first
    assert plain_calls == ["eager", "eager"]
    assert ck_calls == ["plain", "plain", "eager", "eager"]


def test_checkpoint_inside_transforms_records_inline():
    def prog(ops, x, w, b):
        return ops.sum(checkpoint(ops, lambda o, h, ww, bb: o.tanh(o.linear(h, ww, bb)), x, w, b))

    def ref(ops, x, w, b):
        return ops.sum(ops.tanh(ops.linear(x, w, b)))
    got = grad(prog, "float64", argnums=(1, 2))(X0, W[0], B[0])
    want = grad(ref, "float64", argnums=(1, 2))(X0, W[0], B[0])
    for a, b in zip(got, want):
        assert np.array_equal(a, b)


def test_checkpoint_lowers_peak_memory():
    """tracemalloc: a deep tanh MLP keeps far less alive when its segments are recomputed."""
    import tracemalloc
    rng = np.random.default_rng(2)
    depth, width = 12, 64
    Ws = [rng.normal(size=(width, width)) / 8 for _ in range(depth)]
    bs = [rng.normal(size=width) for _ in range(depth)]
    x0 = rng.normal(size=(128, width))

    def seg(ops, h, *wb):
        for w, b in zip(wb[0::2], wb[1::2]):
            h = ops.tanh(ops.linear(h, w, b))
        return h

    def peak(use_ck):
        tracemalloc.start()
        s = Session("float64")
        ops = EagerOps(s)
        ws = [s.leaf(w, "W") for w in Ws]
        b_ = [s.leaf(b, "b") for b in bs]
        h = s.const(x0, "x")
        for i in range(0, depth, 4):
            args = [a for j in range(i, i + 4) for a in (ws[j], b_[j])]
            h = checkpoint(ops, seg, h, *args) if use_ck else seg(ops, h, *args)
        g = s.backward(ops.sum(ops.mul(h, h)))
        grads = [g[s.resolve(w)] for w in ws]
        p = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return p, grads

    p0, g0 = peak(False)
    p1, g1 = peak(True)
    assert all(np.array_equal(a, b) for a, b in zip(g0, g1))
    assert p1 < 0.6 * p0, (p0, p1)


def test_checkpointed_layer_trains_identically():
    from scalarlab.tape.training.layers import Dropout, Linear, Sequential, Tanh
    from scalarlab.tape.training.optim import SGD
    from scalarlab.tape.training.recompute import Checkpointed
    from scalarlab.tape.training.trainer import TrainingSession as Trainer
    from scalarlab.tape.errors import TapeError
    x, y = RNG.normal(size=(6, 4)), RNG.normal(size=(6, 2))

    def run(model, ex):
        s = Trainer(model, "float64", SGD("0.1", "0.9"), execution=ex, seed=3)
        return s, [s.step(x, y) for _ in range(3)]
    a, la = run(Sequential(Linear(4, 5), Tanh(), Linear(5, 5), Tanh(), Linear(5, 2)), "eager")
    m = Sequential(Linear(4, 5), Tanh(), Checkpointed(Sequential(Linear(5, 5), Tanh())),
                   Linear(5, 2))
    b, lb = run(m, "eager")
    c, lc = run(m, "typed-graph")
    assert b.param_names()[2:4] == ["2.inner.0.weight", "2.inner.0.bias"]
    assert la == lb == lc
    for pa, pb in zip(a.params.values(), b.params.values()):
        assert np.array_equal(pa, pb)
    bad = Trainer(Sequential(Checkpointed(Sequential(Linear(4, 4), Dropout("0.5")))), "float64")
    with pytest.raises(TapeError, match="random draw inside a checkpointed module"):
        bad.step(x, RNG.normal(size=(6, 4)))
