"""Element types of a model's inputs, declared on the IR's input nodes.

A token-id, position or mask input holds integers: the IR's input node says so with
``dtype`` (``OpKind("input", dtype="int64")``, see :data:`graph.ops_shape.INTEGER_DTYPES`),
so that the lab's jobs hold it exact (never rounded to a format, never widened by a
radius or perturbed by a sampler; :mod:`experiments.cases`, :mod:`ibp.box`).  The ONNX
importer maps the graph; this module reads the model's declared element types and puts
them on the imported graph's input nodes (the ``scalarlab import`` command and ``GRAPH``
arguments naming an ``.onnx`` file go through :func:`load_onnx_typed`).
"""
from __future__ import annotations

from ..errors import GraphError
from ..node import Graph, OpKind
from ..ops_shape import INTEGER_DTYPES


def onnx_input_dtypes(model) -> list:
    """Per runtime input of an ONNX model (in order): ``"float"`` or its integer/bool
    element type's name (``"int64"``, ``"bool"``, ...)."""
    from .interchange import require
    from .onnx_shapes import runtime_inputs
    onnx = require("onnx", "onnx")
    out = []
    for vi in runtime_inputs(model):
        name = onnx.TensorProto.DataType.Name(vi.type.tensor_type.elem_type).lower()
        out.append(name if name in INTEGER_DTYPES else "float")
    return out


def declare_input_dtypes(graph: Graph, dtypes) -> Graph:
    """``graph`` with its input nodes (in id order) declaring ``dtypes`` (one per input;
    ``"float"`` leaves a node as it is).  The ONNX importer maps every runtime input to
    one input node in order; a count that differs (an input the graph does not read was
    dropped) is matched only when every input is float."""
    ids = graph.input_ids()
    dtypes = list(dtypes)
    if all(d == "float" for d in dtypes):
        return graph
    if len(ids) != len(dtypes):
        raise GraphError(f"the model declares {len(dtypes)} inputs ({', '.join(dtypes)}) but "
                         f"the graph has {len(ids)} input nodes: cannot say which hold "
                         f"integers")
    bad = [d for d in dtypes if d != "float" and d not in INTEGER_DTYPES]
    if bad:
        raise GraphError(f"input element type {bad[0]!r} is not 'float' or one of "
                         f"{', '.join(INTEGER_DTYPES)}")
    nodes = list(graph.nodes)
    for i, d in zip(ids, dtypes):
        if d != "float":
            n = nodes[i]
            nodes[i] = n.replace(kind=OpKind("input", **{**n.kind.attrs, "dtype": d}))
    return graph.with_nodes(nodes)


def load_onnx_typed(path, **kw):
    """:func:`graph.importers.onnx.load_onnx` with the inputs' element types declared."""
    from .interchange import require
    from .onnx import load_onnx
    g, p = load_onnx(path, **kw)
    onnx = require("onnx", "onnx")
    model = onnx.load(str(path), load_external_data=False)
    return declare_input_dtypes(g, onnx_input_dtypes(model)), p
