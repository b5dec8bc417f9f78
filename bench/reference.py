"""The reference's cost beside the contexts' forward passes, on torchvision CNNs.

For each model (random weights, 10 classes, exported to ONNX with a batch axis and
imported with ``load_onnx``) and N samples in a small box around one image, one child
process per phase, CPU seconds and peak RSS each:

* ``forward CTX``: ``denote_all`` of the batch in float64, binary32, bfloat16;
* ``enclosure``: the interval:float64 pass of :mod:`experiments.enclosure_reference` and
  how many samples it settles for binary32 / bfloat16 at the output (the rest would go to
  the oracle; the oracle is not run here), with the largest relative width at the output;
* ``ball``: the ball:3 pass of the default reference over the batch, the samples it
  settles at the output in float64, binary32 and bfloat16 together, then ball:6 on the
  samples left unsettled by their radius (the oracle is not run), with the largest
  relative radius at the output;
* ``reference``: the whole default reference (enclosure, then mpmath:200 on the samples
  it leaves) for binary32, bfloat16, binary16, e4m3;
* ``oracle``: the old reference (``mpmath:200`` on every node) on ``--oracle-samples``
  samples (default 1; it is minutes per sample at 32x32).

``mlp:64-128-128-10`` is a relu MLP of those widths (He-scaled random weights) instead of
a torchvision model.

    python bench/reference.py [--models resnet18:224 mobilenet_v3_small:32] [--samples 16]
                              [--phases forward,enclosure,ball,reference,oracle]
                              [--oracle-samples 1]
    python bench/reference.py --models mlp:64-128-128-10 --samples 2000 --oracle-samples 200

Prints a Markdown table (model, phase, samples, CPU s, peak RSS MB, settled).  The model
builders are the tests' own (tests/importers), put on ``sys.path``.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import benchlib  # noqa: F401  (one thread per numeric library; before numpy)

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(HERE, "..", "tests", "importers")


def export(name, side, path):
    """The legacy exporter with a symbolic batch axis, as the CNN zoo tests export."""
    import contextlib
    import io
    import warnings
    sys.path.insert(0, TESTS)
    import torch
    from importers_torchvision import torchvision_models
    torch.manual_seed(sum(map(ord, name)))
    m = getattr(torchvision_models(), name)(num_classes=10).eval()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(m, (torch.randn(1, 3, side, side),), path, dynamo=False,
                          opset_version=17, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})


def child(args):
    """One phase in this process: prints one JSON line."""
    import numpy as np
    from scalarlab import graph, scalars
    from scalarlab.experiments import cases as CS
    from scalarlab.experiments import enclosure_reference as ER
    from scalarlab.experiments import metrics
    from scalarlab.experiments import reference as RF
    from scalarlab.graph.importers.onnx import load_onnx
    if args.file.startswith("mlp:"):
        import benchlib as B
        g, p = B.mlp_graph([int(t) for t in args.file[4:].split("-")],
                           np.random.default_rng(0))
    else:
        g, p = load_onnx(args.file)
    case = CS.GraphCase(os.path.basename(args.file), g, p)
    shape = tuple(g.nodes[0].out_shape)
    rng = np.random.default_rng(3)
    center = rng.standard_normal((1, *shape))
    n = args.n
    x = center + rng.uniform(-2.0 ** -8, 2.0 ** -8, (n, *shape))
    x = x.astype(np.float32).astype(np.float64)          # inputs every format holds
    out = {"phase": args.phase, "samples": n}
    # warm: compile the kernels the phase runs (Numba caches, lazy ufuncs) on 2 samples
    if args.phase.startswith("forward "):
        graph.denote_all(g, p, x[:2], scalars.get(args.phase.split()[1]))
    elif args.phase in ("enclosure", "reference"):
        ER.evaluate_enclosure(case, x[:2])
    elif args.phase == "ball":
        fmts = {c: metrics.format_of(scalars.get(c)) for c in ("float64", "binary32",
                                                                "bfloat16")}
        ER._evaluate_balls(case, x[:1], ER.BALL_K, fmts, [case.output_id])
    c0 = time.process_time()
    if args.phase.startswith("forward "):
        graph.denote_all(g, p, x, scalars.get(args.phase.split()[1]))
    elif args.phase == "enclosure":
        enc = ER.evaluate_enclosure(case, x)
        lo, hi = enc[case.output_id]
        settled = {}
        for f in ("binary32", "bfloat16"):
            fmt = metrics.format_of(scalars.get(f))
            s = ER.settled_entries(lo, hi, fmt).reshape(n, -1).all(axis=1)
            settled[f] = int(np.count_nonzero(s))
        mid = np.maximum(np.abs(lo), np.abs(hi))
        out["settled"] = settled
        out["max_rel_width"] = float(np.max((hi - lo) / mid))
    elif args.phase == "ball":
        res = ER._evaluate_balls(case, x, ER.BALL_K, fmts, [case.output_id])
        out["settled"] = {f"ball:{ER.BALL_K}": int(np.count_nonzero(res["ok"]))}
        esc = np.flatnonzero(~res["ok"] & (res["tight"] | res["failed"]))
        c1 = time.process_time()
        if esc.size:
            up = ER._evaluate_balls(case, x[esc], ER.BALL_K_MAX, fmts, [case.output_id])
            out["settled"][f"ball:{ER.BALL_K_MAX}"] = int(np.count_nonzero(up["ok"]))
        out["cpu_escalation_s"] = time.process_time() - c1
        out["max_rel_width"] = 2 * float(np.max(res["rel"][:, case.output_id]))
        if res["why"]:
            out["refused"] = res["why"][:80]
    elif args.phase == "reference":
        ref = RF.compute_reference(case, x, RF.ENCLOSURE, CS.parse_contexts(
            "binary32,bfloat16,binary16,e4m3"))
        out["settled"] = {"samples": ref.check.get("samples_by_enclosure", 0)}
        out["max_rel_width"] = 2 * ref.check.get("max_rel_radius", float("nan"))
    elif args.phase == "oracle":
        RF.compute_reference(case, x, RF.DEFAULT_ORACLE, CS.parse_contexts("binary32"))
    out["cpu_s"] = time.process_time() - c0
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


def run_phase(path, phase, n):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", phase, "--file", path,
           "--n", str(n)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return {"phase": phase, "samples": n, "error": (r.stderr.strip().splitlines()
                                                       or ["killed"])[-1]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["resnet18:224", "mobilenet_v3_small:32"])
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--oracle-samples", type=int, default=1)
    ap.add_argument("--phases", default="forward,enclosure,ball,reference,oracle")
    ap.add_argument("--child", default=None)
    ap.add_argument("--file", default=None)
    ap.add_argument("--n", type=int, default=1)
    args = ap.parse_args()
    if args.child:
        args.phase = args.child
        return child(args)
    phases = args.phases.split(",")
    print("| model | phase | samples | CPU s | peak RSS MB | settled at the output |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for spec in args.models:
            name, side = spec.split(":")
            if name == "mlp":
                path = spec
            else:
                path = os.path.join(tmp, f"{name}_{side}.onnx")
                export(name, int(side), path)
            todo = []
            if "forward" in phases:
                todo += [(f"forward {c}", args.samples) for c in (
                    "float64", "binary32", "bfloat16", "binary16", "e4m3")]
            if "enclosure" in phases:
                todo.append(("enclosure", args.samples))
            if "ball" in phases:
                todo.append(("ball", args.samples))
            if "reference" in phases:
                todo.append(("reference", args.samples))
            if "oracle" in phases:
                todo.append(("oracle", args.oracle_samples))
            for phase, n in todo:
                r = run_phase(path, phase, n)
                if "error" in r:
                    print(f"| {spec} | {phase} | {n} | - | - | {r['error']} |", flush=True)
                    continue
                s = r.get("settled")
                note = "" if s is None else (
                    ", ".join(f"{k} {v}/{n}" for k, v in s.items())
                    + f" (max rel width {r['max_rel_width']:.2g})")
                if "cpu_escalation_s" in r:
                    note += f"; escalation {r['cpu_escalation_s']:.2f} s"
                if "refused" in r:
                    note += f"; refused: {r['refused']}"
                print(f"| {spec} | {phase} | {n} | {r['cpu_s']:.2f} | {r['peak_mb']:.0f} | "
                      f"{note} |", flush=True)


if __name__ == "__main__":
    main()
