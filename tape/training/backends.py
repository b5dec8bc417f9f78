"""Backend selection for the trainer's eager ops: each op goes through :mod:`graph.plan`.

The planner picks a kernel capsule per op name (policy -> plan -> bind), once, the first
time the op is applied.  On the CPU the capsule is the reference one, i.e. the op table's
forward rule, so the tape builder records the node as usual; on another device the bound
kernel computes the value and the builder still checks its shape and attaches the op
table's VJP rule.
"""
from __future__ import annotations

from types import SimpleNamespace

from scalarlab.graph.plan import backend_op, bind, default_policy, plan

from ..interpreters import EagerOps
from ..session import Handle


class Backends:
    """Capsule selection for eager ops through :mod:`graph.plan` (policy -> plan -> bind).

    One plan per op name, made the first time the op is applied; ``announce`` (a callable
    taking a line) hears the ``--show-backend`` line at that moment, before it runs.
    """

    def __init__(self, device: str, ctx, announce=None):
        self.policy = default_policy(device, ctx.name)
        self.ctx = ctx
        self.announce = announce
        self.selected: dict = {}

    def select(self, op: str):
        """``(capsule, kernel)`` for ``op`` (``(None, None)``: no runtime work)."""
        got = self.selected.get(op)
        if got is not None:
            return got
        if backend_op(op) is None:
            got = (None, None)
        else:
            node = SimpleNamespace(id=0, kind=SimpleNamespace(op=op))
            bound = bind(plan(SimpleNamespace(nodes=[node]), self.policy))
            entry = bound.plan.entries[0]
            got = (entry.capsule, bound.kernels[0])
            if self.announce is not None:
                self.announce(entry.capsule.line(op, self.ctx))
        self.selected[op] = got
        return got


class PlannedEagerOps(EagerOps):
    """Eager interpreter whose ops first go through :class:`Backends`.

    On the CPU the selected capsule is the reference (the op table's forward rule), which
    is exactly what the tape builder runs, so the builder records the node.  On another
    device the bound kernel computes the value and the node is appended here with the op
    table's VJP rule (``vjp=tape`` in the capsule line).
    """

    def __init__(self, session, backends: Backends):
        super().__init__(session)
        self.backends = backends

    def apply(self, op, *refs, **attrs):
        capsule, kernel = self.backends.select(op)
        if capsule is None or capsule.provider == "reference":
            return super().apply(op, *refs, **attrs)
        sess = self.session
        ids = tuple(sess.resolve(r) for r in refs)

        def compute(ctx, args, full, nb):
            return kernel(args, full, nb)

        i = sess.builder.apply_computed(op, ids, compute, f"kernel {capsule.name}", **attrs)
        return Handle(sess.id, sess.generation, i)
