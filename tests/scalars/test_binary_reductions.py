"""sum and matmul of the binary contexts: each order (sequential, fused, pairwise) equals a
step-by-step MPFR emulation of that same order; shapes follow numpy.matmul."""
from __future__ import annotations

import numpy as np
import pytest

from scalarlab import scalars
from scalarlab.scalars import formats


class Steps:
    """One rounding per step, in MPFR with the format's parameters (the oracle)."""

    def __init__(self, fmt):
        self.fmt = formats.get(fmt)
        self.ctx = formats.gmpy2_context(self.fmt)

    def _fix(self, v) -> float:
        return float(formats.round_to_format(np.array([float(v)]), self.fmt)[0])

    def add(self, a, b): return self._fix(self.ctx.add(a, b))
    def mul(self, a, b): return self._fix(self.ctx.mul(a, b))
    def fma(self, a, b, c): return self._fix(self.ctx.fma(a, b, c))

    def seq_sum(self, vals):
        vals = [float(v) for v in vals]
        if not vals:
            return 0.0
        acc = vals[0]
        for v in vals[1:]:
            acc = self.add(acc, v)
        return acc

    def tree_sum(self, vals):
        """The documented pairwise tree: adjacent pairs level by level, odd last carried."""
        level = [float(v) for v in vals]
        if not level:
            return 0.0
        while len(level) > 1:
            nxt = [self.add(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
            if len(level) % 2:
                nxt.append(level[-1])
            level = nxt
        return level[0]

    def dot(self, x, y, order):
        x, y = [float(v) for v in x], [float(v) for v in y]
        if not x:
            return 0.0
        if order == "fused":
            acc = self.mul(x[0], y[0])
            for a, b in zip(x[1:], y[1:]):
                acc = self.fma(a, b, acc)
            return acc
        prods = [self.mul(a, b) for a, b in zip(x, y)]
        return self.seq_sum(prods) if order == "sequential" else self.tree_sum(prods)


def matmul_oracle(fmt, a, b, order):
    """numpy.matmul's shape rules, each dot product by :class:`Steps`."""
    st = Steps(fmt)
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    A = np.broadcast_to(a2, batch + a2.shape[-2:])
    B = np.broadcast_to(b2, batch + b2.shape[-2:])
    out = np.empty(batch + (a2.shape[-2], b2.shape[-1]))
    for idx in np.ndindex(*out.shape):
        *q, i, j = idx
        out[idx] = st.dot(A[tuple(q) + (i,)], B[tuple(q) + (slice(None), j)], order)
    if a.ndim == 1:
        out = out[..., 0, :]
    if b.ndim == 1:
        out = out[..., 0]
    return out


def assert_same(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    ok = ((got == want) & (np.signbit(got) == np.signbit(want))) | (np.isnan(got) & np.isnan(want))
    assert ok.all(), f"{what}: got {got[~ok][:5]}, MPFR steps say {want[~ok][:5]}"


def spread(fmt, shape, rng, lo=-12, hi=12):
    """Format values of mixed magnitudes and signs: sums where the order matters."""
    x = rng.standard_normal(shape) * np.exp2(rng.integers(lo, hi, shape))
    return formats.round_to_format(x, fmt)


ORDER = {"": "sequential", "+fma": "fused", "/pairwise": "pairwise"}
FORMATS = ["binary32", "binary16", "bfloat16", "e4m3", "binary(11,40)", "binary64",
           "binary(5,51)"]


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("suffix", ["", "/pairwise"])
def test_sum_matches_step_emulation(name, suffix):
    ctx = scalars.get(name + suffix)
    st = Steps(ctx.fmt)
    rng = np.random.default_rng(len(name) * 7 + len(suffix))
    x = spread(ctx.fmt, (5, 7, 3), rng)
    red = st.seq_sum if suffix == "" else st.tree_sum
    # axis=None: C order of all entries.
    assert_same(ctx.sum(x), np.array(red(x.reshape(-1))), f"{ctx.name} sum all")
    for axis in (0, 1, 2, -1):
        want = np.apply_along_axis(red, axis, x)
        assert_same(ctx.sum(x, axis=axis), want, f"{ctx.name} sum axis {axis}")
    # Several axes: reduced in C order of those axes.
    want = np.array([red(x[:, j, :].reshape(-1)) for j in range(7)])
    assert_same(ctx.sum(x, axis=(0, 2)), want, f"{ctx.name} sum (0, 2)")
    assert ctx.sum(x, axis=(0, 2), keepdims=True).shape == (1, 7, 1)
    assert ctx.sum(x, axis=1, keepdims=True).shape == (5, 1, 3)


def test_order_is_observable():
    """1 + 2^-11 + 2^-11 in binary16: sequential rounds each tiny addend away (ties to
    even), the pairwise tree adds the two tiny ones first."""
    x = np.array([1.0, 2.0 ** -11, 2.0 ** -11])
    assert scalars.get("binary16").sum(x) == 1.0
    assert scalars.get("binary16/pairwise").sum(np.array([2.0 ** -11, 2.0 ** -11, 1.0])) \
        == 1.0 + 2.0 ** -10
    # Fused dot products round once per step: 1*(1+2^-10) + (-1) ... differ from unfused.
    a = np.array([1.0 + 2.0 ** -10, 1.0 + 2.0 ** -10])
    b = np.array([1.0 + 2.0 ** -10, -(1.0 + 2.0 ** -10)])
    c16, f16 = scalars.get("binary16"), scalars.get("binary16+fma")
    assert c16.matmul(a, b) == 0.0
    assert f16.matmul(a, b) == Steps("binary16").dot(a, b, "fused") != 0.0


def test_sum_edge_cases():
    ctx = scalars.get("binary32")
    assert ctx.sum(np.zeros(0)) == 0.0 and not np.signbit(ctx.sum(np.zeros(0)))
    assert np.signbit(ctx.sum(np.array([-0.0])))
    assert np.signbit(ctx.sum(np.array([-0.0, -0.0])))
    assert ctx.sum(np.zeros((0, 3)), axis=0).tolist() == [0.0, 0.0, 0.0]
    mx = ctx.fmt.max_finite
    assert ctx.sum(np.array([mx, mx, -mx])) == np.inf      # overflow is sticky
    e4 = scalars.get("e4m3")
    assert np.isnan(e4.sum(np.array([448.0, 64.0, -448.0])))
    with pytest.raises(scalars.ContextError, match="axis 3 out of range"):
        ctx.sum(np.zeros((2, 2)), axis=3)


SHAPES = [((3, 5), (5, 4)), ((5,), (5, 4)), ((3, 5), (5,)), ((5,), (5,)),
          ((2, 3, 5), (5, 4)), ((2, 1, 3, 5), (4, 5, 2)), ((3, 0), (0, 2)), ((1, 3, 5), (2, 5, 1))]


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("suffix", ["", "+fma", "/pairwise"])
def test_matmul_matches_step_emulation(name, suffix):
    ctx = scalars.get(name + suffix)
    rng = np.random.default_rng(len(name) + 3 * len(suffix))
    for sa, sb in SHAPES:
        a, b = spread(ctx.fmt, sa, rng, -6, 6), spread(ctx.fmt, sb, rng, -6, 6)
        got = ctx.matmul(a, b)
        assert got.shape == np.matmul(a, b).shape
        assert_same(got, matmul_oracle(ctx.fmt, a, b, ORDER[suffix]),
                    f"{ctx.name} matmul {sa} @ {sb}")


@pytest.mark.parametrize("suffix", ["", "+fma"])
def test_binary32_hardware_path_extremes(suffix):
    """binary32 matmul runs in hardware float32: subnormal products, gradual underflow,
    overflow to inf and NaN propagate exactly as the step emulation says."""
    ctx = scalars.get("binary32" + suffix)
    rng = np.random.default_rng(4)
    a = spread("binary32", (9, 40), rng, -80, -60)       # products around 2^-140: subnormal
    b = spread("binary32", (40, 11), rng, -70, -50)
    big = spread("binary32", (40, 11), rng, 60, 66)        # partial sums overflow
    a[0, 0], b[3, 2] = np.inf, np.nan
    for bb in (b, big):
        assert_same(ctx.matmul(a, bb), matmul_oracle(ctx.fmt, a, bb, ORDER[suffix]),
                    f"{ctx.name} extremes")


def test_wide_format_fallback_for_underflowing_products():
    """binary(11,40): products below float64's normal range cannot be handled by the
    error-free transformations; those outputs are recomputed step by step in MPFR."""
    for suffix in ("", "+fma", "/pairwise"):
        ctx = scalars.get("binary(11,40)" + suffix)
        rng = np.random.default_rng(9)
        a = spread(ctx.fmt, (3, 6), rng, -560, -520)
        b = spread(ctx.fmt, (6, 4), rng, -540, -500)
        assert_same(ctx.matmul(a, b), matmul_oracle(ctx.fmt, a, b, ORDER[suffix]),
                    f"{ctx.name} underflow")


def test_matmul_errors_name_both_shapes():
    ctx = scalars.get("bfloat16")
    with pytest.raises(scalars.ContextError, match=r"bfloat16: matmul: shapes \[3, 5\] and \[4, 2\]"):
        ctx.matmul(np.ones((3, 5)), np.ones((4, 2)))
    with pytest.raises(scalars.ContextError, match="at least one axis"):
        ctx.matmul(np.ones(()), np.ones((2, 2)))
    with pytest.raises(scalars.ContextError, match="batch dimensions"):
        ctx.matmul(np.ones((2, 3, 5)), np.ones((3, 5, 2)))
    with pytest.raises(scalars.ContextError, match="not a bfloat16 value"):
        ctx.matmul(np.full((2, 2), 0.1), np.ones((2, 2)))


def test_amax_argmax_exact():
    ctx = scalars.get("binary16")
    rng = np.random.default_rng(2)
    x = spread("binary16", (4, 6), rng)
    assert_same(ctx.amax(x, axis=1), x.max(axis=1), "amax")
    assert_same(ctx.amax(x), np.array(x.max()), "amax all")
    assert ctx.argmax(x, axis=0).tolist() == x.argmax(axis=0).tolist()
    with pytest.raises(scalars.ContextError, match="empty"):
        ctx.amax(np.zeros((0, 2)), axis=0)
