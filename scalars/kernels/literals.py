"""The one reader of number literals (decimal ``-1.5e-3`` or ``p/q`` text) into exact values,
bounded before any exact arithmetic.

``Fraction("1e999999999")`` (and ``gmpy2.mpq``) build 10^999999999 exactly: minutes of CPU
and gigabytes for one input entry.  Here the literal's size is read off its text first: its
decimal order of magnitude (the exponent of its leading digit) must lie within
+-``MAX_EXPONENT`` and its digits number at most ``MAX_DIGITS``; only then is the exact
value built.  :func:`exact` refuses a larger literal (exact and arbitrary-precision
contexts); :func:`for_rounding` hands a context that rounds into a float64-carried format a
stand-in of the same sign beyond that format's whole range, which every rounding mode maps
to the same value as the literal itself (+-inf / the largest finite value, +-0 / the
smallest subnormal).
"""
from __future__ import annotations

import re
from fractions import Fraction

from ..errors import ContextError

#: Largest |decimal order of magnitude| of a literal read exactly: 10^-1000 .. 10^1000
#: (binary64, the widest format the lab carries, spans about 10^-324 .. 10^308).
MAX_EXPONENT = 1000
#: Most significant digits (numerator and denominator each, for p/q) in one literal.
MAX_DIGITS = 4000

_DECIMAL = re.compile(r"\s*([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?\s*\Z")
_RATIO = re.compile(r"\s*([+-]?)(\d+)\s*/\s*(\d+)\s*\Z")
# an exponent with more digits than this is beyond every bound whatever the mantissa
_EXP_DIGITS = 12


class LiteralError(ContextError):
    """A literal that is not a number, or too large or small to be read exactly."""


class NotALiteral(LiteralError):
    """Text that is not a decimal or ``p/q`` literal at all (a context may read other
    spellings, such as ``inf``, itself)."""


class _Beyond(Exception):
    """Internal: the literal's magnitude is beyond the bound (``sign``, ``huge``)."""

    def __init__(self, sign: int, huge: bool, order: int | None):
        super().__init__()
        self.sign, self.huge, self.order = sign, huge, order


def _read(text: str) -> Fraction:
    if not isinstance(text, str):
        raise NotALiteral(f"expected a number literal (text), got {type(text).__name__}")
    if len(text) > 2 * MAX_DIGITS + 64:
        raise LiteralError(f"number literal {text[:20]!r}... has {len(text)} characters "
                           f"(at most {MAX_DIGITS} digits are read)")
    m = _RATIO.match(text)
    if m:
        sign = -1 if m.group(1) == "-" else 1
        num, den = m.group(2).lstrip("0"), m.group(3).lstrip("0")
        if not den:
            raise LiteralError(f"{text.strip()!r}: division by zero")
        if max(len(num), len(den)) > MAX_DIGITS:
            raise LiteralError(f"{text.strip()!r}: more than {MAX_DIGITS} digits")
        if not num:
            return Fraction(0)
        order = len(num) - len(den)  # within 1 of the decimal order of num/den
        if abs(order) > MAX_EXPONENT + 1:
            raise _Beyond(sign, order > 0, order)
        return Fraction(sign * int(num), int(den))
    m = _DECIMAL.match(text)
    if not m or not (m.group(2) or m.group(3)):
        raise NotALiteral(f"cannot read {text!r} as an exact decimal or fraction")
    sign = -1 if m.group(1) == "-" else 1
    whole, frac, exp = m.group(2), m.group(3) or "", m.group(4) or "0"
    digits = (whole + frac).lstrip("0")
    if not digits:
        return Fraction(0)  # 0e999999999 is 0, whatever the exponent
    if len(digits) > MAX_DIGITS:
        raise LiteralError(f"{text.strip()[:40]!r}: more than {MAX_DIGITS} digits")
    if len(exp.lstrip("+-").lstrip("0")) > _EXP_DIGITS:
        raise _Beyond(sign, not exp.startswith("-"), None)
    scale = int(exp) - len(frac)             # value = int(digits) * 10^scale
    trimmed = digits.rstrip("0")
    scale += len(digits) - len(trimmed)
    order = scale + len(trimmed) - 1         # decimal exponent of the leading digit
    if abs(order) > MAX_EXPONENT:
        raise _Beyond(sign, order > 0, order)
    mant = sign * int(trimmed)
    return Fraction(mant * 10 ** scale) if scale >= 0 else Fraction(mant, 10 ** -scale)


def _beyond_text(text: str, b: _Beyond) -> str:
    size = "large" if b.huge else "small"
    about = f" (about 10^{b.order})" if b.order is not None else ""
    return (f"{text.strip()[:40]!r} is too {size} to read exactly{about}: literals are "
            f"limited to magnitudes 10^-{MAX_EXPONENT} .. 10^{MAX_EXPONENT}")


def exact(text: str) -> Fraction:
    """The exact value of a decimal or ``p/q`` literal, or a :class:`LiteralError` naming it
    (not a number, division by zero, beyond +-10^``MAX_EXPONENT`` or ``MAX_DIGITS``)."""
    try:
        return _read(text)
    except _Beyond as b:
        raise LiteralError(_beyond_text(text, b)) from None


def for_rounding(text: str) -> Fraction:
    """The literal's exact value, or for a literal beyond +-10^``MAX_EXPONENT`` a stand-in
    (+-10^(MAX_EXPONENT+1) or +-10^-(MAX_EXPONENT+1)) that rounds like it into any format
    whose values are float64 values: both lie beyond the largest finite float64 (or
    strictly between 0 and the smallest float64 subnormal's half), on the same side."""
    try:
        return _read(text)
    except _Beyond as b:
        big = Fraction(10) ** (MAX_EXPONENT + 1)
        return b.sign * (big if b.huge else 1 / big)


def is_literal(text: str) -> bool:
    """Whether ``text`` reads as a literal within the bounds (no exception, no big work)."""
    try:
        _read(text)
    except (LiteralError, _Beyond):
        return False
    return True
