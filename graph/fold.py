"""The IR fold: ``denote_all`` runs a graph left to right under any scalar context.

One loop over the node array (ids are positions, parents are earlier), no recursion, so a
100,000-node chain evaluates.  Inputs may carry leading batch axes: every value in the
table then has the same batch axes in front of its node's per-example shape, and one call
over N samples equals N single calls (the rules only add ``nb`` to their axes).

This is the one evaluation loop of the IR: each node runs the op table's forward rule, or
the op's own ``interval`` rule in an interval context (IBP), or a kernel given per node
through the ``kernels`` hook (the kernel planner's ``run_planned``).

A graph with ``select`` (an op with a ``guarded`` rule) runs each node only on the batch
rows some consumer reads it on, a select's branch only where its condition takes it
(:class:`_Masked`; ``denote_rows`` reports the rows), so ``(if (< x 0) (sqrt (- x))
(sqrt x))`` evaluates on samples of both signs.  A graph without one runs the plain loop.
"""
from __future__ import annotations

import numpy as np

from scalarlab import scalars
from scalarlab.scalars.errors import ContextError, ScalarLabError
from scalarlab.scalars.values import Dual, Interval

from .errors import GraphError
from .node import Graph, fmt_shape
from .optable import OPS, OpDataError, full_attrs
from .payload import as_payload, convert_value
from .validate import check_payload, ensure_valid


def _input_values(g: Graph, x, ctx) -> dict:
    ids = g.input_ids()
    if not ids:
        if x is not None:
            raise GraphError("IR eval: the graph has no input node but an input was given")
        return {}
    if isinstance(x, dict):
        missing = [i for i in ids if i not in x]
        extra = [k for k in x if k not in ids]
        if missing or extra:
            raise GraphError(f"IR eval: input dict keys {sorted(x, key=str)} do not match the "
                             f"input node ids {ids}")
        return {i: x[i] for i in ids}
    if len(ids) == 1:
        return {ids[0]: x}
    if isinstance(x, (list, tuple)) and len(x) == len(ids):
        return dict(zip(ids, x))
    raise GraphError(f"IR eval: the graph has {len(ids)} input nodes {ids}; pass a dict "
                     f"{{node_id: value}} or a list with one value per input")


def _needed(g: Graph, output_id):
    """Mask of the ancestors of ``output_id`` (reverse loop, no recursion)."""
    need = [False] * len(g.nodes)
    need[output_id] = True
    for i in range(output_id, -1, -1):
        if need[i]:
            for p in g.nodes[i].parents:
                need[p] = True
    return need


def node_args(g: Graph, payload, ctx, node, vals) -> tuple:
    """``(args, attrs)`` of one node in the op table's calling convention: parent values
    from ``vals``, then its payload params converted into ``ctx`` (omitted optional params
    filled with their defaults), and its attributes with defaults filled."""
    return _with_params(g, payload, ctx, node, [vals[p] for p in node.parents])


def _with_params(g: Graph, payload, ctx, node, args: list) -> tuple:
    """``node_args`` from the parent values in order (``args``, extended in place)."""
    rec = OPS[node.kind.op]
    if rec.params:
        params = payload.converted(ctx, node.id)
        for name in rec.params:
            args.append(params[name] if name in params
                        else _default_param(ctx, rec, name, g, node))
    attrs = full_attrs(rec, node.kind.attrs) if rec.attrs or node.kind.attrs else {}
    return args, attrs


def rule_for(rec, ctx):
    """The rule the fold runs for an op in ``ctx``: the op's own interval rule in an
    interval context when it has one (tighter than the forward rule run in interval
    arithmetic, proved sound by its tests), else the forward rule."""
    if rec.interval is not None and getattr(ctx, "is_interval", False):
        return rec.interval
    return rec.forward


def denote_all(g: Graph, payload, x, ctx, *, partial: bool = False, kernels=None,
               label: str = "IR eval", errors: dict | None = None, on_node=None,
               _need=None) -> list:
    """The value table: one context value per node (``None`` for skipped/failed nodes).

    ``x``: the input value (anything ``ctx.convert`` accepts, or already a ``ctx`` value),
    optionally with leading batch axes; a dict ``{input_id: value}`` for several inputs.
    ``partial=True``: a ContextError (or domain error) at a node yields ``None`` for it and
    every dependent instead of raising — IBP reads that as "no bound".
    ``errors``: with ``partial``, a dict the fold fills with ``{node_id: message}`` for
    every node that failed itself (not its dependents): the message the non-partial
    fold would have raised there, so a caller can say why without evaluating again.
    ``kernels``: the per-node kernel hook, ``{node_id: f(args, attrs, nb) -> value}``; a
    node listed there runs its kernel instead of the op table's rule (the kernel planner's
    bound plan), every other node runs the op table.  An error a kernel raises keeps its
    class and gets the node prepended.  ``label`` starts every error message.
    ``on_node``: ``f(node_id)``, called after each node the fold ran (its value computed
    or, under ``partial``, its failure recorded), in the fold's order; input nodes and
    nodes skipped (not needed, or a failed parent) are not reported.  A caller's progress
    report hangs here (one node of a big graph in an oracle context can take minutes); the
    fold itself never prints.  With ``select``, a node reached on new rows in a later
    round is reported again.

    A graph with ``select`` (an op with a ``guarded`` rule) evaluates each branch only on
    the batch rows that take it (see :func:`denote_rows`); a row a node was not evaluated
    on holds no value: NaN (the whole line over intervals, a float NaN in the object
    arrays of contexts that hold no NaN).
    """
    return _fold(g, payload, x, ctx, partial, kernels, label, _need, errors, on_node)[0]


def denote_rows(g: Graph, payload, x, ctx, *, partial: bool = False, kernels=None,
                label: str = "IR eval", errors: dict | None = None, on_node=None) -> tuple:
    """``(values, rows)``: :func:`denote_all`'s table and, per node, the batch rows it
    was evaluated on -- ``None`` for every row, else a bool array over the batch axes
    (shape ``()`` without batch axes).  Only graphs with ``select`` have nodes evaluated
    on fewer rows: a branch runs on the rows whose condition takes it (both where an
    interval condition is undecided), so a guarded domain error never reaches a row that
    does not take it.  Per-node statistics read ``rows`` to skip the rows without value.
    ``errors``, ``on_node``: as for :func:`denote_all`.
    """
    return _fold(g, payload, x, ctx, partial, kernels, label, None, errors, on_node)


_GUARDED: set = set()


def _guarded_ops() -> set:
    """Names of the ops with a ``guarded`` rule (computed once: the table is fixed after
    import)."""
    if not _GUARDED:
        _GUARDED.update(k for k, r in OPS.items() if r.guarded is not None)
        _GUARDED.add("")               # non-empty even if no op is guarded
    return _GUARDED


def _fold(g: Graph, payload, x, ctx, partial, kernels, label, _need, errors=None,
          on_node=None):
    ctx = scalars.get(ctx)
    ensure_valid(g)
    payload = as_payload(payload)
    check_payload(g, payload)
    inputs = _input_values(g, x, ctx)
    kernels = kernels or {}

    vals: list = [None] * len(g.nodes)
    batch = None
    for i, xv in inputs.items():
        node = g.nodes[i]
        if _need is not None and not _need[i]:
            continue
        try:
            v = convert_value(ctx, xv)
        except ContextError as exc:
            raise ContextError(f"{label}: input {i}: {exc}") from None
        s = tuple(ctx.shape(v))
        d = node.out_shape
        nb = len(s) - len(d)
        if nb < 0 or s[nb:] != d:
            raise GraphError(f"{label}: input {i}: input shape mismatch: got {fmt_shape(s)} vs "
                             f"declared {fmt_shape(d)} (leading batch axes allowed)")
        if batch is None:
            batch = s[:nb]
        elif s[:nb] != batch:
            raise GraphError(f"{label}: input {i}: batch axes {fmt_shape(s[:nb])} differ from "
                             f"{fmt_shape(batch)} of another input")
        vals[i] = v
    batch = batch or ()
    nb = len(batch)

    guarded = _guarded_ops()
    if any(n.kind.op in guarded for n in g.nodes):
        return _Masked(g, payload, ctx, vals, batch, partial, kernels, label, _need,
                       errors, on_node).run()

    failed = [False] * len(g.nodes)
    any_failed = False
    for node in g.nodes:
        i = node.id
        if node.kind.op == "input" or (_need is not None and not _need[i]):
            continue
        if any_failed and any(failed[p] for p in node.parents):
            failed[i] = True
            continue
        try:
            y = _rule(g, payload, ctx, node, [vals[p] for p in node.parents], nb, batch,
                      kernels, partial)
        except _NodeError as exc:
            raise exc.cls(f"{label}: {node.kind.op} {i}: {exc.args[0]}") from exc.cause
        if on_node is not None:          # one test per node when no one listens
            on_node(i)
        if isinstance(y, _Failed):
            failed[i] = any_failed = True
            if errors is not None:
                errors.setdefault(i, f"{label}: {node.kind.op} {i}: {y.msg}")
            continue
        vals[i] = y
    return vals, [None] * len(g.nodes)


class _Failed:
    """A node the context could not compute under ``partial``; ``msg`` says why (the
    message the non-partial fold raises, without the node's name)."""

    __slots__ = ("msg",)

    def __init__(self, msg: str):
        self.msg = msg


def _run(g, payload, ctx, node, parent_vals, nb, batch, kernels, label, partial, note=None):
    """One node's value over ``nb`` batch axes ``batch`` (``parent_vals``: its parents'
    values in order), its errors wrapped with the node (``note()``, when given, is added
    to the node's name); a ``_Failed`` when ``partial`` and the context could not compute
    it, its message then carrying the node as an error would."""
    i = node.id
    op = node.kind.op
    try:
        y = _rule(g, payload, ctx, node, parent_vals, nb, batch, kernels, partial)
    except _NodeError as exc:
        where = f"{label}: {op} {i}{note() if note is not None else ''}"
        raise exc.cls(f"{where}: {exc.args[0]}") from exc.cause
    if isinstance(y, _Failed):
        y.msg = f"{label}: {op} {i}{note() if note is not None else ''}: {y.msg}"
    return y


class _NodeError(Exception):
    """An error of one node's rule, to be re-raised as ``cls`` with the node named."""

    def __init__(self, cls, msg, cause=None):
        super().__init__(msg)
        self.cls, self.cause = cls, cause


def _rule(g, payload, ctx, node, parent_vals, nb, batch, kernels, partial):
    op = node.kind.op
    kernel = kernels.get(node.id)
    try:
        args, attrs = _with_params(g, payload, ctx, node, parent_vals)
        if kernel is not None:
            y = kernel(args, attrs, nb)
        else:
            y = rule_for(OPS[op], ctx)(ctx, args, attrs, nb)
            if op == "const" and nb:
                y = ctx.broadcast_to(ctx.reshape(y, (1,) * nb + tuple(node.out_shape)),
                                     tuple(batch) + tuple(node.out_shape))
    except OpDataError as exc:
        if partial:
            return _Failed(str(exc))
        raise _NodeError(GraphError, str(exc)) from None
    except ContextError as exc:
        if partial:
            return _Failed(str(exc))
        raise _NodeError(ContextError, str(exc)) from None
    except GraphError as exc:
        raise _NodeError(GraphError, str(exc)) from None
    except ScalarLabError as exc:       # a kernel's own error class (the planner's)
        raise _NodeError(type(exc), str(exc)) from None
    except (ValueError, TypeError, IndexError, ArithmeticError) as exc:
        if kernel is not None:
            raise
        raise _NodeError(GraphError, f"rule failed: {type(exc).__name__}: {exc}",
                         exc) from None
    # every value is batch + declared shape (check_shapes proved the declared shapes
    # consistent; this catches a rule disagreeing with its own shape rule)
    ys = ctx.shape(y)
    if len(ys) != nb + len(node.out_shape) or tuple(ys[nb:]) != node.out_shape:
        raise _NodeError(GraphError, f"value has shape {fmt_shape(ys)}, expected batch "
                         f"{fmt_shape(batch)} + declared {fmt_shape(node.out_shape)}")
    return y


# ------------------------------------------------------------------ masked evaluation
# Row sets over the flattened batch: None = no row, True = every row, else a bool array
# with some but not all rows set (normalised, so the common cases stay cheap).
def _norm(a):
    if not a.any():
        return None
    return True if a.all() else a


def _or(a, b):
    if a is True or b is None:
        return a
    if b is True or a is None:
        return b
    return _norm(a | b)


def _and(a, b):
    if a is None or b is None:
        return None
    if a is True:
        return b
    if b is True:
        return a
    return _norm(a & b)


def _minus(a, b):
    if a is None or b is True or a is b:
        return None
    if b is None:
        return a
    return _norm((~b) if a is True else (a & ~b))


def _fixed(r, m):
    """``r``, copied when it is the guard mask ``m`` itself: guard masks gain rows in later
    rounds, and a row set handed out (a demand, an index cache key) must not change."""
    return m.copy() if r is m else r


def _same(a, b) -> bool:
    return a is b or (a is not True and b is not True and a is not None and b is not None
                      and bool(np.array_equal(a, b)))


def _no_value(ctx, shape):
    """The value of a node no row was evaluated on: NaN where the context holds one (the
    whole line over intervals).  Contexts that refuse NaN (mpmath reals, fp32-real,
    rationals) get a NaN of their entry type where it has one (mpf, mpfr), else a float
    NaN (rationals: read such rows through ``rows``); no row may look computed."""
    try:
        return ctx.convert(np.full(shape, np.nan))
    except ContextError:
        pass
    if ctx.is_dual:
        z = _no_value(ctx.base, shape)
        return Dual(z, z)
    if ctx.is_interval:
        return Interval(np.full(shape, -np.inf, dtype=object),
                        np.full(shape, np.inf, dtype=object))
    fill = np.nan
    leaf = getattr(ctx, "leaf_type", None)
    if leaf is not None:
        try:
            fill = leaf("nan")
        except (TypeError, ValueError, ArithmeticError):
            pass
    return np.full(shape, fill, dtype=object)


def _scatter(v, idx, size, shape, fill):
    """``v``'s rows (one leading axis) placed at the flat rows ``idx`` of ``size`` rows,
    reshaped to ``shape``; elsewhere the entries of ``fill`` (the one-entry
    :func:`_no_value`).  Plain numpy on the value's arrays: the rows without value are no
    context value, so no context op may see them."""
    if isinstance(v, Interval):
        return Interval(_scatter(v.lo, idx, size, shape, fill.lo),
                        _scatter(v.hi, idx, size, shape, fill.hi))
    if isinstance(v, Dual):
        return Dual(_scatter(v.primal, idx, size, shape, fill.primal),
                    _scatter(v.tangent, idx, size, shape, fill.tangent))
    a = np.asarray(v)
    f = np.asarray(fill).reshape(-1)[0]
    dtype = a.dtype if a.dtype.kind in "fc" or a.dtype == object else np.float64
    out = np.full((size,) + a.shape[1:], f, dtype=dtype)
    out[idx] = a                  # integer rows: about twice as fast as a bool mask
    return out.reshape(shape)


class _Masked:
    """One fold of a graph with guarded ops (``select``), row by row of demand.

    A node's *demand* is the set of batch rows some consumer reads it on: every row for
    the graph's sinks (the output under ``denote``), its consumers' rows for an ordinary
    edge, and for a select's branch only the rows whose condition takes that branch.  A
    branch's demand is known once its condition is, and ids being a topological order
    says nothing about when that is (a branch node may precede the condition), so the
    fold runs in rounds, each two loops without recursion: a reverse loop computes the
    demand known so far (branches of selects whose condition is not evaluated yet demand
    nothing), a forward loop evaluates every node on its demanded rows not evaluated yet,
    as soon as its parents hold them.  A select whose condition was just evaluated waits
    for the next round, which demands its branches.  The rounds stop when a forward loop
    finds nothing to do; their number is about the nesting depth of the selects plus
    two.  A node evaluated on every row keeps the ordinary layout (batch axes); one
    evaluated on some rows holds them compactly (one leading axis, ``rows[i]`` the sorted
    flat row indices) and runs its rule with ``nb = 1`` on them; a node reached on more
    rows in a later round is evaluated on the new rows and merged.
    """

    def __init__(self, g, payload, ctx, vals, batch, partial, kernels, label, need,
                 errors=None, on_node=None):
        self.g, self.payload, self.ctx = g, payload, ctx
        self.vals, self.batch, self.nb = vals, tuple(batch), len(batch)
        self.B = int(np.prod(batch, dtype=np.int64)) if batch else 1
        self.partial, self.kernels, self.label = partial, kernels, label
        self.errors = errors                  # node id -> first failure message
        self.on_node = on_node                # progress hook: f(node id) per evaluation
        n = len(g.nodes)
        self.need = need
        self.done: list = [True if v is not None else None for v in vals]
        self.rows: list = [None] * n          # None: batch layout; else flat row indices
        self.failed = [False] * n
        self.guard: dict = {}                 # select id -> [known rows, masks per arg]
        self._last = (None, None)
        self._filler = None
        consumed = [False] * n
        for node in g.nodes:
            if need is None or need[node.id]:
                for p in node.parents:
                    consumed[p] = True
        self.roots = [i for i in range(n) if not consumed[i] and (need is None or need[i])]

    # ------------------------------------------------------------- values by row
    def _fill(self):
        if self._filler is None:
            self._filler = _no_value(self.ctx, ())
        return self._filler

    def _idx(self, mask):
        """The flat row indices of a row mask (the last one is kept: a chain of nodes
        shares one mask object)."""
        if self._last[0] is not mask:
            self._last = (mask, np.flatnonzero(mask))
        return self._last[1]

    def _flat(self, v, shape):
        return v if self.nb == 1 else self.ctx.reshape(v, (self.B,) + tuple(shape))

    def _take(self, p, idx):
        """Node ``p``'s value on the flat rows ``idx`` (None: every row, batch layout)."""
        v, rows = self.vals[p], self.rows[p]
        if idx is None:
            return v
        if rows is None:
            return self.ctx.take(self._flat(v, self.g.nodes[p].out_shape), idx, 0)
        if len(idx) == len(rows):
            return v
        return self.ctx.take(v, np.searchsorted(rows, idx), 0)

    def _spread(self, sub, inside, shape, filler):
        """A value over ``len(inside)`` rows: ``sub``'s rows where ``inside``, in order,
        the one-row ``filler`` elsewhere (a gather, so every context can do it)."""
        ctx = self.ctx
        k = int(np.count_nonzero(inside))
        pos = np.where(inside, np.cumsum(inside) - 1, k)
        both = filler if sub is None else ctx.concat([sub, filler], 0)
        return ctx.take(both, pos, 0)

    def _store(self, i, y, S, idx):
        ctx = self.ctx
        shape = tuple(self.g.nodes[i].out_shape)
        if self.done[i] is None:
            self.vals[i], self.rows[i], self.done[i] = y, idx, S
            return
        old = self.rows[i]
        allr = np.concatenate([old, idx])
        order = np.argsort(allr, kind="stable")
        v = ctx.take(ctx.concat([self.vals[i], y], 0), order, 0)
        self.done[i] = _or(self.done[i], S)
        if self.done[i] is True:
            self.vals[i], self.rows[i] = ctx.reshape(v, self.batch + shape), None
        else:
            self.vals[i], self.rows[i] = v, allr[order]

    # ------------------------------------------------------------------ demand
    def _branches(self, i, d):
        """Rows on which select ``i`` reads each of its non-first args, within ``d``, as
        far as its condition is known."""
        node = self.g.nodes[i]
        c = node.parents[0]
        k = len(node.parents) - 1
        if self.failed[c]:
            return [None] * k
        known = _and(d, self.done[c])
        if known is None:
            return [None] * k
        entry = self.guard.get(i)
        if entry is None:
            entry = self.guard[i] = [None, [np.zeros(self.B, dtype=bool) for _ in range(k)]]
        new = _minus(known, entry[0])
        if new is not None:
            idx = None if new is True else self._idx(new)
            cond = self._take(c, idx)
            nb = self.nb if idx is None else 1
            try:
                masks = OPS[node.kind.op].guarded(self.ctx, cond, nb)
            except (ContextError, GraphError) as exc:   # e.g. no order (complex)
                note = "" if idx is None else self._rows_note(idx)
                msg = f"{self.label}: {node.kind.op} {i}{note}: condition: {exc}"
                if self.partial and isinstance(exc, ContextError):
                    self.failed[i] = True
                    if self.errors is not None:
                        self.errors.setdefault(i, msg)
                    return [None] * k
                raise type(exc)(msg) from None
            for m, got in zip(entry[1], masks):
                got = np.reshape(np.asarray(got, dtype=bool), -1)
                if idx is None:
                    m[:] = got
                else:
                    m[idx] = got
            entry[0] = _or(entry[0], new)
        return [_fixed(_and(known, _norm(m)), m) for m in entry[1]]

    def _demand(self) -> list:
        g = self.g
        D: list = [None] * len(g.nodes)
        for r in self.roots:
            D[r] = True
        for i in range(len(g.nodes) - 1, -1, -1):
            d = D[i]
            if d is None or self.failed[i]:
                continue
            node = g.nodes[i]
            if OPS[node.kind.op].guarded is not None:
                c = node.parents[0]
                D[c] = _or(D[c], d)
                for p, m in zip(node.parents[1:], self._branches(i, d)):
                    D[p] = _or(D[p], m)
            else:
                for p in node.parents:
                    D[p] = _or(D[p], d)
        return D

    def _required(self, node, S):
        """``[(parent position, parent, rows)]`` node needs to run on rows S, or None
        while a guard is not known on S yet."""
        parents = node.parents
        if OPS[node.kind.op].guarded is None:
            return [(k, p, S) for k, p in enumerate(parents)]
        c = parents[0]
        entry = self.guard.get(node.id)
        if self.failed[c]:
            return [(0, c, S)]
        if _minus(S, self.done[c]) is not None or entry is None or \
                _minus(S, entry[0]) is not None:
            return None
        return [(0, c, S)] + [(k + 1, p, _fixed(_and(S, _norm(m)), m))
                              for k, (p, m) in enumerate(zip(parents[1:], entry[1]))]

    # --------------------------------------------------------------- evaluation
    def _evaluate(self, node, S, req):
        ctx, g = self.ctx, self.g
        full = S is True
        idx = None if full else self._idx(S)
        nb, batch = (self.nb, self.batch) if full else (1, (len(idx),))
        args: list = []
        for _, p, r in req:
            shape = tuple(g.nodes[p].out_shape)
            if _same(r, S):
                args.append(self._take(p, idx))
                continue
            # a guarded arg not read on some of the rows: a stand-in (zeros) there,
            # which the op's rule never picks
            inside = np.zeros(self.B, dtype=bool) if r is None else \
                (np.ones(self.B, dtype=bool) if r is True else r)
            inside = inside if idx is None else inside[idx]
            sub = None if r is None else self._take(p, self._idx(r))
            v = self._spread(sub, inside, shape, ctx.zeros((1,) + shape))
            args.append(ctx.reshape(v, batch + shape) if full else v)
        return _run(g, self.payload, ctx, node, args, nb, batch, self.kernels, self.label,
                    self.partial, None if full else (lambda: self._rows_note(idx)))

    def _rows_note(self, idx) -> str:
        """Which batch rows a node runs on when it runs on some (an error's entry index
        then counts those rows only)."""
        shown = idx[:6] if self.nb == 1 else \
            [tuple(int(t) for t in np.unravel_index(r, self.batch)) for r in idx[:6]]
        more = ", ..." if len(idx) > 6 else ""
        return (f" (on the {len(idx)} batch rows that reach it through a select: "
                f"{', '.join(str(int(r)) if self.nb == 1 else str(r) for r in shown)}{more}; "
                f"an index in this message counts these rows only)")

    def _forward(self, D):
        progressed = blocked = False
        for node in self.g.nodes:
            i = node.id
            if self.failed[i] or node.kind.op == "input":
                continue
            S = _minus(D[i], self.done[i])
            if S is None:
                continue
            req = self._required(node, S)
            if req is None:
                blocked = True
                continue
            if any(self.failed[p] and r is not None for _, p, r in req):
                self.failed[i] = progressed = True
                continue
            if any(_minus(r, self.done[p]) is not None for _, p, r in req):
                blocked = True
                continue
            y = self._evaluate(node, S, req)
            progressed = True
            if self.on_node is not None:
                self.on_node(i)
            if isinstance(y, _Failed):
                self.failed[i] = True
                if self.errors is not None:
                    self.errors.setdefault(i, y.msg)
                continue
            self._store(i, y, S, None if S is True else self._idx(S))
        return progressed, blocked

    def run(self):
        while True:
            progressed, blocked = self._forward(self._demand())
            if not blocked:
                break
            if not progressed:        # cannot happen: a blocked select's condition ran
                raise GraphError(f"{self.label}: masked evaluation of the selects made no "
                                 f"progress (internal error)")
        return self._table()

    def _table(self):
        """Every node's value over the whole batch (filler on rows it was not evaluated
        on) and its row mask; failures propagate to the nodes that read them."""
        g, ctx = self.g, self.ctx
        n = len(g.nodes)
        for node in g.nodes:                  # a node failing in a later round
            i = node.id
            if self.failed[i] or self.done[i] is None:
                continue
            req = self._required(node, self.done[i]) or []
            if any(self.failed[p] and r is not None for _, p, r in req):
                self.failed[i] = True
        vals: list = [None] * n
        rows: list = [None] * n
        for node in g.nodes:
            i = node.id
            if self.failed[i] or (self.need is not None and not self.need[i]):
                continue
            d = self.done[i]
            shape = tuple(node.out_shape)
            if d is True:
                vals[i] = self.vals[i]
                continue
            if d is None:
                vals[i] = _no_value(ctx, self.batch + shape)
                rows[i] = np.zeros(self.batch, dtype=bool)
            else:
                vals[i] = _scatter(self.vals[i], self.rows[i], self.B, self.batch + shape,
                                   self._fill())
                rows[i] = d.reshape(self.batch)
        return vals, rows


def guarded_schedule(parents, guarded, roots, done, evaluate, branches) -> list:
    """Evaluate a single-sample DAG (no batch rows) whose guarded ops (``select``) read a
    branch only when their condition takes it; returns which nodes ran (bool per node).

    ``parents[i]``: parent indices of node ``i`` (smaller indices); ``guarded[i]``: node
    ``i``'s first parent decides which of the others it reads; ``roots``: the nodes
    wanted; ``done[i]``: already evaluated (inputs; updated in place); ``evaluate(i,
    reads)`` computes node ``i``, ``reads`` being None (every parent) or one bool per
    non-first parent of a guarded node (False: not evaluated, pass a stand-in);
    ``branches(i)`` gives those bools once node ``i``'s condition is done.  The demand
    of a node is known only once the conditions above it are, so the schedule runs the
    fold's rounds (a reverse loop for the demand, a forward loop evaluating what is
    demanded and ready), without recursion.  The typed graph of :mod:`tape` uses it."""
    n = len(parents)
    known: dict = {}
    while True:
        need = [False] * n
        for r in roots:
            need[r] = True
        for i in range(n - 1, -1, -1):
            if not need[i]:
                continue
            ps = parents[i]
            if not guarded[i]:
                for p in ps:
                    need[p] = True
                continue
            need[ps[0]] = True
            if i not in known and done[ps[0]]:
                known[i] = tuple(bool(t) for t in branches(i))
            for p, t in zip(ps[1:], known.get(i, ())):
                if t:
                    need[p] = True
        progressed = blocked = False
        for i in range(n):
            if not need[i] or done[i]:
                continue
            ps = parents[i]
            reads = None
            if guarded[i]:
                reads = known.get(i)
                if reads is None:
                    blocked = True
                    continue
                ps = [ps[0]] + [p for p, t in zip(ps[1:], reads) if t]
            if not all(done[p] for p in ps):
                blocked = True
                continue
            evaluate(i, reads)
            done[i] = progressed = True
        if not blocked:
            return need
        if not progressed:        # cannot happen: a blocked select's condition ran
            raise GraphError("masked evaluation of the selects made no progress "
                             "(internal error)")


def _default_param(ctx, rec, name, g, node):
    """The value of an omitted optional param (conv bias, layernorm gamma/beta/eps)."""
    default = rec.param_defaults.get(name)
    if default is None:
        raise GraphError(f"missing payload {name}")
    in_shapes = [g.nodes[p].out_shape for p in node.parents]
    shape = rec.param_shapes(in_shapes, full_attrs(rec, node.kind.attrs), node.out_shape)[name]
    if default == "zeros":
        return ctx.zeros(shape)
    if default == "ones":
        return ctx.ones(shape)
    return ctx.full(shape, default) if shape else ctx.convert(default)


def denote(g: Graph, payload, x, ctx, output_id=None):
    """The value of one node (default: the graph's output); only its ancestors run."""
    ensure_valid(g)
    if output_id is None:
        output_id = g.output
    if not isinstance(output_id, (int, np.integer)) or not 0 <= output_id < len(g.nodes):
        raise GraphError(f"IR eval: output id {output_id!r} is not a node id (graph has "
                         f"{len(g.nodes)} nodes)")
    vals = denote_all(g, payload, x, ctx, _need=_needed(g, int(output_id)))
    return vals[int(output_id)]
