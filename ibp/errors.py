"""IBP errors."""
from scalars.errors import ScalarLabError


class IBPError(ScalarLabError):
    """A box, sample request or sweep specification is invalid."""
