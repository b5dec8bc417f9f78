"""Typed SSA graphs: a program recorded once, checked once, evaluated many times.

The graph's *input context* is a list of shapes (for a model: the state's shapes first,
then the input's).  Every node is checked against its parents' shapes when it is added
(the op table's shape rule), so a recorded graph cannot refer to a parent at the wrong
shape; evaluation only checks that supplied inputs match the context.  Nodes hold the op
record, i.e. its forward, VJP and JVP rules.  The output reference may be any input or
earlier node (no dummy identity op).

Evaluation:
* ``forward(ctx, inputs)`` runs the forward rules left to right (a ``select`` runs only
  the branch its condition takes: :func:`graph.fold.guarded_schedule`);
* ``vjp`` lowers the graph to a tape over ``ctx`` (inputs become leaves) and runs the one
  reverse loop of :mod:`tape.backward`;
* ``jvp`` runs the op table's JVP rules node by node (the canonical first derivative:
  at a kink it gives exactly what the table's rule says); ``jvp_dual`` is the same
  derivative as a forward fold over the dual context ``dual:<ctx>``, kept as an
  independent cross-check.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from scalarlab import scalars
from scalarlab.graph.errors import GraphError
from scalarlab.graph.fold import guarded_schedule
from scalarlab.graph.optable import get_op
from scalarlab.scalars.values import Dual
from scalarlab.scalars.errors import ContextError

from .backward import Gradients, backward
from .builder import TapeBuilder
from .op_checks import check_op_shapes, missing_params, resolve_attrs, split_args
from .values import as_value, stopped_value, to_context, value_shape
from .errors import TapeError

_GRAPH_IDS = itertools.count(1)


@dataclass(frozen=True)
class Var:
    """An SSA variable: position ``index`` in graph ``graph`` (inputs come first)."""

    graph: int
    index: int
    shape: tuple


@dataclass(frozen=True)
class GNode:
    """One recorded node: ``kind`` is an op name, ``"detach"`` or ``"const"``."""

    kind: str
    args: tuple            # indices of argument variables
    attrs: tuple           # sorted (key, value) pairs, defaults filled
    shape: tuple
    record: Any = None     # the op record (None for detach / const)
    value: Any = None      # raw constant (converted into each context at evaluation)
    name: str = ""


class TypedGraph:
    """Build with ``apply``/``detach``/``const``; choose the result with ``set_output``."""

    def __init__(self, input_shapes, input_names=None):
        self.uid = next(_GRAPH_IDS)
        self.input_shapes = [tuple(int(d) for d in s) for s in input_shapes]
        k = len(self.input_shapes)
        self.input_names = list(input_names) if input_names else [f"in{i}" for i in range(k)]
        if len(self.input_names) != k:
            raise TapeError(f"typed graph: {len(self.input_names)} input names for {k} inputs")
        self.nodes: list[GNode] = []
        self.output: Var | None = None
        self.inputs = [Var(self.uid, i, s) for i, s in enumerate(self.input_shapes)]

    # ------------------------------------------------------------ recording
    def __len__(self) -> int:
        return len(self.input_shapes) + len(self.nodes)

    def _check_var(self, v, where: str) -> Var:
        if not isinstance(v, Var):
            raise TapeError(f"{where}: expected a variable of this typed graph, got "
                            f"{type(v).__name__} {v!r}")
        if v.graph != self.uid:
            raise TapeError(f"{where}: variable {v.index} belongs to typed graph {v.graph}, "
                            f"not to graph {self.uid}")
        if not 0 <= v.index < len(self):
            raise TapeError(f"{where}: variable {v.index} does not exist (graph has "
                            f"{len(self)} variables)")
        return v

    def shape_of(self, index: int) -> tuple:
        k = len(self.input_shapes)
        return self.input_shapes[index] if index < k else self.nodes[index - k].shape

    def _push(self, node: GNode) -> Var:
        self.nodes.append(node)
        return Var(self.uid, len(self) - 1, node.shape)

    def apply(self, op: str, *vars_, **attrs) -> Var:
        where = f"typed graph node {len(self)}"
        try:
            rec = get_op(op)
        except GraphError as exc:
            raise TapeError(f"{where}: {exc}") from None
        if rec.forward is None:
            raise TapeError(f"{where}: op {op} has no forward rule")
        vs = [self._check_var(v, f"{where} ({op})") for v in vars_]
        full = resolve_attrs(rec, attrs, where)
        k = split_args(rec, len(vs), where)
        shapes = [v.shape for v in vs]
        for pname, raw in missing_params(rec, k, vs, shapes, full):
            vs.append(self.const(raw, name=f"{op}.{pname}"))
            shapes.append(vs[-1].shape)
            where = f"typed graph node {len(self)}"
        out = check_op_shapes(rec, shapes[:k], shapes[k:], full, where)
        return self._push(GNode(op, tuple(v.index for v in vs), tuple(sorted(full.items())),
                                out, rec))

    def detach(self, v: Var) -> Var:
        v = self._check_var(v, f"typed graph node {len(self)} (detach)")
        return self._push(GNode("detach", (v.index,), (), v.shape))

    def const(self, value: Any, name: str = "const") -> Var:
        """A constant; its raw value is converted into each evaluation context."""
        shape = tuple(np.shape(np.asarray(value, dtype=object)))
        return self._push(GNode("const", (), (), shape, value=value, name=name))

    def set_output(self, v: Var) -> Var:
        self.output = self._check_var(v, "typed graph output")
        return self.output

    def listing(self) -> str:
        lines = [f"{i}: input {self.input_names[i]} shape={list(s)}"
                 for i, s in enumerate(self.input_shapes)]
        k = len(self.input_shapes)
        for j, n in enumerate(self.nodes):
            attrs = "".join(f" {a}={b!r}" for a, b in n.attrs)
            lines.append(f"{k + j}: {n.kind} args={list(n.args)}{attrs} shape={list(n.shape)}")
        lines.append(f"output: {None if self.output is None else self.output.index}")
        return "\n".join(lines)

    # ----------------------------------------------------------- evaluation
    def _inputs(self, ctx, inputs) -> list:
        if len(inputs) != len(self.input_shapes):
            raise TapeError(f"typed graph: expected {len(self.input_shapes)} inputs "
                            f"({', '.join(self.input_names)}), got {len(inputs)}")
        vals = []
        for i, (v, want) in enumerate(zip(inputs, self.input_shapes)):
            v = to_context(ctx, v)
            got = value_shape(ctx, v)
            if got != want:
                raise TapeError(f"typed graph: input {i} ({self.input_names[i]}) has shape "
                                f"{list(got)}, the graph was recorded for {list(want)}")
            vals.append(v)
        return vals

    def _out_index(self) -> int:
        if self.output is None:
            raise TapeError("typed graph: no output selected (call set_output)")
        return self.output.index

    def forward_all(self, ctx, inputs) -> list:
        """Values of every variable (inputs first), evaluated in ``ctx``.

        A ``select`` reads only the branch its condition takes (both where the condition
        is mixed across the entries): the nodes only the other branch needs are not
        evaluated and hold ``None`` (so a guarded domain error never runs)."""
        ctx = scalars.get(ctx)
        vals = self._inputs(ctx, inputs)
        if self._guarded():
            return self._forward_guarded(ctx, vals)
        k = len(self.input_shapes)
        for j, n in enumerate(self.nodes):
            vals.append(self._node_value(ctx, n, k + j, [vals[a] for a in n.args]))
        return vals

    def _node_value(self, ctx, n: GNode, index: int, args: list):
        if n.kind == "detach":
            return stopped_value(ctx, args[0])
        if n.kind == "const":
            return to_context(ctx, n.value)
        try:
            return as_value(n.record.forward(ctx, args, dict(n.attrs), 0))
        except (ContextError, GraphError) as exc:
            raise TapeError(f"typed graph node {index} ({n.kind}): {exc}") from None

    def _guarded(self) -> bool:
        """Does some node read its args by a condition (``select``)?"""
        return any(n.record is not None and n.record.guarded is not None for n in self.nodes)

    def _stand_in(self, ctx, vals, args) -> list:
        """Argument values with zeros for a select's branch that was not evaluated (the
        select's rules never pick it)."""
        return [ctx.zeros(self.shape_of(a)) if vals[a] is None else vals[a] for a in args]

    def _forward_guarded(self, ctx, vals: list) -> list:
        """``forward_all`` through :func:`graph.fold.guarded_schedule`."""
        k = len(self.input_shapes)
        nodes = self.nodes
        parents = [()] * k + [n.args for n in nodes]
        guarded = [False] * k + [n.record is not None and n.record.guarded is not None
                                 for n in nodes]
        consumed = {a for n in nodes for a in n.args}
        roots = [i for i in range(len(self)) if i not in consumed]
        if self.output is not None:
            roots.append(self.output.index)
        vals = vals + [None] * len(nodes)

        def evaluate(i, reads):
            n = nodes[i - k]
            vals[i] = self._node_value(ctx, n, i, self._stand_in(ctx, vals, n.args))

        def branches(i):
            n = nodes[i - k]
            try:
                return n.record.guarded(ctx, vals[n.args[0]], 0)
            except (ContextError, GraphError) as exc:
                raise TapeError(f"typed graph node {i} ({n.kind}): {exc}") from None
        guarded_schedule(parents, guarded, roots, [True] * k + [False] * len(nodes),
                         evaluate, branches)
        return vals

    def forward(self, ctx, inputs):
        """The output's value."""
        return self.forward_all(ctx, inputs)[self._out_index()]

    def to_tape(self, ctx, inputs, requires_grad=None, values=None):
        """Lower to a tape over ``ctx``: inputs become leaves (ids ``0..k-1``).

        Returns ``(builder, ids)`` with ``ids[i]`` the tape id of variable ``i``.
        ``requires_grad`` is a list of booleans per input (default: all True).
        ``values``, when given, holds every variable's value (inputs first) already in
        ``ctx``: op nodes then take their value from it instead of running the forward
        rule, and keep the op table's shape check and VJP rule (used by ``hvp``, whose
        forward sweep comes from the JVP rules).  With a ``select``, the nodes only an
        untaken branch needs get no tape node (``ids[i]`` is None; ``values[i]`` None
        marks them when given).
        """
        b = TapeBuilder(ctx)
        vals = self._inputs(b.ctx, inputs)
        rg = [True] * len(vals) if requires_grad is None else list(requires_grad)
        ids = [b.leaf(v, name=self.input_names[i], requires_grad=rg[i])
               for i, v in enumerate(vals)]
        k = len(vals)
        if self._guarded():
            if values is None:           # the selects decide which nodes run
                values = self._forward_guarded(b.ctx, vals)
            return b, self._guarded_tape(b, ids, values)
        for j, n in enumerate(self.nodes):
            if n.kind == "detach":
                ids.append(b.detach(ids[n.args[0]]))
            elif n.kind == "const":
                ids.append(b.const(n.value, name=n.name or "const"))
            elif values is None:
                ids.append(b.apply(n.kind, *(ids[a] for a in n.args), **dict(n.attrs)))
            else:
                def given(ctx_, args, attrs, nb, _v=values[k + j]):
                    return _v
                ids.append(b.apply_computed(n.kind, tuple(ids[a] for a in n.args), given,
                                            "forward-mode sweep", **dict(n.attrs)))
        return b, ids

    def _guarded_tape(self, b, ids: list, values: list) -> list:
        """``to_tape``'s loop over the values of a masked forward sweep: a node that was
        not evaluated (``None``) gets no tape node, and a select whose branch was not
        taken reads a constant zero leaf in its place (its VJP sends that branch zero)."""
        k = len(ids)
        for j, n in enumerate(self.nodes):
            if values[k + j] is None:
                ids.append(None)
            elif n.kind == "detach":
                ids.append(b.detach(ids[n.args[0]]))
            elif n.kind == "const":
                ids.append(b.const(n.value, name=n.name or "const"))
            else:
                args = tuple(b.const(b.ctx.zeros(self.shape_of(a)), name="not taken")
                             if ids[a] is None else ids[a] for a in n.args)

                def given(ctx_, args_, attrs, nb, _v=values[k + j]):
                    return _v
                ids.append(b.apply_computed(n.kind, args, given, "forward sweep",
                                            **dict(n.attrs)))
        return ids

    def vjp(self, ctx, inputs, seed=None, dense: bool = True):
        """``(output value, [cotangent per input])`` through a tape and one reverse loop.

        With ``dense=True`` unreached inputs get zeros; otherwise ``None``.
        """
        b, ids = self.to_tape(ctx, inputs)
        out = ids[self._out_index()]
        grads: Gradients = backward(b.tape, out, seed=seed)
        cots = []
        for i in range(len(self.input_shapes)):
            g = grads.get(ids[i])
            if g is None and dense:
                g = b.ctx.zeros(self.input_shapes[i])
            cots.append(g)
        return b.tape.value(out), cots

    def jvp(self, ctx, inputs, tangents):
        """``(output, output tangent)`` from the op table's JVP rules, node by node.

        ``tangents[i] is None`` means input ``i`` does not vary.
        """
        vals, tans = self.jvp_all(ctx, inputs, tangents)
        o = self._out_index()
        t = tans[o]
        return vals[o], self._zeros(ctx, o) if t is None else t

    def jvp_all(self, ctx, inputs, tangents) -> tuple:
        """``(values, tangents)`` of every variable (inputs first), in ``ctx``.

        Tangents come from the op table's JVP rules; ``None`` marks a variable that does
        not vary (an input given no tangent, a constant, a detached value, or a node all of
        whose arguments do not vary), so rules run only where something varies.
        """
        base = scalars.get(ctx)
        vals = self.forward_all(base, inputs)
        k = len(self.input_shapes)
        tans = self._tangents(base, tangents)
        for j, n in enumerate(self.nodes):
            if n.kind in ("detach", "const") or vals[k + j] is None:
                tans.append(None)       # stopped / constant / not evaluated: no tangent
                continue
            ts = [tans[a] for a in n.args]
            if all(t is None for t in ts):
                tans.append(None)
                continue
            if n.record.jvp is None:
                raise TapeError(f"typed graph node {k + j} ({n.kind}): no JVP rule in the "
                                f"op table")
            try:
                t = n.record.jvp(base, self._stand_in(base, vals, n.args), ts, vals[k + j],
                                 dict(n.attrs), 0)
            except (ContextError, GraphError) as exc:
                raise TapeError(f"typed graph node {k + j} ({n.kind}) JVP: {exc}") from None
            tans.append(None if t is None else as_value(t))
        return vals, tans

    def jvp_dual(self, ctx, inputs, tangents):
        """``(output, output tangent)``: the forward fold over ``dual:<ctx>`` (the
        cross-check of :meth:`jvp`; the dual context's own derivative rules decide)."""
        base = scalars.get(ctx)
        dual = scalars.get(f"dual:{base.name}")
        vals = self._inputs(base, inputs)
        duals = [Dual(v, self._zeros(base, i) if t is None else t)
                 for i, (v, t) in enumerate(zip(vals, self._tangents(base, tangents)))]
        y = self.forward(dual, duals)
        return y.primal, y.tangent

    def _zeros(self, ctx, index: int):
        return scalars.get(ctx).zeros(self.shape_of(index))

    def _tangents(self, base, tangents) -> list:
        """Input tangents converted into ``base`` and shape-checked; ``None`` stays."""
        if len(tangents) != len(self.input_shapes):
            raise TapeError(f"typed graph: expected {len(self.input_shapes)} tangents, got "
                            f"{len(tangents)}")
        out = []
        for i, t in enumerate(tangents):
            if t is None:
                out.append(None)
                continue
            t = to_context(base, t)
            got = value_shape(base, t)
            if got != self.input_shapes[i]:
                raise TapeError(f"typed graph: tangent {i} ({self.input_names[i]}) has shape "
                                f"{list(got)}, input shape is {list(self.input_shapes[i])}")
            out.append(t)
        return out
