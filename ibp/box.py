"""Boxes: per-coordinate lower and upper bounds, optionally with leading batch axes.

A :class:`Box` is context-free data (two arrays of equal shape, float64 or exact objects);
``box.to_interval(ctx)`` turns it into an interval-context value with *outward* rounding,
so a box given in decimals is enclosed by the endpoint format, never shrunk.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from scalarlab.scalars.base import to_fraction
from scalarlab.scalars.errors import ContextError

from .errors import IBPError


def _as_array(x):
    if isinstance(x, np.ndarray):
        return x
    arr = np.asarray(x)
    if arr.dtype.kind in "US":  # decimal strings stay exact
        return arr.astype(object)
    return arr


@dataclass(frozen=True)
class Box:
    """An axis-aligned box ``[lo, hi]`` (elementwise); ``lo <= hi`` is checked."""

    lo: np.ndarray
    hi: np.ndarray

    def __post_init__(self):
        lo, hi = _as_array(self.lo), _as_array(self.hi)
        if lo.shape != hi.shape:
            raise IBPError(f"Box: lo has shape {list(lo.shape)} but hi has shape {list(hi.shape)}")
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)
        if lo.dtype != object and hi.dtype != object:
            bad = ~(lo <= hi)
        else:
            bad = np.array([not (to_fraction(a) <= to_fraction(b)) if _finite(a) and _finite(b)
                            else False for a, b in zip(lo.reshape(-1), hi.reshape(-1))],
                           dtype=bool).reshape(lo.shape)
        if np.any(bad):
            i = np.argwhere(bad)[0]
            raise IBPError(f"Box: lo > hi (or NaN) at index {tuple(int(t) for t in i)}: "
                           f"lo={lo[tuple(i)]!r}, hi={hi[tuple(i)]!r}")

    @property
    def shape(self) -> tuple:
        return tuple(self.lo.shape)

    @classmethod
    def from_center_radius(cls, center, radius) -> "Box":
        """The l-infinity ball ``center ± radius``, computed exactly (Fractions).

        ``center`` and ``radius`` may be floats, decimal strings or Fractions; the
        endpoints are exact rationals (object arrays) so that converting them into an
        interval context rounds each endpoint outward exactly once.
        """
        c = _as_array(center)
        r = _as_array(radius)
        c_f = np.vectorize(to_fraction, otypes=[object])(c) if c.size else c.astype(object)
        r_f = np.vectorize(to_fraction, otypes=[object])(r) if r.size else r.astype(object)
        if np.any(np.vectorize(lambda t: t < 0, otypes=[bool])(r_f)):
            raise IBPError(f"Box.from_center_radius: radius must be >= 0, got {radius!r}")
        return cls(c_f - r_f, c_f + r_f)

    def to_interval(self, ctx):
        """This box as a value of interval context ``ctx``, endpoints rounded outward."""
        if not getattr(ctx, "is_interval", False):
            raise IBPError(f"Box.to_interval: context {ctx.name} is not an interval context")
        lo = ctx.convert(self.lo)
        hi = ctx.convert(self.hi)
        return ctx.make(lo.lo, hi.hi)

    @classmethod
    def from_interval(cls, ctx, value) -> "Box":
        """Read an interval value back as a box (endpoints kept in the base representation)."""
        return cls(np.asarray(value.lo), np.asarray(value.hi))

    def lo_float(self) -> np.ndarray:
        """Lower bounds as float64, rounded DOWN (so the float box still encloses)."""
        return _to_float_directed(self.lo, down=True)

    def hi_float(self) -> np.ndarray:
        """Upper bounds as float64, rounded UP."""
        return _to_float_directed(self.hi, down=False)

    def width(self) -> np.ndarray:
        """hi - lo in float64 (rounded up: an upper bound on the true width)."""
        with np.errstate(invalid="ignore", over="ignore"):
            w = self.hi_float() - self.lo_float()
        return np.nextafter(w, np.inf) if w.size else w

    def contains(self, values) -> np.ndarray:
        """Elementwise ``lo <= v <= hi`` (exact comparison; NaN is never contained)."""
        v = np.asarray(values)
        lo, hi = self.lo, self.hi
        if v.dtype != object and lo.dtype != object and hi.dtype != object:
            with np.errstate(invalid="ignore"):
                return (lo <= v) & (v <= hi)
        fl = np.frompyfunc(_le, 2, 1)
        return (fl(lo, v) & fl(v, hi)).astype(bool)

    def format(self, digits: int = 6) -> str:
        """Seed style: ``[lo0, lo1, ...] .. [hi0, hi1, ...]``."""
        return f"{_fmt(self.lo_float(), digits)} .. {_fmt(self.hi_float(), digits)}"

    def __getitem__(self, idx) -> "Box":
        return Box(self.lo[idx], self.hi[idx])


def _finite(x) -> bool:
    try:
        f = float(x)
    except (TypeError, ValueError, OverflowError):
        return True
    return f == f and abs(f) != float("inf")


def _le(a, b) -> bool:
    try:
        if isinstance(a, str):
            a = Fraction(a)
        if isinstance(b, str):
            b = Fraction(b)
        return bool(a <= b)
    except TypeError:
        return bool(to_fraction(a) <= to_fraction(b))


def _to_float_directed(a: np.ndarray, down: bool) -> np.ndarray:
    """float64 view of endpoint values, rounded in the safe direction when inexact."""
    a = np.asarray(a)
    if a.dtype != object:
        return a.astype(np.float64)
    out = np.empty(a.shape, dtype=np.float64)
    flat, fo = a.reshape(-1), out.reshape(-1)
    for i, t in enumerate(flat):
        if isinstance(t, str):
            t = Fraction(t)
        f = float(t)
        if _finite(f) and _finite(t):
            q = to_fraction(t)
            if Fraction(f) > q and down:
                f = float(np.nextafter(f, -np.inf))
            elif Fraction(f) < q and not down:
                f = float(np.nextafter(f, np.inf))
        fo[i] = f
    return out


def _fmt(a: np.ndarray, digits: int) -> str:
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    return "[" + ", ".join(f"{float(t):.{digits}f}" for t in a) + "]"
