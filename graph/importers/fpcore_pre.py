"""FPCore preconditions: sampling boxes from their conjuncts, and the rest compiled to IR
graphs that the lab's own contexts decide per sample.

:func:`precondition_boxes` splits ``:pre`` into per-argument bounds and residual
:class:`Condition` s.  A conjunct gives bounds when it compares one argument, or a
``fabs``/``fmin``/``fmax`` of arguments, with constants: ``(<= a x b)`` (chains of any
length, constants on either side), ``(<= (fabs x) c)`` -> ``[-c, c]``,
``(>= (fmin x y) c)`` -> both ``>= c``, ``(<= (fmax x y) c)`` -> both ``<= c``,
``(== x c)``; a chain bounds every term between its constants (``(<= -2 x y 2)``: both
in ``[-2, 2]``, ``(<= x y)`` stays a condition).  The constants are any closed
expressions (``(- PI)``, ``(* 2 PI)``, ``(sqrt 2)``, ``1e-3``), computed by the same
translator and fold as programs: exactly in the rational context where every op is
rational, else as an interval at 256 bits whose INWARD end is the bound (an irrational
constant is never a binary value, so the box loses nothing a sampled format holds).
Conjunct parts that are not such bounds stay residual.

A :class:`Condition` is the residual translated by the program translator
(:mod:`.fpcore_build`) into a graph with one input per argument and a 0/1 output, and
:meth:`Condition.decide` runs :func:`graph.fold.denote_all` on a batch of samples: in the
rational context when every op is rational (exact: true or false), else in
``interval:mpmath:P`` contexts -- a sample is accepted only when the condition is surely
true, surely-false ones are rejected, undecided ones are retried at a higher ``P`` and
finally rejected and counted as ``undecided``.  A first pass in ``interval:float64``
(numpy speed, enclosures by directed rounding) settles most samples; only the ones it
leaves undecided reach the exact or high-precision contexts.  A sample on which the
condition is not defined (``sqrt`` of a negative, division by zero: the fold's domain
errors) is rejected, as FPCore's NaN comparisons are false.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ..errors import GraphError
from .fpcore_build import build_expression
from .fpcore_parse import FPCoreError, Sym, Untranslatable, to_text

__all__ = ["Bound", "Condition", "Decision", "precondition_boxes", "constant_enclosure",
           "compile_condition", "RATIONAL_OPS", "PRECISIONS"]

#: Ops the rational context computes exactly on every input where they are defined.
RATIONAL_OPS = frozenset({
    "input", "const", "add", "sub", "mul", "div", "neg", "abs", "fmin", "fmax", "fdim",
    "copysign", "fmod", "remainder", "floor", "ceil", "trunc", "round", "nearbyint", "fma",
    "lt", "le", "gt", "ge", "eq", "ne", "and", "or", "not", "select",
    "isfinite", "isinf", "isnan", "isnormal", "signbit"})
#: Interval precisions (bits) tried in turn for conditions with irrational operations.
PRECISIONS = (256, 1024, 4096)
#: Precision of the enclosures of irrational bound constants.
BOUND_PRECISION = 256


def _is_rational(graph, payload) -> bool:
    """Can the rational context decide this graph exactly?  Every op rational and every
    constant a finite rational (the irrational constants are graph computations here)."""
    for n in graph.nodes:
        if n.kind.op not in RATIONAL_OPS:
            return False
        if n.kind.op == "const":
            v = payload.get(n.id)["value"]
            v = v.item() if isinstance(v, np.ndarray) and v.shape == () else v
            if isinstance(v, float) and not np.isfinite(v):
                return False
    return True


def _mpf_fraction(v) -> Fraction:
    """An mpmath mpf (finite) as an exact Fraction (shifts, never a decimal string)."""
    sign, man, exp, _ = v._mpf_
    man = -int(man) if sign else int(man)
    return Fraction(man << int(exp)) if exp >= 0 else Fraction(man, 1 << -int(exp))


def _ends(ctx, v):
    """(lo, hi) object arrays of a value (points: both the value)."""
    if hasattr(v, "lo"):
        return np.asarray(v.lo, dtype=object), np.asarray(v.hi, dtype=object)
    a = np.asarray(v, dtype=object)
    return a, a


def _eval_rows(graph, payload, ctx, X) -> tuple:
    """``(lo, hi, failed)`` of the output over the rows of ``X`` (one column per input;
    None for a graph without inputs).  A row where the fold meets a domain error fails
    alone: a failing batch is split in halves until the failing rows are single."""
    from ..fold import denote_all
    n = 1 if X is None else len(X)
    lo = np.empty(n, dtype=object)
    hi = np.empty(n, dtype=object)
    failed = np.zeros(n, dtype=bool)
    k = len(graph.input_ids())
    todo = [(0, n)]
    while todo:                              # a stack, not recursion (design rule)
        a, b = todo.pop()
        x = None
        if k:
            cols = [np.ascontiguousarray(X[a:b, j]) for j in range(k)]
            x = cols[0] if k == 1 else cols
        try:
            out = denote_all(graph, payload, x, ctx, partial=True,
                             label="precondition")[graph.output]
        except GraphError as exc:
            if "rule failed" not in str(exc):
                raise
            out = None                       # an arithmetic error of one row
        if out is None:
            if b - a == 1:
                failed[a] = True
            else:
                m = (a + b) // 2
                todo += [(a, m), (m, b)]
            continue
        l, h = _ends(ctx, out)
        lo[a:b] = l.reshape(-1) if k else l.reshape(-1)[0]
        hi[a:b] = h.reshape(-1) if k else h.reshape(-1)[0]
    return lo, hi, failed


@dataclass
class Decision:
    """Per sample: ``true`` (surely true: accept), ``undecided`` (not decided at the
    highest precision tried: rejected and counted), ``failed`` (not defined there)."""
    true: np.ndarray
    undecided: np.ndarray
    failed: np.ndarray


@dataclass
class Condition:
    """A boolean FPCore expression over the named arguments, as an IR graph whose output
    is a 0/1 truth value (input ``i`` = ``arguments[i]``)."""
    graph: object
    payload: object
    arguments: list
    text: str
    rational: bool
    node_text: list = field(default_factory=list)

    def decide(self, X, precisions=PRECISIONS) -> Decision:
        """Decide the condition on the rows of ``X`` (``(n, len(arguments))`` exact values:
        float64, or object arrays of Fractions)."""
        from scalarlab import scalars
        X = None if not self.arguments else np.asarray(X)
        n = 1 if X is None else len(X)
        true = np.zeros(n, dtype=bool)
        undecided = np.zeros(n, dtype=bool)
        failed = np.zeros(n, dtype=bool)
        rows = np.arange(n)
        if n > 1 and X is not None and X.dtype.kind == "f":
            # a cheap first pass: interval:float64 encloses every value (directed
            # rounding), so what it decides is decided; the rest goes to the exact or
            # high-precision contexts.  A row it cannot evaluate (a domain error of a
            # wide float64 enclosure) is not failed yet: it goes on too.  Only rows of
            # moderate magnitudes take it: interval:float64 products that underflow take
            # a slow exact path (about 100 us per entry, slower than mpq arithmetic), and
            # bit-pattern samples are mostly tiny.
            a = np.abs(X)
            mid = np.all((a == 0) | ((a >= 2.0 ** -60) & (a <= 2.0 ** 60)), axis=1)
            if np.any(mid):
                rest = self._pass(scalars.get("interval:float64"), X, rows[mid], true, None)
                rows = np.sort(np.concatenate([rows[~mid], rest]))
        if self.rational:
            if len(rows):
                lo, _, bad = _eval_rows(self.graph, self.payload, scalars.get("rational"),
                                        None if X is None else X[rows])
                failed[rows[bad]] = True
                true[rows] = [not f and v > 0 for v, f in zip(lo, bad)]
            return Decision(true, undecided, failed)
        for p in precisions:
            if not len(rows):
                break
            rows = self._pass(scalars.get(f"interval:mpmath:{int(p)}"), X, rows, true, failed)
        undecided[rows] = True
        return Decision(true, undecided, failed)

    def _pass(self, ctx, X, rows, true, failed):
        """Decide ``rows`` in the interval context ``ctx``: set ``true`` of the surely true
        ones (and ``failed`` of the undefined ones, unless None); return the rest."""
        lo, hi, bad = _eval_rows(self.graph, self.payload, ctx, None if X is None else X[rows])
        if failed is not None:
            failed[rows[bad]] = True
        yes = np.array([not f and bool(v > 0) for v, f in zip(lo, bad)], dtype=bool)
        no = np.array([not f and bool(v <= 0) for v, f in zip(hi, bad)], dtype=bool)
        true[rows[yes]] = True
        keep = ~yes & ~no if failed is None else ~bad & ~yes & ~no
        return rows[keep]

    def holds(self, env: dict) -> bool:
        """Is the condition surely true at one point (``{name: exact value}``)?"""
        x = np.array([[env[a] for a in self.arguments]], dtype=object)
        return bool(self.decide(x).true[0])


def compile_condition(expr, arguments, *, functions=None, precision="binary64") -> Condition:
    """``expr`` (an FPCore boolean expression) as a :class:`Condition`; an expression the
    translator refuses raises :class:`FPCoreError` with its reason."""
    try:
        b, out = build_expression(expr, arguments, precision=precision, functions=functions,
                                  exact_constants=True, boolean=True)
    except Untranslatable as exc:
        raise FPCoreError(f"precondition {to_text(expr)[:60]}: {exc}") from None
    g, p = b.graph(out)
    return Condition(g, p, list(arguments), to_text(expr), _is_rational(g, p), b.text)


def constant_enclosure(expr, *, functions=None):
    """``(lo, hi)`` exact Fractions enclosing the value of a closed expression (equal when
    it is computed exactly), ``"inf"``/``"-inf"`` for an infinite one, or None (not
    closed, not a number, undefined or NaN)."""
    from scalarlab import scalars
    try:
        b, out = build_expression(expr, [], functions=functions, exact_constants=True,
                                  boolean=False)
        g, p = b.graph(out)
    except (Untranslatable, GraphError):
        return None
    ctx = "rational" if _is_rational(g, p) else f"interval:mpmath:{BOUND_PRECISION}"
    lo, hi, failed = _eval_rows(g, p, scalars.get(ctx), None)
    if failed[0]:
        return None
    lo, hi = lo[0], hi[0]
    if ctx == "rational":
        q = Fraction(int(lo.numerator), int(lo.denominator))
        return q, q
    import mpmath
    if mpmath.isnan(lo) or mpmath.isnan(hi):
        return None
    if mpmath.isinf(lo) and lo == hi:
        return "inf" if lo > 0 else "-inf"
    if mpmath.isinf(lo) or mpmath.isinf(hi):
        return None
    return _mpf_fraction(lo), _mpf_fraction(hi)


# ------------------------------------------------------------------------ boxes
@dataclass
class Bound:
    """Per-argument interval from the precondition: ``lo``/``hi`` exact (None = open
    to infinity), ``lo_strict``/``hi_strict`` for ``<``."""
    lo: Fraction | None = None
    hi: Fraction | None = None
    lo_strict: bool = False
    hi_strict: bool = False

    def lower(self, v, strict):
        if self.lo is None or v > self.lo or (v == self.lo and strict):
            self.lo, self.lo_strict = v, strict

    def upper(self, v, strict):
        if self.hi is None or v < self.hi or (v == self.hi and strict):
            self.hi, self.hi_strict = v, strict

    @property
    def finite(self) -> bool:
        return self.lo is not None and self.hi is not None


def _conjuncts(e) -> list:
    out, todo = [], [e]
    while todo:
        t = todo.pop(0)
        if isinstance(t, list) and t and isinstance(t[0], Sym) and t[0].name == "and":
            todo = list(t[1:]) + todo
        else:
            out.append(t)
    return out


_FLIP = {">": "<", ">=": "<="}


def _bound_actions(term, side, c, strict, args):
    """The per-argument bounds equivalent to ``term <= c`` (side "hi") or ``term >= c``
    (side "lo"), ``c`` an enclosure ``(lo, hi)`` or "inf"/"-inf"; None when the
    comparison is not a box (e.g. ``(fabs x) >= c``, ``(fmin x y) <= c``).  Each action
    is ``(name, side, exact value or None for "no bound", strict)``; inexact constants
    are replaced by their inward end (then strictness is implied)."""
    if isinstance(c, str):                   # comparisons with +-infinity
        if ((side == "hi" and c == "inf") or (side == "lo" and c == "-inf")) \
                and _var_term(term, args):
            return []                        # x < inf holds for every finite sample
        return None
    lo, hi = c
    v = (hi if side == "lo" else lo)
    strict = strict and lo == hi
    if isinstance(term, Sym) and term.name in args:
        return [(term.name, side, v, strict)]
    if not (isinstance(term, list) and term and isinstance(term[0], Sym)):
        return None
    head, sub = term[0].name, term[1:]
    if head in ("+", "*") and len(sub) == 1:        # (* x) is x
        return _bound_actions(sub[0], side, c, strict, args)
    if head == "fabs" and len(sub) == 1 and side == "hi":
        # |t| <= c  <=>  -c <= t <= c
        a = _bound_actions(sub[0], "hi", (lo, hi), strict, args)
        b = _bound_actions(sub[0], "lo", (-hi, -lo), strict, args)
        return None if a is None or b is None else a + b
    if (head, side) in (("fmin", "lo"), ("fmax", "hi")) and len(sub) == 2:
        acts = [_bound_actions(t, side, c, strict, args) for t in sub]
        return None if any(a is None for a in acts) else acts[0] + acts[1]
    return None


def precondition_boxes(pre, arguments, functions=None, precision="binary64") -> tuple:
    """``(bounds, residual)``: ``bounds`` maps every argument to a :class:`Bound` from the
    conjuncts of ``pre`` (see the module docstring); ``residual`` is the list of
    :class:`Condition` s of what the bounds do not capture -- samplers keep a sample
    only when every one is surely true."""
    args = set(arguments)
    bounds = {a: Bound() for a in arguments}
    residual_exprs = []
    if pre is None:
        return bounds, []
    cache: dict = {}

    def enclosure(t):
        key = to_text(t)
        if key not in cache:
            cache[key] = (None if isinstance(t, Sym) and t.name in args
                          else constant_enclosure(t, functions=functions))
        return cache[key]

    def apply(acts):
        for name, side, v, s in acts:
            if v is not None:
                (bounds[name].lower if side == "lo" else bounds[name].upper)(v, s)

    for c in _conjuncts(pre):
        if isinstance(c, Sym) and c.name == "TRUE":
            continue
        if not (isinstance(c, list) and len(c) >= 3 and isinstance(c[0], Sym)
                and c[0].name in ("<", "<=", ">", ">=", "==")):
            residual_exprs.append(c)
            continue
        op, terms = c[0].name, list(c[1:])
        if op in _FLIP:
            op, terms = _FLIP[op], terms[::-1]
        strict = op == "<"
        for a, b in zip(terms, terms[1:]):
            acts, cb, ca = None, enclosure(b), enclosure(a)
            if cb is not None and ca is None:            # a <= const
                acts = _bound_actions(a, "hi", cb, strict, args)
                if op == "==" and acts is not None:
                    more = _bound_actions(a, "lo", cb, False, args)
                    acts = None if more is None else acts + more
            elif ca is not None and cb is None:          # const <= b
                acts = _bound_actions(b, "lo", ca, strict, args)
                if op == "==" and acts is not None:
                    more = _bound_actions(b, "hi", ca, False, args)
                    acts = None if more is None else acts + more
            if acts is None:                 # this pair stays a condition
                residual_exprs.append(c if len(terms) == 2 else [Sym(op), a, b])
                continue
            apply(acts)
        # a chain also bounds the terms between its constants: -2 <= x <= y <= 2 puts x
        # and y in [-2, 2].  These implied bounds only shrink the box to a set holding
        # every point that satisfies the chain; its pairs are still decided above.
        encs = [enclosure(t) for t in terms]
        for i, t in enumerate(terms):
            if encs[i] is not None:
                continue
            left = [e for e in encs[:max(i - 1, 0)] if e is not None]
            right = [e for e in encs[i + 2:] if e is not None]
            if left:
                apply(_bound_actions(t, "lo", left[-1], strict, args) or [])
            if right:
                apply(_bound_actions(t, "hi", right[0], strict, args) or [])
    residual = [compile_condition(e, arguments, functions=functions, precision=precision)
                for e in residual_exprs]
    return bounds, residual


def _var_term(t, args) -> bool:
    """An argument, or fabs/fmin/fmax of such terms (finite wherever the arguments are)."""
    if isinstance(t, Sym):
        return t.name in args
    return (isinstance(t, list) and len(t) >= 2 and isinstance(t[0], Sym)
            and t[0].name in ("fabs", "fmin", "fmax", "+", "*")
            and all(_var_term(u, args) for u in t[1:]))
