"""IBP errors."""
from scalarlab.scalars.errors import ScalarLabError


class IBPError(ScalarLabError):
    """A box, sample request or sweep specification is invalid."""
