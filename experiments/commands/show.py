"""``scalarlab show GRAPH [--dot]``: the node listing (or GraphViz DOT) of a graph."""
from __future__ import annotations

from scalarlab import graph
from scalarlab.graph import examples
from . import help_of

NAME = "show"
HELP = help_of(NAME)


def add_arguments(p) -> None:
    p.add_argument("graph", metavar="GRAPH",
                   help=f"built-in graph ({', '.join(examples.names())}) or a graph file")
    p.add_argument("--dot", action="store_true", help="print GraphViz DOT instead of the listing")


def run(args) -> int:
    g, _, _ = examples.resolve(args.graph)
    print(graph.to_dot(g) if args.dot else graph.listing(g))
    return 0
