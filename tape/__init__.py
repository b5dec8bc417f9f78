"""Tape engine, program interpreters, typed graphs and autograd transforms.

Every forward, VJP and JVP rule comes from the op table (:mod:`graph.optable`); this
package only records, orders and accumulates.
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
from .train import TrainSession
from .layers import (BatchNorm1d, Dropout, LayerNorm, Linear, Module, ReLU, Sequential,
                     Sigmoid, Tanh)
from .optim import SGD, Adam
from .recompute import Checkpointed, checkpoint
from .checkpoint_io import load as load_checkpoint, save as save_checkpoint

__all__ = [
    "TapeError", "Tape", "TapeNode", "Gradients", "accumulate", "backward", "TapeBuilder",
    "Handle", "Session", "Ops", "TypedGraph", "Var", "EagerOps", "GraphOps", "PlainOps",
    "record", "record_model", "grad", "hvp", "jvp", "vjp",
    "TrainSession", "Module", "Linear", "ReLU", "Tanh", "Sigmoid", "Dropout", "BatchNorm1d",
    "LayerNorm", "Sequential", "SGD", "Adam", "checkpoint", "Checkpointed",
    "save_checkpoint", "load_checkpoint",
]
