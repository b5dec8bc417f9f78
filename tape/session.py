"""Eager sessions: a tape behind handles that remember whose recording they name.

``reset()`` starts a new generation with an empty tape, so node 0 of the new recording
reuses the number of node 0 of the old one.  A handle therefore carries
``(session, generation, id)`` and every use is checked: a handle from another session or
from an earlier generation is a :class:`TapeError` saying whose it is and which generation,
never a silent read of an unrelated value of the same shape.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

from .backward import Gradients, backward
from .builder import TapeBuilder
from .errors import TapeError

_SESSION_IDS = itertools.count(1)


@dataclass(frozen=True)
class Handle:
    """A reference to one value recorded in an eager session."""

    session: int
    generation: int
    id: int

    def __repr__(self) -> str:
        return f"Handle(session={self.session}, generation={self.generation}, id={self.id})"


class Session:
    """Owns one tape per generation and hands out checked :class:`Handle` objects."""

    def __init__(self, ctx):
        self.id = next(_SESSION_IDS)
        self.generation = 0
        self.builder = TapeBuilder(ctx)
        self.ctx = self.builder.ctx

    @property
    def tape(self):
        return self.builder.tape

    def reset(self) -> int:
        """Forget the recording; start generation ``g + 1``.  Returns the new generation."""
        self.generation += 1
        self.builder = TapeBuilder(self.ctx)
        return self.generation

    # ---------------------------------------------------------------- handles
    def _handle(self, i: int) -> Handle:
        return Handle(self.id, self.generation, i)

    def resolve(self, h) -> int:
        """The node id behind ``h``, after checking that ``h`` belongs to this recording."""
        if not isinstance(h, Handle):
            raise TapeError(f"session {self.id}: expected a Handle, got {type(h).__name__} "
                            f"{h!r}")
        if h.session != self.id:
            raise TapeError(f"session {self.id}: handle for node {h.id} belongs to session "
                            f"{h.session} (generation {h.generation}), not to this session")
        if h.generation != self.generation:
            raise TapeError(f"session {self.id}: stale handle: node {h.id} of session "
                            f"{h.session} generation {h.generation}; the session was reset "
                            f"and is at generation {self.generation}")
        return h.id

    # -------------------------------------------------------------- recording
    def leaf(self, value, name: str = "leaf", requires_grad: bool = True) -> Handle:
        return self._handle(self.builder.leaf(value, name, requires_grad))

    def const(self, value, name: str = "const") -> Handle:
        return self._handle(self.builder.const(value, name))

    def detach(self, h: Handle) -> Handle:
        return self._handle(self.builder.detach(self.resolve(h)))

    def apply(self, op: str, *hs: Handle, **attrs) -> Handle:
        return self._handle(self.builder.apply(op, *(self.resolve(h) for h in hs), **attrs))

    def value(self, h: Handle):
        return self.tape.value(self.resolve(h))

    def backward(self, output: Handle, seed=None, dense: bool = False) -> Gradients:
        return backward(self.tape, self.resolve(output), seed=seed, dense=dense)

    def grad(self, grads: Gradients, h: Handle):
        """The cotangent of ``h`` in ``grads``, or ``None`` when ``h`` was not reached."""
        return grads.get(self.resolve(h))
