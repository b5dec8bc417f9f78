"""Sampled containment: do point executions stay inside the propagated boxes?

This compares points with boxes; it proves nothing about the points it did not draw.
Samples are deterministic (a seeded generator) and, for inputs with few coordinates,
every vertex of the input box is checked as well, because extreme values of monotone
compositions sit on vertices.

What a check checks (:func:`checked_guarantee`): point runs in the interval context's own
format test the ``execution`` guarantee (the boxes must hold what that point context
computes); point runs in another, more precise context approximate the exact values, a
sampled test of the ``real`` guarantee.  The report names it beside the guarantee each
box claims, and counts separately the violations of boxes that claim what was checked
(``claimed_violation_count``: a soundness bug) and of boxes that do not (a real-only box
missing a rounded point value is no bug of the box).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from scalarlab import scalars
from scalarlab.graph.errors import GraphError
from scalarlab.scalars.errors import ContextError

from .box import EXECUTION, REAL, Box
from .errors import IBPError
from .propagate import interval_context, run_ibp

MAX_VERTEX_COORDS = 12   # 2**12 = 4096 vertices at most
MAX_STORED_VIOLATIONS = 1000


@dataclass
class Violation:
    """One sampled value outside its node's box."""
    sample: int                 # index in the sample batch (vertices come first)
    input: list                 # the sampled input, float64
    node: int
    index: tuple                # coordinate inside the node's value
    value: float
    lo: float
    hi: float
    guarantee: str = ""         # what the box claims ("real+execution" / "real")
    checked: str = ""           # what the point run tested ("execution" / "real")

    def describe(self) -> str:
        text = (f"sample {self.sample} input={_fmt_list(self.input)}: node {self.node} "
                f"coordinate {list(self.index)} value {self.value!r} outside "
                f"[{self.lo!r}, {self.hi!r}]")
        if self.guarantee and self.checked and self.checked not in self.guarantee:
            text += (f" (the box claims {self.guarantee} only; the {self.checked} check "
                     "is not its claim)")
        return text


@dataclass
class EvalFailure:
    """A sampled input whose point evaluation raised (e.g. log of a negative value)."""
    sample: int
    input: list
    message: str


@dataclass
class ContainmentReport:
    point_context: str
    interval_context: str
    samples: int
    vertices: int
    boxes: list
    violations: list = field(default_factory=list)
    violation_count: int = 0
    failures: list = field(default_factory=list)
    outputs: Optional[np.ndarray] = None    # float64 values of the output node per sample
    output_id: int = -1
    checked_guarantee: str = EXECUTION      # the guarantee the point runs test
    claimed_violation_count: int = 0        # violations of boxes claiming ``checked``

    @property
    def checked(self) -> int:
        return self.samples + self.vertices

    @property
    def guarantee(self) -> str:
        """What the output box claims ("real+execution", "real"; "" without a box)."""
        b = self.boxes[self.output_id] if 0 <= self.output_id < len(self.boxes) else None
        return "" if b is None else b.guarantee_text

    @property
    def ok(self) -> bool:
        """No sampled value outside its box and no failed evaluation.  Nodes without a
        box (see :attr:`unbounded`) are not checked, so ``ok`` says nothing about them."""
        return self.violation_count == 0 and not self.failures

    @property
    def unbounded(self) -> list:
        """Ids of the nodes whose rule gave no box (``None``): nothing was checked there."""
        return [i for i, b in enumerate(self.boxes) if b is None]

    def first_counterexample(self) -> Optional[str]:
        if self.violations:
            return self.violations[0].describe()
        if self.failures:
            f = self.failures[0]
            return f"sample {f.sample} input={_fmt_list(f.input)}: evaluation failed: {f.message}"
        return None


def sample_box(box: Box, n: int, seed) -> np.ndarray:
    """``n`` deterministic float64 points inside ``box`` (shape ``(n, *box.shape)``).

    Endpoints are first rounded *inward* to float64 so every sample lies in the exact box.
    """
    if n < 0:
        raise IBPError(f"sample count must be >= 0, got {n}")
    lo, hi = _inner_float(box)
    rng = np.random.default_rng(seed)
    u = rng.random((n,) + lo.shape)
    x = lo + u * (hi - lo)
    return np.clip(x, lo, hi)


def box_vertices(box: Box) -> np.ndarray:
    """All ``2**d`` vertices of a box with ``d`` coordinates (inward-rounded floats)."""
    lo, hi = _inner_float(box)
    d = lo.size
    if d > MAX_VERTEX_COORDS:
        return np.empty((0,) + lo.shape)
    flo, fhi = lo.reshape(-1), hi.reshape(-1)
    rows = [np.where(np.array(bits, dtype=bool), fhi, flo)
            for bits in itertools.product((0, 1), repeat=d)]
    return np.array(rows).reshape((len(rows),) + lo.shape)


def checked_guarantee(pctx, ictx) -> str:
    """``"execution"`` when the point context is the interval context's base (its own
    format: the point runs are what the execution guarantee speaks of; for an exact base
    that is the real value too), else ``"real"`` (a more precise point context samples
    approximately exact values)."""
    return EXECUTION if ictx.has_base(pctx) else REAL


def check_containment(graph, payload, box: Box, samples: int = 50, point_ctx="binary32",
                      interval_ctx=None, seed=0, vertices: bool = True,
                      boxes=None, output_id: Optional[int] = None) -> ContainmentReport:
    """Evaluate deterministic samples (and vertices) and check every node against its box.

    ``boxes`` may be supplied (e.g. a deliberately wrong rule under test); otherwise they
    come from :func:`run_ibp` in ``interval_ctx`` (default ``interval:<point_ctx>``).
    """
    from scalarlab.graph import denote_all

    pctx = scalars.get(point_ctx)
    if pctx.is_interval:
        raise IBPError(f"check_containment: the point context must not be an interval "
                       f"context, got {pctx.name}")
    ictx = interval_context(interval_ctx or f"interval:{pctx.name}")
    if boxes is None:
        boxes = run_ibp(graph, payload, box, ictx)
    if len(boxes) != len(graph.nodes):
        raise IBPError(f"check_containment: {len(boxes)} boxes for {len(graph.nodes)} nodes")
    verts = box_vertices(box) if vertices else np.empty((0,) + box.shape)
    pts = sample_box(box, samples, seed)
    xs = np.concatenate([verts, pts], axis=0) if len(verts) else pts
    out_id = graph.output if output_id is None else output_id
    checking = checked_guarantee(pctx, ictx)
    report = ContainmentReport(point_context=pctx.name, interval_context=ictx.name,
                               samples=samples, vertices=len(verts), boxes=boxes,
                               output_id=out_id, checked_guarantee=checking)
    if len(xs) == 0:
        return report
    x_ctx = pctx.convert(xs)
    try:
        values = denote_all(graph, payload, x_ctx, pctx)
        good = np.arange(len(xs))
    except (GraphError, ContextError):
        # Some samples fail to evaluate: find them one by one, then re-run the rest batched.
        ok_idx = []
        for i in range(len(xs)):
            try:
                denote_all(graph, payload, pctx.take(x_ctx, [i], axis=0), pctx)
                ok_idx.append(i)
            except (GraphError, ContextError) as exc:
                report.failures.append(EvalFailure(i, xs[i].reshape(-1).tolist(), str(exc)))
        good = np.array(ok_idx, dtype=np.int64)
        values = (denote_all(graph, payload, pctx.take(x_ctx, good, axis=0), pctx)
                  if len(good) else [None] * len(graph.nodes))
    for nid, (b, v) in enumerate(zip(boxes, values)):
        if b is None or v is None:
            continue
        arr = _point_array(pctx, v)
        inside = b.contains(arr)
        if nid == out_id:
            report.outputs = np.asarray(pctx.to_float64(v), dtype=np.float64)
        if inside.all():
            continue
        bad = np.argwhere(~inside)
        report.violation_count += len(bad)
        if checking in b.guarantee:
            report.claimed_violation_count += len(bad)
        for row in bad[: max(0, MAX_STORED_VIOLATIONS - len(report.violations))]:
            s, coord = int(row[0]), tuple(int(t) for t in row[1:])
            report.violations.append(Violation(
                sample=int(good[s]), input=xs[good[s]].reshape(-1).tolist(), node=nid,
                index=coord, value=_as_float(arr[(s,) + coord]),
                lo=_as_float(b.lo[coord]), hi=_as_float(b.hi[coord]),
                guarantee=b.guarantee_text, checked=checking))
    if report.outputs is None and values[out_id] is not None:
        report.outputs = np.asarray(pctx.to_float64(values[out_id]), dtype=np.float64)
    return report


def _point_array(ctx, v) -> np.ndarray:
    """Point values as an array comparable (exactly) with box endpoints."""
    arr = np.asarray(v)
    if arr.dtype == object or arr.dtype == np.float64:
        return arr
    return np.asarray(ctx.to_float64(v))


def _as_float(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


def _inner_float(box: Box):
    """Box endpoints rounded inward to float64 (lo up, hi down)."""
    inner = box.inner_float()
    if inner is not None:
        lo, hi = np.array(inner[0], dtype=np.float64), np.array(inner[1], dtype=np.float64)
    else:
        lo = _round_float(box.lo, up=True)
        hi = _round_float(box.hi, up=False)
    if np.any(lo > hi):
        # a box thinner than one float64 ulp: use the nearest float inside or the endpoint
        lo = np.minimum(lo, hi)
    return lo, hi


def _round_float(a, up: bool) -> np.ndarray:
    from .box import _to_float_directed
    f_down = _to_float_directed(a, down=not up)
    return f_down


def _fmt_list(v) -> str:
    return "[" + ", ".join(repr(float(t)) for t in np.asarray(v).reshape(-1)) + "]"  # round-trip
