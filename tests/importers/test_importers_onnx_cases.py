"""ONNX's own node test cases (``onnx.backend.test.case.node``, generated at collection,
the wheel ships no data) for every op the importer maps: each case either imports and our
float64 fold meets the case's own rtol/atol, or is refused with a GraphError (the listing
error, mostly) -- never a crash or a wrong value.  Slow (collecting the cases runs ~30 s of numpy): ``-m slow``."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from scalarlab import graph
from scalarlab.graph.importers.onnx import SUPPORTED, from_onnx
from scalarlab.graph import GraphError


def _as_initializers(model, inputs):
    """All graph inputs but the first become initializers holding the case's data."""
    from onnx import numpy_helper
    m = type(model)()
    m.CopyFrom(model)
    names = [i.name for i in m.graph.input]
    keep = m.graph.input[0]
    for name, value in zip(names[1:], inputs[1:]):
        m.graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))
    del m.graph.input[:]
    m.graph.input.append(keep)
    return m


@pytest.mark.slow
def test_onnx_reference_cases_of_supported_ops():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from onnx.backend.test.case.node import collect_testcases
        cases = collect_testcases()
    matched, refused = [], []
    for case in cases:
        ops = {n.op_type for n in case.model.graph.node}
        if not ops or not ops <= set(SUPPORTED) or not case.data_sets:
            continue
        inputs, outputs = case.data_sets[0]
        if len(outputs) != 1 or not (inputs and np.asarray(inputs[0]).dtype.kind == "f"):
            continue
        if np.asarray(inputs[0]).dtype != np.float32 or np.asarray(outputs[0]).dtype.kind != "f":
            continue
        model = _as_initializers(case.model, inputs)
        try:
            g, p = from_onnx(model, batch_dims=0)
        except GraphError:               # the listing error or another clear GraphError
            refused.append(case.name)
            continue
        expected = np.asarray(outputs[0], np.float64)
        if not np.isfinite(expected).all():
            # e.g. log(0) = -inf in ReduceLogSum's expansion: the IR raises instead
            with pytest.raises(GraphError, match="non-positive"):
                graph.denote(g, p, np.asarray(inputs[0], np.float64), "float64")
            continue
        y = graph.denote(g, p, np.asarray(inputs[0], np.float64), "float64")
        np.testing.assert_allclose(np.asarray(y, np.float64), expected,
                                   rtol=max(case.rtol, 1e-6), atol=max(case.atol, 1e-6),
                                   err_msg=case.name)
        matched.append(case.name)
    # a representative share of the cases must be mapped (not just refused)
    assert len(matched) >= 120, (len(matched), refused)     # 161 today
