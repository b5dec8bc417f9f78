"""``scalarlab show GRAPH [--dot]``: the node listing (or GraphViz DOT) of a graph."""
from __future__ import annotations

from . import help_of
from .. import defaults as D
from ..lazy_import import lazy

# Heavy modules load when a run first uses them: --help builds the parser without them.
graph = lazy("scalarlab.graph")
examples = lazy("scalarlab.graph.examples")

NAME = "show"
HELP = help_of(NAME)


def add_arguments(p) -> None:
    p.add_argument("graph", metavar="GRAPH",
                   help=f"built-in graph ({', '.join(D.EXAMPLE_NAMES)}) or a graph file")
    p.add_argument("--dot", action="store_true", help="print GraphViz DOT instead of the listing")


def run(args) -> int:
    g, _, _ = examples.resolve(args.graph)
    print(graph.to_dot(g) if args.dot else graph.listing(g))
    return 0
