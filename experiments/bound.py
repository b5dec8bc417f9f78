"""``scalarlab bound``: rigorous round-off error bounds of FPCore programs and scalar graphs.

For every program and format, :func:`bound` gives

* a **sound** upper bound on |executed - exact real result| over the whole input box (the
  FPCore ``:pre`` box, or ``box=``), absolute and, where the exact result stays away from
  0, relative: :func:`scalarlab.ibp.roundoff.roundoff_bound` (symbolic Taylor forms in
  mean-value form, interval derivatives from the op table, branch and bound).  The
  execution bounded is the lab's point context of that format (the one ``compare`` and
  ``fpbench`` run), with the arguments format values -- or, with ``real_inputs=True``,
  reals rounded once into the format, the model of FPTaylor's published tables;
* the largest error seen at samples (half drawn from the box with ``fpbench``'s
  sampler, precondition included, half inside the leaf box where the bound is largest),
  each sample's exact value an Arb ball, the error ``|ball - executed|``; the bound is
  checked against each sample's upper error bound (a row whose bound falls below a
  sample is a failure, ``violations``);
* the ratio bound / seen and the time taken.

FPTaylor's published binary64 bounds (:data:`FPTAYLOR_BINARY64`) appear beside the rows
of the benchmarks it reports.
"""
from __future__ import annotations

import math
import os
import time
from fractions import Fraction

import numpy as np
import pandas as pd

from scalarlab import scalars
from scalarlab.ibp.roundoff import BoundError, roundoff_bound

from . import metrics
from . import oracle as O
from . import progress
from . import sampling as S
from .errors import ExperimentError

from .defaults import BOUND_BUDGET_S as DEFAULT_BUDGET_S  # noqa: E402
from .defaults import BOUND_FORMATS as DEFAULT_FORMATS  # noqa: E402
from .defaults import BOUND_SAMPLES as DEFAULT_SAMPLES  # noqa: E402
from .defaults import BOUND_TOL as DEFAULT_TOL  # noqa: E402
#: Arb precision of the sampled errors (inputs are exact; 256 bits leave the error of a
#: 53-bit execution exact to ~200 bits)
SAMPLE_BITS = 256

#: FPTaylor's binary64 absolute error bounds, its regression table
#: ``tests/core/_tests.yml`` of github.com/soarlab/FPTaylor (configuration
#: ``tests/core/_tests.cfg``: round to nearest binary64, ``real`` variables rounded into
#: binary64, the power-of-2 rounding model, exact optimisation).  Keyed by FPBench name.
FPTAYLOR_BINARY64 = {
    "carbonGas": 4.962322e-9, "doppler1": 1.217604e-13, "doppler2": 2.226041e-13,
    "doppler3": 6.627360e-14, "himmilbeau": 1.000089e-12, "jetEngine": 1.028348e-11,
    "kepler0": 7.469401e-14, "kepler1": 2.863120e-13, "kepler2": 1.578175e-12,
    "predatorPrey": 1.585754e-16, "rigidBody1": 2.948753e-13, "rigidBody2": 3.606627e-11,
    "sine": 4.430439e-16, "sineOrder3": 5.937466e-16, "sqroot": 5.016453e-16,
    "turbine1": 1.669516e-14, "turbine2": 2.000935e-14, "turbine3": 9.574075e-15,
    "verhulst": 2.470696e-16,
}

ROW_COLUMNS = ("file", "benchmark", "index", "format", "inputs", "box", "bound_abs",
               "bound_rel", "first_order_seen", "sampled_max", "samples", "ratio",
               "violations", "fptaylor", "vs_fptaylor", "boxes", "passes", "converged",
               "rounded_ops", "time_s", "skip")


class _Program:
    """What :func:`bound` needs of one program: name, graph, argument names, box facts."""

    def __init__(self, name, graph, payload, arguments, *, source="", index=1,
                 fpcore=None, skip="", tensor=None):
        self.name, self.graph, self.payload = name, graph, payload
        self.arguments, self.source, self.index = list(arguments), source, index
        self.fpcore, self.skip = fpcore, skip
        #: (tensor graph, payload, ScalarGraph, output entry) when ``graph`` is one
        #: output of a scalarized tensor graph: the execution runs the tensor graph
        self.tensor = tensor

    def regions(self, box):
        """``(regions, residual)``: the box's per-argument regions and the rest of the
        precondition (empty with an explicit box)."""
        if box is not None:
            regions = S.parse_box(box, len(self.arguments)) if isinstance(box, str) \
                else [S.Region(Fraction(a), Fraction(b)) for a, b in box]
            if len(regions) != len(self.arguments):
                raise ExperimentError(f"box: {len(regions)} intervals for "
                                      f"{len(self.arguments)} arguments of {self.name}")
            return regions, []
        if not self.arguments:
            return [], []                     # a constant expression: nothing to box
        if self.fpcore is None or self.fpcore.pre is None:
            raise ExperimentError(f"{self.name}: no precondition to take the box from; "
                                  f"give --box")
        bounds, residual = self.fpcore.boxes()
        return S.regions_from_bounds(bounds, self.arguments), residual


def _programs(source, only=None) -> list:
    """FPCore file (all programs; ``FILE.fpcore#N`` the N-th), FPCore program objects, or
    a GRAPH spec (a scalar graph: its input nodes are the arguments)."""
    from scalarlab.graph.importers.fpcore import read_fpcore
    if isinstance(source, (list, tuple)):
        out = []
        for s in source:
            out.extend(_programs(s))
    elif hasattr(source, "graph") and hasattr(source, "arguments"):
        out = [program_of_fpcore(source)]
    else:
        spec = str(source)
        base, sep, num = spec.rpartition("#")
        if base.endswith(".fpcore") and sep and num.isdigit():
            if not os.path.isfile(base):
                raise ExperimentError(f"FPCore file {base}: no such file")
            progs = read_fpcore(base)
            k = int(num)
            if not 1 <= k <= len(progs):
                raise ExperimentError(f"{spec}: the file has {len(progs)} FPCore programs")
            out = [program_of_fpcore(progs[k - 1])]
        elif spec.endswith(".fpcore"):
            if not os.path.isfile(spec):
                raise ExperimentError(f"FPCore file {spec}: no such file")
            out = [program_of_fpcore(p) for p in read_fpcore(spec)]
        else:
            from .cases import load_case
            case = load_case(spec)
            out = programs_of_graph(case.name, case.graph, case.payload, spec)
    if only is not None:
        out = [p for p in out if only in p.name]
        if not out:
            raise ExperimentError(f"--only {only!r}: no program name contains it")
    return out


def programs_of_graph(name, graph, payload, source="") -> list:
    """One program per entry of the graph's output: the scalar graph of the binary
    contexts' rounding order (:func:`scalarlab.ibp.scalarize.scalarize`); an op it does
    not cover is one row whose ``skip`` names it."""
    from scalarlab.ibp.scalarize import scalarize
    try:
        sg = scalarize(graph, payload)
    except BoundError as exc:
        return [_Program(name, None, None, [], source=source, skip=str(exc))]
    args = [f"x{i}" if len(sg.input_shapes[i]) == 0 else f"x{i}[{k}]" for i, k in sg.inputs]
    many = len(sg.outputs) > 1
    return [_Program(f"{name}[{j}]" if many else name, sg.for_output(j), sg.payload, args,
                     source=source, index=j, tensor=(graph, payload, sg, j))
            for j in range(len(sg.outputs))]


def program_of_fpcore(p) -> _Program:
    return _Program(p.name, p.graph, p.payload, p.arguments, source=p.source,
                    index=p.index, fpcore=p, skip=p.skip or "")


def _point_context(name):
    ctx = scalars.get(name) if isinstance(name, str) else name
    fmt = metrics.format_of(ctx)
    if fmt is None or ctx.is_interval or ctx.is_dual:
        raise ExperimentError(f"format {ctx.name}: not a binary-format point context "
                              f"(binary64, binary32, bfloat16, binary16, ...)")
    return ctx, fmt


def _finite_box(prog, regions) -> list:
    box = []
    for name, r in zip(prog.arguments, regions):
        if not r.finite:
            raise BoundError(f"bound: argument {name} of {prog.name} has no finite "
                             f"interval {r.describe()}; give --box")
        box.append((r.lo, r.hi))
    return box


def _execute(prog, X, ctx) -> tuple:
    """``(values, ok)``: the context's output per sample (float64) and the samples it
    evaluated (a refused sample -- a rounded argument leaving a domain -- is not ok)."""
    from scalarlab.graph.fold import denote_all
    g, payload = prog.graph, prog.payload
    if prog.tensor is not None:
        # the tensor graph itself runs: the scalar graph only models its roundings
        g, payload, sg, entry = prog.tensor
        cols = {}
        for tid, shape in sg.input_shapes.items():
            pick = [j for j, (t, _) in enumerate(sg.inputs) if t == tid]
            cols[tid] = ctx.convert(X[:, pick].reshape((len(X),) + tuple(shape)))
    else:
        cols = {i: ctx.convert(X[:, j]) for j, i in enumerate(g.input_ids())}
    out = g.output if g.output is not None else len(g.nodes) - 1
    errs: dict = {}
    vals = denote_all(g, payload, cols or None, ctx, partial=True, errors=errs)
    v = vals[out]
    if v is None:
        return np.full(len(X), np.nan), np.zeros(len(X), dtype=bool)
    v = np.asarray(ctx.to_float64(v), dtype=np.float64).reshape(len(X), -1)
    v = v[:, prog.tensor[3]] if prog.tensor is not None else v[:, 0]
    return v, np.isfinite(v)


def sampled_errors(prog, X, ctx) -> tuple:
    """``(seen, upper, ok)`` per sample: |exact - executed| as a float64 (the Arb ball's
    midpoint), an upper bound of it (the ball's upper end, rounded up), and the samples
    with a real exact value and a finite execution."""
    flint = O._flint()
    arb = flint.arb
    n = len(X)
    seen = np.full(n, np.nan)
    upper = np.full(n, np.nan)
    if not n:
        return seen, upper, np.zeros(0, dtype=bool)
    v, ok = _execute(prog, X, ctx)
    g = prog.graph
    if prog.tensor is not None:
        g = prog.tensor[2].oracle_for_output(prog.tensor[3])
    out = g.output if g.output is not None else len(g.nodes) - 1
    with O.working_precision(SAMPLE_BITS):
        balls, status = O.evaluate(g, prog.payload, X, SAMPLE_BITS)
        ball, st = balls[out], status[out]
        for j in range(n):
            if not ok[j] or st[j] != O.OK or not ball[j].is_finite():
                ok[j] = False
                continue
            e = abs(ball[j] - arb(float(v[j])))
            seen[j] = float(e.mid())
            hi = e.upper()
            u = float(hi)
            if arb(u) < arb(hi):
                u = float(np.nextafter(u, np.inf))
            upper[j] = u
    return seen, upper, ok


def _samples(prog, regions, residual, fmt, n, seed, worst):
    """Half the samples from the box (and precondition), half inside the worst leaf."""
    rng = np.random.default_rng(seed)
    k = len(prog.arguments)
    if k == 0:
        return np.empty((1, 0))
    half = n // 2
    smp = S.sample(regions, prog.arguments, residual, fmt, n - half, rng, "box")
    parts = [smp.x]
    if worst and half:
        leaf = [S.Region(Fraction(max(a, float(r.lo))), Fraction(min(b, float(r.hi))))
                for (a, b), r in zip(worst, regions)]
        try:
            more = S.sample(leaf, prog.arguments, residual, fmt, half, rng, "box",
                            max_draw=40 * half)
            parts.append(more.x)
        except ExperimentError:
            # a leaf narrower than the format's spacing may hold no sample: the other half
            # comes from the box too, so a row always has the samples asked for
            parts.append(S.sample(regions, prog.arguments, residual, fmt, half, rng,
                                  "box").x)
    return np.concatenate(parts)


def _row(prog, ctx, inputs, box_text):
    return {"file": os.path.basename(prog.source) if prog.source else "",
            "benchmark": prog.name, "index": prog.index, "format": ctx.name,
            "inputs": inputs, "box": box_text, "bound_abs": math.nan,
            "bound_rel": math.nan, "first_order_seen": math.nan, "sampled_max": math.nan,
            "samples": 0, "ratio": math.nan, "violations": 0, "fptaylor": math.nan,
            "vs_fptaylor": math.nan, "boxes": 0, "passes": 0, "converged": False,
            "rounded_ops": 0, "time_s": math.nan, "skip": prog.skip or ""}


def bound_one(prog, ctx, *, box=None, samples=DEFAULT_SAMPLES, seed=0, real_inputs=False,
              budget_s=DEFAULT_BUDGET_S, tol=DEFAULT_TOL) -> dict:
    """One row: the bound of one program in one point context (see the module doc)."""
    ctx, fmt = _point_context(ctx)
    inputs = "real" if real_inputs else "format"
    row = _row(prog, ctx, inputs, "")
    if prog.graph is None:
        return row
    if prog.tensor is not None and (ctx.reduction != "sequential" or ctx.fma_dot
                                    or ctx.accumulation is not None):
        # the scalar graph models sequential sums of separately rounded products, each
        # rounded in ctx's format (a mixed context's sums round in its accumulator)
        acc = ctx.accumulation
        row["skip"] = (f"context {ctx.name} sums {ctx.reduction}"
                       f"{' with fma' if ctx.fma_dot else ''}"
                       f"{f' in {acc.name}' if acc is not None else ''}; the "
                       f"bound models sequential sums without fma in the value format")
        return row
    try:
        regions, residual = prog.regions(box)
        row["box"] = " ".join(f"{a}:{r.describe()}" for a, r in zip(prog.arguments, regions))
        res = roundoff_bound(prog.graph, prog.payload, _finite_box(prog, regions), fmt,
                             real_inputs=real_inputs, tol=tol, budget_s=budget_s,
                             ctx_point=ctx)
    except (BoundError, ExperimentError) as exc:
        row["skip"] = str(exc)
        return row
    row.update(bound_abs=res.absolute, bound_rel=res.relative,
               first_order_seen=res.lower, boxes=res.boxes, passes=res.passes,
               converged=res.converged, rounded_ops=res.rounded_nodes,
               time_s=res.seconds)
    if fmt.name == "binary64" and prog.name in FPTAYLOR_BINARY64:
        row["fptaylor"] = FPTAYLOR_BINARY64[prog.name]
        row["vs_fptaylor"] = res.absolute / row["fptaylor"]
    if samples:
        try:
            X = _samples(prog, regions, residual, fmt, samples, seed, res.worst_box)
        except ExperimentError:
            return row          # no format value in the box (e.g. 0.1:0.1 in binary32)
        seen, upper, ok = sampled_errors(prog, X, ctx)
        row["samples"] = int(ok.sum())
        if ok.any():
            row["sampled_max"] = float(np.max(seen[ok]))
            row["violations"] = int(np.count_nonzero(upper[ok] > res.absolute))
            if row["sampled_max"] > 0:
                row["ratio"] = res.absolute / row["sampled_max"]
    return row


def bound(source, *, formats=DEFAULT_FORMATS, box=None, only=None,
          samples=DEFAULT_SAMPLES, seed=0, real_inputs=False, budget_s=DEFAULT_BUDGET_S,
          tol=DEFAULT_TOL):
    """``(DataFrame, meta)``: one row per program x format (columns :data:`ROW_COLUMNS`).

    ``source``: an FPCore file (every program; ``FILE.fpcore#N`` the N-th), FPCore
    program objects, a GRAPH spec of a scalar graph, or a list of these.  ``formats``:
    binary point contexts (names or a comma list).  ``box``: ``"lo:hi,..."`` or
    ``[(lo, hi), ...]`` (one per argument) instead of each ``:pre``.  ``real_inputs``:
    arguments are reals rounded into the format (FPTaylor's model) rather than format
    values.  ``budget_s``/``tol``: branch-and-bound time per row and stopping tolerance."""
    if isinstance(formats, str):
        formats = [f for f in formats.split(",") if f]
    ctxs = [_point_context(f)[0] for f in formats]
    progs = _programs(source, only)
    t0 = time.perf_counter()
    rows = [bound_one(p, c, box=box, samples=samples, seed=seed, real_inputs=real_inputs,
                      budget_s=budget_s, tol=tol)
            # a bar per row (each up to budget_s), shown inside the CLI only
            for p, c in progress.loop([(p, c) for p in progs for c in ctxs], "bound", "row")]
    df = pd.DataFrame(rows, columns=list(ROW_COLUMNS))
    meta = {"formats": [c.name for c in ctxs], "programs": len(progs),
            "inputs": "reals rounded once into the format" if real_inputs
                      else "format values",
            "box": box if isinstance(box, str) or box is None else [list(map(str, b))
                                                                    for b in box],
            "samples": samples, "seed": seed, "budget_s": budget_s, "tol": tol,
            "seconds": time.perf_counter() - t0,
            "method": "symbolic Taylor forms (mean-value form): each rounding z + r, "
                      "|r| <= u 2^floor(log2|z|) + eta; interval derivatives over the "
                      "box x the rounding box (interval:float64, outward), branch and "
                      "bound; exact ops carry no term",
            "sampled": f"Arb balls at {SAMPLE_BITS} bits; half the samples in the box, "
                       f"half in the leaf box with the largest bound",
            "fptaylor": "github.com/soarlab/FPTaylor tests/core/_tests.yml (binary64, "
                        "real inputs, power-of-2 model)"}
    return df, meta
