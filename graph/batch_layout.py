"""Where the batch axes of a source tensor sit: the layout algebra that lets importers
map source transposes and reshapes that MOVE or MERGE batch axes onto IR values.

IR values always carry their ``nb`` batch axes in front and every attribute names a
per-example axis (``graph.axes``).  A source model (ONNX, torch.fx) may transpose the
batch axis inwards (``nn.MultiheadAttention`` runs on [L, N, E]) or merge it with a
per-example axis ([L, N, E] -> [L, N*H, hd] -> [N*H, L, hd]).  Each example is still
computed on its own, so the IR can express such a model: the IR value stays
[batch..., per-example...] and a :class:`Layout` records how the source tensor is a
transpose/merge of it.  A source transpose is bookkeeping only; a source reshape is at
most one IR ``permute`` and one IR ``reshape`` of the per-example axes.  What the IR
cannot express is refused with a :class:`ShapeRuleError` saying why: an op along a
source axis that holds a batch axis (it would mix examples), a reshape that splits a
batch axis or cuts through the per-example factors merged with it.

Atoms: ``("b", k)`` is batch axis k, ``("e", j)`` per-example axis j of the IR value.  A
source axis is a tuple of atoms merged row-major (its length is the product).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import ShapeRuleError

__all__ = ["Layout"]


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= int(x)
    return n


def _show(groups) -> str:
    def atom(a):
        return f"b{a[1]}" if a[0] == "b" else f"e{a[1]}"
    return "[" + ", ".join("*".join(atom(a) for a in g) if g else "1" for g in groups) + "]"


@dataclass(frozen=True)
class Layout:
    """A source tensor as a view of an IR value with ``nb`` batch axes and per-example
    shape ``eshape``: ``groups[i]`` lists the atoms merged into source axis i."""

    groups: tuple
    nb: int
    eshape: tuple

    # ------------------------------------------------------------------ building
    @classmethod
    def leading(cls, nb: int, eshape) -> "Layout":
        """The plain layout: source axes = batch axes, then the per-example axes."""
        eshape = tuple(int(d) for d in eshape)
        groups = tuple((("b", k),) for k in range(nb)) + tuple((("e", j),) for j in range(len(eshape)))
        return cls(groups, nb, eshape)

    @property
    def rank(self) -> int:
        return len(self.groups)

    def __str__(self) -> str:
        return _show(self.groups)

    def is_leading(self) -> bool:
        return self == Layout.leading(self.nb, self.eshape)

    def source_shape(self, batch_sizes) -> tuple:
        """The source tensor's shape for batch axis sizes ``batch_sizes``."""
        bs = tuple(batch_sizes)
        return tuple(_prod(bs[a[1]] if a[0] == "b" else self.eshape[a[1]] for a in g)
                     for g in self.groups)

    def _atoms(self):
        return [a for g in self.groups for a in g]

    # ------------------------------------------------------------------ transpose
    def transpose(self, perm) -> "Layout":
        """Source ``Transpose(perm)``: bookkeeping only (no IR node)."""
        perm = [int(p) for p in perm]
        if sorted(perm) != list(range(self.rank)):
            raise ShapeRuleError(f"transpose: perm {perm} is not a permutation of the "
                                 f"{self.rank} source axes")
        return Layout(tuple(self.groups[p] for p in perm), self.nb, self.eshape)

    # ------------------------------------------------------------------ canonical
    def canonical(self):
        """``(perm, layout)``: the IR ``permute`` attribute (None: not needed) that makes
        the IR's per-example axis order the source order, and the relabelled layout.
        Ops that pair source axes with IR axes positionally (matmul, broadcasting, reshape)
        need it."""
        order = [a[1] for a in self._atoms() if a[0] == "e"]
        if order == list(range(len(order))):
            return None, self
        new = {j: i for i, j in enumerate(order)}
        groups = tuple(tuple(a if a[0] == "b" else ("e", new[a[1]]) for a in g) for g in self.groups)
        return order, Layout(groups, self.nb, tuple(self.eshape[j] for j in order))

    # ------------------------------------------------------------------ per-axis ops
    def axis(self, a: int, op: str = "op") -> int:
        """The IR per-example axis of source axis ``a`` for an op that works along it
        (softmax, reductions, slice, gather, concat): it must be one per-example axis."""
        r = self.rank
        if not -r <= int(a) < r:
            raise ShapeRuleError(f"{op}: axis {a} out of range for source rank {r}")
        g = self.groups[int(a) % r]
        if any(t[0] == "b" for t in g):
            raise ShapeRuleError(f"{op}: source axis {a} holds a batch axis (layout {self}): "
                                 f"the op would mix examples, which the IR evaluates one by one")
        if len(g) != 1:
            raise ShapeRuleError(f"{op}: source axis {a} merges per-example axes {_show([g])} "
                                 f"(layout {self}); reshape it first")
        return g[0][1]

    def resize(self, a: int, n: int, op: str = "op") -> "Layout":
        """The layout after an op along source axis ``a`` changed its length to ``n``
        (slice, gather with an index list, a matmul with a constant matrix)."""
        j = self.axis(a, op)
        es = list(self.eshape)
        es[j] = int(n)
        return Layout(self.groups, self.nb, tuple(es))

    def remove_axis(self, a: int, op: str = "op") -> "Layout":
        """The layout after an op removed source axis ``a`` (squeeze, gather with a
        scalar index, a reduction without keepdims): IR per-example axis ``axis(a)``."""
        j = self.axis(a, op)
        groups = tuple(tuple(t if t[0] == "b" or t[1] < j else ("e", t[1] - 1) for t in g)
                       for i, g in enumerate(self.groups) if i != int(a) % self.rank)
        return Layout(groups, self.nb, self.eshape[:j] + self.eshape[j + 1:])

    # ------------------------------------------------------------------ reshape
    def reshape(self, target, batch_sizes):
        """Source ``Reshape(target)`` (ONNX: 0 copies the source extent, one -1 is
        inferred) with the batch axes of the sizes the target was computed for.

        Returns ``(steps, layout)``: the IR nodes to emit, as ``(op, attrs)`` pairs (an
        optional ``permute`` then an optional ``reshape`` of the per-example axes), and
        the layout of the result."""
        bs = tuple(int(b) for b in batch_sizes)
        if len(bs) != self.nb:
            raise ShapeRuleError(f"reshape: {len(bs)} batch sizes for {self.nb} batch axes")
        if any(b < 2 for b in bs):
            raise ShapeRuleError(f"reshape: batch sizes {list(bs)} must be >= 2 (a batch axis "
                                 f"of length 1 cannot be told apart from a new axis)")
        src = self.source_shape(bs)
        t = [int(d) for d in target]
        t = [src[i] if d == 0 and i < len(src) else d for i, d in enumerate(t)]
        total = _prod(src)
        if t.count(-1) > 1 or any(d < -1 for d in t):
            raise ShapeRuleError(f"reshape: target {list(target)} may hold one -1")
        if -1 in t:
            rest = _prod(d for d in t if d != -1)
            if rest == 0 or total % rest:
                raise ShapeRuleError(f"reshape: cannot reshape {list(src)} to {list(target)}")
            t = [total // rest if d == -1 else d for d in t]
        if _prod(t) != total:
            raise ShapeRuleError(f"reshape: cannot reshape {list(src)} ({total} entries) to "
                                 f"{list(target)}")
        perm, lay = self.canonical()
        steps = [("permute", {"perm": list(perm)})] if perm is not None else []
        # the atom stream in source order; runs of per-example atoms become one run
        stream = []
        for a in lay._atoms():
            if a[0] == "b":
                stream.append(["b", a[1], bs[a[1]]])
            elif stream and stream[-1][0] == "e":
                stream[-1][2] *= lay.eshape[a[1]]
            else:
                stream.append(["e", None, lay.eshape[a[1]]])
        stream = [s for s in stream if not (s[0] == "e" and s[2] == 1)]
        groups, esizes, k = [], [], 0
        why = (f"reshape: the source reshape {list(src)} -> {t} (layout {self}, batch sizes "
               f"{list(bs)})")
        for d in t:
            rem, g = d, []
            while rem > 1:
                if k >= len(stream):
                    raise ShapeRuleError(f"{why} runs out of entries")
                kind, idx, size = stream[k]
                if kind == "b":
                    if rem % size:
                        raise ShapeRuleError(f"{why} splits batch axis {idx} (of size {size}): "
                                             f"the IR keeps every example whole")
                    g.append(("b", idx))
                    rem //= size
                    k += 1
                elif rem % size == 0:
                    g.append(("e", len(esizes)))
                    esizes.append(size)
                    rem //= size
                    k += 1
                elif size % rem == 0:
                    g.append(("e", len(esizes)))
                    esizes.append(rem)
                    stream[k][2] = size // rem
                    rem = 1
                else:
                    raise ShapeRuleError(f"{why} cuts through per-example factors merged with "
                                         f"a batch axis; not expressible per example")
            if not g:
                g.append(("e", len(esizes)))        # a new axis of length 1
                esizes.append(1)
            groups.append(tuple(g))
        if k != len(stream):
            raise ShapeRuleError(f"{why} leaves entries over")
        if tuple(esizes) != lay.eshape:
            steps.append(("reshape", {"shape": list(esizes)}))
        return steps, Layout(tuple(groups), self.nb, tuple(esizes))

    # ------------------------------------------------------------------ two operands
    def _pattern(self):
        return tuple(tuple(a if a[0] == "b" else ("e",) for a in g) for g in self.groups)

    def matmul(self, other: "Layout"):
        """``a @ b`` of two activations: ``(perm_a, perm_b, layout)`` (IR permutes to
        emit first, None = none).  The contracted and output axes (the last two source
        axes of each) must be per-example axes; the leading source axes must hold the
        batch axes at the same places in both operands."""
        pa, a = self.canonical()
        pb, b = other.canonical()
        for lay, name in ((a, "left"), (b, "right")):
            if lay.rank < 2:
                raise ShapeRuleError(f"matmul: the {name} operand (layout {lay}) needs rank >= 2 "
                                     f"when batch axes are moved")
            for g in lay.groups[-2:]:
                if any(t[0] == "b" for t in g) or len(g) != 1:
                    raise ShapeRuleError(f"matmul: the {name} operand's last two source axes "
                                         f"(layout {lay}) must be single per-example axes")
        if a.rank != b.rank or a._pattern()[:-2] != b._pattern()[:-2]:
            raise ShapeRuleError(f"matmul: the batch axes sit differently in the operands "
                                 f"(layouts {a} and {b}); the IR pairs examples one to one")
        m = a.groups[-2][0][1]
        n = b.groups[-1][0][1]
        lead = a.groups[:-2]
        ne = len(a.eshape) - 2
        eshape = a.eshape[:-2] + (a.eshape[m], b.eshape[n])
        return pa, pb, Layout(lead + ((("e", ne),), (("e", ne + 1),)), a.nb, eshape)

    def binary(self, other: "Layout", op: str = "op"):
        """Two activations combined entry by entry (add, mul, where, concat along a
        per-example axis): ``(perm_a, perm_b, layout)``.  Both must hold their batch axes
        at the same places and their per-example axes in the same groups, so that the IR
        pairs (and broadcasts) the per-example axes as the source pairs its axes."""
        pa, a = self.canonical()
        pb, b = other.canonical()
        if a.rank != b.rank or a._pattern() != b._pattern():
            raise ShapeRuleError(f"{op}: the batch axes sit differently in the operands "
                                 f"(layouts {a} and {b}); the IR pairs examples one to one")
        return pa, pb, a

    def const_shape(self, const_shape):
        """How a source constant (no batch axes) broadcasts against this (canonical)
        layout: ``(ir_shape, source_to_ir)`` where ``source_to_ir(array)`` reshapes the
        constant to its IR per-example shape.  A constant that varies along a source
        axis holding a batch axis would differ between examples: refused."""
        cs = tuple(int(d) for d in const_shape)
        if len(cs) > self.rank:
            raise ShapeRuleError(f"broadcast: constant of shape {list(cs)} has more axes than "
                                 f"the source tensor (layout {self})")
        if self.canonical()[0] is not None:
            raise ShapeRuleError("broadcast: canonicalise the layout first (Layout.canonical)")
        cs_full = (1,) * (self.rank - len(cs)) + cs
        split, ir = [], []
        for g, d in zip(self.groups, cs_full):
            sizes = [None if t[0] == "b" else self.eshape[t[1]] for t in g]
            if d == 1:
                split += [1] * len(g)
                ir += [1 for t in g if t[0] == "e"]
                continue
            if any(s is None for s in sizes):
                raise ShapeRuleError(f"broadcast: the constant varies along a source axis that "
                                     f"holds a batch axis (layout {self}, constant "
                                     f"{list(cs)}): it would differ between examples")
            if _prod(sizes) != d:
                raise ShapeRuleError(f"broadcast: constant extent {d} vs source extent "
                                     f"{_prod(sizes)} (layout {self})")
            split += sizes
            ir += sizes
        keep = [i for i, t in enumerate(a for g in self.groups for a in g) if t[0] == "e"]

        def source_to_ir(arr):
            arr = np.asarray(arr).reshape(cs_full).reshape(split)
            return arr.reshape([split[i] for i in keep]) if keep else arr.reshape(())
        return tuple(ir), source_to_ir

    # ------------------------------------------------------------------ values
    def to_source(self, value, batch_sizes=None):
        """The source tensor of an IR value (numpy array with the ``nb`` batch axes in
        front): the inverse bookkeeping, for outputs and tests."""
        v = np.asarray(value)
        bs = tuple(v.shape[:self.nb]) if batch_sizes is None else tuple(batch_sizes)
        atoms = self._atoms()
        axis_of = {("b", k): k for k in range(self.nb)}
        axis_of.update({("e", j): self.nb + j for j in range(len(self.eshape))})
        v = np.transpose(v, [axis_of[a] for a in atoms])
        return v.reshape(self.source_shape(bs))
