"""Interval bound propagation = the IR fold over an interval context.

There is no second set of op rules here: ``graph.denote_all`` runs the op table's forward
rules with an interval context, whose arithmetic encloses every point of its operands, or
an op's own tighter ``interval`` rule where its record has one (softmax).
A node whose rule cannot bound its input (log of a box reaching 0, ...) raises a
``ContextError`` inside the fold; with ``partial=True`` the fold records ``None`` for it
and for every node depending on it, and structural errors still raise.
"""
from __future__ import annotations

from typing import Optional

from scalarlab import scalars

from .box import EXECUTION, REAL, Box
from .errors import IBPError


def interval_context(ctx):
    """Resolve ``ctx`` (name or context) and insist that it is an interval context."""
    c = scalars.get(ctx)
    if not c.is_interval:
        raise IBPError(f"IBP needs an interval context (e.g. interval:binary32), got {c.name}")
    return c


def run_ibp(graph, payload, box: Box, ctx="interval:binary32",
            guarantee: str = EXECUTION) -> list[Optional[Box]]:
    """One :class:`Box` (or ``None`` where no bound could be derived) per node.

    ``box`` bounds the graph input; it may carry leading batch axes, in which case one
    call bounds every box of the batch.  ``guarantee`` (see :mod:`ibp.box`):
    ``"execution"`` (default) — every box holds the exact real result and every value
    the point context of ``ctx``'s format computes (the op table's interval rules,
    graph/interval_rules.py); ``"real"`` — the real result only: the per-op rules
    without their point-evaluation bound and the interval products as they are
    (tighter, and dense -> relu pairs take the fused pass); the boxes say which.
    """
    from scalarlab.graph import denote_all

    ictx = interval_context(ctx)
    if not isinstance(box, Box):
        raise IBPError(f"run_ibp: expected a Box for the input, got {type(box).__name__}")
    if guarantee not in (REAL, EXECUTION):
        raise IBPError(f"run_ibp: guarantee must be {REAL!r} or {EXECUTION!r}, got "
                       f"{guarantee!r}")
    from scalarlab.graph.interval_rules import guarantees, point_rounding
    x = box.to_interval(ictx)
    pr = point_rounding(ictx)
    if guarantee == EXECUTION and not (pr.kind == "exact" or pr.mirrored_dot):
        # the linear rule adds the point dot product's rounding bound to the affine box
        # (graph/interval_rules.dot_rule), so its relu can no longer come from the fused
        # pass: the fold runs the op table's rules
        kernels = {}
    else:
        kernels = _dense_relu_kernels(graph, ictx)
    if guarantee == REAL:
        kernels = {**_real_rule_kernels(graph, ictx), **kernels}
    values = denote_all(graph, payload, x, ictx, partial=True, kernels=kernels)
    # every rule the fold runs is execution-sound (graph/interval_rules.py); an input box
    # is a set of inputs (the point runs convert the same inputs), so its own flag is moot
    g = guarantees(ictx) if guarantee == EXECUTION else (REAL,)
    return [None if v is None else Box._of_result(v, g) for v in values]


def _real_rule_kernels(graph, ictx) -> dict:
    """Kernels running each op's ``real``-sound rule: a reformulating rule without its
    point-evaluation bound, the forward rule for the dot products and sums."""
    from scalarlab.graph.interval_rules import real_rule
    from scalarlab.graph.optable import OPS

    kernels = {}
    for node in graph.nodes:
        rec = OPS[node.kind.op]
        if rec.interval is None or node.kind.op == "input":
            continue
        f = real_rule(rec) or rec.forward
        kernels[node.id] = (lambda args, attrs, nb, f=f: f(ictx, args, attrs, nb))
    return kernels


def _dense_relu_kernels(graph, ictx) -> dict:
    """Per-node kernels (the fold's ``kernels`` hook) for the dense layers: a ``linear``
    node whose only consumer is a ``relu`` runs the context's ``affine_relu``, which also
    returns the relu of its result from the same compiled pass (and the operand pass of
    a dense layer reading that relu); the relu node returns that value when its input is
    that very result, and a ``linear`` node reading it passes the operand pass on.  No
    code runs between these nodes but the fold's own ops, which do not mutate values;
    anything else runs the op table's rule.  The boxes are bitwise those of the plain
    fold without the linear rule's execution bound (tested): :func:`run_ibp` uses them
    for the ``real`` guarantee, and for ``execution`` where the interval product mirrors
    the point one (no bound to add)."""
    if not hasattr(ictx, "affine_relu"):
        return {}
    from scalarlab.graph.fold import rule_for
    from scalarlab.graph.optable import OPS

    users: list = [[] for _ in graph.nodes]
    for node in graph.nodes:
        for q in node.parents:
            users[q].append(node.id)
    kernels: dict = {}
    stash: dict = {}        # linear id -> (its value, relu value, token)
    ready: dict = {}        # relu id -> token for the dense layer reading it

    def dense(lid, pid, fused):
        def kernel(args, attrs, nb):
            x, W, b = args
            token = ready.pop(pid, None)
            if not fused:
                return ictx.affine(x, W, b, x_prep=token)
            y, r, tok = ictx.affine_relu(x, W, b, x_prep=token)
            stash[lid] = (y, r, tok)
            return y
        return kernel

    def relu(rid, lid):
        rule = rule_for(OPS["relu"], ictx)

        def kernel(args, attrs, nb):
            st = stash.pop(lid, None)
            if st is not None and st[1] is not None and len(args) == 1 and args[0] is st[0]:
                if st[2] is not None:
                    ready[rid] = st[2]
                return st[1]
            return rule(ictx, args, attrs, nb)
        return kernel

    for node in graph.nodes:
        if node.kind.op != "linear" or len(node.parents) != 1:
            continue
        lid, pid = node.id, node.parents[0]
        rid = users[lid][0] if len(users[lid]) == 1 else None
        fused = (rid is not None and graph.nodes[rid].kind.op == "relu"
                 and len(graph.nodes[rid].parents) == 1)
        kernels[lid] = dense(lid, pid, fused)
        if fused:
            kernels[rid] = relu(rid, lid)
    return kernels
