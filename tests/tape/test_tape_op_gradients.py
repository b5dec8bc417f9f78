"""Every differentiable op of the table, through the tape: VJP vs PyTorch autograd
(float64, relative error <= 1e-12) and vs central differences in mpmath (200 bits)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from scalarlab import scalars
from scalarlab.graph.optable import OPS
from scalarlab.tape import TapeBuilder, backward

from tape_cases_networks import NETWORK_CASES
from tape_cases_functions import FUNCTION_CASES

RNG_SEED = 1234

# Ops handled elsewhere: structural nodes of the IR (graph inputs, payload constants) and
# the stop-gradient, whose (absent) derivative is tested in the walkthrough tests.
NOT_HERE = {"input": "graph input: no forward rule", "const": "payload constant: a leaf on "
            "the tape", "detach": "stop-gradient: tested by the walkthrough"}


def pos(shape):
    return lambda r: r.uniform(0.5, 2.0, shape)


def anyv(shape):
    return lambda r: r.standard_normal(shape)


def away0(shape):
    return lambda r: r.choice([-1.0, 1.0], shape) * r.uniform(0.2, 2.0, shape)


def _bn(x, mean, var, gamma, beta, eps):
    c = (-1,) + (1,) * (x.dim() - 1)
    return (x - mean.view(c)) / torch.sqrt(var.view(c) + eps) * gamma.view(c) + beta.view(c)


def _ln(x, gamma, beta, eps):
    return F.layer_norm(x, tuple(gamma.shape), gamma, beta, float(eps))


# op -> (argument generators (parents then params), attrs, torch function of the args)
CASES = {
    "abs": ([away0((3, 4))], {}, torch.abs),
    "add": ([anyv((3, 4)), anyv((4,))], {}, torch.add),
    "sub": ([anyv((3, 4)), anyv((3, 1))], {}, torch.sub),
    "mul": ([anyv((3, 4)), anyv((4,))], {}, torch.mul),
    "div": ([anyv((3, 4)), away0((3, 4))], {}, torch.div),
    "max": ([anyv((3, 4)), anyv((3, 4))], {}, torch.maximum),
    "min": ([anyv((3, 4)), anyv((4,))], {}, torch.minimum),
    "neg": ([anyv((5,))], {}, torch.neg),
    "relu": ([away0((3, 4))], {}, torch.relu),
    "exp": ([anyv((3, 4))], {}, torch.exp),
    "log": ([pos((3, 4))], {}, torch.log),
    "safe_log": ([pos((3, 4))], {}, torch.log),
    "sqrt": ([pos((3, 4))], {}, torch.sqrt),
    "sin": ([anyv((3, 4))], {}, torch.sin),
    "erf": ([anyv((3, 4))], {}, torch.erf),
    "atan": ([anyv((3, 4))], {}, torch.atan),
    "cos": ([anyv((3, 4))], {}, torch.cos),
    "tanh": ([anyv((3, 4))], {}, torch.tanh),
    "sigmoid": ([anyv((3, 4))], {}, torch.sigmoid),
    "softplus": ([anyv((3, 4))], {}, F.softplus),
    "gelu": ([anyv((3, 4))], {}, F.gelu),
    "sum": ([anyv((3, 4))], {}, torch.sum),
    "reduce_sum": ([anyv((3, 4, 2))], {"axis": 1}, lambda x: torch.sum(x, dim=1)),
    "reduce_mean": ([anyv((3, 4, 2))], {"axis": [0, 2], "keepdims": True},
                    lambda x: torch.mean(x, dim=(0, 2), keepdim=True)),
    "softmax": ([anyv((3, 4))], {"axis": 1}, lambda x: F.softmax(x, dim=1)),
    "log_softmax": ([anyv((3, 4))], {"axis": 0}, lambda x: F.log_softmax(x, dim=0)),
    "matmul": ([anyv((3, 4)), anyv((4, 2))], {}, torch.matmul),
    "linear": ([anyv((3, 4)), anyv((5, 4)), anyv((5,))], {"out_features": 5}, F.linear),
    "mse_loss": ([anyv((3, 4)), anyv((3, 4))], {}, F.mse_loss),
    "reshape": ([anyv((3, 4))], {"shape": [2, 6]}, lambda x: x.reshape(2, 6)),
    "flatten": ([anyv((2, 3, 4))], {"start_axis": 1}, lambda x: torch.flatten(x, 1)),
    "permute": ([anyv((2, 3, 4))], {"perm": [2, 0, 1]}, lambda x: x.permute(2, 0, 1)),
    "broadcast_to": ([anyv((3, 1))], {"shape": [2, 3, 4]},
                     lambda x: torch.broadcast_to(x, (2, 3, 4))),
    "concat": ([anyv((2, 3)), anyv((2, 1)), anyv((2, 2))], {"axis": 1},
               lambda *xs: torch.cat(xs, dim=1)),
    "layernorm": ([anyv((3, 4)), anyv((4,)), anyv((4,)), lambda r: np.asarray(1e-5)],
                  {"axis": 1}, _ln),
    "batchnorm_eval": ([anyv((3, 4)), anyv((3,)), pos((3,)), anyv((3,)), anyv((3,)),
                        lambda r: np.asarray(1e-5)], {"axis": 0}, _bn),
    "conv2d": ([anyv((2, 5, 6)), anyv((4, 2, 3, 3)), anyv((4,))],
               {"kernel_size": 3, "out_channels": 4, "padding": 1, "stride": [1, 2]},
               lambda x, w, b: F.conv2d(x, w, b, stride=(1, 2), padding=1)),
    "max_pool2d": ([anyv((2, 4, 6))], {"kernel_size": 2},
                   lambda x: F.max_pool2d(x, 2)),
    "avg_pool2d": ([anyv((2, 4, 6))], {"kernel_size": 2, "stride": [2, 3]},
                   lambda x: F.avg_pool2d(x, 2, stride=(2, 3))),
}
CASES["take"] = ([anyv((3, 5)), lambda r: r.integers(-5, 5, (2, 3)).astype(np.float64)],
                 {"axis": 1}, lambda x, i: x[:, i.long()])
CASES.update(NETWORK_CASES)  # the ops of real networks (tape_cases_networks.py)
CASES.update(FUNCTION_CASES)  # FPCore's functions and logic ops (tape_cases_functions.py)

# eps is a payload parameter but not a differentiable input in torch's functional form
# take's second argument holds integer indices: no derivative
NO_GRAD_ARGS = {("layernorm", 3), ("batchnorm_eval", 5), ("take", 1)}

DIFFERENTIABLE = sorted(n for n, r in OPS.items() if r.vjp is not None and n not in NOT_HERE)


def test_every_differentiable_op_has_a_case():
    missing = [n for n in DIFFERENTIABLE if n not in CASES]
    assert missing == [], f"ops without a gradient test: {missing}"


def _tape_vjp(ctx, op, args, attrs, g):
    b = TapeBuilder(ctx)
    ids = [b.leaf(a, name=f"a{i}") for i, a in enumerate(args)]
    y = b.apply(op, *ids, **attrs)
    grads = backward(b.tape, y, seed=g(b.tape.shape(y)) if callable(g) else g)
    return b.tape.value(y), [grads.get(i) for i in ids]


@pytest.mark.parametrize("op", sorted(CASES))
def test_vjp_matches_torch(op):
    gens, attrs, tfn = CASES[op]
    r = np.random.default_rng(RNG_SEED)
    args = [gen(r) for gen in gens]
    y, cots = _tape_vjp("float64", op, args, attrs,
                        lambda shape: np.asarray(r.standard_normal(shape)))
    # same cotangent for torch: rebuild it from the same generator state
    r2 = np.random.default_rng(RNG_SEED)
    [gen(r2) for gen in gens]
    seed = r2.standard_normal(np.shape(y))
    targs = [torch.tensor(a, dtype=torch.float64,
                          requires_grad=(op, i) not in NO_GRAD_ARGS)
             for i, a in enumerate(args)]
    ty = tfn(*targs)
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    wanted = [t for t in targs if t.requires_grad]
    tg = torch.autograd.grad(ty, wanted, torch.tensor(seed))
    k = 0
    for i, t in enumerate(targs):
        if not t.requires_grad:
            continue
        ref = tg[k].numpy()
        k += 1
        got = cots[i]
        assert got is not None, f"{op}: argument {i} received no cotangent"
        scale = max(float(np.max(np.abs(ref))), 1e-300)
        err = float(np.max(np.abs(np.asarray(got) - ref))) / scale
        assert err <= 1e-12, f"{op}: argument {i}: relative error {err:.3e}"


MP_OPS = [n for n in sorted(CASES) if n not in ("max_pool2d",)] + ["max_pool2d"]


@pytest.mark.parametrize("op", MP_OPS)
def test_vjp_matches_mpmath_central_differences(op):
    """<VJP(g), v> vs (g . (f(x + h v) - f(x - h v))) / 2h, all in mpmath at 200 bits."""
    import mpmath
    ctx = scalars.get("mpmath:200")
    gens, attrs, _ = CASES[op]
    r = np.random.default_rng(RNG_SEED + 1)
    args = [gen(r) for gen in gens]
    diff = [i for i in range(len(args)) if (op, i) not in NO_GRAD_ARGS]
    dirs = {i: r.standard_normal(np.shape(args[i])) for i in diff}
    b = TapeBuilder(ctx)
    ids = [b.leaf(a) for a in args]
    y = b.apply(op, *ids, **attrs)
    g = ctx.convert(r.standard_normal(b.tape.shape(y)))
    grads = backward(b.tape, y, seed=g)

    def dot(u, v):
        prod = np.asarray(u, dtype=object) * np.asarray(v, dtype=object)
        return mpmath.fsum(np.asarray(prod, dtype=object).reshape(-1))

    h = mpmath.mpf(2) ** -70

    def f(sign):
        bb = TapeBuilder(ctx)
        shifted = []
        for i, a in enumerate(args):
            v = ctx.convert(a)
            if i in diff:
                v = ctx.add(v, ctx.mul(ctx.convert(dirs[i]), ctx.convert(sign * h)))
            shifted.append(bb.leaf(v))
        return bb.tape.value(bb.apply(op, *shifted, **attrs))

    with mpmath.workprec(200):
        lhs = mpmath.fsum(dot(grads[i], ctx.convert(dirs[i])) for i in diff)
        rhs = dot(g, ctx.sub(f(1), f(-1))) / (2 * h)
        assert abs(lhs - rhs) <= mpmath.mpf(10) ** -30 * max(abs(rhs), 1), \
            f"{op}: <vjp, v> = {lhs}, central difference = {rhs}"
