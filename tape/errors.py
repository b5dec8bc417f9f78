"""The tape package's one exception class."""
from scalarlab.scalars.errors import ScalarLabError


class TapeError(ScalarLabError):
    """A tape, session, typed graph or transform was used wrongly.

    Messages name the node (id and op), the session/generation or the shapes involved, e.g.
    ``backward: node 3 (mul) sent a contribution of shape [3] to parent 0 (x) of shape [2]``.
    """
