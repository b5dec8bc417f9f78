"""Binary floating-point formats and correct rounding onto them.

A :class:`Format` is an IEEE-754-style binary format with ``exp_bits`` exponent bits and
``man_bits`` stored significand bits (precision ``p = man_bits + 1``), optionally without
subnormals, without infinities, saturating, or with the OCP "FN" encoding (E4M3FN: no
infinities, the all-ones exponent holds finite values, NaN only at S.1..1.1..1).  Values of
a format are carried as float64, so a format must fit inside binary64.

What is here:

* named formats ``binary64 binary32 binary16 bfloat16 tf32 e5m2 e4m3`` and :func:`get`;
* :func:`round_to_format`: one correct rounding of a float64 array in any of the modes
  ``nearest_even nearest_away toward_zero down up odd stochastic`` (Numba, by bits);
* :func:`round_fraction` / :func:`round_fractions`: the same for exact numbers
  (``Fraction``, ``mpq``, ints, decimal strings) by integer arithmetic;
* :func:`ulp`, :func:`next_up`, :func:`next_down`, :func:`ulp_distance`,
  :func:`bits_of_error`, :func:`encode` / :func:`decode` (bit patterns);
* :func:`gmpy2_context`: the MPFR context that reproduces a format (the test oracle).

Semantics, all as IEEE 754 says where it says something:

* Overflow is decided after rounding with unbounded exponent range.  Nearest modes give
  ±inf; ``toward_zero`` gives ±max_finite; ``up`` gives +inf / -max_finite and ``down``
  gives +max_finite / -inf.  ``odd`` overflows to ±max_finite (it never rounds away past
  the format); ``stochastic`` overflows like the nearest modes when it picks the upper
  neighbour.  A format without infinities gives NaN wherever IEEE would give an infinity
  (E4M3FN behaviour); a saturating format gives ±max_finite instead, and also maps ±inf
  inputs to ±max_finite (like CUDA's ``satfinite``).  Infinite inputs are otherwise exact.
* Gradual underflow with subnormals.  ``subnormals=False`` means the representable set is
  {0} ∪ normals and results are rounded correctly *onto that set* (what MPFR does with
  ``subnormalize=False``): in nearest modes a magnitude below min_normal goes to 0 if it is
  at most min_normal/2 (the tie goes to 0) and to min_normal otherwise; directed modes pick
  0 or min_normal by direction; ``odd`` picks min_normal.  This is not hardware
  flush-to-zero (which flushes every tiny result to 0 regardless of mode).
* The sign of zero is kept (a tiny negative value that rounds to zero gives -0.0); NaN
  stays NaN.
* ``odd`` is round-to-odd: truncate, and if inexact set the last significand bit.
* ``stochastic`` rounds up with probability (|x| - trunc|x|) / gap, exactly (integer
  comparison against random bits; see the kernel for the one < 2^-63 approximation far
  below the smallest subnormal), reproducibly from a seed or ``numpy.random.Generator``.
"""
from __future__ import annotations

import functools
import math
import re
import struct
from dataclasses import dataclass, field, replace
from fractions import Fraction

import numpy as np

from .kernels import literals as _literals
from .kernels import rounding as _k
from .kernels.flat import writable as _writable
from .errors import ContextError, FormatError

MODES = ("nearest_even", "nearest_away", "toward_zero", "down", "up", "odd", "stochastic")
_MODE_CODE = {"nearest_even": _k.NEAREST_EVEN, "nearest_away": _k.NEAREST_AWAY,
              "toward_zero": _k.TOWARD_ZERO, "up": _k.UP, "down": _k.DOWN, "odd": _k.ODD,
              "stochastic": _k.STOCHASTIC}
NAN_ENCODINGS = ("ieee", "fn")


def _check_mode(mode) -> int:
    if mode not in _MODE_CODE:
        raise FormatError(f"unknown rounding mode {mode!r}; valid modes: {', '.join(MODES)}")
    return _MODE_CODE[mode]


def _bits(v: float) -> int:
    """The IEEE binary64 bit pattern of ``v`` as a signed int64 value."""
    return struct.unpack("<q", struct.pack("<d", v))[0]


@dataclass(frozen=True)
class Format:
    """A binary floating-point format (see the module docstring for its semantics).

    ``exp_bits`` in 2..11 and ``man_bits`` in 1..52 so that every value is a float64.
    ``nan_encoding="ieee"``: the all-ones exponent holds inf (if ``has_inf``) and NaN;
    ``"fn"``: it holds finite values except the all-ones significand, which is NaN (no
    infinities; requires ``has_inf=False``).  ``label`` is the display name of a named
    format and does not take part in equality.
    """

    exp_bits: int
    man_bits: int
    subnormals: bool = True
    has_inf: bool = True
    saturate: bool = False
    nan_encoding: str = "ieee"
    label: str | None = field(default=None, compare=False)

    def __post_init__(self):
        for fname in ("exp_bits", "man_bits"):
            v = getattr(self, fname)
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                raise FormatError(f"Format {fname} must be an int, got {v!r}")
        for fname in ("subnormals", "has_inf", "saturate"):
            if not isinstance(getattr(self, fname), (bool, np.bool_)):
                raise FormatError(f"Format {fname} must be a bool, "
                                  f"got {getattr(self, fname)!r}")
        if not 2 <= self.exp_bits <= 11:
            raise FormatError(f"Format exp_bits={self.exp_bits} out of range 2..11 "
                              f"(format values are carried as float64)")
        if not 1 <= self.man_bits <= 52:
            raise FormatError(f"Format man_bits={self.man_bits} out of range 1..52 "
                              f"(format values are carried as float64)")
        if self.nan_encoding not in NAN_ENCODINGS:
            raise FormatError(f"Format nan_encoding={self.nan_encoding!r}; valid: "
                              f"{', '.join(NAN_ENCODINGS)}")
        if self.nan_encoding == "fn" and self.has_inf:
            raise FormatError("Format nan_encoding='fn' has no infinities: pass has_inf=False")
        if self.emax > 1023:
            raise FormatError(f"Format exp_bits={self.exp_bits} with nan_encoding='fn' has "
                              f"emax={self.emax} > 1023: its values do not fit in float64")

    # ------------------------------------------------------------------ parameters
    @property
    def name(self) -> str:
        if self.label is not None:
            return self.label
        for nm, f in NAMED.items():
            if f == self:
                return nm
        extras = [s for s, on in (("nosub", not self.subnormals),
                                  ("noinf", not self.has_inf and self.nan_encoding == "ieee"),
                                  ("fn", self.nan_encoding == "fn"),
                                  ("sat", self.saturate)) if on]
        base = f"binary({self.exp_bits},{self.man_bits})"
        return base + (f"[{','.join(extras)}]" if extras else "")

    @property
    def precision(self) -> int:
        return self.man_bits + 1

    @property
    def bias(self) -> int:
        return (1 << (self.exp_bits - 1)) - 1

    @property
    def emin(self) -> int:
        """Exponent of min_normal (IEEE convention: min_normal = 2^emin)."""
        return 1 - self.bias

    @property
    def emax(self) -> int:
        """Exponent of the top binade (IEEE convention: max_finite < 2^(emax+1))."""
        return self.bias + (1 if self.nan_encoding == "fn" else 0)

    @property
    def max_significand(self) -> int:
        """Largest integer significand (p bits) in the top binade."""
        top = (1 << self.precision) - 1
        return top - 1 if self.nan_encoding == "fn" else top

    @property
    def max_finite(self) -> float:
        return math.ldexp(self.max_significand, self.emax - self.man_bits)

    @property
    def min_normal(self) -> float:
        return math.ldexp(1.0, self.emin)

    @property
    def min_subnormal(self) -> float:
        """Smallest positive value (min_normal when the format has no subnormals)."""
        return math.ldexp(1.0, self.emin - self.man_bits) if self.subnormals else self.min_normal

    @property
    def total_bits(self) -> int:
        return 1 + self.exp_bits + self.man_bits

    @property
    def is_binary64(self) -> bool:
        """True when the finite values are exactly float64's (binary64, whatever its
        overflow rule): rounding onto the format is then the identity on float64."""
        return (self.exp_bits == 11 and self.man_bits == 52 and self.subnormals
                and self.nan_encoding == "ieee")

    @functools.cached_property
    def spec(self) -> tuple:
        """The constants of nearest-even rounding onto this format, as the tuple the Numba
        kernels of :mod:`scalars.kernels.binary_format` take (one compiled signature for every
        format).  Derived from the fields above, computed once per Format object:

        ``(p53m, sub_shift, eminb, ecapb, maxf, ovf, mn, k53, cmax, csub)``: 53 - p; the
        shift used below min_normal (53 - p with subnormals, 52 without: quantum
        min_normal); the biased exponent field of min_normal and of the clamp emax + 1 (as
        bits in place); the largest finite value; the (positive) value that overflow and
        ±inf inputs become (inf, NaN for formats without infinities, max_finite when
        saturating); min_normal; and for ``rn_fast`` the factor 2^(53-p) and the clamps of
        its constant, 2^(emax+1+53-p) and 2^(emin+53-p).
        """
        p53m = 53 - self.precision
        sub_shift = p53m if self.subnormals else 52
        eminb = (self.emin + 1023) << 52
        ecap = min(self.emax + 1, 1023 - max(p53m, sub_shift))
        ecapb = (ecap + 1023) << 52
        if self.saturate:
            ovf = self.max_finite
        elif self.has_inf:
            ovf = math.inf
        else:
            ovf = math.nan
        return (np.int64(p53m), np.int64(sub_shift), np.int64(eminb), np.int64(ecapb),
                float(self.max_finite), float(ovf), float(self.min_normal),
                math.ldexp(1.0, p53m), math.ldexp(1.0, ecap + p53m),
                math.ldexp(1.0, self.emin + p53m))

    def __str__(self) -> str:
        return self.name


binary64 = Format(11, 52, label="binary64")
binary32 = Format(8, 23, label="binary32")
binary16 = Format(5, 10, label="binary16")
bfloat16 = Format(8, 7, label="bfloat16")
tf32 = Format(8, 10, label="tf32")
e5m2 = Format(5, 2, label="e5m2")
e4m3 = Format(4, 3, has_inf=False, nan_encoding="fn", label="e4m3")

NAMED: dict[str, Format] = {f.label: f for f in
                            (binary64, binary32, binary16, bfloat16, tf32, e5m2, e4m3)}
_BINARY_RE = re.compile(r"binary\(\s*(\d+)\s*,\s*(\d+)\s*\)\Z")


def names() -> list[str]:
    return [*NAMED, "binary(E,M)"]


def get(name) -> Format:
    """The format called ``name``: a named format or ``"binary(E,M)"`` (IEEE encoding)."""
    if isinstance(name, Format):
        return name
    if not isinstance(name, str):
        raise FormatError(f"format name must be a string, got {type(name).__name__}")
    key = name.strip()
    if key in NAMED:
        return NAMED[key]
    m = _BINARY_RE.match(key)
    if m:
        e, mb = int(m.group(1)), int(m.group(2))
        return Format(e, mb, label=f"binary({e},{mb})")  # equal to a named twin, if any
    raise FormatError(f"unknown format {name!r}; valid formats: {', '.join(names())}")


# ---------------------------------------------------------------------- float64 rounding
def _special_bits(fmt: Format, mode: int):
    """Bit patterns of the overflow results and of the images of ±inf for ``mode``."""
    mx = fmt.max_finite
    nan = float("nan")
    inf = float("inf")
    if fmt.saturate:
        away = mx
    elif fmt.has_inf:
        away = inf
    else:
        away = nan  # no infinity to round to
    if mode in (_k.NEAREST_EVEN, _k.NEAREST_AWAY, _k.STOCHASTIC):
        pos, neg = away, away
    elif mode in (_k.TOWARD_ZERO, _k.ODD):
        pos, neg = mx, mx
    elif mode == _k.UP:
        pos, neg = away, mx
    else:  # DOWN
        pos, neg = mx, away
    over_pos, over_neg = _bits(pos), _bits(-neg)
    if fmt.has_inf and not fmt.saturate:
        inf_pos, inf_neg = _bits(inf), _bits(-inf)
    else:
        inf_pos, inf_neg = _bits(away), _bits(-away)
    return over_pos, over_neg, inf_pos, inf_neg


def _rng(rng) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return np.random.default_rng(rng)
    raise FormatError(f"rng must be None, an int seed or a numpy Generator, got {rng!r}")


def _as_float64(x, what: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind == "f":
        if arr.dtype.itemsize > 8:
            raise ContextError(f"{what}: {arr.dtype} input would be rounded to float64 "
                               f"first (double rounding); use round_fractions")
        return arr.astype(np.float64, copy=False)
    if arr.dtype.kind in "biu":
        # Integers convert exactly only up to 2^53; larger ones would be rounded twice.
        if arr.size and arr.dtype.kind != "b" and (arr.max() > 2 ** 53 or arr.min() < -2 ** 53):
            raise ContextError(f"{what}: integer input beyond 2^53 cannot be converted to "
                               f"float64 exactly; use round_fractions for exact integers")
        return arr.astype(np.float64)
    raise ContextError(f"{what}: expected a real float64 array, got dtype {arr.dtype} "
                       f"(use round_fractions for exact numbers)")


@functools.lru_cache(maxsize=256)
def _kernel_params(fmt: Format, code: int) -> tuple:
    """The per-format constants of the rounding kernels (see rounding_kernels.round_bits)."""
    over_pos, over_neg, inf_pos, inf_neg = _special_bits(fmt, code)
    q_exp = (fmt.emin - fmt.man_bits) if fmt.subnormals else fmt.emin
    q_bits = _bits(math.ldexp(1.0, q_exp))
    # Q/2 is below float64's range only for binary64 itself, where it is never used.
    halfq_bits = _bits(math.ldexp(1.0, q_exp - 1)) if q_exp - 1 >= -1074 else 0
    return (52 - fmt.man_bits, fmt.emin + 1023, bool(fmt.subnormals), halfq_bits, q_bits,
            q_exp, _bits(fmt.max_finite), over_pos, over_neg, inf_pos, inf_neg)


def round_to_format(x, fmt, mode: str = "nearest_even", rng=None, *,
                    parallel: bool = False) -> np.ndarray:
    """Round every float64 of ``x`` once, correctly, onto ``fmt`` in rounding ``mode``.

    Returns a float64 array of the same shape whose entries are values of the format (or
    ±inf / NaN as the module docstring describes).  ``rng`` (an int seed or a
    ``numpy.random.Generator``) is used only by ``mode="stochastic"``.  ``parallel=True``
    spreads nearest-even rounding of large arrays over Numba's threads (same results).
    """
    fmt = get(fmt)
    code = _check_mode(mode)
    arr = _as_float64(x, f"round_to_format to {fmt.name}")
    # a read-only input is copied: the kernels take one array type (scalars.kernels.flat)
    flat = _writable(np.ascontiguousarray(arr).reshape(-1))
    xb = flat.view(np.int64)
    out = np.empty_like(xb)
    params = _kernel_params(fmt, code)
    if code == _k.NEAREST_EVEN and parallel and flat.size >= 1 << 17:
        _k.round_bits_nearest_even_parallel(xb, out, *params)
    elif code == _k.NEAREST_EVEN:
        _k.round_bits_nearest_even(xb, out, *params)
    elif code == _k.STOCHASTIC:
        rand = _rng(rng).integers(0, 1 << 63, size=flat.size, dtype=np.int64)
        _k.round_bits_stochastic(xb, out, rand, *params)
    else:            # one compiled kernel per mode: a run compiles only the modes it uses
        _k.ROUND_BITS_BY_MODE[code](xb, out, *params)
    return out.view(np.float64).reshape(arr.shape)


# ---------------------------------------------------------------------- exact rounding
def _as_ratio(q, what: str):
    """(numerator, denominator) of an exact number, or a float for NaN/inf."""
    import gmpy2
    if isinstance(q, (bool, np.bool_)):
        return int(q), 1
    if isinstance(q, (int, np.integer)):
        return int(q), 1
    if isinstance(q, Fraction):
        return q.numerator, q.denominator
    tname = type(q).__name__
    if tname in ("mpq", "mpz"):
        return gmpy2.numer(q), gmpy2.denom(q)
    if isinstance(q, (float, np.floating)) or tname == "mpfr":
        f = q
        if tname == "mpfr" and not gmpy2.is_finite(q):
            return float(q)
        if tname != "mpfr" and not math.isfinite(float(q)):
            return float(q)
        return f.as_integer_ratio() if tname == "mpfr" else float(f).as_integer_ratio()
    if isinstance(q, str):
        try:
            # bounded; beyond 10^+-1000 a stand-in that rounds like the literal
            fr = _literals.for_rounding(q)
        except ContextError as exc:
            raise ContextError(f"{what}: {exc}") from None
        return fr.numerator, fr.denominator
    raise ContextError(f"{what}: expected an exact number (int, Fraction, mpq, float, "
                       f"decimal string), got {tname}: {q!r}")


def _round_ratio(n, d, fmt: Format, code: int, rng) -> float:
    """Correctly round n/d (d > 0) onto ``fmt``: pure integer arithmetic, one rounding."""
    if n == 0:
        return 0.0
    neg = n < 0
    if neg:
        n = -n
    M = fmt.man_bits
    # e = floor(log2(n/d)) from bit lengths, corrected by one comparison.
    e = n.bit_length() - d.bit_length()
    if (n << max(0, -e)) < (d << max(0, e)):
        e -= 1
    if e >= fmt.emin:
        qe = e - M
    elif fmt.subnormals:
        qe = fmt.emin - M
    else:
        qe = fmt.emin  # candidates 0 and min_normal only
    if qe >= 0:
        num, den = n, d << qe
    else:
        num, den = n << -qe, d
    kept, rem = divmod(num, den)
    if rem:
        twice = 2 * rem
        if code == _k.NEAREST_EVEN:
            up = twice > den or (twice == den and kept & 1)
        elif code == _k.NEAREST_AWAY:
            up = twice >= den
        elif code == _k.TOWARD_ZERO:
            up = False
        elif code == _k.UP:
            up = not neg
        elif code == _k.DOWN:
            up = neg
        elif code == _k.ODD:
            up = not kept & 1
        else:
            up = _stochastic_up(rem, den, _rng_for_fraction(rng))
        if up:
            kept += 1
    if kept == 0:
        return -0.0 if neg else 0.0
    # Renormalise a carry out of the top bit, then decide overflow in integers.
    if kept >> fmt.precision:
        kept >>= 1
        qe += 1
    top_qe = fmt.emax - M
    if qe > top_qe or (qe == top_qe and kept > fmt.max_significand):
        ob = _special_bits(fmt, code)[1 if neg else 0]
        return float(np.array(ob, dtype=np.int64).view(np.float64))
    v = math.ldexp(float(kept), qe)  # exact: kept has at most p <= 53 bits
    return -v if neg else v


class _FractionRng:
    """Holder so that one Generator is drawn from across a whole array."""

    def __init__(self, rng):
        self.gen = _rng(rng)


def _rng_for_fraction(rng):
    if isinstance(rng, _FractionRng):
        return rng.gen
    return _rng(rng)


def _stochastic_up(rem, den, gen) -> bool:
    """True with probability rem/den exactly: compare random bits with the binary
    expansion of rem/den, 62 bits at a time, until they differ (expected one draw)."""
    chunk = 62
    while True:
        rem <<= chunk
        digit, rem = divmod(rem, den)
        r = int(gen.integers(0, 1 << chunk))
        if r != digit:
            return r < digit
        if rem == 0:
            return False  # the random number equals rem/den's expansion: U >= p


def _round_one(q, fmt: Format, mode: str, code: int, what: str, rng) -> float:
    r = _as_ratio(q, what)
    if isinstance(r, float):
        gen = rng.gen if isinstance(rng, _FractionRng) else rng
        return float(round_to_format(np.array(r), fmt, mode, gen))
    n, d = r
    if d == 0:
        raise ContextError(f"{what}: zero denominator in {q!r}")
    if d < 0:
        n, d = -n, -d
    return _round_ratio(n, d, fmt, code, rng)


def round_fraction(q, fmt, mode: str = "nearest_even", rng=None) -> float:
    """One correct rounding of the exact number ``q`` onto ``fmt``, as a Python float.

    ``q`` may be an int, ``Fraction``, gmpy2 ``mpq``/``mpz``/``mpfr``, a float or a decimal
    string; the computation is integer arithmetic on its numerator and denominator, so it is
    correct for every format including binary64.  Exact zero gives +0.0.
    """
    fmt = get(fmt)
    code = _check_mode(mode)
    return _round_one(q, fmt, mode, code, f"round_fraction to {fmt.name}", rng)


def round_fractions(values, fmt, mode: str = "nearest_even", rng=None) -> np.ndarray:
    """:func:`round_fraction` over an object array (any shape) -> float64 array.

    Exact numbers are Python objects, so this is one call per element by necessity.  In
    stochastic mode one Generator (from ``rng``) serves the whole array.
    """
    fmt = get(fmt)
    code = _check_mode(mode)
    what = f"round_fractions to {fmt.name}"
    arr = np.asarray(values, dtype=object)
    holder = _FractionRng(rng) if mode == "stochastic" else None
    flat = arr.reshape(-1)
    out = np.fromiter((_round_one(v, fmt, mode, code, what, holder) for v in flat),
                      dtype=np.float64, count=flat.size)
    return out.reshape(arr.shape)


# ---------------------------------------------------------------------- MPFR oracle
def gmpy2_context(fmt, mode: str = "nearest_even"):
    """A gmpy2 context whose results are ``fmt``'s correctly rounded results.

    MPFR writes x = m * 2^E with 0.5 <= m < 1, one more than the IEEE exponent, and its
    ``emin`` is the exponent of the smallest representable number.  Hence
    ``emax = fmt.emax + 1`` and, with subnormals, ``emin = fmt.emin - man_bits + 1``
    (binary32: precision 24, emin -148, emax 128), ``subnormalize=True``; without
    subnormals ``emin = fmt.emin + 1`` and ``subnormalize=False``.

    MPFR has no ties-away, round-to-odd or stochastic mode: those raise FormatError (use
    :func:`round_fraction` on an exact or wider value instead).  For formats that saturate,
    lack infinities or use the FN encoding, MPFR's overflow cannot be expressed: pass its
    result through :func:`round_to_format` in the same mode, which is then exact on finite
    format values and applies the format's overflow rule to the rest (e.g. E4M3FN's 480 or
    inf becomes NaN in nearest modes, 448 toward zero).
    """
    import gmpy2
    fmt = get(fmt)
    _check_mode(mode)
    rounding = {"nearest_even": gmpy2.RoundToNearest, "toward_zero": gmpy2.RoundToZero,
                "up": gmpy2.RoundUp, "down": gmpy2.RoundDown}
    if mode not in rounding:
        raise FormatError(f"gmpy2_context: MPFR has no {mode!r} rounding; MPFR modes: "
                          f"{', '.join(rounding)} (use round_fraction for {mode!r})")
    if fmt.subnormals:
        emin = fmt.emin - fmt.man_bits + 1
    else:
        emin = fmt.emin + 1
    return gmpy2.context(precision=fmt.precision, emin=emin, emax=fmt.emax + 1,
                         subnormalize=bool(fmt.subnormals), round=rounding[mode])


# ---------------------------------------------------------------------- neighbours
def _repr_check(arr: np.ndarray, fmt: Format, what: str) -> None:
    """Raise unless every entry of ``arr`` is a value of ``fmt`` (or ±inf/NaN)."""
    fin = np.isfinite(arr)
    # Any mode returns a format value unchanged and moves every other finite value (an
    # overflow goes to ±inf, max_finite or NaN, none equal to it): nearest-even is the
    # kernel every context has compiled already, so the check compiles nothing more.
    bad = fin & (round_to_format(np.where(fin, arr, 0.0), fmt) != arr)
    if bad.any():
        idx = np.argwhere(bad)[0]
        raise ContextError(f"{what}: {float(arr[tuple(idx)])!r} at index {tuple(int(i) for i in idx)} "
                           f"is not a {fmt.name} value; round it to the format first")


def _binade_quantum(a: np.ndarray, fmt: Format) -> np.ndarray:
    """2^(max(floor(log2 a), emin) - M) for a > 0 finite (the spacing at a)."""
    _, ex = np.frexp(a)
    e = np.maximum(ex.astype(np.int64) - 1, fmt.emin)
    return np.ldexp(1.0, (e - fmt.man_bits).astype(np.int32))


def ulp(x, fmt) -> np.ndarray:
    """Unit in the last place of ``x`` in ``fmt``: the spacing of the format at |x|.

    Goldberg's definition: 2^(max(floor(log2|x|), emin) - man_bits), so ulp(x) =
    next_up(|x|) - |x| for format values below max_finite (the top binade continues the
    formula).  ulp(±0) is the gap from 0 to the smallest positive value (min_subnormal, or
    min_normal without subnormals); without subnormals ulp is min_normal below min_normal.
    ulp(±inf) = inf, ulp(NaN) = NaN.  ``x`` need not be a format value.
    """
    fmt = get(fmt)
    arr = _as_float64(x, f"ulp in {fmt.name}")
    a = np.abs(arr)
    pos = np.isfinite(a) & (a > 0)
    safe = np.where(pos, a, 1.0)
    q = _binade_quantum(safe, fmt)
    if not fmt.subnormals:
        q = np.where(safe < fmt.min_normal, fmt.min_normal, q)
    out = np.where(pos, q, np.where(a == 0, fmt.min_subnormal, a))  # inf -> inf, nan -> nan
    return out


def _next_up_values(y: np.ndarray, fmt: Format) -> np.ndarray:
    """next_up of ``y`` whose entries are format values, ±inf or NaN (float64 array)."""
    inf = np.inf
    top = inf if fmt.has_inf else np.nan  # nothing above max_finite without infinities
    a = np.abs(y)
    fin = np.isfinite(y) & (a > 0)
    safe = np.where(fin, a, 1.0)
    q = _binade_quantum(safe, fmt)
    # Gap below a positive value a: half the binade quantum when a is a power of two above
    # min_normal (the binade below is twice as dense), else the quantum.
    mant, _ = np.frexp(safe)
    below = np.where((mant == 0.5) & (safe > fmt.min_normal), q * 0.5, q)
    if not fmt.subnormals:
        below = np.where(safe == fmt.min_normal, fmt.min_normal, below)  # down to 0
    with np.errstate(over="ignore"):
        up_pos = safe + q  # may pass float64's max only where it passes max_finite too
    up_pos = np.where(up_pos > fmt.max_finite, top, up_pos)
    up_neg = -(safe - below)  # y = -a: -(a - gap), which is -0.0 at -min_subnormal
    res = np.where(y > 0, up_pos, up_neg)
    res = np.where(y == 0, fmt.min_subnormal, res)
    res = np.where(y == inf, top, res)
    res = np.where(y == -inf, -fmt.max_finite, res)
    return np.where(np.isnan(y), np.nan, res)


def next_up(x, fmt) -> np.ndarray:
    """Smallest value of ``fmt`` greater than ``x`` (IEEE nextUp, vectorised).

    ``x`` may be any float64: the result is the least format value strictly above it.
    next_up(±0) = min_subnormal, next_up(-min_subnormal) = -0.0, next_up(max_finite) =
    next_up(+inf) = +inf (NaN for formats without infinities: nothing lies above),
    next_up(-inf) = -max_finite, NaN -> NaN.
    """
    fmt = get(fmt)
    arr = _as_float64(x, f"next_up in {fmt.name}")
    # Largest format value <= x, with -inf standing for "below every finite value"
    # (rounding down without saturation gives max_finite above the range).
    y = round_to_format(arr, replace(fmt, saturate=False), "down")
    y = np.where(arr < -fmt.max_finite, -np.inf, y)
    y = np.where(arr == np.inf, np.inf, y)
    return _next_up_values(y, fmt)


def next_down(x, fmt) -> np.ndarray:
    """Largest value of ``fmt`` less than ``x``: ``-next_up(-x)`` (IEEE nextDown)."""
    fmt = get(fmt)
    arr = _as_float64(x, f"next_down in {fmt.name}")
    return -next_up(-arr, fmt)


# ---------------------------------------------------------------------- ordinals, error
def _ordinal_top(fmt: Format) -> int:
    """Ordinal of the largest non-NaN value (+inf if the format has it, else max_finite)."""
    M = fmt.man_bits
    first_normal = (1 << M) if fmt.subnormals else 1
    top = (_bits(fmt.max_finite) - _bits(fmt.min_normal)) >> (52 - M)
    return top + first_normal + (1 if fmt.has_inf else 0)


@functools.lru_cache(maxsize=64)
def _ordinal_params(fmt: Format) -> tuple:
    """The per-format constants of :func:`kernels.ordinal.ulp_distance_flat`, typed so
    that every format shares its one compiled signature."""
    M = fmt.man_bits
    first_normal = (1 << M) if fmt.subnormals else 1
    inf_ord = ((_bits(fmt.max_finite) - _bits(fmt.min_normal)) >> (52 - M)) + first_normal + 1
    return (np.int64(52 - M), float(fmt.min_normal), np.uint64(_bits(fmt.min_normal)),
            float(fmt.max_finite), np.uint64(first_normal), float(fmt.min_subnormal),
            bool(fmt.subnormals), bool(fmt.has_inf), np.uint64(inf_ord),
            np.uint64(2 * _ordinal_top(fmt) + 1))


def ulp_distance(a, b, fmt) -> np.ndarray:
    """Ordinal distance between values of ``fmt``: how many format values apart they are.

    Values are numbered in order (-inf ... -min_subnormal, ±0, min_subnormal ... +inf;
    +0 and -0 share one number).  Inputs must be values of the format (or ±inf/NaN);
    anything else raises ContextError (round first).  NaN vs NaN is 0; NaN vs a number is
    the size of the whole ordinal range (2 * top + 1, one more than the -inf..+inf
    distance), so bits_of_error is maximal there.  The result dtype is int64, except for
    formats with 11 exponent bits and 52 significand bits (binary64), whose ordinal range
    needs uint64.  One compiled pass (:mod:`scalars.kernels.ordinal`) numbers, checks and
    subtracts, without a temporary array per step.
    """
    from .kernels.flat import flat_f64
    from .kernels.ordinal import ulp_distance_flat
    fmt = get(fmt)
    aa = _as_float64(a, f"ulp_distance in {fmt.name}")
    bb = _as_float64(b, f"ulp_distance in {fmt.name}")
    try:
        shape = np.broadcast_shapes(aa.shape, bb.shape)
    except ValueError:
        raise ContextError(f"ulp_distance in {fmt.name}: shapes {aa.shape} and {bb.shape} "
                           f"do not broadcast")
    out = np.empty(math.prod(shape), dtype=np.uint64)
    # flat_f64 broadcasts (a copy) only an operand whose shape differs
    bad = ulp_distance_flat(flat_f64(aa, shape), flat_f64(bb, shape), out,
                            *_ordinal_params(fmt))
    if bad:
        aa, bb = np.broadcast_to(aa, shape), np.broadcast_to(bb, shape)
        # name the first offending entry, as round-first advice
        if not fmt.has_inf:
            for arr, nm in ((aa, "a"), (bb, "b")):
                if np.isinf(arr).any():
                    raise ContextError(f"ulp_distance in {fmt.name}: {nm} holds an infinity, "
                                       f"which is not a {fmt.name} value")
        _repr_check(aa, fmt, f"ulp_distance in {fmt.name} (a)")
        _repr_check(bb, fmt, f"ulp_distance in {fmt.name} (b)")
        raise ContextError(f"ulp_distance in {fmt.name}: {bad} entries are not "
                           f"{fmt.name} values; round them to the format first")
    d = out.reshape(shape)
    if fmt.exp_bits == 11 and fmt.man_bits == 52:
        return d
    return d.view(np.int64)


def bits_of_error(a, b, fmt) -> np.ndarray:
    """Herbie's bits of error: log2(1 + ulp_distance(a, b, fmt)), float64."""
    d = ulp_distance(a, b, fmt)
    return np.log2(1.0 + d.astype(np.float64))


# ---------------------------------------------------------------------- encodings
def decode(codes, fmt) -> np.ndarray:
    """float64 values of the bit patterns ``codes`` (integers < 2^total_bits) of ``fmt``.

    Useful for exhaustive sweeps: ``decode(np.arange(2**16), binary16)`` is every binary16
    value, NaNs and infinities included.
    """
    fmt = get(fmt)
    c = np.asarray(codes)
    if c.dtype.kind not in "iu":
        raise ContextError(f"decode in {fmt.name}: codes must be integers, got {c.dtype}")
    c = c.astype(np.int64)
    if c.size and (c.min() < 0 or c.max() >= (1 << fmt.total_bits)):
        raise ContextError(f"decode in {fmt.name}: codes must lie in [0, 2^{fmt.total_bits})")
    M = fmt.man_bits
    sign = (c >> (fmt.exp_bits + M)) & 1
    ef = (c >> M) & ((1 << fmt.exp_bits) - 1)
    mf = c & ((1 << M) - 1)
    all_ones = (1 << fmt.exp_bits) - 1
    sig = np.where(ef == 0, mf, mf | (1 << M)).astype(np.float64)
    e = np.where(ef == 0, fmt.emin, ef - fmt.bias) - M
    with np.errstate(over="ignore"):
        mag = np.ldexp(sig, e.astype(np.int32))
    if fmt.nan_encoding == "ieee":
        special = ef == all_ones
        infv = np.inf if fmt.has_inf else np.nan
        mag = np.where(special, np.where(mf == 0, infv, np.nan), mag)
    else:
        mag = np.where((ef == all_ones) & (mf == (1 << M) - 1), np.nan, mag)
    if not fmt.subnormals:
        mag = np.where((ef == 0) & (mf != 0), np.nan, mag)  # unused encodings
    return np.where(sign == 1, -mag, mag)


def encode(x, fmt) -> np.ndarray:
    """Bit patterns (int64) of format values ``x``; NaN encodes as the canonical quiet NaN
    (all-ones exponent, top significand bit; S.1..1.1..1 for FN).  Non-values raise."""
    fmt = get(fmt)
    arr = _as_float64(x, f"encode in {fmt.name}")
    if not fmt.has_inf and np.isinf(arr).any():
        raise ContextError(f"encode in {fmt.name}: infinity is not a {fmt.name} value")
    _repr_check(arr, fmt, f"encode in {fmt.name}")
    M = fmt.man_bits
    a = np.abs(arr)
    fin = np.isfinite(a)
    av = np.where(fin, a, 0.0)
    normal = av >= fmt.min_normal
    # Format normals are float64 normals: read exponent and top significand bits directly.
    bits = av.view(np.int64)
    ef = np.where(normal, (bits >> 52) - 1023 + fmt.bias, 0)
    mf_normal = (bits >> (52 - M)) & ((1 << M) - 1)
    mf_sub = (np.where(normal, 0.0, av) / math.ldexp(1.0, fmt.emin - M)).astype(np.int64)
    mf = np.where(normal, mf_normal, mf_sub)
    code = (ef << M) | mf
    all_ones = (1 << fmt.exp_bits) - 1
    if fmt.nan_encoding == "ieee":
        code = np.where(np.isinf(a), all_ones << M, code)
        nan_code = (all_ones << M) | (1 << (M - 1))
    else:
        nan_code = (all_ones << M) | ((1 << M) - 1)
    code = np.where(np.isnan(a), nan_code, code)
    sign = np.signbit(arr).astype(np.int64) << (fmt.exp_bits + M)
    return code | np.where(np.isnan(a), 0, sign)
