"""``scalarlab export GRAPH -o MODEL.onnx``: a graph (built-in or file) as an ONNX model."""
from __future__ import annotations

from scalarlab.graph import examples
from scalarlab.graph.exporters.onnx import DEFAULT_OPSET, save_onnx

from .. import argtypes as T
from .. import outputs
from . import help_of

NAME = "export"
HELP = help_of(NAME)


def add_arguments(p) -> None:
    p.add_argument("graph", metavar="GRAPH",
                   help=f"built-in graph ({', '.join(examples.names())}) or a graph file")
    p.add_argument("-o", "--out", required=True, metavar="MODEL.onnx",
                   type=outputs.output_file(".onnx"), help="ONNX file to write")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                   help="tensor element type (payload rounded once by binary32 / float64)")
    p.add_argument("--opset", type=T.integer(20, 99), default=DEFAULT_OPSET,
                   help=f"ONNX opset (>= 20, default {DEFAULT_OPSET})")


def run(args) -> int:
    g, p, _ = examples.resolve(args.graph)
    with outputs.atomic_path(args.out) as tmp:       # temp file beside it, then renamed
        save_onnx(tmp, g, p, dtype=args.dtype, opset=args.opset)
    print(f"wrote {args.out}: {len(g.nodes)} IR nodes, {args.dtype}, opset {args.opset}, "
          f"batch axis N in front")
    return 0
