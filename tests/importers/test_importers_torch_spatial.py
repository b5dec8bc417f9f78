"""from_torch on the modules the ONNX side composes (ConvTranspose1d/2d/3d,
Upsample/F.interpolate, InstanceNorm, GroupNorm, tril/triu, cumsum, einsum): each imported
graph evaluated in float64 against torch's own forward in float64 (a batch of 2 through
one example axis), within 1e-13 relative of the output's scale."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from scalarlab import graph
from scalarlab.graph.importers.interchange import UnsupportedOpsError
from scalarlab.graph.importers.torch_fx import from_torch

F = torch.nn.functional


class Fn(torch.nn.Module):
    def __init__(self, f, *mods):
        super().__init__()
        self.f = f
        self.mods = torch.nn.ModuleList(mods)

    def forward(self, x):
        return self.f(self, x)


def _m(f, *mods):
    return lambda: Fn(f, *mods)


def _mod(mod):
    return _m(lambda s, x: s.mods[0](x), mod)


class UNetDecoder(torch.nn.Module):
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


CASES = {
    "convT1d-dilated": (_mod(torch.nn.ConvTranspose1d(3, 2, 3, stride=3, padding=2,
                                                      dilation=2)), (3, 7)),
    "convT2d": (_mod(torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1,
                                              output_padding=1)), (4, 5, 5)),
    "convT2d-groups": (_mod(torch.nn.ConvTranspose2d(4, 6, 4, stride=2, padding=1, groups=2)),
                       (4, 5, 5)),
    "convT3d": (_mod(torch.nn.ConvTranspose3d(2, 3, 2, stride=2, bias=False)), (2, 3, 3, 3)),
    "groupnorm": (_mod(torch.nn.GroupNorm(2, 4)), (4, 5, 5)),
    "instancenorm2d": (_mod(torch.nn.InstanceNorm2d(4, affine=True)), (4, 5, 5)),
    "instancenorm1d": (_mod(torch.nn.InstanceNorm1d(3)), (3, 9)),
    "upsample-nearest": (_mod(torch.nn.Upsample(scale_factor=2)), (3, 4, 5)),
    "interp-nearest-size": (_m(lambda s, x: F.interpolate(x, size=(7, 3))), (3, 4, 5)),
    "interp-nearest-exact": (_m(lambda s, x: F.interpolate(x, size=(6, 9),
                                                           mode="nearest-exact")), (3, 4, 5)),
    "interp-bilinear-x2": (_m(lambda s, x: F.interpolate(x, scale_factor=2, mode="bilinear")),
                           (3, 4, 5)),
    "interp-bilinear-align": (_m(lambda s, x: F.interpolate(x, size=(7, 9), mode="bilinear",
                                                            align_corners=True)), (3, 4, 5)),
    "upsample-bilinear2d": (_mod(torch.nn.UpsamplingBilinear2d(scale_factor=3)), (2, 3, 4)),
    "interp-linear-down": (_m(lambda s, x: F.interpolate(x, size=4, mode="linear")), (2, 9)),
    "interp-trilinear": (_m(lambda s, x: F.interpolate(x, scale_factor=2, mode="trilinear")),
                         (2, 2, 3, 3)),
    "tril-triu": (_m(lambda s, x: torch.tril(x, diagonal=-1) + 2 * x.triu(1)), (4, 5)),
    "cumsum": (_m(lambda s, x: torch.cumsum(x, dim=1) + x.cumsum(2)), (5, 3)),
    "einsum": (_m(lambda s, x: torch.einsum("bij,bkj->bik", x, x * 2)), (4, 3)),
    "einsum-list": (_m(lambda s, x: torch.einsum("bij->bji", [x])), (4, 3)),
    "unet-decoder": (UNetDecoder, (8, 3, 3)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_from_torch_matches_torch_float64(name):
    make, shape = CASES[name]
    torch.manual_seed(sum(map(ord, name)))
    m = make().eval()
    if name.startswith("instancenorm2d"):
        with torch.no_grad():                   # non-trivial affine parameters
            m.mods[0].weight.normal_()
            m.mods[0].bias.normal_()
    x = torch.randn(2, *shape, dtype=torch.float64)
    g, p = from_torch(m, x.float(), batch_dims=1)
    assert g.nodes[0].out_shape == tuple(shape)
    with torch.no_grad():
        want = copy.deepcopy(m).double()(x).numpy()
    got = graph.denote(g, p, x.numpy(), "float64")
    assert got.shape == want.shape
    err = float(np.max(np.abs(got - want))) / float(np.max(np.abs(want)))
    assert err <= 1e-13, (name, err)


def test_unmapped_forms_are_refused_by_name():
    with pytest.raises(UnsupportedOpsError, match="mode 'bicubic'"):
        from_torch(Fn(lambda s, x: F.interpolate(x, scale_factor=2, mode="bicubic")),
                   torch.randn(1, 2, 3, 3), batch_dims=1)
    with pytest.raises(UnsupportedOpsError, match="track_running_stats"):
        from_torch(torch.nn.Sequential(torch.nn.InstanceNorm2d(2, track_running_stats=True))
                   .eval(), torch.randn(1, 2, 3, 3), batch_dims=1)


class Recurrent(torch.nn.Module):
    """A recurrent classifier as the ONNX tests build it: the last step through a linear
    head, optionally from learned initial states; ``states`` adds the final h to it."""

    def __init__(self, cell, bi, init, layers=2, batch_first=True, states=False):
        super().__init__()
        cls = {"LSTM": torch.nn.LSTM, "GRU": torch.nn.GRU, "RNN": torch.nn.RNN}[cell]
        self.r = cls(5, 6, batch_first=batch_first, bidirectional=bi, num_layers=layers)
        d = 2 if bi else 1
        self.h0 = torch.nn.Parameter(torch.randn(layers * d, 1, 6)) if init else None
        self.c0 = torch.nn.Parameter(torch.randn(layers * d, 1, 6)) \
            if init and cell == "LSTM" else None
        self.fc = torch.nn.Linear(6 * d, 3)
        self.batch_first = batch_first
        self.states = states
        self.lstm = cell == "LSTM"

    def forward(self, x):
        if self.h0 is None:
            y, st = self.r(x)
        elif self.c0 is None:
            y, st = self.r(x, self.h0)
        else:
            y, st = self.r(x, (self.h0, self.c0))
        out = self.fc(y[:, -1] if self.batch_first else y[-1])
        if self.states:
            h = st[0] if self.lstm else st
            out = out + h.sum()
        return out


# the default selection: each cell once, each of bidirectional and initial state with two
# cells (LSTM both, GRU an initial state, RNN bidirectional); -m slow: all 12
_RECURRENT_DEFAULT = {("LSTM", True, True), ("LSTM", False, False), ("GRU", False, True),
                      ("RNN", True, False)}


@pytest.mark.parametrize("cell, bi, init", [
    pytest.param(cell, bi, init, id=f"{cell}-{'bidirectional' if bi else 'forward'}-"
                                    f"{'initial' if init else 'zero'}-state",
                 marks=() if (cell, bi, init) in _RECURRENT_DEFAULT else pytest.mark.slow)
    for cell in ("LSTM", "GRU", "RNN") for bi in (False, True) for init in (False, True)])
def test_recurrent_modules_unrolled_match_torch_float64(cell, bi, init):
    torch.manual_seed(len(cell) + 2 * bi + 4 * init)
    m = Recurrent(cell, bi, init, states=True).eval()
    x = torch.randn(1, 7, 5, dtype=torch.float64)
    g, p = from_torch(m, x.float())
    assert g.nodes[0].out_shape == (1, 7, 5)
    with torch.no_grad():
        want = copy.deepcopy(m).double()(x).numpy()
    got = graph.denote(g, p, x.numpy(), "float64")
    err = float(np.max(np.abs(got - want))) / float(np.max(np.abs(want)))
    assert err <= 1e-13, (cell, bi, init, err)


@pytest.mark.parametrize("cell", ["LSTM", "GRU"])
def test_recurrent_per_example_sequences_and_seq_major(cell):
    """With the lab's batch axis (batch_first): one sequence per example, a batch of 3
    through one graph; seq-major input without a batch axis: the model's batch of 2."""
    torch.manual_seed(3)
    m = Recurrent(cell, True, False, layers=1).eval()
    x = torch.randn(3, 4, 5, dtype=torch.float64)
    g, p = from_torch(m, x.float(), batch_dims=1)
    assert g.nodes[0].out_shape == (4, 5)
    with torch.no_grad():
        want = copy.deepcopy(m).double()(x).numpy()
    got = graph.denote(g, p, x.numpy(), "float64")
    assert float(np.max(np.abs(got - want))) <= 1e-13 * float(np.max(np.abs(want)))
    ms = Recurrent(cell, False, False, layers=2, batch_first=False).eval()
    xs = torch.randn(6, 2, 5, dtype=torch.float64)
    g, p = from_torch(ms, xs.float())
    with torch.no_grad():
        want = copy.deepcopy(ms).double()(xs).numpy()
    got = graph.denote(g, p, xs.numpy(), "float64")
    assert float(np.max(np.abs(got - want))) <= 1e-13 * float(np.max(np.abs(want)))
