"""Boxes: per-coordinate lower and upper bounds, optionally with leading batch axes.

A :class:`Box` is context-free data (two arrays of equal shape, float64 or exact objects);
``box.to_interval(ctx)`` turns it into an interval-context value with *outward* rounding,
so a box given in decimals is enclosed by the endpoint format, never shrunk.

Every box says what it guarantees (``guarantee``, README "Two guarantees"): ``"real"`` —
it holds the exact real-valued result over the input box; ``"execution"`` — it also holds
every value the lab's point context of the interval context's format computes there.
IBP boxes (:func:`ibp.run_ibp`) carry both; a box built from bounds claims only
``("real",)`` unless its producer says more (``Box(..., guarantee=BOTH)`` or
:meth:`Box.with_guarantee`); an input box (:meth:`Box.from_center_radius`) is a set of
inputs, so it carries both.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from scalarlab.scalars.base import to_fraction
from scalarlab.scalars.errors import ContextError
from scalarlab.scalars.kernels.directed import recycled_empty
from scalarlab.scalars.values import Interval

from .errors import IBPError

REAL = "real"
EXECUTION = "execution"
BOTH = (REAL, EXECUTION)


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
    # A ball c ± r of float64 arrays (see from_center_radius): (c, r, lo_in, hi_in), where
    # lo/hi above are c ± r rounded OUTWARD to float64 and lo_in/hi_in rounded INWARD.  The
    # box means the exact ball; lo/hi enclose it, lo_in/hi_in lie inside it.
    ball: tuple | None = field(default=None, compare=False, repr=False)
    # what the box holds: (REAL,) or (REAL, EXECUTION) (see the module docstring)
    guarantee: tuple = field(default=(REAL,), compare=False)

    def __post_init__(self):
        g = self.guarantee
        items = (tuple(t.strip() for t in g.replace("+", ",").split(",") if t.strip())
                 if isinstance(g, str) else tuple(g))
        if not items or any(t not in BOTH for t in items) or REAL not in items:
            raise IBPError(f"Box: guarantee must be {REAL!r} or {REAL!r} and {EXECUTION!r} "
                           f"(an execution guarantee includes the real one), got {g!r}")
        object.__setattr__(self, "guarantee", tuple(t for t in BOTH if t in items))
        if self.ball is not None:
            return                     # built by from_center_radius, already checked
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
    def from_center_radius(cls, center, radius, held=None) -> "Box":
        """The l-infinity ball ``center ± radius``, exactly.

        ``center`` and ``radius`` may be floats, decimal strings or Fractions.  Float
        arrays (the common case) give a vectorised box: float64 endpoints rounded outward
        plus the ball itself (``ball``), no Python objects; converting it into an interval
        context rounds each exact endpoint outward exactly once (exact bases get the
        exact endpoints).  Otherwise the endpoints are exact rationals (object arrays).
        ``held``: a boolean mask (broadcast to the centre) of entries kept at the centre
        whatever the radius -- integer inputs (token ids, masks; :func:`held_entries`),
        which a radius never widens.
        """
        box = cls._from_center_radius(center, radius)
        if held is None or not np.any(held):
            return box
        return box._holding(center, held)

    def _holding(self, center, held) -> "Box":
        """This ball with the ``held`` entries degenerate at the centre (radius 0)."""
        held = np.broadcast_to(np.asarray(held, dtype=bool), self.shape)
        c = _as_array(center)
        if self.ball is not None:
            cc, r, lo_in, hi_in = (np.array(a) for a in self.ball)
            cf = np.broadcast_to(cc, self.shape)
            lo, hi = np.where(held, cf, self.lo), np.where(held, cf, self.hi)
            r = np.where(held, 0, np.broadcast_to(r, self.shape))
            lo_in, hi_in = np.where(held, cf, lo_in), np.where(held, cf, hi_in)
            ends = [np.ascontiguousarray(a) for a in (lo, hi)]
            for a in ends:
                a.flags.writeable = False
            return Box(ends[0], ends[1], ball=(cf, r, lo_in, hi_in), guarantee=self.guarantee)
        cq = np.broadcast_to(np.vectorize(to_fraction, otypes=[object])(c) if c.size
                             else c.astype(object), self.shape)
        lo = np.where(held, cq, self.lo.astype(object))
        hi = np.where(held, cq, self.hi.astype(object))
        return Box(lo, hi, guarantee=self.guarantee)

    @classmethod
    def _from_center_radius(cls, center, radius) -> "Box":
        c = _as_array(center)
        r = _as_array(radius)
        if _is_float_array(c) and _is_float_array(r):
            box = cls._float_ball(c, r, radius)
            if box is not None:
                return box
        elif _is_float_array(c) and r.ndim == 0:
            box = cls._decimal_ball(c, r)        # one exact radius, e.g. "0.05"
            if box is not None:
                return box
        c_f = np.vectorize(to_fraction, otypes=[object])(c) if c.size else c.astype(object)
        r_f = np.vectorize(to_fraction, otypes=[object])(r) if r.size else r.astype(object)
        if np.any(np.vectorize(lambda t: t < 0, otypes=[bool])(r_f)):
            raise IBPError(f"Box.from_center_radius: radius must be >= 0, got {radius!r}")
        return cls(c_f - r_f, c_f + r_f, guarantee=BOTH)

    @property
    def guarantee_text(self) -> str:
        """``"real+execution"`` or ``"real"`` (tables and reports)."""
        return "+".join(self.guarantee)

    def with_guarantee(self, guarantee) -> "Box":
        """The same box claiming ``guarantee`` (a tuple, or text like "real+execution")."""
        return Box(self.lo, self.hi, ball=self.ball, guarantee=guarantee)

    @classmethod
    def _float_ball(cls, c, r, radius) -> "Box":
        """c ± r for float64 arrays, vectorised: TwoSum gives each exact endpoint as
        s + e, and the sign of e says on which side of the float64 s it lies, which fixes
        its float64 roundings down and up.  Rounding the outward float64 endpoint into a
        smaller base format again, outward, gives the same as one directed rounding of the
        exact endpoint (the format's values are float64 values), so the box is rounded
        outward once into any float base."""
        c = np.asarray(c, dtype=np.float64)
        r = np.asarray(r, dtype=np.float64)
        try:
            shape = np.broadcast_shapes(c.shape, r.shape)
        except ValueError:
            raise IBPError(f"Box.from_center_radius: radius of shape {list(r.shape)} does "
                           f"not broadcast to the centre's shape {list(c.shape)}") from None
        bad = ~(r >= 0)
        if np.any(bad):
            raise IBPError(f"Box.from_center_radius: radius must be >= 0 (and not NaN), got "
                           f"{float(r[bad].reshape(-1)[0])!r}")
        if not np.all(np.isfinite(c)):
            i = np.argwhere(~np.isfinite(c))[0]
            raise IBPError(f"Box.from_center_radius: centre must be finite, got "
                           f"{float(c[tuple(i)])!r} at index {tuple(int(t) for t in i)}")
        with np.errstate(over="ignore", invalid="ignore"):
            s_lo, e_lo = _two_sum(c, -r)
            s_hi, e_hi = _two_sum(c, r)
            down, up = -np.inf, np.inf
            lo = np.where(e_lo < 0, np.nextafter(s_lo, down), s_lo)
            hi = np.where(e_hi > 0, np.nextafter(s_hi, up), s_hi)
            lo_in = np.where(e_lo > 0, np.nextafter(s_lo, up), s_lo)
            hi_in = np.where(e_hi < 0, np.nextafter(s_hi, down), s_hi)
        if not (np.all(np.isfinite(s_lo)) and np.all(np.isfinite(s_hi))):
            return None                # float64 overflow: the caller takes the exact path
        lo, hi = np.broadcast_to(lo, shape), np.broadcast_to(hi, shape)
        return cls(lo, hi, ball=(np.broadcast_to(c, shape), np.broadcast_to(r, shape),
                                 np.broadcast_to(lo_in, shape), np.broadcast_to(hi_in, shape)),
                   guarantee=BOTH)

    @classmethod
    def _decimal_ball(cls, c, r) -> "Box | None":
        """c ± r for a float64 centre array and one exact radius r (decimal string,
        Fraction, int): with rd <= r <= ru its float64 neighbours, each endpoint lies
        between the endpoints of the float balls c ± ru and c ± rd, so where both round
        alike the rounding is settled; the (rare) rest is settled with Fractions."""
        try:
            rq = to_fraction(r.item())
        except (ContextError, TypeError, ValueError):
            return None
        if rq < 0:
            raise IBPError(f"Box.from_center_radius: radius must be >= 0, got {r.item()!r}")
        rf = float(rq)
        if not np.isfinite(rf):
            return None
        rd = rf if Fraction(rf) <= rq else float(np.nextafter(rf, -np.inf))
        ru = rf if Fraction(rf) >= rq else float(np.nextafter(rf, np.inf))
        big = cls._float_ball(c, np.float64(ru), ru)
        small = cls._float_ball(c, np.float64(rd), rd)
        if big is None or small is None:
            return None
        lo, hi = np.array(big.lo), np.array(big.hi)          # outward: the wider ball's
        lo_in, hi_in = np.array(small.ball[2]), np.array(small.ball[3])
        # lower end c - r in [c - ru, c - rd]: RD(c - r) is settled where RD(c - ru) equals
        # RD(c - rd), RU(c - r) where RU(c - ru) equals RU(c - rd); likewise the upper end.
        unsettled = ((big.lo != small.lo) | (big.ball[2] != small.ball[2])
                     | (big.hi != small.hi) | (big.ball[3] != small.ball[3]))
        cc = np.broadcast_to(np.asarray(c, dtype=np.float64), lo.shape)
        for i in zip(*np.nonzero(unsettled)) if unsettled.ndim else ([()] if unsettled else []):
            cq = Fraction(float(cc[i]))
            lo[i], lo_in[i] = _directed_pair(cq - rq)
            hi_in[i], hi[i] = _directed_pair(cq + rq)
        rr = np.broadcast_to(np.array(rq, dtype=object), lo.shape)
        return cls(lo, hi, ball=(cc, rr, lo_in, hi_in), guarantee=BOTH)

    def exact_ends(self):
        """(lo, hi) with the exact endpoints (object arrays of Fractions for a float
        ball; the stored arrays otherwise)."""
        if self.ball is None:
            return self.lo, self.hi
        c, r = self.ball[0], self.ball[1]
        fr = np.frompyfunc(Fraction, 1, 1)
        cf, rf = fr(c), fr(r)
        return np.asarray(cf - rf, dtype=object), np.asarray(cf + rf, dtype=object)

    def inner_float(self):
        """float64 endpoints rounded INWARD (lo up, hi down), or None if not known
        without exact arithmetic."""
        if self.ball is None:
            return None
        return self.ball[2], self.ball[3]

    def to_interval(self, ctx):
        """This box as a value of interval context ``ctx``, endpoints rounded outward."""
        if not ctx.is_interval:
            raise IBPError(f"Box.to_interval: context {ctx.name} is not an interval context")
        if self.ball is not None:
            if ctx.float64_endpoints:
                # the outward float64 ends are the endpoints: ordered, NaN-free and on the
                # grid by construction, so make's checks are skipped (private copies)
                # (read-only contiguous ends, as from_center_radius makes for float
                # centres, are used as they are; others are copied into recycled result
                # arrays: fresh ones cost page faults per call)
                ends = []
                for t in (self.lo, self.hi):
                    if not (t.dtype == np.float64 and t.flags.c_contiguous
                            and not t.flags.writeable):
                        c = recycled_empty(self.shape)
                        np.copyto(c, t)
                        t = c
                    ends.append(t)
                return Interval(ends[0], ends[1])
            if ctx.fmt is not None:
                # float base: the outward float64 ends, rounded outward again (= once)
                return ctx.make(np.ascontiguousarray(self.lo), np.ascontiguousarray(self.hi))
            lo_x, hi_x = self.exact_ends()          # exact bases get the exact ball
            return ctx.make(ctx.convert(lo_x).lo, ctx.convert(hi_x).hi)
        lo = ctx.convert(self.lo)
        hi = ctx.convert(self.hi)
        return ctx.make(lo.lo, hi.hi)

    @classmethod
    def from_interval(cls, ctx, value, guarantee=(REAL,)) -> "Box":
        """Read an interval value back as a box (endpoints kept in the base representation);
        ``guarantee``: what the producer of ``value`` proved about it."""
        return cls(np.asarray(value.lo), np.asarray(value.hi), guarantee=guarantee)

    @classmethod
    def _of_result(cls, value, guarantee=BOTH) -> "Box":
        """:meth:`from_interval` for a value an interval context computed: its ends are
        ordered by construction (every op rounds an enclosure outward, NaN becomes the
        whole line), so the order check of ``__post_init__`` (two passes over each
        endpoint array, a few percent of a dense layer's IBP) is skipped."""
        box = object.__new__(cls)
        object.__setattr__(box, "lo", np.asarray(value.lo))
        object.__setattr__(box, "hi", np.asarray(value.hi))
        object.__setattr__(box, "ball", None)
        object.__setattr__(box, "guarantee", tuple(guarantee))
        return box

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
        if self.ball is not None and v.dtype.kind == "f":
            # a float64 v is >= the exact lower end iff it is >= its inward rounding
            lo, hi = self.ball[2], self.ball[3]
        elif self.ball is not None:
            lo, hi = self.exact_ends()
        if v.dtype != object and lo.dtype != object and hi.dtype != object:
            with np.errstate(invalid="ignore"):
                return (lo <= v) & (v <= hi)
        fl = np.frompyfunc(_le, 2, 1)
        return (fl(lo, v) & fl(v, hi)).astype(bool)

    def format(self, digits: int = 6) -> str:
        """Seed style: ``[lo0, lo1, ...] .. [hi0, hi1, ...]``."""
        return f"{_fmt(self.lo_float(), digits)} .. {_fmt(self.hi_float(), digits)}"

    def __getitem__(self, idx) -> "Box":
        if self.ball is not None:
            return Box(self.lo[idx], self.hi[idx], ball=tuple(a[idx] for a in self.ball),
                       guarantee=self.guarantee)
        return Box(self.lo[idx], self.hi[idx], guarantee=self.guarantee)


def held_entries(graph):
    """Boolean mask over the per-example input of a one-input graph: True where the input
    node declares integer values (``dtype``, see ``graph.ops_shape.INTEGER_DTYPES``),
    held at the centre by :meth:`Box.from_center_radius`; None when nothing is held."""
    from scalarlab.graph.ops_shape import integer_input
    ids = [n for n in graph.nodes if n.kind.op == "input"]
    if len(ids) != 1 or not integer_input(ids[0]):
        return None
    return np.ones(tuple(ids[0].out_shape), dtype=bool)


def _is_float_array(a) -> bool:
    """Data exactly representable in float64 (float16/32/64, or integers of at most 53
    bits): the vectorised ball applies."""
    if not isinstance(a, np.ndarray):
        return False
    if a.dtype.kind == "f":
        return a.dtype.itemsize <= 8
    if a.dtype.kind in "iu":
        return a.size == 0 or int(np.max(np.abs(a.astype(object)))) <= 2 ** 53
    return False


def _directed_pair(q: Fraction):
    """(RD64(q), RU64(q)) of an exact rational."""
    f = float(q)
    fq = Fraction(f)
    if fq == q:
        return f, f
    if fq > q:
        return float(np.nextafter(f, -np.inf)), f
    return f, float(np.nextafter(f, np.inf))


def _two_sum(a, b):
    """(s, e) with s = RN(a + b) and a + b = s + e exactly (Knuth), numpy arrays."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


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
            t = to_fraction(t)       # bounded literal reader
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
