"""The zoo timing table of issue 31: ``scalarlab compare`` and ``gaps`` on real networks
beside the forward passes they check.

Models (random weights, seeded, nothing downloaded): torchvision resnet18 at 224x224 and
32x32, mobilenet_v3_small at 32x32 (the zoo tests' builders, tests/importers), the 4-layer
CNN of the CROWN benches (bench/crown_memory.py, 32x32) and a one-layer BERT on 8 token ids
(tests/importers' tiny ``BertModel`` config), and the built-in six-node graph for the
fixed cost of a ``compare`` run (imports, compiled kernels' caches).  Each model is
exported to ONNX (the CNNs with the legacy exporter and a symbolic batch axis, BERT with
the dynamo exporter at its static shape) and handed to the lab as the ``.onnx`` file, so
every command runs the importer.

Every run is a fresh child process (:func:`benchlib.run_json_child`: CPU seconds, wall
seconds and the child's peak RSS) with a CPU-time limit (``--max-seconds``, user+sys of
the child after its start-up, so the machine's load does not shorten it): a run past it
is stopped and shows as ``> N``; a wall-clock backstop of 8 N kills a run that hangs.
Each row is also printed on stderr as it lands (``# {json}``; ``--rows FILE`` rebuilds
the table from those lines or from ``--json``'s output).  Rows per model:

* ``compare`` with float64, binary32, bfloat16 (resnet18 224x224: ``--samples 16``; the
  other models one input), the command's default reference;
* ``gaps`` of binary32 on mobilenet_v3_small with ``--samples 2000``;
* the three contexts' own forward passes (``graph.denote`` on the imported graph, one
  child per context, the import and one warm-up call not timed), onnxruntime (float32) and torch (float32) on
  a batch of the command's size (16, 1 or 2000 inputs drawn as the command draws them:
  uniform in the box of radius 0.05 around the input).

The table gives CPU seconds (user+sys of the timed part), wall seconds, peak GB, and the
command's CPU over the sum of the three forwards' CPU at the same batch, over
onnxruntime's and over torch's.

    python bench/zoo_runs.py [--models resnet18-224 resnet18-32 mobilenet-32 cnn4 bert]
                             [--max-seconds 900] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import benchlib  # noqa: F401  (one thread per numeric library; before numpy)
from benchlib import run_json_child

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(HERE, "..", "tests", "importers")

# name -> (builder key, input side or None for BERT, compare samples, gaps samples or 0)
MODELS = {
    "resnet18-224": ("resnet18", 224, 16, 0),
    "resnet18-32": ("resnet18", 32, 1, 0),
    "mobilenet-32": ("mobilenet_v3_small", 32, 1, 2000),
    "cnn4": ("cnn4", 32, 1, 0),
    "bert": ("bert-1", None, 1, 0),
    # the built-in six-node graph: the fixed cost of a compare run (imports, compiled
    # kernels' caches, the oracle's set-up), against which the small models' rows read
    "six-node": (None, None, 1, 0),
}
CONTEXTS = ("float64", "binary32", "bfloat16")
RADIUS = 0.05            # compare's and gaps' default sampling radius
GAPS_CHUNK = 250         # forwards of the 2000 gaps inputs in chunks (memory of one fold)


def build(key, side):
    """The torch module (eval mode, float32) of a zoo entry, seeded as its tests seed it."""
    import torch
    sys.path.insert(0, TESTS)
    from importers_torchvision import torchvision_models
    torchvision_models()     # before transformers too: it imports torchvision (see there)
    if key == "cnn4":
        from crown_memory import build as crown_build
        torch.manual_seed(0)
        return crown_build("cnn4", side)[0]
    if key.startswith("bert"):
        import test_importers_zoo_transformers as tz
        torch.manual_seed(sum(map(ord, key)))
        make, layers = tz.MODELS[key]
        return tz._Ids(make(layers)).eval()
    torch.manual_seed(sum(map(ord, key)))
    return getattr(torchvision_models(), key)(num_classes=10).eval()


def prepare(name, work):
    """Export the model to ``work/NAME.onnx``, write its input ``NAME-x.npy`` and the
    sampled batches ``NAME-xs<N>.npy`` the forwards run on; returns the paths."""
    import contextlib
    import io
    import logging
    import warnings

    import numpy as np
    import torch
    key, side, n_cmp, n_gaps = MODELS[name]
    if key is None:
        return name, None, {}
    model = build(key, side)
    path = os.path.join(work, f"{name}.onnx")
    rng = np.random.default_rng(3)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        logging.getLogger("torch").setLevel(logging.ERROR)
        logging.getLogger("transformers").setLevel(logging.ERROR)
        if side is None:
            sys.path.insert(0, TESTS)
            import test_importers_zoo_transformers as tz
            x = rng.integers(0, tz.VOCAB, (1, tz.SEQ))
            torch.onnx.export(model, (torch.as_tensor(x),), path, dynamo=True,
                              opset_version=18, input_names=["ids"], verbose=False)
        else:
            x = rng.standard_normal((3, side, side)).astype(np.float32).astype(np.float64)
            torch.onnx.export(model, (torch.as_tensor(x[None], dtype=torch.float32),), path,
                              dynamo=False, opset_version=17, input_names=["x"],
                              output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
    xpath = os.path.join(work, f"{name}-x.npy")
    np.save(xpath, x)
    batches = {}
    for n in sorted({n_cmp, n_gaps} - {0}):
        if side is None:
            xs = x                            # BERT: the one input (token ids)
        else:
            xs = x[None] + rng.uniform(-RADIUS, RADIUS, (n,) + x.shape)
        batches[n] = os.path.join(work, f"{name}-xs{n}.npy")
        np.save(batches[n], xs)
    return path, xpath, batches


# The child: ``what`` is a CLI argument list (a command) or ("forward", engine, batch file).
CHILD = """
import json, os, resource, signal, sys, time
sys.path.insert(0, {bench!r})
import benchlib
what, path, name, limit = {args!r}
t00 = time.perf_counter()

def _peak_gb():
    # VmHWM: this process image's own high-water mark.  ru_maxrss is not: Linux keeps it
    # across exec, so a child forked from a parent holding the models reports at least
    # the parent's resident size.
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 2 ** 20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20

def _over(signum, frame):
    # past the CPU limit: report it on the real stdout and stop at once
    rss = _peak_gb()
    os.write(1, ("\\n" + json.dumps(dict(cpu=limit, wall=time.perf_counter() - t00,
                                          peak_gb=rss, status="cpu limit")) + "\\n").encode())
    os._exit(0)

signal.signal(signal.SIGXCPU, _over)
used = resource.getrusage(resource.RUSAGE_SELF)
resource.setrlimit(resource.RLIMIT_CPU, (int(used.ru_utime + used.ru_stime + limit) + 1,
                                         resource.RLIM_INFINITY))
if what[0] != "forward":
    import contextlib, io
    from scalarlab.experiments.cli import main
    out = io.StringIO()
    c, t = time.process_time(), time.perf_counter()
    with contextlib.redirect_stdout(out):
        rc = main(list(what))
    cpu, wall = time.process_time() - c, time.perf_counter() - t
    status = "ok" if rc == 0 else f"exit {{rc}}"
else:
    import numpy as np
    from zoo_runs import forward
    cpu, wall = forward(what[1], path, what[2], name)
    status = "ok"
print(json.dumps(dict(cpu=cpu, wall=wall, peak_gb=_peak_gb(), status=status)))
"""


def forward(engine, path, batch_file, name):
    """``(cpu, wall)`` seconds of one engine's forward pass over the batch, warm (one
    untimed call first; the import, session creation and model build not timed either);
    the gaps batch runs in chunks."""
    import time

    import numpy as np
    xs = np.load(batch_file)
    key, side, _, _ = MODELS[name]
    chunks = [xs] if side is None else [xs[i:i + GAPS_CHUNK] for i in range(0, len(xs), GAPS_CHUNK)]
    if engine == "onnxruntime":
        import onnxruntime as ort
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        feed = sess.get_inputs()[0].name
        run = [lambda c=c: sess.run(None, {feed: c if side is None else c.astype(np.float32)})
               for c in chunks]
    elif engine == "torch":
        import torch
        model = build(key, side)
        ts = [torch.as_tensor(c) if side is None else torch.as_tensor(c, dtype=torch.float32)
              for c in chunks]

        def one(t):
            with torch.no_grad():
                return model(t)
        run = [lambda t=t: one(t) for t in ts]
    else:
        from scalarlab import graph, scalars
        from scalarlab.graph.importers.onnx import load_onnx
        g, p = load_onnx(path)
        ctx = scalars.get(engine)
        run = [lambda c=c: graph.denote(g, p, c, ctx) for c in chunks]
    run[0]()          # warm: compiled kernels' caches, lazy imports, first allocations
    # repeat a pass that is shorter than the CPU clock's resolution resolves (onnxruntime
    # and torch on the small models take well under a millisecond)
    reps, c, t = 0, time.process_time(), time.perf_counter()
    while reps == 0 or (time.process_time() - c < MIN_TIMED and reps < 1000):
        for f in run:
            f()
        reps += 1
    return (time.process_time() - c) / reps, (time.perf_counter() - t) / reps


#: a forward pass is repeated until this many CPU seconds (its mean is reported)
MIN_TIMED = 0.2


def runs(name, path, xpath, batches, gaps_samples=None):
    """The (model, command, batch, CLI args or forward engine) runs of one model."""
    key, side, n_cmp, n_gaps = MODELS[name]
    n_gaps = gaps_samples if (gaps_samples and n_gaps) else n_gaps
    out = []
    cmp = ["compare", path] + (["--input", xpath] if xpath else []) + [
        "--contexts", ",".join(CONTEXTS), "--quiet"]
    if n_cmp > 1:
        cmp += ["--samples", str(n_cmp)]
    out.append((f"compare{f' --samples {n_cmp}' if n_cmp > 1 else ''}", n_cmp, cmp))
    if n_gaps:
        out.append((f"gaps --samples {n_gaps}", n_gaps,
                    ["gaps", path, "--input", xpath, "--context", "binary32",
                     "--samples", str(n_gaps), "--quiet"]))
    for n in sorted({n_cmp, n_gaps} - {0}) if batches else ():
        for eng in CONTEXTS + ("onnxruntime", "torch"):
            out.append((f"forward {eng}" + (f" x{n}" if n > 1 else ""), n,
                        ("forward", eng, batches.get(n) or batches[max(batches)])))
    return out


def run_one(what, path, name, max_seconds):
    """One run in a fresh child: CPU-limited to ``max_seconds`` (user+sys, counted from
    after the child's start-up: the machine's load does not shorten it), and killed after
    ``WALL_FACTOR`` times that in wall time."""
    code = CHILD.format(bench=HERE, args=(tuple(what), path, name, max_seconds))
    r = run_json_child(code, ("cpu", "wall", "peak_gb"), timeout=WALL_FACTOR * max_seconds)
    if r["status"] == "timeout":
        r["status"] = "wall limit"
    return r


#: wall-clock backstop of a run, in multiples of its CPU limit (a loaded machine)
WALL_FACTOR = 8


def _ratio(a, b):
    return a / b if b > 0 else float("nan")


def table(rows):
    """Ratios against the forwards at the same batch, and the printed Markdown table."""
    fw = {}
    for r in rows:
        if r["command"].startswith("forward"):
            eng = r["command"].split()[1]
            fw[(r["model"], r["batch"], eng)] = r["cpu"]
    on = any("ran_on" in r for r in rows)
    lines = ["| model | command |" + (" ran on |" if on else "") + " CPU s | wall s | peak GB "
             "| / 3 forwards | / onnxruntime | / torch |",
             "|---|---|" + ("---|" if on else "") + "---|---|---|---|---|---|"]
    for r in rows:
        k = (r["model"], r["batch"])
        three = sum(fw.get(k + (c,), float("nan")) for c in CONTEXTS)
        r["vs_forwards"] = _ratio(r["cpu"], three)
        r["vs_onnxruntime"] = _ratio(r["cpu"], fw.get(k + ("onnxruntime",), float("nan")))
        r["vs_torch"] = _ratio(r["cpu"], fw.get(k + ("torch",), float("nan")))
        if r["status"] in ("cpu limit", "wall limit"):
            lim = r["limit"] * (WALL_FACTOR if r["status"] == "wall limit" else 1)
            cpu = f"> {r['limit']:.0f}" if r["status"] == "cpu limit" else "?"
            wall = f"{r['wall']:.0f}" if r["status"] == "cpu limit" else f"> {lim:.0f}"
            ratios = [f"> {_ratio(r['limit'], d):.0f}" if r["status"] == "cpu limit"
                      else "?" for d in (three, fw.get(k + ("onnxruntime",), float("nan")),
                                         fw.get(k + ("torch",), float("nan")))]
        else:
            cpu, wall = f"{r['cpu']:.3g}", f"{r['wall']:.3g}"
            ratios = [f"{v:.1f}" for v in (r["vs_forwards"], r["vs_onnxruntime"], r["vs_torch"])]
        note = "" if r["status"] in ("ok", "cpu limit") else f" ({r['status']})"
        lines.append(f"| {r['model']} | {r['command']}{note} | "
                     + (f"{r.get('ran_on', '')} | " if on else "") + f"{cpu} | {wall} | "
                     f"{r['peak_gb']:.2f} | " + " | ".join(ratios) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--max-seconds", type=int, default=900,
                    help="CPU-time limit of each run (default 900 s): a longer run is stopped "
                         "and shown as '> N'; a run is also killed after 8x N s of wall time")
    ap.add_argument("--rows", nargs="+", default=None,
                    help="print the table of the rows in these files (--json's output or "
                         "the '# {json}' lines on stderr; forwards of one file serve the "
                         "ratios of another) and exit")
    ap.add_argument("--gaps-samples", type=int, default=None,
                    help="gaps' sample count (default 2000)")
    ap.add_argument("--only", default=None,
                    help="run only the rows whose command starts with one of these "
                         "comma-separated prefixes (e.g. 'compare,gaps')")
    ap.add_argument("--label", default=None,
                    help="a label stored in every row and shown in a 'ran on' column "
                         "(e.g. the commit)")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    a = ap.parse_args()
    if a.rows:
        rows = []
        for name in a.rows:
            with open(name) as f:
                text = f.read()
            rows += json.loads(text) if text.lstrip().startswith("[") else [
                json.loads(line[2:]) for line in text.splitlines() if line.startswith("# {")]
        print(table(rows))
        return
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for name in a.models:
            path, xpath, batches = prepare(name, work)
            for command, batch, what in runs(name, path, xpath, batches, a.gaps_samples):
                if a.only and not command.startswith(tuple(a.only.split(","))):
                    continue
                r = run_one(what, path, name, a.max_seconds)
                r.update(model=name, command=command, batch=batch, limit=a.max_seconds)
                if a.label:
                    r["ran_on"] = a.label
                rows.append(r)
                print("# " + json.dumps(r), file=sys.stderr, flush=True)   # as it lands
    text = table(rows)
    if a.json:
        print(json.dumps(rows, indent=1))
    else:
        print(text)


if __name__ == "__main__":
    main()
