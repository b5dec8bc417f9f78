"""Error metrics of a context's values against a reference, as the literature defines them.

Every metric compares one value array of a context with the reference (the mpmath oracle,
or a checked cheaper reference) entry by entry:

* absolute error ``|v - r|`` and relative error ``|v - r| / |r|``;  where ``r == 0`` the
  relative error is 0 when ``v == 0`` too and ``+inf`` otherwise (never hidden, never NaN);
* ULP distance: the ordinal distance, in the context's OWN format, between the context's
  value and the reference *correctly rounded to that format* (nearest-even); ``float64``
  is measured in binary64.  0 means "the context produced the best value its format
  can hold", 1 means one neighbour away, and so on (``+0`` and ``-0`` are equal);
* bits of error ``log2(1 + ulp distance)`` (Herbie's definition), at most the format's
  width.

Per-entry ULPs are dominated by the entries closest to zero (a value that cancels to
1e-6 of the output's scale can be thousands of ULPs off while the output as a vector is
fine), so :func:`figures` adds the figures that describe a vector output
(:data:`FIGURE_COLUMNS`):

* normwise error in ulps of the output scale: per sample
  ``max_i |v_i - r_i| / ulp_fmt(max_i |r_i|)``, the max over samples (the unit of a
  tolerance such as "8 binary32 ulps of max|y|"); a correctly rounded vector scores at
  most 0.5;
* relative error where ``|r|`` is not tiny: ``|r_i| >= 2^-p * max_j |r_j|`` (below the
  rounding noise of the sample's largest entry) and ``|r_i| >= min_normal`` of the format
  (below it the format itself has fewer than ``p`` bits); ``p`` is the format's precision
  (53 and binary64's range for a format-less context);
* underflow: the entries that are 0 where the exact value is not (a format without
  subnormals flushes to 0 as well), and how many of them are nevertheless the correctly
  rounded value (0 ULP, yet every digit lost).

A NaN produced where the reference is a number (or the converse) has infinite error in
every metric but bits.  Herbie's counting: where the reference is finite, a NaN or an
infinity from the context scores the format's width in bits (the worst possible figure,
counted, not dropped; the ULP distance stays infinite).  The reference is carried as a double-double ``(hi, lo)`` pair: ``hi`` is
the reference correctly rounded to float64 and ``lo`` the float64-rounded residual, so
errors far below one float64 ulp of the value are still seen.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Names of the summary columns, in the order every table uses.
SUMMARY_COLUMNS = ("max_abs_err", "mean_abs_err", "max_rel_err", "mean_rel_err",
                   "max_ulps", "mean_ulps", "max_bits", "mean_bits", "nonfinite")

#: Names of the vector figures (:func:`figures`), appended after the summary columns.
FIGURE_COLUMNS = ("normwise_ulps", "max_abs_ref", "max_rel_err_nontiny",
                  "mean_rel_err_nontiny", "nontiny", "underflow", "underflow_rounded")


#: Binary exponents past which a value's float64 rounding needs no exact arithmetic: a
#: magnitude >= 2^1024 rounds to infinity, one below 2^-1076 (under half the smallest
#: subnormal 2^-1074) rounds to zero with a residual that is zero in float64 as well.
_F64_OVER = 1024
_F64_UNDER = -1076


def _ratio_parts(v):
    """``(numerator, denominator)`` of an exact scalar, ``("scaled", m, e)`` for a binary
    float ``m * 2^e`` whose exponent is too far out for its integer ratio (an mpmath
    exponent can pass 2^100: ``exp(-3.4e38)`` of an attention mask; ``1 << 2^100`` is an
    OverflowError), or None for inf/NaN/plain floats."""
    mpf_ = getattr(v, "_mpf_", None)
    if mpf_ is not None:                               # mpmath mpf: (sign, man, exp, bc)
        sign, man, exp, bc = mpf_
        if not man:
            return None if exp else (0, 1)             # inf / nan have man == 0, exp != 0
        man = int(man) * (-1 if sign else 1)
        if not _F64_UNDER - int(bc) <= exp <= _F64_OVER:
            return ("scaled", man, int(exp) + int(bc))
        return (man << exp, 1) if exp >= 0 else (man, 1 << -exp)
    as_me = getattr(v, "as_mantissa_exp", None)
    if as_me is not None and not isinstance(v, (float, np.floating)):
        try:                                           # gmpy2 mpfr: exact m * 2^e
            m, e = as_me()
        except (OverflowError, ValueError):
            return None                                # mpfr inf / nan
        m, e = int(m), int(e)
        if not m:
            return (0, 1)
        if not _F64_UNDER - m.bit_length() <= e <= _F64_OVER:
            return ("scaled", m, e + m.bit_length())
        return (m << e, 1) if e >= 0 else (m, 1 << -e)
    if hasattr(v, "as_integer_ratio") and not isinstance(v, (float, np.floating)):
        try:                                           # Fraction / int
            n, d = v.as_integer_ratio()
            return int(n), int(d)
        except (OverflowError, ValueError):
            return None
    num, den = getattr(v, "numerator", None), getattr(v, "denominator", None)
    if num is not None and den is not None:            # gmpy2 mpq
        return int(num), int(den)
    return None


def exact_split(values) -> tuple[np.ndarray, np.ndarray]:
    """Double-double ``(hi, lo)`` float64 arrays of any context's point values.

    float64 arrays pass through with ``lo = 0``.  Object arrays (mpmath ``mpf``, gmpy2
    ``mpq``/``mpfr``, ``Fraction``) are split exactly with integer arithmetic: Python's
    int true division is correctly rounded (subnormals included), so ``hi`` is the value
    rounded to nearest float64 and ``lo`` the rounded residual.  A binary float whose
    magnitude lies beyond float64's range on either side is read off its exponent alone
    (``+-inf`` above 2^1024, ``+-0`` below 2^-1076), never built as an integer.
    """
    arr = np.asarray(values)
    if arr.dtype != object:
        hi = arr.astype(np.float64)
        return hi, np.zeros_like(hi)
    flat = arr.reshape(-1)
    hi = np.empty(flat.size)
    lo = np.zeros(flat.size)
    for i, v in enumerate(flat):                       # exact values: per entry by nature
        parts = _ratio_parts(v)
        if parts is None:
            hi[i] = float(v)
            continue
        if parts[0] == "scaled":
            # |m| * 2^(top - bits(m)) lies in [2^(top-1), 2^top): past 2^1024 it rounds to
            # infinity, under 2^-1076 to a signed zero (residual below float64's range)
            _, m, top = parts
            hi[i] = (np.inf if top > _F64_OVER else 0.0) * (-1.0 if m < 0 else 1.0)
            continue
        n, d = parts
        try:
            h = n / d                                  # correctly rounded
        except OverflowError:
            hi[i] = np.inf if n > 0 else -np.inf
            continue
        hi[i] = h
        if h != 0.0 or n == 0:
            hn, hd = h.as_integer_ratio()
            rn = n * hd - hn * d
            if rn:
                lo[i] = rn / (d * hd)
    return hi.reshape(arr.shape), lo.reshape(arr.shape)


def round_to_odd_f64(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """Round the double-double ``hi + lo`` to float64 with round-to-odd.

    ``hi`` is the nearest float64, so the exact value lies between ``hi`` and its
    neighbour in the direction of ``lo``; round-to-odd picks whichever of the two has an
    odd last bit when ``lo != 0``.  Rounding that result to nearest in any format with
    at most 51 significand bits gives the correctly rounded value of ``hi + lo``
    (Boldo & Melquiond: round-to-odd with two extra bits makes double rounding safe).
    """
    from scalarlab.scalars.kernels.flat import flat_f64
    from scalarlab.scalars.kernels.ordinal import round_to_odd_flat
    hi = np.asarray(hi, dtype=np.float64)
    lo = np.asarray(lo, dtype=np.float64)
    shape = np.broadcast_shapes(hi.shape, lo.shape)
    out = np.empty(shape)
    round_to_odd_flat(flat_f64(hi, shape), flat_f64(lo, shape), out.reshape(-1))
    return out


def _binary64():
    from scalarlab.scalars import formats
    return formats.get("binary64")


def is_binary64(fmt) -> bool:
    """Are ``fmt``'s finite values exactly float64's (the Format's own answer)?"""
    return fmt is not None and fmt.is_binary64


def correctly_rounded(ref_hi, ref_lo, fmt) -> np.ndarray:
    """The reference ``hi + lo`` correctly rounded (nearest-even) into ``fmt``."""
    if fmt is None or is_binary64(fmt):
        return np.asarray(ref_hi, dtype=np.float64)    # hi is already RN64 of the reference
    from scalarlab.scalars import formats
    return formats.round_to_format(round_to_odd_f64(ref_hi, ref_lo), fmt, "nearest_even")


def _point_dtype(ctx):
    """The numpy dtype of a point context's values, read off ``convert(0.0)``."""
    return np.asarray(ctx.convert(0.0)).dtype


def has_complex_values(ctx) -> bool:
    """True for a point context whose values are complex (e.g. ``complex128``)."""
    if ctx.is_interval or ctx.is_dual:
        return False
    return _point_dtype(ctx).kind == "c"


def format_of(ctx):
    """The binary format a context's values live in (float64 -> binary64), or None.

    ``ctx.fmt`` when the context declares one.  A point context without one whose values
    are nevertheless float64 arrays computed natively is hardware float64: its format is
    binary64 (object-valued contexts -- mpmath, rationals, fp32-real -- have none).
    """
    fmt = ctx.fmt
    if fmt is not None:
        return fmt
    if ctx.is_interval or ctx.is_dual or ctx.reduction != "native":
        return None
    return _binary64() if _point_dtype(ctx) == np.float64 else None


@dataclass
class EntryErrors:
    """Per-entry errors of one value array (flattened over samples and elements)."""
    abs_err: np.ndarray
    rel_err: np.ndarray
    ulps: np.ndarray | None       # None when the context has no binary format
    bits: np.ndarray | None
    nonfinite: int                # entries where exactly one side is NaN (or inf vs finite)
    fmt: object = None            # the format the ULPs are in (None: no ULP metrics)
    target: np.ndarray | None = None   # the reference correctly rounded into ``fmt``


def entry_errors(v_hi, v_lo, ref_hi, ref_lo, fmt) -> EntryErrors:
    """Absolute, relative, ULP and bits-of-error arrays of ``v`` against the reference.

    ``v`` and the reference are double-double pairs (``v_lo`` is 0 for binary formats).
    ``fmt`` is the context's format (None: no ULP metrics; also none when some value of
    ``v`` is not a value of ``fmt``, e.g. fp32-real: binary32 precision but unbounded
    exponent).  Per entry, with ``diff = (v_hi - r_hi) + (v_lo - r_lo)`` (0 where the
    pairs are equal, inf included): ``abs_err = |diff|``, ``rel = abs_err / |r_hi + r_lo|``
    (0/0 = 0, x/0 = inf), both 0 where both sides are NaN and inf where exactly one side is
    NaN or infinite; ``ulps`` the ordinal distance in ``fmt`` from ``v_hi`` to the reference
    correctly rounded into ``fmt`` (0 for NaN vs NaN, inf for NaN vs a number).  One
    compiled pass (:func:`scalars.kernels.ordinal.entry_errors_flat`) computes them without
    a temporary array per step: the rows of ``compare`` run it on every node's full value
    tensor, once per context.
    """
    from scalarlab.scalars import formats
    from scalarlab.scalars.kernels.flat import flat_f64
    from scalarlab.scalars.kernels.ordinal import entry_errors_flat
    v_hi, v_lo = flat_f64(v_hi), flat_f64(v_lo)
    r_hi, r_lo = flat_f64(ref_hi), flat_f64(ref_lo)
    n = v_hi.size
    abs_err, rel = np.empty(n), np.empty(n)
    if fmt is not None:
        target = flat_f64(correctly_rounded(r_hi, r_lo, fmt))
        d = np.empty(n)
        params = formats._ordinal_params(fmt)
    else:
        target, d = r_hi, np.empty(0)
        params = formats._ordinal_params(_binary64())      # unused without ULPs
    nonfinite, bad_v, bad_t, worst = entry_errors_flat(
        v_hi, v_lo, r_hi, r_lo, target, abs_err, rel, d, fmt is not None, *params)
    if fmt is not None and bad_v:
        fmt = None          # e.g. fp32-real: binary32 precision but unbounded exponent
    ulps = bits = None
    if fmt is None:
        target = None
    else:
        if bad_t:           # the rounding gave a non-value: ulp_distance names it
            fin = ~(np.isnan(v_hi) | np.isnan(r_hi))
            formats.ulp_distance(v_hi[fin], target[fin], fmt)
        ulps = d
        width = float(fmt.exp_bits + fmt.man_bits + 1)
        with np.errstate(all="ignore"):
            bits = np.add(d, 1.0)                               # Herbie: bits of error
            np.log2(bits, out=bits)
            np.minimum(bits, width, out=bits)
        if worst:           # NaN / inf for a finite value: the format's width
            bits[~np.isfinite(v_hi) & np.isfinite(r_hi)] = width
    return EntryErrors(abs_err, rel, ulps, bits, int(nonfinite), fmt, target)


def _max(a):
    return float(np.max(a)) if a is not None and a.size else float("nan")


def _mean(a):
    if a is None or not a.size:
        return float("nan")
    with np.errstate(all="ignore"):
        return float(np.mean(a))


def summarize(e: EntryErrors) -> dict:
    """Max and mean of every metric (NaN for ULP metrics of a format-less context)."""
    return {
        "max_abs_err": _max(e.abs_err), "mean_abs_err": _mean(e.abs_err),
        "max_rel_err": _max(e.rel_err), "mean_rel_err": _mean(e.rel_err),
        "max_ulps": _max(e.ulps), "mean_ulps": _mean(e.ulps),
        "max_bits": _max(e.bits), "mean_bits": _mean(e.bits),
        "nonfinite": e.nonfinite,
    }


def _per_sample(a: np.ndarray, samples) -> np.ndarray:
    """``a`` (flat) as one row per sample when it splits evenly, else as one row (a node
    without the batch axis)."""
    n = int(samples) if samples else 1
    if n < 1 or a.size % n:
        n = 1
    return a.reshape(n, -1)


@dataclass
class VectorErrors:
    """Per-sample and per-entry parts of the vector figures (:func:`vector_errors`)."""
    normwise: np.ndarray          # per sample: max|error| / ulp(max|exact|) (NaN: no format)
    scale: np.ndarray             # per sample: max|exact| over its finite entries
    nontiny: np.ndarray           # per entry: the relative error is reported there
    underflow: np.ndarray         # per entry: 0 where the exact value is not
    underflow_rounded: np.ndarray  # per entry: ... and 0 is its correctly rounded value


def vector_errors(e: EntryErrors, v_hi, v_lo, ref_hi, ref_lo, samples=1) -> VectorErrors:
    """The parts of :func:`figures`, per sample and per entry (``gaps`` shows their
    distribution).  ``e`` is :func:`entry_errors` of the same arrays; ``samples`` the
    number of samples the flattened arrays hold: the scale and the tiny cut are per
    sample (one sample's large output must not make another's look tiny)."""
    v_hi = np.asarray(v_hi, dtype=np.float64).reshape(-1)
    v_lo = np.asarray(v_lo, dtype=np.float64).reshape(-1)
    r_hi = np.asarray(ref_hi, dtype=np.float64).reshape(-1)
    r_lo = np.asarray(ref_lo, dtype=np.float64).reshape(-1)
    fmt = e.fmt
    with np.errstate(all="ignore"):
        r_abs = np.abs(r_hi + r_lo)
    fin = np.isfinite(r_abs)
    mag = _per_sample(np.where(fin, r_abs, 0.0), samples)
    scale = mag.max(axis=1) if mag.size else np.full(mag.shape[0], np.nan)
    normwise = np.full(scale.shape, np.nan)
    if fmt is not None and mag.size:
        from scalarlab.scalars import formats
        # the spacing of the format at the sample's largest exact magnitude (ulp(0) is the
        # smallest subnormal: an all-zero exact output scores its error in those)
        unit = np.asarray(formats.ulp(scale, fmt), dtype=np.float64)
        with np.errstate(all="ignore"):
            normwise = _per_sample(e.abs_err, samples).max(axis=1) / unit
    # Not tiny: at least 2^-p of the sample's scale (a smaller entry is below the rounding
    # noise of the operations that produced its neighbours: a cancellation may leave it
    # 100% wrong while the vector is right) and in the format's normal range (below it the
    # format holds fewer than p bits of the value).
    p = fmt.precision if fmt is not None else 53
    normal = fmt.min_normal if fmt is not None else 2.0 ** -1022
    cut = np.maximum(np.ldexp(scale, -p), normal)[:, None]
    keep = ((mag >= cut) & (mag > 0)).reshape(-1) & fin
    zero_out = (v_hi == 0) & (v_lo == 0) & fin & (r_abs > 0)
    rounded = zero_out & (e.target == 0) if e.target is not None else np.zeros_like(zero_out)
    return VectorErrors(normwise, scale, keep, zero_out, rounded)


def figures(e: EntryErrors, v_hi, v_lo, ref_hi, ref_lo, samples=1) -> dict:
    """The vector figures of one value array (:data:`FIGURE_COLUMNS`, module docstring):
    the max over samples of the normwise figure, the relative error over the entries
    that are not tiny, the underflow counts.

    Reference entries that are not finite take no part in a scale; a pair that
    disagrees there (NaN for a number, inf for a finite value) makes the normwise figure
    inf, as it is counted in ``nonfinite``."""
    w = vector_errors(e, v_hi, v_lo, ref_hi, ref_lo, samples)
    rel = e.rel_err[w.nontiny]
    return {"normwise_ulps": _max(w.normwise), "max_abs_ref": _max(w.scale),
            "max_rel_err_nontiny": _max(rel), "mean_rel_err_nontiny": _mean(rel),
            "nontiny": int(rel.size), "underflow": int(np.count_nonzero(w.underflow)),
            "underflow_rounded": int(np.count_nonzero(w.underflow_rounded))}


def first_divergence(max_by_node, threshold: float):
    """Index of the first entry of ``max_by_node`` (per node: bits of error, or normwise
    ulps of the node's scale) that exceeds ``threshold``, or None."""
    for i, b in enumerate(max_by_node):
        if b is not None and not np.isnan(b) and b > threshold:
            return i
    return None
