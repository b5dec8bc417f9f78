"""Eager capsule selection: --show-backend lines, and the numba_cuda provider (simulator)."""
from __future__ import annotations

import numpy as np
import pytest

from scalarlab.graph.plan import PlanError
from scalarlab.tape import Session as TapeSession
from scalarlab.tape.training.layers import BatchNorm1d, Linear, ReLU, Sequential
from scalarlab.tape.training.backends import Backends, PlannedEagerOps
from scalarlab.tape.training.trainer import TrainingSession

RNG = np.random.default_rng(8)
# binary32 values (float32-representable), small sizes: the CUDA simulator is slow
X = RNG.normal(size=(2, 3)).astype(np.float32).astype(np.float64)
W = RNG.normal(size=(4, 3)).astype(np.float32).astype(np.float64)
B = RNG.normal(size=4).astype(np.float32).astype(np.float64)


def test_cpu_lines_once_per_op():
    lines = []
    sess = TrainingSession(Sequential(Linear(3, 4), ReLU(), Linear(4, 1)), "binary32",
                           show_backend=lines.append, seed=1)
    sess.step(X, np.zeros((2, 1)))
    sess.step(X, np.zeros((2, 1)))
    assert lines == [
        "linear: reference.linear provider=reference trust=checked vjp=tape reduction=sequential",
        "relu: reference.relu provider=reference trust=checked vjp=tape reduction=n/a",
        "mse_loss: reference.mse_loss provider=reference trust=checked vjp=tape "
        "reduction=sequential"]


def _grads(device):
    lines = []
    s = TapeSession("binary32")
    ops = PlannedEagerOps(s, Backends(device, s.ctx, lines.append))
    w, b = s.leaf(W, "W"), s.leaf(B, "b")
    h = ops.relu(ops.linear(s.const(X, "x"), w, b))
    out = ops.sum(ops.mul(h, h))
    g = s.backward(out)
    return s.value(h), s.value(out), g[s.resolve(w)], g[s.resolve(b)], lines


def test_numba_cuda_capsules_in_the_eager_tape():
    hc, oc, gwc, gbc, cpu_lines = _grads("cpu")
    hg, og, gwg, gbg, gpu_lines = _grads("cuda")
    assert gpu_lines[0].startswith("linear: numba_cuda.linear provider=numba_cuda trust=checked "
                                   "vjp=tape")
    assert [ln.split(":")[0] for ln in gpu_lines] == ["linear", "relu", "mul", "sum"]
    # linear and relu are 'checked' capsules: bit-identical to the reference
    assert np.array_equal(hc, hg)
    # reduce_sum adds in a tree order: the same sum up to rounding
    np.testing.assert_allclose(og, oc, rtol=1e-6)
    # the reverse pass is the tape's (op-table VJPs on the kernels' values)
    assert np.array_equal(gwc, gwg) and np.array_equal(gbc, gbg)


def test_cuda_without_a_capsule_names_the_op():
    # the numba_cuda provider has no reduce_mean capsule (BatchNorm1d's batch statistics)
    sess = TrainingSession(Sequential(Linear(3, 2), BatchNorm1d(2)), "binary32",
                           device="cuda", seed=0)
    with pytest.raises(PlanError, match="op reduce_mean.*device cuda"):
        sess.step(X, np.zeros((2, 2)))
