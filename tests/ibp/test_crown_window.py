"""CROWN's spatial windows and fused loops (ibp/crown_window.py, ibp/crown_kernels.py).

* the conv adjoint over an output window equals the full adjoint's crop (stride,
  padding, dilation; a 3x3 kernel on a 1x1 map, whose padded offsets are skipped), and
  its enclosure holds the exact rational product;
* on a small residual conv net (stride, padding, groups, batchnorm, max-pool, residual
  add) with tiles of two rows -- every pass cut into many windows --, the boxes equal
  the dense-Jacobian reference (``jacobian="dense"``) to 1e-9 relative and the
  whole-layout operator path to 1e-12 (of each node's largest bound), for both guarantees, and they hold exact
  (mpmath) runs of sampled inputs and box vertices, and binary32 runs for the
  execution guarantee;
* the fused kernels enclose the exact (Fraction) results and give the numpy path's
  midpoint-radius split bit for bit.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.graph import Graph, Node, OpKind, denote_all
from scalarlab.graph.ops_conv import _conv_geom
from scalarlab.ibp import Box, crown, crown_kernels, crown_window
from scalarlab.ibp.crown import run_crown
from scalarlab.ibp.crown_ops import _apply, _conv2d_transposed, _midrad, conv2d_input_window
from scalarlab.scalars.values import Interval

from test_crown_ops import _exact_conv_adjoint, _inside  # noqa: E402  (tests/ibp on sys.path)
from test_ibp_crown import _check_sound  # noqa: E402


def _geom(C, side, O, k, s, p, d):
    return _conv_geom("conv2d", 2, [(C, side, side)],
                      dict(kernel_size=k, out_channels=O, stride=s, padding=p, dilation=d,
                           groups=1, auto_pad="NOTSET"))


@pytest.mark.parametrize("C, side, O, k, s, p, d, win", [
    (3, 7, 4, 3, 2, 1, 2, (1, 3, 0, 2)),       # stride, padding, dilation
    (3, 12, 2, 7, 2, 3, 1, (2, 4, 3, 6)),      # resnet's stem
    (2, 1, 3, 3, 1, 1, 1, (0, 1, 0, 1)),       # 1x1 map: eight padded offsets skipped
    (2, 5, 3, 3, 1, 1, 1, (4, 5, 0, 5)),       # the last row: the window is clipped
])
def test_conv_adjoint_over_a_window_is_the_full_adjoints_crop(C, side, O, k, s, p, d, win):
    rng = np.random.default_rng(side)
    W = rng.normal(0, 1, (O, C, k, k))
    q = _geom(C, side, O, k, s, p, d)
    y0, y1, x0, x1 = win
    G = np.zeros((2, O) + q["O"])
    G[:, :, y0:y1, x0:x1] = rng.normal(0, 1, (2, O, y1 - y0, x1 - x0))
    full = _conv2d_transposed(G, W, q)
    win_u = conv2d_input_window(q, win)
    part = _conv2d_transposed(np.ascontiguousarray(G[:, :, y0:y1, x0:x1]), W, q, win, win_u)
    a0, a1, b0, b1 = win_u
    np.testing.assert_allclose(part, full[:, :, a0:a1, b0:b1], rtol=1e-14, atol=1e-300)
    rest = full.copy()
    rest[:, :, a0:a1, b0:b1] = 0.0
    assert not rest.any()                        # nothing outside the input window
    # the interval enclosure over the window holds the exact product
    lam = Interval(G[:, :, y0:y1, x0:x1].reshape(2, -1), G[:, :, y0:y1, x0:x1].reshape(2, -1))
    mid, rad = _midrad(lam)
    lo, hi = _apply(lambda A, ab: _conv2d_transposed(
        A.reshape((2, O, y1 - y0, x1 - x0)), np.abs(W) if ab else W, q, win, win_u),
        mid, rad, O * k * k)
    exact = np.asarray(_exact_conv_adjoint(G, W, q), dtype=object)[:, :, a0:a1, b0:b1]
    assert _inside(lo, hi, exact)


def _residual_net(seed):
    """conv(2->4, 3x3 p1) -> bn -> relu -> conv(4->4, 3x3 p1) -> bn -> add(relu) -> relu
    -> max_pool 2 -> conv(4->4, 3x3 s2 p1, groups 2) -> relu -> flatten -> linear(->3)
    on a 2x8x8 input."""
    rng = np.random.default_rng(seed)

    def bn(c):
        return {"batchnorm_eval": {"mean": rng.normal(0, 0.1, c), "var": rng.uniform(0.5, 1.5, c),
                                   "gamma": rng.uniform(0.5, 1.5, c),
                                   "beta": rng.normal(0, 0.1, c)}}
    g = Graph([Node(0, [], "input", [2, 8, 8]),
               Node(1, [0], OpKind("conv2d", kernel_size=3, padding=1), [4, 8, 8]),
               Node(2, [1], OpKind("batchnorm_eval", axis=0), [4, 8, 8]),
               Node(3, [2], "relu", [4, 8, 8]),
               Node(4, [3], OpKind("conv2d", kernel_size=3, padding=1), [4, 8, 8]),
               Node(5, [4], OpKind("batchnorm_eval", axis=0), [4, 8, 8]),
               Node(6, [5, 3], "add", [4, 8, 8]),
               Node(7, [6], "relu", [4, 8, 8]),
               Node(8, [7], OpKind("max_pool2d", kernel_size=2, stride=2), [4, 4, 4]),
               Node(9, [8], OpKind("conv2d", kernel_size=3, stride=2, padding=1, groups=2),
                    [4, 2, 2]),
               Node(10, [9], "relu", [4, 2, 2]),
               Node(11, [10], "flatten", [16]),
               Node(12, [11], "linear", [3])])
    p = {1: {"conv2d": {"weight": rng.normal(0, 0.5, (4, 2, 3, 3)),
                        "bias": rng.normal(0, 0.1, 4)}},
         2: bn(4),
         4: {"conv2d": {"weight": rng.normal(0, 0.3, (4, 4, 3, 3)),
                        "bias": rng.normal(0, 0.1, 4)}},
         5: bn(4),
         9: {"conv2d": {"weight": rng.normal(0, 0.4, (4, 2, 3, 3)),
                        "bias": rng.normal(0, 0.1, 4)}},
         12: {"linear": {"W": rng.normal(0, 0.5, (3, 16)), "b": rng.normal(0, 0.1, 3)}}}
    return g, p


def _ends(b):
    return np.asarray(b.lo, dtype=np.float64), np.asarray(b.hi, dtype=np.float64)


def _same(a_boxes, b_boxes, rel):
    n = 0
    for a, b in zip(a_boxes, b_boxes):
        assert (a is None) == (b is None)
        if a is None:
            continue
        (alo, ahi), (blo, bhi) = _ends(a), _ends(b)
        # relative to the node's largest bound (the roundings of two summation orders)
        scale = max(np.max(np.abs(blo)), np.max(np.abs(bhi)), 1e-300)
        assert np.all(np.abs(alo - blo) <= rel * scale), np.max(np.abs(alo - blo) / scale)
        assert np.all(np.abs(ahi - bhi) <= rel * scale), np.max(np.abs(ahi - bhi) / scale)
        n += 1
    return n


@pytest.mark.parametrize("guarantee", ["real", "execution"])
def test_windowed_crown_equals_dense_reference_and_holds_exact_runs(guarantee, monkeypatch):
    g, p = _residual_net(3)
    x = np.random.default_rng(4).normal(0, 1, (2, 8, 8))
    box = Box(x - 0.05, x + 0.05)
    monkeypatch.setattr(crown_window, "TILE_ROWS", 2)      # many tiles per pass
    calls = []
    orig = crown._backward_rows
    monkeypatch.setattr(crown, "_backward_rows",
                        lambda st, vals, t, C, win=None: calls.append(win) or
                        orig(st, vals, t, C, win))
    win = run_crown(g, p, box, method="crown", guarantee=guarantee)
    assert sum(w is not None for w in calls) > 20          # the windows were used
    assert any(w is not None and (w[1] - w[0]) * (w[3] - w[2]) < 16 for w in calls)
    dense = run_crown(g, p, box, method="crown", guarantee=guarantee, jacobian="dense")
    assert _same(win, dense, 1e-9) == 13
    monkeypatch.setattr(crown, "WINDOWS", False)
    whole = run_crown(g, p, box, method="crown", guarantee=guarantee)
    assert _same(win, whole, 1e-12) == 13
    # CROWN is tighter than IBP on the output here (so the comparison is not vacuous)
    ibp = run_crown(g, p, box, method="ibp", guarantee=guarantee)
    assert np.all(np.asarray(win[12].hi) - np.asarray(win[12].lo)
                  < 0.9 * (np.asarray(ibp[12].hi) - np.asarray(ibp[12].lo)))
    if guarantee == "real":
        assert _check_sound(g, p, box.lo, box.hi, win, n_random=12, seed=5,
                            max_vertices=12) > 0


def test_windowed_crown_holds_binary32_runs(monkeypatch):
    g, p = _residual_net(6)
    rng = np.random.default_rng(7)
    x = rng.normal(0, 1, (2, 8, 8)).astype(np.float32).astype(np.float64)
    box = Box(x - 2.0 ** -5, x + 2.0 ** -5)
    monkeypatch.setattr(crown_window, "TILE_ROWS", 2)
    boxes = run_crown(g, p, box, "interval:binary32", method="crown")
    _assert_holds_binary32_runs(g, p, box, boxes, rng, 16)


def _assert_holds_binary32_runs(g, p, box, boxes, rng, n):
    """Every node's box holds the binary32 runs of n random binary32 points of ``box``."""
    b32 = scalars.get("binary32")
    pts = rng.uniform(box.lo, box.hi, (n,) + box.lo.shape)
    pts = np.clip(pts.astype(np.float32).astype(np.float64), box.lo, box.hi)
    vals = denote_all(g, p, b32.convert(pts), b32)
    for i, b in enumerate(boxes):
        if b is None or i == 0:
            continue
        v = b32.to_float64(vals[i])
        lo, hi = _ends(b)
        assert np.all(v >= lo) and np.all(v <= hi), i


def _exact(a):
    return np.vectorize(Fraction, otypes=[object])(a)


def test_fused_kernels_enclose_exact_results_and_match_numpy():
    rng = np.random.default_rng(8)
    lo = rng.normal(0, 1, (3, 9))
    lo[0, :3] = rng.normal(0, 1, 3) * 2.0 ** -1050          # subnormal entries
    hi = lo + np.abs(rng.normal(0, 1e-3, (3, 9)))
    # the split, bit for bit the numpy formulas
    with np.errstate(all="ignore"):
        mid = 0.5 * lo + 0.5 * hi
        rad = ((hi - lo) * (0.5 + 2.0 ** -50) + np.abs(mid) * 2.0 ** -51) + 8 * 2.0 ** -1074
    m2, r2, ok = crown_kernels.midrad(lo.reshape(-1), hi.reshape(-1))
    assert ok and np.array_equal(m2, mid.reshape(-1)) and np.array_equal(r2, rad.reshape(-1))
    # relu crossing: slopes al in {0, 1}, au in [0, 1] (intervals), offsets bu >= 0
    al = (rng.random(9) < 0.5).astype(np.float64)
    au0 = rng.uniform(0, 1, 9)
    au1 = np.nextafter(au0, 2)
    bl = np.zeros(9)
    bu0 = rng.uniform(0, 0.5, 9)
    bu1 = np.nextafter(bu0, 1)
    olo, ohi, clo, chi, ok = crown_kernels.relax_rows(lo, hi, al, al, au0, au1, bl, bl,
                                                      bu0, bu1)
    assert ok
    for pick_l, pick_a, pick_b in ((lo, au0, bu0), (hi, au1, bu1), (lo, au1, bu0)):
        L, A, B = _exact(pick_l), _exact(pick_a), _exact(pick_b)
        pos = np.vectorize(lambda v: max(v, 0), otypes=[object])(L)
        neg = np.vectorize(lambda v: min(v, 0), otypes=[object])(L)
        new = pos * _exact(al)[None, :] + neg * A[None, :]
        assert _inside(olo, ohi, new)
        assert _inside(clo, chi, (neg * B[None, :]).sum(axis=1))
    assert np.max(ohi - olo) < 1e-2 and np.max(chi - clo) < 1e-2
    # diagonal scaling of an interval Lambda
    d0 = rng.normal(0, 1, 9)
    d1 = d0 + 1e-3
    slo, shi, ok = crown_kernels.scale_diag(lo, hi, d0, d1)
    assert ok
    for A in (lo, hi):
        for dv in (d0, d1):
            assert _inside(slo, shi, _exact(A) * _exact(dv)[None, :])
    # a non-finite entry: not ok (the caller takes the numpy path)
    bad = hi.copy()
    bad[1, 2] = np.inf
    assert not crown_kernels.relax_rows(lo, bad, al, al, au0, au1, bl, bl, bu0, bu1)[-1]
    assert not crown_kernels.scale_diag(lo, bad, d0, d1)[-1]
    assert not crown_kernels.midrad(lo.reshape(-1), bad.reshape(-1))[-1]
