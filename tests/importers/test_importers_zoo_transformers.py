"""Transformer zoo: BERT- and GPT-2-style models built from ``transformers`` configs
(hidden 32, one or two layers, random weights) fed token ids, and a ViT on 16x16
images (patch 4), exported with
``torch.onnx.export(dynamo=False, opset_version=17)`` with symbolic batch and sequence
axes (and by the dynamo exporter at opset 18, static shapes), and imported with concrete
shapes (``scalarlab import --shape ids=1x8``; the ViT with the default, every symbolic
dimension 1).

Oracles as in the main zoo (:mod:`test_importers_zoo`): float64 against onnx's reference
evaluator on the model widened to float64 (its Erf replaced by one in float64), within
1e-12 relative; binary32 against onnxruntime on the float32 model, in ulps of the output
scale.  The exports take seconds: slow selection."""
from __future__ import annotations

import contextlib
import io
import logging
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from scalarlab import graph
from test_importers_zoo import REL64, reference64, rel_norm, ulps32

SEQ = 8
VOCAB = 50
ULPS = 8


class _Ids(torch.nn.Module):
    """The model's last hidden state from token ids (or pixels) alone."""

    def __init__(self, m, key="input_ids"):
        super().__init__()
        self.m = m
        self.key = key

    def forward(self, ids):
        return self.m(**{self.key: ids}).last_hidden_state


def _bert(layers):
    from transformers import BertConfig, BertModel
    return BertModel(BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=layers,
                                num_attention_heads=2, intermediate_size=64,
                                max_position_embeddings=16, attn_implementation="eager"))


def _gpt2(layers):
    from transformers import GPT2Config, GPT2Model
    return GPT2Model(GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=layers, n_head=2,
                                n_positions=16, bos_token_id=0, eos_token_id=0,
                                attn_implementation="eager"))


def _vit(layers):
    from transformers import ViTConfig, ViTModel
    return ViTModel(ViTConfig(hidden_size=32, num_hidden_layers=layers, num_attention_heads=2,
                              intermediate_size=64, image_size=16, patch_size=4,
                              num_channels=3, attn_implementation="eager"),
                    add_pooling_layer=False)


MODELS = {"bert-1": (_bert, 1), "bert-2": (_bert, 2), "gpt2-1": (_gpt2, 1),
          "gpt2-2": (_gpt2, 2), "vit-1": (_vit, 1)}
PIXELS = (1, 3, 16, 16)


def _export(name, path, exporter="legacy"):
    """The legacy exporter with symbolic batch and sequence axes; the dynamo exporter
    (opset 18) at the static shape the test imports."""
    torch.manual_seed(sum(map(ord, name)))
    make, layers = MODELS[name]
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        logging.getLogger("transformers").setLevel(logging.ERROR)
        logging.getLogger("torch").setLevel(logging.ERROR)
        vit = name.startswith("vit")
        m = _Ids(make(layers), "pixel_values" if vit else "input_ids").eval()
        if exporter == "dynamo":
            ids = torch.randn(*PIXELS) if vit else torch.randint(0, VOCAB, (1, SEQ))
            torch.onnx.export(m, (ids,), str(path), dynamo=True, opset_version=18,
                              input_names=["ids"], verbose=False)
            return
        ids = torch.randn(*PIXELS) if vit else torch.randint(0, VOCAB, (2, SEQ))
        torch.onnx.export(m, (ids,), str(path), dynamo=False, opset_version=17,
                          input_names=["ids"], output_names=["y"],
                          dynamic_axes={"ids": {0: "N"} if vit else {0: "N", 1: "T"},
                                        "y": {0: "N", 1: "T"}})


@pytest.mark.slow
@pytest.mark.parametrize("exporter", ["legacy", "dynamo"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_transformer_imports_and_agrees(name, exporter, tmp_path):
    path = tmp_path / f"{name}.onnx"
    _export(name, path, exporter)
    model = onnx.load(str(path))
    from scalarlab.experiments.cli import main as cli_main
    out = tmp_path / f"{name}.json"
    vit = name.startswith("vit")
    shape = ["--shape", f"ids=1x{SEQ}"] if not vit and exporter == "legacy" else []
    assert cli_main(["import", str(path), "-o", str(out), *shape]) == 0
    g, p = graph.load(str(out))
    assert g.nodes[0].out_shape == (PIXELS if vit else (1, SEQ))
    rng = np.random.default_rng(3)
    ids = rng.standard_normal(PIXELS).astype(np.float32) if vit else \
        rng.integers(0, VOCAB, (1, SEQ))
    ours64 = graph.denote(g, p, ids.astype(np.float64), "float64")
    # the widened model reads float64 pixels (binary32 values); token ids stay int64
    e64 = rel_norm(ours64, reference64(model, {"ids": ids.astype(np.float64) if vit else ids}))
    assert e64 <= REL64, (name, e64)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    u = ulps32(graph.denote(g, p, ids.astype(np.float64), "binary32"),
               sess.run(None, {"ids": ids})[0])
    assert u <= ULPS, (name, u)
    print(f"{name} ({exporter}): {len(model.graph.node)} ONNX nodes -> {len(g.nodes)} IR nodes, float64 "
          f"{e64:.2e}, binary32 {u:.1f} ulps")
