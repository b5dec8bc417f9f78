"""The experiments' user-error class, in a leaf module: every experiments module (cases,
sampling, the commands) raises it without importing the modules that use it."""
from __future__ import annotations

from scalarlab.scalars.errors import ScalarLabError


class ExperimentError(ScalarLabError):
    """A user error in an experiment's request (graph, input, context, sampling)."""
