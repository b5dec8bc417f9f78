"""Graph-level errors."""
from scalarlab.scalars.errors import ScalarLabError


class GraphError(ScalarLabError):
    """A graph, payload or graph file is malformed, or evaluation hit a data error.

    Messages name the node, the field and both values, e.g.
    ``IR graph: node 2: outShape mismatch: inferred=[5], declared=[4] (Node(...))``.
    """


class ShapeRuleError(GraphError):
    """Raised by a shape rule; the validator wraps it with the node it concerns."""


class OpDataError(GraphError):
    """Raised by a forward rule on a value outside the op's domain; the fold names the node."""
