"""The fused interval dense layer (``IntervalContext.affine``, the ``linear`` op's interval
rule) and the one-pass ReLU: bitwise the endpoints of the unfused operations
``add(matmul(x, transpose(W)), b)`` / ``maximum(x, 0)``, enclosing the exact range (exact
rational hull and sampled points), and the |W| cache never stale after an in-place change.
"""
from __future__ import annotations

import dataclasses
import gc
import sys
from pathlib import Path

import gmpy2
import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.graph import Graph, Node, Payload
from scalarlab.graph.optable import OPS
from scalarlab.ibp import Box, check_containment, run_ibp
from scalarlab.scalars.kernels import dot_enclosure
from scalarlab.scalars.kernels import interval_affine as IA
from scalarlab.scalars.values import Interval

F64 = "interval:float64"


def _bits(a):
    return np.ascontiguousarray(a, dtype=np.float64).view(np.int64)


def _same(r, s):
    return (r.lo.shape == s.lo.shape and np.array_equal(_bits(r.lo), _bits(s.lo))
            and np.array_equal(_bits(r.hi), _bits(s.hi)))


def _unfused(ctx, x, W, b):
    return ctx.add(ctx.matmul(x, ctx.transpose(W)), b)


@pytest.fixture
def no_ld(monkeypatch):
    """Small products take matmul's long double algorithm; switch it off so that small
    layers exercise the midpoint-radius path the fused layer reproduces."""
    monkeypatch.setattr(dot_enclosure, "CHEAP_MACS", 0)


def _layer(rng, P, n, p, radius=1e-2):
    c = rng.standard_normal((P, n))
    r = rng.uniform(0, radius, (P, n))
    W = rng.standard_normal((p, n)) / np.sqrt(n)
    b = rng.standard_normal(p) * 0.1
    return c - r, c + r, W, b


def _variant(kind, rng, P, n, p):
    xlo, xhi, W, b = _layer(rng, P, n, p)
    if kind == "zero rows and columns":
        W[1] = 0.0
        W[:, 2] = -0.0
        xlo[0] = xhi[0] = 0.0
    elif kind == "signed zeros and point entries":
        xlo[:, ::3] = xhi[:, ::3]                 # some entries of zero width
        xlo[1, :] = -0.0
        xhi[1, :] = 0.0
        b[::2] = -0.0
    elif kind == "subnormal and tiny":
        xlo *= 1e-300
        xhi *= 1e-300
        W[0, :4] = 5e-324
    elif kind == "wide":
        xlo -= 10.0
        xhi += 10.0
    elif kind == "huge (exact fallback)":
        xlo[0, 0] = -2.0 ** 950
        xhi[0, 0] = 2.0 ** 950
    elif kind == "infinite end":
        xhi[2, 1] = np.inf
    elif kind == "nan bias":
        b[3] = np.nan
    return xlo, xhi, W, b


KINDS = ["plain", "zero rows and columns", "signed zeros and point entries",
         "subnormal and tiny", "wide", "huge (exact fallback)", "infinite end", "nan bias"]
FAST = {"plain", "zero rows and columns", "signed zeros and point entries",
        "subnormal and tiny", "wide", "nan bias"}


@pytest.mark.parametrize("kind", KINDS)
def test_affine_is_the_unfused_composition_bitwise(kind, no_ld):
    rng = np.random.default_rng(len(kind))
    ctx = scalars.get(F64)
    xlo, xhi, W, b = _variant(kind, rng, 7, 33, 12)
    x = ctx.make(xlo, xhi)
    Wi, bi = ctx.convert(W), ctx.convert(b)
    fast = IA.affine_midrad(x.lo, x.hi, Wi.lo, bi.lo, bi.hi)
    assert (fast is not None) == (kind in FAST)   # the fused path really ran (or not)
    r = ctx.affine(x, Wi, bi)
    s = _unfused(ctx, x, Wi, bi)
    assert _same(r, s)
    if kind == "nan bias":      # convert made the bias the whole line: so is the output
        assert np.all(r.lo[:, 3] == -np.inf) and np.all(r.hi[:, 3] == np.inf)


def test_affine_other_layouts_fall_back_bitwise(no_ld):
    """Point activations, a weight given as an interval, a Fortran-ordered weight, 1-d
    and 3-d activations, interval:binary32: the unfused composition (same values)."""
    rng = np.random.default_rng(5)
    xlo, xhi, W, b = _layer(rng, 6, 20, 9)
    for name in (F64, "interval:binary32"):
        ctx = scalars.get(name)
        cases = [(ctx.convert(xlo), ctx.convert(W), ctx.convert(b)),
                 (ctx.make(xlo, xhi), ctx.make(W - 1e-3, W + 1e-3), ctx.convert(b)),
                 (ctx.make(xlo, xhi), ctx.convert(np.asfortranarray(W)), ctx.convert(b)),
                 (ctx.make(xlo[0], xhi[0]), ctx.convert(W), ctx.convert(b)),
                 (ctx.make(np.stack([xlo, xlo]), np.stack([xhi, xhi])), ctx.convert(W),
                  ctx.convert(b))]
        for x, Wi, bi in cases:
            assert _same(ctx.affine(x, Wi, bi), _unfused(ctx, x, Wi, bi))


def _exact_hull(xlo, xhi, W, b):
    """Exact range of x W^T + b over the box (W a point: each term's extremes sit at
    an end of x_k chosen by the sign of W_jk), as gmpy2 rationals."""
    q = np.frompyfunc(gmpy2.mpq, 1, 1)
    Wp, Wm = q(np.maximum(W, 0.0)), q(np.minimum(W, 0.0))
    ql, qh, qb = q(xlo), q(xhi), q(b)
    return ql @ Wp.T + qh @ Wm.T + qb, qh @ Wp.T + ql @ Wm.T + qb


@pytest.mark.parametrize("radius", [0.0, 1e-9, 0.3])
def test_affine_encloses_the_exact_range(radius, no_ld):
    rng = np.random.default_rng(int(radius * 1e9) + 1)
    ctx = scalars.get(F64)
    xlo, xhi, W, b = _layer(rng, 5, 24, 7, radius)
    xlo[:, 0] = xhi[:, 0] - 1e-12                 # never a point activation as a whole
    x = ctx.make(xlo, xhi)
    assert IA.affine_midrad(x.lo, x.hi, W, b, b) is not None
    r = ctx.affine(x, ctx.convert(W), ctx.convert(b))
    lo_ex, hi_ex = _exact_hull(xlo, xhi, W, b)
    q = np.frompyfunc(gmpy2.mpq, 1, 1)
    assert np.all(q(r.lo) <= lo_ex) and np.all(hi_ex <= q(r.hi))
    # not loose either: midpoint-radius exceeds the hull by the rounding terms only
    # (gamma_n |m||W| with gamma_n ~ n 2^-53, on top of the exact radius |W| r)
    mag = np.abs(xlo) + np.abs(xhi)
    slack = 4 * (24 + 10) * 2.0 ** -53 * (mag @ np.abs(W).T + np.abs(b)) + 2.0 ** -1000
    assert np.all(q(lo_ex - q(r.lo)) <= q(slack)) and np.all(q(q(r.hi) - hi_ex) <= q(slack))
    # sampled points and vertices of the box, evaluated exactly, lie inside
    pts = [xlo, xhi, np.where(W[0] > 0, xlo, xhi)]
    pts += [xlo + (xhi - xlo) * rng.random(xlo.shape) for _ in range(5)]
    for t in pts:
        t = np.clip(t, xlo, xhi)
        y = q(t) @ q(W).T + q(b)
        assert np.all(q(r.lo) <= y) and np.all(y <= q(r.hi))


def _mlp(sizes, rng):
    """``bench/benchlib.py``'s relu MLP graph (the IBP benchmark's workload), imported as
    tests/graph/test_graph_binary32_storage.py does."""
    bench = str(Path(__file__).resolve().parents[2] / "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    import benchlib
    return benchlib.mlp_graph(sizes, rng)


def _unfused_ibp(monkeypatch, g, p, box, ctx):
    """run_ibp with the linear op's forward rule run in interval arithmetic (the result
    before the fused rule), maximum's fused relu pass and run_ibp's dense+relu kernels
    switched off."""
    with monkeypatch.context() as m:
        m.setitem(OPS, "linear", dataclasses.replace(OPS["linear"], interval=None))
        m.setattr("scalarlab.scalars.interval_linalg._relu_fast", lambda a, b: None)
        m.setattr("scalarlab.ibp.propagate._dense_relu_kernels", lambda g, c: {})
        return run_ibp(g, p, box, ctx, guarantee="real")


@pytest.mark.parametrize("ctx_name", [F64, "interval:binary32"])
def test_run_ibp_of_a_realistic_mlp_is_unchanged(ctx_name, monkeypatch):
    """MLP 784-256-256-10 (relu), batch 16, box from from_center_radius: every node's
    box bitwise the one of the unfused fold (float64: the fused passes ran)."""
    rng = np.random.default_rng(3)
    g, p = _mlp([784, 256, 256, 10], rng)
    x = rng.random((16, 784))
    box = Box.from_center_radius(x, 0.01)
    calls = []
    real = IA.affine_midrad
    monkeypatch.setattr(IA, "affine_midrad",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    # the real guarantee: the products as they are (the execution one adds the point
    # products' rounding bound, tests/graph/test_graph_interval_rules_execution.py)
    new = run_ibp(g, p, box, ctx_name, guarantee="real")
    if ctx_name == F64:
        assert len(calls) == 3 and all(c == 1 for c in calls)
    old = _unfused_ibp(monkeypatch, g, p, box, ctx_name)
    assert all(_same(a, b) for a, b in zip(new, old))


def test_run_ibp_small_mlp_contains_exact_executions(no_ld):
    """Sampled points and vertices of the input box, run in exact rational arithmetic,
    lie in every node's box of the fused IBP."""
    rng = np.random.default_rng(11)
    g, p = _mlp([6, 40, 30, 4], rng)
    box = Box.from_center_radius(rng.standard_normal((2, 6)), 0.05)
    calls = []
    real = IA.affine_midrad
    with pytest.MonkeyPatch.context() as m:
        m.setattr(IA, "affine_midrad",
                  lambda *a, **k: calls.append(real(*a, **k) is not None) or real(*a, **k))
        rep = check_containment(g, p, box, samples=12, point_ctx="rational",
                                interval_ctx=F64, vertices=False)
    assert calls == [True, True, True]             # the fused passes gave every box
    assert rep.ok and rep.checked == 12 and not rep.unbounded, rep


def test_weight_cache_follows_in_place_changes(no_ld, monkeypatch):
    monkeypatch.setattr(IA, "_MIN_CACHED", 0)
    rng = np.random.default_rng(7)
    ctx = scalars.get(F64)
    xlo, xhi, W, b = _layer(rng, 6, 30, 11)
    x, bi = ctx.make(xlo, xhi), ctx.convert(b)
    first = ctx.affine(x, ctx.convert(W), bi)
    assert id(W) in IA._cache().entries
    # the next conversion hands out the immutable snapshot (same bits), not W
    Wi = ctx.convert(W)
    assert Wi.lo is Wi.hi and Wi.lo is not W and np.array_equal(_bits(Wi.lo), _bits(W))
    with pytest.raises(ValueError):
        Wi.lo.flags.writeable = True
    W[3, 4] = -W[3, 4] * 3.0                       # in place: the cache must notice
    assert _same(ctx.affine(x, Wi, bi), first)     # Wi is the value converted before
    assert ctx.convert(W).lo is W                  # stale entry dropped: plain conversion
    again = ctx.affine(x, ctx.convert(W), bi)
    assert _same(again, _unfused(ctx, x, Interval(W.copy(), W.copy()), bi))
    assert not _same(again, first)
    again2 = ctx.affine(x, W, bi)                  # a plain array: compared with the entry
    assert _same(again2, again)
    W[5, 7] = 0.0
    ctx.affine(x, W, bi)
    W[5, 7] = -0.0                                 # a sign-only change of a zero
    A, mask, fin = IA.weight_abs(W)
    assert np.signbit(W[5, 7]) and not np.signbit(A[5, 7])
    assert np.signbit(ctx.convert(W).lo[5, 7])
    W[0, :] = np.nan                               # a NaN weight is never a snapshot
    Wn = ctx.convert(W)
    assert Wn.lo[0, 0] == -np.inf and Wn.hi[0, 0] == np.inf
    assert id(W) not in IA._cache().entries        # the stale entry went
    A, mask, fin = IA.weight_abs(W)
    assert not fin and id(W) in IA._cache().entries
    assert ctx.convert(W).lo[0, 0] == -np.inf      # known non-finite: the plain path
    # an entry dies with its array
    n0 = len(IA._cache().entries)
    del W, Wi, Wn
    gc.collect()
    assert len(IA._cache().entries) == n0 - 1


def test_weight_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(IA._WeightCache, "MAX_ENTRIES", 100_000)
    IA.clear_weight_cache()
    keep = [np.random.default_rng(k).standard_normal((130, 130)) for k in range(6)]
    for W in keep:
        A, mask, fin = IA.weight_abs(W)
        assert np.array_equal(A, np.abs(W)) and fin and mask.all()
        assert IA._cache().held <= 100_000
    assert len(IA._cache().entries) == 2 and len(IA._cache().owned) == 2
    IA.clear_weight_cache()


@pytest.mark.parametrize("ctx_name", [F64, "interval:binary32"])
def test_relu_pass_is_numpys_maximum(ctx_name):
    ctx = scalars.get(ctx_name)
    rng = np.random.default_rng(2)
    lo = rng.standard_normal((64, 300))
    hi = lo + rng.random(lo.shape)
    lo[0, :4] = [-0.0, 0.0, -1e-310, -np.inf]
    hi[0, :4] = [0.0, 0.0, -0.0, np.inf]
    x = ctx.make(lo, hi)
    z = ctx.zeros(())
    r = ctx.maximum(x, z)
    assert _same(r, Interval(np.maximum(x.lo, 0.0), np.maximum(x.hi, 0.0)))
    assert not np.signbit(r.lo[0, :3]).any()
    # a NaN end becomes the whole line
    x.lo[1, 1] = np.nan
    r = ctx.maximum(Interval(x.lo, x.hi), z)
    assert r.lo[1, 1] == -np.inf and r.hi[1, 1] == np.inf
    assert _same(Interval(r.lo[2:], r.hi[2:]),
                 Interval(np.maximum(x.lo[2:], 0.0), np.maximum(x.hi[2:], 0.0)))


@pytest.mark.parametrize("base", ["binary32", "bfloat16", "binary16", "e4m3"])
def test_point_conversion_onto_a_coarser_grid_is_directed_rounding(base):
    """convert of a float64 array (a weight, on every IBP call) is one compiled pass with
    the values of directed.round_down / round_up, specials included."""
    from scalarlab.scalars.kernels import directed as D
    ctx = scalars.get(f"interval:{base}")
    rng = np.random.default_rng(len(base))
    x = np.concatenate([rng.standard_normal(500) * 10.0 ** rng.integers(-50, 50, 500),
                        [0.0, -0.0, 5e-324, -5e-324, 1e-45, 3.4e38, 3.5e38, -1e300,
                         np.inf, -np.inf, 65504.0, 65520.0, 448.0, 464.0, 1e-8]])
    v = ctx.convert(x)
    fmt = ctx.ends.grid
    assert np.array_equal(_bits(v.lo), _bits(D.round_down(x, fmt)))
    assert np.array_equal(_bits(v.hi), _bits(D.round_up(x, fmt)))
    q = np.frompyfunc(gmpy2.mpq, 1, 1)
    fin = np.isfinite(x)
    assert np.all(q(v.lo[fin & np.isfinite(v.lo)]) <= q(x[fin & np.isfinite(v.lo)]))
    assert np.all(q(x[fin & np.isfinite(v.hi)]) <= q(v.hi[fin & np.isfinite(v.hi)]))


@pytest.mark.parametrize("shape", [(1, 5), (7, 33), (40, 1), (65, 70)])
def test_matmul_operand_pass_is_midrad_prep_bitwise(shape):
    """The compiled operand passes of the midpoint-radius matmul (rows of a C-ordered
    operand; columns of a transposed weight, read without copying) give what
    directed.midrad_prep gives, in the same layout; special values included."""
    from scalarlab.scalars.kernels import directed as D
    rng = np.random.default_rng(shape[0] * 100 + shape[1])
    c = rng.standard_normal(shape) * 10.0 ** rng.integers(-300, 300, shape)
    lo, hi = c - np.abs(c) * 1e-9, c + np.abs(c) * 1e-9
    lo.flat[:5] = [-0.0, 5e-324, -2.0 ** 1000, 1.0, 0.0][:lo.size]
    hi.flat[:5] = [0.0, 5e-324, 2.0 ** 1000, 1.0, 0.0][:lo.size]
    if shape[0] > 2:
        lo[2] = hi[2] = 0.0                       # a zero row: its mask flag is False
    for L, H, axis in ((lo, hi, 1), (lo.T, hi.T, 0)):
        ref = D.midrad_prep(L, H, 1e-13, axis, key="test.ref")
        ref = [np.array(t) if isinstance(t, np.ndarray) else t for t in ref]
        got = IA.midrad_prep_fast(L, H, 1e-13, axis, "test.got")
        assert got is not None
        for a, b in zip(ref[:4], got[:4]):
            assert b.flags.c_contiguous and np.array_equal(_bits(a), _bits(b))
        assert np.array_equal(ref[4], got[4]) and list(ref[5:]) == list(got[5:])
    if min(shape) > 1:                            # no fast pass for this layout
        assert IA.midrad_prep_fast(np.asfortranarray(lo), np.asfortranarray(hi), 0.0, 1,
                                   "t") is None


@pytest.mark.parametrize("radius", [0.01, "0.01"])
def test_ball_into_interval_float64_keeps_its_outward_ends(radius):
    """Box.to_interval of a float ball in interval:float64 takes its outward float64 ends
    (no further checks): the same bits as make(lo, hi), and nothing writable is shared
    with the box."""
    ctx = scalars.get(F64)
    c = np.random.default_rng(4).standard_normal((20, 30))
    box = Box.from_center_radius(c, radius)
    v = box.to_interval(ctx)
    ref = ctx.make(np.array(box.lo), np.array(box.hi))
    assert _same(v, ref)
    for t, u in ((v.lo, box.lo), (v.hi, box.hi)):
        assert not np.shares_memory(t, u) or not t.flags.writeable
    q = np.frompyfunc(gmpy2.mpq, 1, 1)
    exact = q(c) - q(gmpy2.mpq(1, 100)), q(c) + q(gmpy2.mpq(1, 100))
    if isinstance(radius, str):
        assert np.all(q(v.lo) <= exact[0]) and np.all(exact[1] <= q(v.hi))


@pytest.mark.parametrize("kind", ["plain", "signed zeros and point entries", "wide",
                                  "huge (exact fallback)", "nan bias"])
def test_affine_relu_is_affine_then_maximum_bitwise(kind, no_ld):
    rng = np.random.default_rng(len(kind) + 50)
    ctx = scalars.get(F64)
    xlo, xhi, W, b = _variant(kind, rng, 7, 33, 12)
    x, Wi, bi = ctx.make(xlo, xhi), ctx.convert(W), ctx.convert(b)
    y, r, tok = ctx.affine_relu(x, Wi, bi)
    ref = _unfused(ctx, x, Wi, bi)
    assert _same(y, ref)
    assert (r is not None) == (tok is not None) == (kind != "huge (exact fallback)")
    if r is not None:
        assert _same(r, Interval(np.maximum(ref.lo, 0.0), np.maximum(ref.hi, 0.0)))
        # the next layer with the operand pass from the token: the same bits as without
        W2, b2 = ctx.convert(rng.standard_normal((9, 12))), ctx.convert(rng.standard_normal(9))
        calls = []
        real = IA.prep_rows
        with pytest.MonkeyPatch.context() as m:
            m.setattr(IA, "prep_rows", lambda *a: calls.append(1) or real(*a))
            with_tok = ctx.affine(r, W2, b2, x_prep=tok)
            assert calls == []                     # the token's pass was used
            other = Interval(r.lo.copy(), r.hi.copy())
            ctx.affine(other, W2, b2, x_prep=tok)  # a token for another value: ignored
            assert calls == [1]
        assert _same(with_tok, _unfused(ctx, r, W2, b2))
        y2, r2, tok2 = ctx.affine_relu(r, W2, b2, x_prep=tok)
        assert _same(y2, with_tok)
        assert (r2 is None) == (kind == "nan bias")      # an infinite input: unfused
        if r2 is not None:
            assert _same(r2, ctx.maximum(with_tok, ctx.zeros(())))


def test_run_ibp_fuses_dense_and_relu_only_where_the_relu_is_the_only_consumer(monkeypatch):
    """linear -> relu pairs get the fused kernels; a linear read by two nodes, or not by
    a relu, keeps the op table's rules; every box bitwise the plain fold's."""
    from scalarlab.ibp.propagate import _dense_relu_kernels
    rng = np.random.default_rng(8)
    nodes = [Node(0, [], "input", [40]), Node(1, [0], "linear", [64]), Node(2, [1], "relu", [64]),
             Node(3, [2], "linear", [64]), Node(4, [3], "relu", [64]), Node(5, [3, 4], "add", [64]),
             Node(6, [5], "linear", [8]), Node(7, [6], "relu", [8])]
    g = Graph(nodes)
    p = Payload({i: {"W": rng.standard_normal((o, n)) / np.sqrt(n), "b": rng.standard_normal(o)}
                 for i, o, n in ((1, 64, 40), (3, 64, 64), (6, 8, 64))})
    ctx = scalars.get(F64)
    assert sorted(_dense_relu_kernels(g, ctx)) == [1, 2, 3, 6, 7]   # relu 4 is not fused
    box = Box.from_center_radius(rng.standard_normal((300, 40)), 0.05)
    new = run_ibp(g, p, box, F64, guarantee="real")
    old = _unfused_ibp(monkeypatch, g, p, box, F64)
    assert all(_same(a, b) for a, b in zip(new, old))
    rep = check_containment(g, p, box, samples=20, point_ctx="float64", interval_ctx=F64,
                            boxes=new, vertices=False)
    assert rep.ok and rep.checked == 20
