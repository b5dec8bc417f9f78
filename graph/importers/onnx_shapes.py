"""Concrete shapes at import: every input dimension fixed, every shape in the model known.

The per-example importer keeps the model's symbolic batch axis in front and refuses graphs
that move it or read its extent (transformer exports do both: ``Shape`` of a
``[batch, seq, hidden]`` tensor feeding reshapes, causal masks built from ``Range`` and
``Trilu``).  Fixing the input dimensions instead (``--shape NAME=1x8``, or 1 for every
symbolic dimension) makes every ``Shape`` a constant, so the shape arithmetic folds away
exactly (:mod:`.onnx_fold`), and the model's batch dimension is just a dimension of the
example: the lab's own sample axis stays in front of the model's full shape.
"""
from __future__ import annotations

from ..errors import GraphError


def parse_shape(text: str) -> tuple:
    """``NAME=1x3x64x64`` as ``(name, (1, 3, 64, 64))``; GraphError naming the text."""
    name, eq, dims = str(text).partition("=")
    try:
        shape = tuple(int(t) for t in dims.lower().split("x")) if dims.strip() else ()
    except ValueError:
        shape = None
    if not eq or not name or shape is None or any(d < 1 for d in shape):
        raise GraphError(f"shape {text!r}: expected NAME=D1xD2x... with positive integer "
                         f"extents (e.g. x=1x3x32x32)")
    return name, shape


def runtime_inputs(model) -> list:
    """The graph inputs that are not initializers (the values a caller feeds)."""
    inits = {i.name for i in model.graph.initializer}
    return [vi for vi in model.graph.input if vi.name not in inits]


def concrete_model(model, shapes=None):
    """A copy of ``model`` whose inputs have the dimensions ``shapes`` gives (a dict
    ``name -> tuple``; a symbolic dimension of an input not named is 1, a fixed one stays),
    with every intermediate shape inferred by onnx (``data_prop`` propagates shape values,
    so ``Shape -> Gather -> Reshape`` chains get concrete targets too)."""
    import onnx
    shapes = {k: tuple(int(d) for d in v) for k, v in dict(shapes or {}).items()}
    m = onnx.ModelProto()
    m.CopyFrom(model)
    feeds = runtime_inputs(m)
    unknown = sorted(set(shapes) - {vi.name for vi in feeds})
    if unknown:
        raise GraphError(f"--shape names {unknown}, which are not inputs of the model (its "
                         f"inputs: {[vi.name for vi in feeds]})")
    for vi in feeds:
        if not vi.type.HasField("tensor_type"):
            continue
        t = vi.type.tensor_type
        given = shapes.get(vi.name)
        if given is not None and t.HasField("shape") and len(t.shape.dim) != len(given):
            raise GraphError(f"--shape {vi.name}={'x'.join(map(str, given))}: the model "
                             f"declares rank {len(t.shape.dim)} for input {vi.name!r}")
        if given is not None:
            for d, want in zip(t.shape.dim, given):
                if d.HasField("dim_value") and d.dim_value != want:
                    raise GraphError(f"--shape {vi.name}={'x'.join(map(str, given))}: the "
                                     f"model fixes that axis at {d.dim_value}, not {want}")
            t.ClearField("shape")
            for want in given:
                t.shape.dim.add().dim_value = want
            continue
        if not t.HasField("shape"):
            raise GraphError(f"input {vi.name!r} declares no shape: give it with --shape "
                             f"{vi.name}=D1xD2x...")
        for d in t.shape.dim:
            if not d.HasField("dim_value"):
                d.dim_value = 1          # clears dim_param: a symbolic extent becomes 1
    # shapes recorded for the old symbolic inputs would contradict the concrete ones
    del m.graph.value_info[:]
    for o in m.graph.output:
        if o.type.HasField("tensor_type"):
            o.type.tensor_type.ClearField("shape")
    try:
        return onnx.shape_inference.infer_shapes(m, strict_mode=False, data_prop=True)
    except Exception as exc:      # onnx's message names the node and the shapes
        raise GraphError(f"shape inference with the concrete input shapes failed: "
                         f"{type(exc).__name__}: {exc}") from None
