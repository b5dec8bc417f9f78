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

import numpy as np

from graph.errors import GraphError
from graph.optable import OPS, REQUIRED, get_op
from scalars.errors import ContextError

from .backward import as_value, value_shape
from .errors import TapeError
from .tape import Tape, TapeNode


def to_context(ctx, value):
    """``value`` as a value of ``ctx``: context-native values pass, others are converted."""
    if ctx.is_dual and hasattr(value, "primal") and hasattr(value, "tangent"):
        return value
    if ctx.is_interval and hasattr(value, "lo") and hasattr(value, "hi"):
        return value
    try:
        return ctx.convert(value)
    except ContextError as exc:
        raise TapeError(f"leaf: cannot convert value into context {ctx.name}: {exc}") from None


def stopped_value(ctx, v):
    """The forward value of ``detach``: the same value, except that over duals its tangent
    is zero (a stopped value does not vary, so forward mode and the tape over duals agree
    with reverse mode: the detached branch contributes nothing at any order)."""
    if ctx.is_dual:
        from scalars.dual import Dual
        return Dual(v.primal, ctx.base.zeros(ctx.shape(v)))
    return v


def resolve_attrs(rec, attrs: dict, where: str) -> dict:
    """The record's attributes with defaults filled; unknown or missing ones are errors."""
    unknown = sorted(set(attrs) - set(rec.attrs))
    if unknown:
        raise TapeError(f"{where}: op {rec.name} has no attribute(s) {', '.join(unknown)}; "
                        f"it takes: {', '.join(rec.attrs) or 'none'}")
    full = {}
    for key, default in rec.attrs.items():
        if key in attrs:
            full[key] = attrs[key]
        elif default is REQUIRED:
            raise TapeError(f"{where}: op {rec.name} needs attribute {key}")
        else:
            full[key] = default
    return full


def check_op_shapes(rec, in_shapes: list, param_shapes: list, attrs: dict, where: str) -> tuple:
    """Run the record's shape rule (and param-shape rule); return the output shape.

    Shared by the tape builder and the typed graph, so both reject the same programs with
    the same message: op name, every operand shape, and the rule's own explanation.
    """
    lo, hi = rec.arity
    n = len(in_shapes)
    if n < lo or (hi is not None and n > hi):
        want = f"{lo}" if hi == lo else f"{lo}..{'any' if hi is None else hi}"
        raise TapeError(f"{where}: op {rec.name} takes {want} parent(s) "
                        f"(+ {len(rec.params)} parameter(s)), got {n}")

    def shown():
        return ", ".join(str(list(s)) for s in list(in_shapes) + list(param_shapes))

    try:
        out = tuple(rec.shape(in_shapes, attrs))
    except (GraphError, ContextError, ValueError, TypeError, IndexError) as exc:
        raise TapeError(f"{where}: op {rec.name}: incompatible shapes {shown()}: "
                        f"{exc}") from None
    if rec.params:
        try:
            want = rec.param_shapes(in_shapes, attrs, out)
        except (GraphError, ContextError, ValueError, TypeError, IndexError) as exc:
            raise TapeError(f"{where}: op {rec.name}: incompatible shapes {shown()}: "
                            f"{exc}") from None
        for pname, got in zip(rec.params, param_shapes):
            exp = tuple(want[pname])
            if tuple(got) != exp:
                raise TapeError(f"{where}: op {rec.name}: parameter {pname} has shape "
                                f"{list(got)}, expected {list(exp)} (operands: {shown()})")
    return out


def split_args(rec, n_args: int, where: str) -> int:
    """Number of parents among ``n_args`` arguments (the rest are the record's params).

    Fixed-arity ops take exactly their parents first; trailing optional parameters
    (``param_defaults``, e.g. ``linear``'s ``b``) may be left out.
    """
    lo, hi = rec.arity
    k = len(rec.params)
    if lo == hi and rec.params:
        given = n_args - lo
        required = [p for p in rec.params if p not in getattr(rec, "param_defaults", {})]
        if given < len(required) or given > k:
            raise TapeError(f"{where}: op {rec.name} takes {lo} parent(s) then parameters "
                            f"{', '.join(rec.params)} ({', '.join(required) or 'none'} "
                            f"required); got {n_args} argument(s)")
        return lo
    if n_args < k:
        raise TapeError(f"{where}: op {rec.name} needs its parameters "
                        f"{', '.join(rec.params)} after its parents; got {n_args} argument(s)")
    return n_args - k


def missing_params(rec, k: int, args: list, shapes: list, attrs: dict) -> list:
    """``[(name, raw value)]`` for omitted optional parameters, in parameter order.

    Raw values are float64 zeros/ones or decimal strings, which every context converts
    exactly (or with its one correct rounding).
    """
    n_given = len(args) - k
    if not rec.params or n_given >= len(rec.params):
        return []
    try:
        want = rec.param_shapes(shapes[:k], attrs, tuple(rec.shape(shapes[:k], attrs)))
    except (GraphError, ContextError, ValueError, TypeError, IndexError) as exc:
        shown = ", ".join(str(list(s)) for s in shapes)
        raise TapeError(f"op {rec.name}: incompatible shapes {shown}: {exc}") from None
    out = []
    for p in rec.params[n_given:]:
        spec, shape = rec.param_defaults[p], tuple(want[p])
        if spec == "zeros":
            out.append((p, np.zeros(shape)))
        elif spec == "ones":
            out.append((p, np.ones(shape)))
        else:
            out.append((p, np.full(shape, spec, dtype=object)))
    return out


_PLANS: dict = {}


class TapeBuilder:
    """Records onto ``self.tape``; every method appends exactly one node, returns its id."""

    def __init__(self, ctx, tape: Tape | None = None):
        import scalars
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
            y = as_value(rec.forward(ctx, args, full, 0))
        except (ContextError, GraphError) as exc:
            raise TapeError(f"tape node {n} ({op}): {exc}") from None
        got = value_shape(ctx, y)
        want = plan[5] if plan[3] is None else out_shape
        if got != want:
            raise TapeError(f"tape node {n}: op {op} forward produced shape {list(got)}, its "
                            f"shape rule says {list(want)}")
        requires = False
        for i in ids:
            if nodes[i].requires_grad:
                requires = True
                break
        vjp = None
        if requires and rec.vjp is not None:
            rule = rec.vjp

            def vjp(g, _rule=rule, _args=args, _y=y, _attrs=full):
                return _rule(ctx, g, _args, _y, _attrs, 0)
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

    # ------------------------------------------------------- convenience names
    def __getattr__(self, name):
        """Every other op-table op by its own name: ``ops.softmax(x, axis=0)``."""
        from graph.optable import OPS
        if name.startswith("_") or name not in OPS:
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r} (and the op "
                                 f"table has no op {name!r})")

        def op(*refs, **attrs):
            return self.apply(name, *refs, **attrs)
        return op

    def add(self, a, b): return self.apply("add", a, b)
    def sub(self, a, b): return self.apply("sub", a, b)
    def mul(self, a, b): return self.apply("mul", a, b)
    def div(self, a, b): return self.apply("div", a, b)
    def neg(self, a): return self.apply("neg", a)
    def relu(self, a): return self.apply("relu", a)
    def tanh(self, a): return self.apply("tanh", a)
    def exp(self, a): return self.apply("exp", a)
    def log(self, a): return self.apply("log", a)
    def sigmoid(self, a): return self.apply("sigmoid", a)
    def softplus(self, a): return self.apply("softplus", a)
    def matmul(self, a, b): return self.apply("matmul", a, b)
    def linear(self, x, w, b):
        """``x W^T + b``; ``out_features`` is read from ``W``'s shape ``[out, in]``."""
        return self.apply("linear", x, w, b, out_features=int(self.tape.shape(w)[0]))
    def sum(self, a, **attrs): return self.apply("sum", a, **attrs)
