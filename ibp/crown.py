"""CROWN: backward linear bounds over the IR, sound in floating point.

CROWN (Zhang et al., "Efficient Neural Network Robustness Certification with General
Activation Functions", NeurIPS 2018) bounds a node z_t by linear functions of the input:
starting from ``Lambda = I`` at z_t it walks the graph backwards; an affine node
``z_v = M z_u + b`` maps ``Lambda -> Lambda M`` and adds ``Lambda b`` to the offset; a
nonlinear node ``z_v = s(z_u)`` with linear bounds ``a_l z + b_l <= s(z) <= a_u z + b_u``
on the box of z_u maps ``Lambda -> Lambda+ a_l + Lambda- a_u`` (for a lower bound) and adds
``Lambda+ b_l + Lambda- b_u``.  At the input the linear function is minimised over the box.
The upper bound of z_t is minus the lower bound of -z_t, so one pass runs the rows of
``[I; -I]`` together.

Floating-point soundness.  Every coefficient, offset and relaxation parameter is an
*interval* of the work context (the interval context, default ``interval:float64``; for
a binary base narrower than binary64, ``interval:float64``, whose results are rounded
outward into the base at the end: bfloat16's 8 bits would round every product of the
backward pass) that contains the exact real value the algorithm would compute from the
same relaxation choices:

* the Jacobian M and offset b of an affine node are enclosed by evaluating the op's own
  forward rule in the interval context at 0 and at every basis vector (one batched call;
  ``M e_k = f(e_k) - f(0)`` exactly for an affine f), so every affine op of the table
  (linear, conv2d, avg_pool2d, reshape/flatten/permute, sums, batchnorm_eval, and add /
  sub / mul / div by a constant) is handled by one rule;
* relaxation lines (chords, tangents) are computed in interval arithmetic from exact
  floats l, u (the endpoints of the input node's bound), so the exact line -- a valid bound
  by the convexity arguments below -- has its slope and offset inside the intervals;
* Lambda+ / Lambda- of an interval Lambda are the intervals [max(lo,0), max(hi,0)] and
  [min(lo,0), min(hi,0)], which contain the positive and negative parts of the exact value;
* products and sums use the context's outward rounding, and the final minimisation over
  the input box is an interval product whose lower end is taken.

So the returned bounds enclose the exact range of z_t over the box (tested against
sampling and vertices), and they differ from a plain float64 CROWN only by rounding.

Rounding enters additively, not through Lambda's radius (operator path, float64 work):
an interval Lambda's radius is multiplied by |M| at each affine node while its midpoint
is multiplied by M, so over many layers the radius outgrows the cancelling midpoint
(wrapping: a resnet18-shaped net of width 32 came out 5e-5 of the scale wider than
float64 CROWN, torchvision resnet18 1.7e-3).  So at every node z crossed Lambda is
collapsed to a float matrix P, and ``(Lambda - P) z`` is charged to the offset over z's
box (|rad| |z|, rounded up); a float Lambda crosses linear/conv2d by one float product
whose a-priori error ``gamma_N |Lambda| |M| |z_u|`` is charged the same way over the
parent's box.  Each node's rounding then costs about ``N u |Lambda| |M| |z|`` once, and
the bounds stay within ~1e-10 of float64 CROWN on those nets (``COLLAPSE = False``
keeps interval Lambda throughout, for comparison).

Guarantees (``guarantee=``).  ``"real"``: the boxes hold the exact real-valued results
over the input box.  ``"execution"`` (default): they also hold every result that the
point context of the interval's base format (``interval:bfloat16`` -> ``bfloat16``)
computes for inputs in the box.  That run's node k is ``f_k(executed inputs) + e_k``
with ``|e_k| <= err_k``, the a-priori rounding-error bound of the op's evaluation in that
format (:mod:`ibp.crown_rounding`: u |y| + eta for a correctly rounded op, the declared
ulps of float64's libm functions, ``((1+u)^n - 1)(|M| |x| + |b|) + n eta`` for sums of
products in any order, a running-error bound for linear's sequential dot products); the
backward pass adds ``Lambda [-err_k, err_k]`` at every node it crosses, and the
relaxations are taken over execution-sound boxes.

Never looser than IBP.  Every node's box is the intersection of (a) its op's interval
rule on its parents' final boxes -- for the execution guarantee widened by ``err_k``
where the rule encloses only the real result (sums of products: the interval products
are midpoint-radius enclosures of the exact product; functions the point context does
not round correctly) --, (b) CROWN's bound where the node needs one, and (c) the IBP
box of :func:`run_ibp` run for the same guarantee (for the execution guarantee only
where that box says it holds the executed values, as the fold's boxes do).  Each holds
the node's values, so the intersection does; disjoint boxes raise (one of them would be
unsound).  So the box is never wider than IBP's box of the same guarantee.

Relaxations (l < u the bounds of the input of the nonlinearity):

* relu: inactive (u <= 0) 0; active (l >= 0) identity; otherwise the upper chord
  ``u (z - l) / (u - l)`` and the adaptive lower line ``z`` if ``u >= -l`` else 0
  (CROWN-Ada).
* max_pool2d: per window, the lower line x[j*] (j* the entry of largest lower bound) and
  the upper line x[j*] when its lower bound is at least every other upper bound of the
  window (the max is then x[j*]), else the constant largest upper bound.
* tanh, sigmoid: convex part (u <= 0): upper chord, lower tangent at d = (l + u) / 2;
  concave part (l >= 0): lower chord, upper tangent at d; straddling 0 (as the paper):
  upper line the chord if s'(u) >= its slope, else the tangent at d in [0, u] through
  (l, s(l)) with d by bisection; lower line the mirror image (s odd / s(-z) = 1 - s(z)).
  Each line's validity condition is checked in interval arithmetic; where it cannot be
  confirmed (ties within rounding) the parallel lines through (l, s(l)) and (u, s(u))
  with slope m = min(s'(l), s'(u)) -- the smallest slope of s on [l, u], valid by the
  mean value theorem -- are used instead.
  Near-point boxes: a chord over a few ulps has a slope interval like [0, 2] (the
  difference of two roundings of s divided by the width).  The mean-value lines
  ``a z + lo(O)``, ``a z + hi(O)`` with a in A = s'(d) and
  ``O = s(d) - A d + (s'([l, u]) - A)([l, u] - d)`` are valid for any width (mean value
  theorem) and tight there (gap O(width^2) + rounding); each coordinate takes the pair
  with the smaller gap at the ends of [l, u].

Any other op (softmax, layernorm, exp, a product of two activations, ...) has no linear
form here: the backward pass stops at its box (its interval rule applied to its parents'
boxes, which CROWN bounds), adding ``min over the box of Lambda z`` -- sound because the
node's value is a point of its box.  So every graph of the op table is accepted, with
CROWN's tightness on its affine/relu/tanh/sigmoid/max-pool stretches.

Methods: ``"crown"`` bounds every input of a nonlinearity by CROWN (its relaxations use
those bounds); ``"crown-ibp"`` (Zhang et al. 2020) takes those intermediate bounds from
IBP and uses CROWN only for the output.  Nodes not bounded by CROWN get the interval rule
of their op applied to their parents' boxes, so every node has a box.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from scalarlab.graph.fold import node_args, rule_for
from scalarlab.graph.optable import OPS, OpDataError
from scalarlab.scalars.errors import ContextError
from scalarlab.scalars.functions import FUNCTIONS
from scalarlab.scalars.values import Interval

from . import crown_kernels, crown_ops, crown_window
from .box import BOTH, EXECUTION, REAL, Box
from .crown_ops import _dn, _up, fast_affine, fast_supported, matvec
from .crown_rounding import DOT_AFFINE, EXACT_AFFINE, PointErrors
from .errors import IBPError
from .propagate import interval_context

__all__ = ["run_crown", "CrownError", "METHODS", "GUARANTEES", "AFFINE_OPS", "RELAXED_OPS"]

METHODS = ("ibp", "crown", "crown-ibp")
#: what a box holds: the exact real result over the input box, or also every result of
#: the point context of the interval's base format (see ibp/crown_rounding.py)
GUARANTEES = (EXECUTION, REAL)

#: ops affine in their one input-dependent parent (the other parents are constants): read
#: from the op records' ``affine`` fact (graph/oprecord.py), listed here for readers
AFFINE_OPS = frozenset(name for name, rec in OPS.items() if rec.affine is not None)
#: elementwise nonlinearities with a linear relaxation here
RELAXED_OPS = frozenset({"relu", "tanh", "sigmoid", "max_pool2d"})


class CrownError(IBPError):
    """The input box does not fit the graph (one input node, matching shape)."""


class _NoBox(Exception):
    """A box the backward pass needs is missing (its rule gave up)."""


def run_crown(graph, payload, box: Box, ctx="interval:float64", method: str = "crown",
              output_id: Optional[int] = None, guarantee: str = "execution", *,
              spec=None, intermediate: Optional[str] = None,
              memory_limit: Optional[int] = None, jacobian: str = "operator",
              rows: str = "unstable", combine: str = "intersect"):
    """One :class:`Box` per node: CROWN bounds at the output and (``method="crown"``) at
    every input of a nonlinearity, the op's interval rule on its parents' boxes
    everywhere, intersected (see the module doc: never looser than IBP); ``None`` for
    nodes that are not ancestors of the output (``output_id``, default the graph's) and
    where a rule gives up (then for its dependents too), as in :func:`run_ibp`.

    ``guarantee="execution"`` (default): every box also holds what the point context of
    the interval's base format computes for inputs in the box (each node's a-priori
    rounding error enters the backward pass and widens the rule boxes that enclose only
    the real result); ``"real"``: the exact real-valued results only.  Boxes record it
    in ``guarantee`` (``("real", "execution")`` or ``("real",)``).

    ``box`` bounds the graph's one input; with leading batch axes each box of the batch
    is bounded separately (CROWN is per example).  ``method="ibp"`` returns
    :func:`run_ibp`'s boxes, for uniform callers.

    ``intermediate="ibp"`` is ``method="crown-ibp"`` (intermediate bounds from IBP, CROWN
    only where asked), ``"crown"`` is ``method="crown"``; ``None`` follows ``method``.

    ``spec=C`` (an array (m, n_out) or (m,) + the output's shape, exact floats): bound
    only the m linear functions ``C z_out`` of the output node and return their
    :class:`Box` (shape (m,), with the box's batch axes in front) instead of the per-node
    list; the backward pass from the output then carries 2m rows instead of 2 n_out.

    Memory: each backward pass needs about rows x columns x 16 bytes per interval array
    (rows = 2 n_t or 2m, columns the largest node crossed) times a working factor; the
    estimate is checked before allocating and a pass above ``memory_limit`` bytes
    (default ``SCALARLAB_CROWN_MEMORY`` -- bytes or ``"16G"`` --, else 4 GiB) raises a
    one-line :class:`CrownError` naming the node, the estimate and the limit.

    The rows of a pass run in chunks of about ``CHUNK_MEMORY`` bytes (512 MiB, at most
    the limit): memory is bounded by the chunk, time grows with the rows.

    ``rows="unstable"`` (default, as auto_LiRPA): an intermediate node whose consumers
    are all relus gets CROWN rows only where its box so far (rule and IBP) straddles 0;
    elsewhere the relu's relaxation is exact whatever the bound, so the other bounds are
    the same and that coordinate keeps the IBP box.  ``"all"``: every coordinate.

    ``combine="intersect"`` (default): a node's CROWN rows are intersected with its rule
    and IBP boxes (never looser than IBP).  ``"crown"``: the CROWN rows are kept as they
    are and only the coordinates without a row take the rule/IBP box, as auto_LiRPA
    0.7.1's CROWN does; equally sound, but CROWN-Ada's lower slope (1 if u > -l) depends
    on the intermediate boxes, so the two choices give different final bounds (neither
    is always tighter) on residual nets; this one reproduces auto_LiRPA's.

    ``jacobian="operator"`` (default) applies affine ops to Lambda as operators: linear,
    conv2d, batchnorm and elementwise affine ops by the float64 midpoint-radius kernels
    of :mod:`ibp.crown_ops` (interval:float64 work, float64 weights), any other op
    through its VJP rule (transposed operators, never the Jacobian); ``"vjp"`` takes the
    VJP rules for every op; ``"dense"`` materializes each Jacobian from the forward rule
    at the basis vectors (the reference for tests).
    """
    from scalarlab.graph.payload import as_payload
    from scalarlab.graph.validate import check_payload, ensure_valid

    from .propagate import run_ibp

    if method not in METHODS:
        raise IBPError(f"run_crown: unknown method {method!r}; use one of {', '.join(METHODS)}")
    if intermediate is not None:
        if intermediate not in ("ibp", "crown"):
            raise IBPError(f"run_crown: unknown intermediate {intermediate!r}; use 'ibp' or "
                           f"'crown'")
        if method == "ibp":
            raise IBPError("run_crown: intermediate= needs method 'crown' or 'crown-ibp'")
        method = "crown-ibp" if intermediate == "ibp" else "crown"
    if jacobian not in ("operator", "vjp", "dense"):
        raise IBPError(f"run_crown: unknown jacobian {jacobian!r}; use 'operator', 'vjp' or "
                       f"'dense'")
    if rows not in ("unstable", "all"):
        raise IBPError(f"run_crown: unknown rows {rows!r}; use 'unstable' or 'all'")
    if combine not in ("intersect", "crown"):
        raise IBPError(f"run_crown: unknown combine {combine!r}; use 'intersect' or 'crown'")
    limit = _memory_limit(memory_limit)
    _ESTIMATE[0] = 0
    if guarantee not in GUARANTEES:
        raise IBPError(f"run_crown: unknown guarantee {guarantee!r}; use one of "
                       f"{', '.join(GUARANTEES)}")
    ictx = interval_context(ctx)
    if not isinstance(box, Box):
        raise IBPError(f"run_crown: expected a Box for the input, got {type(box).__name__}")
    if method == "ibp":
        if spec is not None:
            raise IBPError("run_crown: spec= needs method 'crown' or 'crown-ibp'")
        return run_ibp(graph, payload, box, ictx, guarantee=guarantee)
    ensure_valid(graph)
    payload = as_payload(payload)
    check_payload(graph, payload)
    ins = graph.input_ids()
    if len(ins) != 1:
        raise CrownError(f"run_crown: the graph must have exactly one input node, it has "
                         f"{len(ins)} ({ins})")
    in_shape = tuple(graph.nodes[ins[0]].out_shape)
    nb = len(box.shape) - len(in_shape)
    if nb < 0 or tuple(box.shape[nb:]) != in_shape:
        raise CrownError(f"run_crown: box shape {list(box.shape)} does not match the input "
                         f"node's shape {list(in_shape)} (leading batch axes allowed)")
    out = graph.output if output_id is None else int(output_id)
    seed = None if spec is None else _spec_matrix(spec, tuple(graph.nodes[out].out_shape))
    errs = PointErrors(ictx) if guarantee == "execution" else None
    opts = {"limit": limit, "dense": jacobian == "dense", "seed": seed,
            "generic": jacobian == "vjp", "rows": rows, "combine": combine}
    # the whole batch in one fold; for the execution guarantee an IBP box is used only
    # where it says it holds the executed values (the fold's boxes carry both today)
    ibp = run_ibp(graph, payload, box, ictx, guarantee=guarantee)
    if errs is not None:
        ibp = [b if b is not None and EXECUTION in b.guarantee else None for b in ibp]
    if nb:
        per = [_crown_one(graph, payload, box[idx], ictx, method, out,
                          [None if b is None else b[idx] for b in ibp], errs, opts)
               for idx in np.ndindex(box.shape[:nb])]
        if seed is not None:
            return _tag(Box(np.stack([p.lo for p in per]).reshape(box.shape[:nb] + (-1,)),
                            np.stack([p.hi for p in per]).reshape(box.shape[:nb] + (-1,))),
                        guarantee)
        return [None if any(p[i] is None for p in per) else
                _tag(Box(np.stack([p[i].lo for p in per]).reshape(box.shape[:nb] + p0.shape),
                         np.stack([p[i].hi for p in per]).reshape(box.shape[:nb] + p0.shape)),
                     guarantee)
                for i, p0 in enumerate(per[0])]
    res = _crown_one(graph, payload, box, ictx, method, out, ibp, errs, opts)
    if seed is not None:
        return _tag(res, guarantee)
    return [None if b is None else _tag(b, guarantee) for b in res]


#: combine="crown": above this fraction of unstable coordinates every row of a node is
#: bounded by CROWN (auto_LiRPA 0.7.1's default ``minimum_sparsity``)
AUTOLIRPA_SPARSITY = 0.9
#: default ceiling of one backward pass's estimated memory (bytes)
DEFAULT_MEMORY_LIMIT = 4 * 2 ** 30
#: interval arrays of Lambda's size alive at once in a backward pass: Lambda, its
#: positive and negative parts, the product, a second branch's Lambda (skip connections)
#: and the VJP's temporaries
_WORK_FACTOR = 6


def _memory_limit(limit) -> int:
    """The byte limit of one backward pass: the keyword, else SCALARLAB_CROWN_MEMORY."""
    import os
    if limit is not None:
        return int(limit)
    env = os.environ.get("SCALARLAB_CROWN_MEMORY")
    if not env:
        return DEFAULT_MEMORY_LIMIT
    text = env.strip().upper().rstrip("B")
    scale = {"K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30, "T": 2 ** 40}.get(text[-1:], 1)
    try:
        value = float(text[:-1] if scale > 1 else text)
    except ValueError:
        raise IBPError(f"run_crown: SCALARLAB_CROWN_MEMORY={env!r} is not a byte count "
                       f"(e.g. 8000000000 or 8G)") from None
    if not value > 0:
        raise IBPError(f"run_crown: SCALARLAB_CROWN_MEMORY={env!r} must be positive")
    return int(value * scale)


def _spec_matrix(spec, out_shape) -> np.ndarray:
    """The specification as a float64 (m, n_out) matrix (its entries must be floats)."""
    n = int(np.prod(out_shape, dtype=np.int64))
    C = np.asarray(spec)
    if C.dtype == object or not np.issubdtype(C.dtype, np.number):
        raise IBPError(f"run_crown: spec must be a numeric array, got dtype {C.dtype}")
    C64 = C.astype(np.float64)
    if not np.array_equal(C64, C) or not np.all(np.isfinite(C64)):
        raise IBPError("run_crown: spec entries must be finite float64 values")
    if C64.ndim == 1 + len(out_shape) and tuple(C64.shape[1:]) == tuple(out_shape):
        C64 = C64.reshape(C64.shape[0], n)
    if C64.ndim != 2 or C64.shape[1] != n or C64.shape[0] == 0:
        raise IBPError(f"run_crown: spec shape {list(C.shape)} does not fit the output "
                       f"node's shape {list(out_shape)}: expected (m, {n}) or "
                       f"(m, {', '.join(map(str, out_shape))})" if out_shape else
                       f"run_crown: spec shape {list(C.shape)} does not fit the scalar "
                       f"output node: expected (m, 1) or (m,)")
    return C64


def _tag(box: Box, guarantee: str) -> Box:
    """Record the guarantee on the box (an execution box holds the real result too)."""
    object.__setattr__(box, "guarantee", BOTH if guarantee == EXECUTION else (REAL,))
    return box


# ------------------------------------------------------------------------------ helpers
def _flat(ctx, v) -> Interval:
    return ctx.reshape(v, (int(np.prod(ctx.shape(v), dtype=np.int64)),))


def _ends(v: Interval):
    return np.asarray(v.lo).reshape(-1), np.asarray(v.hi).reshape(-1)


def _depends(graph, input_id) -> list:
    dep = [False] * len(graph.nodes)
    dep[input_id] = True
    for n in graph.nodes:
        if any(dep[p] for p in n.parents):
            dep[n.id] = True
    return dep


def _crown_one(graph, payload, box, ictx, method, out, ibp, errs, opts) -> list:
    in_id = graph.input_ids()[0]
    dep = _depends(graph, in_id)
    need = [False] * len(graph.nodes)
    need[out] = True
    execution = errs is not None
    kinds = [_kind(graph, n, dep, execution) for n in graph.nodes]
    if method == "crown":
        # inputs of relaxations, and of ops without a linear form (their box, from their
        # interval rule, is where the backward pass stops), get CROWN boxes
        for n in graph.nodes:
            if dep[n.id] and (kinds[n.id] in ("relaxed", "maxpool") or kinds[n.id] is None):
                for p in n.parents:
                    need[p] = True
    for i in range(out, -1, -1):
        # a needed node without a linear form (a softmax head) gets its interval rule on
        # its inputs' boxes: those are bounded by CROWN instead (crown-ibp included)
        if need[i] and dep[i] and kinds[i] is None:
            for p in graph.nodes[i].parents:
                need[p] = True
    anc = [False] * len(graph.nodes)           # only ancestors of the output are bounded
    anc[out] = True
    for i in range(out, -1, -1):
        if anc[i]:
            for p in graph.nodes[i].parents:
                anc[p] = True
    ibp_iv = [None if b is None else Interval(np.asarray(b.lo), np.asarray(b.hi))
              for b in ibp]
    vals: list = [None] * len(graph.nodes)
    vals[in_id] = box.to_interval(ictx)
    st = _State(graph, payload, ictx, dep, kinds, ibp_iv, errs)
    st.limit, st.dense = opts["limit"], opts["dense"]
    st.generic, st.rows = opts["generic"], opts["rows"]
    seed = opts["seed"]
    spec_box = None
    for node in graph.nodes:
        i = node.id
        if i == in_id or not anc[i]:
            continue
        # Up to three boxes of the node, each holding its values (real, and executed for
        # the execution guarantee), so their intersection does too:
        # * the op's interval rule on its parents' final boxes (never looser than CROWN
        #   through an activation's own relaxation, whose lines lie below/above s), plus
        #   for the execution guarantee the op's a-priori rounding error where the
        #   interval rule encloses the real result only (products, sums, functions the
        #   point context does not round correctly);
        # * CROWN's backward bound where the node needs one;
        # * the IBP box (for the execution guarantee only if it says it holds).
        # A rule that cannot bound its input (log of a box reaching 0, tanh over
        # rationals) gives no box, as in run_ibp; so does every node depending on it.
        cands = []
        if all(vals[p] is not None for p in node.parents):
            try:
                args, attrs = node_args(graph, payload, ictx, node, vals)
                r = rule_for(OPS[node.kind.op], ictx)(ictx, args, attrs, 0)
                if errs is not None:             # constants too (exp of a const)
                    e = _rule_err(st, vals, i, node, r)
                    r = r if e is None else ictx.add(r, ictx.reshape(e, ictx.shape(r)))
                st.own[i] = r
                cands.append(r)
            except (ContextError, OpDataError, _NoBox):
                pass
        if seed is not None and i == out:
            # the specification's rows only: no identity seed at the output
            if dep[i] and kinds[i] is not None:
                try:
                    spec_box = _backward(st, vals, i, seed)
                except (ContextError, OpDataError, _NoBox):
                    pass
        crown_v = sel = None
        if not (seed is not None and i == out) and need[i] and dep[i] \
                and kinds[i] is not None \
                and (method != "crown" or kinds[i] not in ("relaxed", "maxpool")):
            try:
                sel = _unstable(st, i, out, anc, cands,
                                None if opts["combine"] == "crown" and cands else ibp_iv[i])
                if opts["combine"] == "crown" and sel is not None and (
                        np.count_nonzero(sel) > AUTOLIRPA_SPARSITY * sel.size):
                    # auto_LiRPA bounds only the unstable rows when they are at most 90%
                    # of the node ('minimum_sparsity'), else every row, kept as CROWN
                    sel = None
                crown_v = _backward(st, vals, i, select=sel)
            except (ContextError, OpDataError, _NoBox):
                pass
        plain = opts["combine"] == "crown"
        keep = plain and crown_v is not None
        if crown_v is not None and not keep:
            cands.append(crown_v)
        # combine="crown": auto_LiRPA's reference box is IBP on the parents' current
        # boxes (our rule box), not IBP from the input; that one only where no rule box is
        if ibp_iv[i] is not None and not (plain and cands):
            cands.append(ibp_iv[i])
        if cands:
            v = cands[0]
            for w in cands[1:]:
                v = _intersect(ictx, v, w, i)
            vals[i] = v
        if keep:
            vals[i] = crown_v if not cands else _crown_rows(ictx, crown_v, vals[i], sel)
    if seed is not None:
        return _spec_result(st, seed, vals[out], spec_box, out)
    return [None if v is None else Box.from_interval(ictx, v) for v in vals]


def _crown_rows(ictx, crown_v: Interval, rest: Interval, sel) -> Interval:
    """``combine="crown"``: CROWN's rows as they are (auto_LiRPA's choice), the other
    coordinates (no row: ``sel`` False) from the rule/IBP intersection ``rest``."""
    if sel is None:
        return crown_v
    m = np.asarray(sel).reshape(np.shape(crown_v.lo))
    return ictx.make(np.where(m, crown_v.lo, rest.lo), np.where(m, crown_v.hi, rest.hi))


def _unstable(st, i, out, anc, cands, ibp_box):
    """The coordinates of node i worth a CROWN row: where every consumer of i is a relu,
    only those whose box so far (its rule box and IBP box) straddles 0 -- for the others
    the relu's relaxation is exact (0 or the identity) whatever a tighter box says, so
    their CROWN bound would change no other bound (auto_LiRPA's unstable neurons).
    None (every coordinate) for the output, other consumers, and non-float work."""
    if i == out or st.rows == "all" or st.wctx.endpoint_kind != "float":
        return None
    users = [n for n in st.graph.nodes[i + 1:] if anc[n.id] and i in n.parents]
    if not users or any(n.kind.op != "relu" for n in users):
        return None
    boxes = list(cands) + ([] if ibp_box is None else [ibp_box])
    if not boxes:
        return None
    lo = np.max([np.asarray(b.lo, dtype=np.float64).reshape(-1) for b in boxes], axis=0)
    hi = np.min([np.asarray(b.hi, dtype=np.float64).reshape(-1) for b in boxes], axis=0)
    return (lo < 0) & (hi > 0)


def _spec_result(st, C, out_box, spec_box, out) -> Box:
    """The box of C z_out: CROWN's spec bound intersected with C applied to the output
    node's box (interval product: never looser than IBP)."""
    ictx = st.ictx
    cands = [] if spec_box is None else [spec_box]
    if out_box is not None:
        cands.append(ictx.matmul(ictx.convert(C), _flat(ictx, out_box)))
    if not cands:
        raise CrownError(f"run_crown: the output node {out} got no box, so the spec has none")
    v = cands[0]
    for w in cands[1:]:
        v = _intersect(ictx, v, w, out)
    return Box.from_interval(ictx, v)


class _State:
    """What the backward passes of one example share: the graph, the IBP boxes, the
    affine parts of the nodes crossed (``jac``) and their rounding-error bounds."""

    def __init__(self, graph, payload, ictx, dep, kinds, ibp, errs):
        self.graph, self.payload, self.ictx = graph, payload, ictx
        # CROWN's coefficients and offsets are intervals of the work context: float64
        # for a narrower binary base (bfloat16's 8 bits would round every product of the
        # backward pass), the base itself otherwise (mpmath, rational, float64)
        self.wctx = ictx
        if ictx.endpoint_kind == "float" and ictx.fmt is not None and ictx.fmt.precision < 53 \
                and ictx.fmt.exp_bits <= 11:
            from scalarlab import scalars
            self.wctx = scalars.get("interval:float64")
        self.dep, self.kinds, self.ibp, self.errs = dep, kinds, ibp, errs
        self.jac: dict = {}        # node id -> (parent, M, b) of an affine node
        self.err: dict = {}        # node id -> symmetric interval [-err, err] (or None)
        self.own: dict = {}        # node id -> its interval-rule box (execution: widened)
        self.off: dict = {}        # node id -> f(0) of an affine node (operator path)
        self.limit, self.dense = DEFAULT_MEMORY_LIMIT, False
        self.chunk = CHUNK_MEMORY
        self.generic = False       # True: every affine op through its VJP rule
        self.rows = "unstable"     # intermediate CROWN rows: "unstable" or "all"
        self.windows = WINDOWS     # Lambda on spatial windows where the ops allow
        self.collapse = COLLAPSE   # Lambda back to a float matrix at every node crossed

    def w(self, v):
        """A base-context box as a work-context interval (exact: the base's values are
        float64 values)."""
        if self.wctx is self.ictx or v is None:
            return v
        return Interval(np.asarray(v.lo, dtype=np.float64), np.asarray(v.hi, dtype=np.float64))

def _intersect(ictx, a: Interval, b: Interval, node_id: int) -> Interval:
    """[max lo, min hi]; disjoint boxes would mean that one of them is unsound."""
    lo = np.maximum(np.asarray(a.lo), np.asarray(b.lo))
    hi = np.minimum(np.asarray(a.hi), np.asarray(b.hi))
    if np.any(np.asarray(np.greater(lo, hi), dtype=bool)):
        k = tuple(int(t) for t in np.argwhere(np.asarray(np.greater(lo, hi), dtype=bool))[0])
        raise IBPError(f"run_crown: node {node_id}: the CROWN box [{a.lo[k]}, {a.hi[k]}] and "
                       f"the IBP box [{b.lo[k]}, {b.hi[k]}] are disjoint at index {list(k)} "
                       f"in {ictx.name} (one of them is unsound)")
    return Interval(lo, hi)


def _kind(graph, node, dep, execution=False):
    """How the backward pass crosses a node: "affine", "sum2" (add/sub of two
    input-dependent parents of the same shape), "relaxed", "maxpool", or None: no linear
    form here, the pass stops at the node's box (always sound: the node's value is some
    point of its box).  For the execution guarantee an affine op must also have a
    rounding-error bound (crown_rounding.DOT_AFFINE / EXACT_AFFINE): batchnorm_eval's
    evaluation order has none yet, so the pass stops at its box."""
    op = node.kind.op
    if op in ("relu", "tanh", "sigmoid"):
        return "relaxed"
    if op == "max_pool2d":
        return "maxpool"
    var = [p for p in node.parents if dep[p]]
    if op in ("add", "sub") and len(var) == 2 and all(
            tuple(graph.nodes[p].out_shape) == tuple(node.out_shape) for p in var):
        return "sum2"
    affine = OPS[op].affine if op in OPS else None
    if len(var) == 1 and (affine == "any" or (affine == "first" and node.parents[0] == var[0])):
        if execution and op not in DOT_AFFINE and op not in EXACT_AFFINE:
            return None              # no rounding-error bound for its evaluation here
        return "affine"
    return None


def _affine_parts(st, node, vals):
    """(variable parent id, M as an interval (n_v, n_u), offset b as an interval (n_v,))
    of an affine node, from its forward rule at 0 and at the basis vectors, in the work
    context (M and b hold the exact real coefficients; the point context's rounded
    constants are within the rounding-error bound of crown_rounding)."""
    graph, payload, ictx, dep = st.graph, st.payload, st.wctx, st.dep
    var = [p for p in node.parents if dep[p]]
    op = node.kind.op
    u = var[0]
    shp = tuple(graph.nodes[u].out_shape)
    n_u = int(np.prod(shp, dtype=np.int64))
    basis = np.concatenate([np.zeros((1, n_u)), np.eye(n_u)]).reshape((n_u + 1,) + shp)
    X = ictx.convert(basis)
    local = list(vals)
    for p in node.parents:          # constant parents broadcast over the basis batch
        if p != u:
            v = st.w(vals[p])
            local[p] = ictx.broadcast_to(ictx.reshape(v, (1,) + ictx.shape(v)),
                                         (n_u + 1,) + ictx.shape(v))
    local[u] = X
    args, attrs = node_args(graph, payload, ictx, node, local)
    Y = OPS[op].forward(ictx, args, attrs, 1)
    Y = ictx.reshape(Y, (n_u + 1, int(np.prod(ictx.shape(Y)[1:], dtype=np.int64))))
    b = ictx.take(Y, [0], axis=0)
    cols = ictx.sub(ictx.take(Y, list(range(1, n_u + 1)), axis=0), b)   # (n_u, n_v)
    return u, ictx.transpose(cols, (1, 0)), ictx.reshape(b, (ictx.shape(b)[1],))


def _affine_vjp(st, node, vals, lam):
    """(variable parent u, Lambda M as an interval (rows, n_u), offset b = f(0) (n_v,))
    of an affine node without forming M: Lambda M is the op's VJP rule (the transposed
    operator: conv -> the adjoint of im2col, linear -> g W, pools -> scattered windows)
    applied to the rows of Lambda in the work context.  For an affine f the cotangent
    of its varying argument is sum_i Lambda_i dy_i/dx = (Lambda M) exactly in the reals,
    whatever x is (zeros are passed), so the interval evaluation encloses it as the
    dense product does."""
    graph, payload, ictx = st.graph, st.payload, st.wctx
    u = next(p for p in node.parents if st.dep[p])
    k = node.parents.index(u)
    op = node.kind.op
    R = ictx.shape(lam)[0]
    shp_u, shp_v = tuple(graph.nodes[u].out_shape), tuple(node.out_shape)
    if node.id not in st.off:
        st.off[node.id] = _affine_offset(st, node, vals, u)
    local = list(vals)
    for p in node.parents:          # constant parents broadcast over Lambda's rows
        if p != u:
            v = st.w(vals[p])
            local[p] = ictx.broadcast_to(ictx.reshape(v, (1,) + ictx.shape(v)),
                                         (R,) + ictx.shape(v))
    local[u] = ictx.broadcast_to(ictx.zeros((1,) + shp_u), (R,) + shp_u)
    args, attrs = node_args(graph, payload, ictx, node, local)
    g = ictx.reshape(lam, (R,) + shp_v)
    y = ictx.broadcast_to(ictx.zeros((1,) + shp_v), (R,) + shp_v)
    rule = OPS[op].vjp
    if getattr(rule, "takes_needs", False):
        cots = rule(ictx, g, args, y, attrs, 1, needs=[j == k for j in range(len(args))])
    else:
        cots = rule(ictx, g, args, y, attrs, 1)
    gx = cots[k]
    if gx is None:                  # the op ignores x along Lambda: a zero row block
        gx = ictx.zeros((R,) + shp_u)
    n_u = int(np.prod(shp_u, dtype=np.int64))
    return u, ictx.reshape(gx, (R, n_u)), st.off[node.id]


def _affine_offset(st, node, vals, u):
    """f(0) of an affine node (flat, n_v), its forward rule in the work context."""
    ictx = st.wctx
    local = [None if v is None else st.w(v) for v in vals]
    local[u] = ictx.zeros(tuple(st.graph.nodes[u].out_shape))
    args, attrs = node_args(st.graph, st.payload, ictx, node, local)
    return _flat(ictx, OPS[node.kind.op].forward(ictx, args, attrs, 0))


def _split(ictx, lam: Interval):
    """Intervals enclosing the positive and negative parts of the exact Lambda."""
    lo, hi = lam.lo, lam.hi
    pos = Interval(np.maximum(lo, 0), np.maximum(hi, 0))
    neg = Interval(np.minimum(lo, 0), np.minimum(hi, 0))
    return ictx.make(pos.lo, pos.hi), ictx.make(neg.lo, neg.hi)


def _pt(ictx, a) -> Interval:
    return ictx.make(a, a)


def _relax(ictx, op, l, u):
    """(a_l, b_l, a_u, b_u) intervals per coordinate enclosing valid linear bounds of op on
    [l, u] (float endpoint arrays)."""
    n = l.shape[0]
    one, zero = ictx.ones((n,)), ictx.zeros((n,))
    L, U = _pt(ictx, l), _pt(ictx, u)
    point = l == u
    safe_den = ictx.sub(U, L)
    safe_den = ictx.where(point, one, safe_den)
    if op == "relu":
        dead, alive = u <= 0, l >= 0
        cross = ~dead & ~alive
        au = ictx.div(U, ictx.where(cross, safe_den, one))
        au = ictx.where(cross, au, ictx.where(alive, one, zero))
        bu = ictx.where(cross, ictx.mul(ictx.neg(L), au), zero)
        al = ictx.where(alive | (cross & (u >= -l)), one, zero)
        return al, zero, au, bu
    f = getattr(ictx, op)

    def deriv(s):
        if op == "tanh":
            return ictx.sub(one, ictx.square(s))
        return ictx.mul(s, ictx.sub(one, s))

    sl, su = f(L), f(U)
    d = np.asarray(l * 0.5 + u * 0.5)
    d = np.minimum(np.maximum(d, l), u)
    D = _pt(ictx, d)
    sd = f(D)
    td = deriv(sd)                                         # tangent at d: slope
    tb = ictx.sub(sd, ictx.mul(td, D))                     # ... and offset
    chord = ictx.div(ictx.sub(su, sl), safe_den)
    cb = ictx.sub(sl, ictx.mul(chord, L))
    m = ictx.minimum(deriv(sl), deriv(su))
    ml = ictx.sub(sl, ictx.mul(m, L))
    mu = ictx.sub(su, ictx.mul(m, U))
    convex, concave = u <= 0, l >= 0
    straddle = ~convex & ~concave
    if straddle.any():
        # CROWN's lines across 0 where they verify, the parallel lines elsewhere
        su_a, su_b, su_ok = _straddle_upper(ictx, op, l, u, f, deriv)
        sl_a, sl_b, sl_ok = _straddle_upper(ictx, op, -u, -l, f, deriv)
        sl_b = ictx.neg(sl_b) if op == "tanh" else ictx.sub(one, sl_b)  # odd / 1 - s(-z)
        mu_a = ictx.where(straddle & su_ok, su_a, m)
        mu = ictx.where(straddle & su_ok, su_b, mu)
        ml_a = ictx.where(straddle & sl_ok, sl_a, m)
        ml = ictx.where(straddle & sl_ok, sl_b, ml)
    else:
        mu_a = ml_a = m
    al = ictx.where(convex, td, ictx.where(concave, chord, ml_a))
    bl = ictx.where(convex, tb, ictx.where(concave, cb, ml))
    au = ictx.where(convex, chord, ictx.where(concave, td, mu_a))
    bu = ictx.where(convex, cb, ictx.where(concave, tb, mu))
    # Near-point boxes: the chord's slope is a difference of two roundings of s over a
    # few ulps of z (an interval like [0, 2]), and its offset is as wide.  The mean-value
    # lines are tight there: for every a in A = s'(d) (an interval) and z in Z = [l, u],
    #   s(z) - a z = s(d) - a d + (s'(xi) - a)(z - d),  xi in Z,
    # so s(z) - a z lies in O = s(d) - A d + (s'(Z) - A)(Z - d) (interval arithmetic),
    # and a z + lo(O) <= s(z) <= a z + hi(O) on Z: a theorem whatever the width, whose
    # gap is O(width^2 s'') + rounding.  Each coordinate keeps the pair of lines with the
    # smaller vertical gap at the ends of [l, u] (both pairs are valid).
    Z = ictx.make(l, u)
    off = ictx.add(ictx.sub(sd, ictx.mul(td, D)),
                   ictx.mul(ictx.sub(deriv(f(Z)), td), ictx.sub(Z, D)))
    ol, oh = _pt(ictx, off.lo), _pt(ictx, off.hi)
    use_mv = _gap(ictx, td, ol, td, oh, L, U) < _gap(ictx, al, bl, au, bu, L, U)
    if use_mv.any():
        al, au = ictx.where(use_mv, td, al), ictx.where(use_mv, td, au)
        bl, bu = ictx.where(use_mv, ol, bl), ictx.where(use_mv, oh, bu)
    # a point interval: the constant bounds [s(l), s(l)]
    al = ictx.where(point, zero, al)
    au = ictx.where(point, zero, au)
    bl = ictx.where(point, _pt(ictx, sl.lo), bl)
    bu = ictx.where(point, _pt(ictx, sl.hi), bu)
    return al, bl, au, bu


def _gap(ictx, al, bl, au, bu, L, U) -> np.ndarray:
    """Upper bound (float64) of the vertical gap between the upper and the lower line at
    the ends of [l, u] (the largest gap on [l, u]: the lines are straight); NaN -> inf."""
    g = [ictx.to_float64(ictx.sub(ictx.add(ictx.mul(au, Z), bu),
                                  ictx.add(ictx.mul(al, Z), bl))).hi for Z in (L, U)]
    m = np.maximum(np.asarray(g[0], dtype=np.float64), np.asarray(g[1], dtype=np.float64))
    return np.where(np.isnan(m), np.inf, m)


_F64 = {"tanh": (np.tanh, lambda t: 1.0 - t * t),
        "sigmoid": (lambda z: 1.0 / (1.0 + np.exp(-z)), lambda t: t * (1.0 - t))}


def _straddle_upper(ictx, op, l, u, f, deriv):
    """CROWN's upper line of s = tanh/sigmoid on [l, u] with l < 0 < u: the chord when
    s'(u) >= its slope (then chord - s is concave on [l, 0], convex on [0, u] and
    vanishes at both ends with a negative slope at u, so it is >= 0), else the tangent at
    d in [0, u] through (l, s(l)) (tangent at d >= 0 lies above s on [0, u] by concavity,
    and t_d(l) >= s(l) makes it lie above on [l, 0]; t_d(l) grows with d, so d is found
    by bisection and any larger d stays valid).  Both conditions are checked in interval
    arithmetic; entries where neither verifies (ties within rounding) get ``ok`` False.
    Entries outside the straddling case are computed too and masked by the caller."""
    fs, dfs = _F64[op]
    with np.errstate(all="ignore"):
        lf, uf = np.asarray(l, dtype=np.float64), np.asarray(u, dtype=np.float64)
        a_, b_ = np.zeros_like(uf), np.maximum(uf, 0.0)
        fl_ = fs(lf)
        for _ in range(60):        # smallest d with t_d(l) >= s(l), to 2^-60 of u
            mid = 0.5 * (a_ + b_)
            t = fs(mid)
            up = t + dfs(t) * (lf - mid) >= fl_
            b_ = np.where(up, mid, b_)
            a_ = np.where(up, a_, mid)
        base = np.where(np.isfinite(b_), b_, 0.0)
    one = ictx.ones((lf.size,))
    L, U = _pt(ictx, lf), _pt(ictx, uf)
    sl, su = f(L), f(U)
    den = ictx.sub(U, L)
    den = ictx.where(np.asarray(np.greater(den.lo, 0)), den, one)
    chord = ictx.div(ictx.sub(su, sl), den)
    cb = ictx.sub(sl, ictx.mul(chord, L))
    chord_ok = np.asarray(ictx.sub(deriv(su), chord).lo >= 0) & (uf > lf)
    # d a little above the float solution, so that t_d(l) >= s(l) survives the interval
    # check (t_d(l) grows with d: any larger d is valid); where the gap is too flat for
    # the first shift, larger shifts are tried
    tan_ok = np.zeros(lf.shape, dtype=bool)
    td = tb = None
    for shift in (2.0 ** -40, 2.0 ** -30, 2.0 ** -20, 2.0 ** -10):
        d = np.minimum(base + shift * (1.0 + np.abs(uf)), np.maximum(uf, 0.0))
        D = _pt(ictx, d)
        sd = f(D)
        t_a = deriv(sd)
        t_b = ictx.sub(sd, ictx.mul(t_a, D))
        gap = ictx.sub(ictx.add(sd, ictx.mul(t_a, ictx.sub(L, D))), sl)   # t_d(l) - s(l)
        new = np.asarray(gap.lo >= 0) & ~tan_ok
        if td is None:
            td, tb = t_a, t_b
        else:
            td, tb = ictx.where(new, t_a, td), ictx.where(new, t_b, tb)
        tan_ok |= new
        if (tan_ok | chord_ok).all():
            break
    a = ictx.where(chord_ok, chord, td)
    b = ictx.where(chord_ok, cb, tb)
    return a, b, chord_ok | tan_ok


def _maxpool_relax(graph, payload, ictx, node, vals):
    """(S_L, S_U, b_U) of a max_pool2d node: y >= x[j*] with j* the window entry of largest
    lower bound; y <= x[j*] too when that lower bound reaches every other upper bound of
    the window (then y = x[j*]), else y <= b_U = the window's largest upper bound.  The
    windows come from the op's forward rule at the basis vectors (e_k >= 0: the outputs
    whose window holds k become 1).  Every entry is an exact float: no rounding."""
    u = node.parents[0]
    shp = tuple(graph.nodes[u].out_shape)
    n_u = int(np.prod(shp, dtype=np.int64))
    from scalarlab import scalars
    f64 = scalars.get("float64")
    local = list(vals)
    local[u] = np.eye(n_u).reshape((n_u,) + shp)
    args, attrs = node_args(graph, payload, f64, node, local)
    member = np.asarray(OPS["max_pool2d"].forward(f64, args, attrs, 1)).reshape(n_u, -1).T > 0
    lo, hi = _ends(ictx.to_float64(vals[u]))
    rows = np.arange(member.shape[0])
    jstar = np.argmax(np.where(member, lo[None, :], -np.inf), axis=1)
    others = np.where(member, hi[None, :], -np.inf)
    top = np.max(others, axis=1)
    others[rows, jstar] = -np.inf
    exact = lo[jstar] >= np.max(others, axis=1)
    SL = np.zeros(member.shape)
    SL[rows, jstar] = 1.0
    SU = SL * exact[:, None]
    bU = np.where(exact, 0.0, top)
    return u, ictx.convert(SL), ictx.convert(SU), ictx.convert(bU)


def _maxpool_windows(graph, payload, ictx, node, vals):
    """:func:`_maxpool_relax` without its dense matrices: (u, j* per output, the mask of
    outputs whose max is x[j*], b_U as an interval).  The windows come from the forward
    rule at chunks of basis vectors (memory: a chunk x max(n_u, n_v) batch), with the
    largest lower bound (its first index, as np.argmax) and the two largest upper bounds
    of each window tracked across chunks."""
    u = node.parents[0]
    shp = tuple(graph.nodes[u].out_shape)
    n_u = int(np.prod(shp, dtype=np.int64))
    n_v = int(np.prod(tuple(node.out_shape), dtype=np.int64))
    from scalarlab import scalars
    f64 = scalars.get("float64")
    lo, hi = _ends(ictx.to_float64(vals[u]))
    rows = np.arange(n_v)
    best = np.full(n_v, -np.inf)
    jstar = np.zeros(n_v, dtype=np.int64)
    seen = np.zeros(n_v, dtype=bool)
    t1, t2 = np.full(n_v, -np.inf), np.full(n_v, -np.inf)
    t1i = np.full(n_v, -1, dtype=np.int64)
    step = max(1, min(n_u, 2 ** 22 // max(n_u, n_v)))
    local = list(vals)
    for a in range(0, n_u, step):
        b = min(n_u, a + step)
        E = np.zeros((b - a, n_u))
        E[np.arange(b - a), np.arange(a, b)] = 1.0
        local[u] = E.reshape((b - a,) + shp)
        args, attrs = node_args(graph, payload, f64, node, local)
        m = np.asarray(OPS["max_pool2d"].forward(f64, args, attrs, 1)).reshape(b - a, -1).T > 0
        lc = np.where(m, lo[None, a:b], -np.inf)
        k = np.argmax(lc, axis=1)
        v = lc[rows, k]
        has = m.any(axis=1)
        upd = has & (~seen | (v > best))
        best = np.where(upd, v, best)
        jstar = np.where(upd, a + k, jstar)
        seen |= has
        hc = np.where(m, hi[None, a:b], -np.inf)
        k1 = np.argmax(hc, axis=1)
        v1 = hc[rows, k1]
        hc[rows, k1] = -np.inf
        v2 = np.max(hc, axis=1) if hc.shape[1] > 1 else np.full(n_v, -np.inf)
        up1 = has & (v1 > t1)
        t2 = np.where(up1, np.maximum(t1, v2), np.maximum(t2, v1))
        t1i = np.where(up1, a + k1, t1i)
        t1 = np.where(up1, v1, t1)
    others = np.where(t1i == jstar, t2, t1)      # the largest upper bound but x[j*]'s
    exact = lo[jstar] >= others
    bU = np.where(exact, 0.0, t1)
    return u, jstar, exact, ictx.convert(bU)


def _scatter_columns(ictx, part, jstar, n_u, mask=None) -> Interval:
    """``part S`` for the selection matrix S with S[r, jstar[r]] = 1 (rows r where
    ``mask``): column r of ``part`` added into column jstar[r].  Outputs sharing a j*
    (overlapping windows) are split into classes of distinct j*: within a class the
    columns are placed (no arithmetic), classes are summed by the context (outward)."""
    R = ictx.shape(part)[0]
    r_all = np.arange(jstar.shape[0]) if mask is None else np.flatnonzero(mask)
    out = None
    order = np.argsort(jstar[r_all], kind="stable")
    r_sorted = r_all[order]
    js = jstar[r_sorted]
    # rank of each r within its j*: the class it goes to
    first = np.searchsorted(js, js, side="left")
    rank = np.arange(js.shape[0]) - first
    lo_p, hi_p = np.asarray(part.lo), np.asarray(part.hi)
    for c in range(int(rank.max()) + 1 if rank.size else 0):
        sel = r_sorted[rank == c]
        lo = np.zeros((R, n_u), dtype=lo_p.dtype)
        hi = np.zeros((R, n_u), dtype=hi_p.dtype)
        lo[:, jstar[sel]] = lo_p[:, sel]
        hi[:, jstar[sel]] = hi_p[:, sel]
        term = ictx.make(lo, hi)
        out = term if out is None else ictx.add(out, term)
    return ictx.zeros((R, n_u)) if out is None else out


def _scale_columns(ictx, pos, neg, al, au) -> Interval:
    """``pos * al + neg * au`` for pos >= 0 >= neg (the parts of Lambda) and slopes
    al, au >= 0 (every relaxation here has non-negative slopes), per column.

    The interval context's general product settles every tiny product exactly (rationals),
    which is slow on CROWN's large coefficient matrices (whose exact zeros come out of the
    midpoint-radius products as +-subnormal).  With the signs known the product interval
    is [pos.lo al.lo + neg.lo au.hi, pos.hi al.hi + neg.hi au.lo]; each float64 product
    and sum is rounded to nearest and then moved one ulp outward (np.nextafter), which
    encloses the exact value also under underflow (the error of a rounded subnormal
    result is at most half of the smallest subnormal) and overflow (inf stays inf).
    (Moved outward by :func:`crown_ops._up` / ``_dn``: at least one ulp.)
    Other slopes, and bases other than float/binary, use the context's product."""
    if (ictx.endpoint_kind != "float" or np.any(np.less(al.lo, 0)) or np.any(np.less(au.lo, 0))):
        return ictx.add(ictx.mul(pos, al), ictx.mul(neg, au))
    # a float below / above each rounded result (crown_ops: cheaper than np.nextafter;
    # NaN from an infinite end sends the product to the context below)
    dn, up = _dn, _up
    with np.errstate(all="ignore"):
        lo = dn(dn(pos.lo * al.lo) + dn(neg.lo * au.hi))
        hi = up(up(pos.hi * al.hi) + up(neg.hi * au.lo))
    if np.isnan(lo).any() or np.isnan(hi).any():
        return ictx.add(ictx.mul(pos, al), ictx.mul(neg, au))
    return ictx.make(lo, hi)


def _acc(ictx, lams, k, v):
    lams[k] = v if lams.get(k) is None else ictx.add(lams[k], v)


def _node_err(st, vals, i, node, kind):
    """err_i (flat float64) bounding the point context's rounding error at node i (None
    where it is exact, or for the real guarantee), from execution-sound magnitudes."""
    if st.errs is None:
        return None
    if i in st.err:
        return st.err[i]
    op = node.kind.op
    # a box holding the node's real values: its final box, else its (widened) rule box
    own = vals[i] if vals[i] is not None else st.own.get(i, st.ibp[i])
    if kind == "maxpool" or (kind == "relaxed" and op == "relu"):
        err = None                                   # exact in every format
    elif kind in ("relaxed", "sum2"):
        if own is None:
            raise _NoBox(i)
        err = st.errs.elementwise(op, st.errs.mag(own))
    else:                                            # affine
        u = next(p for p in node.parents if st.dep[p])
        n_u = int(np.prod(tuple(st.graph.nodes[u].out_shape), dtype=np.int64))
        n_v = int(np.prod(tuple(node.out_shape), dtype=np.int64))
        if op in EXACT_AFFINE or st.errs.exact:
            err = None
        elif vals[u] is None:
            raise _NoBox(u)
        elif not st.dense and (n_u + 1) * max(n_u, n_v) > _DENSE_ERR_ENTRIES:
            err = _affine_err_operator(st, node, vals, u)
        else:
            # a small Jacobian: the exact non-zero count per row (and linear's running
            # error bound), as the dense path
            if i not in st.jac:
                st.jac[i] = _affine_parts(st, node, vals)
            u, M, b = st.jac[i]
            err = st.errs.affine(op, M, b, st.errs.mag(vals[u]),
                                 _bn_offset_mag(st, node, vals) if op == "batchnorm_eval"
                                 else None)
            if op == "linear" and st.errs.sequential:
                # the known order gives a running-error bound; both bounds hold
                err = np.minimum(err, st.errs.linear_sequential(M, b, st.w(vals[u])))
    if err is not None:
        err = np.asarray(err, dtype=np.float64).reshape(-1)
        err = None if not np.any(err) else err
    st.err[i] = err
    return err


#: largest Jacobian (entries; its basis batch has (n_u + 1) x max(n_u, n_v)) formed for
#: an affine node's rounding-error bound on the operator path (16 MiB as an interval):
#: below it the bound is the dense path's (exact row counts, linear's running bound)
_DENSE_ERR_ENTRIES = 2 ** 20


def _affine_err_operator(st, node, vals, u):
    """err per output of a large affine node without forming M: s >= |M| |x| + |b| from
    two forward evaluations in the work context -- the width of f([0, xm]) (an interval
    enclosure of the range of M x + b over the box, whose exact width is sum |m_j| xm_j)
    plus |f(0)| (batchnorm: its own offset magnitude) -- and n = a fan-in bound + 2 >=
    the non-zero count of any row + 2 (:func:`_fan_in`)."""
    w, op = st.wctx, node.kind.op
    shp_u = tuple(st.graph.nodes[u].out_shape)
    n_v = int(np.prod(tuple(node.out_shape), dtype=np.int64))
    xm = st.errs.mag(vals[u])
    if not np.all(np.isfinite(xm)):
        return np.full(n_v, np.inf)
    local = [None if v is None else st.w(v) for v in vals]
    local[u] = Box(np.zeros(shp_u), xm.reshape(shp_u)).to_interval(w)
    args, attrs = node_args(st.graph, st.payload, w, node, local)
    Y = w.to_float64(OPS[op].forward(w, args, attrs, 0))
    with np.errstate(all="ignore"):
        width = np.nextafter(np.asarray(Y.hi, dtype=np.float64).reshape(-1)
                             - np.asarray(Y.lo, dtype=np.float64).reshape(-1), np.inf)
        if op == "batchnorm_eval":
            bm = _bn_offset_mag(st, node, vals)
        else:
            if node.id not in st.off:
                st.off[node.id] = _affine_offset(st, node, vals, u)
            bm = st.errs.mag(st.off[node.id])
        s = np.nextafter(width + bm, np.inf)
    return st.errs.affine_sums(op, s, _fan_in(st, node, u, args, attrs) + 2)


def _fan_in(st, node, u, args, attrs) -> int:
    """An upper bound on the non-zero coefficients of any row of an affine node's M: the
    window of a convolution (C_in / groups x kernel entries, from the weight's shape) or
    of an average pool, one for an elementwise op, linear's in_features, else every
    input entry (n_u).  Padding only removes entries, so each is >= the dense count."""
    op, w = node.kind.op, st.wctx
    n_u = int(np.prod(tuple(st.graph.nodes[u].out_shape), dtype=np.int64))
    rec = OPS[op]
    if rec.elementwise:
        return 1
    if op in ("conv1d", "conv2d", "conv3d"):
        return min(n_u, int(np.prod(w.shape(args[1])[1:], dtype=np.int64)))
    if op == "linear":
        return min(n_u, int(w.shape(args[1])[-1]))
    if op in ("avg_pool1d", "avg_pool2d", "avg_pool3d"):
        d = int(op[-2])
        k = attrs.get("kernel_size")
        ks = [int(k)] * d if np.ndim(k) == 0 else [int(v) for v in k]
        return min(n_u, int(np.prod(ks)))
    return n_u


def _bn_offset_mag(st, node, vals):
    """|inv gamma| |mean| + |beta| per output of a batchnorm_eval node (flat float64,
    rounded up): its forward rule in the work context at x = 0 with mean, gamma, beta
    replaced by -|mean|, |gamma|, |beta| (a box of that value; its upper ends)."""
    w = st.wctx
    local = list(vals)
    u = node.parents[0]
    local[u] = w.zeros(tuple(st.graph.nodes[u].out_shape))
    args, attrs = node_args(st.graph, st.payload, w, node, local)
    x, mean, var, gamma, beta, eps = args
    y = OPS["batchnorm_eval"].forward(w, [x, w.neg(w.abs(mean)), var, w.abs(gamma),
                                          w.abs(beta), eps], attrs, 0)
    return st.errs.mag(y)


def _abs_forward(st, node, vals):
    """Upper ends (flat float64) of the op's forward rule in the work context on the
    magnitudes of its operands and parameters: the sum of the absolute terms of a sum of
    products (mse_loss: on |a| + |b| and 0, as its terms are (a - b)^2)."""
    w = st.wctx
    local = [None if v is None else st.w(v) for v in vals]
    args, attrs = node_args(st.graph, st.payload, w, node, local)
    mags = []
    for a in args:
        if isinstance(a, Interval):
            m = st.errs.mag(w.to_float64(a)).reshape(np.shape(a.lo))
            a = w.make(m, m)
        mags.append(a)
    if node.kind.op == "mse_loss":
        mags = [w.add(mags[0], mags[1]), w.zeros(tuple(np.shape(mags[1].lo)))]
    y = OPS[node.kind.op].forward(w, mags, attrs, 0)
    return st.errs.mag(y)


def _reduction_length(st, node) -> int:
    """Roundings on one term's path, at most: the number of terms + 2 (products, sums, a
    final scaling or addition); a matmul's terms are its contraction length, other
    reductions' at most their largest operand's size."""
    shapes = [tuple(st.graph.nodes[p].out_shape) for p in node.parents]
    if node.kind.op == "matmul" and shapes and shapes[0]:
        return int(shapes[0][-1]) + 2
    return max([int(np.prod(s, dtype=np.int64)) for s in shapes] + [1]) + 2


def _rule_err(st, vals, i, node, r):
    """[-err, err] to add to node i's interval-rule box for the execution guarantee:
    the op's rounding error where the rule encloses only the real result (affine sums
    of products; activations and functions the point context does not round
    correctly); None where the rule's outward rounding in the base format already holds
    the correctly rounded point result (or the op's own rule is responsible)."""
    kind, op = st.kinds[i], node.kind.op
    if kind == "affine":
        if op in EXACT_AFFINE:
            return None
        err = _node_err(st, vals, i, node, kind)
        return None if err is None else st.ictx.make(-err, err)
    rec = OPS[op]
    if kind is None and rec.interval is None and (rec.dot or rec.reduces):
        # sums of products the interval forward rule encloses only in the real numbers
        # (midpoint-radius products; sums in another order than the point context's)
        err = st.errs.reduction(_abs_forward(st, node, vals), _reduction_length(st, node))
        return st.ictx.make(-err, err) if np.any(err) else None
    if op in FUNCTIONS and not st.errs.exact and op not in st.errs.base.correctly_rounded:
        err = st.errs.elementwise(op, st.errs.mag(r))
        return st.ictx.make(-err, err) if np.any(err) else None
    return None


#: the largest estimate (bytes) of the last run_crown call's backward passes (bench/
#: prints it beside the measured peak): see :func:`last_estimate`
_ESTIMATE = [0]


def last_estimate() -> int:
    """The largest memory estimate (bytes) of a backward pass in the last run_crown
    call (0 if it ran none): the bench compares it with the measured peak."""
    return _ESTIMATE[0]


def _pass_size(st, t):
    """(columns, dense bytes) of a backward pass from node t: the largest node crossed
    (a convolution on the generic VJP path counts its im2col adjoint's positions x C_in
    x kernel / 2 entries per row), and with ``jacobian="dense"`` the dense Jacobians and
    the max-pool windows' matrices, which do not scale with the rows."""
    graph, dep = st.graph, st.dep
    anc = [False] * (t + 1)
    anc[t] = True
    cols, jac = 1, 0
    for i in range(t, -1, -1):
        if not anc[i]:
            continue
        node = graph.nodes[i]
        n_i = int(np.prod(tuple(node.out_shape), dtype=np.int64))
        if dep[i]:
            cols = max(cols, n_i)
        op = node.kind.op
        if dep[i] and st.kinds[i] == "affine" and op in ("conv1d", "conv2d", "conv3d") \
                and not st.dense:
            k = node.kind.attrs.get("kernel_size", 1)
            kk = int(np.prod([k] * int(op[4]) if np.ndim(k) == 0 else list(k)))
            shp = tuple(node.out_shape)
            c_in = int(tuple(graph.nodes[node.parents[0]].out_shape)[0])
            if fast_supported(st, node) and not st.generic:
                # the fast transposed conv: a zero-padded input-sized buffer and one
                # positions x C_in x (group of ~64 / C_in kernel offsets) product
                g = max(1, min(kk, -(-64 // max(1, c_in))))
                n_in = int(np.prod(tuple(graph.nodes[node.parents[0]].out_shape),
                                   dtype=np.int64))
                cols = max(cols, 2 * n_in, (n_i // max(1, int(shp[0]))) * c_in * g)
            else:
                # the VJP's im2col adjoint holds positions x C_in x kernel entries per
                # row (the input's size times the windows' overlap), plus the interval
                # product's temporaries: counted as that many extra columns, x 3 / 6
                cols = max(cols, (n_i // max(1, int(shp[0]))) * c_in * kk // 2)
        if st.kinds[i] is not None or not dep[i]:
            for p in node.parents:
                anc[p] = True
                n_p = int(np.prod(tuple(graph.nodes[p].out_shape), dtype=np.int64))
                if st.dense and dep[p] and st.kinds[i] == "affine":
                    jac = max(jac, 2 * (n_p + 1) * max(n_p, n_i) * 16)
                if st.kinds[i] == "maxpool" and st.dense:
                    # its windows from the forward rule at the basis vectors (n_p^2
                    # float64) and the dense selection matrices S_L, S_U (intervals)
                    jac = max(jac, n_p * n_p * 8 + 6 * n_i * n_p * 16)
    return cols, jac


def _check_memory(st, t, rows, cols, jac):
    """Refuse (one line) a backward pass (one chunk) from node t with ``rows`` rows whose
    estimated memory passes the limit: rows x columns x 16 bytes (an interval of float64)
    x the working factor, plus the dense matrices when asked for."""
    est = rows * cols * 16 * _WORK_FACTOR + jac
    _ESTIMATE[0] = max(_ESTIMATE[0], est)
    if est > st.limit:
        op = st.graph.nodes[t].kind.op
        raise CrownError(
            f"run_crown: node {t} ({op}): one chunk of the backward pass needs about "
            f"{_gib(est)} ({rows} rows x {cols} columns of intervals"
            f"{' + dense matrices' if jac else ''}), over the limit of {_gib(st.limit)}; "
            f"raise memory_limit= or SCALARLAB_CROWN_MEMORY")


def _gib(nbytes) -> str:
    """Bytes as GiB (two decimals), or MiB below 0.1 GiB."""
    if nbytes >= 0.1 * 2 ** 30:
        return f"{nbytes / 2 ** 30:.2f} GiB"
    return f"{nbytes / 2 ** 20:.1f} MiB"


#: memory (bytes) of one chunk of rows of a backward pass: the seed's rows are run in
#: chunks of this estimated size (at most the limit), so a pass's memory is bounded by
#: the chunk and its time grows with the rows
CHUNK_MEMORY = 2 ** 29

#: keep Lambda on spatial windows (ibp/crown_window.py) on the operator path; False:
#: the whole layout at every node (the same numbers, slower: tests compare the two)
WINDOWS = True

#: collapse an interval Lambda to a float matrix at every node crossed, its radius
#: charged to the offset over the node's box (:func:`_collapse`); False: interval
#: Lambda throughout (wider on deep nets: the bench and tests compare the two)
COLLAPSE = True


def _backward(st, vals, t, seed=None, select=None) -> Interval:
    """CROWN bounds of node t (an Interval of its shape) from the boxes in ``vals``;
    with the execution guarantee each node crossed adds ``Lambda [-err, err]``.
    ``seed`` (a float64 (m, n_t) matrix): bounds of ``seed z_t`` instead, shape (m,).
    ``select`` (a bool mask of the m rows): bound only those rows (the others get
    [-inf, inf]: the caller's other boxes hold them).  The rows run in chunks whose
    estimated memory is at most ``CHUNK_MEMORY`` (and the limit); on the operator path a
    [C, H, W] node's identity rows are grouped by spatial tiles, each chunk's Lambda
    kept over its tile's receptive field (:mod:`ibp.crown_window`)."""
    shp = tuple(st.graph.nodes[t].out_shape)
    n = int(np.prod(shp, dtype=np.int64))
    m = n if seed is None else seed.shape[0]
    if seed is not None:
        shp = (m,)
    idx = np.arange(m) if select is None else np.flatnonzero(np.asarray(select).reshape(-1))
    cols, jac = _pass_size(st, t)
    per_row = cols * 16 * _WORK_FACTOR
    k = int(max(1, (min(st.limit, st.chunk) - jac) // (2 * per_row)))
    k = min(k, max(1, idx.size))
    _check_memory(st, t, 2 * k, cols, jac)
    windowed = seed is None and len(shp) == 3 and _windows_on(st)
    groups = crown_window.tiles(shp, idx) if windowed and idx.size else [idx]
    los, his, order = [], [], []
    for g in groups:
        for a in range(0, g.size, k):
            r = g[a: a + k]
            win = crown_window.rows_window(shp, r) if windowed else None
            if seed is None:
                C = np.zeros((r.size, crown_window.size(shp, win)))
                C[np.arange(r.size),
                  r if win is None else crown_window.seed_columns(shp, r, win)] = 1.0
            else:
                C = seed[r]
            lo_r, hi_r = _backward_rows(st, vals, t, C, win)
            los.append(np.asarray(lo_r))
            his.append(np.asarray(hi_r))
            order.append(r)
    if select is None and not windowed:
        lo, hi = np.concatenate(los), np.concatenate(his)
    else:                          # float work contexts only (see _crown_one)
        lo, hi = np.full(m, -np.inf), np.full(m, np.inf)
        if idx.size:
            o = np.concatenate(order)
            lo[o], hi[o] = np.concatenate(los), np.concatenate(his)
    # make rounds outward into the base format where the work context is wider
    return st.ictx.make(lo.reshape(shp), hi.reshape(shp))


def _windows_on(st) -> bool:
    """Whether Lambda may live on spatial windows: the operator path in float64 work
    (the dense and VJP references keep the whole layout)."""
    return (st.windows and not st.dense and not st.generic
            and getattr(st.wctx, "float64_endpoints", False))


def _mv(st, lam, v):
    """``Lambda v`` (v an interval vector): the fast midpoint-radius product for float64
    work (:func:`crown_ops.matvec`), else (or where it meets a non-finite entry) the work
    context's matmul."""
    if getattr(st.wctx, "float64_endpoints", False) and not st.generic \
            and np.ndim(v.lo) == 1:
        r = matvec(lam, v)
        if r is not None:
            return r
    return st.wctx.matmul(lam, v)


def _backward_rows(st, vals, t, C, win=None):
    """(lower, upper) float64 arrays bounding ``C z_t`` (C a float64 (m, n_t) matrix, or
    (m, columns of the window ``win`` of node t)): one backward pass of the 2m rows
    [C; -C].  Lambda of each node is kept over a spatial window where the ops crossed
    allow (:mod:`ibp.crown_window`), else over the whole node."""
    graph, payload, ictx, dep = st.graph, st.payload, st.wctx, st.dep
    n = C.shape[0]
    rows = 2 * n
    lams = {t: ictx.convert(np.concatenate([C, -C]))}
    wins = {t: win}
    c = ictx.zeros((rows,))
    lower = None

    def acc(k, v, w):
        """Lambda_k += v (v over window w): both laid out over their union first."""
        old = lams.get(k)
        if old is None:
            lams[k], wins[k] = v, w
            return
        to = crown_window.union(wins[k], w)
        shp_k = tuple(graph.nodes[k].out_shape)
        if wins[k] != to:
            old = crown_window.reembed(old, shp_k, wins[k], to)
        if w != to:
            v = crown_window.reembed(v, shp_k, w, to)
        lams[k], wins[k] = ictx.add(old, v), to

    for i in range(t, -1, -1):
        lam = lams.pop(i, None)
        win = wins.pop(i, None)
        if lam is None:
            continue
        node = graph.nodes[i]
        op = node.kind.op
        kind = st.kinds[i]
        shp_i = tuple(node.out_shape)
        if vals[i] is None and (not dep[i] or op == "input" or kind is None):
            raise _NoBox(i)
        if win is not None and not _window_rule(st, node, kind):
            lam, win = crown_window.reembed(lam, shp_i, win, None), None

        def cut(v):
            return crown_window.crop(v, shp_i, win)

        if i != t and dep[i] and kind is not None and op != "input" and _collapse_on(st):
            # Lambda back to a float matrix, its radius charged to the offset over the
            # node's box (keeps the rounding error additive: see _collapse)
            lam, c = _collapse(st, lam, c, vals[i], cut)
        if not dep[i]:                               # a constant: its (point) box
            c = ictx.add(c, _mv(st, lam, cut(_flat(ictx, st.w(vals[i])))))
            continue
        if op == "input":
            lower = ictx.add(_mv(st, lam, cut(_flat(ictx, st.w(vals[i])))), c)
            continue
        if kind is None:                             # no linear form: stop at its box
            c = ictx.add(c, _mv(st, lam, cut(_flat(ictx, st.w(vals[i])))))
            continue
        if kind in ("relaxed", "maxpool") and vals[node.parents[0]] is None:
            raise _NoBox(node.parents[0])
        if kind == "affine" and st.dense and i not in st.jac:
            st.jac[i] = _affine_parts(st, node, vals)
        # the executed value is the op on the executed inputs plus e_i, |e_i| <= err_i
        e = _node_err(st, vals, i, node, kind)
        if e is not None:
            e = cut(e)
            c = ictx.add(c, _mv(st, lam, ictx.make(-e, e)))
        if kind == "maxpool":
            wv = [None] * len(vals)
            wv[node.parents[0]] = st.w(vals[node.parents[0]])
            pos, neg = _split(ictx, lam)
            if st.dense or ictx.endpoint_kind != "float":
                u, SL, SU, bU = _maxpool_relax(graph, payload, ictx, node, wv)
                acc(u, ictx.add(ictx.matmul(pos, SL), ictx.matmul(neg, SU)), None)
            else:
                if ("maxpool", i) not in st.off:     # the same for every chunk of rows
                    st.off[("maxpool", i)] = _maxpool_windows(graph, payload, ictx, node, wv)
                u, jstar, exact, bU = st.off[("maxpool", i)]
                shp_u = tuple(graph.nodes[u].out_shape)
                n_u = int(np.prod(shp_u, dtype=np.int64))
                win_u = None
                if win is not None:
                    # the window's outputs select entries j* of the input: Lambda of the
                    # input lives on the smallest window holding them
                    jstar, exact = cut(jstar), cut(exact)
                    win_u = crown_window.rows_window(shp_u, jstar)
                    jstar = crown_window.seed_columns(shp_u, jstar, win_u)
                    n_u = crown_window.size(shp_u, win_u)
                    bU = cut(bU)
                acc(u, ictx.add(_scatter_columns(ictx, pos, jstar, n_u),
                                _scatter_columns(ictx, neg, jstar, n_u, exact)), win_u)
            c = ictx.add(c, _mv(st, neg, bU))
            continue
        if kind == "relaxed":
            u = node.parents[0]
            if ("relax", i) not in st.off:           # the same for every chunk of rows
                l_, u_ = _ends(st.w(vals[u]))
                st.off[("relax", i)] = _relax(ictx, op, l_, u_)
            al, bl, au, bu = (cut(v) for v in st.off[("relax", i)])
            fused = _relax_fused(st, lam, al, bl, au, bu)
            if fused is not None:
                acc(u, fused[0], win)
                c = ictx.add(c, fused[1])
                continue
            pos, neg = _split(ictx, lam)
            acc(u, _scale_columns(ictx, pos, neg, al, au), win)
            c = ictx.add(c, ictx.add(_mv(st, pos, bl), _mv(st, neg, bu)))
            continue
        if kind == "sum2":
            a, b = node.parents
            acc(a, lam, win)
            acc(b, lam if op == "add" else ictx.neg(lam), win)
            continue
        if st.dense:                                                       # affine
            u, M, b = st.jac[i]
            acc(u, ictx.matmul(lam, M), None)
        else:
            cb, win_u = None, None
            if not st.generic and fast_supported(st, node):
                u = next(p for p in node.parents if dep[p])
                if node.id not in st.off:
                    st.off[node.id] = _affine_offset(st, node, vals, u)
                b = st.off[node.id]
                fast = fast_affine(st, node, vals, lam, b, win)
                if fast is None and win is not None:
                    # no windowed rule after all (a decimal weight): the whole layout
                    lam, win = crown_window.reembed(lam, shp_i, win, None), None
                    fast = fast_affine(st, node, vals, lam, b)
            else:
                fast = None
            if fast is not None:
                u, lam_u, cb = fast[:3]
                win_u = fast[3] if len(fast) == 4 else None
            else:
                u, lam_u, b = _affine_vjp(st, node, vals, lam)
            acc(u, lam_u, win_u)
            if cb is not None:
                c = ictx.add(c, cb)
                continue
            if win_u is not None:                    # a diagonal op's offset, cropped
                b = cut(b)
        c = ictx.add(c, _mv(st, lam, b))
    if lower is None:                                # the input was never reached
        lower = c
    lo = lower.lo[:n]
    hi = ictx.neg(Interval(lower.lo[n:], lower.hi[n:])).hi
    return lo, hi


def _collapse_on(st) -> bool:
    """Whether Lambda is collapsed to a float matrix at every node crossed (float64 work
    on the operator path; the dense and VJP references keep interval Lambda)."""
    return (st.collapse and not st.dense and not st.generic
            and getattr(st.wctx, "float64_endpoints", False))


def _collapse(st, lam, c, box, cut):
    """(P, c + [-s, s]): an interval Lambda of node z replaced by a float matrix P, and
    the offset c widened by ``[-s, s]`` with ``|(Lambda - P) z| <= s`` for
    z in the node's box (``s = rad |z|``, rows rounded up: crown_kernels.collapse_rows).

    Why: every product of the backward pass rounds, and an interval Lambda carries those
    roundings as its radius, which the next affine node multiplies by |M| while the
    midpoint is multiplied by M: the radius grows like the product of the layers' |M|
    (the wrapping effect), the midpoint like the product of M with its cancellations.
    On a resnet18-shaped net of width 32 the bounds came out 5e-5 wider than float64
    CROWN (auto_LiRPA), at width 8 1e-9.  ``Lambda z = P z + (Lambda - P) z`` holds for
    the exact Lambda, so charging ``(Lambda - P) z`` once over the node's box (which
    holds z, real or executed) keeps the bound sound while each node's rounding enters
    additively, once.  No box, or a non-finite entry: Lambda stays an interval."""
    if box is None:
        return lam, c
    lo = np.ascontiguousarray(np.asarray(lam.lo, dtype=np.float64))
    hi = np.ascontiguousarray(np.asarray(lam.hi, dtype=np.float64))
    if lo.ndim != 2 or np.array_equal(lo, hi):
        return lam, c
    b = st.w(box)
    mag = np.maximum(np.abs(np.asarray(b.lo, dtype=np.float64)),
                     np.abs(np.asarray(b.hi, dtype=np.float64))).reshape(-1)
    mag = np.ascontiguousarray(cut(mag), dtype=np.float64)
    if mag.shape[0] != lo.shape[1]:
        return lam, c
    P, s, ok = crown_kernels.collapse_rows(lo, hi, mag)
    if not ok:
        return lam, c
    return Interval(P, P), st.wctx.add(c, Interval(-s, s))


def _relax_fused(st, lam, al, bl, au, bu):
    """(Lambda+ al + Lambda- au, Lambda+ bl + Lambda- bu) in one pass
    (:func:`crown_kernels.relax_rows`) for float64 work with slopes >= 0, else None
    (the caller's interval-context path, which also handles non-finite entries)."""
    if not getattr(st.wctx, "float64_endpoints", False) or st.generic \
            or np.ndim(lam.lo) != 2 or np.size(lam.lo) < crown_ops._FUSED_MIN:
        return None
    parts = [np.ascontiguousarray(np.asarray(v, dtype=np.float64).reshape(-1))
             for iv in (al, au, bl, bu) for v in (iv.lo, iv.hi)]
    if np.any(parts[0] < 0) or np.any(parts[2] < 0):
        return None
    lo = np.ascontiguousarray(np.asarray(lam.lo, dtype=np.float64))
    hi = np.ascontiguousarray(np.asarray(lam.hi, dtype=np.float64))
    olo, ohi, clo, chi, ok = crown_kernels.relax_rows(lo, hi, parts[0], parts[1], parts[2],
                                                      parts[3], parts[4], parts[5], parts[6],
                                                      parts[7])
    if not ok:
        return None
    return Interval(olo, ohi), Interval(clo, chi)


def _window_rule(st, node, kind) -> bool:
    """Whether the backward pass crosses the node with Lambda on a spatial window: the
    ops of :mod:`ibp.crown_window` on a [C, H, W] node (constants, the input and boxes
    only crop; convolutions, relaxations, max-pools, sums and diagonal affine ops map
    windows to windows)."""
    if len(tuple(node.out_shape)) != 3:
        return False
    if not st.dep[node.id] or node.kind.op == "input" or kind in (None, "relaxed", "sum2"):
        return True
    if kind == "maxpool":
        return not st.dense and st.wctx.endpoint_kind == "float"
    return (kind == "affine" and fast_supported(st, node)
            and node.kind.op not in ("linear", "flatten", "reshape"))
