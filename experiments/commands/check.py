"""``scalarlab check GRAPH``: both validation levels and the payload check; ``ok`` or the error."""
from __future__ import annotations

from scalarlab import graph
from scalarlab.graph import examples

NAME = "check"
HELP = "validate a graph: structure (ids, parents, arity), shapes, payload; prints ok or the error"


def add_arguments(p) -> None:
    p.add_argument("graph", metavar="GRAPH",
                   help=f"built-in graph ({', '.join(examples.names())}) or a graph file")
    p.add_argument("--payload", default=None, metavar="P.npz",
                   help="check against this payload instead of the graph's own")


def run(args) -> int:
    g, payload, _ = examples.resolve(args.graph)
    if args.payload:
        payload = graph.fileformat.load_npz(args.payload)
    graph.check_well_formed(g)
    graph.check_shapes(g)
    graph.check_payload(g, payload)
    print("ok")
    return 0
