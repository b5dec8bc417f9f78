"""The figures of ``scalarlab compare`` on the zoo's real networks (issue 31): per model and
context the output's normwise error (max|error| / ulp(max|exact|), in ulps of the output
scale: the figure the verdict leads with and the unit of docs/exchange.md's tolerances),
the per-entry max ULPs (the old verdict's figure, dominated by the output closest to 0),
the relative error where |exact| is not tiny, the underflow count, and the divergence node
by the node-scale rule (``--divergence-ulps 4``) next to the old per-entry bits rule
(> 2 bits).  For binary32 also onnxruntime's and torch's float32 outputs, normwise against
the same reference, and ours against onnxruntime (the zoo tests' figure).

Models: the zoo tests' own (tests/importers: torchvision resnet18 and mobilenet_v3_small
at 32x32, BERT/GPT-2 with 1 layer on 8 token ids, ViT on 16x16; random weights, seeded),
legacy exporter (opset 17), one input each.  The reference is the lab's float64 fold
(``--reference float64``, a CPU-cheap stand-in for the 200-bit oracle): its distance to
exact is about 1e-15 relative (the zoo's float64 figures), under 1e-7 binary32 ulps of the
output scale, so the binary32 / bfloat16 / binary16 / e4m3 figures are those against
exact to the digits printed.  ``--exact`` also runs the mpmath:200 oracle (minutes on
the CNNs) and prints binary32's and float64's figures against it.

    python bench/figures_zoo.py [--models resnet18 bert-1 ...] [--exact]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import benchlib  # noqa: F401  (one thread per numeric library; before numpy)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "importers"))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402

from scalarlab.experiments import cases as CS  # noqa: E402
from scalarlab.experiments import compare as C  # noqa: E402
from scalarlab.experiments import metrics  # noqa: E402
from scalarlab.graph.importers.onnx import load_onnx  # noqa: E402

from importers_torchvision import torchvision_models  # noqa: E402
import test_importers_zoo_cnn as cnn  # noqa: E402
import test_importers_zoo_transformers as tz  # noqa: E402
from test_importers_zoo import ulps32  # noqa: E402

torchvision_models()     # transformers imports torchvision: make it importable first

CONTEXTS = ("binary32", "bfloat16", "binary16", "e4m3")
DEFAULT_MODELS = ("resnet18", "mobilenet_v3_small", "bert-1", "gpt2-1", "vit-1")


def _torch_model(name):
    """The exported module, rebuilt with the seed the export used (same weights)."""
    if name in cnn.MODELS:
        return cnn.build(name)
    torch.manual_seed(sum(map(ord, name)))
    make, layers = tz.MODELS[name]
    vit = name.startswith("vit")
    return tz._Ids(make(layers), "pixel_values" if vit else "input_ids").eval()


def _inputs(name):
    """(float32 / int feed for onnxruntime and torch, shapes for the legacy import)."""
    if name in cnn.MODELS:
        return cnn.pixels(), None
    rng = np.random.default_rng(3)
    if name.startswith("vit"):
        return rng.standard_normal(tz.PIXELS).astype(np.float32), None
    return rng.integers(0, tz.VOCAB, (1, tz.SEQ)), {"ids": (1, tz.SEQ)}


def _export(name, path):
    if name in cnn.MODELS:
        cnn.export(name, path, "legacy")
    else:
        tz._export(name, path, "legacy")


def measure(name, tmp, exact=False):
    """Rows (dicts) of one model: one per context, plus the float32 libraries."""
    path = os.path.join(tmp, f"{name}.onnx")
    _export(name, path)
    model = onnx.load(path)
    feed, shapes = _inputs(name)
    g, p = load_onnx(path, shapes=shapes)
    case = CS.GraphCase(name, g, p, None)
    per_example = tuple(g.nodes[0].out_shape) != tuple(feed.shape)
    x = feed.astype(np.float64) if feed.dtype.kind == "f" else feed
    if per_example:                         # the legacy CNN import is per example
        x = x.reshape(1, *g.nodes[0].out_shape)
    rows = []
    res = None
    for ctx in CONTEXTS:          # one run per context: a context may refuse the model
        t = time.process_time()
        try:
            one = C.compare(case, CS.parse_contexts(ctx), x, reference="float64")
        except Exception as e:   # noqa: BLE001  (reported in the table, e.g. e4m3 indices)
            rows.append(dict(model=name, what=ctx, error=str(e).split(": ")[-1][:60]))
            continue
        v = one.verdicts[ctx]
        if case.output_id in (v.get("failed_nodes") or ()):   # compare goes on and says so
            rows.append(dict(model=name, what=ctx, error=v["failure"].split(": ")[-1][:60]))
            continue
        res = res or one
        r = one.rows
        out = r[r["node"] == case.output_id].iloc[0]
        old = metrics.first_divergence(list(r["max_bits"]), C.DEFAULT_THRESHOLD_BITS)
        rows.append(dict(model=name, what=ctx, nodes=len(g.nodes),
                         normwise=out["normwise_ulps"], max_ulps=out["max_ulps"],
                         scale=out["max_abs_ref"], rel=out["max_rel_err_nontiny"],
                         nontiny=out["nontiny"],
                         entries=out["entries"], underflow=out["underflow"],
                         underflow_rounded=out["underflow_rounded"],
                         old_div=None if old is None else int(case.nodes[old].id),
                         new_div=v["divergence_node"], secs=time.process_time() - t))
    ref = np.asarray(res.reference.values[case.output_id][0], dtype=np.float64)
    b32 = CS.parse_contexts("binary32")[0]   # our binary32 output (compare keeps no values)
    ours32 = np.asarray(CS.evaluate_split(case, x, b32)[case.output_id][0], dtype=np.float64)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    r_ort = sess.run(None, {"ids" if name not in cnn.MODELS else "x": feed})[0]
    with torch.no_grad():
        r_torch = _torch_model(name)(torch.from_numpy(feed)).numpy()
    ref = ref.reshape(r_ort.shape)
    ours32 = ours32.reshape(r_ort.shape)
    rows.append(dict(model=name, what="onnxruntime float32", normwise=ulps32(r_ort, ref),
                     vs_ours=ulps32(ours32, r_ort)))
    rows.append(dict(model=name, what="torch float32", normwise=ulps32(r_torch, ref),
                     vs_ours=ulps32(ours32, r_torch.reshape(r_ort.shape))))
    if exact:                   # one oracle run for both contexts
        t = time.process_time()
        ex = C.compare(case, CS.parse_contexts("binary32,float64"), x, reference="mpmath:200")
        secs = time.process_time() - t
        for ctx in ("binary32", "float64"):
            r = ex.rows[ex.rows["context"] == ctx]
            out = r[r["node"] == case.output_id].iloc[0]
            rows.append(dict(model=name, what=f"{ctx} vs mpmath:200",
                             normwise=out["normwise_ulps"], max_ulps=out["max_ulps"],
                             secs=secs))
    return rows


def _fmt(v, spec=".1f"):
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return "-"
    return format(v, spec) if isinstance(v, float) else str(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS))
    ap.add_argument("--exact", action="store_true")
    a = ap.parse_args()
    print("| model | context | scale | normwise ulps of the scale | per-entry max ULPs | "
          "rel err (not tiny) | underflow | divergence: node scale (4 ulps) / per-entry "
          "bits (2) | CPU s |")
    print("|---|---|---|---|---|---|---|---|---|")
    libs = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.models:
            for r in measure(name, tmp, a.exact):
                if "vs_ours" in r:
                    libs.append(r)
                    continue
                if r["what"].endswith("mpmath:200"):
                    libs.append(r)
                    continue
                if "error" in r:
                    print(f"| {name} | {r['what']} | refused: {r['error']} | | | | | | |")
                    continue
                under = f"{r['underflow']} of {r['entries']}" + (
                    f" ({r['underflow_rounded']} CR to 0)" if r["underflow"] else "")
                rel = "-" if not r["nontiny"] else f"{r['rel']:.2g}"
                print(f"| {name} | {r['what']} | {r['scale']:.2g} | "
                      f"{_fmt(r['normwise'], '.2f')} | {_fmt(r['max_ulps'], '.0f')} | {rel} | "
                      f"{under} | "
                      f"{_fmt(r['new_div'])} / {_fmt(r['old_div'])} | {r['secs']:.1f} |",
                      flush=True)
    print()
    print("| model | float32 run | normwise binary32 ulps vs float64 reference | ours vs it |")
    print("|---|---|---|---|")
    for r in libs:
        if "vs_ours" in r:
            print(f"| {r['model']} | {r['what']} | {r['normwise']:.2f} | {r['vs_ours']:.2f} |")
        else:
            print(f"| {r['model']} | {r['what']} | {r['normwise']:.2f} "
                  f"(per entry {r['max_ulps']:.0f} ULPs; {r['secs']:.0f} s CPU) | - |")


if __name__ == "__main__":
    main()
