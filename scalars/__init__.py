"""Scalar contexts: the meaning of arithmetic, as a parameter.

``scalars.get("binary32")`` returns a context; ``scalars.names()`` lists them.
See :mod:`scalars.base` for the method vocabulary every context implements.
"""
from .base import Context, VOCABULARY
from .errors import ContextError, FormatError, ScalarLabError
from .registry import get, names, family_examples, register_family, register_name

__all__ = ["Context", "VOCABULARY", "ContextError", "FormatError", "ScalarLabError",
           "get", "names", "family_examples", "register_family", "register_name"]
