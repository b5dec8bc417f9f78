"""Recording a tape: every op comes from the op table, so the tape has no rules of its own.

``TapeBuilder(ctx).apply(op, *ids, **attrs)`` looks the op up in :mod:`graph.optable`,
checks its parents' shapes with the record's shape rule (an error names the op and the
shapes), runs the record's forward rule in the builder's context and appends a node whose
VJP closure calls the record's VJP rule.  Payload parameters (``linear``'s ``W`` and
``b``) are ordinary tape nodes passed after the parents, so their gradients come out of
the same reverse loop.  Tape values carry their own full shapes, so rules are called with
``nb=0`` batch axes: a batched input is simply a larger per-example shape here.

Two nodes are structural rather than ops: leaves (no parents) and ``detach`` (forward is
the parent's value, reused without a copy; no VJP; never requires a gradient).
"""
from __future__ import annotations

from typing import Any

from scalarlab import scalars
from scalarlab.graph.errors import GraphError
from scalarlab.graph.optable import OPS, get_op
from scalarlab.scalars.errors import ContextError

from .errors import TapeError
from .ops_interface import Ops
from .op_checks import check_op_shapes, missing_params, resolve_attrs, split_args
from .tape import Tape, TapeNode
from .values import as_value, stopped_value, to_context, value_shape


_PLANS: dict = {}


class TapeBuilder(Ops):
    """Records onto ``self.tape``; every method appends exactly one node, returns its id."""

    def __init__(self, ctx, tape: Tape | None = None):
        self.ctx = scalars.get(ctx)
        self.tape = tape if tape is not None else Tape(self.ctx)
        if self.tape.ctx is not self.ctx:
            raise TapeError(f"tape builder: tape is over {self.tape.ctx.name}, builder over "
                            f"{self.ctx.name}")

    # ---------------------------------------------------------------- structure
    def leaf(self, value: Any, name: str = "leaf", requires_grad: bool = True) -> int:
        v = to_context(self.ctx, value)
        return self.tape.append(TapeNode(name, (), v, value_shape(self.ctx, v), None,
                                         bool(requires_grad)))

    def const(self, value: Any, name: str = "const") -> int:
        """A leaf that never requires a gradient."""
        return self.leaf(value, name=name, requires_grad=False)

    def detach(self, i: int) -> int:
        """Stop-gradient: same value (no copy; zero tangent over duals), parent edge kept,
        no VJP, never requires a gradient."""
        src = self.tape[self.tape.check_id(i, "detach")]
        return self.tape.append(TapeNode("detach", (i,), stopped_value(self.ctx, src.value),
                                         src.shape, None, False))

    # ---------------------------------------------------------------------- ops
    def apply(self, op: str, *ids: int, **attrs) -> int:
        """Append one node computing op-table record ``op`` on the nodes ``ids``."""
        return self.apply_computed(op, ids, None, "forward", **attrs)

    def apply_computed(self, op: str, ids, compute, source: str, **attrs) -> int:
        """Like :meth:`apply`, but the value comes from ``compute(ctx, args, attrs, nb)``.

        Used where the value is produced elsewhere -- a device kernel chosen by the
        planner, or a forward-mode sweep that already holds the value -- while the node
        keeps the op table's shape check and VJP rule.  ``source`` names the producer in
        a shape-mismatch error; ``compute=None`` is the record's forward rule.
        """
        tape, ctx = self.tape, self.ctx
        nodes = tape._nodes
        n = len(nodes)
        for i in ids:
            if type(i) is not int or not 0 <= i < n:
                tape.check_id(i, f"tape node {n} ({op})")
        # Shape rules are pure, so their verdict is cached per (op, attrs, operand shapes):
        # long tapes of small ops then pay for one rule call per distinct signature.
        key = (op, repr(sorted(attrs.items())) if attrs else "",
               tuple([nodes[i].shape for i in ids]))
        plan = _PLANS.get(key)
        if plan is None:
            plan = self._plan(op, ids, attrs, n)
            if plan[3] is None:                   # omitted params filled in: not cacheable
                ids = plan[4]
                n = len(nodes)
            elif len(_PLANS) < 4096:
                _PLANS[key] = plan
        rec, full, k, out_shape = plan[:4]
        args = [nodes[i].value for i in ids]
        try:
            y = as_value((rec.forward if compute is None else compute)(ctx, args, full, 0))
        except (ContextError, GraphError) as exc:
            raise TapeError(f"tape node {n} ({op}): {exc}") from None
        got = value_shape(ctx, y)
        want = plan[5] if plan[3] is None else out_shape
        if got != want:
            raise TapeError(f"tape node {n}: op {op} {source} produced shape {list(got)}, "
                            f"its shape rule says {list(want)}")
        requires = False
        for i in ids:
            if nodes[i].requires_grad:
                requires = True
                break
        vjp = None
        if requires and rec.vjp is not None:
            rule = rec.vjp
            needs = None
            if getattr(rule, "takes_needs", False):
                needs = tuple([nodes[i].requires_grad for i in ids])
                if all(needs):
                    needs = None
            if needs is None:
                def vjp(g, _rule=rule, _args=args, _y=y, _attrs=full):
                    return _rule(ctx, g, _args, _y, _attrs, 0)
            else:
                # only the args that want a gradient are computed (see graph.oprecord)
                def vjp(g, _rule=rule, _args=args, _y=y, _attrs=full, _needs=needs):
                    return _rule(ctx, g, _args, _y, _attrs, 0, needs=_needs)
        elif requires:
            # Differentiating through an op without a VJP rule is an error only if a
            # gradient actually reaches it; record a closure that says so.
            def vjp(g, _op=op, _n=n):
                raise TapeError(f"backward: node {_n} ({_op}) has no VJP rule in the op table")
        nodes.append(TapeNode(op, tuple(ids), y, want, vjp, requires,
                              tuple(sorted(attrs.items())) if attrs else ()))
        return n

    def _plan(self, op, ids, attrs, n):
        """Look up and check an op application: ``(rec, attrs, n_parents, out_shape)``.

        When optional parameters were omitted, their constant leaves are appended here and
        the plan is ``(rec, attrs, n_parents, None, new_ids, out_shape)`` (not cached).
        """
        nodes = self.tape._nodes
        where = f"tape node {n}"
        rec = OPS.get(op)
        if rec is None:
            try:
                get_op(op)
            except GraphError as exc:
                raise TapeError(f"{where}: {exc}") from None
        if rec.forward is None:
            raise TapeError(f"{where}: op {op} has no forward rule (use leaf/const instead)")
        full = resolve_attrs(rec, attrs, where)
        k = split_args(rec, len(ids), where)
        shapes = [nodes[i].shape for i in ids]
        extra = missing_params(rec, k, ids, shapes, full) if rec.params else ()
        if extra:
            # omitted optional parameters become constant leaves, visible in the listing
            ids = tuple(ids) + tuple(self.const(raw, name=f"{op}.{p}") for p, raw in extra)
            where = f"tape node {len(nodes)}"
            shapes = [nodes[i].shape for i in ids]
            out = check_op_shapes(rec, shapes[:k], shapes[k:], full, where)
            return rec, full, k, None, ids, out
        return rec, full, k, check_op_shapes(rec, shapes[:k], shapes[k:], full, where)

    # The convenience names (``b.mul(x, x)``, ``b.softmax(x, axis=0)``, ...) come from
    # :class:`tape.ops_interface.Ops`; each is exactly one op-table op through ``apply``.
    def shape(self, ref) -> tuple:
        return self.tape.shape(ref)
