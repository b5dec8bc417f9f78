"""``scalarlab import MODEL.onnx -o GRAPH.json``: an ONNX model as a scalarlab graph file."""
from __future__ import annotations

import json
import os

from scalarlab import graph
from scalarlab.graph.importers.onnx import load_onnx

from .. import argtypes as T
from .. import outputs

NAME = "import"
HELP = "import an ONNX model (initializers -> payload) and write a scalarlab graph file"


def add_arguments(p) -> None:
    p.add_argument("model", metavar="MODEL.onnx", type=T.existing_file(),
                   help="the ONNX model file")
    p.add_argument("-o", "--out", required=True, metavar="GRAPH.json",
                   type=outputs.output_file(".json"),
                   help="graph file to write (JSON; payload inline unless --npz)")
    p.add_argument("--batch-dims", type=T.integer(0, 8), default=None, metavar="K",
                   help="leading batch axes of the model's inputs (default: inferred, the "
                        "leading symbolic dimensions such as 'N'/'batch' are batch axes and "
                        "a fixed one belongs to the example; 0: the input is one example)")
    p.add_argument("--output", default=None, metavar="NAME",
                   help="which model output the graph computes (needed when it has several)")
    p.add_argument("--npz", action="store_true", help="write the payload as a .npz beside the JSON")
    p.add_argument("--listing", action="store_true", help="print the node listing")


def run(args) -> int:
    g, p = load_onnx(args.model, batch_dims=args.batch_dims, output=args.output)
    # Both files are written to temporary names beside their targets and renamed.
    ref = None
    if args.npz:
        npz_path = os.path.splitext(args.out)[0] + ".npz"
        outputs.check_output_file(npz_path, "--npz")
        with outputs.atomic_path(npz_path, "--npz") as tmp:
            graph.fileformat.save_npz(tmp, g, p)
        ref = os.path.basename(npz_path)
    doc = graph.fileformat.to_json(g, p, payload_file=ref)
    outputs.write_text(args.out, json.dumps(doc, indent=1) + "\n")
    if args.listing:
        print(graph.listing(g))
    print(f"wrote {args.out}: {len(g.nodes)} nodes, {len(p)} payload entries")
    return 0
