"""``scalarlab libm``: how far from correctly rounded are the math libraries people call?

For each (library, function, format) the audit evaluates the library on a set of format
values (all of them, or a sample) and compares with the correctly rounded result:

* the reference for binary32, binary16 and bfloat16 is the lab's binary context of that
  format, which rounds every FPCore function correctly (float64 evaluation, MPFR where the
  float64 value cannot decide the rounding); bit patterns are compared, so the fast check is
  one vectorised comparison per input;
* for binary64 the reference is MPFR itself (gmpy2 in the format's context), per sample;
* where the library's result differs, its error in ulps *of the exact result* is first
  estimated from the lab's float64 evaluator (accurate to ~2^-28 binary32 ulps), and the
  worst candidates are recomputed with MPFR at ``p + 40`` bits: the reported figure is
  MPFR's (Zimmermann's convention: 0.5 means correctly rounded at worst);
* special-value disagreements (NaN, +-inf, signed zero, underflow to zero) are listed in a
  separate table and kept out of the ulp figure.

Exhaustive runs walk the format's values in order (ordinals) in chunks; chunks run in
local processes and every finished chunk is recorded in a resume file written atomically,
so an interrupted run continues where it stopped.  Sampled runs (binary64 in particular)
draw ordinals uniformly, i.e. uniformly over exponents, then search around the worst
points; their figure is a lower bound and labelled so.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import json
import math
import os
import platform
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import gmpy2
import numpy as np
import pandas as pd

from scalarlab import scalars
from scalarlab.scalars import formats as F
from scalarlab.scalars.functions import FUNCTIONS

from . import outputs, tables
from .defaults import LIBM_DEFAULT_FUNCS as DEFAULT_FUNCS
from .defaults import LIBM_FORMATS as FORMATS
from .defaults import LIBM_LIBRARIES as LIBRARIES
from .errors import ExperimentError


def _fast():
    """The compiled passes (libm_fast imports Numba: only when a run scores results, so
    that `scalarlab libm --help` does not load it)."""
    from . import libm_fast
    return libm_fast


#: Extra precision of the MPFR value an error figure is computed from: the figure's
#: relative error is then ~2^-40, far below the two decimals printed.
GUARD_BITS = 40
#: Chunk of an exhaustive binary32 run (2^32 / 2^22 = 1024 chunks).
CHUNK = 1 << 22
#: A chunk is scored in blocks of this many inputs.  A block's arrays (1 MB in binary32,
#: 2 MB in float64) are reused from malloc's heap block after block; a whole chunk's
#: (16 and 32 MB) were fresh pages from the kernel each time, and their page faults were
#: over half of the chunk's CPU (exhaustive numpy exp: 61.5 s user + 73.7 s system in
#: 2^22 blocks at load 7-10; 12 such chunks 1.2-1.3 s user + 1.5-1.8 s system, in 2^18
#: blocks 0.5-0.6 s user and no system time).
BLOCK = 1 << 18
#: Per chunk, this many worst candidates (by the float64 estimate) are recomputed in MPFR.
CANDIDATES = 8
#: Bins of the error-vs-input envelope over the run's inputs (by ordinal) for the plot.
BINS = 2048
#: An exhaustive run rewrites its resume file at most this often (seconds), and when it
#: ends or is interrupted: the file stays small and a killed run loses seconds of work.
RESUME_EVERY = 5.0
#: Chunks per Dask task at most.  Each task cost the cluster 10-16 ms of CPU (scheduler,
#: client, the worker's bookkeeping) and a chunk of exhaustive exp now costs 30 ms on
#: average: with one chunk per task the run spent 1.30-1.43x the processes' CPU.
DASK_CHUNKS_PER_TASK = 8
#: Special-value examples kept per (library, function, kind).
EXAMPLES = 3

_NUMPY_NAMES = {"atan": "arctan", "asin": "arcsin", "acos": "arccos", "asinh": "arcsinh",
                "acosh": "arccosh", "atanh": "arctanh"}
_TORCH_ONLY = {"erf", "erfc", "lgamma", "sigmoid"}
_LIBM_NAMES = {"round": "round", "nearbyint": "nearbyint", "tgamma": "tgamma"}


# ---------------------------------------------------------------------- formats, ordinals
def _carrier(fmt: str):
    """numpy dtype that holds the format's values exactly (bfloat16 inside float32)."""
    return {"binary32": np.float32, "binary64": np.float64, "binary16": np.float16,
            "bfloat16": np.float32}[fmt]


def _nbits(fmt: str) -> int:
    return {"binary32": 32, "binary64": 64, "binary16": 16, "bfloat16": 16}[fmt]


def ordinal_range(fmt: str) -> tuple[int, int]:
    """(lo, hi) ordinals of -inf and +inf: ordinal 0 is +0, n > 0 the n-th value above it,
    -n the n-th below -0 (so -0 is not an ordinal of its own; it is added as a special)."""
    top = {32: 0x7F800000, 64: 0x7FF0000000000000, 16: 0x7C00}[_nbits(fmt)]
    if fmt == "bfloat16":
        top = 0x7F80
    return -top, top


def from_ordinals(fmt: str, ords: np.ndarray) -> np.ndarray:
    """The format values (in the carrier dtype) at the given ordinals."""
    o = np.asarray(ords, dtype=np.int64)
    mag = np.abs(o).astype(np.uint64)
    sign = np.where(o < 0, np.uint64(1), np.uint64(0))
    n = _nbits(fmt)
    bits = (sign << np.uint64(n - 1)) | mag
    if fmt == "binary64":
        return bits.view(np.float64)
    if fmt == "binary32":
        return bits.astype(np.uint32).view(np.float32)
    if fmt == "binary16":
        return bits.astype(np.uint16).view(np.float16)
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def ordinal_span(fmt: str, a: int, b: int) -> np.ndarray:
    """``from_ordinals(fmt, arange(a, b))`` built from bit-pattern ranges: the ordinals of
    one sign are consecutive bit patterns (3x faster than the int64 round trip, which
    took a quarter of an exhaustive chunk)."""
    n = _nbits(fmt)
    ut = {64: np.uint64, 32: np.uint32, 16: np.uint16}[n]
    sign = 1 << (n - 1)
    parts = []
    if a < 0:          # ordinals a .. min(b, 0) - 1: magnitudes -a down to -(min(b,0) - 1)
        top = min(b, 0)
        parts.append(np.arange(sign - a, sign - top, -1, dtype=np.uint64).astype(ut)
                     if n == 64 else
                     (np.arange(-a, -top, -1, dtype=ut) | ut(sign)))
    if b > 0:
        parts.append(np.arange(max(a, 0), b, dtype=ut))
    bits = parts[0] if len(parts) == 1 else np.concatenate(parts)
    if fmt == "bfloat16":
        return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)
    return bits.view(_carrier(fmt))


def to_ordinals(fmt: str, x) -> np.ndarray:
    """Inverse of :func:`from_ordinals` (-0 maps to 0)."""
    x = np.asarray(x, dtype=_carrier(fmt))
    if fmt == "binary64":
        b = x.view(np.uint64).astype(np.uint64)
    elif fmt == "binary16":
        b = x.view(np.uint16).astype(np.uint64)
    elif fmt == "binary32":
        b = x.view(np.uint32).astype(np.uint64)
    else:
        b = (x.view(np.uint32) >> np.uint32(16)).astype(np.uint64)
    n = _nbits(fmt)
    mag = (b & np.uint64((1 << (n - 1)) - 1)).astype(np.int64)
    return np.where((b >> np.uint64(n - 1)) != 0, -mag, mag)


def special_inputs(fmt: str) -> np.ndarray:
    """Inputs every run includes: signed zeros, infinities, NaN, +-1, the subnormal and
    overflow ends (C99 Annex F's cases)."""
    lo, hi = ordinal_range(fmt)
    ext = from_ordinals(fmt, np.array([1, hi - 1, -1, lo + 1]))
    base = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0])
    return np.concatenate([base.astype(_carrier(fmt)), ext])


# ----------------------------------------------------------------------------- libraries
def numpy_simd() -> str:
    """The SIMD targets numpy's dispatcher uses on this CPU (baseline + best dispatched)."""
    try:
        m = np._core._multiarray_umath
        on = [t for t in m.__cpu_dispatch__ if m.__cpu_features__.get(t)]
        return f"baseline {' '.join(m.__cpu_baseline__)}; dispatched {' '.join(on) or 'none'}"
    except AttributeError:  # pragma: no cover - older numpy layout
        return "unknown"


def glibc_version() -> str:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not glibc
        return "unknown"


def provenance() -> dict:
    """Versions and CPU facts the figures depend on."""
    meta = {"glibc": glibc_version(), "numpy": np.__version__, "numpy_simd": numpy_simd(),
            "machine": platform.machine(), "processor": platform.processor()}
    try:
        import torch
        meta["torch"] = torch.__version__
        meta["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    except ImportError:  # pragma: no cover
        pass
    return meta


_LIBM = None
_LIBM_KERNELS: dict = {}


def _libm_kernel(name: str, fmt: str):
    """A compiled loop calling the C library's ``name`` (``expf`` or ``exp``) per element:
    Numba calls a ctypes function pointer natively, ~100x faster than a Python loop."""
    global _LIBM
    key = (name, fmt)
    if key in _LIBM_KERNELS:
        return _LIBM_KERNELS[key]
    import numba
    if _LIBM is None:
        _LIBM = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
    cname = name + ("f" if fmt == "binary32" else "")
    try:
        fn = getattr(_LIBM, cname)
    except AttributeError:
        raise ExperimentError(f"libm: the C library has no {cname}") from None
    t = ctypes.c_float if fmt == "binary32" else ctypes.c_double
    fn.argtypes, fn.restype = [t], t

    @numba.njit
    def loop(x, out):  # pragma: no cover - compiled
        for i in range(x.size):
            out[i] = fn(x[i])

    def call(x):
        out = np.empty_like(x)
        loop(x, out)
        return out
    _LIBM_KERNELS[key] = call
    return call


#: Libraries registered at run time (:func:`register_library`): name -> {(func, fmt): fn}.
CUSTOM: dict = {}


def register_library(name: str, functions: dict) -> None:
    """Audit your own implementation: ``functions`` maps ``(func, fmt)`` to ``x -> y`` on
    the format's carrier arrays (float32 for binary32 and bfloat16, float16, float64).
    Chunks run in this process only (``workers=1``): worker processes start clean."""
    if name in LIBRARIES:
        raise ExperimentError(f"libm: {name!r} is a built-in library name")
    CUSTOM[name] = dict(functions)


def library_function(lib: str, func: str, fmt: str):
    """``x -> y`` for one library's ``func`` on carrier arrays of ``fmt``, or None when the
    library has no such function or format (the row is then left out, with a note)."""
    if lib in CUSTOM:
        return CUSTOM[lib].get((func, fmt))
    if lib == "lab":
        ctx = scalars.get("float64" if fmt == "binary64" else fmt)
        f = getattr(ctx, func)
        dt = _carrier(fmt)
        return lambda x: np.asarray(ctx.to_float64(f(ctx.convert(x.astype(np.float64)))),
                                    dtype=np.float64).astype(dt)
    if lib == "numpy":
        if fmt == "bfloat16" or func in _TORCH_ONLY:
            return None
        f = getattr(np, _NUMPY_NAMES.get(func, func), None)
        if f is None or not isinstance(f, np.ufunc):
            return None
        return f
    if lib == "torch":
        import torch
        f = getattr(torch, func, None) or getattr(torch.special, func, None)
        if func == "softplus":
            f = torch.nn.functional.softplus
        if f is None:
            return None
        tdt = {"binary32": torch.float32, "binary64": torch.float64,
               "binary16": torch.float16, "bfloat16": torch.bfloat16}[fmt]

        def call(x):
            t = torch.from_numpy(np.ascontiguousarray(x)).to(tdt)  # exact: x is in fmt
            with torch.no_grad():
                y = f(t)
            return y.to(torch.float32 if fmt == "bfloat16" else tdt).numpy()
        return call
    if lib == "libm":
        if fmt not in ("binary32", "binary64") or func in ("sigmoid", "softplus", "digamma"):
            return None
        try:
            return _libm_kernel(_LIBM_NAMES.get(func, func), fmt)
        except ExperimentError:
            return None
    if lib == "jax":
        try:
            import jax.numpy as jnp
        except ImportError:
            return None
        f = getattr(jnp, _NUMPY_NAMES.get(func, func), None)
        if f is None or fmt == "binary64":
            return None
        jdt = {"binary32": jnp.float32, "binary16": jnp.float16,
               "bfloat16": jnp.bfloat16}[fmt]
        return lambda x: np.asarray(f(jnp.asarray(x, dtype=jdt)).astype(jnp.float32)) \
            .astype(_carrier(fmt))
    if lib == "cuda":
        return None          # see _why_missing: no GPU to audit it on
    raise ExperimentError(f"libm: unknown library {lib!r}; known: {', '.join(LIBRARIES)}")


def _why_missing(lib: str) -> str:
    """The reason a whole library is left out, for the "not available" note ("" when the
    library is there and merely lacks the function or format)."""
    if lib == "cuda":
        return ("the CUDA audit (libdevice, fast intrinsics) needs a GPU and none was lent "
                "to write and test it; the numba-cuda simulator's libdevice gives NaN, so "
                "it is not audited")
    if lib == "jax":
        try:
            import jax  # noqa: F401
        except ImportError:
            return "jax is not installed: pip install jax"
    return ""


# ----------------------------------------------------------------------------- reference
def _reference_all(func: str, fmt: str, x: np.ndarray) -> np.ndarray:
    """Correctly rounded ``func(x)``, every element evaluated: the lab's binary context
    (binary32, binary16, bfloat16) or MPFR one by one (binary64)."""
    if fmt == "binary64":
        gctx = F.gmpy2_context(F.get(fmt))
        fn = FUNCTIONS[func]
        out = np.empty(x.shape, dtype=np.float64)
        for i, v in enumerate(x.tolist()):
            out[i] = _mpfr_round(fn, v, gctx)
        return out
    ctx = scalars.get(fmt)
    with np.errstate(all="ignore"):
        y = ctx.to_float64(getattr(ctx, func)(ctx.convert(x.astype(np.float64))))
    return np.asarray(y, dtype=np.float64).astype(_carrier(fmt))


_TAILS: dict = {}


def saturated_tails(func: str, fmt: str) -> list:
    """``[(lo_ordinal, hi_ordinal, value)]``: finite inputs whose correctly rounded
    result is ``value`` without evaluation (exp >= 88.72 is +inf, exp <= -103.97 is 0,
    tanh >= 9.01 is 1, ...), found once per process by bisection on the correctly rounded
    result (libm_fast.saturation); empty for functions not monotone on each half line."""
    key = (func, fmt)
    if key not in _TAILS:
        fn = FUNCTIONS[func]
        halves = fn.monotone is not None or func in _fast().HALF_MONOTONE
        top = ordinal_range(fmt)[1]
        _TAILS[key] = _fast().saturation(
            lambda o: _reference_all(func, fmt, from_ordinals(fmt, o)), top, halves)
    return _TAILS[key]


def reference(func: str, fmt: str, x: np.ndarray, first: int | None = None) -> np.ndarray:
    """Correctly rounded ``func(x)`` in ``fmt`` (carrier dtype).  Inputs in a saturated
    tail take its value; the rest are evaluated.  ``first``: x holds the consecutive
    ordinals first, first + 1, ... (an exhaustive chunk: the tails are slices)."""
    x = np.asarray(x)
    tails = saturated_tails(func, fmt) if x.ndim == 1 and x.size > 64 else []
    if not tails:
        return _reference_all(func, fmt, x)
    out = np.empty(x.shape, dtype=_carrier(fmt))
    rest = np.ones(x.shape, dtype=bool)
    for a, b, v in tails:
        if first is not None:
            s0, s1 = max(a - first, 0), min(b - first + 1, x.size)
            if s0 < s1:
                out[s0:s1] = v
                rest[s0:s1] = False
        else:
            xa, xb = from_ordinals(fmt, np.array([a, b]))
            m = (x >= xa) & (x <= xb)
            out[m] = v
            rest &= ~m
    if rest.all():
        return _reference_all(func, fmt, x)
    if rest.any():
        out[rest] = _reference_all(func, fmt, x[rest])
    return out


def _mpfr_round(fn, v: float, gctx) -> float:
    """One correctly rounded binary64 value through MPFR (Ziv's loop via the bounds)."""
    if fn.mpfr is not None and fn.mpfr != "rint":
        with gmpy2.context(gctx) as c:
            r = getattr(c, fn.mpfr)(gmpy2.mpfr(v))
            return float(c.check_range(r)) if not gmpy2.is_nan(r) else math.nan
    prec = 100
    while prec < 1 << 14:
        lo, hi = fn.bounds(gmpy2.mpfr(v, 53), prec)
        with gmpy2.context(gctx) as c:
            a, b = c.check_range(c.add(lo, 0)), c.check_range(c.add(hi, 0))
        if a == b or (gmpy2.is_nan(a) and gmpy2.is_nan(b)):
            return float(a)
        prec *= 2
    raise ExperimentError(f"libm: MPFR could not round {fn.name}({v!r}) in binary64")


def exact_ulps(func: str, fmt: str, x: float, y: float) -> float:
    """|y - f(x)| / ulp(f(x)) with f(x) from MPFR at p + GUARD_BITS bits, ulp the format's
    at the exact value (the subnormal ulp below the normal range; the largest binade's ulp
    above it)."""
    f = F.get(fmt)
    p = f.precision
    fn = FUNCTIONS[func]
    lo, hi = fn.bounds(gmpy2.mpfr(float(x), 53), p + GUARD_BITS)
    with gmpy2.context(precision=p + GUARD_BITS + 8):
        ex = (lo + hi) / 2
        if not gmpy2.is_finite(ex):
            return math.inf
        e = f.emin if ex == 0 else int(gmpy2.floor(gmpy2.log2(abs(ex))))
        e = min(max(e, f.emin), f.emax)
        ulp = gmpy2.mpfr(2) ** (e - p + 1)
        return float(abs(gmpy2.mpfr(float(y)) - ex) / ulp)


def _estimate_ulps(func: str, fmt: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Float64 estimate of :func:`exact_ulps` (lab's float64 evaluator, a few float64 ulps:
    good to ~2^-28 ulps of a 24-bit format), used to pick the candidates MPFR settles."""
    with np.errstate(all="ignore"):
        ex = FUNCTIONS[func].eval_f64(np.asarray(x).astype(np.float64))
    return _fast().errors(np.asarray(y), ex, F.get(fmt))


# ------------------------------------------------------------------------- classification
#: Special-value disagreement kinds, by code (0: none, scored in ulps).
KINDS = ("nan", "overflow/inf", "signed zero", "underflow to zero")


def check_block(lib: str, func: str, fmt: str, x: np.ndarray, ref=None, *,
                first: int | None = None, span=None) -> dict:
    """Score one library on the inputs ``x``: counts, worst candidates (float64 estimate;
    MPFR for binary64), special-value disagreements (kind: [count, examples...]) and the
    error envelope for the plot ({bin: [x, err]}, BINS bins over the ordinal ``span``,
    default the whole format).  ``first``: x holds consecutive ordinals from ``first``."""
    call = library_function(lib, func, fmt)
    x = np.asarray(x)
    with np.errstate(all="ignore"):
        y = np.asarray(call(x)).astype(_carrier(fmt), copy=False)
    r = reference(func, fmt, x, first) if ref is None else ref
    idx, kinds = _fast().compare(y, r, F.get(fmt).min_normal, EXAMPLES)
    out = {"n": int(x.size), "not_cr": int(idx.size), "special": {}, "cands": [],
           "curve": {}}
    for code, (count, where) in kinds.items():
        out["special"][KINDS[code - 1]] = [count] + [
            [float(x[i]), float(y[i]), float(r[i])] for i in where]
    if idx.size:
        xs, ys = x[idx], y[idx]
        if fmt == "binary64":
            err = np.array([exact_ulps(func, fmt, a, b)
                            for a, b in zip(xs.tolist(), ys.tolist())])
        else:
            err = _estimate_ulps(func, fmt, xs, ys)
        ords = first + idx if first is not None else to_ordinals(fmt, xs)
        lo, hi = ordinal_range(fmt) if span is None else span
        top, at, bins = _fast().bin_top(err, ords, lo, hi, BINS, CANDIDATES)
        out["cands"] = [[float(xs[j]), float(ys[j]), float(e)] for e, j in zip(top, at)]
        out["curve"] = {str(b): [float(xs[j]), float(err[j])] for b, j in bins.items()}
    return out


# ------------------------------------------------------------------------- chunked runs
def _thread_cpu() -> tuple:
    """(user, system) CPU seconds of the calling thread (the process's where Linux's
    per-thread figure is missing): a Dask worker's task thread, not its event loop."""
    try:
        import resource
    except ImportError:                  # pragma: no cover - not Unix: no split
        return time.thread_time(), 0.0
    who = getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)
    r = resource.getrusage(who)
    return r.ru_utime, r.ru_stime


def _chunk_task(task):
    """One chunk of an exhaustive run: ordinals [a, b) of every audited pair; ``span``
    is the run's ordinal range (the plot's bins).  Returns ``(span, scores, cpu)``,
    ``cpu`` the (user, system) seconds the chunk took in its thread: the runners'
    overheads are what the run's CPU has beyond their sum (bench/libm_exhaustive.py)."""
    u0, s0 = _thread_cpu()
    span_, scores = _chunk_scores(task)
    u1, s1 = _thread_cpu()
    return span_, scores, (u1 - u0, s1 - s0)


def _chunk_scores(task):
    libs, funcs, fmt, a, b, span = task
    if b - a <= BLOCK:
        return (a, b), _block_scores(libs, funcs, fmt, a, b, span)
    res: dict = {}
    for c in range(a, b, BLOCK):     # in order: ties keep the first input, as in one block
        _merge(res, _block_scores(libs, funcs, fmt, c, min(c + BLOCK, b), span))
    return (a, b), res


def _block_scores(libs, funcs, fmt, a, b, span):
    x = ordinal_span(fmt, a, b)
    res = {}
    for func in funcs:
        ref = reference(func, fmt, x, a)
        for lib in libs:
            if library_function(lib, func, fmt) is not None:
                res[f"{lib}|{func}"] = check_block(lib, func, fmt, x, ref, first=a,
                                                   span=span)
    return res


def _dask_chunks(shared, spans):
    """A Dask task: consecutive chunks (the run's libraries, functions, format and span
    shared), one ``_chunk_task`` result each."""
    libs, funcs, fmt, span = shared
    return [_chunk_task((libs, funcs, fmt, a, b, tuple(span))) for a, b in spans]


def _merge(total: dict, part: dict) -> None:
    for key, r in part.items():
        t = total.setdefault(key, {"n": 0, "not_cr": 0, "special": {}, "cands": [],
                                   "curve": {}})
        t["n"] += r["n"]
        t["not_cr"] += r["not_cr"]
        for k, v in r["special"].items():
            s = t["special"].setdefault(k, [0])
            s[0] += v[0]
            s.extend(v[1:][:EXAMPLES + 1 - len(s)])
        t["cands"] = sorted(t["cands"] + r["cands"], key=lambda c: -c[2])[:CANDIDATES]
        for b, pt in r["curve"].items():    # the worst per bin; the first on ties
            if b not in t["curve"] or pt[1] > t["curve"][b][1]:
                t["curve"][b] = pt


def _chunks(fmt: str, lo: int, hi: int, size: int):
    return [(a, min(a + size, hi + 1)) for a in range(lo, hi + 1, size)]


def _ranges(indices) -> list:
    """Sorted chunk indices as compact [first, last] runs (the resume file's record)."""
    out: list = []
    for i in sorted(indices):
        if out and out[-1][1] == i - 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


def _run_exhaustive(libs, funcs, fmt, lo, hi, *, workers, resume, quiet, chunk,
                    scheduler=None, dask=False, connect_timeout=10.0, timing=None):
    spans = _chunks(fmt, lo, hi, chunk)
    total: dict = {}
    done: set = set()
    key = {"libs": libs, "funcs": funcs, "format": fmt, "range": [lo, hi], "chunk": chunk}
    if resume is not None and Path(resume).exists():
        try:
            saved = json.loads(Path(resume).read_text())
            if saved.get("key") == key:
                total = saved["total"]
                done = {i for a, b in saved["done"] for i in range(a, b + 1)}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ExperimentError(f"--resume {resume}: unreadable ({exc})") from None
        if saved.get("key") != key:
            raise ExperimentError(f"--resume {resume}: recorded for another run "
                                  f"({saved.get('key')}); use a new file")
    todo = [i for i in range(len(spans)) if i not in done]
    index = {tuple(spans[i]): i for i in todo}
    last_write = [time.monotonic()]
    unsaved = [False]

    def save():
        # only what this run added: a run that failed before its first chunk writes nothing
        if resume is not None and unsaved[0]:
            outputs.write_text(resume, json.dumps({"key": key, "done": _ranges(done),
                                                   "total": total}), flag="--resume")
            last_write[0], unsaved[0] = time.monotonic(), False

    def record(span, part, cpu=None):
        _merge(total, part)
        if cpu is not None and timing is not None:
            # CPU of the chunks themselves, in their threads (user, system)
            c = timing.setdefault("chunks_cpu_s", [0.0, 0.0])
            c[0], c[1] = c[0] + cpu[0], c[1] + cpu[1]
        done.add(index[tuple(span)])
        unsaved[0] = True
        if time.monotonic() - last_write[0] >= RESUME_EVERY:
            save()

    bar = tables.progress(total=len(spans), desc="libm chunks", quiet=quiet)
    bar.update(len(spans) - len(todo))
    tasks = [(libs, funcs, fmt, *spans[i], (lo, hi)) for i in todo]
    try:
        if tasks and (scheduler is not None or dask):
            _run_dask(tasks, record, bar, scheduler=scheduler, workers=workers,
                      timeout=connect_timeout, timing=timing)
        elif workers <= 1 or len(tasks) <= 1:
            for t in tasks:
                record(*_chunk_task(t))
                bar.update(1)
        else:
            _run_processes(tasks, record, bar, workers)
    finally:
        save()                     # what finished is kept, however the run ended
        bar.close()
    return total


def _worker_modules(libs) -> list:
    """The modules a chunk needs, imported once by the forkserver that forks the workers
    (process pool and local Dask cluster alike): otherwise every worker imports numpy,
    pandas, Numba and torch itself, about 3-6 s of CPU each before its first chunk."""
    # libm_worker fixes malloc's thresholds in the forkserver, so that the workers keep
    # the memory of one block for the next (no page faults: see that module)
    mods = [__name__, f"{__package__}.libm_fast", f"{__package__}.libm_worker"]
    return mods + (["torch"] if "torch" in libs else [])


def _forkserver(modules):
    """The forkserver context, its preload set to ``modules`` (effective when this process
    starts its forkserver; a running one keeps what it loaded).  forkserver, not fork: a
    child forked from a process whose torch/OpenMP threads hold locks can hang forever;
    the forkserver only imports, and forks the workers before any of them computes."""
    import multiprocessing
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(list(modules))
    return ctx


def _run_processes(tasks, record, bar, workers):
    pool = ProcessPoolExecutor(max_workers=workers,
                               mp_context=_forkserver(_worker_modules(tasks[0][0])))
    try:
        for res in pool.map(_chunk_task, tasks):
            record(*res)
            bar.update(1)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)   # Ctrl-C: don't finish the queue
        raise
    pool.shutdown()


def _run_dask(tasks, record, bar, *, scheduler, workers, timeout, timing=None):
    """Chunks on a Dask cluster (``scheduler``) or a local one of ``workers`` processes;
    each finished chunk is recorded as it arrives (the resume file sees it during the
    run).  ``timing`` receives the seconds to start and to close the cluster."""
    import dask
    import distributed  # noqa: F401  (its config defaults load first; set() below adds to them)
    from . import dask_cluster
    libs, funcs, fmt = tasks[0][:3]
    shared = (libs, funcs, fmt, list(tasks[0][5]))
    # the workers' statistical profiler samples every thread each 10 ms: a few percent of
    # a compute-bound chunk, which nobody reads here (a local cluster inherits this)
    conf = {"distributed.worker.profile.enabled": False}
    if scheduler is None:
        # a local cluster's nannies start their workers by spawn by default: each worker
        # is a fresh interpreter importing distributed, then numpy, Numba, torch and the
        # lab on its first chunk, and closing waits for them (2-3 s).  From a forkserver
        # that imported all of it once, the workers start ready and close at once.
        from distributed.utils import get_mp_context
        conf["distributed.worker.multiprocessing-method"] = "forkserver"
        # housekeeping of a cluster whose tasks are equal, long and CPU-bound: the
        # event-loop tick (20 ms), system monitor (0.5 s) and memory monitor (0.1 s)
        # polled less often
        conf.update({"distributed.admin.tick.interval": "1s",
                     "distributed.admin.system-monitor.interval": "5s",
                     "distributed.worker.memory.monitor-interval": "1s"})
        # Dask's nannies put MALLOC_TRIM_THRESHOLD_=65536 in the workers' environment
        # (to hand memory back to the OS).  Setting it also fixes glibc's mmap threshold
        # at 128 kB, so every block's 1-2 MB arrays became fresh pages from the kernel:
        # 12 chunks of exhaustive exp cost 1.5 s user + 1.5 s system with it, 0.6 s user
        # and no system time without (blocks of 2^18, libm_audit.BLOCK).  The workers
        # keep the single-thread settings.
        conf["distributed.nanny.pre-spawn-environ"] = {
            k: v for k, v in dask.config.get("distributed.nanny.pre-spawn-environ").items()
            if k != "MALLOC_TRIM_THRESHOLD_"}
        with dask.config.set(conf):
            get_mp_context()           # Dask sets its own preload once; ours replaces it
        _forkserver(["distributed", *_worker_modules(libs)])
    t0 = time.perf_counter()
    with dask.config.set(conf), \
            dask_cluster.client_for(scheduler=scheduler, workers=workers,
                                    timeout=timeout) as (client, where):
        t1 = time.perf_counter()
        # the shared arguments (a few hundred bytes) ride in every task: as a task of
        # their own they lived on one worker and every chunk depended on them, so the
        # scheduler put the chunks there and only work stealing fed the other worker
        # (exhaustive exp: with stealing off one core busy, 2.25x the two processes'
        # wall time; with it 1.63x)
        # several chunks per task while every thread still gets 8 tasks or more
        try:
            threads = max(sum(client.nthreads().values()), 1)
        except Exception:                   # noqa: BLE001 -- run_tasks names the fault
            threads = 1
        per = max(1, min(DASK_CHUNKS_PER_TASK, len(tasks) // (8 * threads)))
        groups = [[(t[3], t[4]) for t in tasks[i:i + per]]
                  for i in range(0, len(tasks), per)]

        def got(i, results):
            for res in results:
                record(*res)
            bar.update(len(results))
        dask_cluster.run_tasks(client, where, _dask_chunks, shared, [(g,) for g in groups],
                               wait_for_worker=timeout, inline_shared=True, on_result=got)
        t2 = time.perf_counter()
    if timing is not None:
        timing.update(cluster_start_s=round(t1 - t0, 2),
                      cluster_close_s=round(time.perf_counter() - t2, 2))


def _run_sampled(libs, funcs, fmt, lo, hi, *, samples, search, seed, specials):
    rng = np.random.default_rng(seed)
    # sorted, so that the error envelope of check_block runs along the input axis
    ords = np.sort(rng.integers(lo, hi + 1, size=samples))
    x = from_ordinals(fmt, ords)
    if specials:
        x = np.concatenate([special_inputs(fmt), x])
    total: dict = {}
    for func in funcs:
        ref = reference(func, fmt, x)
        for lib in libs:
            if library_function(lib, func, fmt) is not None:
                _merge(total, {f"{lib}|{func}": check_block(lib, func, fmt, x, ref,
                                                            span=(lo, hi))})
    if search:
        # local search (Zimmermann's black-box idea): around each worst point, try values
        # at ordinal distances 2^k, k shrinking, keeping any worse point found
        for key, t in total.items():
            lib, func = key.split("|")
            for _ in range(search):
                if not t["cands"]:
                    break
                centres = to_ordinals(fmt, np.array([c[0] for c in t["cands"][:4]],
                                                    dtype=_carrier(fmt)))
                near = np.concatenate([c + rng.integers(-(1 << k), (1 << k) + 1, size=16)
                                       for c in centres for k in range(0, 20, 3)])
                near = np.clip(near, lo, hi)
                _merge(total, {key: check_block(lib, func, fmt, from_ordinals(fmt, near),
                                                span=(lo, hi))})
                t = total[key]
    return total


# --------------------------------------------------------------------------------- audit
def _parse_range(rng, fmt):
    lo, hi = ordinal_range(fmt)
    if rng is None:
        return lo, hi
    a, b = rng
    if not a <= b:
        raise ExperimentError(f"--range {a}:{b}: empty (LO must not exceed HI)")
    dt = _carrier(fmt)
    with np.errstate(all="ignore"):
        fa = dt(a) if fmt != "bfloat16" else _round_bf16(a)
        fb = dt(b) if fmt != "bfloat16" else _round_bf16(b)
    oa, ob = int(to_ordinals(fmt, np.array([fa]))[0]), int(to_ordinals(fmt, np.array([fb]))[0])
    # keep inside the range: a rounded endpoint outside it moves one value inwards
    if float(fa) < a:
        oa += 1
    if float(fb) > b:
        ob -= 1
    if oa > ob:
        raise ExperimentError(f"--range {a!r}:{b!r}: no {fmt} value in it (the nearest are "
                              f"{float(fa)!r} and {float(fb)!r})")
    return max(oa, lo), min(ob, hi)


def _round_bf16(v: float) -> np.float32:
    return np.float32(F.round_to_format(np.array([v]), F.get("bfloat16"))[0])


def libm_audit(funcs=DEFAULT_FUNCS, libs=("numpy", "torch", "libm"), fmt="binary32", *,
               exhaustive=False, samples=100_000, search=0, range=None, seed=0,
               workers=1, resume=None, quiet=True, chunk=CHUNK, scheduler=None, dask=False,
               connect_timeout=10.0) -> pd.DataFrame:
    """Audit ``libs``' ``funcs`` in ``fmt`` against the correctly rounded result.

    Returns one row per (library, function) that exists: ``max_ulps`` (MPFR figure, two
    decimals, 0.5 = correctly rounded), ``worst_input``, ``not_cr`` and ``not_cr_frac``,
    ``special`` (count of Annex F disagreements, not in the ulp figure), ``bound``
    (``exact`` for exhaustive runs, ``lower bound`` for sampled ones).  ``df.attrs`` holds
    ``specials`` (one row per disagreement kind with examples), ``curves`` (error vs input
    envelopes for :func:`plot_errors`), ``skipped`` and ``meta``.  Exhaustive chunks run
    in ``workers`` local processes, on a local Dask cluster of ``workers`` processes
    (``dask=True``) or on the Dask scheduler at ``scheduler``.
    """
    if fmt not in FORMATS:
        raise ExperimentError(f"libm: unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    funcs = list(funcs)
    for f in funcs:
        if f not in FUNCTIONS or not FUNCTIONS[f].op:
            raise ExperimentError(f"libm: unknown function {f!r}; known: "
                                  f"{', '.join(n for n, v in FUNCTIONS.items() if v.op)}")
    for lib in libs:
        if lib not in LIBRARIES and lib not in CUSTOM:
            raise ExperimentError(f"libm: unknown library {lib!r}; known: "
                                  f"{', '.join((*LIBRARIES, *CUSTOM))}")
    if (workers > 1 or scheduler or dask) and any(lib in CUSTOM for lib in libs):
        raise ExperimentError("libm: registered libraries run in this process only; "
                              "use workers=1 without Dask")
    if (scheduler or dask) and not exhaustive:
        raise ExperimentError("libm: Dask (--scheduler, --dask) runs the chunks of "
                              "--exhaustive runs; a sampled run is one process")
    if exhaustive and fmt == "binary64":
        raise ExperimentError("libm: binary64 has 2^64 inputs; use --samples N --search")
    pairs, skipped = [], []
    for lib in libs:
        why = _why_missing(lib)
        for func in funcs:
            if library_function(lib, func, fmt) is None:
                skipped.append(f"{lib} {func} {fmt}" + (f" ({why})" if why else ""))
            else:
                pairs.append((lib, func))
    use_libs = sorted({p[0] for p in pairs}, key=list(libs).index)
    lo, hi = _parse_range(range, fmt)
    t0 = time.perf_counter()
    timing: dict = {}
    if exhaustive:
        total = _run_exhaustive(use_libs, funcs, fmt, lo, hi, workers=workers,
                                resume=resume, quiet=quiet, chunk=chunk,
                                scheduler=scheduler, dask=dask,
                                connect_timeout=connect_timeout, timing=timing)
        if "chunks_cpu_s" in timing:
            timing["chunks_cpu_s"] = [round(v, 2) for v in timing["chunks_cpu_s"]]
        # the ordinals cover -0 only through +0: score the Annex F inputs as well (a run
        # restricted by a range keeps to it)
        if range is None:
            _merge(total, _special_total(use_libs, funcs, fmt))
    else:
        total = _run_sampled(use_libs, funcs, fmt, lo, hi, samples=samples, search=search,
                             seed=seed, specials=range is None)
    elapsed = time.perf_counter() - t0
    rows, specials, curves = [], [], {}
    for lib, func in pairs:
        t = total[f"{lib}|{func}"]
        worst, figure = None, 0.5 if t["n"] else math.nan
        for x, y, _ in t["cands"]:     # the candidates' figure, settled in MPFR
            e = exact_ulps(func, fmt, x, y)
            if e > figure or worst is None and e >= figure:
                worst, figure = x, e
        rows.append({"library": lib, "function": func, "format": fmt,
                     "max_ulps": round(figure, 2), "worst_input": worst,
                     "not_cr": t["not_cr"], "not_cr_frac": t["not_cr"] / max(t["n"], 1),
                     "special": sum(v[0] for v in t["special"].values()), "inputs": t["n"],
                     "bound": "exact" if exhaustive else "lower bound"})
        for k, v in t["special"].items():
            specials.append({"library": lib, "function": func, "format": fmt, "kind": k,
                             "count": v[0], "examples": "; ".join(
                                 f"f({a!r}) = {b!r}, expected {c!r}" for a, b, c in v[1:])})
        curves[f"{lib} {func}"] = sorted(t["curve"].values())
    df = pd.DataFrame(rows, columns=["library", "function", "format", "max_ulps",
                                     "worst_input", "not_cr", "not_cr_frac", "special",
                                     "inputs", "bound"])
    df.attrs["specials"] = pd.DataFrame(specials, columns=["library", "function", "format",
                                                           "kind", "count", "examples"])
    df.attrs["curves"] = curves
    df.attrs["skipped"] = skipped
    df.attrs["meta"] = {**provenance(), "format": fmt, "mode": "exhaustive" if exhaustive
                        else f"{samples} samples + {search} search rounds", "seed": seed,
                        "range_ordinals": [lo, hi], "seconds": round(elapsed, 3),
                        "execution": (f"dask scheduler {scheduler}" if scheduler else
                                      f"local dask, {workers} workers" if dask else
                                      f"{workers} processes"), **timing}
    return df


def _special_total(libs, funcs, fmt):
    x = special_inputs(fmt)
    out = {}
    for func in funcs:
        ref = reference(func, fmt, x)
        for lib in libs:
            if library_function(lib, func, fmt) is not None:
                r = check_block(lib, func, fmt, x, ref)
                r["n"] = r["not_cr"] = 0   # counted by the ordinal walk already (bar -0, NaN)
                r["cands"], r["curve"] = [], {}
                out[f"{lib}|{func}"] = r
    return out


def plot_errors(df: pd.DataFrame, func: str, path) -> Path:
    """Error in ulps against input for ``func``, one series per library (the worst error in
    each slice of the inputs: an envelope, not every point)."""
    fig, ax = tables.new_figure()
    drawn = False
    for key, pts in df.attrs["curves"].items():
        lib, f = key.split(" ")
        if f != func or not pts:
            continue
        a = np.array(pts)
        ax.plot(a[:, 0], a[:, 1], ".", ms=3, label=lib)
        drawn = True
    ax.axhline(0.5, color="grey", lw=0.8, ls="--")
    fmt = df["format"].iloc[0] if len(df) else ""
    # the envelope's bins are equal runs of format values, i.e. of binades: logarithmic in
    # |x| down to the smallest normal number, so that each binade gets the same width
    tiny = float(F.get(fmt).min_normal) if fmt in FORMATS else 1.0
    ax.set_xscale("symlog", linthresh=tiny, linscale=0.2)
    ax.set_xlabel("input x")
    ax.set_ylabel("error (ulps of the exact result)")
    ax.set_title(f"{func} in {fmt}: error vs input"
                 + ("" if drawn else " (every result correctly rounded)"))
    if drawn:
        ax.legend()
    return tables.save_figure(fig, path)
