"""Layers vs PyTorch (float64), dropout replay, batch-norm mode switch, eager == graph."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from scalarlab.tape.training.layers import (BatchNorm1d, Dropout, LayerNorm, Linear, ReLU,
                                            Sequential, Sigmoid, Tanh)
from scalarlab.tape.training.optim import SGD
from scalarlab.tape.training.trainer import TrainingSession

RNG = np.random.default_rng(11)
X = RNG.normal(size=(6, 3))
Y = RNG.normal(size=(6, 2))


def _torch_copy(sess, tmodel):
    names = [n for n, _ in tmodel.named_parameters()]
    assert names == sess.param_names()
    with torch.no_grad():
        for n, p in tmodel.named_parameters():
            p.copy_(torch.from_numpy(np.asarray(sess.params[n])))


def test_layers_match_torch_gradients():
    model = Sequential(Linear(3, 5), Tanh(), LayerNorm(5), Linear(5, 4), Sigmoid(),
                       Linear(4, 4), ReLU(), Linear(4, 2))
    tmodel = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh(), torch.nn.LayerNorm(5),
                                 torch.nn.Linear(5, 4), torch.nn.Sigmoid(),
                                 torch.nn.Linear(4, 4), torch.nn.ReLU(),
                                 torch.nn.Linear(4, 2)).double()
    for ex in ("eager", "typed-graph"):
        sess = TrainingSession(model, "float64", execution=ex, seed=4)
        _torch_copy(sess, tmodel)
        loss, grads = sess.gradients(X, Y)
        tmodel.zero_grad()
        tl = torch.nn.functional.mse_loss(tmodel(torch.from_numpy(X)), torch.from_numpy(Y))
        tl.backward()
        assert float(loss) == pytest.approx(tl.item(), rel=1e-13)
        for n, p in tmodel.named_parameters():
            np.testing.assert_allclose(grads[n], p.grad.numpy(), rtol=1e-11, atol=1e-14)


def _dropout_session(ex="eager"):
    model = Sequential(Linear(3, 8), Dropout("0.5"), Tanh(), Linear(8, 2))
    return TrainingSession(model, "float64", execution=ex, seed=9)


@pytest.mark.parametrize("ex", ["eager", "typed-graph"])
def test_dropout_replay_matches_finite_difference(ex):
    sess = _dropout_session(ex)
    s0 = sess.rng.bit_generator.state
    _, grads = sess.gradients(X, Y)
    g = grads["0.weight"]
    h = 1e-6
    base = sess.params["0.weight"].copy()
    worst = 0.0
    for idx in [(0, 0), (3, 1), (7, 2), (5, 0)]:
        vals = []
        for sgn in (1, -1):
            w = base.copy()
            w[idx] += sgn * h
            sess.params["0.weight"] = w
            sess.rng.bit_generator.state = s0       # the same mask
            vals.append(float(sess.gradients(X, Y)[0]))
        fd = (vals[0] - vals[1]) / (2 * h)
        worst = max(worst, abs(fd - g[idx]))
        assert fd == pytest.approx(g[idx], rel=1e-5, abs=1e-9)
    sess.params["0.weight"] = base
    # the mask matters: with a fresh draw the gradient is a different one
    _, other = sess.gradients(X, Y)
    assert not np.array_equal(other["0.weight"], g)
    # one sample: the dropped hidden units' weight rows get exactly zero gradient
    g1 = sess.gradients(X[:1], Y[:1])[1]["0.weight"]
    dropped = np.all(g1 == 0, axis=1)
    assert 0 < dropped.sum() < 8


def test_dropout_is_identity_in_eval_and_scaled_in_training():
    sess = _dropout_session()
    plain = TrainingSession(Sequential(Linear(3, 8), Tanh(), Linear(8, 2)), "float64", seed=9)
    np.testing.assert_array_equal(sess.predict(X), plain.predict(X))
    assert sess.mode == "eval"
    # training-mode loss differs from the eval loss (a mask was applied)
    assert float(sess.gradients(X, Y)[0]) != float(sess.loss(X, Y))


def test_batchnorm_mode_switch_against_torch():
    model = Sequential(Linear(3, 4), BatchNorm1d(4), Tanh(), Linear(4, 2))
    tmodel = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4),
                                 torch.nn.Tanh(), torch.nn.Linear(4, 2)).double()
    for ex in ("eager", "typed-graph"):
        sess = TrainingSession(model, "float64", SGD("0.05"), execution=ex, seed=2)
        _torch_copy(sess, tmodel)
        tbn = tmodel[1]
        tbn.reset_running_stats()
        assert sess.buffer_names() == ["1.running_mean", "1.running_var"]
        # eval before any step: running stats (0, 1)
        tmodel.eval()
        np.testing.assert_allclose(sess.predict(X), tmodel(torch.from_numpy(X)).detach().numpy(),
                                   rtol=1e-12, atol=1e-14)
        # one training step: batch statistics, gradients and the running-stat update
        tmodel.train()
        tl = torch.nn.functional.mse_loss(tmodel(torch.from_numpy(X)), torch.from_numpy(Y))
        loss, grads = sess.gradients(X, Y)
        tmodel.zero_grad()
        tl.backward()
        assert float(loss) == pytest.approx(tl.item(), rel=1e-12)
        for n, p in tmodel.named_parameters():
            np.testing.assert_allclose(grads[n], p.grad.numpy(), rtol=1e-10, atol=1e-13)
        sess.step(X, Y)
        np.testing.assert_allclose(sess.buffers["1.running_mean"], tbn.running_mean.numpy(),
                                   rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(sess.buffers["1.running_var"], tbn.running_var.numpy(),
                                   rtol=1e-13)
        # eval mode now uses the updated running stats (not batch stats)
        with torch.no_grad():
            for n, p in tmodel.named_parameters():
                p.copy_(torch.from_numpy(np.asarray(sess.params[n])))
        tmodel.eval()
        np.testing.assert_allclose(sess.predict(X), tmodel(torch.from_numpy(X)).detach().numpy(),
                                   rtol=1e-12, atol=1e-14)


def test_eager_and_graph_bit_identical_with_dropout_and_batchnorm():
    def make(ex):
        m = Sequential(Linear(3, 6), BatchNorm1d(6), ReLU(), Dropout("0.25"), Linear(6, 2))
        return TrainingSession(m, "binary32", SGD("0.1", "0.9"), execution=ex, seed=5)
    a, b = make("eager"), make("typed-graph")
    for k in range(4):
        la, lb = a.step(X, Y), b.step(X, Y)
        assert np.array_equal(la, lb)
    for n in a.params:
        assert np.array_equal(a.params[n], b.params[n]), n
    for n in a.buffers:
        assert np.array_equal(a.buffers[n], b.buffers[n]), n
    assert a.rng.bit_generator.state == b.rng.bit_generator.state
    # typed graph: recorded once per (mode, shapes); state first, then masks, then input
    g = b.graph(X.shape, Y.shape, training=True)
    assert g.input_names[:2] == ["0.weight", "0.bias"]
    assert g.input_names[-3:] == ["3.mask", "x", "y"]
    assert len(b._graphs) == 1
