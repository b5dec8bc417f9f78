"""``scalarlab import MODEL.onnx -o GRAPH.json``: an ONNX model as a scalarlab graph file.

The weights go to a side file ``GRAPH.npz`` beside the JSON when they hold more than
``graph.fileformat.SIDE_FILE_NUMBERS`` numbers (about 16 MiB of JSON; resnet18 would be
444 MB of it), or always with ``--npz``; ``--inline`` keeps them in the JSON.  The pair is
one output set (both files or neither) and the JSON records the side file's size and
SHA-256; the command says in one line where the weights went."""
from __future__ import annotations

import argparse
import json
import os

from .. import argtypes as T
from . import help_of
from ..lazy_import import lazy

# Heavy modules load when a run first uses them: --help builds the parser without them.
graph = lazy("scalarlab.graph")
_element_types = lazy("scalarlab.graph.importers.element_types")
outputs = lazy("scalarlab.experiments.outputs")
_errors = lazy("scalarlab.graph.errors")
_onnx_shapes = lazy("scalarlab.graph.importers.onnx_shapes")

NAME = "import"
HELP = help_of(NAME)


def shape_spec(text: str) -> tuple:
    """``--shape NAME=1x3x64x64``: an input's concrete dimensions (positive integers)."""
    try:
        return _onnx_shapes.parse_shape(text)
    except _errors.GraphError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


shape_spec.__name__ = "shape"


def add_arguments(p) -> None:
    p.add_argument("model", metavar="MODEL.onnx", type=T.existing_file(),
                   help="the ONNX model file")
    p.add_argument("-o", "--out", required=True, metavar="GRAPH.json",
                   type=T.output_file(".json"),
                   help="graph file to write (JSON; weights in GRAPH.npz beside it above "
                        "2^19 numbers or with --npz, else inline)")
    p.add_argument("--batch-dims", type=T.integer(0, 8), default=None, metavar="K",
                   help="leading batch axes of the model's inputs (default: inferred, the "
                        "leading symbolic dimensions such as 'N'/'batch' are batch axes and "
                        "a fixed one belongs to the example; 0: the input is one example)")
    p.add_argument("--shape", action="append", type=shape_spec, default=None,
                   metavar="NAME=D1xD2x...",
                   help="concrete shapes at import: input NAME has these dimensions (repeat "
                        "for several inputs; every other symbolic dimension is 1) and every "
                        "shape in the model is fixed, the model's batch axis being an axis of "
                        "the example (default: per example where that imports, else concrete "
                        "with every symbolic dimension 1)")
    p.add_argument("--input-file", default=None, metavar="INPUTS.npz",
                   type=T.existing_file(".npz", ".npy"),
                   help="concrete shapes from sample inputs: each array's shape (an .npz "
                        "keyed by input name, or one .npy for a one-input model) is its "
                        "input's shape (default: none)")
    p.add_argument("--output", default=None, metavar="NAME",
                   help="which model output the graph computes (needed when it has several)")
    side = p.add_mutually_exclusive_group()
    side.add_argument("--npz", action="store_true",
                      help="always write the weights as GRAPH.npz beside the JSON (default: "
                           "when they hold more than 2^19 numbers)")
    side.add_argument("--inline", action="store_true",
                      help="always write the weights into the JSON (readable, large: 444 MB "
                           "for resnet18)")
    p.add_argument("--listing", action="store_true", help="print the node listing")


def run(args) -> int:
    npz_path = None if args.inline else os.path.splitext(args.out)[0] + ".npz"
    if args.npz:                       # checked before the import, like --out itself
        _check_side_file(args, npz_path)
    shapes = _shapes(args)
    g, p = _element_types.load_onnx_typed(args.model, batch_dims=args.batch_dims,
                                          output=args.output, shapes=shapes)
    fileformat = graph.fileformat
    numbers = fileformat.payload_numbers(p)
    if not (args.npz or (npz_path and numbers > fileformat.SIDE_FILE_NUMBERS)):
        npz_path = None
    elif not args.npz:                 # the size chose it: checked before anything is written
        _check_side_file(args, npz_path)
    # The payload and the graph file that names it are one output set: both or neither
    # (the graph file, which refers to the payload, is published last).
    ref = None
    with outputs.output_set([(npz_path, "--npz"), (args.out, "--out")]):
        if npz_path:
            with outputs.atomic_path(npz_path, "--npz") as tmp:
                fileformat.save_npz(tmp, g, p)
                # the JSON records the side file's size and hash: a file from another
                # import beside it is refused when the graph is loaded
                ref = fileformat.side_file_ref(os.path.basename(npz_path), tmp)
        doc = fileformat.to_json(g, p, payload_file=ref)
        outputs.write_text(args.out, json.dumps(doc, indent=1) + "\n")
    if args.listing:
        print(graph.listing(g))
    if npz_path:
        why = ("--npz" if args.npz else
               f"more than {fileformat.SIDE_FILE_NUMBERS:,} numbers; --inline writes them "
               f"into the JSON")
        print(f"weights: {npz_path} ({ref['bytes'] / 2 ** 20:.1f} MiB, {numbers:,} numbers) "
              f"beside {os.path.basename(args.out)}, which loads it ({why})")
    shown = "" if shapes is None else " (concrete shapes: " + ", ".join(
        f"{k}={'x'.join(map(str, v))}" for k, v in shapes.items()) + ")"
    # the per-example input shapes say which import it was (a refused per-example import
    # falls back to concrete shapes, every symbolic dimension 1)
    ins = ", ".join("x".join(map(str, n.out_shape)) or "scalar" for n in g
                    if n.kind.op == "input")
    print(f"wrote {args.out}: {len(g.nodes)} nodes, {len(p)} payload entries{shown}; "
          f"input shape {ins} per sample")
    return 0


def _check_side_file(args, npz_path) -> None:
    """The side file must be writable and must not be the model itself."""
    outputs.check_output_file(npz_path, "--npz")
    outputs.check_not_input(npz_path, [args.model], "--npz")


def _shapes(args):
    """``{input: shape}`` from --shape and --input-file, or None (no concrete shapes)."""
    if not args.shape and not args.input_file:
        return None
    shapes = {}
    if args.input_file:
        import numpy as np
        from scalarlab.graph import files
        files.check(args.input_file, "--input-file")   # a regular file within the cap
        try:
            data = np.load(args.input_file, allow_pickle=False)
        except Exception as exc:
            raise _errors.GraphError(f"--input-file {args.input_file}: cannot read it "
                             f"({type(exc).__name__})") from None
        if isinstance(data, np.ndarray):
            import onnx
            from scalarlab.graph.importers.onnx_shapes import runtime_inputs
            feeds = runtime_inputs(onnx.load(args.model, load_external_data=False))
            if len(feeds) != 1:
                raise _errors.GraphError(f"--input-file {args.input_file}: one array for a model "
                                 f"with {len(feeds)} inputs; give an .npz keyed by input name")
            shapes[feeds[0].name] = tuple(data.shape)
        else:
            try:
                shapes.update({k: tuple(data[k].shape) for k in data.files})
            except Exception as exc:     # a truncated or corrupt member
                raise _errors.GraphError(f"--input-file {args.input_file}: cannot read it "
                                 f"({type(exc).__name__}: {exc})") from None
    for name, shape in args.shape or []:
        shapes[name] = shape
    return shapes
