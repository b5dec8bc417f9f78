"""binary32 values stored as float32 (scalars.binary32_store) change no value: every op's
forward, VJP and JVP rule, a whole-graph fold and a tape MLP step give the same bits in
``binary32`` (float32 storage, hardware float32 arithmetic) as in the emulated binary32
context of float64 storage (float64 operation + one rounding per op, the path the
MPFR-checked arithmetic tests pin down), with batch axes too."""
from __future__ import annotations

import numpy as np
import pytest

from scalarlab import graph
from scalarlab import scalars
from scalarlab.graph.optable import OPS, full_attrs
from scalarlab.scalars.binary import BinaryContext
from scalarlab.scalars.binary32_store import Float32Storage
from scalarlab.tape import TapeBuilder, backward

from graph_opcases import CASES, draw, make_args


def emulated(name="binary32"):
    """The binary32 context as it was before float32 storage: float64 arrays, every op
    emulated (no hardware float32 path)."""
    fast = scalars.get(name)
    ref = object.__new__(BinaryContext)
    ref.__init__("binary32", fma_dot=fast.fma_dot, reduction=fast.reduction)
    ref._hw32 = False
    assert not isinstance(ref, Float32Storage)
    return ref


def bits(ctx, v):
    """float64 bit patterns of a context value (None, lists of values: elementwise)."""
    if v is None:
        return None
    if isinstance(v, (list, tuple)):
        return [bits(ctx, t) for t in v]
    a = np.asarray(ctx.to_float64(v), dtype=np.float64)
    return np.where(np.isnan(a), np.nan, a).view(np.int64).tolist()   # NaN: any payload


def check_same(fast, ref, what, got, want):
    assert bits(fast, got) == bits(ref, want), what


DIFF = [c for c in CASES if c["op"] != "detach"]


@pytest.mark.parametrize("c", DIFF, ids=lambda c: c["name"])
def test_every_op_rule_gives_the_emulated_bits(c):
    fast, ref = scalars.get("binary32"), emulated()
    rng = np.random.default_rng(17)
    batch = () if c["per_sample"] else (2,)
    parents, params = make_args(c, rng, batch)
    raw = parents + params
    names = [None] * len(parents) + list(c["params"])
    rec = OPS[c["op"]]
    attrs = full_attrs(rec, c["attrs"])
    nb = len(batch)
    tans = [None if n == "eps" else draw(np.shape(a), rng) for a, n in zip(raw, names)]
    out = {}
    for ctx in (fast, ref):
        args = [ctx.convert(a) for a in raw]
        y = rec.forward(ctx, args, attrs, nb)
        g = ctx.convert(draw(np.shape(ctx.to_float64(y)), rng=np.random.default_rng(3)))
        vj = rec.vjp(ctx, g, args, y, attrs, nb) if rec.vjp else None
        jv = rec.jvp(ctx, args, [None if t is None else ctx.convert(t) for t in tans], y,
                     attrs, nb) if rec.jvp else None
        out[ctx] = (y, vj, jv)
        if ctx is fast:
            assert np.asarray(y).dtype == np.float32, f"{c['name']}: storage"
    for k, what in enumerate(("forward", "vjp", "jvp")):
        check_same(fast, ref, f"{c['name']} {what}", out[fast][k], out[ref][k])


@pytest.mark.parametrize("name", ["binary32", "binary32+fma", "binary32/pairwise"])
def test_tape_mlp_step_and_graph_fold_give_the_emulated_bits(name):
    """A relu MLP step (linear, relu, mse) forward and backward on the tape, and the fold
    of a 3-layer MLP graph with a batch axis, in each reduction order."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import benchlib
    fast, ref = scalars.get(name), emulated(name)
    rng = np.random.default_rng(5)
    f32 = lambda *s: (rng.standard_normal(s) * 0.5).astype(np.float32)   # noqa: E731
    params = [f32(24, 40), f32(24), f32(5, 24), f32(5)]
    x, y = f32(16, 40), f32(16, 5)
    res = {}
    for ctx in (fast, ref):
        args = params if ctx is fast else [p.astype(np.float64) for p in params]
        res[ctx] = benchlib.mlp_tape(ctx, args, x if ctx is fast else x.astype(np.float64),
                                     y if ctx is fast else y.astype(np.float64))
    check_same(fast, ref, "loss", res[fast][0], res[ref][0])
    check_same(fast, ref, "grads", res[fast][1], res[ref][1])
    assert all(np.asarray(g).dtype == np.float32 for g in res[fast][1])
    g, p = benchlib.mlp_graph([40, 32, 24, 5], rng)
    xs = rng.standard_normal((9, 40)).astype(np.float32).astype(np.float64)
    vf = graph.denote_all(g, p, xs, fast)
    vr = graph.denote_all(g, p, xs, ref)
    assert len(vf) == len(vr) and all(np.asarray(v).dtype == np.float32 for v in vf)
    check_same(fast, ref, "fold", list(vf), list(vr))


def test_tape_builder_accepts_each_input_kind():
    """Leaves given as float32 storage, float64 member arrays or exact decimals: the same
    step, the same bits."""
    ctx = scalars.get("binary32")
    rng = np.random.default_rng(8)
    w32 = rng.standard_normal((3, 4)).astype(np.float32)
    outs = []
    for w in (w32, w32.astype(np.float64), np.array([[repr(float(v)) for v in r] for r in w32],
                                                    dtype=object)):
        b = TapeBuilder(ctx)
        wi = b.leaf(w, name="w")
        s = b.apply("reduce_sum", b.apply("tanh", wi), axis=[0, 1])
        gr = backward(b.tape, s)
        outs.append((bits(ctx, b.tape.value(s)), bits(ctx, gr[wi])))
        assert b.tape.value(wi).dtype == np.float32
    assert outs[0] == outs[1] == outs[2]
