"""The lab's three jobs on the transformer/recurrent/upsampling zoo: ``compare``, ``gaps``
and ``sweep --method ibp,crown`` on a BERT encoder and a GPT-2 decoder fed token ids, a
ViT, a U-Net-style decoder (ConvTranspose + GroupNorm + Upsample) and LSTM/GRU
classifiers, each exported with ``torch.onnx.export(dynamo=False, opset_version=17)`` and
imported by ``scalarlab import`` (small inputs, one sample or a few, small radii).

What is asserted: float64 agrees with the mpmath oracle to 1e-13 of the output scale and
binary32 to 1e-5 of it (compare); the binary32 gap's ULPs are small and, for token-id
models, the same at every sample (the ids are held, never perturbed); every IBP and CROWN
box contains the point runs of its own format (sweep: 0 violations), a token-id model's
sampled outputs do not move whatever the radius, and a real-input model's do.  The
exports take seconds and the mpmath oracle tens of seconds: slow selection."""
from __future__ import annotations

import contextlib
import io
import json
import warnings

import numpy as np
import pytest
import torch

from scalarlab import graph, scalars
from scalarlab.experiments import cases as CS
from scalarlab.experiments import gaps as GP
from scalarlab.experiments.cli import main as cli_main

pytestmark = pytest.mark.slow

SEQ = 8
VOCAB = 50


def _export_transformer(name, path):
    from test_importers_zoo_transformers import _export
    _export(name, path)
    if name.startswith("vit"):
        return [], np.random.default_rng(3).standard_normal((1, 3, 16, 16)).astype(
            np.float32).astype(np.float64)
    return ["--shape", f"ids=1x{SEQ}"], np.random.default_rng(3).integers(
        0, VOCAB, (1, SEQ)).astype(np.float64)


def _export_torch(m, x, path, dynamic):
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(m, (x,), str(path), dynamo=False, opset_version=17,
                          input_names=["x"], output_names=["y"], dynamic_axes=dynamic)


def _export_unet(name, path):
    from test_importers_onnx_spatial import UNetDecoder
    torch.manual_seed(11)
    x = torch.randn(1, 8, 3, 3)
    _export_torch(UNetDecoder().eval(), x, path, {"x": {0: "N"}, "y": {0: "N"}})
    return [], x.numpy().astype(np.float64)


def _export_recurrent(name, path):
    from test_importers_onnx_recurrent import Classifier
    torch.manual_seed(7)
    x = torch.randn(1, 7, 5)
    _export_torch(Classifier(name.upper(), False, False).eval(), x, path, {"x": {1: "T"}})
    return ["--shape", "x=1x7x5"], x.numpy().astype(np.float64)


MODELS = {"bert-1": _export_transformer, "gpt2-1": _export_transformer,
          "vit-1": _export_transformer, "unet": _export_unet, "lstm": _export_recurrent,
          "gru": _export_recurrent}
TOKEN_IDS = {"bert-1", "gpt2-1"}


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """name -> (graph file, centre input: a batch of one) (exported and imported once)."""
    done = {}

    def get(name):
        if name not in done:
            d = tmp_path_factory.mktemp(name)
            extra, x = MODELS[name](name, d / f"{name}.onnx")
            out = d / f"{name}.json"
            assert cli_main(["import", str(d / f"{name}.onnx"), "-o", str(out), *extra]) == 0
            g, _ = graph.load(str(out))
            # a per-example import (U-Net: symbolic batch axis) takes x as a batch of one
            done[name] = (out, x if tuple(g.nodes[0].out_shape) == x.shape[1:] else x[None])
        return done[name]
    return get


@pytest.mark.parametrize("name", sorted(MODELS))
def test_compare_float64_and_binary32_against_mpmath(name, imported, tmp_path, capsys):
    path, x = imported(name)
    g, p = graph.load(str(path))
    assert (CS.integer_inputs(CS.load_case(str(path))) == {0: "int64"}) == (name in TOKEN_IDS)
    np.save(tmp_path / "x.npy", x)
    capsys.readouterr()
    rc = cli_main(["compare", str(path), "--input", str(tmp_path / "x.npy"), "--contexts",
                   "float64,binary32", "--json", "--quiet"])
    out = capsys.readouterr().out
    assert rc == 0, out
    doc = json.loads(out)
    rows = {(r["context"], r["node"]): r for r in doc["rows"]}
    scale = float(np.max(np.abs(graph.denote(g, p, x, "float64"))))
    f64, b32 = rows[("float64", g.output)], rows[("binary32", g.output)]
    assert f64["nonfinite"] == 0 and b32["nonfinite"] == 0
    assert f64["max_abs_err"] <= 1e-13 * scale, (name, f64["max_abs_err"], scale)
    assert b32["max_abs_err"] <= 1e-5 * scale, (name, b32["max_abs_err"], scale)
    assert b32["max_ulps"] < 2 ** 12


@pytest.mark.parametrize("name", sorted(MODELS))
def test_gaps_binary32_holds_token_ids(name, imported):
    path, x = imported(name)
    case = CS.load_case(str(path))
    n = 3
    res = GP.gaps(case, scalars.get("binary32"), samples=n, radius=0.01, seed=2,
                  center=x, reference="float64")
    per = res.ulps.reshape(n, -1)
    assert np.isfinite(per).all() and per.max() < 2 ** 12
    assert np.median(per) <= 64
    # token ids held: every sample is the centre, so every sample has the same gap; a
    # real input moves within the radius and the gaps differ
    same = all(np.array_equal(per[0], per[k]) for k in range(1, n))
    assert same == (name in TOKEN_IDS), name


@pytest.mark.parametrize("name", sorted(MODELS))
def test_sweep_ibp_crown_boxes_contain_point_runs(name, imported, tmp_path, capsys):
    path, x = imported(name)
    np.save(tmp_path / "c.npy", x)
    radius = "0.5" if name in TOKEN_IDS else "0.0005"
    capsys.readouterr()
    rc = cli_main(["sweep", str(path), "--center-file", str(tmp_path / "c.npy"), "--radii",
                   radius, "--samples", "3", "--contexts", "binary32", "--method",
                   "ibp,crown", "--json", "--quiet"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    rows = json.loads(out.out)["rows"]
    assert [r["method"] for r in rows] == ["ibp", "crown"]
    for r in rows:
        assert r["violations"] == 0 and r["claimed_violations"] == 0 and r["failures"] == 0
        assert r["checked"] == "execution" and "execution" in r["guarantee"]
        assert r["box_lo"] <= r["sampled_lo"] <= r["sampled_hi"] <= r["box_hi"]
        if name in TOKEN_IDS:
            # the ids are not widened by the radius: one point, a box of rounding width
            assert r["sampled_width"] == 0.0
            assert r["box_width"] <= 1e-2 * max(abs(r["box_lo"]), abs(r["box_hi"]))
        else:
            assert r["sampled_width"] > 0.0 and r["box_width"] >= r["sampled_width"]
