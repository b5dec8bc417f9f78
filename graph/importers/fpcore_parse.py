"""FPCore text -> s-expressions: atoms, numbers (decimal, ``p/q``, hexadecimal), comments.

Numbers are kept EXACT (a ``Fraction``) as long as that is cheap: a literal whose magnitude
lies beyond ``2^±LITERAL_EXP2_LIMIT`` (about 10^±315000, far outside the range of every
binary format the lab builds, binary128's is 10^±4966) is decided from its spelling alone
-- without building the huge integer -- and becomes ``±inf`` or ``±0``, the value every
binary format rounds it to (``Num.clamped`` says so).  A literal with more than
``LITERAL_DIGITS_LIMIT`` digits is a one-line :class:`FPCoreError`: Python refuses to
convert such strings to integers, and no benchmark needs them.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

from ..errors import GraphError

__all__ = ["FPCoreError", "Untranslatable", "Sym", "Num", "Str", "to_text", "parse_number",
           "parse_sexprs", "digits_value", "LITERAL_EXP2_LIMIT", "LITERAL_DIGITS_LIMIT"]

#: |log2| of a literal beyond which it is not built exactly (rounds to +-inf / +-0).
LITERAL_EXP2_LIMIT = 1 << 20
#: Most digits read in one literal's mantissa, numerator, denominator or exponent.
LITERAL_DIGITS_LIMIT = 4000
_LOG2_10 = math.log2(10)


class FPCoreError(GraphError):
    """Malformed FPCore text (the message names the source and line)."""


class Untranslatable(Exception):
    """One FPCore cannot become a graph; the message is the skip reason."""


# ----------------------------------------------------------------------------- atoms
@dataclass(frozen=True)
class Sym:
    name: str
    line: int = 0

    def __str__(self):
        return self.name


@dataclass(frozen=True)
class Num:
    """A numeric literal: its value and its spelling.  ``value`` is an exact Fraction, or
    (``clamped``) the float +-inf / +-0.0 a literal far out of every format's range
    rounds to."""
    value: object
    text: str
    line: int = 0
    clamped: bool = False

    def __str__(self):
        return self.text


@dataclass(frozen=True)
class Str:
    text: str
    line: int = 0

    def __str__(self):
        return '"' + self.text.replace('"', '\\"') + '"'


def to_text(e) -> str:
    """An s-expression back as FPCore text (one line)."""
    if isinstance(e, list):
        return "(" + " ".join(to_text(t) for t in e) + ")"
    return str(e)


# ---------------------------------------------------------------------------- numbers
_DEC = re.compile(r"^([+-]?)(\d*)\.?(\d*)(?:e([+-]?\d+))?$", re.IGNORECASE)
_RAT = re.compile(r"^([+-]?)(\d+)/(\d+)$")
_HEX = re.compile(r"^([+-]?)0x([0-9a-f]*)\.?([0-9a-f]*)(?:p([+-]?\d+))?$", re.IGNORECASE)


def _int(digits: str, base: int, what: str, text: str) -> int:
    if len(digits) > LITERAL_DIGITS_LIMIT:
        raise ValueError(f"number {text[:40]}...: its {what} has {len(digits)} digits (at "
                         f"most {LITERAL_DIGITS_LIMIT} are read)")
    return int(digits, base) if digits else 0


def _exponent(digits: str, text: str) -> int:
    """The exponent's value; one with more than 30 digits is beyond any limit anyway, so
    it is capped (its sign kept) instead of converted."""
    sign = -1 if digits.startswith("-") else 1
    body = digits.lstrip("+-").lstrip("0")
    if len(body) > 30:
        return sign * 10 ** 30
    return sign * (int(body) if body else 0)


def _scaled(sign: str, mant: int, log2_mag: float, make, text: str):
    """``make()`` (the exact Fraction) when the magnitude ``~2^log2_mag`` is within the
    limit, else the float the literal rounds to in every format (inf or 0)."""
    if mant == 0:
        return Fraction(0), False
    if log2_mag > LITERAL_EXP2_LIMIT:
        return (-math.inf if sign == "-" else math.inf), True
    if log2_mag < -LITERAL_EXP2_LIMIT:
        return (-0.0 if sign == "-" else 0.0), True
    v = make()
    return (-v if sign == "-" else v), False


def parse_number(text: str):
    """``(value, clamped)`` of an FPCore number token, or None when it is not a number.

    Decided from the spelling in time linear in its length: the magnitude is estimated
    from digit counts and exponents before any big integer is built."""
    m = _DEC.match(text)
    if m and (m.group(2) or m.group(3)):
        sign, whole, frac, exp = m.groups()
        digits = (whole + frac).lstrip("0")
        mant = _int(digits, 10, "mantissa", text)
        e = _exponent(exp or "0", text) - len(frac)
        # |v| = mant * 10^e with 10^(len-1) <= mant < 10^len
        log2_mag = (len(digits) + e) * _LOG2_10 if digits else 0.0
        return _scaled(sign, mant, log2_mag, lambda: Fraction(mant) * Fraction(10) ** e
                       if e >= 0 else Fraction(mant, 10 ** -e), text)
    m = _RAT.match(text)
    if m:
        sign, n, d = m.groups()
        num, den = _int(n, 10, "numerator", text), _int(d, 10, "denominator", text)
        if den == 0:
            raise ValueError(f"rational {text} has a zero denominator")
        v = Fraction(num, den)
        return (-v if sign == "-" else v), False
    m = _HEX.match(text)
    if m and (m.group(2) or m.group(3)):
        sign, whole, frac, exp = m.groups()
        digits = (whole + frac).lstrip("0")
        mant = _int(whole + frac, 16, "mantissa", text)
        e = _exponent(exp or "0", text) - 4 * len(frac)
        log2_mag = (4 * len(digits) + e) if digits else 0.0
        return _scaled(sign, mant, log2_mag, lambda: Fraction(mant) * Fraction(2) ** e,
                       text)
    return None


def digits_value(m, e, b):
    """``(value, clamped)`` of FPCore's ``(digits m e b)`` = m * b^e (integers, b >= 2),
    decided from magnitudes first like :func:`parse_number`."""
    for v in (m, e, b):
        if not (isinstance(v, Fraction) and v.denominator == 1):
            raise ValueError("digits takes three integers")
    m, e, b = int(m), int(e), int(b)
    if b < 2:
        raise ValueError(f"digits: base {b} is not an integer >= 2")
    if m == 0:
        return Fraction(0), False
    log2_mag = math.log2(abs(m)) + e * math.log2(b)
    return _scaled("-" if m < 0 else "+", abs(m), log2_mag,
                   lambda: Fraction(abs(m)) * Fraction(b) ** e, f"(digits {m} {e} {b})")


# ---------------------------------------------------------------------------- tokens
_TOKEN = re.compile(r"""
    (?P<ws>\s+) | (?P<comment>;[^\n]*) | (?P<block>\#\|.*?\|\#) |
    (?P<open>[(\[]) | (?P<close>[)\]]) |
    (?P<str>"(?:[^"\\]|\\.)*") |
    (?P<atom>[^\s()\[\]";]+)
""", re.VERBOSE | re.DOTALL)


def parse_sexprs(text: str, source: str = "<string>") -> list:
    """Every top-level s-expression of ``text`` (lists, :class:`Sym`, :class:`Num`,
    :class:`Str`); ``[`` ``]`` are parentheses, ``;`` and ``#| |#`` comments."""
    stack: list = [[]]
    opens: list = []
    pos, line = 0, 1
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise FPCoreError(f"{source}:{line}: cannot read {text[pos:pos + 20]!r}")
        kind, tok = m.lastgroup, m.group()
        if kind == "open":
            stack.append([])
            opens.append((line, tok))
        elif kind == "close":
            if len(stack) == 1:
                raise FPCoreError(f"{source}:{line}: unbalanced {tok!r} (nothing is open)")
            o_line, o_tok = opens.pop()
            if (o_tok, tok) not in (("(", ")"), ("[", "]")):
                raise FPCoreError(f"{source}:{line}: {tok!r} closes {o_tok!r} opened on "
                                  f"line {o_line}")
            done = stack.pop()
            stack[-1].append(done)
        elif kind == "str":
            body = tok[1:-1].replace('\\"', '"').replace("\\\\", "\\")
            stack[-1].append(Str(body, line))
        elif kind == "atom":
            try:
                v = parse_number(tok)
            except ValueError as exc:
                raise FPCoreError(f"{source}:{line}: {exc}") from None
            stack[-1].append(Num(v[0], tok, line, v[1]) if v is not None else Sym(tok, line))
        line += tok.count("\n")
        pos = m.end()
    if len(stack) != 1:
        raise FPCoreError(f"{source}: {opens[-1][1]!r} opened on line {opens[-1][0]} is never "
                          f"closed")
    return stack[0]
