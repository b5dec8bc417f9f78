"""Rounding float64 arrays onto a binary format: the mode codes and the choice of compiled
kernel, without Numba.

The kernels themselves (integer bit surgery, :mod:`scalars.kernels.round_bits`) are loaded
on first use: importing :mod:`scalars.formats` (every context, every command's ``--help``
that names a format) then costs no Numba import, about 0.4 s of CPU, and a process that
never rounds never pays it.  Any kernel name of that module is readable here too
(``rounding.round_bits_up``, ``rounding.ROUND_BITS_BY_MODE``), loading it on first access.
"""
from __future__ import annotations

import importlib

# Rounding-mode codes shared with scalars.formats.
NEAREST_EVEN, NEAREST_AWAY, TOWARD_ZERO, UP, DOWN, ODD, STOCHASTIC = range(7)

# bits of DBL_MAX, +inf and -inf (as int64)
_F64_MAX_BITS, _INF_BITS, _NEG_INF_BITS = 0x7FEFFFFFFFFFFFFF, 0x7FF0000000000000, -(1 << 52)

_kernels = None


def kernels():
    """The compiled kernels' module (:mod:`scalars.kernels.round_bits`), imported now if
    it is not yet (with Numba)."""
    global _kernels
    if _kernels is None:
        _kernels = importlib.import_module(".round_bits", __package__)
    return _kernels


def float_path(mode, sh0, subnormals, max_bits) -> bool:
    """Whether nearest-even rounds this format by the hardware adder (``_round_ne_float``):
    nearest-even, subnormals, and its clamp constants 2^(emin + sh0) .. 2^(emax + 1 + sh0)
    normal float64s (sh0 >= 1: the format is narrower than float64).  Plain Python here
    and inlined into the compiled loops."""
    return (mode == NEAREST_EVEN and subnormals and sh0 >= 1
            and (max_bits >> 52) + 1 + sh0 <= 2046)


def round_bits_nearest_even(xb, out, sh0, emin_field, subnormals, halfq_bits, q_bits,
                            q_exp, max_bits, over_pos, over_neg, inf_pos, inf_neg):
    """Nearest-even rounding of the float64 bits ``xb`` into ``out`` (the hot path of every
    context; arguments as ``round_bits.round_bits``): the one of the two compiled kernels
    that this format takes, or a copy for binary64 itself."""
    if (sh0 == 0 and emin_field == 1 and subnormals and max_bits == _F64_MAX_BITS
            and inf_pos == _INF_BITS and inf_neg == _NEG_INF_BITS):
        # IEEE binary64 (subnormals, infinities): every float64 is a value of it, inf and
        # NaN map to themselves, nothing rounds (e.g. the float64 context's membership
        # test, metrics.representable).
        out[:] = xb
        return
    K = _kernels if _kernels is not None else kernels()
    k = (K.round_bits_nearest_even_float if float_path(NEAREST_EVEN, sh0, subnormals, max_bits)
         else K.round_bits_nearest_even_blocks)
    k(xb, out, sh0, emin_field, subnormals, halfq_bits, q_bits, q_exp, max_bits, over_pos,
      over_neg, inf_pos, inf_neg)


def __getattr__(name):
    """A compiled kernel (or table) of :mod:`scalars.kernels.round_bits`, by its name; kept
    here after the first access."""
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        value = getattr(kernels(), name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | {n for n in dir(kernels()) if not n.startswith("__")})
