"""numba_cuda binary32 kernels vs the binary32 reference contexts (CUDA simulator in CI).

Exact kernels (linear, add, mul, relu, layernorm) must be bit-identical to the reference
where the order is the same; the tree-order sum must match its declared order bit for bit;
device-math kernels (exp, tanh, sigmoid, softmax) must stay within their documented ULP
bounds of the correctly rounded reference.
"""
import numpy as np
import pytest

from scalarlab import scalars
import scalarlab.scalars.formats as F
from scalarlab.cuda_kernels import gemm, host
from scalarlab.cuda_kernels.elementwise import ULP_BOUND, softmax_ulp_bound
from scalarlab.cuda_kernels.reduce import tree_sum_emulated
from cuda_cases import SPECIALS, f32
from scalarlab.graph.optable import OPS

# the simulator runs kernels as numpy scalar code: overflow/invalid are expected results
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

B32 = F.get("binary32")
CTX = scalars.get("binary32")
CTX_FMA = scalars.get("binary32+fma")


def same(a, b):
    """Bit-level agreement up to the sign of zero (NaN == NaN)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


def ulps(a, b):
    return np.asarray(F.ulp_distance(np.asarray(a, np.float64), np.asarray(b, np.float64), B32))


def ref_forward(op, ctx, args, nb=0, **attrs):
    rec = OPS[op]
    full = {k: v for k, v in rec.attrs.items()}
    full.update(attrs)
    return rec.forward(ctx, [np.asarray(a, np.float64) for a in args], full, nb)


@pytest.mark.parametrize("fma, ctx", [(False, CTX), (True, CTX_FMA)])
@pytest.mark.parametrize("M, K, N", [(3, 7, 5), (9, 5, 10), (1, 13, 2)])
def test_linear_bit_identical_to_the_reference(fma, ctx, M, K, N):
    rng = np.random.default_rng(M * 100 + K)
    x, W, b = f32(rng, (M, K)), f32(rng, (N, K)), f32(rng, N)
    want = ref_forward("linear", ctx, [x, W, b])
    got = host.linear(x, W.T, b, fma=fma, tiling=gemm.SMALL)
    assert same(got, want)


def test_linear_fma_and_plain_differ_where_the_contexts_differ():
    # second step: (1 + 2^-12)^2 - (1 + 2^-11) = 2^-24 exactly; rounding the product first
    # (a tie, to even) loses it
    u = 1 + 2.0 ** -12
    x = np.array([[1.0, u]], dtype=np.float32)
    W = np.array([[-(1 + 2.0 ** -11), u]], dtype=np.float32)
    b = np.zeros(1, dtype=np.float32)
    plain = host.linear(x, W.T, b, fma=False, tiling=gemm.SMALL)
    fused = host.linear(x, W.T, b, fma=True, tiling=gemm.SMALL)
    assert same(plain, ref_forward("linear", CTX, [x, W, b]))
    assert same(fused, ref_forward("linear", CTX_FMA, [x, W, b]))
    assert plain[0, 0] == 0.0 and fused[0, 0] == np.float32(2.0 ** -24)


def test_linear_special_values_and_subnormals():
    x = np.array([[1e-30, 1e-30, 3.0], [np.inf, 1.0, 0.0], [3e38, 1e38, -1e30]], np.float32)
    W = np.array([[1e-20, -1e-20, 1e-45], [2.0, 0.5, -0.0]], np.float32)
    b = np.array([0.0, -1.0], np.float32)
    for fma, ctx in ((False, CTX), (True, CTX_FMA)):
        got = host.linear(x, W.T, b, fma=fma, tiling=gemm.SMALL)
        assert same(got, ref_forward("linear", ctx, [x, W, b]))
    assert np.isinf(got[2, 1])       # overflow of the partial sum


def test_linear_batch_axes_through_the_provider_tiling():
    rng = np.random.default_rng(3)
    x, W, b = f32(rng, (2, 3, 6)), f32(rng, (4, 6)), f32(rng, 4)
    got = host.linear(x.reshape(-1, 6), W.T, b, fma=False).reshape(2, 3, 4)
    assert same(got, ref_forward("linear", CTX, [x, W, b], nb=1))


@pytest.mark.parametrize("op", ["add", "mul"])
def test_add_mul_bit_identical_with_broadcasting_and_specials(op):
    rng = np.random.default_rng(1)
    a = np.concatenate([f32(rng, 20, 1e3), SPECIALS])
    b = np.concatenate([f32(rng, 20, 1e-3), SPECIALS[::-1]])
    assert same(host.binary(op, a, b), getattr(CTX, op)(a.astype(np.float64), b.astype(np.float64)))
    m, v = f32(rng, (3, 4)), f32(rng, 4)
    assert same(host.binary(op, m, v), getattr(CTX, op)(m.astype(np.float64), v.astype(np.float64)))


def test_relu_bit_identical():
    rng = np.random.default_rng(2)
    a = np.concatenate([f32(rng, 16), SPECIALS])
    assert same(host.unary("relu", a), ref_forward("relu", CTX, [a]))


@pytest.mark.parametrize("op", ["exp", "tanh", "sigmoid"])
def test_device_math_within_documented_ulp_bound(op):
    rng = np.random.default_rng(4)
    scale = {"exp": 30.0, "tanh": 4.0, "sigmoid": 40.0}[op]
    a = np.concatenate([f32(rng, 48, scale), np.array([0.0, -0.0, 1e-40, -95.0, 89.0, np.inf,
                                                      -np.inf], np.float32)])
    want = getattr(CTX, op)(a.astype(np.float64))
    got = host.unary(op, a)
    gap = ulps(got, want)
    assert gap.max() <= ULP_BOUND[op], (a[gap.argmax()], got[gap.argmax()], want[gap.argmax()])


def _tree_sum_scalar(row, T):
    """The tree(T) order written out with Python loops over numpy float32 scalars."""
    parts = []
    for t in range(T):
        acc = np.float32(0.0)
        for i in range(t, len(row), T):
            acc = np.float32(acc + row[i])
        parts.append(acc)
    while len(parts) > 1:
        h = len(parts) // 2
        parts = [np.float32(parts[i] + parts[i + h]) for i in range(h)]
    return parts[0]


def test_tree_order_emulation_matches_its_definition():
    rng = np.random.default_rng(5)
    x = f32(rng, (3, 150), 1e3)
    emu = tree_sum_emulated(x, 16)
    assert all(emu[r] == _tree_sum_scalar(x[r], 16) for r in range(3))


@pytest.mark.parametrize("n", [1, 5, 64, 130])
def test_row_sum_is_bit_identical_to_the_tree_order(n):
    rng = np.random.default_rng(n)
    x = f32(rng, (2, n), 1e4)
    got = host.row_sum(x)
    assert same(got, tree_sum_emulated(x, host.TREE_WIDTH))
    # and within the classical bound of a sum of n terms of the sequential reference
    seq = CTX.sum(x.astype(np.float64), axis=1)
    bound = 2 * n * 2.0 ** -24 * np.abs(x).astype(np.float64).sum(axis=1)
    assert np.all(np.abs(got.astype(np.float64) - seq) <= bound)


def test_tree_sum_differs_from_the_sequential_reference_and_the_gap_is_real():
    # 1 + 2^-24 * 64: sequential absorbs every tiny term, the tree adds them up first
    x = np.concatenate([[1.0], np.full(127, 2.0 ** -24)]).astype(np.float32)[None, :]
    got = host.row_sum(x)[0]
    seq = CTX.sum(x.astype(np.float64), axis=1)[0]
    assert seq == 1.0 and got == tree_sum_emulated(x, host.TREE_WIDTH)[0]
    assert ulps(got, seq) > 0


def test_softmax_rows_within_bound_and_sum_to_one():
    rng = np.random.default_rng(6)
    x = f32(rng, (3, 7), 5.0)
    want = ref_forward("softmax", CTX, [x], axis=1)
    got = host.softmax_rows(x)
    assert ulps(got, want).max() <= softmax_ulp_bound(7)
    assert np.all(np.abs(got.astype(np.float64).sum(axis=1) - 1) < 1e-6)


def test_layernorm_rows_bit_identical():
    rng = np.random.default_rng(7)
    x, g, be = f32(rng, (4, 6), 3.0), f32(rng, 6), f32(rng, 6)
    eps = np.float32(1e-5)
    want = ref_forward("layernorm", CTX, [x, g, be, np.float64(eps)], axis=1)
    got = host.layernorm_rows(x, g, be, eps)
    assert same(got, want)


def test_fma_step_is_one_rounding_on_random_bit_patterns():
    # K = 2: the second step is a genuine fma(a1, b1, RN(a0 * b0)), checked against the
    # binary32+fma context (itself checked against MPFR by its own tests)
    rng = np.random.default_rng(12)

    def draw(shape, lo_exp, hi_exp):
        m = rng.uniform(1, 2, size=shape) * np.exp2(rng.integers(lo_exp, hi_exp, size=shape))
        return (m * rng.choice([-1, 1], size=shape)).astype(np.float32)

    x = draw((16, 2), -70, 60)
    W = draw((16, 2), -70, 60)
    b = np.zeros(16, np.float32)
    got = host.linear(x, W.T, b, fma=True, tiling=gemm.SMALL)
    assert same(got, ref_forward("linear", CTX_FMA, [x, W, b]))
    plain = host.linear(x, W.T, b, fma=False, tiling=gemm.SMALL)
    assert same(plain, ref_forward("linear", CTX, [x, W, b]))
    assert not same(got, plain)            # the two orders really differ somewhere
