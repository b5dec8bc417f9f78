"""Containment sweeps over radii x contexts x sample counts, serial or sharded on Dask.

Every row is split into the same shards whatever runs them: shard ``k`` of a row draws
its samples from ``SeedSequence([seed, row, k])``, so a Dask run returns exactly the
serial result.  Per row the sweep reports how many samples (and vertices) were checked,
the violations, how many nodes got no box (``unbounded``: their rule gave up, so nothing
was checked there), the output box width, the sampled output range and
``tightness = sampled width / box width`` (1 would mean the box is attained).  ``methods``
selects the bounding method per row (``ibp``, ``crown``, ``crown-ibp``: see
:mod:`ibp.crown`); ``width_vs_ibp`` is the row's output box width over the IBP row's width
for the same radius, context and sample count (when IBP is among the methods).
``guarantee`` says what the row's output box claims (``real+execution`` for IBP, see
:mod:`ibp.box`), ``checked`` which guarantee the point runs test (``execution``: the
point context is the interval context's own format), and ``claimed_violations`` counts
the violations of boxes that claim the checked guarantee (each one a soundness bug; a
violation of a ``real``-only box by a rounded point run is not).  For a
vector output, widths are maxima over coordinates, ``sampled_lo``/``sampled_hi`` span all
coordinates and tightness is the mean of the per-coordinate ratios.  With ``spec=C``
(rows = linear functions of the output) every row's box, sampled range and tightness are
those of ``C z_out`` instead (CROWN's ``spec=`` bound; C applied to the output box for
IBP), and a sample whose ``C y`` lies outside that box counts as a violation.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np
import pandas as pd

from .box import Box, held_entries
from .containment import check_containment
from .crown import METHODS, run_crown
from .errors import IBPError
from .propagate import run_ibp

DEFAULT_SHARD = 2000
COLUMNS = ["radius", "context", "interval_context", "samples", "vertices", "violations",
           "failures", "unbounded", "box_lo", "box_hi", "box_width", "sampled_lo", "sampled_hi",
           "sampled_width", "tightness", "first_counterexample", "method", "width_vs_ibp",
           "guarantee", "checked", "claimed_violations"]


@dataclass(frozen=True)
class _Shard:
    row: int
    index: int
    radius: object
    context: str
    interval_context: str
    samples: int
    vertices: bool
    seed: tuple
    method: str = "ibp"


def _shard_seed(seed: int, row: int, k: int) -> int:
    return int(np.random.SeedSequence([int(seed), row, k]).generate_state(1)[0])


def _run_shard_text(doc: str, center, output_id, shard: _Shard, spec=None):
    """Worker entry: the graph travels as its JSON file text (portable to any cluster)."""
    from scalarlab.graph import loads
    graph, payload = loads(doc)
    return _run_shard(graph, payload, center, output_id, shard, spec)


def _run_shard(graph, payload, center, output_id, shard: _Shard, spec=None):
    # integer inputs (token ids) are held at the centre: no radius widens them
    box = Box.from_center_radius(center, shard.radius, held=held_entries(graph))
    if shard.method == "ibp":
        boxes = run_ibp(graph, payload, box, shard.interval_context)
    else:
        boxes = run_crown(graph, payload, box, shard.interval_context, method=shard.method,
                          output_id=output_id)
    rep = check_containment(graph, payload, box, samples=shard.samples,
                            point_ctx=shard.context, interval_ctx=shard.interval_context,
                            seed=shard.seed, vertices=shard.vertices, boxes=boxes,
                            output_id=output_id)
    out = rep.outputs
    if spec is not None:
        return _spec_shard(graph, payload, box, output_id, shard, spec, boxes, rep)
    shape = boxes[output_id].shape if boxes[output_id] is not None else ()
    if out is not None and out.size:
        out = out.reshape((-1,) + tuple(shape))
        lo, hi = np.nanmin(out, axis=0), np.nanmax(out, axis=0)
    else:
        lo, hi = np.full(shape, np.inf), np.full(shape, -np.inf)
    return {"row": shard.row, "vertices": rep.vertices,
            "violations": rep.violation_count, "failures": len(rep.failures),
            "unbounded": len(rep.unbounded), "sampled_lo": lo, "sampled_hi": hi,
            "first": rep.first_counterexample(), "box": boxes[output_id],
            "guarantee": rep.guarantee, "checked": rep.checked_guarantee,
            "claimed": rep.claimed_violation_count}


def _spec_shard(graph, payload, box, output_id, shard, C, boxes, rep):
    """A shard's result for the specification C (rows = linear functions of the output):
    the row's box is the box of ``C z_out`` (CROWN's ``spec=`` bound for crown /
    crown-ibp, C applied to the output box for ibp), its sampled range is C y over the
    samples' outputs y, and a sample is a violation when the enclosure of C y (computed
    in interval:float64 from y rounded outward) lies outside the box: the rounding of
    C y can never be mistaken for one.  The node checks of the containment report
    count as before."""
    from scalarlab import scalars
    from .crown import _flat
    ictx = scalars.get(shard.interval_context)
    if shard.method == "ibp":
        ob = boxes[output_id]
        sbox = None if ob is None else Box.from_interval(
            ictx, ictx.matmul(ictx.convert(C), _flat(ictx, ob.to_interval(ictx))),
            guarantee=ob.guarantee)
    else:
        sbox = run_crown(graph, payload, box, shard.interval_context, method=shard.method,
                         output_id=output_id, spec=C)
    m = C.shape[0]
    lo, hi = np.full(m, np.inf), np.full(m, -np.inf)
    viol, first = 0, rep.first_counterexample()
    out = rep.outputs
    if out is not None and out.size:
        f64 = scalars.get("interval:float64")
        y = np.asarray(out, dtype=np.float64).reshape(out.shape[0], -1)
        ok = np.all(np.isfinite(y), axis=1)
        y = y[ok]
        with np.errstate(all="ignore"):
            Y = f64.make(np.nextafter(y, -np.inf), np.nextafter(y, np.inf))
            E = f64.matmul(Y, f64.convert(np.ascontiguousarray(C.T)))       # (k, m)
            mid = y @ C.T
        if y.shape[0]:
            lo, hi = np.nanmin(mid, axis=0), np.nanmax(mid, axis=0)
        if sbox is not None and y.shape[0]:
            bad = (np.asarray(E.hi) < sbox.lo_float()[None, :]) | \
                  (np.asarray(E.lo) > sbox.hi_float()[None, :])
            viol = int(np.count_nonzero(np.any(bad, axis=1)))
            if viol and not first:
                k, j = (int(t) for t in np.argwhere(bad)[0])
                first = (f"spec row {j}: C y = {mid[k, j]!r} outside "
                         f"[{sbox.lo_float()[j]!r}, {sbox.hi_float()[j]!r}]")
    claims = sbox is not None and rep.checked_guarantee in sbox.guarantee
    return {"row": shard.row, "vertices": rep.vertices,
            "violations": rep.violation_count + viol, "failures": len(rep.failures),
            "unbounded": len(rep.unbounded), "sampled_lo": lo, "sampled_hi": hi,
            "first": first, "box": sbox,
            "guarantee": rep.guarantee, "checked": rep.checked_guarantee,
            "claimed": rep.claimed_violation_count + (viol if claims else 0)}


def sweep(graph, payload, center, radii: Sequence, contexts: Sequence[str],
          sample_counts: Sequence[int], *, seed: int = 0, vertices: bool = True,
          output_id: Optional[int] = None, shard_size: int = DEFAULT_SHARD,
          workers: Optional[int] = None, scheduler: Optional[str] = None,
          progress: Optional[Callable[[int], None]] = None,
          methods: Sequence[str] = ("ibp",), runner: Optional[Callable] = None,
          spec=None) -> pd.DataFrame:
    """Run the containment check for every (radius, context, sample count) combination.

    ``contexts`` are point contexts; each is checked against ``interval:<context>``.
    With ``workers`` (a local Dask cluster) or ``scheduler`` (an existing one) the shards
    run on Dask; ``progress(n)`` is called as shards finish.  ``runner(fn, doc, arg_lists,
    progress)`` replaces both: it returns ``[fn(doc, *args) for args in arg_lists]`` in
    order, ``doc`` being the graph file's text (the CLI passes one that turns cluster
    faults into one-line errors).  ``spec``: a matrix (m, n_out) or (m,) + the output's
    shape; the rows then describe ``spec z_out`` (see the module doc).
    """
    if shard_size <= 0:
        raise IBPError(f"shard size must be positive, got {shard_size}")
    bad = [m for m in methods if m not in METHODS]
    if bad or not methods:
        raise IBPError(f"unknown bounding method {bad[0] if bad else '(none)'!r}; use "
                       f"{', '.join(METHODS)}")
    out_id = graph.output if output_id is None else int(output_id)
    if spec is not None:
        from .crown import _spec_matrix
        spec = _spec_matrix(spec, tuple(graph.nodes[out_id].out_shape))
    rows, shards = [], []
    for radius in radii:
        for ctx in contexts:
            for n, method in itertools.product(sample_counts, methods):
                if int(n) < 0:
                    raise IBPError(f"sample count must be >= 0, got {n}")
                r = len(rows)
                rows.append((radius, ctx, f"interval:{ctx}", int(n), method))
                count = max(1, -(-int(n) // shard_size))
                for k in range(count):
                    m = min(shard_size, int(n) - k * shard_size) if n else 0
                    # the seed ignores the method: every method sees the same samples
                    shards.append(_Shard(r, k, radius, ctx, f"interval:{ctx}", m,
                                         vertices and k == 0,
                                         _shard_seed(seed, r // len(methods), k), method))
    if runner is not None:
        from scalarlab.graph import dumps
        results = runner(_run_shard_text, dumps(graph, payload),
                         [(center, out_id, sh, spec) for sh in shards], progress)
    elif workers or scheduler:
        results = _run_dask(graph, payload, center, out_id, shards, workers, scheduler,
                            progress, spec)
    else:
        results = []
        for sh in shards:
            results.append(_run_shard(graph, payload, center, out_id, sh, spec))
            if progress:
                progress(1)
    return _combine(rows, results)


def _run_dask(graph, payload, center, out_id, shards, workers, scheduler, progress,
              spec=None):
    from dask.distributed import Client, LocalCluster, as_completed

    cluster = None
    if scheduler:
        client = Client(scheduler)
    else:
        cluster = LocalCluster(n_workers=int(workers), threads_per_worker=1,
                               processes=True, dashboard_address=None)
        client = Client(cluster)
    try:
        from toolz import identity
        from scalarlab.graph import dumps
        # the graph text is a task, not scattered data: the scheduler recomputes it when
        # the worker holding it dies, and retries re-run shards whose worker died
        doc = client.submit(identity, dumps(graph, payload), pure=False, retries=3)
        futures = [client.submit(_run_shard_text, doc, center, out_id, sh, spec,
                                 pure=False, retries=3)
                   for sh in shards]
        if progress:
            for _ in as_completed(futures):
                progress(1)
        return client.gather(futures)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _combine(rows, results) -> pd.DataFrame:
    by_row: dict[int, list] = {}
    for res in results:
        by_row.setdefault(res["row"], []).append(res)
    records = []
    for r, (radius, ctx, ictx, n, method) in enumerate(rows):
        parts = by_row.get(r, [])
        box = parts[0]["box"] if parts else None
        # per output coordinate: union of the shards' sampled ranges
        lo = np.minimum.reduce([np.asarray(p["sampled_lo"]) for p in parts]) if parts else np.inf
        hi = np.maximum.reduce([np.asarray(p["sampled_hi"]) for p in parts]) if parts else -np.inf
        firsts = [p["first"] for p in parts if p["first"]]
        with np.errstate(invalid="ignore", divide="ignore"):
            swidth = np.where(hi >= lo, hi - lo, np.nan)
            if box is not None:
                bw = box.width()
                box_lo, box_hi = float(np.min(box.lo_float())), float(np.max(box.hi_float()))
                box_width = float(np.max(bw))
                ratio = np.where(bw > 0, swidth / np.where(bw > 0, bw, 1.0), np.nan)
                tight = float(np.nanmean(ratio)) if np.any(np.isfinite(ratio)) else float("nan")
            else:
                box_lo = box_hi = box_width = tight = float("nan")
        sampled_width = float(np.nanmax(swidth)) if np.any(np.isfinite(swidth)) else float("nan")
        lo = float(np.min(lo)); hi = float(np.max(hi))
        records.append({
            # a per-entry radius array (a box): its largest half-width
            "radius": float(np.max(np.asarray(radius, dtype=np.float64))), "context": ctx, "interval_context": ictx,
            "samples": n, "vertices": sum(p["vertices"] for p in parts),
            "violations": sum(p["violations"] for p in parts),
            "failures": sum(p["failures"] for p in parts),
            "unbounded": max((p["unbounded"] for p in parts), default=0),
            "box_lo": box_lo, "box_hi": box_hi, "box_width": box_width,
            "sampled_lo": lo if np.isfinite(lo) else float("nan"),
            "sampled_hi": hi if np.isfinite(hi) else float("nan"),
            "sampled_width": sampled_width, "tightness": tight,
            "first_counterexample": firsts[0] if firsts else "",
            "method": method, "width_vs_ibp": float("nan"),
            "guarantee": parts[0]["guarantee"] if parts else "",
            "checked": parts[0]["checked"] if parts else "",
            "claimed_violations": sum(p["claimed"] for p in parts),
        })
    ibp_width = {(q["radius"], q["context"], q["samples"]): q["box_width"]
                 for q in records if q["method"] == "ibp"}
    for q in records:
        w = ibp_width.get((q["radius"], q["context"], q["samples"]))
        if w is not None and w > 0:
            q["width_vs_ibp"] = q["box_width"] / w
    return pd.DataFrame.from_records(records, columns=COLUMNS)
