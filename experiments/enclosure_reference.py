"""A rigorous reference that costs an interval forward pass: enclosures settle what they
can, the multiprecision oracle the rest.

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
    sub_label = ""
    contradicted = 0
    if sel.size:
        sub = fallback(case, batch_take(x, sel))
        sub_label = sub.label
        for i, (rh, rl) in enumerate(sub.values):
            mh, ml = values[i]
            mh, ml = mh.copy(), ml.copy()
            mh[sel], ml[sel] = rh, rl
            values[i] = (mh, ml)
        # Cross-check: where the enclosure settled an entry of a fallback sample, the
        # oracle's value must round to the same format value.
        for name, f in fmts.items():
            for k, i in enumerate(report):
                s = per_fmt[name][k][sel]
                a = metrics.correctly_rounded(sub.values[i][0], sub.values[i][1], f)
                b = settled_value(enc[i][0], f)
                a = a.reshape(sel.size, -1)
                b = b.reshape(n, -1)[sel]
                contradicted += int(np.count_nonzero(s & (a != b) & ~(np.isnan(a) & np.isnan(b))))
    settled = {}
    for name in fmts:
        by_enc = sum(int(np.count_nonzero(s)) for s in per_fmt[name])
        total = sum(int(s.size) for s in per_fmt[name])
        settled[name] = {"enclosure": by_enc, "oracle": total - by_enc, "unsettled": 0}
    check["settled"] = settled
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
    for name, v in settled.items():
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
