"""The value types of the structured contexts: :class:`Interval` (interval contexts),
:class:`Dual` (dual contexts) and :class:`Ball` (ball contexts).

Plain pairs of base-context arrays with no arithmetic of their own, kept apart from the
contexts so that graph, IBP and tape code can recognise and build values without
importing a context module.
"""
from __future__ import annotations

import numpy as np


class Interval:
    """A box ``[lo, hi]`` elementwise: ``lo`` and ``hi`` are base-context arrays."""

    __slots__ = ("lo", "hi")

    def __init__(self, lo, hi):
        self.lo = lo
        self.hi = hi

    @property
    def shape(self) -> tuple:
        return tuple(np.shape(self.lo))

    def __repr__(self) -> str:
        return f"Interval(lo={self.lo!r}, hi={self.hi!r})"


class Dual:
    """``primal + tangent * eps`` (eps^2 = 0), both base-context arrays of one shape."""

    __slots__ = ("primal", "tangent")

    def __init__(self, primal, tangent):
        self.primal = primal
        self.tangent = tangent

    @property
    def shape(self) -> tuple:
        s = getattr(self.primal, "shape", None)
        return tuple(s) if s is not None else tuple(np.shape(self.primal))

    def __repr__(self) -> str:
        return f"Dual(primal={self.primal!r}, tangent={self.tangent!r})"


class Ball:
    """A midpoint-radius enclosure: ``mid`` is a multi-float64 array of shape
    ``(c,) + shape`` whose value is the exact sum of its ``c`` components, ``rad`` a
    float64 array of ``shape`` (an upper bound of the distance to the exact real value)
    or ``None`` when the midpoint is the value itself (a converted weight)."""

    __slots__ = ("mid", "rad")

    def __init__(self, mid, rad):
        self.mid = mid
        self.rad = rad

    @property
    def shape(self) -> tuple:
        return tuple(self.mid.shape[1:])

    def __repr__(self) -> str:
        return f"Ball(mid={self.mid!r}, rad={self.rad!r})"
