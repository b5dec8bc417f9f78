"""A proven oracle: a scalar graph evaluated in Arb ball arithmetic, vectorised over samples.

Every node's value is an Arb ball (python-flint ``arb``) per sample, held in a numpy
object array, so one op over 8000 samples is one numpy call (about 1 us per sample and
op).  Alongside the balls each node carries a per-sample *status*:

* ``OK``: the ball encloses the node's exact real value;
* ``UNSURE``: at this precision the ball cannot decide the op's domain or a condition
  (a divisor ball holding 0, ``sqrt`` of a ball straddling 0, ``(< a b)`` with
  overlapping balls, a non-finite result ball); more precision may decide it;
* ``INVALID``: the exact value is surely not a real number (``log`` of a ball surely
  <= 0, a divisor that is exactly 0, ``sqrt`` of a ball surely < 0, INFINITY/NAN).

Statuses combine by the worst parent (a surely undefined operand makes the whole
expression undefined), except ``select``: a sample takes its status from the condition
and the branch it takes only, so a domain error in the branch not taken never reaches it.

:func:`reference` decides the output: a sample is **settled** when the lower and the
upper bound of its ball round (nearest-even, gmpy2 in the format's context) to the same
format value -- rounding is monotone, so every real in the ball, the exact value
included, then rounds to that value.  Undecided samples are re-evaluated at doubled
precision up to a cap and are otherwise ``UNSETTLED``: never scored.  Per-node reference
values (for "where the error starts") are the balls' midpoints split into float64
double-doubles: they are within the ball's radius of the exact value, not proven
correctly rounded.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import numpy as np

from scalarlab.scalars.errors import ScalarLabError

#: per-node, per-sample statuses (ordered: the worst of the parents wins)
OK, UNSURE, INVALID = 0, 1, 2
#: per-sample outcome of :func:`reference`
SETTLED, NOT_REAL, UNSETTLED, OUT_OF_RANGE = 0, 1, 2, 3
DEFAULT_START_BITS = 128
MAX_BITS = 1 << 14
GIVE_UP_UNBOUNDED = 3

_BOOL_OPS = {"lt", "le", "gt", "ge", "eq", "ne", "and", "or", "not", "isfinite", "isinf",
             "isnan", "isnormal", "signbit"}


class OracleError(ScalarLabError):
    """The ball oracle cannot evaluate a graph (an op without a ball rule, a non-scalar
    node); the message names the node and the op."""


def _flint():
    import flint
    return flint


# ---------------------------------------------------------------------- vectorised ops
def _ufunc(f, nin=1):
    return np.frompyfunc(f, nin, 1)


_U = {}


def _u(name):
    """Elementwise ``arb.<name>()`` over an object array."""
    f = _U.get(name)
    if f is None:
        f = _U[name] = _ufunc(lambda a, _n=name: getattr(a, _n)())
    return f


def _mask(f, A) -> np.ndarray:
    """A per-sample bool array from a predicate on balls."""
    if not len(A):
        return np.zeros(0, dtype=bool)
    return np.asarray(_ufunc(f)(A), dtype=bool)


def _pos(A):
    return _mask(lambda a: a > 0, A)


def _neg(A):
    return _mask(lambda a: a < 0, A)


def _nonneg(A):
    return _mask(lambda a: a >= 0, A)


def _nonpos(A):
    return _mask(lambda a: a <= 0, A)


def _zero(A):
    """The ball is exactly 0 (radius 0): a proven zero."""
    return _mask(lambda a: a.is_zero(), A)


def _finite(A):
    return _mask(lambda a: a.is_finite(), A)


def _full(v, n):
    """An object array of ``n`` entries: ``v`` itself if it is an array, else ``v`` n times."""
    if isinstance(v, np.ndarray):
        return v
    out = np.empty(n, dtype=object)
    out[:] = [v] * n
    return out


def _where(m, a, b):
    """Per sample ``a`` where ``m`` else ``b`` (balls or single balls)."""
    n = len(m)
    out = _full(b, n).copy()
    out[m] = _full(a, n)[m]
    return out


def _domain(ok, invalid=None):
    """A status array from 'surely in the domain' / 'surely outside' masks (the rest:
    UNSURE, to be decided at a higher precision)."""
    st = np.full(len(ok), UNSURE, dtype=np.int8)
    st[ok] = OK
    if invalid is not None:
        st[invalid] = INVALID
    return st


def _tri(yes, no):
    """Three-valued booleans (1 true, 0 false, -1 undecided) from two certainty masks."""
    t = np.full(len(yes), -1, dtype=np.int8)
    t[yes] = 1
    t[no] = 0
    return t


def _cmp(op, A, B):
    if op == "lt":
        return _tri(np.asarray(A < B, dtype=bool), np.asarray(A >= B, dtype=bool))
    if op == "le":
        return _tri(np.asarray(A <= B, dtype=bool), np.asarray(A > B, dtype=bool))
    if op == "gt":
        return _tri(np.asarray(A > B, dtype=bool), np.asarray(A <= B, dtype=bool))
    if op == "ge":
        return _tri(np.asarray(A >= B, dtype=bool), np.asarray(A < B, dtype=bool))
    # arb ==: both balls exact and equal; arb !=: the balls are disjoint
    eq = np.asarray(A == B, dtype=bool)
    ne = np.asarray(A != B, dtype=bool)
    return _tri(eq, ne) if op == "eq" else _tri(ne, eq)


def _integer_ball(A):
    """(is an exact integer, surely not an integer) per sample."""
    exact_int = _mask(lambda a: a.is_exact() and a.is_integer(), A)
    no_int = _mask(lambda a: a.is_finite() and not a.contains_integer(), A)
    return exact_int, no_int


def _pow(A, B, arb):
    """Real ``pow``: x > 0 any y; x = 0 with y > 0 (0) or y = 0 (1); x < 0 or a ball
    holding 0 only for an exact integer y (``x ** n`` in Arb, huge n included)."""
    n = len(A)
    xpos = _pos(A)
    out = np.empty(n, dtype=object)
    st = np.full(n, UNSURE, dtype=np.int8)
    if xpos.any():                  # the common case, one numpy call
        out[xpos] = A[xpos] ** B[xpos]
        st[xpos] = OK
    rest = np.flatnonzero(~xpos)
    if not len(rest):
        return out, st
    Ar, Br = A[rest], B[rest]
    xzero, xneg = _zero(Ar), _neg(Ar)
    yint, ynoint = _integer_ball(Br)
    ypos, yneg, yzero = _pos(Br), _neg(Br), _zero(Br)
    one = arb(1)
    for j, i in enumerate(rest):
        a, b = Ar[j], Br[j]
        out[i] = a
        if yzero[j]:
            out[i] = one            # pow(x, 0) = 1 for every x (C and FPCore)
            st[i] = OK
        elif yint[j]:
            if xzero[j] and yneg[j]:
                st[i] = INVALID     # 0 to a negative power: a pole
                continue
            out[i] = a ** int(b.unique_fmpz())
            st[i] = OK
        elif xzero[j]:
            st[i] = OK if ypos[j] else INVALID if yneg[j] else UNSURE
        elif xneg[j] and ynoint[j]:
            st[i] = INVALID         # negative base, non-integer exponent
    return out, st


def _rounding(A, op, arb):
    """floor/ceil/trunc/round/nearbyint: exact where the ball decides the integer."""
    def one(a):
        if op == "floor":
            return a.floor()
        if op == "ceil":
            return a.ceil()
        if op == "trunc":
            return a.floor() if a >= 0 else a.ceil() if a <= 0 else arb.nan()
        if op == "round":            # half away from zero
            return (a + arb(0.5)).floor() if a >= 0 else \
                (a - arb(0.5)).ceil() if a <= 0 else arb.nan()
        # nearbyint: half to even
        f = (a + arb(0.5)).floor()
        if f.is_exact() and (a + arb(0.5)) == f:      # exactly halfway: to the even one
            return f - 1 if int(f.unique_fmpz()) % 2 else f
        return f
    out = _ufunc(one)(A)
    return out, np.where(_mask(lambda a: a.is_exact(), out), OK, UNSURE).astype(np.int8)


def _fmod(A, B, op, arb):
    """fmod (quotient truncated) / remainder (quotient to nearest even)."""
    Q, st = _rounding(A / B, "trunc" if op == "fmod" else "nearbyint", arb)
    return A - Q * B, st


# ----------------------------------------------------------------------------- the fold
_CONSTANTS = None


def _constant_balls():
    """Payload strings of the FPCore named constants -> exact Arb constructors."""
    global _CONSTANTS
    if _CONSTANTS is None:
        from scalarlab.graph.importers.fpcore import const_value
        arb = _flint().arb
        table = {
            "E": lambda: arb(1).exp(), "LOG2E": lambda: 1 / arb(2).log(),
            "LOG10E": lambda: 1 / arb(10).log(), "LN2": lambda: arb(2).log(),
            "LN10": lambda: arb(10).log(), "PI": arb.pi, "PI_2": lambda: arb.pi() / 2,
            "PI_4": lambda: arb.pi() / 4, "M_1_PI": lambda: 1 / arb.pi(),
            "M_2_PI": lambda: 2 / arb.pi(), "M_2_SQRTPI": lambda: 2 / arb.pi().sqrt(),
            "SQRT2": lambda: arb(2).sqrt(), "SQRT1_2": lambda: 1 / arb(2).sqrt()}
        _CONSTANTS = {const_value(k): f for k, f in table.items()}
    return _CONSTANTS


def const_ball(value, where: str):
    """``(ball, status)`` of a const payload value at the current precision.

    The FPCore named constants (stored as 120-digit decimals) are recognised and built
    exactly in Arb (pi, e, logs, roots); decimals and ``p/q`` strings are parsed by Arb /
    as exact rationals, so a literal's ball encloses the literal itself."""
    flint = _flint()
    arb = flint.arb
    if isinstance(value, np.ndarray) and value.size == 1:
        value = value.reshape(-1)[0]
    if isinstance(value, str):
        s = value.strip()
        f = _constant_balls().get(s)
        if f is not None:
            return f(), OK
        try:
            if "/" in s:
                p, q = s.split("/")
                return arb(flint.fmpq(int(p), int(q))), OK
            low = s.lower()
            if low in ("inf", "+inf", "-inf", "infinity", "nan"):
                return arb.nan(), INVALID
            return arb(s), OK
        except (ValueError, ZeroDivisionError) as exc:
            raise OracleError(f"{where}: constant {s[:40]!r} is not a number Arb reads: "
                              f"{exc}") from None
    try:
        if hasattr(value, "numerator") and hasattr(value, "denominator") \
                and not isinstance(value, float):
            return arb(flint.fmpq(int(value.numerator), int(value.denominator))), OK
        v = float(value)
    except (TypeError, ValueError):
        raise OracleError(f"{where}: constant {value!r} is not a number") from None
    if not math.isfinite(v):
        return arb.nan(), INVALID          # INFINITY / NAN: not a real number
    return arb(v), OK


def evaluate(graph, payload, X: np.ndarray, prec: int):
    """``(values, status)``: per node an object array of balls (real nodes) or an int8
    array of three-valued booleans (1/0/-1, boolean nodes), and its status array.

    ``X``: ``(n, k)`` float64 samples, column j = the j-th input node (node order).
    Balls are computed at ``prec`` bits (Arb's working precision; inputs are exact)."""
    flint = _flint()
    arb = flint.arb
    X = np.asarray(X, dtype=np.float64)
    n = X.shape[0]
    with working_precision(prec):
        return _evaluate(graph, payload, X, n, arb)


@contextlib.contextmanager
def working_precision(prec: int):
    """Arb's (process-global) working precision set to ``prec`` bits inside the block."""
    flint = _flint()
    old = flint.ctx.prec
    flint.ctx.prec = int(prec)
    try:
        yield
    finally:
        flint.ctx.prec = old


def _evaluate(graph, payload, X, n, arb):
    vals: list = [None] * len(graph.nodes)
    stat: list = [None] * len(graph.nodes)
    col = 0
    to_arb = _ufunc(arb)
    for node in graph.nodes:
        op = node.kind.op
        where = f"node {node.id} ({op})"
        if tuple(node.out_shape or ()) not in ((), (1,)):
            raise OracleError(f"{where}: the ball oracle takes scalar nodes; shape "
                              f"{list(node.out_shape)}")
        ps = [vals[p] for p in node.parents]
        st = np.max([stat[p] for p in node.parents], axis=0).astype(np.int8) \
            if node.parents else np.zeros(n, dtype=np.int8)
        if op == "input":
            if col >= X.shape[1]:
                raise OracleError(f"{where}: {X.shape[1]} sample columns for more inputs")
            v = to_arb(X[:, col]) if n else np.empty(0, dtype=object)
            col += 1
            st = np.zeros(n, dtype=np.int8)
            st[~np.isfinite(X[:, col - 1])] = INVALID
        elif op == "const":
            c, cs = const_ball(payload.get(node.id)["value"], where)
            v = np.empty(n, dtype=object)
            v[:] = [c] * n
            st = np.full(n, cs, dtype=np.int8)
        elif op == "select":
            c, a, b = ps
            cs, as_, bs = (stat[p] for p in node.parents)
            take = c == 1
            v = _where(take, a, b)
            st = np.where(take, as_, bs).astype(np.int8)
            st[c == -1] = np.maximum(st[c == -1], UNSURE)
            st = np.maximum(st, cs).astype(np.int8)
        elif op in _BOOL_OPS:
            v = _boolean(op, ps, n)
        else:
            v, dom = _real(op, ps, n, arb, where)
            if dom is not None:
                st = np.maximum(st, dom).astype(np.int8)
            # a result ball that is not finite decides nothing (a pole, an overflow of
            # Arb's own range, NaN from an operand outside the domain)
            bad = (st == OK) & ~_finite(v)
            st[bad] = UNSURE
        vals[node.id] = v
        stat[node.id] = st
    return vals, stat


def _boolean(op, ps, n):
    if op in ("lt", "le", "gt", "ge", "eq", "ne"):
        return _cmp(op, ps[0], ps[1])
    if op == "not":
        a = ps[0]
        return np.where(a == -1, -1, 1 - a).astype(np.int8)
    if op in ("and", "or"):
        a, b = ps
        if op == "and":          # Kleene: false wins over undecided
            return np.where((a == 0) | (b == 0), 0,
                            np.where((a == 1) & (b == 1), 1, -1)).astype(np.int8)
        return np.where((a == 1) | (b == 1), 1,
                        np.where((a == 0) & (b == 0), 0, -1)).astype(np.int8)
    a = ps[0]
    if op == "isfinite":        # an exact real value is finite
        return np.ones(n, dtype=np.int8)
    if op in ("isinf", "isnan"):
        return np.zeros(n, dtype=np.int8)
    if op == "isnormal":
        return _tri(_mask(lambda t: t != 0, a), _zero(a))
    if op == "signbit":
        return _tri(_neg(a), _nonneg(a))
    raise AssertionError(op)


def _real(op, ps, n, arb, where):
    """``(values, domain status or None)`` of a real-valued op."""
    if op == "add":
        return ps[0] + ps[1], None
    if op == "sub":
        return ps[0] - ps[1], None
    if op == "mul":
        return ps[0] * ps[1], None
    if op == "div":
        a, b = ps
        nz = _mask(lambda t: t != 0, b)
        return a / _where(nz, b, arb(1)), _domain(nz, _zero(b))
    if op == "fma":
        return ps[0] * ps[1] + ps[2], None
    if op == "neg":
        return -ps[0], None
    if op == "abs":
        return _u("__abs__")(ps[0]), None
    a = ps[0]
    if op in ("exp", "sin", "cos", "atan", "tanh", "sinh", "cosh", "erf", "erfc", "expm1"):
        return _u(op)(a), None
    if op == "asinh":
        return _u("asinh")(a), None
    if op == "exp2":
        two = arb(2)
        return _ufunc(lambda t: two ** t)(a), None
    if op == "tan":
        return _u("tan")(a), None             # a pole in the ball: non-finite -> UNSURE
    if op in ("log", "log2", "log10"):
        ok = _pos(a)
        v = _u("log")(_where(ok, a, arb(1)))
        if op != "log":
            v = v / arb(2 if op == "log2" else 10).log()
        return v, _domain(ok, _nonpos(a))
    if op == "log1p":
        ok = _pos(a + 1)
        return _u("log1p")(_where(ok, a, arb(0))), _domain(ok, _nonpos(a + 1))
    if op == "sqrt":
        ok = _nonneg(a)
        return _u("sqrt")(_where(ok, a, arb(0))), _domain(ok, _neg(a))
    if op == "cbrt":
        pos, neg, zero = _pos(a), _neg(a), _zero(a)
        mag = _u("__abs__")(a)
        r = _ufunc(lambda t: t.root(3))(_where(pos | neg, mag, arb(1)))
        v = _where(neg, -r, _where(zero, arb(0), r))
        return v, _domain(pos | neg | zero)
    if op in ("asin", "acos"):
        ok = _mask(lambda t: abs(t) <= 1 if t.is_finite() else False, a)
        bad = _mask(lambda t: (t > 1) or (t < -1), a)
        return _u(op)(_where(ok, a, arb(0))), _domain(ok, bad)
    if op == "atanh":
        ok = _mask(lambda t: (t > -1) and (t < 1), a)
        bad = _mask(lambda t: (t >= 1) or (t <= -1), a)
        return _u("atanh")(_where(ok, a, arb(0))), _domain(ok, bad)
    if op == "acosh":
        ok = _mask(lambda t: t >= 1, a)
        return _u("acosh")(_where(ok, a, arb(1))), _domain(ok, _mask(lambda t: t < 1, a))
    if op in ("tgamma", "lgamma"):
        # poles at 0, -1, -2, ...: an exact non-positive integer is not real
        pole = _mask(lambda t: t.is_exact() and t.is_integer() and t <= 0, a)
        f = "gamma" if op == "tgamma" else "lgamma"
        if op == "lgamma":    # log |gamma|: Arb's lgamma is real only for x > 0
            v = _ufunc(lambda t: t.lgamma() if t > 0 else abs(t.gamma()).log())(a)
        else:
            v = _u(f)(a)
        return v, _domain(~pole, pole)
    if op in ("floor", "ceil", "trunc", "round", "nearbyint"):
        return _rounding(a, op, arb)
    b = ps[1] if len(ps) > 1 else None
    if op == "pow":
        return _pow(a, b, arb)
    if op == "hypot":
        return _u("sqrt")(a * a + b * b), None
    if op == "atan2":
        # atan2(0, 0) has no real value; a ball touching the negative x axis is cut
        zero = _zero(a) & _zero(b)
        return _ufunc(lambda y, x: arb.atan2(y, x))(a, b), _domain(~zero, zero)
    if op in ("fmax", "max", "fmin", "min"):
        # (a + b +- |a - b|) / 2 encloses max / min over the balls
        d = _u("__abs__")(a - b)
        return ((a + b + d) / 2 if op in ("fmax", "max") else (a + b - d) / 2), None
    if op == "fdim":
        gt, le = _pos(a - b), _nonpos(a - b)
        return _where(gt, a - b, arb(0)), _domain(gt | le)
    if op == "copysign":
        pos, neg = _nonneg(b), _neg(b)
        m = _u("__abs__")(a)
        return _where(neg, -m, m), _domain(pos | neg)
    if op in ("fmod", "remainder"):
        nz = _mask(lambda t: t != 0, b)
        v, st = _fmod(a, _where(nz, b, arb(1)), op, arb)
        return v, np.maximum(st, _domain(nz, _zero(b))).astype(np.int8)
    raise OracleError(f"{where}: no ball rule for op {op!r} in the Arb oracle")


# ------------------------------------------------------------------------- decisions
def round_exact(man: int, exp: int, fmt, gctx, entered: bool = False) -> float:
    """``man * 2^exp`` rounded once (nearest-even) into ``fmt`` with gmpy2 in the format's
    context ``gctx`` (``entered``: the caller is already inside it).  Exponents far
    outside the format are decided first (no big integer is ever built from them): above
    ``2^(emax+2)`` the value is ±inf, below a quarter of the smallest subnormal it is
    ±0."""
    import gmpy2
    if man == 0:
        return 0.0
    neg = man < 0
    top = exp + abs(man).bit_length()          # 2^(top-1) <= |v| < 2^top
    if top > fmt.emax + 2:
        return -math.inf if neg else math.inf
    tiny = fmt.emin - fmt.man_bits if fmt.subnormals else fmt.emin
    if top < tiny - 1:                           # |v| < 2^(tiny-2): rounds to 0
        return -0.0 if neg else 0.0
    # an exact rational, rounded once: MPFR subnormalizes with the rounding's ternary
    # value, so there is no double rounding below min_normal
    q = gmpy2.mpq(man << exp) if exp >= 0 else gmpy2.mpq(man, 1 << -exp)
    if entered:
        return float(gmpy2.mpfr(q))
    with gmpy2.context(gctx):
        return float(gmpy2.mpfr(q))


def round_ball(ball, fmt, gctx) -> tuple:
    """(lower bound, upper bound) of a ball, each rounded to nearest into ``fmt``.

    Arb's ``lower``/``upper`` round the bound outward at the working precision: call
    this inside :func:`working_precision` of the evaluation (a 53-bit bound would be a
    valid but useless one)."""
    lo = ball.lower().man_exp()
    hi = ball.upper().man_exp()
    return (round_exact(int(lo[0]), int(lo[1]), fmt, gctx),
            round_exact(int(hi[0]), int(hi[1]), fmt, gctx))


def _bounds(ball):
    """(man, exp) of the ball's lower and upper bounds (outward at working precision)."""
    lo = ball.lower().man_exp()
    hi = ball.upper().man_exp()
    return int(lo[0]), int(lo[1]), int(hi[0]), int(hi[1])


def _split(ball, arb):
    """(hi, lo): the ball's midpoint as a float64 double-double (±inf / 0 beyond range)."""
    m = ball.mid()
    h = float(m)
    if not math.isfinite(h) or h == 0.0:
        return h, 0.0
    return h, float(m - arb(h))


_BOUNDS = np.frompyfunc(_bounds, 1, 1)
_MID = np.frompyfunc(lambda b: float(b.mid()), 1, 1)


@dataclass
class Reference:
    """The oracle's answer for a batch of samples in one format."""
    outcome: np.ndarray        # per sample: SETTLED / NOT_REAL / UNSETTLED / OUT_OF_RANGE
    target: np.ndarray         # exact output correctly rounded into fmt (NaN unless settled)
    bits: np.ndarray           # working precision that decided the sample (0: never)
    nodes: list                # per node (hi, lo) midpoints (NaN where not real / unsettled)


def reference(graph, payload, X: np.ndarray, fmt, *, start_bits=DEFAULT_START_BITS,
              max_bits=MAX_BITS, node_values=True) -> Reference:
    """Decide each sample's output in ``fmt``, raising the precision (doubling) of the
    undecided ones up to ``max_bits``.  See the module docstring."""
    from scalarlab.scalars import formats
    arb = _flint().arb
    gctx = formats.gmpy2_context(fmt)
    X = np.asarray(X, dtype=np.float64)
    n = len(X)
    out_id = graph.output if graph.output is not None else len(graph.nodes) - 1
    outcome = np.full(n, UNSETTLED, dtype=np.int8)
    target = np.full(n, np.nan)
    used = np.zeros(n, dtype=np.int64)
    nodes = [(np.full(n, np.nan), np.full(n, np.nan)) for _ in graph.nodes]
    pending = np.arange(n)
    unbounded = np.zeros(n, dtype=np.int8)
    prec = max(int(start_bits), 2 * fmt.man_bits + 16)
    while len(pending) and prec <= max_bits:
        vals, stat = evaluate(graph, payload, X[pending], prec)
        v, st = vals[out_id], stat[out_id]
        done = np.zeros(len(pending), dtype=bool)
        with working_precision(prec):
            _decide(pending, v, st, fmt, gctx, prec, outcome, target, used, done)
        # An output ball without finite bounds at GIVE_UP_UNBOUNDED precisions in a row
        # comes from Arb's exponent range (exp of 1e300, a power of such), which more
        # precision does not extend: the sample stays unsettled without the costly rest.
        open_ = np.flatnonzero(~done & (st == UNSURE))
        if len(open_):
            inf_out = open_[~_finite(v[open_])]
            unbounded[pending[inf_out]] += 1
            done[inf_out[unbounded[pending[inf_out]] >= GIVE_UP_UNBOUNDED]] = True
        if node_values:
            settled = np.flatnonzero(done & (outcome[pending] == SETTLED))
            with working_precision(prec):
                _node_values(vals, stat, settled, pending, nodes, fmt, arb)
        pending = pending[~done]
        prec *= 2
    # MPFR knows only IEEE overflow: the format's own rule (E4M3FN's NaN above 464,
    # saturation) is applied by round_to_format, exact on the format's finite values
    ok = np.flatnonzero(outcome == SETTLED)
    if len(ok):
        target[ok] = formats.round_to_format(target[ok], fmt, "nearest_even")
        gone = ok[~np.isfinite(target[ok])]
        outcome[gone] = OUT_OF_RANGE
        target[gone] = np.nan
    return Reference(outcome, target, used, nodes)


def _node_values(vals, stat, settled, pending, nodes, fmt, arb):
    """Midpoints of every node's balls on the settled samples, as (hi, lo) float64
    pairs; the low part only where a format narrower than binary64 needs it (its
    correct rounding of hi + lo reads lo's sign at a tie of hi)."""
    wide = fmt.is_binary64
    for k, nv in enumerate(vals):
        if nv.dtype == object:
            sel = settled[stat[k][settled] == OK]
            if not len(sel):
                continue
            if wide:
                h = np.asarray(_MID(nv[sel]), dtype=np.float64)
                lo = np.zeros(len(sel))
            else:
                pairs = [_split(b, arb) for b in nv[sel]]
                h = np.array([p[0] for p in pairs])
                lo = np.array([p[1] for p in pairs])
            nodes[k][0][pending[sel]] = h
            nodes[k][1][pending[sel]] = lo
        else:                              # booleans: 1.0 / 0.0
            ok = settled[nv[settled] >= 0]
            nodes[k][0][pending[ok]] = nv[ok]
            nodes[k][1][pending[ok]] = 0.0


def _decide(pending, v, st, fmt, gctx, prec, outcome, target, used, done):
    """Per pending sample: not real, settled (both bounds round alike) or still open."""
    import gmpy2
    bad = st == INVALID
    outcome[pending[bad]] = NOT_REAL
    used[pending[bad]] = prec
    done[bad] = True
    ok = np.flatnonzero(st == OK)
    if not len(ok):
        return
    ends = _BOUNDS(v[ok])
    with gmpy2.context(gctx):
        for j, (ml, el, mh, eh) in zip(ok, ends):
            lo = round_exact(ml, el, fmt, gctx, True)
            if lo != round_exact(mh, eh, fmt, gctx, True):
                continue
            # -0 == +0: every value in the ball rounds to 0
            i = pending[j]
            done[j], used[i] = True, prec
            if math.isinf(lo):        # finite, beyond the format: Herbie's "infinite"
                outcome[i] = OUT_OF_RANGE
            else:
                outcome[i], target[i] = SETTLED, lo + 0.0
