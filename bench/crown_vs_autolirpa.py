"""scalarlab's CROWN side by side with auto_LiRPA 0.7.1: time, peak memory, bounds.

Same models (random weights, torch seed 0; batchnorm running statistics randomised so
that the folds matter), same input box ``x0 +- 1/255`` (float64 endpoints), methods IBP,
CROWN-IBP and CROWN.  Models: ``cnn4`` (conv 3->16 k3 p1, relu, conv 16->32 k4 s2 p1,
relu, linear -> 100, relu, linear -> 10) at sides 16/32/44, ``mlp`` (3x8x8 -> 64 -> 64
-> 10, relu) and torchvision's ``resnet18`` (num_classes=10) at 32x32; ``resnet18mp2`` is
that network with its stem max-pool 3x3/2 replaced by 2x2/2 (same sizes), because
auto_LiRPA's CROWN refuses a max-pool whose stride differs from its kernel;
``resnet18wN`` (e.g. ``resnet18w32:32``) is resnet18's layout with every stage N
channels wide (the depth of resnet18 in seconds to a minute).

Each (tool, model, method) runs in a fresh process: its peak RSS (``resource.getrusage``
of that child, imports included: torch alone is ~0.3 GB) and the seconds of the bound
computation (auto_LiRPA: ``compute_bounds``; its ``BoundedModule`` construction, the
graph trace, is printed apart; scalarlab: ``run_crown``; the torch import, the fx
import and one IBP pass -- the lab's one-time loads of its context registry and
cached Numba kernels, about 2 s of CPU -- are its setup).
auto_LiRPA runs in float64 (``model.double()``) so that the bound difference is the
algorithms' and not float32's.  ``cpu s`` is the process CPU time of the bound
computation (all threads; on a shared machine wall seconds are rough) and ``time x``
its ratio to auto_LiRPA's; ``max|diff|/scale`` is the largest difference of the output
bounds divided by the largest |bound| of the output.  scalarlab runs with
``guarantee="real"`` (exact real bounds, rounded outward: the fp widening of the
``execution`` guarantee is a separate, larger row when ``--execution`` is given).

Run: ``python bench/crown_vs_autolirpa.py [--models cnn4:16,cnn4:32,cnn4:44,mlp,resnet18]
[--methods ibp,crown-ibp,crown] [--limit 6] [--execution] [--keep DIR]
[--combine intersect|crown] [--interval-lambda]``.  auto_LiRPA: fetch release
0.7.1's source and ``pip install --no-deps`` it plus ``appdirs``, ``graphviz`` (the
``bench`` extra); without it only scalarlab's rows are printed.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np

from benchlib import run_json_child

CHILD = r"""
import json, resource, sys, time, warnings
warnings.filterwarnings("ignore")
import numpy as np
import torch
sys.path.insert(0, {bench!r})
from crown_vs_autolirpa import build
tool, net, method, limit, guarantee, out, combine, collapse = {args!r}
model, x = build(net)
x0 = x[0].double().numpy()
eps = 1 / 255
lo, hi = x0 - eps, x0 + eps
rec = dict(setup=0.0, estimate=float("nan"), status="ok")
if tool == "scalarlab":
    from scalarlab.graph.importers.torch_fx import from_torch
    from scalarlab.ibp import Box
    from scalarlab.ibp.crown import run_crown, CrownError
    from scalarlab.ibp import crown as C
    C.COLLAPSE = collapse
    t0 = time.perf_counter()
    g, p = from_torch(model, x, batch_dims=1)
    # the lab's one-time loads (context registry, Numba's cached interval kernels) are
    # setup, as auto_LiRPA's graph trace is: one IBP pass before the clock starts
    from scalarlab.ibp import run_ibp
    run_ibp(g, p, Box(lo, hi), "interval:float64")
    rec["setup"] = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        r = run_crown(g, p, Box(lo, hi), method=method, guarantee=guarantee,
                      memory_limit=int(limit * 2 ** 30), combine=combine)
        b = r[g.output]
        L, U = np.asarray(b.lo, dtype=np.float64), np.asarray(b.hi, dtype=np.float64)
    except CrownError as e:
        L = U = None
        rec["status"] = str(e)
    rec["seconds"] = time.perf_counter() - t0
    rec["cpu"] = time.process_time() - c0
    from scalarlab.ibp import crown as C
    rec["estimate"] = C.last_estimate() / 2 ** 30
else:
    from auto_LiRPA import BoundedModule, BoundedTensor
    from auto_LiRPA.perturbations import PerturbationLpNorm
    # float64 throughout (its max-pool builds float32 zeros from the default dtype)
    torch.set_default_dtype(torch.float64)
    model = model.double()
    xd = x.double()
    t0 = time.perf_counter()
    bm = BoundedModule(model, torch.zeros_like(xd), device="cpu")
    rec["setup"] = time.perf_counter() - t0
    ptb = PerturbationLpNorm(norm=float("inf"), x_L=torch.from_numpy(lo)[None],
                             x_U=torch.from_numpy(hi)[None])
    m = dict(ibp="IBP", crown="CROWN")
    m["crown-ibp"] = "CROWN-IBP"
    t0, c0 = time.perf_counter(), time.process_time()
    with torch.no_grad():
        l_, u_ = bm.compute_bounds(x=(BoundedTensor(xd, ptb),), method=m[method])
    rec["seconds"] = time.perf_counter() - t0
    rec["cpu"] = time.process_time() - c0
    L, U = l_[0].numpy(), u_[0].numpy()
if L is not None:
    np.save(out, np.stack([L.reshape(-1), U.reshape(-1)]))
rec["peak_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20
print(json.dumps(rec))
"""


def build(net):
    """(torch module in eval mode, input batch of one), seeded: both tools get the same."""
    import torch
    nn = torch.nn
    torch.manual_seed(0)
    name, _, side = net.partition(":")
    side = int(side or 32)
    if name == "cnn4":
        h = (side + 2 - 4) // 2 + 1
        model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
                              nn.Conv2d(16, 32, 4, stride=2, padding=1), nn.ReLU(),
                              nn.Flatten(), nn.Linear(32 * h * h, 100), nn.ReLU(),
                              nn.Linear(100, 10))
        shape = (3, side, side)
    elif name == "mlp":
        model = nn.Sequential(nn.Flatten(), nn.Linear(192, 64), nn.ReLU(), nn.Linear(64, 64),
                              nn.ReLU(), nn.Linear(64, 10))
        shape = (3, 8, 8)
    elif name in ("resnet18", "resnet18mp2"):
        model = _torchvision().resnet18(num_classes=10)
        if name == "resnet18mp2":
            # auto_LiRPA's CROWN refuses a max-pool whose stride is not its kernel (the
            # stem's 3x3 stride 2): the same network with a 2x2 stride-2 max-pool (same
            # output size) is what both tools can bound
            model.maxpool = nn.MaxPool2d(2, 2)
        shape = (3, side, side)
    elif name.startswith("resnet18w") and name[9:].isdigit():
        model = _narrow_resnet18(int(name[9:]))
        shape = (3, side, side)
    else:
        raise SystemExit(f"crown_vs_autolirpa: unknown model {net!r}")
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.1, 0.1)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.1, 0.1)
    return model.eval(), torch.randn((1,) + shape) * 0.5


def _narrow_resnet18(width):
    """resnet18's layout (7x7/2 stem, batchnorm, relu, 2x2/2 max-pool, 8 basic blocks with
    1x1/2 downsamples, global average pool, linear -> 10) with every stage ``width``
    channels wide: the depth of resnet18 at a fraction of its cost."""
    import torch
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, c, stride):
            super().__init__()
            self.c1 = nn.Conv2d(c, c, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(c)
            self.c2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(c)
            self.ds = (nn.Sequential(nn.Conv2d(c, c, 1, stride=2, bias=False),
                                     nn.BatchNorm2d(c)) if stride == 2 else None)

        def forward(self, x):
            idt = x if self.ds is None else self.ds(x)
            return torch.relu(self.b2(self.c2(torch.relu(self.b1(self.c1(x))))) + idt)

    w = width
    return nn.Sequential(nn.Conv2d(3, w, 7, stride=2, padding=3, bias=False),
                         nn.BatchNorm2d(w), nn.ReLU(), nn.MaxPool2d(2, 2),
                         Block(w, 1), Block(w, 1), Block(w, 2), Block(w, 1), Block(w, 2),
                         Block(w, 1), Block(w, 2), Block(w, 1), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(w, 10))


def _torchvision():
    """torchvision.models beside the CPU torch (the tests' shim: its compiled ops are a
    CUDA build that does not load; the model constructors are plain Python)."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "tests", "importers"))
    from importers_torchvision import torchvision_models
    return torchvision_models()


def run(tool, net, method, limit, guarantee, out, combine="intersect", collapse=True):
    here = os.path.dirname(os.path.abspath(__file__))
    code = CHILD.format(bench=here, args=(tool, net, method, limit, guarantee, out, combine,
                                          collapse))
    return run_json_child(code, ("seconds", "cpu", "setup", "peak_gib", "estimate"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="mlp,cnn4:16,cnn4:32,cnn4:44,resnet18mp2:32")
    ap.add_argument("--methods", default="ibp,crown-ibp,crown")
    ap.add_argument("--limit", type=float, default=6.0, help="GiB per backward pass")
    ap.add_argument("--execution", action="store_true",
                    help="also scalarlab's execution guarantee (fp-sound widening)")
    ap.add_argument("--keep", metavar="DIR",
                    help="keep each auto_LiRPA row (record + bounds) in DIR and reuse it on a "
                         "later run instead of recomputing it (its minutes of CPU)")
    ap.add_argument("--combine", choices=("intersect", "crown"), default="intersect",
                    help="scalarlab's run_crown(combine=): 'crown' keeps intermediate CROWN "
                         "rows un-intersected, as auto_LiRPA does (its bounds to ~1e-12)")
    ap.add_argument("--interval-lambda", action="store_true",
                    help="scalarlab with interval Lambda throughout (crown.COLLAPSE = False, "
                         "the pass before issue 31's fix: wider on deep nets)")
    a = ap.parse_args()
    try:
        import auto_LiRPA  # noqa: F401
        tools = ["auto_LiRPA", "scalarlab"]
    except ImportError:
        print("auto_LiRPA is not installed: scalarlab's rows only")
        tools = ["scalarlab"]
    print(f"{'model':12} {'method':9} {'tool':16} {'setup s':>8} {'bound s':>8} {'cpu s':>7} "
          f"{'peak GiB':>8} {'est GiB':>7} {'max width':>10} {'max|diff|/scale':>15} "
          f"{'time x':>7}  status")
    tmp = tempfile.mkdtemp(prefix="crown_vs_autolirpa_")
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
    for net in a.models.split(","):
        for method in a.methods.split(","):
            ref = ref_t = None
            runs = [(t, "real") for t in tools]
            if a.execution:
                runs.append(("scalarlab", "execution"))
            for tool, guarantee in runs:
                out = os.path.join(tmp, f"{tool}-{guarantee}.npy")
                if os.path.exists(out):
                    os.remove(out)
                kept = (os.path.join(a.keep, f"{tool}-{net.replace(':', '_')}-{method}")
                        if a.keep and tool == "auto_LiRPA" else None)
                if kept and os.path.exists(kept + ".json"):
                    with open(kept + ".json") as f:
                        r = json.load(f)
                    out = kept + ".npy"
                    r["status"] = "kept from an earlier run"
                else:
                    r = run(tool, net, method, a.limit, guarantee, out, a.combine,
                            not a.interval_lambda)
                    if kept and r["status"] == "ok" and os.path.exists(out):
                        shutil.copyfile(out, kept + ".npy")
                        with open(kept + ".json", "w") as f:
                            json.dump(r, f)
                bounds = np.load(out) if os.path.exists(out) else None
                width = diff = ratio = float("nan")
                if bounds is not None:
                    width = float(np.max(bounds[1] - bounds[0]))
                    if ref is None:
                        ref, ref_t = bounds, r["cpu"]
                    else:
                        scale = float(np.max(np.abs(ref)))
                        diff = float(np.max(np.abs(bounds - ref))) / scale
                        ratio = r["cpu"] / ref_t
                label = tool if tool == "auto_LiRPA" else f"scalarlab/{guarantee}"
                status = r["status"] if len(r["status"]) < 140 else r["status"][:137] + "..."
                print(f"{net:12} {method:9} {label:16} {r['setup']:8.2f} {r['seconds']:8.2f} "
                      f"{r['cpu']:7.2f} "
                      f"{r['peak_gib']:8.3f} {r['estimate']:7.2f} {width:10.4g} {diff:15.3g} "
                      f"{ratio:7.2f}  {status}", flush=True)


if __name__ == "__main__":
    main()
