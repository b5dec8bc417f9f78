"""The converter tables name only what exists: every ONNX op the importer maps is an op of
ONNX's default domain, every IR op the exporter maps is in the op table, and every
canonical name the fx importer gives a torch target has a rule."""
from __future__ import annotations

import onnx
import torch

from scalarlab.graph.exporters.onnx import EXPORTERS
from scalarlab.graph.importers import onnx as onnx_import
from scalarlab.graph.importers import torch_fx
from scalarlab.graph.optable import OPS


def test_onnx_importer_table_names_onnx_ops():
    unknown = [op for op in onnx_import.CONVERTERS if not onnx.defs.has(op)]
    assert unknown == []
    assert set(onnx_import.SUPPORTED) == (set(onnx_import.CONVERTERS) - {"Cast"}) | {"Shape", "Size"}


def test_onnx_exporter_table_names_ir_ops():
    assert set(EXPORTERS) <= set(OPS)
    assert {"input", "const", "linear", "conv2d", "max_pool2d", "clip", "slice"} <= set(EXPORTERS)


def test_fx_canonical_names_have_rules():
    fn, methods, modules = torch_fx._tables(torch)
    assert set(fn.values()) | set(methods.values()) <= set(torch_fx.FUNCTION_RULES)
    assert set(modules.values()) <= set(torch_fx.MODULE_RULES)
    # and every rule is reachable from some torch target
    assert set(torch_fx.FUNCTION_RULES) == set(fn.values()) | set(methods.values())
    assert set(torch_fx.MODULE_RULES) == set(modules.values())
