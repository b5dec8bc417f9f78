"""grad / vjp / jvp / hvp on programs written once against Ops."""
import numpy as np
import pytest
import torch

from scalarlab.tape import TapeError, grad, hvp, jvp, vjp


def net(ops, x, p):
    h = ops.tanh(ops.linear(x, p["W1"], p["b1"]))
    y = ops.linear(ops.softplus(h), p["W2"], p["b2"])
    return ops.sum(ops.mul(ops.sigmoid(y), y))


def net_torch(x, p):
    h = torch.tanh(torch.nn.functional.linear(x, p["W1"], p["b1"]))
    y = torch.nn.functional.linear(torch.nn.functional.softplus(h), p["W2"], p["b2"])
    return (torch.sigmoid(y) * y).sum()


def setup(seed=0):
    r = np.random.default_rng(seed)
    p = {"W1": r.standard_normal((5, 3)), "b1": r.standard_normal(5),
         "W2": r.standard_normal((2, 5)), "b2": r.standard_normal(2)}
    return r.standard_normal(3), p, r


def test_grad_keeps_structure_and_matches_torch():
    x, p, _ = setup()
    gx, gp = grad(net, argnums=(0, 1))(x, p)
    tx = torch.tensor(x, requires_grad=True)
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in p.items()}
    net_torch(tx, tp).backward()
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-12, atol=1e-14)
    assert sorted(gp) == sorted(p)
    for k in p:
        np.testing.assert_allclose(gp[k], tp[k].grad.numpy(), rtol=1e-12, atol=1e-14)


def test_grad_records_once_per_shape_signature():
    x, p, r = setup()
    g = grad(net, argnums=1)
    g(x, p)
    g(r.standard_normal(3), p)
    assert len(g.recorded.cache) == 1
    g(r.standard_normal((4, 3)), p)               # a batch of 4: a new signature
    assert len(g.recorded.cache) == 2


def test_grad_needs_a_scalar_output():
    with pytest.raises(TapeError, match=r"output has shape \[3\]; grad needs a scalar"):
        grad(lambda ops, x: ops.tanh(x))(np.ones(3))


def test_vjp_of_a_vector_function():
    def f(ops, x, w):
        return ops.tanh(ops.matmul(w, x))

    x, _, r = setup()
    w = r.standard_normal((4, 3))
    u = r.standard_normal(4)
    y, pull = vjp(f, x, w)
    gx, gw = pull(u)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ty = torch.tanh(tw @ tx)
    ty.backward(torch.tensor(u))
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-14)
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(gw, tw.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_jvp_rules_match_the_dual_fold_and_torch():
    x, p, r = setup(1)
    vx = r.standard_normal(3)
    vp = {k: r.standard_normal(np.shape(v)) for k, v in p.items()}
    y, t = jvp(net, (x, p), (vx, vp))
    y2, t2 = jvp(net, (x, p), (vx, vp), method="dual")
    assert float(y) == float(y2)
    assert abs(float(t) - float(t2)) <= 1e-12 * max(1.0, abs(float(t2)))
    tp = {k: torch.tensor(v) for k, v in p.items()}
    _, tt = torch.func.jvp(lambda a, b: net_torch(a, b), (torch.tensor(x), tp),
                           (torch.tensor(vx), {k: torch.tensor(v) for k, v in vp.items()}))
    assert abs(float(t) - float(tt)) <= 1e-12 * max(1.0, abs(float(tt)))


def test_jvp_of_detached_branch_is_2x():
    def stopped(ops, x):
        return ops.sum(ops.add(ops.mul(x, x), ops.detach(ops.mul(x, x))))

    x = np.array([3.0, -1.5])
    _, t0 = jvp(stopped, (x,), (np.array([1.0, 0.0]),))
    _, t1 = jvp(stopped, (x,), (np.array([0.0, 1.0]),))
    assert (float(t0), float(t1)) == (6.0, -3.0)


def test_hvp_matches_finite_differences_of_grad():
    x, p, r = setup(2)
    v = r.standard_normal(3)
    hv = hvp(net, (x, p), v, argnums=0)
    g = grad(net, argnums=0)
    h = 1e-5
    fd = (g(x + h * v, p) - g(x - h * v, p)) / (2 * h)
    np.testing.assert_allclose(hv, fd, rtol=1e-6, atol=1e-8)


def test_hvp_of_the_seed_quadratic_is_exact():
    def live(ops, x):
        return ops.sum(ops.add(ops.mul(x, x), ops.mul(x, x)))

    def stopped(ops, x):
        return ops.sum(ops.add(ops.mul(x, x), ops.detach(ops.mul(x, x))))

    v = np.array([1.0, -2.0])
    np.testing.assert_array_equal(hvp(live, (np.array([3.0, -1.5]),), v), 4 * v)
    np.testing.assert_array_equal(hvp(stopped, (np.array([3.0, -1.5]),), v), 2 * v)
    hv = hvp(live, (["3", "-3/2"],), ["1", "-2"], ctx="rational")
    assert [int(t) for t in hv] == [4, -8]


def test_hvp_against_torch_hessian():
    x, p, r = setup(3)
    v = {k: r.standard_normal(np.shape(a)) for k, a in p.items()}
    hv = hvp(net, (x, p), v, argnums=1)
    tp = {k: torch.tensor(a) for k, a in p.items()}
    tv = {k: torch.tensor(a) for k, a in v.items()}
    _, thv = torch.autograd.functional.hvp(
        lambda *vals: net_torch(torch.tensor(x), dict(zip(sorted(p), vals))),
        tuple(tp[k] for k in sorted(p)), tuple(tv[k] for k in sorted(p)))
    for k, t in zip(sorted(p), thv):
        np.testing.assert_allclose(hv[k], t.numpy(), rtol=1e-10, atol=1e-12)
