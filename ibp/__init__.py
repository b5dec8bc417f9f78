"""Interval bound propagation over the IR and sampled containment checks."""
from .box import Box
from .crown import CrownError, run_crown
from .containment import ContainmentReport, Violation, check_containment, sample_box
from .errors import IBPError
from .propagate import interval_context, run_ibp
from .sweep import sweep

__all__ = ["Box", "ContainmentReport", "Violation", "check_containment", "sample_box",
           "IBPError", "interval_context", "run_ibp", "sweep", "run_crown", "CrownError"]
