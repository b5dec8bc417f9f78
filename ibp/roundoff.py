"""Rigorous round-off error bounds of a scalar graph over an input box (symbolic Taylor forms).

The method of Solovyev et al. (FPTaylor, FM 2015 / TOPLAS 2018), in its mean-value form.
Every operation the lab's point context of format ``fmt`` rounds is modelled as

    v_i = z_i + r_i,      |r_i| <= u 2^floor(log2 |z_i|) + eta,

with ``z_i`` the operation applied to the parents' executed values, ``u = 2^-p`` (round to
nearest) and ``eta`` half the smallest subnormal: half an ulp of ``z_i``'s binade
(FPTaylor's power-of-2 model, up to 2x tighter than ``u |z_i|``); ``eta = 0`` for ``+`` and
``-``, whose subnormal results are exact under gradual underflow.  The executed output is
``f(x, r)`` for SOME admissible ``r`` and the exact real output is ``f(x, 0)``; by the mean
value theorem along the segment between them

    |f(x, r) - f(x, 0)| <= sum_i max |df/dr_i| * max |r_i|,

the maxima taken over the input box AND the whole rounding box.  So no separate
second-order term is needed: the forward pass runs in ``interval:float64`` (outward
rounding) with every rounded node's interval widened by its ``r`` interval, the reverse
pass runs the op table's VJP rules in the same context (``df/dr_i`` is node i's adjoint),
and that enclosure of the derivative over the rounding box IS the rigorous remainder.
``relu`` (exact, not differentiable at 0) gets the slope enclosure [0, 1] from its VJP.

Exact operations carry no term: inputs (format values), constants the format holds,
negation, ``fabs``, ``relu``, multiplication or division by a power of two (only the
subnormal ``eta`` term is kept when the power is negative), and a subtraction ``a - b``
(or ``a + b``) of two exactly known operands where Sterbenz's lemma (``b/2 <= a <= 2b``)
holds on the whole sub-box.  A constant the format does not hold carries its exact
conversion error ``|fl(c) - c|`` (gmpy2).

Branch and bound: the box is bisected (largest width relative to the initial box) where
the bound is largest, many boxes per pass (the interval context works on whole arrays);
the bound is the largest bound over the leaves, so it holds at every stage.  The
first-order value at each box's midpoint and far vertex is a value the first-order term
reaches; the search stops when the bound is within ``tol`` of the best such value, when
the boxes are ``MIN_REL_WIDTH`` of the initial widths, or at the time budget.  A box on
which a computed value may overflow, a square root or logarithm may see an argument
outside its domain, or an interval is unbounded gets an infinite bound (honest: the
model does not hold there).

All float64 arithmetic on the bounds themselves is rounded up (sums of non-negative terms
enlarged by their worst relative error, products and the ``eta`` scaling followed by one
ulp up).
"""
from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from scalarlab.graph.fold import node_args, rule_for
from scalarlab.graph.optable import OPS
from scalarlab.scalars import formats as F
from scalarlab.scalars.errors import ContextError
from scalarlab.scalars.values import Interval

from .errors import IBPError

__all__ = ["BoundError", "RoundoffBound", "RoundingModel", "roundoff_bound",
           "SUPPORTED_OPS", "EXACT_OPS"]

#: ops that never round (the executed value is the exact value of the executed operands)
EXACT_OPS = frozenset({"neg", "abs", "relu"})
#: arithmetic ops the binary contexts round once, correctly (IEEE 754)
ARITH_OPS = frozenset({"add", "sub", "mul", "div", "sqrt", "fma"})
#: ops whose subnormal results are exact (no ``eta`` term)
NO_ETA_OPS = frozenset({"add", "sub"})
#: correctly rounded scalar functions the model also covers (when the context declares them)
FUNCTION_OPS = frozenset({"exp", "log", "sin", "cos", "tan", "tanh", "atan", "sinh",
                          "cosh", "expm1", "log1p", "log2", "log10", "exp2", "asin", "acos",
                          "asinh", "atanh", "acosh", "cbrt", "sigmoid", "erf"})
SUPPORTED_OPS = frozenset({"input", "const"}) | EXACT_OPS | ARITH_OPS | FUNCTION_OPS
#: ops that need a strictly positive / non-negative argument
#: branch and bound: boxes narrower than this fraction of the initial box are not split;
#: an infinite bound that this many passes did not remove ends the search
MIN_REL_WIDTH = 2.0 ** -20
INF_PASSES = 12
#: bounds this close (a few subnormals) count as equal when stopping the search
FLOOR = 2.0 ** -1060
_POSITIVE = {"log": True, "log2": True, "log10": True, "sqrt": False, "acosh": False}


class BoundError(IBPError):
    """The graph, box or format cannot be bounded (names the node, op or argument)."""


@dataclass(frozen=True)
class RoundingModel:
    """Unit roundoff ``u`` and subnormal error ``eta`` of round-to-nearest in ``fmt``."""
    fmt: object
    u: Fraction
    eta: Fraction

    @classmethod
    def of(cls, fmt) -> "RoundingModel":
        p = fmt.man_bits + 1
        # half the smallest subnormal with gradual underflow; a flushing format can be
        # off by up to its smallest normal number near zero
        eta = (Fraction(fmt.min_subnormal) / 2 if fmt.subnormals
               else Fraction(fmt.min_normal))
        return cls(fmt, Fraction(1, 2 ** p), eta)


@dataclass
class RoundoffBound:
    """The result: ``absolute`` >= |executed - exact| everywhere in the box (float64,
    rounded up; ``inf`` when the model cannot bound it), ``relative`` (``nan`` unless the
    exact result is bounded away from 0 on every leaf), the midpoint estimate of the
    first-order optimum (``lower``: a value the first-order term reaches, not a bound),
    and search statistics."""
    absolute: float
    relative: float
    lower: float
    boxes: int
    passes: int
    seconds: float
    converged: bool
    rounded_nodes: int
    exact_nodes: list = field(default_factory=list)
    worst_box: tuple = ()


# ------------------------------------------------------------------------ helpers
def _up(x):
    """One ulp up (x >= 0 float64 arrays): a bound computed with round-to-nearest stays
    a bound after this when its own error is below half an ulp.  An exact 0 stays 0."""
    return np.where(x > 0, np.nextafter(x, np.inf), x)


def _sum_up(terms, n):
    """Upper bound of a sum of ``n`` non-negative float64 arrays: recursive summation's
    relative error is below (n - 1) 2^-53, so (1 + n 2^-52) covers it, then one ulp up."""
    if not terms:
        return None
    s = terms[0].copy()
    for t in terms[1:]:
        s = s + t
    return _up(s * (1.0 + n * 2.0 ** -52))


def _scale_up(s, q: Fraction):
    """``s * q`` rounded up, ``q`` a power of two (may underflow: then one ulp up)."""
    num, den = q.numerator, q.denominator
    e = num.bit_length() - 1 - (den.bit_length() - 1)
    out = np.ldexp(s, e)
    return np.where(s > 0, np.nextafter(out, np.inf), 0.0)   # > 0 even when it underflows


def _mag(v: Interval):
    return np.maximum(np.abs(v.lo), np.abs(v.hi))


def _mig(v: Interval):
    return np.where((v.lo > 0) | (v.hi < 0), np.minimum(np.abs(v.lo), np.abs(v.hi)), 0.0)


def _fraction_of(value) -> Fraction:
    """The exact value of a payload entry: a float as its binary fraction, text as read."""
    if isinstance(value, (float, np.floating)):
        return Fraction(float(value))
    return Fraction(str(value))


def _const_fact(payload, nid, fmt):
    """``(exact, power, err)``: whether constant ``nid`` is a value of ``fmt`` (converted
    without error), its exponent k when it is +-2^k (None otherwise), and the exact
    error |round(c) - c| of its one conversion (a float64 rounded up; None when the
    constant is not a finite number)."""
    import gmpy2
    val = np.asarray(payload.get(nid)["value"], dtype=object).reshape(-1)
    if val.size != 1:
        raise BoundError(f"bound: const node {nid} is not a scalar")
    try:
        q = _fraction_of(val[0])
    except (ValueError, ZeroDivisionError):
        return False, None, None              # inf/nan literals: not exact, caught later
    with gmpy2.context(F.gmpy2_context(fmt)):
        r = gmpy2.mpfr(gmpy2.mpq(q.numerator, q.denominator))
    if not gmpy2.is_finite(r):
        return False, None, None
    num, den = r.as_integer_ratio()
    diff = abs(Fraction(int(num), int(den)) - q)
    exact = diff == 0
    err = float(diff)
    if Fraction(err) < diff:
        err = float(np.nextafter(err, np.inf))
    power = None
    a = abs(q)
    if exact and a and a.numerator & (a.numerator - 1) == 0 \
            and a.denominator & (a.denominator - 1) == 0:
        power = (a.numerator.bit_length() - 1) - (a.denominator.bit_length() - 1)
    return exact, power, err


# ------------------------------------------------------------------------ the model
class _Program:
    """The graph's facts for the model: per node its op and role (input, exact,
    rounded with/without eta), constants' exactness and powers of two."""

    def __init__(self, graph, payload, model: RoundingModel, real_inputs: bool,
                 ctx_point=None):
        self.graph, self.payload, self.model = graph, payload, model
        nodes = graph.nodes
        out = graph.output if graph.output is not None else len(nodes) - 1
        self.out = out
        need = [False] * len(nodes)
        need[out] = True
        for i in range(out, -1, -1):
            if need[i]:
                for p in nodes[i].parents:
                    need[p] = True
        self.need = need
        cr = set(ctx_point.correctly_rounded) if ctx_point else None
        self.rounds = [False] * len(nodes)     # has a binade (or exact-constant) error term
        self.eta = [False] * len(nodes)        # has a subnormal (eta) term
        self.exact_value = [False] * len(nodes)  # executed value == exact real value
        self.sterbenz = [False] * len(nodes)   # exact where Sterbenz holds on the box
        self.power = {}
        self.const_err = {}
        for node in nodes:
            i, op = node.id, node.kind.op
            if not need[i]:
                continue
            if tuple(node.out_shape) != ():
                raise BoundError(f"bound: node {i} ({op}) has shape {list(node.out_shape)}; "
                                 f"only scalar programs are bounded (FPCore, or a graph "
                                 f"whose every node is a scalar)")
            if op not in SUPPORTED_OPS:
                raise BoundError(f"bound: node {i}: op {op} is not supported by the rounding "
                                 f"model (arithmetic, sqrt, fabs and correctly rounded "
                                 f"functions; no conditionals)")
            if op in FUNCTION_OPS and cr is not None and op not in cr:
                raise BoundError(f"bound: node {i}: {op} is not correctly rounded in "
                                 f"context {ctx_point.name}; the model needs it")
            ps = node.parents
            if op == "input":
                if real_inputs:
                    self.rounds[i] = self.eta[i] = True
                else:
                    self.exact_value[i] = True
            elif op == "const":
                exact, power, err = _const_fact(payload, i, model.fmt)
                if power is not None:
                    self.power[i] = power
                if exact:
                    self.exact_value[i] = True
                elif err is None:
                    raise BoundError(f"bound: const node {i} is not a finite number "
                                     f"in {model.fmt.name}")
                else:
                    # its rounding error is a known number: no eta, no binade bound
                    self.rounds[i] = True
                    self.const_err[i] = err
            elif op in EXACT_OPS:
                self.exact_value[i] = self.exact_value[ps[0]]
            elif op in ("mul", "div"):
                k = self._power_operand(op, ps)
                if k is not None:
                    # x * 2^k is exact unless the result is subnormal (k < 0 only)
                    self.eta[i] = k < 0
                    self.exact_value[i] = k >= 0 and self._exact_other(op, ps)
                else:
                    self.rounds[i] = self.eta[i] = True
            else:
                self.rounds[i] = True
                # a sum's subnormal result is exact only with gradual underflow
                self.eta[i] = op not in NO_ETA_OPS or not model.fmt.subnormals
                if op in ("add", "sub") and model.fmt.subnormals \
                        and all(self.exact_value[p] for p in ps):
                    self.sterbenz[i] = True

    def _power_operand(self, op, ps):
        """k when the product/quotient is by an exact +-2^k constant (else None)."""
        if op == "mul":
            for p in ps:
                if p in self.power:
                    return self.power[p]
            return None
        b = ps[1]
        return -self.power[b] if b in self.power else None

    def _exact_other(self, op, ps):
        if op == "div":
            return self.exact_value[ps[0]]
        return all(self.exact_value[p] for p in ps)


def _broadcast_const(v: Interval, n):
    return Interval(np.broadcast_to(np.asarray(v.lo, dtype=np.float64).reshape(()), (n,)).copy(),
                    np.broadcast_to(np.asarray(v.hi, dtype=np.float64).reshape(()), (n,)).copy())


def _sterbenz_mask(op, A: Interval, B: Interval):
    """Rows where ``a - b`` (``op == 'sub'``) or ``a + b`` is exact for every a in A, b in
    B by Sterbenz's lemma (b/2 <= a <= 2b, both signs).  Doubling is exact in float64."""
    if op == "add":
        B = Interval(-B.hi, -B.lo)
    pos = (B.lo > 0) & (2 * A.lo >= B.hi) & (A.hi <= 2 * B.lo)
    neg = (B.hi < 0) & (2 * A.hi <= B.lo) & (A.lo >= 2 * B.hi)
    return pos | neg


def _evaluate(prog: _Program, ctx, lo, hi, eta: float):
    """Per box (rows of ``lo``/``hi``, one column per input): ``(ub, fmig, lower)`` --
    the rigorous bound, the magnitude floor of the output's enclosure, and the same
    first-order sum from the enclosures' floors (for the midpoint estimate)."""
    g, model = prog.graph, prog.model
    n = lo.shape[0]
    nodes = g.nodes
    ids = g.input_ids()
    col = {nid: j for j, nid in enumerate(ids)}
    vals: list = [None] * len(nodes)
    bad = np.zeros(n, dtype=bool)
    exact_rows: dict = {}
    maxf = float(model.fmt.max_finite)
    pw: list = [None] * len(nodes)
    fwd: dict = {}
    for node in nodes:
        i, op = node.id, node.kind.op
        if not prog.need[i]:
            continue
        if op == "input":
            j = col[i]
            z = Interval(lo[:, j].copy(), hi[:, j].copy())
        else:
            args, attrs = node_args(g, prog.payload, ctx, node, vals)
            if op == "const":
                z = _broadcast_const(rule_for(OPS[op], ctx)(ctx, args, attrs, 0), n)
            else:
                if op in _POSITIVE:
                    a = args[0]
                    strict = _POSITIVE[op]
                    off = (a.lo <= 0) if strict else (a.lo < 0)
                    if off.any():
                        bad |= off
                        floor = np.nextafter(0.0, 1.0) if strict else 0.0
                        args[0] = Interval(np.where(off, floor, a.lo),
                                           np.maximum(np.where(off, floor, a.hi), floor))
                try:
                    z = rule_for(OPS[op], ctx)(ctx, args, attrs, 1)
                except ContextError as exc:
                    raise BoundError(f"bound: node {i} ({op}): {exc}") from None
                fwd[i] = (args, attrs)
                if op in ("add", "sub") and prog.sterbenz[i]:
                    exact_rows[i] = _sterbenz_mask(op, args[0], args[1])
        v = z
        if op not in ("input", "const"):
            # may overflow (or NaN): the model fails (x 2^k included)
            bad |= ~(_mag(z) <= maxf)
        if prog.rounds[i] or prog.eta[i]:
            m = _mag(z)
            # |fl(z) - z| <= u 2^floor(log2 |z|) + eta (FPTaylor's power-of-2 model:
            # half an ulp of the binade), over the box: with |z| <= mag(Z)
            if i in prog.const_err:
                w = np.full(n, prog.const_err[i])
            elif prog.rounds[i]:
                w = _scale_up(_binade(m), model.u)
            else:
                w = np.zeros(n)
            if i in exact_rows:
                w = np.where(exact_rows[i], 0.0, w)
            pw[i] = w
            r = _up(w + (eta if prog.eta[i] else 0.0))
            v = ctx.add(z, Interval(-r, r))
        vals[i] = v
    out = prog.out
    V = vals[out]
    bad |= ~np.isfinite(V.lo) | ~np.isfinite(V.hi)
    # reverse pass: adjoints of the node values (the op table's VJP rules, in intervals);
    # v_i = z_i + r_i, so dv_i/dz_i = 1 and df/dr_i = a_i
    adj: list = [None] * len(nodes)
    adj[out] = Interval(np.ones(n), np.ones(n))
    dterms, dlow, eterms, elow = [], [], [], []
    for i in range(out, -1, -1):
        a = adj[i]
        if a is None or not prog.need[i]:
            continue
        node = nodes[i]
        op = node.kind.op
        if prog.rounds[i]:
            with np.errstate(invalid="ignore"):
                dterms.append(np.where(pw[i] > 0, _up(_mag(a) * pw[i]), 0.0))
                dlow.append(np.where(pw[i] > 0, _mig(a) * pw[i], 0.0))
        if prog.eta[i]:
            eterms.append(_mag(a))
            elow.append(_mig(a))
        if op in ("input", "const"):
            continue
        args, attrs = fwd[i]                  # the (domain-clamped) forward operands
        try:
            cts = OPS[op].vjp(ctx, a, args, vals[i], attrs, 1)
        except ContextError as exc:
            raise BoundError(f"bound: node {i} ({op}) derivative: {exc}") from None
        for p, ct in zip(node.parents, cts):
            if ct is None:
                continue
            adj[p] = ct if adj[p] is None else ctx.add(adj[p], ct)
    zero = np.zeros(n)
    ds = _sum_up(dterms, len(dterms))
    es = _sum_up(eterms, len(eterms))
    ub = zero if ds is None else ds
    if es is not None:
        ub = _up(ub + _scale_up(es, model.eta))
    bad |= ~np.isfinite(ub)
    ub = np.where(bad, np.inf, ub)
    low = zero if not dlow else sum(dlow[1:], dlow[0])
    if elow:
        low = low + sum(elow[1:], elow[0]) * eta
    return ub, _mig(V), np.where(bad, 0.0, low)


def _binade(m):
    """2^floor(log2 m) for m > 0 (0 for 0, inf for inf): the binade's power of two."""
    f, e = np.frexp(m)
    out = np.ldexp(np.ones_like(m), e - 1)
    out = np.where(m > 0, out, 0.0)
    return np.where(np.isfinite(m), out, np.inf)


def _eta_up(model: RoundingModel) -> float:
    """``eta`` as a float64 rounded up (binary64's 2^-1075 is below float64's range)."""
    e = float(model.eta)
    if Fraction(e) < model.eta:
        e = float(np.nextafter(e, np.inf))
    return e


def roundoff_bound(graph, payload, box, fmt, *, real_inputs: bool = False,
                   tol: float = 0.02, budget_s: float = 1.0, batch: int = 128,
                   max_boxes: int = 200_000, ctx_point=None) -> RoundoffBound:
    """Bound |executed - exact| of ``graph``'s output over ``box`` in format ``fmt``.

    ``box``: one ``(lo, hi)`` pair per input node (node order), numbers or Fractions;
    each is enclosed outward in float64.  ``real_inputs``: the arguments are reals
    rounded once into ``fmt`` (FPTaylor's ``real`` variables) instead of format values.
    ``ctx_point``: the point context whose execution is bounded (its
    ``correctly_rounded`` set is checked for the scalar functions used).
    See the module docstring for the model and the search."""
    from scalarlab import scalars
    t0 = time.perf_counter()
    model = RoundingModel.of(fmt)
    ctx = scalars.get("interval:float64")
    prog = _Program(graph, payload, model, real_inputs, ctx_point)
    ids = graph.input_ids()
    if len(box) != len(ids):
        raise BoundError(f"bound: the box has {len(box)} intervals, the graph "
                         f"{len(ids)} inputs")
    lo0 = np.empty(len(ids))
    hi0 = np.empty(len(ids))
    for j, (a, b) in enumerate(box):
        fa, fb = Fraction(a), Fraction(b)
        if fa > fb:
            raise BoundError(f"bound: input {j}: empty interval [{a}, {b}]")
        la, hb = float(fa), float(fb)
        if Fraction(la) > fa:
            la = float(np.nextafter(la, -np.inf))
        if Fraction(hb) < fb:
            hb = float(np.nextafter(hb, np.inf))
        lo0[j], hi0[j] = la, hb
    eta = _eta_up(model)
    width0 = np.where(hi0 > lo0, hi0 - lo0, 1.0)
    k = len(ids)

    def run(lo, hi):
        # the first-order value at two points of each box (its midpoint, and its vertex
        # farthest from 0, where roundings of large values sit) estimates the optimum
        # from below: the search stops when the bound is that close
        mid = np.clip(0.5 * lo + 0.5 * hi, lo, hi)
        far = np.where(np.abs(hi) >= np.abs(lo), hi, lo)
        ub, fmig, low = _evaluate(prog, ctx, np.concatenate([lo, mid, far]),
                                  np.concatenate([hi, mid, far]), eta)
        m = len(lo)
        return ub[:m], fmig[:m], np.maximum(low[m:2 * m], low[2 * m:])

    lo, hi = lo0[None, :], hi0[None, :]
    ub, fmig, low = run(lo, hi)
    best_low = float(low.max())
    passes, evaluated = 1, 1
    # pool: a heap of (-ub, serial, lo, hi, fmig); leaves are never dropped
    heap = [(-float(ub[0]), 0, lo[0], hi[0], float(fmig[0]))]
    serial = 1
    converged = False
    while True:
        top = -heap[0][0]
        if not math.isfinite(top) and k == 0:
            break
        if top <= best_low * (1.0 + tol) + FLOOR or k == 0:
            converged = True
            break
        if time.perf_counter() - t0 > budget_s or evaluated >= max_boxes:
            break
        if math.isinf(top) and passes >= INF_PASSES:
            break                   # splitting did not remove the unbounded boxes
        take = []
        while heap and len(take) < batch and -heap[0][0] > best_low * (1.0 + tol) + FLOOR:
            take.append(heapq.heappop(heap))
        L = np.array([t[2] for t in take])
        H = np.array([t[3] for t in take])
        rel = (H - L) / width0
        dim = np.argmax(rel, axis=1)
        rows = np.arange(len(take))
        cut = 0.5 * L[rows, dim] + 0.5 * H[rows, dim]
        # a box 2^-20 of the initial widths is resolved: what is left there is the
        # binade bound's jump at a power of two, which no split removes
        splittable = (cut > L[rows, dim]) & (cut < H[rows, dim]) \
            & (rel[rows, dim] > MIN_REL_WIDTH)
        if not splittable.any():
            for t in take:
                heapq.heappush(heap, t)
            break
        for t, s in zip(take, splittable):
            if not s:
                heapq.heappush(heap, t)     # a point box: nothing left to split
        L, H, dim, cut, rows = L[splittable], H[splittable], dim[splittable], \
            cut[splittable], np.arange(int(splittable.sum()))
        H1 = H.copy()
        H1[rows, dim] = cut
        L2 = L.copy()
        L2[rows, dim] = cut
        CL = np.concatenate([L, L2])
        CH = np.concatenate([H1, H])
        ub, fmig, low = run(CL, CH)
        passes += 1
        evaluated += len(CL)
        best_low = max(best_low, float(low.max()))
        for j in range(len(CL)):
            heapq.heappush(heap, (-float(ub[j]), serial, CL[j], CH[j], float(fmig[j])))
            serial += 1
    absolute = -heap[0][0]
    worst = heap[0]
    fm = min(t[4] for t in heap)
    if fm > 0 and math.isfinite(absolute):
        relative = max(float(_up(np.float64(-t[0]) / np.float64(t[4]))) for t in heap)
    else:
        relative = math.nan
    return RoundoffBound(absolute=float(absolute), relative=relative, lower=best_low,
                         boxes=evaluated, passes=passes,
                         seconds=time.perf_counter() - t0, converged=converged,
                         rounded_nodes=sum(1 for i, r in enumerate(prog.rounds)
                                           if r and prog.need[i]),
                         exact_nodes=[i for i, e in enumerate(prog.exact_value)
                                      if e and prog.need[i]],
                         worst_box=tuple(zip(worst[2].tolist(), worst[3].tolist())))
