"""The discrepancy table of one graph in several contexts against a reference: the
orchestration (cases, reference and table live in their own modules).

For every node and every context the table holds the max and mean absolute, relative,
ULP and bits-of-error metrics of :mod:`experiments.metrics`, computed over all samples
and all entries of the node's value.  Evaluation is batched: each context evaluates all
samples in one ``graph.denote_all`` call per chunk.

Inputs: the reference evaluates the input exactly as given (decimal strings or float64
samples); each context rounds it once on conversion, so the input node's row shows the
input quantisation (0 ULPs by construction: it IS the correctly rounded input).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .cases import GraphCase, batch_size, evaluate_split
from .compare_table import DEFAULT_DIVERGENCE_ULPS, ROW_COLUMNS, CompareResult, context_rows, \
    failure_reason, verdict
from .errors import ExperimentError
from .reference import DEFAULT_CHECK_SAMPLES, DEFAULT_ORACLE_LIMIT, DEFAULT_REFERENCE, \
    compute_reference
from .tables import progress

from .defaults import COMPARE_CONTEXTS as DEFAULT_CONTEXTS  # noqa: E402
from .defaults import COMPARE_THRESHOLD_BITS as DEFAULT_THRESHOLD_BITS  # noqa: E402


def compare(case: GraphCase, contexts, x, *, reference=DEFAULT_REFERENCE,
            threshold=DEFAULT_THRESHOLD_BITS, input_desc="", quiet=True,
            oracle_limit=DEFAULT_ORACLE_LIMIT, check_samples=DEFAULT_CHECK_SAMPLES,
            seed=0, divergence_ulps=DEFAULT_DIVERGENCE_ULPS) -> CompareResult:
    """Evaluate ``case`` on the batch ``x`` in every context and tabulate the errors."""
    if not np.isfinite(threshold) or threshold < 0:
        raise ExperimentError(f"--threshold must be a number of bits >= 0, got {threshold}")
    if not np.isfinite(divergence_ulps) or divergence_ulps < 0:
        raise ExperimentError(f"--divergence-ulps must be a number of ulps >= 0, got "
                              f"{divergence_ulps}")
    ref = compute_reference(case, x, reference, contexts, oracle_limit=oracle_limit,
                            check_samples=check_samples, seed=seed, quiet=quiet)
    rows = []
    verdicts = {}
    for ctx in progress(contexts, desc="contexts", quiet=quiet or len(contexts) < 2):
        errors: dict = {}
        vals = evaluate_split(case, x, ctx, quiet=quiet, partial=True, errors=errors)
        failed = [int(n.id) for n, v in zip(case.nodes, vals) if v is None]
        reason = failure_reason(errors) if failed else ""
        ctx_rows, first = context_rows(case, ctx, vals, ref, batch_size(x), threshold,
                                       divergence_ulps)
        rows.extend(ctx_rows)
        verdicts[ctx.name] = verdict(case, ctx, ctx_rows, first, threshold, failed, reason,
                                     divergence_ulps)
        del vals            # every node of the batch: freed before the next context's fold
    df = pd.DataFrame(rows, columns=list(ROW_COLUMNS))
    return CompareResult(case, list(contexts), ref, batch_size(x), input_desc, threshold,
                         df, verdicts, divergence_ulps)
