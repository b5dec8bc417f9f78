"""The defaults, choices and thresholds the ``scalarlab`` command parsers show, in one
light module (standard library only).

A command's ``--help`` builds its parser from these without importing the experiment that
uses them (numpy, pandas, the contexts, the op table, Numba), so every ``--help`` costs
about a numpy import at most.  The experiment modules import their constants from here:
each value has one definition.
"""
from __future__ import annotations

#: The built-in example graphs, in ``graph.examples.names()`` order (a static copy so that
#: help texts need not import the graph package; tests/experiments/test_cli_startup.py
#: checks that both agree).
EXAMPLE_NAMES = ("six-node", "softmax-axis", "layernorm-axis", "concat-axis")

# --------------------------------------------------------------- reference (reference.py)
#: The default reference: the ball enclosure (ball:3, ball:6), the oracle where it does
#: not settle; INTERVAL_ENCLOSURE: the previous default, one interval:float64 pass.
ENCLOSURE = "enclosure"
INTERVAL_ENCLOSURE = "interval"
DEFAULT_REFERENCE = ENCLOSURE
#: The oracle behind the enclosure (and the old default).
DEFAULT_ORACLE = "mpmath:200"
#: Above this many samples a float64 reference may replace the oracle, once checked.
DEFAULT_ORACLE_LIMIT = 20_000
DEFAULT_CHECK_SAMPLES = 256

#: File kinds a table is written as (tables.py)
OUT_SUFFIXES = (".csv", ".md", ".json")

#: graph/exporters/onnx.py's default opset (the export command shows it)
ONNX_DEFAULT_OPSET = 20

#: sampling.py: --sampling of --box draws (uniform reals or uniform binary64 values)
SAMPLINGS = ("bitpattern", "box")

# ---------------------------------------------------------------------- compare.py
COMPARE_CONTEXTS = ("float64", "binary32", "bfloat16", "binary16", "e4m3")
COMPARE_THRESHOLD_BITS = 2.0
#: compare_table.py: a node diverges where its error exceeds this many ULPs of its scale
DEFAULT_DIVERGENCE_ULPS = 4.0

# ------------------------------------------------------------------------- gaps.py
GAPS_SAMPLINGS = ("box", "bitpattern")

# ---------------------------------------------------------------------- fpbench.py
FPBENCH_CONTEXTS = ("binary64", "binary32")
FPBENCH_SAMPLES = 256
FPBENCH_REFERENCE_BITS = 128
FPBENCH_MAX_ORACLE_BITS = 1 << 14
FPBENCH_THRESHOLD_BITS = 2.0

# --------------------------------------------------------------- libm_audit.py
LIBM_FORMATS = ("binary32", "binary64", "binary16", "bfloat16")
LIBM_LIBRARIES = ("numpy", "torch", "libm", "jax", "lab", "cuda")
LIBM_DEFAULT_FUNCS = ("exp", "log", "sin", "cos", "tanh")

# ------------------------------------------------------------- reduction_order.py
REDUCTION_FORMATS = ("binary32", "bfloat16")

# ------------------------------------------------------------------------ bound.py
BOUND_FORMATS = ("binary64",)
BOUND_SAMPLES = 256
BOUND_BUDGET_S = 1.0
BOUND_TOL = 0.02
