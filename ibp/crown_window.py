"""Spatial windows of CROWN's coefficient rows (auto_LiRPA's "patches", as crops).

A CROWN row seeded at one entry (c, y, x) of a [C, H, W] node depends, at every node
before it, only on that entry's receptive field: a convolution reads a k x k window, a
relu or a batchnorm the same position, a max-pool its pooling window.  Rows whose
entries lie in one spatial tile therefore have non-zero coefficients only inside one
window per node (the tile's receptive field), and the backward pass stores each
node's Lambda over that window -- (rows, C x h x w) instead of (rows, C x H x W) --
and applies the transposed convolution to the window alone.  The numbers are the same
as the full pass (the columns left out are exact zeros); the memory and the work per
row shrink with the window (a 7x7 stride-2 stem: 13 x 13 of a 32 x 32 input for a
4 x 4 tile).  Ops without a window rule (linear, flatten, pools through their VJP)
receive Lambda embedded back into the full layout.

A window is ``(y0, y1, x0, x1)``: rows y0 <= y < y1 and columns x0 <= x < x1 of the
node's spatial grid; ``None`` is the whole node (any shape).
"""
from __future__ import annotations

import math

import numpy as np

from scalarlab.scalars.values import Interval

from .crown_ops import window_index

__all__ = ["tiles", "rows_window", "seed_columns", "crop", "reembed", "union", "size"]

#: selected rows (before the negated copy) aimed at per tile: fewer rows per chunk run
#: below BLAS speed and pay numpy's per-call cost per node, more widen the windows
TILE_ROWS = 256


def size(shape, win) -> int:
    """Columns of Lambda over the window (the node's size for ``None``)."""
    if win is None:
        return int(np.prod(shape, dtype=np.int64))
    return int(shape[0]) * (win[1] - win[0]) * (win[3] - win[2])


def tiles(shape, idx, target=None):
    """The selected flat indices ``idx`` of a [C, H, W] node grouped by square spatial
    tiles of side T, chosen so that a tile holds about ``target`` of them (the whole
    grid when that is a single tile): a list of index arrays."""
    C, H, W = (int(v) for v in shape)
    target = TILE_ROWS if target is None else target
    per_pos = max(idx.size, 1) / (H * W)
    side = max(1, int(round(math.sqrt(target / per_pos))))
    if side >= max(H, W):
        return [idx]
    y, x = (idx // W) % H, idx % W
    key = (y // side) * (-(-W // side)) + x // side
    order = np.argsort(key, kind="stable")
    ks = key[order]
    cuts = np.flatnonzero(np.diff(ks)) + 1
    return np.split(idx[order], cuts)


def rows_window(shape, r):
    """The smallest window holding the entries ``r`` (flat indices of [C, H, W])."""
    C, H, W = (int(v) for v in shape)
    y, x = (r // W) % H, r % W
    return (int(y.min()), int(y.max()) + 1, int(x.min()), int(x.max()) + 1)


def seed_columns(shape, r, win) -> np.ndarray:
    """Column of each entry ``r`` in Lambda's layout over ``win`` (channel-major)."""
    C, H, W = (int(v) for v in shape)
    y0, y1, x0, x1 = win
    c, y, x = r // (H * W), (r // W) % H, r % W
    return c * ((y1 - y0) * (x1 - x0)) + (y - y0) * (x1 - x0) + (x - x0)


def crop(v, shape, win):
    """The window's entries of a flat per-node array or Interval (unchanged for None)."""
    if win is None:
        return v
    k = window_index(tuple(int(s) for s in shape), win)
    if isinstance(v, Interval):
        return Interval(np.asarray(v.lo).reshape(-1)[k], np.asarray(v.hi).reshape(-1)[k])
    return np.asarray(v).reshape(-1)[k]


def union(a, b):
    """The smallest window holding both (None -- the whole node -- absorbs)."""
    if a is None or b is None:
        return None
    return (min(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), max(a[3], b[3]))


def reembed(lam: Interval, shape, win, to) -> Interval:
    """Lambda (rows, columns over ``win``) laid out over the larger window ``to`` (None:
    the whole node), zeros elsewhere: exact (no arithmetic)."""
    if win == to:
        return lam
    C, H, W = (int(s) for s in shape)
    ty0, ty1, tx0, tx1 = (0, H, 0, W) if to is None else to
    y0, y1, x0, x1 = win
    R = np.shape(lam.lo)[0]
    out = []
    for a in (lam.lo, lam.hi):
        z = np.zeros((R, C, ty1 - ty0, tx1 - tx0), dtype=np.asarray(a).dtype)
        z[:, :, y0 - ty0: y1 - ty0, x0 - tx0: x1 - tx0] = np.asarray(a).reshape(
            R, C, y1 - y0, x1 - x0)
        out.append(z.reshape(R, -1))
    return Interval(out[0], out[1])
