"""The tape: a grow-only list of recorded nodes whose identifiers are their indices.

A node holds its name, its parent ids (repeats allowed: ``mul(x, x)`` names ``x`` twice
and owes two contributions), its value in the tape's context, its shape, a VJP closure
(upstream cotangent -> one contribution or ``None`` per parent) and ``requires_grad``.
Because nodes are only appended and parents always exist already, index order is a
topological order and the reverse pass is a single loop from the end.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from .errors import TapeError


class TapeNode:
    """One recorded value.  ``vjp`` is ``None`` for leaves and for ``detach`` nodes.

    Fields: ``name``, ``parents`` (tuple of ids), ``value``, ``shape``, ``vjp`` (upstream
    cotangent -> list with one contribution or ``None`` per parent), ``requires_grad``,
    ``attrs`` (the op's attributes as sorted pairs, for listings).
    """

    __slots__ = ("name", "parents", "value", "shape", "vjp", "requires_grad", "attrs")

    def __init__(self, name: str, parents: tuple, value: Any, shape: tuple,
                 vjp: Optional[Callable], requires_grad: bool, attrs: tuple = ()):
        self.name = name
        self.parents = parents
        self.value = value
        self.shape = shape
        self.vjp = vjp
        self.requires_grad = requires_grad
        self.attrs = attrs

    def __repr__(self) -> str:
        return (f"TapeNode({self.name!r}, parents={list(self.parents)}, "
                f"shape={list(self.shape)}, requires_grad={self.requires_grad})")


class Tape:
    """A grow-only array of :class:`TapeNode` over one scalar context."""

    def __init__(self, ctx):
        self.ctx = ctx
        self._nodes: list[TapeNode] = []

    # ------------------------------------------------------------------ growing
    def append(self, node: TapeNode) -> int:
        """Append ``node`` and return its identifier (its index)."""
        n = len(self._nodes)
        for p in node.parents:
            if not (isinstance(p, int) and 0 <= p < n):
                raise TapeError(f"tape: node {n} ({node.name}): parent id {p!r} is not an "
                                f"existing node (tape has {n} nodes)")
        self._nodes.append(node)
        return n

    # ------------------------------------------------------------------ reading
    def __len__(self) -> int:
        return len(self._nodes)

    def __getitem__(self, i: int) -> TapeNode:
        return self._nodes[self.check_id(i, "tape")]

    def check_id(self, i, what: str) -> int:
        """Return ``i`` when it names a node, else raise a TapeError saying what asked."""
        n = len(self._nodes)
        if isinstance(i, bool) or not isinstance(i, int):
            raise TapeError(f"{what}: node id must be an int, got {type(i).__name__} {i!r}")
        if not 0 <= i < n:
            rng = f"ids 0..{n - 1}" if n else "no nodes"
            raise TapeError(f"{what}: node id {i!r} is out of range for a tape of {n} "
                            f"nodes ({rng})")
        return i

    def value(self, i: int):
        return self[i].value

    def shape(self, i: int) -> tuple:
        return self[i].shape

    def nodes(self) -> list:
        """``[(name, [parent ids]), ...]``: the recorded graph, as the seed prints it."""
        return [(n.name, list(n.parents)) for n in self._nodes]

    def listing(self) -> str:
        """One line per node: ``id: name parents=[...] shape=[...] requires_grad=...``."""
        lines = []
        for i, n in enumerate(self._nodes):
            attrs = "".join(f" {k}={v!r}" for k, v in n.attrs)
            lines.append(f"{i}: {n.name} parents={list(n.parents)} shape={list(n.shape)}"
                         f"{attrs} requires_grad={str(n.requires_grad).lower()}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Tape ctx={self.ctx.name} nodes={len(self._nodes)}>"
