"""CROWN's memory and time: dense Jacobians (before) vs operators and spec seeds (after).

A 4-layer CNN (conv 3->16 k3 p1, relu, conv 16->32 k4 s2 p1, relu, linear -> 100, relu,
linear -> 10; random weights, imported from torch through the lab's fx importer) at input
sides 16/32/44 and, with ``--resnet``, a resnet18-shaped network written here (torchvision
is not installed: BasicBlocks 64-128-256-512, batchnorm in eval mode) at 32x32.  Each
configuration runs in a fresh process (``resource.getrusage`` peak RSS of that child is
the figure); the ``before`` rows use ``jacobian="dense"`` (today's algorithm: every affine
op's Jacobian from the forward rule at the basis vectors), the ``after`` rows the
operator path.  A configuration whose estimate passes ``--limit`` GiB is refused by
``run_crown`` itself: the row says so and shows the estimate.

Run: ``python bench/crown_memory.py [--sides 16,32,44] [--methods crown,crown-ibp]
[--resnet] [--limit 6]``.
"""
from __future__ import annotations

import argparse

import numpy as np

from benchlib import run_json_child

CHILD = r"""
import json, resource, sys, time
import numpy as np
import torch
from scalarlab.graph.importers.torch_fx import from_torch
from scalarlab.ibp import Box
from scalarlab.ibp.crown import run_crown, CrownError
sys.path.insert(0, {bench!r})
from crown_memory import build
net, side, method, jac, limit, spec = {args!r}
torch.manual_seed(0)
model, shape = build(net, side)
x = torch.randn((1,) + shape) * 0.5
g, p = from_torch(model, x, batch_dims=1)
x0 = x[0].double().numpy()
box = Box(x0 - 1 / 255, x0 + 1 / 255)
kw = dict(method=method, jacobian=jac, memory_limit=int(limit * 2 ** 30))
if spec:
    n_out = int(np.prod(g.nodes[g.output].out_shape))
    kw["spec"] = np.eye(n_out)[1:] - np.eye(n_out)[[0] * (n_out - 1)]
t0 = time.perf_counter()
try:
    r = run_crown(g, p, box, **kw)
    ob = r if spec else r[g.output]
    width = float(np.max(np.asarray(ob.hi) - np.asarray(ob.lo)))
    status = "ok"
except CrownError as e:
    width, status = float("nan"), str(e)
dt = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20
print(json.dumps(dict(seconds=dt, peak_gib=rss, width=width, status=status)))
"""


def build(net, side):
    """(torch module in eval mode, per-example input shape)."""
    import torch
    nn = torch.nn
    if net == "cnn4":
        h = (side + 2 - 4) // 2 + 1
        return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
                             nn.Conv2d(16, 32, 4, stride=2, padding=1), nn.ReLU(),
                             nn.Flatten(), nn.Linear(32 * h * h, 100), nn.ReLU(),
                             nn.Linear(100, 10)).eval(), (3, side, side)

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(cout)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

        def forward(self, x):
            y = torch.relu(self.b1(self.c1(x)))
            y = self.b2(self.c2(y))
            return torch.relu(y + (x if self.down is None else self.down(x)))

    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
              nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 10)]
    return nn.Sequential(*layers).eval(), (3, side, side)


def run(net, side, method, jac, limit, spec):
    import os
    here = os.path.dirname(os.path.abspath(__file__))
    code = CHILD.format(bench=here, args=(net, side, method, jac, limit, spec))
    return run_json_child(code, ("seconds", "peak_gib", "width"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sides", default="16,32,44")
    ap.add_argument("--resnet", action="store_true")
    ap.add_argument("--limit", type=float, default=6.0, help="GiB per backward pass")
    ap.add_argument("--dense-max-side", type=int, default=16,
                    help="run the dense (before) rows only up to this side: the old path "
                         "is not covered by the estimate where it forms its error-bound "
                         "Jacobians, and was killed for memory at 32 on a 23 GB machine")
    ap.add_argument("--methods", default="crown,crown-ibp",
                    help="crown (CROWN at every relu input) and/or crown-ibp")
    a = ap.parse_args()
    configs = []
    for side in [int(s) for s in a.sides.split(",")]:
        if "crown" in a.methods.split(","):
            configs += [("cnn4", side, "crown", "dense", False),
                        ("cnn4", side, "crown", "operator", False)]
        if "crown-ibp" in a.methods.split(","):
            configs += [("cnn4", side, "crown-ibp", "dense", False),
                        ("cnn4", side, "crown-ibp", "operator", False),
                        ("cnn4", side, "crown-ibp", "operator", True)]
    if a.resnet:
        configs += [("resnet18", 32, "crown-ibp", "operator", False),
                    ("resnet18", 32, "crown-ibp", "operator", True)]
    print(f"{'net':9} {'side':>4} {'method':10} {'jacobian':9} {'spec':5} {'seconds':>8} "
          f"{'peak GiB':>8} {'max width':>10}  status")
    configs = [c for c in configs if c[3] != "dense" or c[1] <= a.dense_max_side]
    for net, side, method, jac, spec in configs:
        r = run(net, side, method, jac, a.limit, spec)
        status = r["status"] if len(r["status"]) < 160 else r["status"][:157] + "..."
        print(f"{net:9} {side:>4} {method:10} {jac:9} {str(spec):5} {r['seconds']:8.2f} "
              f"{r['peak_gib']:8.3f} {r['width']:10.4g}  {status}", flush=True)


if __name__ == "__main__":
    np.set_printoptions(precision=4)
    main()
