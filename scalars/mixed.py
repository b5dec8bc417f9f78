"""Mixed precision contexts ``STORAGE@ACCUM``: values in one binary format, reductions
accumulated in a wider one (``bfloat16@binary32``, ``binary16@binary32``, ``e4m3@binary32``,
``binary32@binary64``, ...; aliases work on both sides: ``bf16@float32``, ``half@fp32``).

This is how torch on CPU and cuBLAS run bfloat16 and half tensors: every tensor value is
a STORAGE value, but a matrix product (and so linear, conv, attention scores) or a sum
(reduce_sum, mean, softmax's and layernorm's sums) accumulates in ACCUM and rounds its
result once to STORAGE.  Measured on torch 2.13 CPU: bfloat16 ``a @ b`` equals ``(a.float()
@ b.float()).bfloat16()`` on every entry for K in 4..256 (so do ``x.sum()`` and the
sequential float32 accumulation below).

Semantics, exactly:

* elementwise ops (+ - * / sqrt fma, the functions, convert, the division of ``mean``):
  correctly rounded to STORAGE, as the plain STORAGE context does
  (:class:`scalars.binary.BinaryContext`);
* ``sum``: the STORAGE operands (which are ACCUM values) summed in ACCUM in the order of
  the ACCUM context (``<ACCUM>``: sequential, left to right, one rounding per addition;
  ``+fma`` is not offered for sums), then the ACCUM result rounded once, to nearest-even,
  onto STORAGE;
* ``matmul``: each dot product in ACCUM (sequential: the product rounded to ACCUM, then
  the addition rounded to ACCUM; ``STORAGE@ACCUM+fma``: one ACCUM rounding per
  multiply-add), then one nearest-even rounding onto STORAGE.  A product of two bfloat16
  or binary16 values is exact in binary32, so for those pairs only the additions round.
* the bias of ``linear`` (ONNX Gemm) and ``conv``: ``matmul_add(a, b, c)`` (which the
  two rules call for every context) adds it to each ACCUM dot product, one more ACCUM rounding,
  before the one rounding onto STORAGE -- torch CPU (oneDNN) and cuBLAS do the same
  (measured: torch's bfloat16 ``Linear``/``Conv2d`` with a bias equal
  ``(x.float() @ W.float().T + b.float()).bfloat16()`` on every entry; adding it after the
  rounding, in STORAGE, agreed on 70-74 % of the outputs).  The bias is the sum's last
  term, so the bounds below count it as one term more (IBP's and CROWN's ``n`` of a
  linear or conv layer already include the bias addition); IBP's mirrored endpoint
  products for coarse formats hold it by monotonicity: each ACCUM partial sum, the bias's
  included, stays between the STORAGE partial sums rounded down and up (ACCUM values).

The two-step rounding (ACCUM then STORAGE) is the double rounding torch does too; it is
not the correctly rounded sum.  ACCUM must hold every STORAGE value and have
``p_accum >= 2 p_storage + 2`` significand bits (and a range at least STORAGE's).  Then a
product of two STORAGE values is exact in ACCUM (2 p_s <= p_a bits; only an underflow
below STORAGE's own subnormal spacing can round it), and one ACCUM-accumulated reduction
of n terms rounded once onto STORAGE errs by at most ``u_s + gamma_n(u_a)(1 + u_s)``
(plus underflow terms no larger than STORAGE's): inside every bound the interval rules
and CROWN charge the STORAGE context's own sequential reduction (``gamma_n(u_s)``,
``(1 + u_s)^n - 1``, the running-error bound with ``2 u_s + u_s^2`` per product: their
``u_s^2`` slack covers ``u_a``).  So ``interval:STORAGE@ACCUM`` is the interval context of
STORAGE with the mixed context as the point context its ``execution`` guarantee speaks
of (tested by sampling, IBP and CROWN).  ``scalarlab bound``'s scalar model rounds each
operation in one format and has no such slack: it skips mixed contexts.
"""
from __future__ import annotations

import numpy as np

from . import formats
from .binary import NAMED_FORMATS, BinaryContext
from .errors import ContextError, FormatError


class MixedContext(BinaryContext):
    """STORAGE values, reductions accumulated in ACCUM and rounded once to STORAGE."""

    kind = "mixed"

    def __new__(cls, *args, **kwargs):
        return object.__new__(cls)     # (BinaryContext.__new__ picks float32 storage)

    def __init__(self, storage, accum, *, fma_dot: bool = False, name: str | None = None):
        super().__init__(storage, reduction="sequential")
        try:
            afmt = formats.get(accum)
        except FormatError as exc:
            raise ContextError(f"mixed context {self.fmt.name}@{accum}: accumulation "
                               f"format: {exc}") from None
        sfmt = self.fmt
        label = name or f"{sfmt.name}@{afmt.name}{'+fma' if fma_dot else ''}"
        why = _accumulation_problem(sfmt, afmt)
        if why:
            raise ContextError(f"mixed context {label}: {why}")
        # the accumulator: the plain binary context of ACCUM (binary32 keeps float32
        # storage and hardware float32 sums and products, same IEEE roundings)
        self.acc = BinaryContext(afmt, fma_dot=fma_dot)
        self.accumulation = afmt
        self.fma_dot = bool(fma_dot)
        self.name = label
        self.description = (f"{sfmt.name} values (p={sfmt.precision}), correctly rounded "
                            f"elementwise ops; sums and dot products accumulated "
                            f"sequentially in {afmt.name} (p={afmt.precision}, one "
                            f"rounding per {'multiply-add' if fma_dot else 'product and per addition'}),"
                            f" then rounded once to {sfmt.name}")

    def properties(self) -> dict:
        d = super().properties()
        d["accumulation"] = self.accumulation.name
        d["reduction"] = f"{self.reduction}@{self.accumulation.name}" + ("+fma" if self.fma_dot else "")
        d["naming"] = ("<storage>@<accum> sequential accumulation; <storage>@<accum>+fma "
                       "fused dot products in the accumulator")
        return d

    def _to_storage(self, r) -> np.ndarray:
        """An ACCUM result rounded once, nearest-even, onto STORAGE (float64 array)."""
        return self._round(np.asarray(self.acc.to_float64(r), dtype=np.float64))

    def sum(self, a, axis=None, keepdims: bool = False):
        a = self._val(a, "sum")
        # STORAGE values are ACCUM values: convert is exact here (no rounding)
        return self._to_storage(self.acc.sum(self.acc.convert(a), axis=axis,
                                             keepdims=keepdims))

    def matmul(self, a, b):
        """``a @ b``: each dot product accumulated in ACCUM, then one rounding onto
        STORAGE."""
        return self._accumulated_product(a, b, None, "matmul")

    def matmul_add(self, a, b, c):
        """``a @ b + c`` (``c`` broadcast onto the product): each dot product accumulated
        in ACCUM, ``c`` added to it there (one ACCUM rounding), then one rounding onto
        STORAGE."""
        return self._accumulated_product(a, b, c, "matmul_add")

    def _accumulated_product(self, a, b, c, op: str):
        a = self._val(a, op, "first operand")
        b = self._val(b, op, "second operand")
        try:
            r = self.acc.matmul(self.acc.convert(a), self.acc.convert(b))
        except ContextError as exc:      # shape errors: name this context, not ACCUM's
            raise ContextError(str(exc).replace(f"context {self.acc.name}:",
                                                f"context {self.name}:", 1)) from None
        if c is not None:
            c = self._val(c, op, "bias")
            shape = np.shape(r)
            try:
                fits = np.broadcast_shapes(shape, c.shape) == shape
            except ValueError:
                fits = False
            if not fits:
                raise ContextError(f"context {self.name}: {op}: bias of shape "
                                   f"{list(c.shape)} does not broadcast onto the product's "
                                   f"shape {list(shape)}")
            # STORAGE values are ACCUM values: convert is exact; add rounds once in ACCUM
            r = self.acc.add(r, self.acc.convert(c))
        return self._to_storage(r)


def _accumulation_problem(sfmt, afmt) -> str:
    """Why ACCUM cannot accumulate STORAGE values (empty when it can)."""
    if afmt.precision < 2 * sfmt.precision + 2:
        return (f"the accumulation format {afmt.name} has p={afmt.precision}; storage "
                f"{sfmt.name} (p={sfmt.precision}) needs an accumulator with p >= "
                f"2*{sfmt.precision}+2 = {2 * sfmt.precision + 2} (binary32 for 8- and "
                f"16-bit formats, binary64 for binary32)")
    if afmt.emax < sfmt.emax or afmt.emin > sfmt.emin or (sfmt.subnormals and not afmt.subnormals):
        return (f"the accumulation format {afmt.name} (emin={afmt.emin}, emax={afmt.emax}) "
                f"does not hold every {sfmt.name} value (emin={sfmt.emin}, emax={sfmt.emax})")
    if afmt.saturate or not afmt.has_inf:
        return (f"the accumulation format {afmt.name} must be an IEEE format with "
                f"infinities (it saturates or has none)")
    return ""


# ---------------------------------------------------------------------- registration
_FMT = r"(?:" + "|".join(NAMED_FORMATS) + r"|binary\(\s*\d+\s*,\s*\d+\s*\))"
# the accumulator may also be spelled float64 (the context name of binary64)
_ACC = _FMT[:-1] + r"|float64)"


def _family(m, get):
    storage, accum = (_squeeze(g) for g in (m.group(1), m.group(2)))
    accum = "binary64" if accum == "float64" else accum
    fused = bool(m.group(3))
    return MixedContext(storage, accum, fma_dot=fused,
                        name=f"{storage}@{accum}{'+fma' if fused else ''}")


def _squeeze(s: str) -> str:
    return "".join(s.split())


# Registration data, read by scalars.registry (this module does not import the registry).
CONTEXT_NAMES = {
    "bfloat16@binary32": lambda get: MixedContext("bfloat16", "binary32"),
    "binary16@binary32": lambda get: MixedContext("binary16", "binary32"),
}
CONTEXT_FAMILIES = (
    (r"(" + _FMT + r")@(" + _ACC + r")(\+fma)?", _family, "STORAGE@ACCUM"),
)
