"""ConvTranspose, InstanceNormalization (GroupNorm's export), Resize/Upsample, Trilu,
CumSum and Einsum: torch modules exported with ``torch.onnx.export(dynamo=False,
opset_version=17)``, imported, and compared in float64 (within 1e-12 relative) and binary32
(a few ulps of the output scale, against onnxruntime on the float32 model).

The float64 oracle is onnxruntime on the model widened to float64 where it has the
kernels, else onnx's reference evaluator on it, else (ConvTranspose with groups, which
the reference evaluator mis-reshapes) torch in float64, where the model holds no float32
constant that torch would read differently."""
from __future__ import annotations

import contextlib
import copy
import io
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from scalarlab import graph
from scalarlab.graph.importers.onnx import from_onnx
from test_importers_zoo import reference64, rel_norm, ulps32, widened

F = torch.nn.functional


class Fn(torch.nn.Module):
    def __init__(self, f, *mods):
        super().__init__()
        self.f = f
        self.mods = torch.nn.ModuleList(mods)

    def forward(self, x):
        return self.f(self, x)


class UNetDecoder(torch.nn.Module):
    """A U-Net-style decoder stage: ConvTranspose up, GroupNorm, SiLU-free ReLU, Upsample
    (bilinear), a skip concatenation and a 1x1 convolution."""

    def __init__(self):
        super().__init__()
        self.up = torch.nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.gn = torch.nn.GroupNorm(2, 4)
        self.up2 = torch.nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.head = torch.nn.Conv2d(8, 3, 1)

    def forward(self, x):
        y = torch.relu(self.gn(self.up(x)))
        skip = F.interpolate(x[:, :4], scale_factor=4, mode="nearest")
        return self.head(torch.cat([self.up2(y), skip], dim=1))


def _mod(f, *mods):
    return lambda: Fn(f, *mods)


CASES = {
    "convT2d": (_mod(lambda s, x: s.mods[0](x),
                     torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1)),
                (4, 5, 5), "ref"),
    "convT2d-groups": (_mod(lambda s, x: s.mods[0](x),
                            torch.nn.ConvTranspose2d(4, 6, 4, stride=2, padding=1, groups=2)),
                       (4, 5, 5), "torch"),
    "convT1d-dilated": (_mod(lambda s, x: s.mods[0](x),
                             torch.nn.ConvTranspose1d(3, 2, 3, stride=3, padding=2, dilation=2)),
                        (3, 7), "ref"),
    "convT3d": (_mod(lambda s, x: s.mods[0](x), torch.nn.ConvTranspose3d(2, 3, 2, stride=2)),
                (2, 3, 3, 3), "ref"),
    "groupnorm": (_mod(lambda s, x: s.mods[0](x), torch.nn.GroupNorm(2, 4)), (4, 5, 5), "ref"),
    "instancenorm": (_mod(lambda s, x: s.mods[0](x), torch.nn.InstanceNorm2d(4, affine=True)),
                     (4, 5, 5), "ref"),
    "nearest-x2": (_mod(lambda s, x: F.interpolate(x, scale_factor=2, mode="nearest")),
                   (3, 4, 5), "ref"),
    "nearest-size": (_mod(lambda s, x: F.interpolate(x, size=(7, 3), mode="nearest")),
                     (3, 4, 5), "ref"),
    "bilinear-x2": (_mod(lambda s, x: F.interpolate(x, scale_factor=2, mode="bilinear")),
                    (3, 4, 5), "ref"),
    "bilinear-align-corners": (_mod(lambda s, x: F.interpolate(
        x, size=(7, 9), mode="bilinear", align_corners=True)), (3, 4, 5), "ref"),
    "linear-1d-down": (_mod(lambda s, x: F.interpolate(x, size=4, mode="linear")),
                       (2, 9), "ref"),
    # Keys' cubic with a = -0.75, edges clamped: torch's own bicubic is the oracle
    "bicubic-x2": (_mod(lambda s, x: F.interpolate(x, scale_factor=2, mode="bicubic")),
                   (3, 4, 5), "torch"),
    "bicubic-align-corners": (_mod(lambda s, x: F.interpolate(
        x, size=(3, 7), mode="bicubic", align_corners=True)), (2, 5, 4), "torch"),
    "trilu": (_mod(lambda s, x: torch.tril(x, diagonal=-1) + 2 * torch.triu(x, 1)),
              (4, 5), "ort"),
    "cumsum": (_mod(lambda s, x: torch.cumsum(x, dim=1) + torch.cumsum(x.flip(2), dim=2)),
               (5, 3), "ort"),
    "einsum": (_mod(lambda s, x: torch.einsum("bij,bkj->bik", x, x * 2)), (4, 3), "ort"),
    "unet-decoder": (UNetDecoder, (8, 3, 3), "torch"),
}


def _export(name, path, dynamic):
    make, shape, _ = CASES[name]
    torch.manual_seed(sum(map(ord, name)))
    m = make().eval()
    x = torch.randn(2, *shape)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(m, (x,), str(path), dynamo=False, opset_version=17,
                          input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "N"}, "y": {0: "N"}} if dynamic else None)
    return m, onnx.load(str(path))


def _oracle64(how, m, model, x):
    if how == "ort":
        sess = ort.InferenceSession(widened(model).SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        return sess.run(None, {"x": x})[0]
    if how == "ref":
        return reference64(model, {"x": x})
    with torch.no_grad():
        return copy.deepcopy(m).double()(torch.from_numpy(x)).numpy()


@pytest.mark.parametrize("dynamic", [False, True], ids=["fixed", "batch-axis"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_op_against_oracles(name, dynamic, tmp_path):
    m, model = _export(name, tmp_path / f"{name}.onnx", dynamic)
    g, p = from_onnx(model)
    shape = CASES[name][1]
    # a symbolic batch axis stays the per-example one; a fixed export is one example of 2
    assert g.nodes[0].out_shape == (tuple(shape) if dynamic else (2,) + tuple(shape))
    x = np.random.default_rng(5).standard_normal((2,) + tuple(shape))
    x = x.astype(np.float32).astype(np.float64)
    e64 = rel_norm(graph.denote(g, p, x, "float64"), _oracle64(CASES[name][2], m, model, x))
    assert e64 <= 1e-12, (name, e64)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    u = ulps32(graph.denote(g, p, x, "binary32"), sess.run(None, {"x": x.astype(np.float32)})[0])
    assert u <= 4, (name, u)
