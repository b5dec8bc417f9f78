"""``reduction-order``: orders found by their flags, the native device checked against
numpy float64 + one rounding, per-node ULP gaps recomputed from float32 bit patterns."""
import json

import numpy as np
import pandas as pd
import pytest

from scalarlab import graph
from scalarlab.experiments import cases as CS
from scalarlab.experiments import reduction_order as R
from scalarlab.experiments.cli import main
from scalarlab.scalars import formats


def _ord32(x):
    b = np.asarray(x, dtype=np.float32).view(np.int32).astype(np.int64)
    return np.where(b < 0, -(b & 0x7FFFFFFF), b)


def test_orders_are_found_by_flags():
    ctxs, missing = R.order_contexts("binary32")
    assert list(ctxs) == ["sequential", "pairwise", "fma", "native"] and missing == {}
    assert ctxs["pairwise"].reduction == "pairwise" and not ctxs["pairwise"].fma_dot
    assert ctxs["fma"].reduction == "sequential" and ctxs["fma"].fma_dot
    assert ctxs["sequential"].name == "binary32"
    ctxs, _ = R.order_contexts("bfloat16")
    assert all(c.fmt == formats.get("bfloat16") for c in ctxs.values())


def test_native_context_is_float64_kernels_rounded_once():
    fmt = formats.get("binary32")
    ctx = R.WideAccumulationContext("binary32")
    rng = np.random.default_rng(0)
    a = formats.round_to_format(rng.normal(size=(7, 33)), fmt)
    b = formats.round_to_format(rng.normal(size=(33, 5)), fmt)
    assert np.array_equal(ctx.sum(a, axis=1),
                          np.sum(a, axis=1).astype(np.float32).astype(np.float64))
    assert np.array_equal(ctx.matmul(a, b), (a @ b).astype(np.float32).astype(np.float64))
    # elementwise + - * / equal the correctly rounded binary32 ops (2p+2 rule)
    x, y = a[:5, :5], b[:5, :].T
    for op, f in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                  ("div", np.divide)):
        want = f(x.astype(np.float32), y.astype(np.float32)).astype(np.float64)
        assert np.array_equal(getattr(ctx, op)(x, y), want)
    # decimal strings are rounded once, not via float64
    assert ctx.convert(np.array(["0.1"], dtype=object))[0] == float(np.float32(0.1))


def test_gaps_between_orders_recomputed_from_bit_patterns():
    case = CS.load_case("six-node")
    x = CS.box_samples(CS.center_of(case, None), 0.05, 60, seed=4)
    res = R.reduction_order(case, x, formats=["binary32"])
    ctxs, _ = R.order_contexts("binary32")
    seq = graph.denote_all(case.graph, case.payload, x, ctxs["sequential"])
    for order, ctx in ctxs.items():
        vals = graph.denote_all(case.graph, case.payload, x, ctx)
        for node, v, s in zip(case.nodes, vals, seq):
            d = np.abs(_ord32(np.asarray(v).reshape(-1)) - _ord32(np.asarray(s).reshape(-1)))
            row = res.rows[(res.rows["order"] == order) & (res.rows["node"] == node.id)].iloc[0]
            assert row["max_ulps_vs_sequential"] == d.max()
            assert row["mean_ulps_vs_sequential"] == pytest.approx(d.mean())
            assert row["frac_differs"] == pytest.approx(np.mean(d != 0))
    seq_rows = res.rows[res.rows["order"] == "sequential"]
    assert (seq_rows["max_ulps_vs_sequential"] == 0).all()
    # the orders really differ somewhere (accumulation order is visible in binary32)
    assert res.rows["max_ulps_vs_sequential"].max() > 0


def test_cli_json_and_files(tmp_path, capsys):
    out, png = tmp_path / "r.json", tmp_path / "r.png"
    assert main(["reduction-order", "--samples", "40", "--quiet", "--json", "--out", str(out),
                 "--plot", str(png)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "scalarlab-reduction-order"
    assert doc["meta"]["orders"]["bfloat16"]["pairwise"] == "bfloat16/pairwise"
    back = pd.DataFrame(json.loads(out.read_text())["rows"])
    assert list(back.columns) == list(R.ROW_COLUMNS)
    assert len(back) == 2 * 4 * 6                       # formats x orders x nodes
    data = png.read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert (int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")) == (800, 450)


def test_cli_terminal_and_errors(capsys):
    assert main(["reduction-order", "--samples", "10", "--quiet", "--formats", "binary16"]) == 0
    out = capsys.readouterr().out
    assert "binary16: sequential=binary16, pairwise=binary16/pairwise, fma=binary16+fma" in out
    assert "native Δseq" in out
    with pytest.raises(SystemExit) as exc:        # refused while parsing the flags
        main(["reduction-order", "--formats", "binary99", "--quiet"])
    assert exc.value.code == 2
    assert "binary99" in capsys.readouterr().err
