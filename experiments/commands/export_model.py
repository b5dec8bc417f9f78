"""``scalarlab export GRAPH -o MODEL.onnx``: a graph (built-in or file) as an ONNX model."""
from __future__ import annotations

from .. import argtypes as T
from . import help_of
from .. import defaults as D
from ..lazy_import import lazy

# Heavy modules load when a run first uses them: --help builds the parser without them.
examples = lazy("scalarlab.graph.examples")
_onnx = lazy("scalarlab.graph.exporters.onnx")
outputs = lazy("scalarlab.experiments.outputs")

NAME = "export"
HELP = help_of(NAME)


def add_arguments(p) -> None:
    p.add_argument("graph", metavar="GRAPH",
                   help=f"built-in graph ({', '.join(D.EXAMPLE_NAMES)}) or a graph file")
    p.add_argument("-o", "--out", required=True, metavar="MODEL.onnx",
                   type=T.output_file(".onnx"), help="ONNX file to write")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                   help="tensor element type (payload rounded once by binary32 / float64)")
    p.add_argument("--opset", type=T.integer(20, 99), default=D.ONNX_DEFAULT_OPSET,
                   help=f"ONNX opset (>= 20, default {D.ONNX_DEFAULT_OPSET})")


def run(args) -> int:
    g, p, _ = examples.resolve(args.graph)
    with outputs.atomic_path(args.out) as tmp:       # temp file beside it, then renamed
        _onnx.save_onnx(tmp, g, p, dtype=args.dtype, opset=args.opset)
    print(f"wrote {args.out}: {len(g.nodes)} IR nodes, {args.dtype}, opset {args.opset}, "
          f"batch axis N in front")
    return 0
