"""The ``numba_cuda`` provider: capsule metadata (registered on import, no numba import)
and the binder that turns a capsule into a callable over binary32 context values.

Values of the ``binary32`` / ``binary32+fma`` contexts are float64 arrays holding binary32
numbers; they go to the device as float32 (exactly) and come back as float64 (exactly).
``interval:binary32`` values are ``Interval(lo, hi)`` of such arrays.

Availability is decided at bind time: numba-cuda must import, and either a CUDA device is
present or the simulator was requested with ``NUMBA_ENABLE_CUDASIM=1`` before numba was
first imported.  Nothing here falls back to the CPU on its own.
"""
from __future__ import annotations

import os
from typing import Optional

import numpy as np

from scalarlab.graph.plan import Capsule, PlanError, Provider, register_capsule, register_provider

from .orders import TREE_WIDTH

PROVIDER = "numba_cuda"
FLOAT_FMT = "binary32|binary32+fma"
INTERVAL_FMT = "interval:binary32"
NO_DEVICE = "no CUDA device; set NUMBA_ENABLE_CUDASIM=1 to use the simulator"

# (backend op, trust, reduction, note)
_FLOAT = [
    # "context": sequential in k, with fma exactly when the context's dot products use it
    ("linear", "checked", "context",
     "tiled GEMM + bias; sequential in k; fma per context (binary32 / binary32+fma)"),
    ("add", "checked", "n/a", ""),
    ("sub", "checked", "n/a", "one IEEE rounding: bit-identical"),
    ("mul", "checked", "n/a", ""),
    ("div", "checked", "n/a", "div.rn.f32, one IEEE rounding: bit-identical"),
    ("neg", "checked", "n/a", "sign flip, no rounding: bit-identical"),
    ("relu", "checked", "n/a", ""),
    ("exp", "sampled", "n/a", "device expf: <= 2 ulp, not correctly rounded"),
    ("tanh", "sampled", "n/a", "device tanhf: <= 2 ulp, not correctly rounded"),
    ("sigmoid", "sampled", "n/a", "1/(1+expf(-x)): <= 4 ulp, not correctly rounded"),
    ("reduce_sum", "checked", f"tree({TREE_WIDTH})",
     "bit-identical to its declared tree order, NOT to the sequential reference"),
    ("softmax", "sampled", "sequential", "device expf inside: ULP gaps"),
    ("layernorm", "checked", "sequential", "only + - * / sqrt: bit-identical"),
    # (p - t)^2 per entry and the final / n are the reference's roundings; the sum of the
    # squares is reduce_sum's tree: bit-identical to that order, NOT to the sequential one
    ("mse_loss", "checked", f"tree({TREE_WIDTH})",
     "squares summed in tree order, then / n: bit-identical to its declared order"),
]
_INTERVAL = [
    ("linear", "linear: outward-rounded float64 accumulation (TwoSum)"),
    ("add", "TwoSum + exact directed rounding"),
    ("relu", "exact"),
    ("tanh", "float64 tanh widened by 2^-44 relative, then outward"),
]

for _op, _trust, _red, _note in _FLOAT:
    register_capsule(Capsule(f"{PROVIDER}.{_op}", _op, PROVIDER, "cuda", trust=_trust,
                             vjp="tape", reduction=_red, fmt=FLOAT_FMT, note=_note))
for _op, _note in _INTERVAL:
    register_capsule(Capsule(f"{PROVIDER}.interval_{_op}", _op, PROVIDER, "cuda",
                             trust="checked", vjp="tape",
                             reduction="sequential" if _op == "linear" else "n/a",
                             fmt=INTERVAL_FMT, note=_note))


def availability() -> Optional[str]:
    """None when kernels can launch here, else why not."""
    try:
        from numba import config, cuda
    except ImportError as exc:   # pragma: no cover - numba is a core dependency
        return f"numba is not importable ({exc})"
    if not hasattr(cuda, "jit"):
        return "numba-cuda is not installed (pip install numba-cuda)"
    if config.ENABLE_CUDASIM:
        return None
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        return ("NUMBA_ENABLE_CUDASIM was set after numba was imported; set it before "
                "starting Python")
    try:
        ok = cuda.is_available()
    except Exception as exc:   # driver probing can raise CudaSupportError (an ImportError)
        return f"{NO_DEVICE} ({type(exc).__name__}: {exc})"
    return None if ok else NO_DEVICE


def simulated() -> bool:
    from numba import config
    return bool(config.ENABLE_CUDASIM)


# ----------------------------------------------------------------------------- values
def _as_f32(v, what: str) -> np.ndarray:
    a = np.asarray(v)
    if a.dtype == object or not np.issubdtype(a.dtype, np.floating):
        raise PlanError(f"{what}: numba_cuda needs binary32 values as float arrays, got "
                        f"dtype {a.dtype}")
    f = a.astype(np.float32)
    if not np.array_equal(f.astype(a.dtype), a, equal_nan=True):
        bad = np.flatnonzero(f.astype(a.dtype).reshape(-1) != a.reshape(-1))
        raise PlanError(f"{what}: value {float(a.reshape(-1)[bad[0]])!r} is not a binary32 number "
                        f"(the policy context must be binary32)")
    return f


def _back(a) -> np.ndarray:
    """A kernel's binary32 results as binary32 context values: float32 arrays (the
    context's storage, scalars.binary32_store)."""
    return np.asarray(a, dtype=np.float32)


def _launch(name: str, fn, *args):
    """Run a host launcher; a CUDA driver failure becomes the boundary error."""
    try:
        return fn(*args)
    except PlanError:
        raise
    except ImportError as exc:    # numba's CudaSupportError subclasses ImportError
        raise PlanError(f"{name}: {NO_DEVICE} ({type(exc).__name__}: {exc})") from None


def _axis(axis, rank: int) -> int:
    """A per-example axis attribute as a non-negative int.  The run validated the graph
    (check_shapes) before any kernel is called, so ``axis`` is an int in ``[-rank, rank)``."""
    return axis % rank if rank else 0


def _axes(axis, rank: int) -> tuple:
    """An axis attribute (int, list, or None = all axes) as sorted distinct axes."""
    if axis is None:
        return tuple(range(rank))
    items = axis if isinstance(axis, (list, tuple)) else [axis]
    return tuple(sorted({_axis(a, rank) for a in items}))


def _move_last(a: np.ndarray, axes: tuple):
    keep = [i for i in range(a.ndim) if i not in axes]
    t = np.transpose(a, keep + list(axes))
    return t, keep


# ----------------------------------------------------------------------------- binder
def _binder(capsule: Capsule, graph_op: str, ctx):
    from . import host

    what = f"{capsule.name} (op {graph_op})"
    is_interval = capsule.fmt == INTERVAL_FMT
    if is_interval != bool(ctx.is_interval):
        raise PlanError(f"bind: {capsule.name} computes in {capsule.fmt}, the run's context is "
                        f"{ctx.name}")
    if is_interval:
        return _interval_binder(capsule, graph_op, ctx, what)
    fma = bool(ctx.fma_dot)
    bop = capsule.op

    if bop == "linear":
        def run(args, attrs, nb):
            x, W, b = (_as_f32(v, what) for v in args)
            K = x.shape[-1]
            y = _launch(what, lambda: host.linear(x.reshape(-1, K), W.T, b, fma=fma))
            return _back(y.reshape(x.shape[:-1] + (W.shape[0],)))
        return run

    if bop in ("add", "sub", "mul", "div"):
        def run(args, attrs, nb):
            a, b = (_as_f32(v, what) for v in args)
            return _back(_launch(what, host.binary, bop, a, b))
        return run

    if bop in ("relu", "neg", "exp", "tanh", "sigmoid"):
        def run(args, attrs, nb):
            return _back(_launch(what, host.unary, bop, _as_f32(args[0], what)))
        return run

    if bop == "reduce_sum":
        def run(args, attrs, nb):
            x = _as_f32(args[0], what)
            r = x.ndim - nb
            if graph_op == "sum":
                axes, keepdims = tuple(range(r)), False
            else:
                axes, keepdims = _axes(attrs["axis"], r), attrs["keepdims"]
            if not axes:
                return _back(x)
            full = tuple(nb + a for a in axes)
            t, keep = _move_last(x, full)
            rest = t.shape[:len(keep)]
            n = int(np.prod(t.shape[len(keep):], dtype=np.int64))
            y = _launch(what, host.row_sum, t.reshape(-1, n)).reshape(rest)
            if keepdims:
                y = y.reshape(tuple(1 if i in full else d for i, d in enumerate(x.shape)))
            return _back(y)
        return run

    if bop == "mse_loss":
        def run(args, attrs, nb):
            p, t = (_as_f32(v, what) for v in args)
            if p.shape != t.shape:
                raise PlanError(f"{what}: prediction shape {list(p.shape)} and target shape "
                                f"{list(t.shape)} differ")
            # one row per batch entry (nb leading axes), the per-example entries reduced
            rest = p.shape[:nb]
            n = int(np.prod(p.shape[nb:], dtype=np.int64))
            R = int(np.prod(rest, dtype=np.int64))
            y = _launch(what, host.row_mse, p.reshape(R, n), t.reshape(R, n))
            return _back(y.reshape(rest))
        return run

    if bop == "softmax":
        def run(args, attrs, nb):
            x = _as_f32(args[0], what)
            a = nb + _axis(attrs["axis"], x.ndim - nb)
            t = np.moveaxis(x, a, -1)
            y = _launch(what, host.softmax_rows, t.reshape(-1, t.shape[-1]))
            return _back(np.moveaxis(y.reshape(t.shape), -1, a))
        return run

    if bop == "layernorm":
        def run(args, attrs, nb):
            x, gamma, beta, eps = (_as_f32(v, what) for v in args)
            a = nb + _axis(attrs["axis"], x.ndim - nb)
            n = int(np.prod(x.shape[a:], dtype=np.int64))
            y = _launch(what, host.layernorm_rows, x.reshape(-1, n), gamma, beta, eps)
            return _back(y.reshape(x.shape))
        return run

    raise PlanError(f"bind: {capsule.name} has no kernel for op {graph_op}")


def _interval_binder(capsule: Capsule, graph_op: str, ctx, what: str):
    from scalarlab.scalars.values import Interval
    from . import host

    def ends(v, name):
        if not isinstance(v, Interval):
            raise PlanError(f"{what}: {name} is not an interval value")
        return _as_f32(v.lo, what), _as_f32(v.hi, what)

    def out(lo, hi):
        # interval:binary32 keeps float64 endpoint arrays
        return Interval(_back(lo).astype(np.float64), _back(hi).astype(np.float64))

    bop = capsule.op
    if bop == "linear":
        def run(args, attrs, nb):
            (xl, xh), (wl, wh), (bl, bh) = (ends(v, n) for v, n in zip(args, ("x", "W", "b")))
            K = xl.shape[-1]
            lo, hi = _launch(what, host.interval_linear, xl.reshape(-1, K), xh.reshape(-1, K),
                             wl.T, wh.T, bl, bh)
            shape = xl.shape[:-1] + (wl.shape[0],)
            return out(lo.reshape(shape), hi.reshape(shape))
        return run
    if bop == "add":
        def run(args, attrs, nb):
            (al, ah), (bl, bh) = ends(args[0], "a"), ends(args[1], "b")
            return out(*_launch(what, host.interval_binary, "add", al, ah, bl, bh))
        return run
    if bop in ("relu", "tanh"):
        def run(args, attrs, nb):
            return out(*_launch(what, host.interval_unary, bop, *ends(args[0], "x")))
        return run
    raise PlanError(f"bind: {capsule.name} has no kernel for op {graph_op}")


register_provider(Provider(PROVIDER, "cuda", availability, _binder,
                           "Numba CUDA kernels in binary32 (GPU, or the CUDA simulator)"))
