"""The model zoo of the importer tests: small versions of the networks people run.

Each entry: ``name -> (factory, per-example input shape)``.  Sizes are the smallest that
still exercise every op of the network (a batch of 3 goes through each).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 8), nn.ReLU(),
                                 nn.Linear(8, 3))

    def forward(self, x):
        return self.net(x)


class LeNet(nn.Module):
    """conv -> relu -> max pool -> conv -> relu -> avg pool -> flatten -> linear."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 4, 3, padding=1)
        self.c2 = nn.Conv2d(4, 6, 3)
        self.fc = nn.Linear(6 * 2 * 2, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.avg_pool2d(F.relu(self.c2(x)), 2)
        return self.fc(torch.flatten(x, 1))


class ResBlock(nn.Module):
    """A ResNet basic block: conv-BN-relu-conv-BN + identity, relu (BN in eval mode)."""

    def __init__(self, c=4):
        super().__init__()
        self.c1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(c)
        self.c2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        return F.relu(self.b2(self.c2(y)) + x)


class MobileBlock(nn.Module):
    """Pointwise conv, ReLU6, depthwise conv, HardSwish, global average pool, linear."""

    def __init__(self, c=4, e=8):
        super().__init__()
        self.pw = nn.Conv2d(c, e, 1)
        self.dw = nn.Conv2d(e, e, 3, padding=1, groups=e)
        self.act1 = nn.ReLU6()
        self.act2 = nn.Hardswish()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(e, 5)

    def forward(self, x):
        y = self.act2(self.dw(self.act1(self.pw(x))))
        return self.fc(torch.flatten(self.pool(y), 1))


class EncoderLayer(nn.Module):
    """A post-norm transformer encoder layer from MultiheadAttention + Linear + LayerNorm
    with exact GELU (nn.TransformerEncoderLayer itself does not export with dynamo=False
    in torch 2.13)."""

    def __init__(self, d=8, h=2, f=16):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, h, batch_first=True)
        self.n1 = nn.LayerNorm(d)
        self.n2 = nn.LayerNorm(d)
        self.l1 = nn.Linear(d, f)
        self.l2 = nn.Linear(f, d)
        self.act = nn.GELU()

    def forward(self, x):
        a, _ = self.attn(x, x, x, need_weights=False)
        x = self.n1(x + a)
        return self.n2(x + self.l2(self.act(self.l1(x))))


class RMSNormMLP(nn.Module):
    """RMSNorm (x * rsqrt(mean(x^2) + eps) * w) and a SiLU-gated MLP with a residual."""

    def __init__(self, d=8, f=16):
        super().__init__()
        self.w = nn.Parameter(torch.rand(d) + 0.5)
        self.up = nn.Linear(d, f)
        self.gate = nn.Linear(d, f)
        self.down = nn.Linear(f, d)

    def forward(self, x):
        r = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w
        return x + self.down(F.silu(self.gate(r)) * self.up(r))


class Audio1d(nn.Module):
    """1-d convolutions (stride, padding, dilation), max pooling, mean over time."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(1, 4, 5, stride=2, padding=2)
        self.c2 = nn.Conv1d(4, 8, 3, dilation=2)
        self.pool = nn.MaxPool1d(2)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        x = self.pool(F.relu(self.c1(x)))
        x = F.relu(self.c2(x)).mean(-1)
        return self.fc(x)


class ViewFlatten(nn.Module):
    """The classic ``x.view(x.size(0), -1)`` before the classifier."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(2, 3, 3)
        self.fc = nn.Linear(3 * 3 * 3, 4)

    def forward(self, x):
        x = torch.relu(self.c(x))
        return self.fc(x.view(x.size(0), -1))


class HandAttention(nn.Module):
    """Hand-written scaled dot-product attention: fused qkv projection split by chunk,
    heads by reshape + transpose, q @ k^T of two activations, softmax, @ v."""

    def __init__(self, d=8, h=2):
        super().__init__()
        self.h = h
        self.qkv = nn.Linear(d, 3 * d)
        self.o = nn.Linear(d, d)

    def forward(self, x):
        n, t, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.reshape(n, t, self.h, d // self.h).transpose(1, 2)
        k = k.reshape(n, t, self.h, d // self.h).transpose(1, 2)
        v = v.reshape(n, t, self.h, d // self.h).transpose(1, 2)
        a = torch.softmax(q @ k.transpose(-2, -1) / (d // self.h) ** 0.5, dim=-1)
        return self.o((a @ v).transpose(1, 2).reshape(n, t, d))


ZOO = {
    "mlp": (MLP, (6,)),
    "lenet": (LeNet, (1, 12, 12)),
    "resblock": (ResBlock, (4, 5, 5)),
    "mobilenet": (MobileBlock, (4, 6, 6)),
    "encoder": (EncoderLayer, (5, 8)),
    "rmsnorm-mlp": (RMSNormMLP, (8,)),
    "audio1d": (Audio1d, (1, 32)),
    "view-flatten": (ViewFlatten, (2, 5, 5)),
    "attention": (HandAttention, (5, 8)),
}


def build(name):
    """The zoo model ``name`` with seeded weights (and non-trivial BN statistics), eval mode."""
    factory, shape = ZOO[name]
    torch.manual_seed(sum(map(ord, name)))
    m = factory()
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 2.0)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.5, 0.5)
    return m.eval(), shape
