"""The trainer: a model, its named state, an optimizer and one execution path.

``TrainingSession(model, ctx, optimizer, execution=..., device=..., seed=...)``:

* ``step(x, y)`` runs in training mode: forward, loss, reverse pass, optimizer update,
  running-statistic updates; returns the step's loss.
* ``predict(x)`` and ``loss(x, y)`` run in evaluation mode (dropout is the identity,
  batch normalisation uses its running statistics).

``execution="eager"`` records a fresh tape every call.  ``execution="typed-graph"``
records the program once per (mode, shapes) as a :class:`~tape.typed_graph.TypedGraph`
whose input context is the state (parameters, buffers, dropout masks), then the input and
the target, and re-evaluates that graph with the current values (lowered to a tape for
the reverse pass).  Both run the same program text through the op table, so they produce
the same numbers digit for digit.  The typed-graph path runs on the CPU only.

Random state: one seeded numpy ``Generator`` initialises the parameters and draws every
dropout mask, in program order, in both execution paths; the mask is a recorded value, so
the reverse pass differentiates the function that was evaluated.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from scalarlab import scalars
from scalarlab.scalars.errors import ContextError

from ..backward import backward
from ..errors import TapeError
from ..interpreters import EagerOps, GraphOps
from ..session import Session
from ..typed_graph import TypedGraph
from ..values import value_shape
from .backends import Backends, PlannedEagerOps
from .layers import Forward, Module
from .optim import Optimizer, SGD

EXECUTIONS = ("eager", "typed-graph")
DEVICES = ("cpu", "cuda")


def draw_mask(rng, ctx, shape: tuple, p: Fraction):
    """A dropout mask in ``ctx``: 1/(1-p) where ``U[0,1) >= p``, else 0 (one draw per entry)."""
    keep = rng.random(shape) >= float(p)
    return ctx.mul(ctx.convert(keep.astype(np.float64)), ctx.convert(1 / (1 - p)))

class _TrainingGraph:
    """A recorded training program: its typed graph plus what the trainer needs to feed
    it (how many state inputs, the dropout-mask slots) and read it (the side values)."""

    def __init__(self, graph: TypedGraph, n_state: int, slots: list, sides: dict):
        self.graph = graph
        self.n_state = n_state
        self.slots = slots          # [(name, shape, p)] dropout masks, in draw order
        self.sides = sides          # {name: Var}


class TrainingSession:
    """Trains one model in one context: ``step``, ``predict``, ``loss``, ``state_dict``."""

    def __init__(self, model: Module, ctx="float64", optimizer: Optimizer | None = None,
                 *, execution: str = "eager", device: str = "cpu", seed: int = 0,
                 show_backend=None):
        if not isinstance(model, Module):
            raise TapeError(f"trainer: model must be a tape.training.layers.Module, got "
                            f"{type(model).__name__}")
        self.ctx = scalars.get(ctx)
        if self.ctx.is_interval or self.ctx.is_dual:
            raise TapeError(f"trainer: context {self.ctx.name} is not a point context; "
                            f"training needs point values (float64, binary32, rational, ...)")
        if execution not in EXECUTIONS:
            raise TapeError(f"trainer: unknown execution {execution!r} (known: "
                            f"{', '.join(EXECUTIONS)})")
        if device not in DEVICES:
            raise TapeError(f"trainer: unknown device {device!r} (known: {', '.join(DEVICES)})")
        if execution == "typed-graph" and device != "cpu":
            raise TapeError(f"trainer: typed-graph execution runs on the cpu only; device "
                            f"{device!r} was requested (use execution='eager' there)")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise TapeError(f"trainer: seed must be an int, got {seed!r}")
        self.model = model
        self.optimizer = optimizer if optimizer is not None else SGD("0.01")
        self.execution = execution
        self.device = device
        self.seed = int(seed)
        self.rng = np.random.default_rng(self.seed)
        self.mode = "train"
        self.steps = 0
        self.backends = None
        if device != "cpu" or show_backend is not None:
            self.backends = Backends(device, self.ctx, show_backend)
        try:
            init = model.init_parameters(self.rng)
            self.params = {n: self.ctx.convert(v) for n, v in init.items()}
            self.buffers = {n: self.ctx.add(self.ctx.zeros(shape), self.ctx.convert(v))
                            for n, shape, v in model.named_buffers()}
        except ContextError as exc:
            raise TapeError(f"trainer: initial state in context {self.ctx.name}: {exc}") from None
        self._graphs: dict = {}

    # ------------------------------------------------------------------- naming
    def param_names(self) -> list:
        return list(self.params)

    def buffer_names(self) -> list:
        return list(self.buffers)

    def state_shapes(self) -> list:
        """``[(name, shape), ...]``: parameters then buffers (the typed graph's order)."""
        return [(n, tuple(self.ctx.shape(v))) for n, v in self.params.items()] + \
               [(n, tuple(self.ctx.shape(v))) for n, v in self.buffers.items()]

    # --------------------------------------------------------------- public API
    def step(self, x, y):
        """One training update on the batch ``(x, y)``; returns the batch loss (before the
        update) as a 0-d context value."""
        self.mode = "train"
        loss, grads, sides, n = self._run(x, y, training=True, want_grad=True)
        self.optimizer.update(self.ctx, self.params, grads)
        self._update_buffers(sides, n)
        self.steps += 1
        return loss

    def predict(self, x):
        """The model's output on ``x`` in evaluation mode."""
        self.mode = "eval"
        return self._run(x, None, training=False, want_grad=False)[0]

    def loss(self, x, y):
        """The loss on ``(x, y)`` in evaluation mode (no update)."""
        self.mode = "eval"
        return self._run(x, y, training=False, want_grad=False)[0]

    def gradients(self, x, y, training: bool = True) -> tuple:
        """``(loss, {param: gradient})`` without updating anything (random draws happen)."""
        loss, grads, _, _ = self._run(x, y, training=training, want_grad=True)
        return loss, grads

    def graph(self, x_shape, y_shape=None, training: bool = True) -> TypedGraph:
        """The typed graph for these shapes and mode (recorded if needed)."""
        return self._recorded(tuple(x_shape), None if y_shape is None else tuple(y_shape),
                              training).graph

    # ----------------------------------------------------------------- internals
    def _convert(self, v, what):
        try:
            return self.ctx.convert(v)
        except ContextError as exc:
            raise TapeError(f"trainer: {what}: {exc}") from None

    def _program(self, f: Forward, x, y):
        out = self.model(f, x)
        return out if y is None else f.ops.mse(out, y)

    def _run(self, x, y, training: bool, want_grad: bool):
        x = self._convert(x, "input")
        y = None if y is None else self._convert(y, "target")
        xs = value_shape(self.ctx, x)
        if not xs:
            raise TapeError("trainer: input must have a batch axis, got shape []")
        try:
            if self.execution == "eager":
                return self._run_eager(x, y, training, want_grad)
            return self._run_graph(x, y, training, want_grad)
        except ContextError as exc:
            raise TapeError(f"trainer ({self.execution}, {self.ctx.name}): {exc}") from None

    def _run_eager(self, x, y, training, want_grad):
        sess = Session(self.ctx)
        ops = PlannedEagerOps(sess, self.backends) if self.backends else EagerOps(sess)
        refs = {}
        for n, v in self.params.items():
            refs[n] = sess.leaf(v, n, requires_grad=want_grad)
        for n, v in self.buffers.items():
            refs[n] = sess.const(v, n)
        rng = self.rng

        def random(name, shape, p):
            return sess.const(draw_mask(rng, self.ctx, shape, p), name)

        f = Forward(ops, refs, training, random)
        xh = sess.const(x, "x")
        yh = None if y is None else sess.const(y, "y")
        out = self._program(f, xh, yh)
        value = sess.value(out)
        sides = {k: sess.value(h) for k, h in f.sides.items()}
        grads = None
        if want_grad:
            g = sess.backward(out)
            grads = {}
            for n in self.params:
                v = g.get(sess.resolve(refs[n]))
                grads[n] = self.ctx.zeros(self.ctx.shape(self.params[n])) if v is None else v
        return value, grads, sides, value_shape(self.ctx, x)[0]

    def _recorded(self, xs, ys, training) -> _TrainingGraph:
        key = (training, xs, ys)
        rec = self._graphs.get(key)
        if rec is not None:
            return rec
        state = self.state_shapes()
        tail = [("x", xs)] + ([] if ys is None else [("y", ys)])
        # Pass 1 discovers the dropout masks (their number and shapes) in draw order;
        # pass 2 records the graph with those masks as inputs between state and input.
        slots: list = []
        probe = TypedGraph([s for _, s in state] + [s for _, s in tail])
        self._record_into(probe, len(state), slots, probe_masks=True, training=training)
        g = TypedGraph([s for _, s in state] + [s for _, s, _ in slots] + [s for _, s in tail],
                       [n for n, _ in state] + [n for n, _, _ in slots] + [n for n, _ in tail])
        sides = self._record_into(g, len(state), slots, probe_masks=False, training=training)
        rec = _TrainingGraph(g, len(state), slots, sides)
        if self.backends is not None:
            for node in g.nodes:
                if node.kind not in ("const", "detach"):
                    self.backends.select(node.kind)
        self._graphs[key] = rec
        return rec

    def _record_into(self, g, n_state, slots, probe_masks, training):
        ops = GraphOps(g)
        names = [n for n, _ in self.state_shapes()]
        refs = dict(zip(names, g.inputs[:n_state]))
        masks = iter(g.inputs[n_state:n_state + (0 if probe_masks else len(slots))])

        def random(name, shape, p):
            if probe_masks:
                slots.append((name, tuple(shape), p))
                return g.const(np.zeros(shape), name)
            return next(masks)

        f = Forward(ops, refs, training, random)
        k = len(g.input_shapes)
        has_y = k - n_state - (0 if probe_masks else len(slots)) == 2
        x = g.inputs[k - 2] if has_y else g.inputs[k - 1]
        y = g.inputs[k - 1] if has_y else None
        g.set_output(self._program(f, x, y))
        return dict(f.sides)

    def _run_graph(self, x, y, training, want_grad):
        xs = value_shape(self.ctx, x)
        ys = None if y is None else value_shape(self.ctx, y)
        rec = self._recorded(xs, ys, training)
        g = rec.graph
        masks = [draw_mask(self.rng, self.ctx, s, p) for _, s, p in rec.slots]
        inputs = list(self.params.values()) + list(self.buffers.values()) + masks + [x] + \
            ([] if y is None else [y])
        out = g.output.index
        if not want_grad:
            vals = g.forward_all(self.ctx, inputs)
            return vals[out], None, {k: vals[v.index] for k, v in rec.sides.items()}, xs[0]
        n_par = len(self.params)
        b, ids = g.to_tape(self.ctx, inputs,
                           requires_grad=[True] * n_par + [False] * (len(inputs) - n_par))
        gr = backward(b.tape, ids[out])
        grads = {}
        for i, n in enumerate(self.params):
            v = gr.get(ids[i])
            grads[n] = self.ctx.zeros(self.ctx.shape(self.params[n])) if v is None else v
        sides = {k: b.tape.value(ids[v.index]) for k, v in rec.sides.items()}
        return b.tape.value(ids[out]), grads, sides, xs[0]

    def _update_buffers(self, sides, n):
        for prefix, m in self.model.modules():
            upd = getattr(m, "update_running", None)
            if upd is not None and (prefix + "mean") in sides:
                upd(self.ctx, prefix, self.buffers, sides, n)

    # -------------------------------------------------------------------- state
    def state_dict(self) -> dict:
        """Everything the next update depends on (the loader position is the caller's)."""
        return {"context": self.ctx.name, "execution": self.execution, "mode": self.mode,
                "steps": self.steps, "seed": self.seed,
                "params": dict(self.params), "buffers": dict(self.buffers),
                "optimizer": self.optimizer.state_dict(),
                "rng": self.rng.bit_generator.state}
