"""The training framework built on the tape core: layers, optimizers, the trainer,
activation recomputation, checkpoint files and the small data sets.

This subpackage imports :mod:`scalarlab.tape` (the autodiff core); the core never imports
it, so the tape, typed graphs and transforms can be used and tested without any of this.
"""
from .layers import (BatchNorm1d, Dropout, Forward, LayerNorm, Linear, Module, ReLU,
                     Sequential, Sigmoid, Tanh)
from .optim import SGD, Adam, Optimizer
from .backends import Backends, PlannedEagerOps
from .trainer import TrainingSession
from .recompute import Checkpointed, checkpoint
from .checkpoint_io import load as load_checkpoint, save as save_checkpoint
from .data import Loader

__all__ = [
    "Module", "Forward", "Linear", "ReLU", "Tanh", "Sigmoid", "Dropout", "BatchNorm1d",
    "LayerNorm", "Sequential", "Optimizer", "SGD", "Adam", "Backends", "PlannedEagerOps",
    "TrainingSession", "checkpoint", "Checkpointed", "save_checkpoint", "load_checkpoint",
    "Loader",
]
