"""CROWN with operators, spec seeds and a memory estimate (ibp/crown.py).

* the operator path (affine ops applied to Lambda through their VJP rules) gives the
  dense-Jacobian path's boxes up to rounding (equal or tighter within 1e-12 relative),
  for both guarantees and both methods, on a CNN with conv / avg- and max-pool / linear
  and on a net with batchnorm, conv1d, matmul by a constant and mul/sub by constants;
* a large affine node's execution error bound without M is sound: the executed binary32
  run of a wide conv lies inside the boxes;
* ``spec=C``: the bounds of C z_out contain C applied to exact (mpmath) executions of
  sampled inputs, and are never looser than C applied to the output box;
* the memory estimate refuses a pass above the limit with one line naming node,
  estimate and limit, before allocating; the env variable sets the limit.
"""
from __future__ import annotations

import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.graph import Graph, Node, OpKind, denote_all
from scalarlab.ibp import Box
from scalarlab.ibp.crown import CrownError, run_crown
from scalarlab.ibp.errors import IBPError

from test_ibp_crown import small_cnn  # noqa: E402  (tests/ibp on sys.path, as its neighbours)

EXACT = scalars.get("mpmath:120")


def _ends(b):
    return np.asarray(b.lo, dtype=np.float64), np.asarray(b.hi, dtype=np.float64)


def _assert_equal_or_tighter(op_boxes, dense_boxes, rel=1e-12):
    n = 0
    for a, d in zip(op_boxes, dense_boxes):
        assert (a is None) == (d is None)
        if a is None:
            continue
        (alo, ahi), (dlo, dhi) = _ends(a), _ends(d)
        scale = np.maximum(1e-300, np.maximum(np.abs(dlo), np.abs(dhi)))
        assert np.all(alo >= dlo - rel * scale), (alo, dlo)
        assert np.all(ahi <= dhi + rel * scale), (ahi, dhi)
        # and not tighter by more than rounding either: the same algorithm
        assert np.allclose(alo, dlo, rtol=1e-9, atol=1e-12)
        assert np.allclose(ahi, dhi, rtol=1e-9, atol=1e-12)
        n += 1
    assert n >= 5


@pytest.mark.parametrize("act,pool", [("relu", "avg"), ("tanh", "max"), ("sigmoid", "avg")])
@pytest.mark.parametrize("guarantee", ["execution", "real"])
def test_operator_path_equals_dense_on_cnn(act, pool, guarantee):
    g, p, _ = small_cnn(3, act, pool)
    x = np.random.default_rng(1).normal(0, 1, (1, 6, 6))
    box = Box(x - 0.2, x + 0.2)
    for method in ("crown", "crown-ibp"):
        op = run_crown(g, p, box, method=method, guarantee=guarantee)
        dense = run_crown(g, p, box, method=method, guarantee=guarantee, jacobian="dense")
        _assert_equal_or_tighter(op, dense)


def _mixed_net(seed):
    """conv1d -> batchnorm_eval -> relu -> mul by const -> sub const -> flatten ->
    matmul by a constant matrix -> relu -> linear."""
    rng = np.random.default_rng(seed)
    w, b = rng.normal(0, 0.5, (3, 2, 3)), rng.normal(0, 0.1, 3)
    g = Graph([Node(0, [], "input", [2, 8]),
               Node(1, [0], OpKind("conv1d", kernel_size=3), [3, 6]),
               Node(2, [1], OpKind("batchnorm_eval", axis=0), [3, 6]),
               Node(3, [2], "relu", [3, 6]),
               Node(4, [], "const", [3, 6]),
               Node(5, [3, 4], "mul", [3, 6]),
               Node(6, [], "const", [3, 6]),
               Node(7, [5, 6], "sub", [3, 6]),
               Node(8, [7], "flatten", [18]),
               Node(9, [], "const", [18, 7]),
               Node(10, [8, 9], "matmul", [7]),
               Node(11, [10], "relu", [7]),
               Node(12, [11], "linear", [4])])
    p = {1: {"conv1d": {"weight": w, "bias": b}},
         2: {"batchnorm_eval": {"mean": rng.normal(0, 0.1, 3),
                                "var": rng.uniform(0.5, 1.5, 3),
                                "gamma": rng.normal(1, 0.2, 3), "beta": rng.normal(0, 0.1, 3)}},
         4: {"const": {"value": rng.uniform(0.5, 1.5, (3, 6))}},
         6: {"const": {"value": rng.normal(0, 0.2, (3, 6))}},
         9: {"const": {"value": rng.normal(0, 0.4, (18, 7))}},
         12: {"linear": {"W": rng.normal(0, 0.5, (4, 7)), "b": rng.normal(0, 0.1, 4)}}}
    return g, p


@pytest.mark.parametrize("guarantee", ["execution", "real"])
def test_operator_path_equals_dense_on_other_affine_ops(guarantee):
    g, p = _mixed_net(5)
    x = np.random.default_rng(2).normal(0, 1, (2, 8))
    box = Box(x - 0.1, x + 0.1)
    op = run_crown(g, p, box, method="crown", guarantee=guarantee)
    dense = run_crown(g, p, box, method="crown", guarantee=guarantee, jacobian="dense")
    _assert_equal_or_tighter(op, dense)


def _wide_conv(seed, side):
    """conv2d(2->4, 3x3, pad 1) -> relu -> conv2d(4->2, 3x3) -> flatten -> linear(->3):
    the first conv's Jacobian has (4 side^2) x (2 side^2) entries, above the dense
    error-bound threshold at side 24, so its rounding bound comes from the operator."""
    rng = np.random.default_rng(seed)
    o2 = side - 2
    g = Graph([Node(0, [], "input", [2, side, side]),
               Node(1, [0], OpKind("conv2d", kernel_size=3, padding=1), [4, side, side]),
               Node(2, [1], "relu", [4, side, side]),
               Node(3, [2], OpKind("conv2d", kernel_size=3), [2, o2, o2]),
               Node(4, [3], "flatten", [2 * o2 * o2]),
               Node(5, [4], "linear", [3])])
    p = {1: {"conv2d": {"weight": rng.normal(0, 0.4, (4, 2, 3, 3)),
                        "bias": rng.normal(0, 0.1, 4)}},
         3: {"conv2d": {"weight": rng.normal(0, 0.3, (2, 4, 3, 3)),
                        "bias": rng.normal(0, 0.1, 2)}},
         5: {"linear": {"W": rng.normal(0, 0.1, (3, 2 * o2 * o2)),
                        "b": rng.normal(0, 0.1, 3)}}}
    return g, p


# side 24 crosses the real threshold (3 s CPU: -m slow); side 12 takes the same operator
# path under a threshold lowered to 2^16 entries (the convolutions above it, the last
# linear below it, as at side 24)
@pytest.mark.parametrize("side, threshold", [(12, 2 ** 16),
                                             pytest.param(24, None, marks=pytest.mark.slow)])
def test_large_affine_error_bound_without_jacobian_holds_binary32_runs(side, threshold,
                                                                        monkeypatch):
    from scalarlab.ibp import crown
    if threshold is not None:
        monkeypatch.setattr(crown, "_DENSE_ERR_ENTRIES", threshold)
    assert (2 * side * side + 1) * (4 * side * side) > crown._DENSE_ERR_ENTRIES
    g, p = _wide_conv(7, side)
    rng = np.random.default_rng(3)
    x = rng.normal(0, 1, (2, side, side)).astype(np.float32).astype(np.float64)
    box = Box(x - 2.0 ** -6, x + 2.0 ** -6)
    boxes = run_crown(g, p, box, "interval:binary32", method="crown-ibp")
    real = run_crown(g, p, box, "interval:binary32", method="crown-ibp", guarantee="real")
    b32 = scalars.get("binary32")
    pts = np.clip(x + rng.uniform(-1, 1, (20,) + x.shape) * 2.0 ** -6, box.lo, box.hi)
    pts = pts.astype(np.float32).astype(np.float64)
    pts = np.clip(pts, box.lo, box.hi)
    vals = denote_all(g, p, b32.convert(pts), b32)
    for i in (1, 3, 5):
        v = b32.to_float64(vals[i])
        lo, hi = _ends(boxes[i])
        assert np.all(v >= lo) and np.all(v <= hi), i
        # the execution box is wider than the real one by the rounding bound, not more
        rlo, rhi = _ends(real[i])
        assert np.all(lo <= rlo) and np.all(hi >= rhi)
    # the operator's bound (fan-in of the window, |M||x| from an interval evaluation)
    # is the dense bound up to rounding (0.2 % of the width when n was n_u + 2)
    dense = run_crown(g, p, box, "interval:binary32", method="crown-ibp", jacobian="dense")
    for i in (3, 5):
        w_op = np.asarray(boxes[i].hi) - np.asarray(boxes[i].lo)
        w_dense = np.asarray(dense[i].hi) - np.asarray(dense[i].lo)
        assert np.all(w_op <= w_dense * (1 + 1e-5)), i


@pytest.mark.parametrize("method", ["crown", "crown-ibp"])
def test_spec_bounds_contain_exact_runs_and_beat_output_box(method):
    g, p, _ = small_cnn(4, "relu", "avg")
    x = np.random.default_rng(4).normal(0, 1, (1, 6, 6))
    box = Box(x - 0.15, x + 0.15)
    C = np.array([[1.0, -1.0, 0.0], [0.0, 1.0, -1.0], [-1.0, 0.0, 1.0], [0.5, 0.25, 0.0]])
    sb = run_crown(g, p, box, method=method, spec=C)
    assert sb.shape == (4,)
    assert sb.guarantee == ("real", "execution")
    out = run_crown(g, p, box, method=method)[g.output]
    # C applied to the output box, upper ends (a looser bound, computed in float64 with
    # a generous margin): the spec box is never wider
    olo, ohi = _ends(out)
    lo, hi = _ends(sb)
    cw = np.abs(C) @ (ohi - olo)
    assert np.all(hi - lo <= cw * (1 + 1e-9) + 1e-15)
    assert np.any(hi - lo < 0.9 * cw)           # differences of outputs: CROWN is tighter
    rng = np.random.default_rng(5)
    pts = np.clip(x + rng.uniform(-1, 1, (40,) + x.shape) * 0.15, box.lo, box.hi)
    y = np.asarray(EXACT.to_float64(denote_all(g, p, EXACT.convert(pts), EXACT)[g.output]))
    cy = y @ C.T
    assert np.all(cy >= lo - 1e-12) and np.all(cy <= hi + 1e-12)
    # the (m,) + output shape form and a batch of boxes
    sb2 = run_crown(g, p, Box(np.stack([box.lo, box.lo]), np.stack([box.hi, box.hi])),
                    method=method, spec=C.reshape(4, 3))
    assert sb2.shape == (2, 4)
    assert np.array_equal(np.asarray(sb2.lo)[1], lo)


def test_spec_and_intermediate_errors():
    g, p, _ = small_cnn(4, "relu", "avg")
    x = np.zeros((1, 6, 6))
    box = Box(x - 0.1, x + 0.1)
    with pytest.raises(IBPError, match=r"spec shape \[2, 4\] does not fit"):
        run_crown(g, p, box, spec=np.ones((2, 4)))
    with pytest.raises(IBPError, match="finite float64"):
        run_crown(g, p, box, spec=np.array([[np.nan, 0.0, 0.0]]))
    with pytest.raises(IBPError, match="unknown intermediate"):
        run_crown(g, p, box, intermediate="lp")
    with pytest.raises(IBPError, match="spec= needs method"):
        run_crown(g, p, box, method="ibp", spec=np.ones((1, 3)))
    a = run_crown(g, p, box, intermediate="ibp")
    b = run_crown(g, p, box, method="crown-ibp")
    assert all(np.array_equal(u.lo, v.lo) and np.array_equal(u.hi, v.hi) for u, v in zip(a, b))


def test_memory_estimate_chunks_rows_and_refuses_before_allocating(monkeypatch):
    from scalarlab.ibp.crown import last_estimate
    g, p = _wide_conv(8, 24)
    box = Box(np.full((2, 24, 24), -0.1), np.full((2, 24, 24), 0.1))
    # method crown seeds the relu's input (4 x 24 x 24 = 2304 coordinates, those whose
    # box straddles 0): up to 4608 rows x 10368 columns (the conv's adjoint holds 576
    # positions x 2 channels x 9 offsets per row) x 16 bytes x 6 in one pass; under a
    # 0.1 GiB limit the rows run in chunks whose estimate fits, with the same bounds
    from scalarlab.ibp import crown
    monkeypatch.setattr(crown, "CHUNK_MEMORY", 2 ** 31)
    full = run_crown(g, p, box, method="crown", memory_limit=2 ** 31)
    assert last_estimate() > 2 * 10 ** 8
    monkeypatch.setattr(crown, "CHUNK_MEMORY", 2 ** 29)
    chunked = run_crown(g, p, box, method="crown", memory_limit=10 ** 8)
    assert 0 < last_estimate() <= 10 ** 8
    for a, b in zip(full, chunked):
        np.testing.assert_allclose(b.lo, a.lo, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(b.hi, a.hi, rtol=1e-12, atol=1e-15)
    # one pair of rows over the limit: refused before allocating, one line
    with pytest.raises(CrownError) as e:
        run_crown(g, p, box, method="crown", memory_limit=10 ** 5)
    msg = str(e.value)
    assert "\n" not in msg
    assert "node 1 (conv2d)" in msg and "2 rows x 10368 columns" in msg
    assert "about 1.9 MiB" in msg and "limit of 0.1 MiB" in msg
    monkeypatch.setenv("SCALARLAB_CROWN_MEMORY", "100K")
    with pytest.raises(CrownError, match="limit of 0.1 MiB"):
        run_crown(g, p, box, method="crown")
    # crown-ibp carries 2 x 3 rows from the output only: below the limit
    monkeypatch.setenv("SCALARLAB_CROWN_MEMORY", "16M")
    assert run_crown(g, p, box, method="crown-ibp")[g.output] is not None
    monkeypatch.setenv("SCALARLAB_CROWN_MEMORY", "lots")
    with pytest.raises(IBPError, match="SCALARLAB_CROWN_MEMORY='lots' is not a byte count"):
        run_crown(g, p, box, method="crown-ibp")


@pytest.mark.parametrize("guarantee", ["execution", "real"])
def test_overlapping_max_pool_windows_without_dense_matrices(guarantee):
    """max_pool2d 3x3, stride 2, padding 1 (resnet's stem): windows overlap, so several
    outputs can select the same input; the scattered classes equal the dense S_L, S_U."""
    rng = np.random.default_rng(11)
    g = Graph([Node(0, [], "input", [1, 6, 6]),
               Node(1, [0], OpKind("conv2d", kernel_size=3, padding=1), [2, 6, 6]),
               Node(2, [1], "relu", [2, 6, 6]),
               Node(3, [2], OpKind("max_pool2d", kernel_size=3, stride=2, padding=1),
                    [2, 3, 3]),
               Node(4, [3], "flatten", [18]),
               Node(5, [4], "linear", [3])])
    p = {1: {"conv2d": {"weight": rng.normal(0, 0.5, (2, 1, 3, 3)),
                        "bias": rng.normal(0, 0.1, 2)}},
         5: {"linear": {"W": rng.normal(0, 0.5, (3, 18)), "b": rng.normal(0, 0.1, 3)}}}
    x = rng.normal(0, 1, (1, 6, 6))
    for r in (0.05, 0.5):
        box = Box(x - r, x + r)
        op = run_crown(g, p, box, method="crown", guarantee=guarantee)
        dense = run_crown(g, p, box, method="crown", guarantee=guarantee, jacobian="dense")
        _assert_equal_or_tighter(op, dense)
