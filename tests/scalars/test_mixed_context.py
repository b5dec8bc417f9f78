"""Mixed precision contexts STORAGE@ACCUM (scalars/mixed.py) against MPFR and torch.

The oracle for every rounding: gmpy2 contexts of the accumulation format (each product
and each partial sum, left to right) and of the storage format (the final result).
"""
from fractions import Fraction

import gmpy2
import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.scalars import formats
from scalarlab.scalars.errors import ContextError


def _values(ctx, rng, shape, spread=4):
    """Storage values with magnitudes over 2^-spread..2^spread and cancellation."""
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-spread, spread + 1, shape))
    return ctx.convert(x)


def _oracle_dot(xs, ys, sfmt, afmt, fused):
    """MPFR: sequential dot product in ``afmt`` (one rounding per product and per addition,
    or per multiply-add), the result rounded once onto ``sfmt``."""
    with gmpy2.context(formats.gmpy2_context(afmt)) as actx:
        s = actx.mul(gmpy2.mpfr(float(xs[0])), gmpy2.mpfr(float(ys[0])))
        for x, y in zip(xs[1:], ys[1:]):
            x, y = gmpy2.mpfr(float(x)), gmpy2.mpfr(float(y))
            s = actx.fma(x, y, s) if fused else actx.add(s, actx.mul(x, y))
    with gmpy2.context(formats.gmpy2_context(sfmt)) as sctx:
        return float(sctx.mul(s, 1))


def _oracle_sum(xs, sfmt, afmt):
    with gmpy2.context(formats.gmpy2_context(afmt)) as actx:
        s = gmpy2.mpfr(float(xs[0]))
        for x in xs[1:]:
            s = actx.add(s, gmpy2.mpfr(float(x)))
    with gmpy2.context(formats.gmpy2_context(sfmt)) as sctx:
        return float(sctx.mul(s, 1))


CASES = [("bfloat16@binary32", False), ("binary16@binary32", False),
         ("bfloat16@binary32+fma", True), ("binary32@binary64", False)]


@pytest.mark.parametrize("name,fused", CASES)
def test_matmul_and_sum_against_mpfr(name, fused):
    ctx = scalars.get(name)
    sfmt, afmt = ctx.fmt, ctx.accumulation
    rng = np.random.default_rng(7)
    a = _values(ctx, rng, (3, 40))
    b = _values(ctx, rng, (40, 4))
    got = ctx.matmul(a, b)
    want = np.array([[_oracle_dot(a[i], b[:, j], sfmt, afmt, fused) for j in range(4)]
                     for i in range(3)])
    np.testing.assert_array_equal(got, want)
    s = ctx.sum(a, axis=1)
    np.testing.assert_array_equal(s, [_oracle_sum(a[i], sfmt, afmt) for i in range(3)])
    # the plain storage context rounds every addition: it differs somewhere here
    plain = scalars.get(sfmt.name)
    assert not np.array_equal(plain.matmul(a, b), got) or sfmt == formats.binary32


def _oracle_dot_bias(xs, ys, bias, sfmt, afmt, fused):
    """MPFR: the sequential ACCUM dot product of :func:`_oracle_dot`, then ``+ bias`` in
    ACCUM (one more rounding), then one rounding onto STORAGE (torch's biased layer)."""
    with gmpy2.context(formats.gmpy2_context(afmt)) as actx:
        s = actx.mul(gmpy2.mpfr(float(xs[0])), gmpy2.mpfr(float(ys[0])))
        for x, y in zip(xs[1:], ys[1:]):
            x, y = gmpy2.mpfr(float(x)), gmpy2.mpfr(float(y))
            s = actx.fma(x, y, s) if fused else actx.add(s, actx.mul(x, y))
        s = actx.add(s, gmpy2.mpfr(float(bias)))
    with gmpy2.context(formats.gmpy2_context(sfmt)) as sctx:
        return float(sctx.mul(s, 1))


def _cancelling_bias(ctx, x, W, rng):
    """Storage biases near -(x W^T) (the products' sum cancels against them, where the
    one rounding matters most), some large, some small."""
    s = np.asarray(x, dtype=np.float64) @ np.asarray(W, dtype=np.float64).T
    b = -s.reshape(-1, s.shape[-1])[0] * (1 + rng.uniform(-2.0 ** -6, 2.0 ** -6, s.shape[-1]))
    b[::3] = rng.standard_normal(len(b[::3])) * 16
    return ctx.convert(b)


@pytest.mark.parametrize("name,fused", CASES)
def test_linear_adds_its_bias_in_the_accumulator(name, fused):
    """linear (and so ONNX Gemm) in STORAGE@ACCUM: each output is the ACCUM dot product
    plus the bias, rounded in ACCUM, then rounded once onto STORAGE -- against MPFR; the
    plain STORAGE context keeps its separately rounded bias add."""
    from scalarlab.graph import Graph, Node, denote
    ctx = scalars.get(name)
    sfmt, afmt = ctx.fmt, ctx.accumulation
    rng = np.random.default_rng(11)
    x = _values(ctx, rng, (3, 24))
    W = _values(ctx, rng, (5, 24))
    b = _cancelling_bias(ctx, x, W, rng)
    g = Graph([Node(0, [], "input", [24]), Node(1, [0], "linear", [5])])
    got = ctx.to_float64(denote(g, {1: {"linear": {"W": W, "b": b}}}, x, ctx))
    want = np.array([[_oracle_dot_bias(x[i], W[j], b[j], sfmt, afmt, fused)
                      for j in range(5)] for i in range(3)])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(ctx.matmul_add(x, W.T, b), want)
    plain = scalars.get(sfmt.name)
    p64 = plain.to_float64
    # a plain context adds a bias after the product's rounding (the base matmul_add)
    after = p64(plain.add(plain.matmul(plain.convert(x), plain.convert(W.T)), plain.convert(b)))
    np.testing.assert_array_equal(
        p64(plain.matmul_add(plain.convert(x), plain.convert(W.T), plain.convert(b))), after)
    np.testing.assert_array_equal(
        p64(denote(g, {1: {"linear": {"W": W, "b": b}}}, x, plain)), after)
    if sfmt != formats.binary32:
        # rounding the product onto STORAGE before the bias add gives other values here
        assert not np.array_equal(ctx.add(ctx.matmul(x, W.T), b), want)


def test_conv_adds_its_bias_in_the_accumulator():
    """conv2d with groups in bfloat16@binary32: the dot product over each window in the
    im2col order (channel, row, column), + bias in binary32, one rounding -- MPFR."""
    from scalarlab.graph import Graph, Node, OpKind, denote
    ctx = scalars.get("bfloat16@binary32")
    rng = np.random.default_rng(5)
    x = _values(ctx, rng, (4, 5, 5))
    w = _values(ctx, rng, (4, 2, 3, 3))
    b = ctx.convert(rng.standard_normal(4) * 8)
    g = Graph([Node(0, [], "input", [4, 5, 5]),
               Node(1, [0], OpKind("conv2d", kernel_size=3, groups=2), [4, 3, 3])])
    got = ctx.to_float64(denote(g, {1: {"conv2d": {"weight": w, "bias": b}}}, x, ctx))
    want = np.empty((4, 3, 3))
    for o in range(4):
        c0 = 2 * (o // 2)                           # the output's group's channels
        for i in range(3):
            for j in range(3):
                win = x[c0:c0 + 2, i:i + 3, j:j + 3].reshape(-1)
                want[o, i, j] = _oracle_dot_bias(win, w[o].reshape(-1), b[o], ctx.fmt,
                                                 ctx.accumulation, False)
    np.testing.assert_array_equal(got, want)


def test_matmul_bias_refuses_what_does_not_broadcast():
    ctx = scalars.get("bfloat16@binary32")
    with pytest.raises(ContextError, match=r"bfloat16@binary32: matmul_add: bias of shape \[3\] "
                                           r"does not broadcast onto the product's shape \[2, 4\]"):
        ctx.matmul_add(np.zeros((2, 3)), np.zeros((3, 4)), np.zeros(3))
    with pytest.raises(ContextError, match=r"bfloat16@binary32: matmul_add: bias holds 0.1 at "
                                           r"index \(0,\), which is not a bfloat16 value"):
        ctx.matmul_add(np.zeros((2, 3)), np.zeros((3, 4)), np.full(4, 0.1))


def test_double_rounding_is_torch_s_not_the_correct_rounding():
    """A sum whose binary32 result sits just above a bfloat16 tie: 1 + 2^-8 + 2^-30 is
    rounded to binary32 as 1 + 2^-8 (a tie in bfloat16, to even: 1), while the exact sum
    rounds to 1 + 2^-7 in one step."""
    ctx = scalars.get("bfloat16@float32")
    x = np.array([1.0, 2.0 ** -8, 2.0 ** -30])
    assert float(ctx.sum(x)) == 1.0
    assert float(scalars.get("bfloat16").convert(Fraction(1) + Fraction(1, 2 ** 8)
                                                 + Fraction(1, 2 ** 30))) == 1 + 2 ** -7
    one = ctx.sum(np.array([-0.0]))
    assert float(one) == 0.0 and np.signbit(one)              # the first term starts the sum


def test_elementwise_ops_round_to_storage():
    ctx, plain = scalars.get("binary16@binary32"), scalars.get("binary16")
    rng = np.random.default_rng(3)
    a, b = _values(ctx, rng, (50,)), _values(ctx, rng, (50,))
    for op in ("add", "mul", "div"):
        np.testing.assert_array_equal(getattr(ctx, op)(a, b), getattr(plain, op)(a, b))
    np.testing.assert_array_equal(ctx.exp(a / 8), plain.exp(a / 8))
    with pytest.raises(ContextError, match="binary16@binary32: add: .* not a binary16 value"):
        ctx.add(np.array([0.1]), a[:1])


def test_names_aliases_listing_and_refusals():
    assert {"bfloat16@binary32", "binary16@binary32"} <= set(scalars.names())
    assert "STORAGE@ACCUM" in scalars.family_examples()
    assert scalars.get("bf16@fp32") is scalars.get("bfloat16@float32")
    assert scalars.get("bf16@fp32").name == "bfloat16@binary32"
    assert scalars.get("half@float32+fma").name == "binary16@binary32+fma"
    assert scalars.get("binary32@float64").accumulation == formats.binary64
    assert scalars.get("e4m3@binary32").properties()["accumulation"] == "binary32"
    c = scalars.get("bfloat16@binary32")
    assert (c.kind, c.reduction, c.fmt, c.accumulation) == ("mixed", "sequential",
                                                            formats.bfloat16, formats.binary32)
    assert scalars.get("bfloat16").accumulation is None
    from scalarlab.experiments.commands.contexts import collect
    rows = {r["name"]: r for r in collect()[0]}
    assert rows["bfloat16@binary32"]["reduction"] == "sequential@binary32"
    assert rows["binary16@binary32"]["accumulation"] == "binary32"
    assert rows["e4m3@binary32"]["kind"] == "mixed"
    with pytest.raises(ContextError, match=r"bfloat16@binary16: .*p >= 2\*8\+2 = 18"):
        scalars.get("bfloat16@binary16")
    with pytest.raises(ContextError, match="unknown context 'bfloat16@nope'"):
        scalars.get("bfloat16@nope")
    with pytest.raises(ContextError, match="bfloat16@binary32: matmul: shapes"):
        c.matmul(np.zeros((2, 3)), np.zeros((2, 3)))


def _net(seed):
    """conv1d -> relu -> flatten -> linear -> softmax -> mul by a constant -> reduce_sum:
    every kind of reduction the mixed context changes (dot products, sums)."""
    from scalarlab.graph import Graph, Node, OpKind
    rng = np.random.default_rng(seed)
    g = Graph([Node(0, [], "input", [2, 9]),
               Node(1, [0], OpKind("conv1d", kernel_size=3), [4, 7]),
               Node(2, [1], "relu", [4, 7]),
               Node(3, [2], "flatten", [28]),
               Node(4, [3], "linear", [6]),
               Node(5, [4], OpKind("softmax", axis=0), [6]),
               Node(6, [], "const", [6]),
               Node(7, [5, 6], "mul", [6]),
               Node(8, [7], OpKind("reduce_sum", axis=[0]), [])])
    p = {1: {"conv1d": {"weight": rng.normal(0, 0.6, (4, 2, 3)), "bias": rng.normal(0, 0.1, 4)}},
         4: {"linear": {"W": rng.normal(0, 0.3, (6, 28)), "b": rng.normal(0, 0.1, 6)}},
         6: {"const": {"value": rng.uniform(-2, 2, 6)}}}
    return g, p


def test_interval_over_a_mixed_base_holds_its_point_runs():
    """interval:bfloat16@float32 is the bfloat16 interval context whose execution
    guarantee speaks of the mixed point context: sampled runs stay inside every IBP box
    and every CROWN box."""
    from scalarlab.ibp.box import Box
    from scalarlab.ibp.containment import check_containment
    from scalarlab.ibp.crown import run_crown

    ictx = scalars.get("interval:bf16@fp32")
    assert ictx.name == "interval:bfloat16@binary32" and ictx.fmt == formats.bfloat16
    assert ictx.has_base(scalars.get("bfloat16@binary32"))
    g, p = _net(3)
    x = np.random.default_rng(4).normal(0, 1, (2, 9))
    box = Box.from_center_radius(x, 0.02)
    rep = check_containment(g, p, box, samples=30, point_ctx="bfloat16@binary32",
                            vertices=False)
    assert rep.interval_context == "interval:bfloat16@binary32"
    assert rep.first_counterexample() is None and not rep.violations and not rep.failures
    crown = run_crown(g, p, box, ctx=ictx, method="crown")
    rep = check_containment(g, p, box, samples=30, point_ctx="bfloat16@binary32",
                            vertices=False, boxes=crown, seed=1)
    assert rep.first_counterexample() is None and not rep.violations


@pytest.mark.parametrize("name", ["bfloat16@binary32", "binary32@binary64"])
def test_interval_boxes_hold_the_bias_in_the_accumulator(name):
    """Biases that cancel the layer's sums at the box centre (the case where one rounding
    after the bias differs most from rounding the product first): IBP's and CROWN's
    execution-sound boxes over interval:STORAGE@ACCUM (bfloat16: mirrored endpoint
    products; binary32: midpoint-radius plus the gamma_n bound, n counting the bias) hold
    every sampled point run, vertices included.  The samples do take the new path: the
    old composition (product rounded onto STORAGE, then the bias added) differs."""
    from scalarlab.graph import Graph, Node, OpKind, denote
    from scalarlab.ibp.box import Box
    from scalarlab.ibp.containment import check_containment
    from scalarlab.ibp.crown import run_crown

    ctx = scalars.get(name)
    rng = np.random.default_rng(2)
    x = _values(ctx, rng, (2, 6), spread=2)
    w = _values(ctx, rng, (3, 2, 3), spread=2)
    b1 = ctx.convert(-np.asarray(x[:, :3]).reshape(-1) @ np.asarray(w).reshape(3, -1).T
                     * (1 + 2.0 ** -9))                # cancels output position 0
    W = _values(ctx, rng, (4, 12), spread=2)
    b2 = ctx.convert(rng.standard_normal(4) * 4)
    g = Graph([Node(0, [], "input", [2, 6]),
               Node(1, [0], OpKind("conv1d", kernel_size=3), [3, 4]),
               Node(2, [1], "flatten", [12]),
               Node(3, [2], "linear", [4])])
    p = {1: {"conv1d": {"weight": w, "bias": b1}}, 3: {"linear": {"W": W, "b": b2}}}
    box = Box.from_center_radius(np.asarray(x, dtype=np.float64), 2.0 ** -7)
    ictx = scalars.get(f"interval:{name}")
    for boxes in (None, run_crown(g, p, box, ctx=ictx, method="crown")):
        rep = check_containment(g, p, box, samples=40, point_ctx=name, boxes=boxes)
        assert rep.first_counterexample() is None and not rep.violations and not rep.failures
    from scalarlab.scalars.mixed import MixedContext
    old = MixedContext(ctx.fmt.name, ctx.accumulation.name)
    # the composition before the bias went into the accumulator: add after the product
    old.matmul_add = lambda a, b, c: old.add(old.matmul(a, b), c)
    y, y_old = (c.to_float64(denote(g, p, x, c, output_id=1)) for c in (ctx, old))
    assert not np.array_equal(y, y_old)


@pytest.mark.slow       # imports torch and traces modules: several seconds of CPU
def test_torch_bfloat16_matmul_conv_and_biased_layers_agree():
    """torch 2.13 CPU accumulates bfloat16 matmul/conv in float32, adds a layer's bias in
    float32 and rounds once: bit for bit the lab's bfloat16@binary32 -- matmul, sum, and
    Linear / Conv2d (grouped too) / Conv1d with and without a bias.  (Before the bias went
    into the accumulator the biased layers agreed on 70-73 % of their outputs.)"""
    import torch
    from scalarlab.graph import denote
    from scalarlab.graph.importers.torch_fx import from_torch

    ctx = scalars.get("bfloat16@binary32")
    g = torch.Generator().manual_seed(0)

    def bf(*shape):
        return torch.randn(*shape, generator=g).bfloat16()

    a, b = bf(8, 64), bf(64, 5)
    np.testing.assert_array_equal(ctx.matmul(a.double().numpy(), b.double().numpy()),
                                  (a @ b).double().numpy())
    x = bf(32)
    assert float(ctx.sum(x.double().numpy())) == float(x.sum())
    torch.manual_seed(0)
    nn = torch.nn
    layers = [(nn.Conv2d(3, 4, 3, bias=False), bf(2, 3, 6, 6)),
              (nn.Conv2d(8, 16, 3), bf(4, 8, 12, 12)),
              (nn.Conv2d(8, 16, 3, groups=2, padding=1), bf(2, 8, 7, 7)),
              (nn.Conv1d(8, 16, 3), bf(4, 8, 12)),
              (nn.Linear(512, 64), bf(16, 512)),
              (nn.Linear(64, 10, bias=False), bf(16, 64))]
    for mod, xi in layers:
        m = nn.Sequential(mod).bfloat16().double()
        with torch.no_grad():
            want = m.bfloat16()(xi).double().numpy()
        gr, pl = from_torch(m.double(), xi.double(), batch_dims=1)
        got = ctx.to_float64(denote(gr, pl, xi.double().numpy(), ctx))
        np.testing.assert_array_equal(got, want, err_msg=str(mod))


def test_compare_accepts_a_mixed_context_and_names_its_accumulator(capsys):
    import json
    from scalarlab.experiments.cli import main
    assert main(["compare", "--contexts", "bfloat16,bf16@fp32", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    out = {r["context"]: r for r in rows if r["node"] == 4}      # six-node's sum
    assert out["bfloat16@binary32"]["reduction"] == "sequential@binary32"
    assert out["bfloat16"]["reduction"] == "sequential"
    assert out["bfloat16@binary32"]["evaluated"] and out["bfloat16@binary32"]["max_ulps"] <= 1
