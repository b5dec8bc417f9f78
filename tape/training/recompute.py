"""``checkpoint(ops, f, *inputs)``: activation recomputation on the eager tape.

Mathematically ``checkpoint(f, x) = f(x)``.  Under the eager interpreter the forward pass
evaluates ``f`` without recording it (plain evaluation: the op table's forward rules, no
tape, no VJP closures holding intermediate values) and appends ONE ``checkpoint`` node
whose parents are the inputs.  Its VJP re-runs ``f`` on a private tape from the saved
input values and runs the reverse loop there, so the intermediates of ``f`` exist only
while that node's cotangent is being computed (Griewank and Walther's trade of arithmetic
for memory).  The recomputation uses the same rules in the same context, so it reproduces
the forward values exactly.

``f`` must be a program ``f(ops, *inputs)`` that reaches state only through its inputs
(pass parameters as inputs), and it must be deterministic: draw dropout masks outside it.
Under the typed-graph and plain interpreters ``checkpoint`` records / evaluates ``f``
inline (there is no tape to save on at recording time).
"""
from __future__ import annotations

from ..backward import backward
from ..builder import TapeBuilder
from ..errors import TapeError
from ..interpreters import EagerOps, PlainOps
from .layers import Forward, Module
from ..session import Handle, Session
from ..tape import TapeNode
from ..values import value_shape


def checkpoint(ops, f, *inputs):
    """``f(ops, *inputs)`` with its intermediates recomputed in the reverse pass."""
    if not callable(f):
        raise TapeError(f"checkpoint: f must be callable, got {type(f).__name__}")
    if not isinstance(ops, EagerOps):
        return f(ops, *inputs)
    sess = ops.session
    tape = sess.tape
    ctx = sess.ctx
    ids = [sess.resolve(h) for h in inputs]
    vals = [tape.value(i) for i in ids]
    out = f(PlainOps(ctx), *vals)
    if isinstance(out, (list, tuple, dict)):
        raise TapeError("checkpoint: f must return one value (got a "
                        f"{type(out).__name__})")
    shape = value_shape(ctx, out)
    requires = any(tape[i].requires_grad for i in ids)
    vjp = None
    if requires:
        flags = [tape[i].requires_grad for i in ids]

        def vjp(g, _f=f, _vals=vals, _flags=flags):
            # Recompute f on a private tape, then one reverse loop from its output.
            b = TapeBuilder(ctx)
            leaves = [b.leaf(v, name=f"in{k}", requires_grad=r)
                      for k, (v, r) in enumerate(zip(_vals, _flags))]
            inner = _Recording(b)
            y = _f(inner, *[inner.handle(i) for i in leaves])
            grads = backward(b.tape, inner.resolve(y), seed=g)
            return [grads.get(i) for i in leaves]

    n = tape.append(TapeNode("checkpoint", tuple(ids), out, shape, vjp, requires))
    return Handle(sess.id, sess.generation, n)


class _Recording(EagerOps):
    """The eager interpreter over a private builder (used for the recomputation)."""

    def __init__(self, builder: TapeBuilder):
        s = Session(builder.ctx)
        s.builder = builder
        super().__init__(s)

    def handle(self, i: int) -> Handle:
        return Handle(self.session.id, self.session.generation, i)

    def resolve(self, h) -> int:
        return self.session.resolve(h)


class Checkpointed(Module):
    """A layer wrapper: ``Checkpointed(module)`` runs ``module`` through :func:`checkpoint`.

    The wrapped module's state is named ``<prefix>inner.<name>``.  Dropout masks and
    batch-norm statistics cannot be recomputed honestly inside (a second draw would
    differentiate another function), so a training-mode draw or side value inside is a
    TapeError.
    """

    def __init__(self, inner):
        if not isinstance(inner, Module):
            raise TapeError(f"Checkpointed: expected a Module, got {type(inner).__name__}")
        self.inner = inner

    def children(self):
        return [("inner", self.inner)]

    def forward(self, f, x, prefix):
        sub = prefix + "inner."
        names = [sub + n for n, _, _, _ in self.inner.named_parameters()] + \
                [sub + n for n, _, _ in self.inner.named_buffers()]
        training = f.training

        def refuse_random(name, shape, p):
            raise TapeError(f"Checkpointed: {name}: a random draw inside a checkpointed "
                            f"module cannot be recomputed; move the dropout outside")

        def run(ops, h, *state):
            inner = Forward(ops, dict(zip(names, state)), training, refuse_random)
            y = self.inner(inner, h, sub)
            if inner.sides:
                raise TapeError(f"Checkpointed: {', '.join(inner.sides)}: statistics of a "
                                f"training pass inside a checkpointed module would be lost; "
                                f"move the batch norm outside")
            return y

        return checkpoint(f.ops, run, x, *[f.ref(n) for n in names])

    def __repr__(self):
        return f"Checkpointed({self.inner!r})"
