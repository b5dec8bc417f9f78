"""Random DAGs (fan-out, repeated parents, detached and constant nodes): the tape's one
reverse loop and one accumulation function agree with PyTorch autograd."""
import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from scalarlab.tape import TapeBuilder, backward

UNARY = ("tanh", "sigmoid", "sin", "neg")
BINARY = ("add", "sub", "mul")
TORCH = {"tanh": torch.tanh, "sigmoid": torch.sigmoid, "sin": torch.sin, "neg": torch.neg,
         "add": torch.add, "sub": torch.sub, "mul": torch.mul}

step = st.tuples(st.sampled_from(UNARY + BINARY + ("detach",)),
                 st.integers(0, 10 ** 6), st.integers(0, 10 ** 6))


@settings(max_examples=40, deadline=None)
@given(st.lists(step, min_size=1, max_size=25), st.integers(0, 2 ** 31 - 1))
def test_random_dag_gradients_match_torch(steps, seed):
    r = np.random.default_rng(seed)
    leaves = [r.standard_normal(3) for _ in range(2)]
    const = r.standard_normal(3)
    b = TapeBuilder("float64")
    ids = [b.leaf(v, name=f"x{i}") for i, v in enumerate(leaves)] + [b.const(const)]
    tv = [torch.tensor(v, requires_grad=True) for v in leaves] + [torch.tensor(const)]
    for op, i, j in steps:
        a, c = i % len(ids), j % len(ids)         # any earlier node; a == c is allowed
        if op == "detach":
            ids.append(b.detach(ids[a]))
            tv.append(tv[a].detach())
        elif op in UNARY:
            ids.append(b.apply(op, ids[a]))
            tv.append(TORCH[op](tv[a]))
        else:
            ids.append(b.apply(op, ids[a], ids[c]))
            tv.append(TORCH[op](tv[a], tv[c]))
    out = b.sum(ids[-1])
    g = backward(b.tape, out)
    tout = tv[-1].sum()
    live = [k for k in range(2) if tout.requires_grad]
    tg = torch.autograd.grad(tout, [tv[k] for k in live], allow_unused=True) if live else []
    for k in range(2):
        ref = tg[k] if live else None
        if ref is None:
            assert ids[k] not in g                # unreached in torch: absent on the tape
        else:
            np.testing.assert_allclose(g[ids[k]], ref.numpy(), rtol=1e-13, atol=1e-14)
