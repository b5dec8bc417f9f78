"""bfloat16 vs bfloat16@binary32 vs torch's bfloat16, on a small CNN and an MLP.

Weights and inputs are first rounded to bfloat16 (as ``model.bfloat16()`` does), so the
float64 run of the same values is the reference and every figure is arithmetic error
only.  Printed per model: the median and maximum of |y - y_float64| / max |y_float64|
(errors in units of the output scale) for the lab's ``bfloat16`` (every addition rounded
to bfloat16), ``bfloat16@binary32`` (float32 accumulation, one rounding) and torch CPU
bfloat16, the ratio of the plain context's median error to torch's, and the share of
outputs where the mixed context and torch agree bit for bit; then, per torch op, the
share of outputs equal to the lab's ``bfloat16@binary32`` (matmul, sum, conv2d and linear
with and without a bias: torch's float32 accumulation, the bias added in float32, one
rounding).  Each agreement is printed twice: "before", the mixed context with its bias
added after the rounding, in bfloat16 (the lab's linear/conv up to issue 31, kept here as
a :class:`MixedContext` whose ``matmul_add`` is the base composition), and "after", the bias
handed to the accumulator as torch does.

    python bench/mixed_precision.py [--batch 16]
"""
from __future__ import annotations

import argparse

import benchlib  # noqa: F401  (thread settings before numpy)
import numpy as np


def models(torch):
    nn = torch.nn
    torch.manual_seed(0)
    cnn = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1),
                        nn.ReLU(), nn.AvgPool2d(4), nn.Flatten(), nn.Linear(512, 64),
                        nn.ReLU(), nn.Linear(64, 10))
    mlp = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                        nn.Linear(512, 10))
    return {"cnn": (cnn, (3, 16, 16)), "mlp": (mlp, (256,))}


def contexts():
    """name -> context: plain bfloat16, the mixed context before and after issue 31."""
    from scalarlab import scalars
    from scalarlab.scalars.mixed import MixedContext
    before = MixedContext("bfloat16", "binary32")
    # the bias added after the product's rounding, in bfloat16 (the base Context.matmul_add)
    before.matmul_add = lambda a, b, c: before.add(before.matmul(a, b), c)
    return {"bfloat16": scalars.get("bfloat16"), "mixed, bias after (before)": before,
            "bfloat16@binary32": scalars.get("bfloat16@binary32")}


def run(batch: int):
    import torch
    from scalarlab import scalars
    from scalarlab.graph import denote
    from scalarlab.graph.importers.torch_fx import from_torch

    rows = []
    for name, (model, shape) in models(torch).items():
        model = model.eval().bfloat16().double()      # bfloat16 weights, held exactly
        x = torch.randn(batch, *shape).bfloat16().double()
        g, p = from_torch(model, x, batch_dims=1)
        xs = x.numpy()
        y64 = np.asarray(scalars.get("float64").to_float64(denote(g, p, xs, scalars.get("float64"))))
        with torch.no_grad():
            yt = model.bfloat16()(x.bfloat16()).double().numpy()
        out = {"torch bfloat16": yt}
        for cname, ctx in contexts().items():
            out[cname] = np.asarray(ctx.to_float64(denote(g, p, xs, ctx)))
        scale = np.abs(y64).max()
        med = {k: float(np.median(np.abs(v - y64)) / scale) for k, v in out.items()}
        mx = {k: float(np.abs(v - y64).max() / scale) for k, v in out.items()}
        agree = {k: float(np.mean(out[k] == yt))
                 for k in ("mixed, bias after (before)", "bfloat16@binary32")}
        rows.append((name, med, mx, agree))
    return rows


def op_agreement():
    """Share of torch bfloat16 outputs equal to the lab's mixed context, per op:
    ``name -> (before, after)``."""
    import torch
    from scalarlab.graph import denote
    from scalarlab.graph.importers.torch_fx import from_torch

    ctxs = contexts()
    pair = (ctxs["mixed, bias after (before)"], ctxs["bfloat16@binary32"])
    g = torch.Generator().manual_seed(0)

    def bf(*shape):
        return torch.randn(*shape, generator=g).bfloat16()

    def lab(ctx, module, x):
        gr, pl = from_torch(module, x.double(), batch_dims=1)
        return np.asarray(ctx.to_float64(denote(gr, pl, x.double().numpy(), ctx)))

    out = {}
    a, b = bf(64, 256), bf(256, 64)
    out["matmul 64x256x64"] = [np.mean(c.matmul(a.double().numpy(), b.double().numpy())
                                       == (a @ b).double().numpy()) for c in pair]
    x = bf(64, 1024)
    out["sum over 1024"] = [np.mean(c.sum(x.double().numpy(), axis=1)
                                    == x.sum(1).double().numpy()) for c in pair]
    xi = bf(4, 8, 12, 12)
    for name, mod in (("conv2d 8->16 3x3, no bias", torch.nn.Conv2d(8, 16, 3, bias=False)),
                      ("conv2d 8->16 3x3, bias", torch.nn.Conv2d(8, 16, 3)),
                      ("linear 512->64, no bias", torch.nn.Linear(512, 64, bias=False)),
                      ("linear 512->64, bias", torch.nn.Linear(512, 64))):
        m = torch.nn.Sequential(mod).bfloat16().double()
        inp = xi if "conv" in name else bf(16, 512)
        with torch.no_grad():
            want = m.bfloat16()(inp).double().numpy()
        out[name] = [np.mean(lab(c, m.double(), inp) == want) for c in pair]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=16)
    args = ap.parse_args()
    for name, med, mx, agree in run(args.batch):
        print(f"{name}: median |y - y64| / max|y64|, (max):")
        for k in med:
            print(f"  {k:28s} {med[k]:.3e}  ({mx[k]:.3e})")
        t = med["torch bfloat16"]
        print(f"  median / torch's: bfloat16 {med['bfloat16'] / t:.1f}, mixed before "
              f"{med['mixed, bias after (before)'] / t:.2f}, after "
              f"{med['bfloat16@binary32'] / t:.2f}; == torch on "
              f"{100 * agree['mixed, bias after (before)']:.1f}% of outputs before, "
              f"{100 * agree['bfloat16@binary32']:.1f}% after")
    print("torch bfloat16 op == bfloat16@binary32 (share of outputs, before -> after):")
    for k, (before, after) in op_agreement().items():
        print(f"  {k:28s} {100 * before:5.1f}% -> {100 * after:5.1f}%")


if __name__ == "__main__":
    main()
