"""ONNX's own backend node tests (``onnx.backend.test.case.node.collect_testcases()``,
generated at test time: the wheel ships no data) for every ONNX op the importer claims
(``SUPPORTED``; cases whose every node is a claimed op, ``_expanded`` function bodies
included).  Each case is imported and evaluated in float64 against the case's expected
outputs with the case's own tolerances, or it is one of the EXCLUDED cases, each with the
reason (the README lists them).  An excluded case that starts passing fails the test too,
so the list stays true.

How a case becomes an IR graph: its float inputs are graph inputs (the IR evaluates all
of them); integer/boolean inputs (axes, shapes, indices) become initializers, since the
IR needs them constant.  When that import is refused because an op wants a constant
operand (Conv's weight, BatchNormalization's statistics, LayerNormalization's scale),
every input but the first becomes an initializer -- how exported models store weights.
A case with several outputs is imported once per output (``output=NAME``).
"""
from __future__ import annotations

import fnmatch
import warnings

import numpy as np
import pytest

from scalarlab import graph
from scalarlab.graph import GraphError
from scalarlab.graph.importers.onnx import SUPPORTED, from_onnx

#: case-name pattern -> why the IR does not reproduce it (README: "ONNX node suite").
#: Cases with integer/boolean tensors only are a category of their own ("integer"): the
#: importer folds them with onnx's own evaluator (the IR is real-valued), so comparing
#: would check onnx against itself.
EXCLUDED = {
    "test_batchnorm_*_training_mode": "training mode: batch statistics mix the examples; the "
                                      "IR's batchnorm is the eval form",
    "test_training_dropout*": "training-mode dropout is random",
    "test_clip_min_greater_than_max": "min > max: ONNX returns max everywhere, the IR's clip "
                                      "refuses the bounds",
    "test_identity_opt": "optional type, not a tensor",
    "test_identity_sequence": "sequence type, not a tensor",
    "test_maxpool_with_argmax_*": "the indices output (flat positions in the input, not an "
                                  "argmax along one axis: not mapped)",
    "test_reduce_log_sum_empty_set*": "log(0) = -inf: the IR raises naming the node instead",
    "test_reduce_log_sum_exp_empty_set": "log(0) = -inf: the IR raises naming the node instead",
    "test_reduce_max_empty_set": "reduction over an empty axis (-inf by ONNX): the IR refuses it",
    "test_reduce_min_empty_set": "reduction over an empty axis (+inf by ONNX): the IR refuses it",
    "test_mod_*fmod_0*": "Mod with fmod=0 on floats (the divisor's sign, Python's %): the "
                         "IR's fmod is C's fmod (fmod=1)",
    "test_einsum_batch_diagonal": "an ellipsis and a diagonal (a repeated index): Einsum is "
                                  "mapped where it is transposes, sums and one matmul",
}


def _reason(name):
    for pat, why in EXCLUDED.items():
        if fnmatch.fnmatchcase(name, pat):
            return why
    return None


def _with_initializers(model, inputs, keep):
    """The case's model with the inputs not in ``keep`` turned into initializers."""
    from onnx import numpy_helper
    m = type(model)()
    m.CopyFrom(model)
    ins = list(m.graph.input)
    del m.graph.input[:]
    for vi, value in zip(ins, inputs):
        if vi.name in keep:
            m.graph.input.append(vi)
        else:
            m.graph.initializer.append(numpy_helper.from_array(np.asarray(value), vi.name))
    return m


def _is_float(v):
    return np.asarray(v).dtype.kind == "f"


def run_case(case):
    """``("pass", "")`` or ``(outcome, message)`` with outcome refused / wrong / error."""
    inputs, outputs = case.data_sets[0]
    names = [vi.name for vi in case.model.graph.input]
    outs = [o.name for o in case.model.graph.output]
    floats = [n for n, v in zip(names, inputs) if _is_float(v)]
    if names and not floats:
        # integer tensors only: the importer folds them with onnx's own evaluator (exact
        # integer arithmetic), so comparing would check onnx against itself
        return "integer", "integer inputs only (folded at import, not evaluated by the IR)"
    tries = [floats]
    if floats and floats[:1] != floats:
        tries.append(floats[:1])
    if floats and names[0] not in floats:
        tries.append([])
    for out_name, expected in zip(outs, outputs):
        expected = np.asarray(expected)
        if expected.dtype.kind not in "fiub":
            return "refused", f"output {out_name!r} has dtype {expected.dtype}"
        last = None
        for keep in tries:
            model = _with_initializers(case.model, inputs, set(keep))
            try:
                g, p = from_onnx(model, output=out_name if len(outs) > 1 else None)
                break
            except GraphError as exc:
                last = exc
        else:
            return "refused", str(last).replace("\n", " ")
        ids = [n.id for n in g.nodes if n.kind.op == "input"]
        vals = [np.asarray(v, np.float64) for n, v in zip(names, inputs) if n in keep]
        x = vals[0] if len(ids) == 1 else {i: v for i, v in zip(ids, vals)}
        try:
            if not ids:
                x = None
            y = np.asarray(graph.denote(g, p, x, "float64"), np.float64)
        except GraphError as exc:
            return "error", str(exc).replace("\n", " ")
        if y.shape != expected.shape:
            return "wrong", f"shape {y.shape} vs expected {expected.shape}"
        try:
            np.testing.assert_allclose(y, expected.astype(np.float64), rtol=case.rtol,
                                       atol=case.atol)
        except AssertionError as exc:
            return "wrong", str(exc).strip().splitlines()[-1][:200]
    return "pass", ""


#: node-suite modules whose generation is slow (their numpy reference pools big inputs:
#: ~11 s of the ~17 s): only in the full (-m slow) run
HEAVY_MODULES = {"averagepool", "maxpool"}


def claimed_cases(full=True):
    """The node-suite cases whose every node is an op the importer claims.  ``full``:
    ``collect_testcases()`` (every module); otherwise only the modules named after the
    claimed ops, the heavy ones left out."""
    import importlib
    import pkgutil
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import onnx.backend.test.case.node as node_cases
        if full:
            node_cases.collect_testcases()
        else:
            mods = {m.name for m in pkgutil.iter_modules(node_cases.__path__)}
            for m in sorted(({op.lower() for op in SUPPORTED} & mods) - HEAVY_MODULES):
                importlib.import_module(f"{node_cases.__name__}.{m}")
        cases = list(node_cases._NodeTestCases)
    out = []
    seen = set()
    for c in cases:
        ops = {n.op_type for n in c.model.graph.node}
        if ops and ops <= set(SUPPORTED) and c.data_sets and c.name not in seen:
            seen.add(c.name)
            out.append(c)
    return out


def check(results, at_least):
    unexpected = {n: r for n, r in results.items()
                  if r[0] not in ("pass", "integer") and _reason(n) is None}
    assert not unexpected, "\n".join(f"{n}: {o}: {m}" for n, (o, m) in sorted(unexpected.items()))
    stale = [n for n, r in results.items() if r[0] == "pass" and _reason(n) is not None]
    assert not stale, f"excluded cases that pass now (drop them from EXCLUDED): {stale}"
    passed = sum(r[0] == "pass" for r in results.values())
    assert passed >= at_least, passed


def passing_ops(cases, results):
    """Ops with a passing case, and ops whose every case has integer tensors only (ONNX
    gives Equal no float case)."""
    ops, seen = set(), {}
    for c in cases:
        r = results.get(c.name, ("",))[0]
        for op in {n.op_type for n in c.model.graph.node}:
            seen.setdefault(op, set()).add(r)
        if r == "pass":
            ops |= {n.op_type for n in c.model.graph.node}
    return ops | {op for op, rs in seen.items() if rs == {"integer"}}


def test_node_suite_claimed_ops_pass_or_are_excluded_with_a_reason():
    cases = claimed_cases(full=False)
    results = {c.name: run_case(c) for c in cases}
    check(results, 593)
    # every claimed op with a module of its name has cases that pass (the pools' modules
    # and ops whose cases live in other modules are checked by the full suite)
    import pkgutil
    import onnx.backend.test.case.node as node_cases
    mods = {m.name for m in pkgutil.iter_modules(node_cases.__path__)} - HEAVY_MODULES
    missing = {op for op in SUPPORTED if op.lower() in mods} - passing_ops(cases, results)
    assert not missing, sorted(missing)


@pytest.mark.slow
def test_node_suite_full_collect_testcases():
    cases = claimed_cases(full=True)
    results = {c.name: run_case(c) for c in cases}
    check(results, 675)
    missing = set(SUPPORTED) - passing_ops(cases, results) - {"Constant"}
    assert not missing, sorted(missing)


if __name__ == "__main__":     # python tests/importers/test_importers_onnx_cases.py
    res = {c.name: run_case(c) for c in claimed_cases(full=True)}
    for n, (o, m) in sorted(res.items()):
        if o != "pass":
            print(f"{n}: {o}: {m[:300]}")
    print(sum(r[0] == "pass" for r in res.values()), "of", len(res), "pass")
