"""``grad``, ``vjp``, ``jvp`` and ``hvp`` of programs written against ``Ops``.

Every transform records the program once per argument-shape signature as a
:class:`~tape.typed_graph.TypedGraph` (cached on the transformed function), then:

* ``grad`` / ``vjp`` lower that graph to a tape over the context and run the reverse loop;
* ``jvp`` runs the op table's JVP rules node by node (``method="dual"`` folds the graph
  over the dual context ``dual:<ctx>`` instead, as a cross-check);
* ``hvp`` is forward-over-reverse with the forward mode taken from the op table: the JVP
  rules give every node's value and tangent along ``v``, those pairs become the values of
  a tape over ``dual:<ctx>``, and the reverse loop there runs the op table's VJP rules on
  them, so each cotangent carries its derivative along ``v`` -- the tangent part of the
  input cotangent is ``H v``.  ``method="dual"`` lowers the graph to a tape over
  ``dual:<ctx>`` and lets the dual context evaluate the forward rules (a cross-check).

First derivatives therefore come from the op table alone (its JVP and VJP rules, which
agree at kinks: ``relu``/``abs`` at 0 contribute 0, ``max``/``min`` ties split 1/2-1/2);
the dual arithmetic only differentiates the VJP rules' own formulas, whose
piecewise-constant factors (heaviside, sign, tie weights) have tangent zero.

A program is ``program(ops, *args)``; each argument may be a value or a nested
list/tuple/dict of values, and results come back in the same structure.
"""
from __future__ import annotations

from scalarlab import scalars
from scalarlab.scalars.values import Dual

from .backward import backward
from .values import to_context, value_shape
from .errors import TapeError
from .interpreters import flatten, record, unflatten


class _ProgramGraphs:
    """A program plus its typed graphs, one per argument-shape signature."""

    def __init__(self, program, ctx):
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


def _reverse(ctx, graph, flat, mask, seed, values=None):
    b, ids = graph.to_tape(ctx, flat, requires_grad=mask, values=values)
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


def jvp(program, primals, tangents, ctx="float64", method="rules"):
    """``(output, output tangent)`` of ``program`` at ``primals`` along ``tangents``.

    ``method="rules"`` (default) uses the op table's JVP rules node by node; ``"dual"``
    is the forward fold over ``dual:<ctx>`` (a cross-check: the dual context's own
    derivative rules).
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
    if method == "rules":
        return graph.jvp(rec.ctx, flat, tflat)
    if method == "dual":
        return graph.jvp_dual(rec.ctx, flat, tflat)
    raise TapeError(f"jvp: method must be 'rules' or 'dual', got {method!r}")


def hvp(program, primals, v, ctx="float64", argnums=0, method="rules"):
    """Hessian-vector product of the scalar ``program`` w.r.t. ``primals[argnums]``.

    Forward-over-reverse in one pass over a tape of duals ``(value, tangent along v)``.
    ``method="rules"`` (default) takes every node's tangent from the op table's JVP rules;
    ``"dual"`` lets the dual context evaluate the forward rules (a cross-check that
    differs only where the dual context's derivative at a kink differs from the table's).
    """
    if not isinstance(argnums, int):
        raise TapeError("hvp: argnums must be a single argument index")
    if method not in ("rules", "dual"):
        raise TapeError(f"hvp: method must be 'rules' or 'dual', got {method!r}")
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
    vit = iter(vleaves)
    tangents = []
    for i, m in enumerate(mask):
        if not m:
            tangents.append(None)
            continue
        t = to_context(base, next(vit))
        if value_shape(base, t) != graph.input_shapes[i]:
            raise TapeError(f"hvp: direction leaf has shape {list(value_shape(base, t))}, "
                            f"input {i} has shape {list(graph.input_shapes[i])}")
        tangents.append(t)
    dual = scalars.get(f"dual:{base.name}")

    def pair(i, x, t):
        if x is None:             # a node a select did not take: no value, no tape node
            return None
        return Dual(x, base.zeros(graph.shape_of(i)) if t is None else t)

    if method == "rules":
        vals, tans = graph.jvp_all(base, flat, tangents)
        dvals = [pair(i, x, t) for i, (x, t) in enumerate(zip(vals, tans))]
        cots = _reverse(dual, graph, dvals[:len(flat)], mask, None, values=dvals)
    else:
        dflat = [pair(i, x, t) for i, (x, t) in enumerate(zip(flat, tangents))]
        cots = _reverse(dual, graph, dflat, mask, None)
    tang = [c.tangent for c in cots]
    return _pick(_split(recipes, tang), argnums)
