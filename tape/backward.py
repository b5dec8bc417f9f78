"""Reverse mode over a tape: one loop from the output down, one accumulation function.

Only nodes reached from the output (through nodes that require a gradient) receive a
cotangent, and only reached nodes run their VJP rule.  That matters at singular values: a
disconnected rule such as the derivative of ``1/x`` at 0 would produce ``0 * (1/0) = nan``
if every node were visited with a zero cotangent.  Unreached nodes are absent from the
result; ``dense=True`` fills them with zeros afterwards, without running any rule.
"""
from __future__ import annotations

from .errors import TapeError
from .tape import Tape
from .values import as_value, to_context, value_shape


class Gradients(dict):
    """``{node id: cotangent}`` plus ``reached`` (sorted ids that received a cotangent).

    A missing key and a zero value mean different things: the first says no path from
    the output reached the node (or the node retains nothing), the second that the paths
    summed to zero.  :meth:`leaf_grad` turns a missing key into an explanation.
    """

    def __init__(self, items, reached, output_id, tape=None):
        super().__init__(items)
        self.reached = reached
        self.output_id = output_id
        self.tape = tape

    def leaf_grad(self, i: int):
        """The cotangent of node ``i``, or a TapeError saying why it has none."""
        if i in self.reached:
            return self[i]
        why = "it was not reached from the output"
        if self.tape is not None:
            node = self.tape[self.tape.check_id(i, "leaf_grad")]
            if not node.requires_grad:
                why = ("it does not require a gradient (requires_grad=false)" if not node.parents
                       else f"it is a {node.name} node that does not require a gradient")
            label = f"node {i} ({node.name})"
        else:
            label = f"node {i}"
        raise TapeError(f"no gradient for {label} from output {self.output_id}: {why}")


def accumulate(grads: dict, tape: Tape, target: int, contribution, source: int) -> None:
    """Add ``contribution`` into ``grads[target]``: THE place where paths are summed.

    The contribution must have exactly the target's shape (rules sum broadcast axes
    themselves); a mismatch names the sending node, the receiving node and both shapes.
    """
    ctx = tape.ctx
    node = tape._nodes[target]
    contribution = as_value(contribution)
    shape = value_shape(ctx, contribution)
    if shape != node.shape:
        src = tape._nodes[source]
        raise TapeError(f"backward: node {source} ({src.name}) sent a contribution of shape "
                        f"{list(shape)} to parent {target} ({node.name}) of shape "
                        f"{list(node.shape)}")
    prev = grads.get(target)
    grads[target] = contribution if prev is None else ctx.add(prev, contribution)


def backward(tape: Tape, output_id: int, seed=None, dense: bool = False) -> Gradients:
    """Cotangents of every node reached from ``output_id`` (seed defaults to ones).

    One reverse loop over ids ``output_id .. 0``; a node's rule runs only when the node
    was reached and requires a gradient; contributions to nodes that do not require a
    gradient (detached copies, constant leaves) are dropped, so those nodes stay absent.
    """
    if isinstance(output_id, bool) or not isinstance(output_id, int) \
            or not 0 <= output_id < len(tape):
        n = len(tape)
        rng = f"ids 0..{n - 1}" if n else "the tape is empty"
        raise TapeError(f"backward: output id {output_id!r} is out of range for a tape of "
                        f"{n} nodes ({rng})")
    ctx = tape.ctx
    out = tape[output_id]
    if seed is None:
        seed = ctx.ones(out.shape)
    else:
        seed = to_context(ctx, as_value(seed))
        sshape = value_shape(ctx, seed)
        if sshape != out.shape:
            raise TapeError(f"backward: seed of shape {list(sshape)} does not match output "
                            f"node {output_id} ({out.name}) of shape {list(out.shape)}")
    grads: dict = {output_id: seed}
    nodes = tape._nodes
    for i in range(output_id, -1, -1):
        g = grads.get(i)
        if g is None:
            continue                      # unreached: its rule never runs
        node = nodes[i]
        if node.vjp is None or not node.requires_grad:
            continue
        contribs = node.vjp(g)
        if contribs is None:
            continue
        if len(contribs) != len(node.parents):
            raise TapeError(f"backward: node {i} ({node.name}) returned {len(contribs)} "
                            f"contributions for {len(node.parents)} parents")
        for p, c in zip(node.parents, contribs):
            if c is None or not nodes[p].requires_grad:
                continue
            accumulate(grads, tape, p, c, i)
    reached = sorted(grads)
    if dense:
        items = {i: grads[i] if i in grads else ctx.zeros(nodes[i].shape)
                 for i in range(len(nodes))}
    else:
        items = {i: grads[i] for i in reached}
    return Gradients(items, reached, output_id, tape)
