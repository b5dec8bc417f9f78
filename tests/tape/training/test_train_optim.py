"""Optimizers: PyTorch agreement (float64), state round trip, exact rational training,
loss decrease over 200 steps."""
from __future__ import annotations

import argparse
from fractions import Fraction

import numpy as np
import pytest
import torch

from scalarlab.tape.training.data import Loader, regression25
from scalarlab.tape.errors import TapeError
from scalarlab.tape.training.layers import Linear, ReLU, Sequential, Tanh
from scalarlab.tape.training.optim import SGD, Adam
from scalarlab.tape.training.trainer import TrainingSession

RNG = np.random.default_rng(3)
X = RNG.normal(size=(7, 3))
Y = RNG.normal(size=(7, 2))


def _model():
    return Sequential(Linear(3, 6), Tanh(), Linear(6, 2))


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_optimizers_match_torch(kind):
    if kind == "sgd":
        ours, make = SGD("0.05", "0.9", weight_decay="0.01"), \
            lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=0.01)
    else:
        ours, make = Adam("0.01"), lambda ps: torch.optim.Adam(ps, lr=0.01)
    sess = TrainingSession(_model(), "float64", ours, seed=1)
    tm = torch.nn.Sequential(torch.nn.Linear(3, 6), torch.nn.Tanh(), torch.nn.Linear(6, 2)).double()
    with torch.no_grad():
        for n, p in tm.named_parameters():
            p.copy_(torch.from_numpy(sess.params[n]))
    opt = make(tm.parameters())
    for _ in range(6):
        sess.step(X, Y)
        opt.zero_grad()
        torch.nn.functional.mse_loss(tm(torch.from_numpy(X)), torch.from_numpy(Y)).backward()
        opt.step()
    for n, p in tm.named_parameters():
        np.testing.assert_allclose(sess.params[n], p.detach().numpy(), rtol=1e-11, atol=1e-13)


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_optimizer_state_round_trip(kind):
    def opt():
        return SGD("0.05", "0.9") if kind == "sgd" else Adam("0.01", "0.8", "0.99")
    a = TrainingSession(_model(), "float64", opt(), seed=2)
    for _ in range(3):
        a.step(X, Y)
    state = a.optimizer.state_dict()
    assert state["step"] == 3 and set(state["slots"]) == set(a.optimizer.slot_names)
    b = TrainingSession(_model(), "float64", opt(), seed=99)
    b.params = {n: v.copy() for n, v in a.params.items()}
    b.optimizer.load_state_dict(state)
    assert b.optimizer.state_dict()["step"] == 3
    for _ in range(2):
        a.step(X, Y)
        b.step(X, Y)
    for n in a.params:
        assert np.array_equal(a.params[n], b.params[n]), n
    # a state for another optimizer / other hyperparameters is refused by name
    other = Adam("0.01") if kind == "sgd" else SGD("0.05")
    with pytest.raises(TapeError, match="state is for"):
        other.load_state_dict(state)
    with pytest.raises(TapeError, match="hyperparameters"):
        (SGD("0.5", "0.9") if kind == "sgd" else Adam("0.5", "0.8", "0.99")).load_state_dict(state)


def _frac(a):
    return np.vectorize(lambda v: Fraction(int(v.numerator), int(v.denominator)),
                        otypes=[object])(np.asarray(a, dtype=object))


def test_rational_training_is_exact():
    """Three SGD-momentum steps in rational == the same update computed with Fractions."""
    X, Y = regression25()
    model = Sequential(Linear(2, 4), ReLU(), Linear(4, 1))
    sess = TrainingSession(model, "rational", SGD("1/8", "0.9"), seed=6)
    ctx = sess.ctx
    Xc, Yc = ctx.convert(X), ctx.convert(Y)
    P = {n: _frac(v) for n, v in sess.params.items()}
    init_f64 = TrainingSession(model, "float64", seed=6).params
    for n in P:   # the initial state is the float64 draw, converted exactly
        assert all(Fraction(float(a)) == b for a, b in zip(init_f64[n].ravel(), P[n].ravel()))
    buf = {}
    loader = Loader(Xc, Yc, 5, seed=6)
    for _ in range(3):
        xb, yb = loader.next()
        loss = sess.step(xb, yb)
        x, y = _frac(xb), _frac(yb)
        h = x.dot(P["0.weight"].T) + P["0.bias"]
        a = np.where(h > 0, h, Fraction(0))
        p = a.dot(P["2.weight"].T) + P["2.bias"]
        n_ent = p.size
        ref_loss = sum(((p - y) ** 2).ravel(), Fraction(0)) / n_ent
        assert Fraction(int(loss.item().numerator), int(loss.item().denominator)) == ref_loss
        gp = 2 * (p - y) / n_ent
        ga = gp.dot(P["2.weight"])
        gh = np.where(h > 0, ga, Fraction(0))
        grads = {"2.weight": gp.T.dot(a), "2.bias": gp.sum(axis=0),
                 "0.weight": gh.T.dot(x), "0.bias": gh.sum(axis=0)}
        for n in P:
            buf[n] = grads[n] if n not in buf else Fraction(9, 10) * buf[n] + grads[n]
            P[n] = P[n] - Fraction(1, 8) * buf[n]
    for n in P:
        assert np.array_equal(_frac(sess.params[n]), P[n]), n


def test_adam_in_rational_is_a_clear_error():
    sess = TrainingSession(Sequential(Linear(3, 2)), "rational", Adam("0.1"))
    with pytest.raises(TapeError, match="adam update in context rational"):
        sess.step(X, Y)


@pytest.mark.parametrize("arith", ["float64", "binary32"])
def test_loss_decreases_over_200_steps(arith):
    from scalarlab.experiments.commands.quickstart_mlp import build
    args = argparse.Namespace(arithmetic=arith, execution="typed-graph", device="cpu", seed=11)
    sess, loader, (Xd, Yd, _, _) = build(args)
    before = float(sess.loss(Xd, Yd))
    for _ in range(200):
        sess.step(*loader.next())
    after = float(sess.loss(Xd, Yd))
    assert after < 0.1 * before, (before, after)
    assert sess.optimizer.step_count == 200 and loader.position["epoch"] == 39
