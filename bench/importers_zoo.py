"""The zoo table: every model of the CNN zoo (torchvision resnet18, mobilenet_v3_small at
32x32) and of the transformer zoo (BERT/GPT-2 with 1 and 2 layers fed 8 token ids, ViT on
16x16 images), each through both exporters (``dynamo=False`` opset 17, dynamo opset 18),
imported with :func:`load_onnx` and compared as the tests compare them.  Prints a
Markdown table: ONNX nodes, IR nodes, float64 relative error (2-norm) against onnx's
reference evaluator on the model widened to float64, binary32 error against onnxruntime
in ulps of the output scale, and the import time (``load_onnx`` alone, CPU seconds: the
file's first import in the process -- onnx and the lab already imported by then, the
first model pays for those -- and the best of ``--repeat`` more; the export is not
timed).

    python bench/importers_zoo.py [--models resnet18 bert-1 ...] [--repeat 2]

The model builders and oracles are the tests' own (tests/importers), put on ``sys.path``.
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

from scalarlab import graph  # noqa: E402
from scalarlab.graph.importers.onnx import load_onnx  # noqa: E402

import test_importers_zoo_cnn as cnn  # noqa: E402
import test_importers_zoo_transformers as tz  # noqa: E402
from test_importers_zoo import reference64, rel_norm, ulps32  # noqa: E402


def _case(name):
    """(export(path, exporter), feeds64, feeds32, shapes for the legacy import)."""
    if name in cnn.MODELS:
        x = cnn.pixels()
        return (lambda path, ex: cnn.export(name, path, ex), {"x": x.astype(np.float64)},
                {"x": x}, None)
    rng = np.random.default_rng(3)
    if name.startswith("vit"):
        x = rng.standard_normal(tz.PIXELS).astype(np.float32)
        return (lambda path, ex: tz._export(name, path, ex), {"ids": x.astype(np.float64)},
                {"ids": x}, None)
    ids = rng.integers(0, tz.VOCAB, (1, tz.SEQ))
    return (lambda path, ex: tz._export(name, path, ex), {"ids": ids}, {"ids": ids},
            {"ids": (1, tz.SEQ)})


def row(name, exporter, repeat, tmp):
    export, f64, f32, shapes = _case(name)
    path = os.path.join(tmp, f"{name}-{exporter}.onnx")
    export(path, exporter)
    model = onnx.load(path)
    shapes = shapes if exporter == "legacy" else None
    times = []
    for _ in range(1 + repeat):
        c = time.process_time()
        g, p = load_onnx(path, shapes=shapes)
        times.append(time.process_time() - c)
    first, best = times[0], min(times[1:])
    x = next(iter(f64.values())).astype(np.float64)
    ref = reference64(model, f64)
    e64 = rel_norm(np.reshape(graph.denote(g, p, x, "float64"), ref.shape), ref)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    r32 = sess.run(None, f32)[0]
    u = ulps32(np.reshape(graph.denote(g, p, x, "binary32"), r32.shape), r32)
    return (f"| {name} | {exporter} | {len(model.graph.node)} | {len(g.nodes)} | {e64:.1e} | "
            f"{u:.1f} | {first:.2f} / {best:.2f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(cnn.MODELS) + sorted(tz.MODELS))
    ap.add_argument("--exporters", nargs="+", default=["legacy", "dynamo"])
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    print("| model | exporter | ONNX nodes | IR nodes | float64 rel. error | binary32 ulps "
          "vs onnxruntime | import s (CPU, first / best) |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.models:
            for ex in a.exporters:
                print(row(name, ex, a.repeat, tmp), flush=True)


if __name__ == "__main__":
    main()
