"""Exception classes shared by every package of the lab."""


class ScalarLabError(Exception):
    """Base class of every error the lab raises on purpose."""


class ContextError(ScalarLabError):
    """A scalar context cannot perform an operation honestly, or got a bad value.

    Messages name the context and the operation (and the offending values or shapes).
    """


class FormatError(ScalarLabError, ValueError):
    """A floating-point format specification or rounding mode is invalid."""
