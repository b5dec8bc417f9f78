"""Graph-level errors."""
from scalarlab.scalars.errors import ScalarLabError


class GraphError(ScalarLabError):
    """A graph, payload or graph file is malformed, or evaluation hit a data error.

    Messages name the node, the field and both values, e.g.
    ``IR graph: node 2: outShape mismatch: inferred=[5], declared=[4] (Node(...))``.
    """
