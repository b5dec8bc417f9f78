"""The autodiff core: tape engine, program interpreters, typed graphs and transforms.

Every forward, VJP and JVP rule comes from the op table (:mod:`graph.optable`); this
package only records, orders and accumulates.  The training framework (layers,
optimizers, the trainer, checkpoints, data) lives in :mod:`scalarlab.tape.training`,
which imports this core and is never imported by it.
"""
from .errors import TapeError
from .tape import Tape, TapeNode
from .backward import Gradients, accumulate, backward
from .builder import TapeBuilder
from .session import Handle, Session
from .ops_interface import Ops
from .typed_graph import TypedGraph, Var
from .interpreters import EagerOps, GraphOps, PlainOps, record, record_model
from .transforms import grad, hvp, jvp, vjp

__all__ = [
    "TapeError", "Tape", "TapeNode", "Gradients", "accumulate", "backward", "TapeBuilder",
    "Handle", "Session", "Ops", "TypedGraph", "Var", "EagerOps", "GraphOps", "PlainOps",
    "record", "record_model", "grad", "hvp", "jvp", "vjp",
]
