"""The reference a discrepancy table measures against: which oracle, at what precision.

The default, ``enclosure``, evaluates the graph in the ball context ``ball:3`` (``ball:6``
for the samples whose radius is too wide) and proves the correctly rounded values it can,
float64's included (:mod:`experiments.enclosure_reference`); the samples it does not
settle, and every run that compares a context without a binary format, go to the
``mpmath:200`` oracle as below.  ``interval`` is the previous default: one
``interval:float64`` pass, which cannot settle float64 (those runs take the oracle).

An explicit oracle (``--reference mpmath:200``): the oracle context evaluates every sample, or -- on large batches of cheap formats -- a
float64 reference replaces it once a check shows the two give the same correctly rounded
values (with near-boundary samples re-evaluated in the oracle).  An ``mpmath:P`` oracle is
raised to the precision the inputs' exponents need.  The label says which was used and why.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from scalarlab import scalars

from . import metrics
from .cases import (batch_size, batch_take, check_point_context, evaluate_split,
                    is_array_context)

# The default reference (the float64 enclosure, the oracle where it does not settle), the
# oracle behind it, and the oracle limit and its check: defined in experiments/defaults.py.
from .defaults import (DEFAULT_CHECK_SAMPLES, DEFAULT_ORACLE,  # noqa: E402,F401
                       DEFAULT_ORACLE_LIMIT, DEFAULT_REFERENCE, ENCLOSURE,
                       INTERVAL_ENCLOSURE)
#: The cheap float64 reference is only allowed for formats with at most this many
#: significand bits (it then carries >= 27 spare bits beyond the format's precision).
CHEAP_REFERENCE_MAX_PRECISION = 26
#: The check subset is drawn from ``seed + CHECK_SEED_OFFSET``, not ``seed``: callers draw
#: the samples themselves from ``seed``, and the same stream would pick a subset correlated
#: with how the samples were made.  Any fixed offset works; a prime keeps it off small seeds.
CHECK_SEED_OFFSET = 7919
#: Ziv-style safety net: a float64 value is treated as near a rounding boundary when a
#: boundary lies within this many times the largest relative deviation from the oracle
#: seen on the check (2^10: the check sees a subset, the batch may deviate more).
BOUNDARY_SAFETY_FACTOR = 1024.0
#: ... and never less than 2^-52 relative: two float64 roundings, even when the check saw
#: float64 agree exactly with the oracle (a boundary *at* the value is always "near").
BOUNDARY_MIN_REL_TOL = 2.0 ** -52
#: Near-boundary samples are re-evaluated in the oracle only while there are at most
#: max(BOUNDARY_REDO_MIN, n // BOUNDARY_REDO_DIVISOR) of them (a tenth of the batch);
#: beyond that the shortcut saves little over the oracle on all samples.
BOUNDARY_REDO_MIN = 16
BOUNDARY_REDO_DIVISOR = 10


# --------------------------------------------------------------------------- reference
@dataclass
class Reference:
    """The values every context is measured against, and an honest label for them."""
    name: str                  # context used for the whole batch
    oracle: str                # the oracle asked for
    label: str                 # one line for headers and reports
    values: list               # per node (hi, lo)
    check: dict = field(default_factory=dict)


def compute_reference(case, x, oracle_name, contexts, *, oracle_limit=DEFAULT_ORACLE_LIMIT,
                      check_samples=DEFAULT_CHECK_SAMPLES, seed=0, quiet=True,
                      nodes=None) -> Reference:
    """The oracle on every sample, or a float64 reference checked against it on a subset.

    The float64 shortcut (:func:`checked_float64_reference`) is tried only when there are
    more than ``oracle_limit`` samples, the oracle is an object-valued context (an array
    context is as cheap as float64 itself), and no compared context is float64 itself or
    wider than ``CHEAP_REFERENCE_MAX_PRECISION`` significand bits.  When it is not taken,
    or declines, the oracle runs on everything (:func:`oracle_reference`) and the label
    says why.

    ``oracle_name`` ``"enclosure"`` (the default): the ball enclosure settles what it can
    and the samples it leaves go through this function with ``mpmath:200``
    (:func:`experiments.enclosure_reference.ball_reference`); ``"interval"``: the same
    with the interval:float64 enclosure (:func:`~experiments.enclosure_reference.
    enclosure_reference`).
    """
    if oracle_name in (ENCLOSURE, INTERVAL_ENCLOSURE):
        return _enclosure_then_oracle(case, x, contexts, oracle_limit=oracle_limit,
                                      check_samples=check_samples, seed=seed, quiet=quiet,
                                      nodes=nodes, method=oracle_name)
    oracle = scalars.get(oracle_name)
    check_point_context(oracle, "--reference")
    oracle, raised = _oracle_for_inputs(oracle, x)
    why = ""
    if batch_size(x) > oracle_limit and not is_array_context(oracle):
        fmts = [metrics.format_of(c) for c in contexts]
        wide = [c.name for c, f in zip(contexts, fmts)
                if f is None or f.man_bits + 1 > CHEAP_REFERENCE_MAX_PRECISION]
        if wide:
            why = (f"float64 reference not allowed: {', '.join(wide)} too precise for a "
                   f"float64 reference")
        else:
            ref, why = checked_float64_reference(case, x, oracle, set(fmts),
                                                 check_samples=check_samples, seed=seed,
                                                 quiet=quiet, nodes=nodes)
            if ref is not None:
                if raised:
                    ref.label += f"; {raised}"
                return ref
    why = "; ".join(t for t in (raised, why) if t)
    return oracle_reference(case, x, oracle, why, quiet=quiet)


def _enclosure_then_oracle(case, x, contexts, *, method=ENCLOSURE, **kw) -> Reference:
    """The enclosure reference (balls, or ``method`` ``interval``: interval:float64), the
    oracle on the samples it does not settle; the oracle on all samples (label says why)
    when the enclosure cannot be used."""
    from .enclosure_reference import ball_reference, enclosure_reference

    def fallback(case_, xs):
        return compute_reference(case_, xs, DEFAULT_ORACLE, contexts, **kw)
    run = ball_reference if method == ENCLOSURE else enclosure_reference
    got, why = run(case, x, DEFAULT_ORACLE, contexts, fallback,
                   nodes=kw.get("nodes"), quiet=kw.get("quiet", True))
    if got is not None:
        name, label, values, check = got
        return Reference(name, DEFAULT_ORACLE, label, values, check)
    ref = fallback(case, x)
    ref.label += f"; {why}"
    ref.check = {**ref.check, "enclosure_not_used": why}
    return ref


#: An mpmath oracle carries at least this many bits beyond twice the largest binary
#: exponent of the inputs (as fpbench's oracle does), so that tiny or huge inputs -- e.g.
#: bit-pattern samples -- do not vanish against O(1) terms: (exp(x) - 1 at x = 1e-100
#: needs about 330 + 53 bits, which mpmath:200 does not have).
ORACLE_EXPONENT_GUARD = 64


def _oracle_for_inputs(oracle, x):
    """``(oracle, note)``: a multiprecision (``mpmath:P``) oracle raised to
    ``64 + 2 max|exponent|`` bits of the finite nonzero inputs when that is more than P
    (the note says so); read from the context's ``kind`` and ``prec``, not its name."""
    prec = getattr(oracle, "prec", None)
    if getattr(oracle, "kind", None) != "multiprecision" or not isinstance(prec, int):
        return oracle, ""
    parts = x.values() if isinstance(x, dict) else [x]
    emax = 0
    for part in parts:
        try:
            a = np.asarray(np.asarray(part, dtype=object).reshape(-1).astype(float),
                           dtype=np.float64)
        except (TypeError, ValueError, OverflowError):
            continue
        a = a[np.isfinite(a) & (a != 0)]
        if a.size:
            emax = max(emax, int(np.max(np.abs(np.frexp(a)[1]))))
    need = ORACLE_EXPONENT_GUARD + 2 * emax
    if need <= prec:
        return oracle, ""
    raised = type(oracle)(need)
    return raised, (f"oracle raised from {oracle.name} to {raised.name} for inputs with "
                    f"binary exponents up to {emax}")

def oracle_reference(case, x, oracle, why: str = "", *, quiet=True) -> Reference:
    """The oracle evaluated on every sample; ``why`` (if any) says why no shortcut was used."""
    vals = evaluate_split(case, x, oracle, quiet=quiet, desc=f"reference {oracle.name}")
    # Only a format-less context (mpmath, rational, fp32-real) is called an oracle; a
    # binary reference the user asked for is labelled as such.
    kind = "oracle" if metrics.format_of(oracle) is None else "requested reference, not an oracle"
    label = f"{oracle.name} ({kind}, all samples)" + (f"; {why}" if why else "")
    return Reference(oracle.name, oracle.name, label, vals)


def checked_float64_reference(case, x, oracle, fmts, *, check_samples=DEFAULT_CHECK_SAMPLES,
                              seed=0, quiet=True, nodes=None) -> tuple[Reference | None, str]:
    """``(Reference, "")`` from float64 when it passes the check, else ``(None, why)``.

    The check: on ``check_samples`` random samples, float64 and the oracle give, at every
    node of ``nodes`` (default all) and in every format of ``fmts``, the same correctly
    rounded values.  Then float64 evaluates the whole batch, and the samples whose float64
    value lies within its error of a rounding boundary of a format are re-evaluated in the
    oracle -- unless there are so many that the shortcut is pointless (then it declines).
    """
    n = batch_size(x)
    rng = np.random.default_rng(seed + CHECK_SEED_OFFSET)
    idx = np.sort(rng.choice(n, size=min(check_samples, n), replace=False))
    sub = batch_take(x, idx)
    ref_o = evaluate_split(case, sub, oracle, quiet=quiet, desc=f"check {oracle.name}")
    f64 = scalars.get("float64")
    ref_f = evaluate_split(case, sub, f64, quiet=True)
    checked = list(range(len(ref_o)) if nodes is None else nodes)
    mismatches, max_rel = 0, 0.0
    for i in checked:
        (oh, ol), (fh, fl) = ref_o[i], ref_f[i]
        e = metrics.entry_errors(fh, fl, oh, ol, None)
        if e.rel_err.size:
            max_rel = max(max_rel, float(np.max(e.rel_err)))
        for f in fmts:
            a = metrics.correctly_rounded(fh, fl, f)
            b = metrics.correctly_rounded(oh, ol, f)
            mismatches += int(np.count_nonzero(~((a == b) | (np.isnan(a) & np.isnan(b)))))
    if mismatches:
        return None, (f"float64 reference failed the check ({mismatches} rounded values "
                      f"differ on {idx.size} samples)")
    check = {"samples": int(idx.size), "max_rel_dev": max_rel, "rounding_mismatches": 0}
    vals = evaluate_split(case, x, f64, quiet=quiet, desc="float64 reference")
    tol = max(BOUNDARY_SAFETY_FACTOR * max_rel, BOUNDARY_MIN_REL_TOL)
    near = near_boundary(vals, checked, fmts, tol, n)
    k = int(np.count_nonzero(near))
    if k > max(BOUNDARY_REDO_MIN, n // BOUNDARY_REDO_DIVISOR):
        return None, (f"float64 reference not used: {k} of {n} samples lie within its "
                      f"error of a rounding boundary")
    if k:
        sel = np.flatnonzero(near)
        redo = evaluate_split(case, batch_take(x, sel), oracle, quiet=quiet,
                              desc=f"boundary cases in {oracle.name}")
        for i in checked:
            hi, lo = vals[i][0].copy(), vals[i][1].copy()
            hi[sel], lo[sel] = redo[i]
            vals[i] = (hi, lo)
    check["near_boundary_in_oracle"] = k
    where = "every node" if nodes is None else \
        "node" + ("s " if len(nodes) > 1 else " ") + ", ".join(map(str, nodes))
    label = (f"float64, checked against {oracle.name} on {idx.size} samples "
             f"(max rel dev {max_rel:.2g}; identical correctly rounded values "
             f"at {where} in every compared format; {k} sample{'s' if k != 1 else ''} "
             f"near a rounding boundary re-evaluated in the oracle)")
    return Reference("float64", oracle.name, label, vals, check), ""


def near_boundary(vals, nodes, fmts, tol: float, n: int) -> np.ndarray:
    """Per sample: does some node's float64 value ``hi`` have a rounding boundary of some
    format within relative distance ``tol`` (``hi*(1-tol)`` and ``hi*(1+tol)`` round to
    different values)?  Such a value may round the other way than the exact one."""
    from scalarlab.scalars import formats
    near = np.zeros(n, dtype=bool)
    for i in nodes:
        hi = vals[i][0].reshape(n, -1)
        for f in fmts:
            with np.errstate(all="ignore"):
                a = formats.round_to_format(hi * (1 - tol), f)
                b = formats.round_to_format(hi * (1 + tol), f)
            near |= np.any((a != b) & ~(np.isnan(a) & np.isnan(b)), axis=1)
    return near

