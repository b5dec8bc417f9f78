"""How wide a first-order rounding bound would be on the CNN zoo: an estimate, not a bound.

The enclosure reference (``experiments/enclosure_reference.py``) proves nothing on resnet18
and mobilenet_v3_small because interval radii grow by |W| at every layer.  A first-order
bound grows by the network's actual Jacobian instead: for each output y_k,
sum over conv/linear layers l of |dy_k/dz_l| . (K_l u |W_l| |x_l|), the a-priori rounding
bound of each layer's dot products (fan-in K_l, unit roundoff u) carried to the output by
the Jacobian.  This script evaluates that sum in torch float64 (one backward pass per
output, elementwise ops' own roundings left out) and prints it relative to |y_k|, per unit
roundoff: times 2^-53 for a float64 forward pass, times ~2^-106 for a double-double one.

    python bench/reference_first_order.py [--models resnet18:32 mobilenet_v3_small:32]

It is not rigorous (the Jacobian is computed in float64 and ReLU masks are taken from the
computed trajectory); it sizes the next step.
"""
from __future__ import annotations

import argparse
import os
import sys

import benchlib  # noqa: F401  (one thread per numeric library; before numpy)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "importers"))

import numpy as np  # noqa: E402


def estimate(name, side):
    import torch
    from importers_torchvision import torchvision_models
    torch.manual_seed(sum(map(ord, name)))          # the CNN zoo tests' weights
    m = getattr(torchvision_models(), name)(num_classes=10).eval().double()
    x = torch.tensor(np.random.default_rng(3).standard_normal((1, 3, side, side)))
    outs, local = [], []
    F = torch.nn.functional

    def hook(mod, inp, out):
        a = inp[0].detach().abs()
        if isinstance(mod, torch.nn.Conv2d):
            ab = F.conv2d(a, mod.weight.abs(), None, mod.stride, mod.padding, mod.dilation,
                          mod.groups)
        else:
            ab = F.linear(a, mod.weight.abs())
        out.retain_grad()
        outs.append(out)
        local.append(ab * mod.weight[0].numel())    # K |W||x|: the bound per unit roundoff

    for mod in m.modules():
        if isinstance(mod, (torch.nn.Conv2d, torch.nn.Linear)):
            mod.register_forward_hook(hook)
    y = m(x)
    rel = []
    for k in range(y.shape[1]):
        for o in outs:
            o.grad = None
        y[0, k].backward(retain_graph=True)
        with torch.no_grad():
            tot = sum(float((o.grad.abs() * b).sum()) for o, b in zip(outs, local))
            rel.append(tot / abs(float(y[0, k])))
    return np.array(rel)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["resnet18:32", "mobilenet_v3_small:32"])
    args = ap.parse_args()
    print("| model | bound / abs(y) per unit roundoff, median (max) | log2 at u = 2^-53 | "
          "log2 at u = 2^-106 |")
    print("|---|---|---|---|")
    for spec in args.models:
        name, side = spec.split(":")
        r = estimate(name, int(side))
        med = float(np.median(r))
        print(f"| {spec} | {med:.3g} ({r.max():.3g}) | {np.log2(med) - 53:.1f} | "
              f"{np.log2(med) - 106:.1f} |", flush=True)


if __name__ == "__main__":
    main()
