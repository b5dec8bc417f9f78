"""``grad``, ``vjp``, ``jvp`` and ``hvp`` of programs written against ``Ops``.

Every transform records the program once per argument-shape signature as a
:class:`~tape.typed_graph.TypedGraph` (cached on the transformed function), then:

* ``grad`` / ``vjp`` lower that graph to a tape over the context and run the reverse loop;
* ``jvp`` folds the graph forward over the dual context ``dual:<ctx>``, so tangents ride
  along with the values (``method="rules"`` uses the op table's JVP rules instead, as a
  cross-check);
* ``hvp`` lowers the graph to a tape over ``dual:<ctx>`` with leaves ``(x, v)`` and runs
  the reverse loop there (forward-over-reverse): the cotangent's tangent part is ``H v``.

A program is ``program(ops, *args)``; each argument may be a value or a nested
list/tuple/dict of values, and results come back in the same structure.
"""
from __future__ import annotations

from .backward import backward
from .values import to_context, value_shape
from .errors import TapeError
from .interpreters import flatten, record, unflatten


class _ProgramGraphs:
    """A program plus its typed graphs, one per argument-shape signature."""

    def __init__(self, program, ctx):
        from scalarlab import scalars
        self.program = program
        self.ctx = scalars.get(ctx)
        self.cache: dict = {}

    def prepare(self, args):
        """Flattened context values, per-argument (recipe, count), and the typed graph."""
        flat, recipes, shapes = [], [], []
        for a in args:
            leaves, r = flatten(a)
            vals = [to_context(self.ctx, v) for v in leaves]
            flat.extend(vals)
            recipes.append((r, len(vals)))
            shapes.append(tuple(value_shape(self.ctx, v) for v in vals))
        key = tuple((repr(r), s) for (r, _), s in zip(recipes, shapes))
        g = self.cache.get(key)
        if g is None:
            shape_trees = [unflatten(r, list(s)) for (r, _), s in zip(recipes, shapes)]
            g = record(self.program, shape_trees)
            self.cache[key] = g
        return flat, recipes, g


def _split(recipes, flat):
    """Per-argument trees from a flat list."""
    out, pos = [], 0
    for r, n in recipes:
        out.append(unflatten(r, flat[pos:pos + n]))
        pos += n
    return out


def _mask(recipes, argnums) -> list:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for a in nums:
        if not 0 <= a < len(recipes):
            raise TapeError(f"argnums {a} out of range for {len(recipes)} argument(s)")
    mask = []
    for i, (_, n) in enumerate(recipes):
        mask.extend([i in nums] * n)
    return mask


def _pick(per_arg, argnums):
    return per_arg[argnums] if isinstance(argnums, int) else tuple(per_arg[a] for a in argnums)


def grad(program, ctx="float64", argnums=0):
    """``g(*args)`` -> gradient of the scalar ``program(ops, *args)`` w.r.t. ``argnums``."""
    rec = _ProgramGraphs(program, ctx)

    def g(*args):
        flat, recipes, graph = rec.prepare(args)
        out_shape = graph.shape_of(graph.output.index)
        if out_shape != ():
            raise TapeError(f"grad: the program's output has shape {list(out_shape)}; grad "
                            f"needs a scalar (use vjp with a seed)")
        mask = _mask(recipes, argnums)
        cots = _reverse(rec.ctx, graph, flat, mask, None)
        return _pick(_split(recipes, cots), argnums)

    g.recorded = rec
    return g


def _reverse(ctx, graph, flat, mask, seed):
    b, ids = graph.to_tape(ctx, flat, requires_grad=mask)
    grads = backward(b.tape, ids[graph.output.index], seed=seed)
    cots = []
    for i, want in enumerate(mask):
        c = grads.get(ids[i]) if want else None
        cots.append(b.ctx.zeros(graph.input_shapes[i]) if c is None else c)
    return cots


def vjp(program, *primals, ctx="float64"):
    """``(output, vjp_fn)``; ``vjp_fn(cotangent)`` returns one cotangent tree per argument."""
    rec = _ProgramGraphs(program, ctx)
    flat, recipes, graph = rec.prepare(primals)
    b, ids = graph.to_tape(rec.ctx, flat)
    out_id = ids[graph.output.index]

    def vjp_fn(cotangent):
        seed = to_context(rec.ctx, cotangent)
        grads = backward(b.tape, out_id, seed=seed)
        cots = [grads.get(ids[i]) for i in range(len(flat))]
        cots = [rec.ctx.zeros(graph.input_shapes[i]) if c is None else c
                for i, c in enumerate(cots)]
        return tuple(_split(recipes, cots))

    return b.tape.value(out_id), vjp_fn


def jvp(program, primals, tangents, ctx="float64", method="dual"):
    """``(output, output tangent)`` of ``program`` at ``primals`` along ``tangents``.

    ``method="dual"`` (default) is the forward fold over ``dual:<ctx>``; ``"rules"`` uses
    the op table's JVP rules node by node.
    """
    rec = _ProgramGraphs(program, ctx)
    flat, recipes, graph = rec.prepare(primals)
    if len(tangents) != len(primals):
        raise TapeError(f"jvp: {len(tangents)} tangent argument(s) for {len(primals)} primals")
    tflat = []
    for t, (r, n) in zip(tangents, recipes):
        leaves, _ = flatten(t)
        if len(leaves) != n:
            raise TapeError(f"jvp: a tangent has {len(leaves)} leaves, its primal has {n}")
        tflat.extend(leaves)
    if method == "dual":
        return graph.jvp(rec.ctx, flat, tflat)
    if method == "rules":
        return graph.jvp_rules(rec.ctx, flat, tflat)
    raise TapeError(f"jvp: method must be 'dual' or 'rules', got {method!r}")


def hvp(program, primals, v, ctx="float64", argnums=0):
    """Hessian-vector product of the scalar ``program`` w.r.t. ``primals[argnums]``.

    Forward-over-reverse: the typed graph is lowered to a tape over ``dual:<ctx>`` whose
    leaves carry tangent ``v`` (zero for the other arguments); the reverse loop then
    computes ``(grad, H v)`` in one pass and the tangent part is returned.
    """
    from scalarlab import scalars
    from scalarlab.scalars.dual import Dual
    if not isinstance(argnums, int):
        raise TapeError("hvp: argnums must be a single argument index")
    rec = _ProgramGraphs(program, ctx)
    flat, recipes, graph = rec.prepare(primals)
    if graph.shape_of(graph.output.index) != ():
        raise TapeError("hvp: the program's output must be a scalar")
    mask = _mask(recipes, argnums)
    vleaves, _ = flatten(v)
    if len(vleaves) != sum(mask):
        raise TapeError(f"hvp: direction has {len(vleaves)} leaves, argument {argnums} has "
                        f"{sum(mask)}")
    base = rec.ctx
    dual = scalars.get(f"dual:{base.name}")
    vit = iter(vleaves)
    dflat = []
    for i, (x, m) in enumerate(zip(flat, mask)):
        if m:
            t = to_context(base, next(vit))
            if value_shape(base, t) != graph.input_shapes[i]:
                raise TapeError(f"hvp: direction leaf has shape {list(value_shape(base, t))}, "
                                f"input {i} has shape {list(graph.input_shapes[i])}")
        else:
            t = base.zeros(graph.input_shapes[i])
        dflat.append(Dual(x, t))
    cots = _reverse(dual, graph, dflat, mask, None)
    tang = [c.tangent for c in cots]
    return _pick(_split(recipes, tang), argnums)
