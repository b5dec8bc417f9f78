"""Canonical graph IR: op table, nodes, two-level validation, payload, the fold, files.

``Graph`` / ``Node`` / ``OpKind`` are plain data; ``check_well_formed`` and
``check_shapes`` validate them; ``denote_all`` / ``denote`` evaluate them under any
scalar context with a ``Payload`` keyed by node id.
"""
from .errors import GraphError
from .optable import OPS, OpRecord, get_op
from .node import Graph, Node, OpKind, fmt_shape
from .validate import check_payload, check_shapes, check_well_formed, infer_shapes
from .payload import Payload
from .fold import denote, denote_all, denote_rows
from .printers import listing, to_dot
from .fileformat import load, save, dumps, loads

__all__ = ["GraphError", "OPS", "OpRecord", "get_op", "Graph", "Node", "OpKind", "fmt_shape",
           "check_payload", "check_shapes", "check_well_formed", "infer_shapes", "Payload",
           "denote", "denote_all", "denote_rows", "listing", "to_dot", "load", "save", "dumps", "loads"]
