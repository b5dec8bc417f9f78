"""Every op's VJP and JVP rule against central differences in mpmath at 200 bits.

With h = 1e-20 the central difference has truncation error ~h^2 = 1e-40 and rounding
error ~2^-200/h = 1e-40, so a correct rule agrees to ~1e-35 and a wrong one (a missing
factor, a wrong axis) is off by O(1).  The VJP is checked through the adjoint identity
<vjp(g), t> = <g, J t> against the same difference quotient, with batch axes too (param
cotangents must be summed over the batch)."""
from __future__ import annotations

import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.graph.optable import OPS, full_attrs

from graph_opcases import CASES, draw, make_args

CTX = "mpmath:200"
H = "1e-20"
TOL = 1e-30

DIFF = [c for c in CASES if c["op"] != "detach"]


def entries(v):
    return list(np.asarray(v, dtype=object).reshape(-1))


def dot(ctx, a, b):
    s = 0
    for x, y in zip(entries(a), entries(b)):
        s = s + x * y
    return s


@pytest.mark.parametrize("batch", [(), (2,)], ids=["single", "batch2"])
@pytest.mark.parametrize("c", DIFF, ids=lambda c: c["name"])
def test_jvp_and_vjp_match_central_differences(c, batch):
    ctx = scalars.get(CTX)
    rng = np.random.default_rng(7)
    parents, params = make_args(c, rng, batch)
    raw = parents + params
    names = [None] * len(parents) + list(c["params"])
    args = [ctx.convert(a) for a in raw]
    tans = [None if n == "eps" or i in c["integer"] else ctx.convert(draw(np.shape(a), rng))
            for i, (a, n) in enumerate(zip(raw, names))]
    rec = OPS[c["op"]]
    attrs = full_attrs(rec, c["attrs"])
    nb = len(batch)
    y = rec.forward(ctx, args, attrs, nb)
    jv = rec.jvp(ctx, args, tans, y, attrs, nb)

    h = ctx.convert(H)
    shift = lambda sgn: [a if t is None else (ctx.add(a, ctx.mul(h, t)) if sgn > 0 else ctx.sub(a, ctx.mul(h, t)))
                         for a, t in zip(args, tans)]
    fd = ctx.div(ctx.sub(rec.forward(ctx, shift(1), attrs, nb), rec.forward(ctx, shift(-1), attrs, nb)),
                 ctx.mul(ctx.convert(2), h))
    assert ctx.shape(jv) == ctx.shape(y)
    scale = 1 + max(abs(t) for t in entries(fd))
    err = max(abs(a - b) for a, b in zip(entries(jv), entries(fd)))
    assert err <= TOL * scale, f"JVP of {c['name']} off by {float(err):.3e}"

    g = ctx.convert(draw(ctx.shape(y), rng))
    cots = rec.vjp(ctx, g, args, y, attrs, nb)
    assert len(cots) == len(args)
    lhs = 0
    for ct, t, a in zip(cots, tans, args):
        if ct is None or t is None:
            continue
        assert ctx.shape(ct) == ctx.shape(a), f"cotangent shape {ctx.shape(ct)} vs arg {ctx.shape(a)}"
        lhs = lhs + dot(ctx, ct, t)
    rhs = dot(ctx, g, fd)
    assert abs(lhs - rhs) <= TOL * (1 + abs(rhs)) * scale, \
        f"VJP of {c['name']}: <vjp(g), t> = {float(lhs)} vs <g, Jt> = {float(rhs)}"


def test_detach_has_no_derivative():
    ctx = scalars.get("float64")
    rec = OPS["detach"]
    x = np.array([1.0, -2.0])
    assert np.array_equal(rec.forward(ctx, [x], {}, 0), x)
    assert rec.vjp(ctx, np.ones(2), [x], x, {}, 0) == [None]
    assert rec.jvp(ctx, [x], [np.ones(2)], x, {}, 0) is None


@pytest.mark.parametrize("ctxname", ["float64", "binary32"])
def test_derivatives_run_in_point_contexts(ctxname):
    """The same rules in float64/binary32 agree with the mpmath derivatives to rounding level."""
    ref = scalars.get(CTX)
    ctx = scalars.get(ctxname)
    for c in [t for t in DIFF if t["op"] in ("linear", "softmax", "layernorm", "conv2d", "gelu")]:
        rng = np.random.default_rng(3)
        parents, params = make_args(c, rng)
        raw = parents + params
        rec = OPS[c["op"]]
        attrs = full_attrs(rec, c["attrs"])
        g = draw(rec.forward(scalars.get("float64"), [np.asarray(a) for a in raw], attrs, 0).shape, rng)
        out = []
        for cx in (ctx, ref):
            args = [cx.convert(a) for a in raw]
            y = rec.forward(cx, args, attrs, 0)
            out.append([None if v is None else np.asarray([float(t) for t in entries(v)])
                        for v in rec.vjp(cx, cx.convert(g), args, y, attrs, 0)])
        tol = 1e-12 if ctxname == "float64" else 1e-4
        for a, b in zip(*out):
            if a is not None:
                np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
