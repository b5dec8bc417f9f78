"""The built-in 25-point regression data set and a deterministic mini-batch loader.

The data are exact decimals (a 5 x 5 grid on [-1, 1]^2 and ``y = 0.8 x0 - 0.4 x1 +
0.5 x0 x1``), so every context converts each entry with its own single rounding and
``rational`` sees the exact values.  The held-out point (0.25, 0) is off the grid; its
target is 0.2.

The loader's order is a function of ``(seed, epoch)`` only, and its whole state is the
pair ``(epoch, position)``: a checkpoint that stores that pair resumes the same batches.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..errors import TapeError

GRID = ("-1", "-0.5", "0", "0.5", "1")
HELDOUT_X = ("0.25", "0")


def target_of(x0: str, x1: str) -> str:
    """``0.8 x0 - 0.4 x1 + 0.5 x0 x1`` computed exactly, as a decimal string."""
    a, b = Fraction(x0), Fraction(x1)
    y = Fraction(8, 10) * a - Fraction(4, 10) * b + Fraction(1, 2) * a * b
    # every value here has a terminating decimal expansion (denominators 2^i 5^j)
    return _decimal(y)


def _decimal(q: Fraction) -> str:
    sign = "-" if q < 0 else ""
    q = abs(q)
    whole, rest = divmod(q.numerator, q.denominator)
    digits = []
    while rest and len(digits) < 40:
        rest *= 10
        d, rest = divmod(rest, q.denominator)
        digits.append(str(d))
    if rest:
        raise ValueError(f"{q} has no short decimal expansion")
    return f"{sign}{whole}" + (("." + "".join(digits)) if digits else "")


def regression25() -> tuple:
    """``(X, Y)`` as object arrays of decimal strings, shapes [25, 2] and [25, 1]."""
    xs = [(a, b) for a in GRID for b in GRID]
    X = np.array(xs, dtype=object)
    Y = np.array([[target_of(a, b)] for a, b in xs], dtype=object)
    return X, Y


def heldout() -> tuple:
    """``(x, y)`` of the held-out point: shapes [1, 2] and [1, 1]."""
    x = np.array([list(HELDOUT_X)], dtype=object)
    return x, np.array([[target_of(*HELDOUT_X)]], dtype=object)


class Loader:
    """Mini-batches of ``(X, Y)`` in a per-epoch order drawn from ``(seed, epoch)``.

    ``next()`` returns the next batch (the last batch of an epoch may be shorter), and
    ``position`` / ``set_position`` expose the whole state.
    """

    def __init__(self, X, Y, batch_size: int, seed: int, shuffle: bool = True):
        if len(X) != len(Y):
            raise TapeError(f"loader: {len(X)} inputs but {len(Y)} targets")
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
                or batch_size < 1:
            raise TapeError(f"loader: batch_size must be a positive int, got {batch_size!r}")
        self.X, self.Y = X, Y
        self.batch_size = int(batch_size)
        self.seed = int(seed)
        self.shuffle = bool(shuffle)
        self.epoch = 0
        self.pos = 0
        self._order = None

    def __len__(self) -> int:
        return len(self.X)

    def order(self, epoch: int) -> np.ndarray:
        n = len(self.X)
        if not self.shuffle:
            return np.arange(n)
        # a generator of its own, seeded by (seed, epoch): independent of the model's
        # generator, so dropout draws and batch order never shift each other
        return np.random.default_rng([self.seed, epoch]).permutation(n)

    def next(self):
        if self.pos >= len(self.X):
            self.epoch += 1
            self.pos = 0
            self._order = None
        if self._order is None:
            self._order = self.order(self.epoch)
        idx = self._order[self.pos:self.pos + self.batch_size]
        self.pos += len(idx)
        return self.X[idx], self.Y[idx]

    @property
    def position(self) -> dict:
        return {"epoch": self.epoch, "pos": self.pos, "seed": self.seed,
                "batch_size": self.batch_size, "shuffle": self.shuffle, "size": len(self.X)}

    def set_position(self, pos: dict) -> None:
        for key, have in (("seed", self.seed), ("batch_size", self.batch_size),
                          ("shuffle", self.shuffle), ("size", len(self.X))):
            if key in pos and pos[key] != have:
                raise TapeError(f"loader: position was saved with {key}={pos[key]!r}, this "
                                f"loader has {key}={have!r}")
        epoch, p = pos.get("epoch"), pos.get("pos")
        if not isinstance(epoch, int) or not isinstance(p, int) or epoch < 0 \
                or not 0 <= p <= len(self.X):
            raise TapeError(f"loader: bad position epoch={epoch!r} pos={p!r} for a data set "
                            f"of {len(self.X)}")
        self.epoch, self.pos, self._order = epoch, p, None
