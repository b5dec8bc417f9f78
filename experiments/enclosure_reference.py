"""A rigorous reference that costs a few forward passes: enclosures settle what they can,
the multiprecision oracle the rest.

**Ball enclosure** (the default, ``--reference enclosure``).  The graph is evaluated on
the (point) samples in the ball context ``ball:3`` (:mod:`scalars.ball`): per node and
entry a multi-float64 midpoint (3 float64 components, ~159 bits) and a rounded-up radius
holding the exact real value; the matmuls are error-free float64 BLAS products.  An
entry is **settled** for a format when every real in the ball rounds (nearest-even, the
rounding the metrics use) to one value of the format:

* ``v`` = the midpoint rounded into the format; settled when ``|midpoint - v| + radius``
  is below half the gap to the neighbour on that side (``ulp(v)/2``; ``ulp(v)/4`` toward
  zero from a power of two; strictly: no tie can hide inside), decided on the exact
  margins renormalised to two components -- binary64 and the low formats alike;
* or the ball's outward float64 ends round to the same value (rounding is monotone):
  overflow to infinity, flushing formats.

A sample counts as proven when every entry of the reported node (the output for
``compare``, the measured node for ``gaps``) is settled in every compared format; its
ULP and bits figures are then exact.  Escalation: a sample left unsettled only because
its radius is too wide (its midpoint alone would settle) -- or whose chunk the ball
context refused (an undecided comparison, a divisor ball holding 0) -- is evaluated again
at ``ball:6`` (~318 bits); what is still unsettled, and every sample whose value lies on
(or within the midpoint's precision of) a rounding boundary, goes to the ``mpmath:200``
oracle, that sample only.  When the first PILOT samples are proven by neither precision,
the whole run goes to the oracle without evaluating the rest.  ``meta.reference_check``
says how many samples each precision settled, how many went to the oracle and why.

**Interval enclosure** (``--reference interval``: the previous default, kept):
The graph is evaluated once in ``interval:float64`` on the (point) samples: directed
rounding and rigorous midpoint-radius products give, per node and entry, ``[lo, hi]``
holding the exact real value.  An entry is **settled** for a format when ``lo`` and
``hi`` round (nearest-even, the rounding the metrics use) to the same value of the format:
rounding is monotone, so the exact value rounds there too and the correctly rounded value
is proven.  The rule this module applies: the ULP and bits figures of the reported node
(the output for ``compare``, the measured node for ``gaps``) count as settled when every
entry of the sample is settled in every compared format -- those figures are integers
(ordinal distances to the correctly rounded value) and are then exact.  Absolute and
relative errors are measured against the enclosure's midpoint and are known to within its
radius (the meta gives the largest relative radius at the reported node).

A sample with an unsettled entry is re-evaluated by the oracle (``mpmath:200`` point
evaluation, as before) on that sample only, and its values replace the midpoints at every
node.  Entries the enclosure settled inside such samples are cross-checked against the
oracle's rounding (a disagreement would be a bug in one of them; it is counted).

The float64 enclosure is far too wide to settle binary64 values (it settles only values it
computes exactly), so a run comparing a context with more than 26 significand bits, or a
context without a binary format, takes the oracle on every sample, and the label says so.
Intermediate nodes carry the enclosure midpoints: within the enclosure radius of the exact
value, not proven correctly rounded; the wrapping effect of interval products grows that
radius with depth (about 12x per convolution of a random-weight resnet).
"""
from __future__ import annotations

import numpy as np

from scalarlab import scalars

from . import metrics
from .cases import batch_size, batch_take
from .tables import progress

#: The enclosure context and the oracle that takes the samples it does not settle.
ENCLOSURE_CONTEXT = "interval:float64"
#: Formats with more significand bits than this cannot be settled by a float64
#: enclosure except where it is exact; their runs go to the oracle (float64 = 53 bits).
ENCLOSURE_MAX_PRECISION = 26
#: Samples per interval evaluation chunk (bounds the memory of one ``denote_all``).
CHUNK = 256
#: The first PILOT samples are evaluated first; when the enclosure proves none of them
#: the run goes to the oracle without evaluating the rest.
PILOT = 32


def ineligible(contexts) -> str:
    """Why the float64 enclosure cannot settle the figures of ``contexts`` ("" if it can)."""
    out = []
    for c in contexts:
        f = metrics.format_of(c)
        if f is None:
            out.append(f"{c.name} has no binary format")
        elif f.man_bits + 1 > ENCLOSURE_MAX_PRECISION:
            out.append(f"{c.name} has {f.man_bits + 1} significand bits "
                       f"(> {ENCLOSURE_MAX_PRECISION})")
    return "; ".join(out)


def evaluate_enclosure(case, x, *, quiet=True):
    """Per node ``(lo, hi)`` float64 arrays over all samples of ``x`` in
    :data:`ENCLOSURE_CONTEXT` (chunked); raises what the fold raises."""
    import scalarlab.graph as G
    ctx = scalars.get(ENCLOSURE_CONTEXT)
    n = batch_size(x)
    parts: list = [[] for _ in case.nodes]
    starts = range(0, n, CHUNK)
    for s in progress(starts, total=len(starts), desc=ENCLOSURE_CONTEXT,
                      quiet=quiet or len(starts) < 2):
        vals = G.denote_all(case.graph, case.payload, batch_take(x, slice(s, s + CHUNK)), ctx)
        for i, v in enumerate(vals):
            parts[i].append((np.asarray(v.lo, dtype=np.float64),
                             np.asarray(v.hi, dtype=np.float64)))
    return [p[0] if len(p) == 1 else (np.concatenate([a for a, _ in p]),
                                      np.concatenate([b for _, b in p])) for p in parts]


def settled_entries(lo, hi, fmt) -> np.ndarray:
    """Boolean array: does ``[lo, hi]`` round to a single value of ``fmt``?  Rounding is
    monotone, so every real in the interval (the exact value included) rounds there.
    An endpoint NaN never settles."""
    from scalarlab.scalars import formats
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    if metrics.is_binary64(fmt):
        a, b = lo, hi                  # float64 endpoints are their own RN64
    else:
        with np.errstate(all="ignore"):
            a = formats.round_to_format(lo, fmt, "nearest_even")
            b = formats.round_to_format(hi, fmt, "nearest_even")
    return (a == b) & ~np.isnan(a)


def midpoint_dd(lo, hi) -> tuple[np.ndarray, np.ndarray]:
    """The midpoint of ``[lo, hi]`` as a double-double ``(hi, lo)`` pair with ``hi`` the
    float64 rounding of the midpoint: TwoSum of the endpoints is exact, and halving both
    parts is exact unless they underflow (below 2^-1021; then the pair is off by at most
    one subnormal unit, inside the interval's own rounding)."""
    with np.errstate(all="ignore"):
        s = lo + hi
        bb = s - lo
        e = (lo - (s - bb)) + (hi - bb)
        same = lo == hi                 # also +-inf == +-inf
        mh = np.where(same, lo, 0.5 * s)
        ml = np.where(same | ~np.isfinite(s), 0.0, 0.5 * e)
    return mh, ml


def enclosure_reference(case, x, oracle, contexts, fallback, *, nodes=None, quiet=True):
    """``((name, label, values, check), "")`` from the enclosure -- ``fallback(case,
    x_sub)`` gives the oracle's Reference on the samples it does not settle -- or
    ``(None, why)`` when it cannot be used."""
    from scalarlab.scalars.errors import ScalarLabError
    why = ineligible(contexts)
    if why:
        return None, f"enclosure not used: {why}"
    fmts = {c.name: metrics.format_of(c) for c in contexts}
    report = [case.output_id] if nodes is None else [int(i) for i in nodes]
    n = batch_size(x)
    try:
        # A pilot chunk first: a network too deep for the enclosure proves nothing, and
        # the pass over the whole batch would then be time lost before the oracle.
        k = min(n, PILOT)
        enc = evaluate_enclosure(case, batch_take(x, slice(0, k)), quiet=True)
        ok, _ = _settled_samples(enc, fmts, report, k)
        if n > k and not ok.any():
            return None, (f"enclosure not used: it proved none of the first {k} samples "
                          f"(relative interval width up to "
                          f"{_max_rel_width(enc[report[0]]):.2g} at node {report[0]})")
        if n > k:
            rest = evaluate_enclosure(case, batch_take(x, slice(k, n)), quiet=quiet)
            enc = [(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]))
                   for a, b in zip(enc, rest)]
    except (ScalarLabError, ArithmeticError, ValueError, TypeError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return None, f"enclosure not used: {ENCLOSURE_CONTEXT} cannot evaluate the graph ({msg})"
    ok, per_fmt = _settled_samples(enc, fmts, report, n)
    values = [midpoint_dd(lo, hi) for lo, hi in enc]
    sel = np.flatnonzero(~ok)
    check: dict = {"enclosure": ENCLOSURE_CONTEXT, "samples_by_enclosure": int(n - sel.size),
                   "samples_by_oracle": int(sel.size)}
    sub, contradicted = _oracle_fill(
        case, x, sel, values, fallback, fmts, report, per_fmt,
        lambda i, f: settled_value(enc[i][0], f).reshape(n, -1))
    sub_label = sub.label if sub is not None else ""
    check["settled"] = _settled_counts(fmts, per_fmt)
    check["oracle_contradicted"] = contradicted
    # Relative radius of the midpoints the rows are measured against, per node, over the
    # samples the enclosure settled (the oracle's samples carry the oracle's values).
    radius = []
    for (lo, hi), (mh, _) in zip(enc, values):
        keep = ok.reshape((n,) + (1,) * (lo.ndim - 1))
        keep = np.broadcast_to(keep, lo.shape)
        with np.errstate(all="ignore"):
            r = np.where(hi == lo, 0.0, 0.5 * (hi - lo) / np.abs(mh))[keep]
        radius.append(float(np.max(r)) if r.size else 0.0)
    check["node_max_rel_radius"] = radius
    check["max_rel_radius"] = max(radius[i] for i in report)
    where = ("output" if nodes is None else
             "every node's" if len(report) == len(case.nodes) > 1 else
             "node" + ("s " if len(report) > 1 else " ") + ", ".join(map(str, report)))
    by_format = {}                  # contexts of one format have the same counts
    for name, v in check["settled"].items():
        by_format.setdefault(fmts[name].name, v)
    figures = ", ".join(f"{f} {v['enclosure']}/{v['enclosure'] + v['oracle']}"
                        for f, v in by_format.items())
    label = (f"{ENCLOSURE_CONTEXT} enclosure, proven on {n - sel.size} of {n} samples "
             f"({where} entries settled: {figures})")
    if sel.size:
        label += f"; {sel.size} by {sub_label}"
    if contradicted:
        label += f"; WARNING: the oracle contradicts {contradicted} proven entries"
    name = ENCLOSURE_CONTEXT if not sel.size else f"{ENCLOSURE_CONTEXT}+{oracle}"
    return (name, label, values, check), ""


def _settled_samples(enc, fmts, report, n):
    """``(ok, per_fmt)``: per sample, is every entry of every reported node settled in
    every format and every node's enclosure finite (a midpoint of an unbounded interval
    is no reference value for the per-node rows); per format the settled-entry masks of
    the reported nodes, ``(n, entries)`` each."""
    ok = np.ones(n, dtype=bool)
    per_fmt = {}
    for name, f in fmts.items():
        per_fmt[name] = [settled_entries(enc[i][0], enc[i][1], f).reshape(n, -1)
                         for i in report]
        for s in per_fmt[name]:
            ok &= np.all(s, axis=1)
    for lo, hi in enc:
        ok &= np.all(np.isfinite(lo.reshape(n, -1)) & np.isfinite(hi.reshape(n, -1)), axis=1)
    return ok, per_fmt


def _max_rel_width(pair) -> float:
    lo, hi = pair
    with np.errstate(all="ignore"):
        w = np.where(hi == lo, 0.0, (hi - lo) / np.maximum(np.abs(lo), np.abs(hi)))
    w = np.where(np.isnan(w), np.inf, w)       # a NaN end: the whole line
    return float(np.max(w)) if w.size else 0.0


def settled_value(lo, fmt) -> np.ndarray:
    """The format value a settled interval rounds to (read off its lower end)."""
    from scalarlab.scalars import formats
    if metrics.is_binary64(fmt):
        return np.asarray(lo, dtype=np.float64)
    with np.errstate(all="ignore"):
        return formats.round_to_format(np.asarray(lo, dtype=np.float64), fmt, "nearest_even")


# ====================================================================== ball enclosure
#: The ball precisions: the run starts at BALL_K components, escalates to BALL_K_MAX.
BALL_K = 3
BALL_K_MAX = 6
#: Bytes the node values of one chunk may take (midpoint components and radius of every
#: node, 16 times over for the transients of im2col and the error-free products: resnet18
#: at 32x32 peaked at 2.8 GB for 16 samples with 4).
BALL_CHUNK_BYTES = 1 << 30
BALL_TRANSIENTS = 16


def ball_ineligible(contexts) -> str:
    """Why the ball enclosure cannot settle the figures of ``contexts`` ("" if it can):
    only a context without a binary format (mpmath, rational) is out of its reach."""
    return "; ".join(f"{c.name} has no binary format" for c in contexts
                     if metrics.format_of(c) is None)


def ball_chunk(case, k: int, n: int) -> int:
    """Samples per ball evaluation: :data:`CHUNK` at most, fewer when the graph's node
    values at ``k`` components would pass :data:`BALL_CHUNK_BYTES`."""
    import math
    per = sum(math.prod(nd.out_shape) for nd in case.nodes) * (k + 1) * 8 * BALL_TRANSIENTS
    return int(max(1, min(CHUNK, n, BALL_CHUNK_BYTES // max(per, 1))))


def _positive(parts) -> np.ndarray:
    """Is the exact sum of ``parts`` (first axis) surely > 0?  Its renorm to two
    components ``P`` with error bound ``err``: ``P0 + P1`` rounds within ``2^-52`` of
    itself, so the sum exceeds ``t - |t| 2^-51 - err`` (with slack), ``t = fl(P0 + P1)``."""
    from scalarlab.scalars.kernels import multifloat as MF
    with np.errstate(all="ignore"):
        P, err = MF.renorm(parts, 2)
        t = P[0] + P[1]
        return t > np.nextafter((np.abs(t) * 2.0 ** -51 + err) * (1.0 + 2.0 ** -50), np.inf)


def ball_settled(ctx, v, fmt, n: int, *, exact_mid: bool = False):
    """``(settled, value)`` per entry, ``(n, entries)`` each: does every real in the ball
    round (nearest-even) to one value of ``fmt``, and that value.  ``exact_mid``: judge
    the midpoint alone (radius 0): would a tighter ball settle it?

    Two rigorous tests, either settles: (1) ``r`` = the midpoint rounded into ``fmt``,
    settled when the ball lies within half the gap from ``r`` to each neighbour (``ulp/2``;
    ``ulp/4`` toward zero from a power of two; strict, so no tie hides inside), decided
    on the exact margins renormalised to two components, for ``r`` in the format's range
    (normal, or subnormal with gradual underflow; not its largest value); (2) the ball's
    outward float64 ends round to one value (covers overflow and flushing formats)."""
    from scalarlab.scalars.values import Ball
    from scalarlab.scalars.kernels import multifloat as MF
    if exact_mid:
        v = Ball(v.mid, None)
    r64, e64 = ctx.midpoint_dd(v)                # r64 = RN64 of the midpoint
    r = metrics.correctly_rounded(r64, e64, fmt)
    rr = np.where(np.isfinite(r), r, 0.0)[None]
    rad = np.zeros(np.shape(r)) if v.rad is None else v.rad
    with np.errstate(all="ignore"):
        a = np.abs(r)
        m, e = np.frexp(a)                       # a = m 2^e, m in [0.5, 1)
        # (frexp(0) = (0, 0): zero's gap is the smallest subnormal's, exponent emin)
        expo = np.where(a == 0, fmt.emin, np.maximum(e - 1, fmt.emin))
        ulp = np.ldexp(1.0, expo - fmt.man_bits)
        # half the gap to each neighbour: ulp/2, but toward zero from a power of two
        # (above the subnormal range) the gap is half as wide
        h_tz = ulp * np.where((m == 0.5) & (e - 1 > fmt.emin), 0.25, 0.5)
        h_up = np.where(r < 0, h_tz, 0.5 * ulp)
        h_dn = np.where(r > 0, h_tz, 0.5 * ulp)
        uniform = np.isfinite(r) & (a < fmt.max_finite) & (
            (a >= fmt.min_normal) | bool(fmt.subnormals))
        # |mid - r| + rad < half, as two exact margins: half -+ (mid - r) - rad > 0 (a
        # float64 |mid - r| would round away the distances that matter: 10^-36 at 2^-24)
        ok = uniform & _positive(np.concatenate([h_up[None], -v.mid, rr, -rad[None]])) \
            & _positive(np.concatenate([h_dn[None], v.mid, -rr, -rad[None]]))
        M, err = MF.renorm(np.concatenate([v.mid, -rr]), 1)
    # an exact midpoint equal to r (no radius), also where the gap test cannot speak
    exact = (M[0] == 0) & (err == 0) & (rad == 0) & np.isfinite(r)
    ok |= exact
    lo_e, hi_e = ctx.ends(v)
    by_ends = settled_entries(lo_e, hi_e, fmt) & ~ok
    val = np.where(by_ends, settled_value(lo_e, fmt), r)
    return (ok | by_ends).reshape(n, -1), val.reshape(n, -1)


def _ball_pass(case, x, ctx, fmts, report):
    """One ball evaluation of the samples ``x``: per node the midpoint double-double
    ``(hi, lo)`` with ``hi`` the float64 rounding, per sample whether every reported entry
    is settled in every format (``ok``) and whether the midpoints alone would be
    (``near``: False means a rounding boundary within the midpoint's precision), the
    settled masks per format and reported node, and the per-node relative radius."""
    import scalarlab.graph as G
    n = batch_size(x)
    vals = G.denote_all(case.graph, case.payload, x, ctx)
    ok = np.ones(n, dtype=bool)
    tight = np.ones(n, dtype=bool)
    per_fmt = {}
    for name, f in fmts.items():
        per_fmt[name] = []
        for i in report:
            s, val = ball_settled(ctx, vals[i], f, n)
            # the rows read the midpoint's rounding: it must be the proven value
            cr = metrics.correctly_rounded(*ctx.midpoint_dd(vals[i]), f).reshape(n, -1)
            s = s & ((cr == val) | (np.isnan(cr) & np.isnan(val)))
            per_fmt[name].append(s)
            ok &= np.all(s, axis=1)
            t, _ = ball_settled(ctx, vals[i], f, n, exact_mid=True)
            tight &= np.all(t | s, axis=1)
    dd, rel = [], []
    for v in vals:
        dd.append(ctx.midpoint_dd(v))
        rad = ctx.radius(v).reshape(n, -1)
        with np.errstate(all="ignore"):
            r = np.where(rad == 0, 0.0, rad / np.abs(dd[-1][0].reshape(n, -1)))
        rel.append(np.max(r, axis=1) if r.shape[1] else np.zeros(n))
    return dd, ok, tight, per_fmt, np.stack(rel, axis=1)


def _evaluate_balls(case, x, k, fmts, report, *, quiet=True, desc=None, keep=None):
    """The ball pass over all samples of ``x`` at ``k`` components, chunked; a chunk the
    context refuses is evaluated sample by sample, and a sample it still refuses is
    marked ``failed`` (with the first reason).  Returns a dict of per-sample arrays.
    ``keep``: the nodes whose midpoints are kept (default all); the others' are read-only
    NaN views that take no memory (``gaps`` reads one node of 2000 samples)."""
    from scalarlab.scalars.errors import ScalarLabError
    ctx = scalars.get(f"ball:{k}")
    n = batch_size(x)
    step = ball_chunk(case, k, n)
    out = {"dd": [[] for _ in case.nodes], "ok": [], "tight": [], "failed": [], "rel": [],
           "per_fmt": {name: [[] for _ in report] for name in fmts}, "why": ""}
    starts = range(0, n, step)

    def take(res, m):
        dd, ok, tight, per_fmt, rel = res
        for i, p in enumerate(dd):
            if keep is None or i in keep:
                out["dd"][i].append(p)
        out["ok"].append(ok); out["tight"].append(tight)
        out["failed"].append(np.zeros(m, dtype=bool)); out["rel"].append(rel)
        for name in fmts:
            for j, s in enumerate(per_fmt[name]):
                out["per_fmt"][name][j].append(s)

    def failed(xs, m, why):
        # a refused sample: NaN values (never read: it goes to the oracle), not settled
        shapes = [tuple(nd.out_shape) for nd in case.nodes]
        for i, sh in enumerate(shapes):
            if keep is None or i in keep:
                z = np.full((m,) + sh, np.nan)
                out["dd"][i].append((z, z))
        out["ok"].append(np.zeros(m, dtype=bool)); out["tight"].append(np.ones(m, dtype=bool))
        out["failed"].append(np.ones(m, dtype=bool))
        out["rel"].append(np.full((m, len(shapes)), np.inf))
        for name in fmts:
            for j, i in enumerate(report):
                e = int(np.prod(shapes[i]))
                out["per_fmt"][name][j].append(np.zeros((m, e), dtype=bool))
        out["why"] = out["why"] or why

    errors = (ScalarLabError, ArithmeticError, ValueError, TypeError)
    for s in progress(starts, total=len(starts), desc=desc or ctx.name,
                      quiet=quiet or len(starts) < 2):
        xs = batch_take(x, slice(s, s + step))
        m = batch_size(xs)
        try:
            take(_ball_pass(case, xs, ctx, fmts, report), m)
            continue
        except errors as exc:
            if m == 1:
                failed(xs, 1, _first_line(exc))
                continue
        for j in range(m):                      # isolate the samples the ball refuses
            xj = batch_take(xs, slice(j, j + 1))
            try:
                take(_ball_pass(case, xj, ctx, fmts, report), 1)
            except errors as exc:
                failed(xj, 1, _first_line(exc))
    cat = np.concatenate

    def joined(i, p):
        if p:
            return cat([a for a, _ in p]), cat([b for _, b in p])
        z = np.broadcast_to(np.nan, (n,) + tuple(case.nodes[i].out_shape))
        return z, z
    dd = []
    for i, p in enumerate(out["dd"]):
        dd.append(joined(i, p))
        p.clear()           # the chunks' pieces go as their node is joined: one copy alive
    return {"dd": dd,
            "ok": cat(out["ok"]), "tight": cat(out["tight"]), "failed": cat(out["failed"]),
            "rel": cat(out["rel"]),
            "per_fmt": {name: [cat(v) for v in lst] for name, lst in out["per_fmt"].items()},
            "why": out["why"]}


def _first_line(exc) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _merge(into, sel, part):
    """Write the per-sample results ``part`` (for samples ``sel``) over ``into``."""
    for i, (h, l) in enumerate(part["dd"]):
        if not into["dd"][i][0].flags.writeable:     # a node whose values are not kept
            continue
        into["dd"][i][0][sel] = h
        into["dd"][i][1][sel] = l
    for key in ("ok", "tight", "failed", "rel"):
        into[key][sel] = part[key]
    for name, lst in part["per_fmt"].items():
        for j, s in enumerate(lst):
            into["per_fmt"][name][j][sel] = s
    into["why"] = into["why"] or part["why"]


def ball_reference(case, x, oracle, contexts, fallback, *, nodes=None, quiet=True):
    """``((name, label, values, check), "")`` from the ball enclosure -- ``fallback(case,
    x_sub)`` gives the oracle's Reference on the samples it does not settle -- or
    ``(None, why)`` when it cannot be used (see the module docstring)."""
    why = ball_ineligible(contexts)
    if why:
        return None, f"enclosure not used: {why}"
    fmts = {c.name: metrics.format_of(c) for c in contexts}
    report = [case.output_id] if nodes is None else [int(i) for i in nodes]
    n = batch_size(x)
    k = BALL_K
    keep = None if nodes is None else set(report)
    # The pilot: a network the balls cannot settle even at BALL_K_MAX sends the run to
    # the oracle before the pass over the whole batch.
    p = min(n, PILOT)
    res = _evaluate_balls(case, batch_take(x, slice(0, p)), k, fmts, report, quiet=True,
                          keep=keep)
    esc_p = np.flatnonzero(~res["ok"] & (res["tight"] | res["failed"]))
    pilot_up = None
    if esc_p.size:
        pilot_up = _evaluate_balls(case, batch_take(x, esc_p), BALL_K_MAX, fmts, report,
                                   quiet=True, keep=keep)
    proven_p = int(np.count_nonzero(res["ok"])) + (
        0 if pilot_up is None else int(np.count_nonzero(pilot_up["ok"])))
    if n > p and proven_p == 0:
        rel = res["rel"][:, report[0]]
        return None, (f"enclosure not used: ball:{BALL_K} and ball:{BALL_K_MAX} proved none "
                      f"of the first {p} samples (relative radius up to "
                      f"{float(np.max(rel)) if rel.size else 0.0:.2g} at node {report[0]}"
                      + (f"; {res['why']}" if res["why"] else "") + ")")
    # most of the pilot needed the wider precision: run the rest there directly
    if pilot_up is not None and esc_p.size * 2 > p and np.count_nonzero(pilot_up["ok"]):
        k = BALL_K_MAX
    if n > p:
        rest = _evaluate_balls(case, batch_take(x, slice(p, n)), k, fmts, report,
                               quiet=quiet, desc=f"reference ball:{k}", keep=keep)
        def joined(a, b):
            if not a[0].flags.writeable:          # a node whose values are not kept
                z = np.broadcast_to(np.nan, (n,) + a[0].shape[1:])
                return z, z
            return np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]])
        res = {"dd": [joined(a, b) for a, b in zip(res["dd"], rest["dd"])],
               **{key: np.concatenate([res[key], rest[key]])
                  for key in ("ok", "tight", "failed", "rel")},
               "per_fmt": {name: [np.concatenate([a, b]) for a, b in
                                  zip(res["per_fmt"][name], rest["per_fmt"][name])]
                           for name in fmts},
               "why": res["why"] or rest["why"]}
    by_k = np.full(n, BALL_K)
    by_k[p:] = k
    # escalation of the rest (the pilot's already done), then the pilot's results merged
    if k < BALL_K_MAX:
        esc = np.flatnonzero(~res["ok"] & (res["tight"] | res["failed"]))
        esc = esc[esc >= p]
        if esc.size:
            up = _evaluate_balls(case, batch_take(x, esc), BALL_K_MAX, fmts, report,
                                 quiet=quiet, desc=f"reference ball:{BALL_K_MAX}", keep=keep)
            _merge(res, esc, up)
            by_k[esc] = BALL_K_MAX
    if pilot_up is not None:
        _merge(res, esc_p, pilot_up)
        by_k[esc_p] = BALL_K_MAX
    for kk in {BALL_K, k, BALL_K_MAX}:
        # the passes are done: the weights' slices need not outlive them (the contexts'
        # folds and the rows come next)
        scalars.get(f"ball:{kk}").clear_cache()
    ok = res["ok"]
    values = list(res["dd"])             # the oracle's samples are replaced below
    sel = np.flatnonzero(~ok)
    reasons = {"boundary": int(np.count_nonzero(~ok & ~res["tight"] & ~res["failed"])),
               "radius": int(np.count_nonzero(~ok & res["tight"] & ~res["failed"])),
               "refused": int(np.count_nonzero(~ok & res["failed"]))}
    by_ball = {f"ball:{kk}": int(np.count_nonzero(ok & (by_k == kk)))
               for kk in sorted({BALL_K, BALL_K_MAX})}
    check: dict = {"enclosure": "ball", "samples_by_enclosure": int(n - sel.size),
                   "samples_by_ball": by_ball, "samples_by_oracle": int(sel.size),
                   "oracle_reasons": reasons}
    if res["why"]:
        check["ball_refused"] = res["why"]
    sub, contradicted = _oracle_fill(
        case, x, sel, values, fallback, fmts, report, res["per_fmt"],
        lambda i, f: _ball_values(res, i, f, n))
    sub_label = sub.label if sub is not None else ""
    check["settled"] = _settled_counts(fmts, res["per_fmt"])
    check["oracle_contradicted"] = contradicted
    rel = res["rel"][ok]
    radius = [float(np.max(rel[:, i])) if rel.shape[0] else 0.0 for i in range(len(values))]
    check["node_max_rel_radius"] = radius
    check["max_rel_radius"] = max(radius[i] for i in report)
    where = ("output" if nodes is None else
             "every node's" if len(report) == len(case.nodes) > 1 else
             "node" + ("s " if len(report) > 1 else " ") + ", ".join(map(str, report)))
    by_format = {}
    for name, v in check["settled"].items():
        by_format.setdefault(fmts[name].name, v)
    figures = ", ".join(f"{f} {v['enclosure']}/{v['enclosure'] + v['oracle']}"
                        for f, v in by_format.items())
    parts = ", ".join(f"{v} at {kk}" for kk, v in by_ball.items() if v)
    label = (f"ball enclosure, proven on {n - sel.size} of {n} samples ("
             + (f"{parts}; " if parts else "") + f"{where} entries settled: {figures})")
    if sel.size:
        why_o = ", ".join(f"{v} {r}" for r, v in reasons.items() if v)
        label += f"; {sel.size} by {sub_label} ({why_o})"
    if contradicted:
        label += f"; WARNING: the oracle contradicts {contradicted} proven entries"
    # the oracle's own name (it may have been raised, mpmath:728 for tiny inputs); the
    # oracle's alone when the balls proved no sample
    name = (f"ball:{BALL_K}" if not sel.size else sub.name if sel.size == n
            else f"ball:{BALL_K}+{sub.name}")
    return (name, label, values, check), ""


def _ball_values(res, i, f, n):
    """The format values the balls' midpoints round to at node ``i`` (``(n, entries)``):
    where an entry is settled, the proven value (checked equal in :func:`_ball_pass`)."""
    return metrics.correctly_rounded(*res["dd"][i], f).reshape(n, -1)


def _oracle_fill(case, x, sel, values, fallback, fmts, report, per_fmt, enclosed):
    """Run the oracle on the samples ``sel``, put its values in place of the enclosure's
    midpoints (``values``, per node, updated in place; a node whose values are not kept is
    skipped) and cross-check: where the enclosure settled an entry of such a sample, the
    oracle must round it the same way (``enclosed(i, f)``: the enclosure's settled values
    of node i in format f, one row per sample).  Returns (the oracle's result or None,
    disagreements)."""
    if not sel.size:
        return None, 0
    sub = fallback(case, batch_take(x, sel))
    for i, (rh, rl) in enumerate(sub.values):
        mh, ml = values[i]
        if not mh.flags.writeable:            # a node whose values are not kept
            continue
        mh, ml = mh.copy(), ml.copy()
        mh[sel], ml[sel] = rh, rl
        values[i] = (mh, ml)
    contradicted = 0
    for name, f in fmts.items():
        for j, i in enumerate(report):
            s = per_fmt[name][j][sel]
            a = metrics.correctly_rounded(sub.values[i][0], sub.values[i][1], f)
            a = a.reshape(sel.size, -1)
            b = enclosed(i, f)[sel]
            contradicted += int(np.count_nonzero(s & (a != b) & ~(np.isnan(a) & np.isnan(b))))
    return sub, contradicted


def _settled_counts(fmts, per_fmt) -> dict:
    """Entries of the reported nodes settled by the enclosure and left to the oracle."""
    out = {}
    for name in fmts:
        by_enc = sum(int(np.count_nonzero(s)) for s in per_fmt[name])
        total = sum(int(s.size) for s in per_fmt[name])
        out[name] = {"enclosure": by_enc, "oracle": total - by_enc, "unsettled": 0}
    return out
