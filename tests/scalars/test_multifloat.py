"""scalars/kernels/multifloat: renorm and the Ozaki slice products against exact rationals.

Every check is ``|exact - sum(M)| <= err`` with the exact value in gmpy2 ``mpq`` (object
arrays), plus the non-overlap of the components and the size of ``err``: at most
2^-(53k-10) |A||X| elementwise on dense data, at most 2^-(53k-10) n max|A_r| max|X_c| on
the adversarial cases (huge and tiny exponents, subnormals, rows of zeros, cancellation),
where |A||X| of an entry can be far below the row and column scales.  The default run keeps
small shapes (and n = 5000 with two outputs, for the smallest beta); the slow run adds
larger ones.
"""
from __future__ import annotations

import gmpy2
import numpy as np
import pytest

from scalarlab.scalars.kernels import multifloat as mf

_Q = np.vectorize(lambda t: gmpy2.mpq(float(t)), otypes=[object])


def _val(M):
    """Exact value of a multi-float (object array of mpq)."""
    out = _Q(M[0])
    for c in M[1:]:
        out = out + _Q(c)
    return out


def _multi(rng, shape, kx, scale=None):
    """A random non-overlapping kx-component multi-float (made by renorm)."""
    x = rng.standard_normal(shape)
    if scale is not None:
        x = x * scale
    parts = [x] + [x * 2.0 ** (-55 * t) * rng.standard_normal(shape) for t in range(1, kx)]
    M, _ = mf.renorm(parts, kx)
    return M


def _check_nonoverlap(M):
    for c in range(M.shape[0] - 1):
        hi, lo = np.abs(M[c]), np.abs(M[c + 1])
        assert np.all(lo <= np.spacing(hi)), f"components {c}, {c + 1} overlap"
        assert np.all((hi != 0) | (lo == 0))


def _check_product(A, X, M, err, k, *, dense):
    """Enclosure against mpq and the size of err; ``dense``: elementwise |A||X| scale."""
    assert M.shape[0] == k and M.shape[1:] == err.shape
    _check_nonoverlap(M)
    assert np.all(err >= 0) and np.all(np.isfinite(err))
    xv = _val(X)
    exact = _Q(A) @ xv
    diff = np.abs(exact - _val(M))
    assert np.all(diff <= _Q(err)), "err does not cover |exact - sum(M)|"
    if dense:
        scale = np.abs(A) @ np.abs(np.sum(X, axis=0))
    else:
        n = A.shape[-1]
        ax = np.abs(X).sum(axis=0)
        scale = n * np.max(np.abs(A), axis=-1)[:, None] * np.max(ax, axis=-2)[None, :]
    # below 2^-1022 the result's own rounding adds up to a few 2^-1074 per component
    bound = np.ldexp(scale, -(53 * k - 10)) + (k + 4) * 2.0 ** -1074
    assert np.all(err <= bound), (np.max(err / np.where(scale > 0, scale, 1)), k)
    return diff


# ----------------------------------------------------------------------------- renorm
@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_renorm_encloses_and_is_nonoverlapping(k):
    rng = np.random.default_rng(k)
    shape = (7, 5)
    parts = [rng.standard_normal(shape) * 2.0 ** rng.integers(-200, 200, shape)
             for _ in range(9)]
    parts.append(-parts[3])                       # cancellation: part 3 drops out exactly
    parts.append(np.zeros(shape))
    M, err = mf.renorm(parts, k)
    _check_nonoverlap(M)
    exact = sum(_Q(p) for p in parts)
    assert np.all(np.abs(exact - _val(M)) <= _Q(err))
    mag = sum(np.abs(_Q(p)) for p in parts)
    assert np.all(_Q(err) <= mag * gmpy2.mpq(2) ** -(53 * k - 10))


def test_renorm_exact_cases_have_zero_err():
    """Few bits in all: the components hold the sum exactly, err is 0; a sum that cancels
    to zero gives zero components."""
    a = np.array([1.0, 3.0, 2.0 ** 100, 0.0])
    b = np.array([2.0 ** -60, -3.0, 1.0, 0.0])
    M, err = mf.renorm([a, b, -a], 2)
    assert np.all(err == 0)
    assert np.array_equal(M[0], b) and not M[1].any()      # each entry of b is one float
    M, err = mf.renorm([a, -a], 3)
    assert not M.any() and not err.any()


def test_renorm_subnormal_and_huge():
    """TwoSum is exact with gradual underflow; huge parts that cancel do not overflow."""
    t = np.array([2.0 ** -1074, 3 * 2.0 ** -1074, 2.0 ** -1022])
    big = np.array([2.0 ** 1023, -2.0 ** 1023, 1.5 * 2.0 ** 1022])
    M, err = mf.renorm([t, big, -big, t * 5], 3)
    assert np.all(_val(M) + _Q(err) >= _Q(t) * 6) and np.all(_val(M) - _Q(err) <= _Q(t) * 6)
    assert np.all(err == 0)


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_renorm_refuses_non_finite(bad):
    a = np.ones(3)
    b = np.array([1.0, bad, 2.0])
    with pytest.raises(ValueError, match=r"renorm: part 1 has a non-finite entry"):
        mf.renorm([a, b], 2)


def test_renorm_refuses_overflow_and_bad_k():
    a = np.array([2.0 ** 1023])
    with pytest.raises(ValueError, match="overflows float64"):
        mf.renorm([a, a], 2)
    with pytest.raises(ValueError, match="k must be a positive int"):
        mf.renorm([a], 0)
    with pytest.raises(ValueError, match="part 1 has shape"):
        mf.renorm([np.ones(2), np.ones(3)], 2)


# ----------------------------------------------------------------------------- matmul
@pytest.mark.parametrize("k", [2, 3, 4])
def test_matmul_dense_random(k):
    rng = np.random.default_rng(10 + k)
    A = rng.standard_normal((6, 37))
    X = _multi(rng, (37, 5), k)
    M, err = mf.matmul(A, X, k)
    _check_product(A, X, M, err, k, dense=True)


@pytest.mark.parametrize("k", [2, 3, 4])
def test_matmul_huge_tiny_exponents_and_zeros(k):
    """Rows and columns scaled by 2^+-500 (products from 2^-1000 to 2^900), tiny entries
    inside a row (slices far below the row's scale), a row and a column of zeros,
    subnormal entries."""
    rng = np.random.default_rng(20 + k)
    m, n, p = 6, 23, 5
    A = rng.standard_normal((m, n)) * 2.0 ** np.array([500, -500, 0, 40, -600, 0])[:, None]
    A[2] = 0.0
    A[3, ::3] *= 2.0 ** -70                      # a row spanning 70 + 53 bits
    A[5, :4] = np.array([2.0 ** -1074, -3 * 2.0 ** -1074, 2.0 ** -1030, 1.0])
    X = _multi(rng, (n, p), k, scale=2.0 ** np.array([-500, 400, 0, 3, -480])[None, :])
    X[:, :, 2] = 0.0
    X[:, 1::4, 3] *= 2.0 ** -90
    M, err = mf.matmul(A, X, k)
    _check_product(A, X, M, err, k, dense=False)
    assert np.all(M[:, 2, :] == 0) and np.all(err[2, :] == 0)     # zero row
    assert np.all(M[:, :, 2] == 0) and np.all(err[:, 2] == 0)     # zero column


def test_matmul_cancellation_to_zero():
    """Rows whose exact products cancel to 0 (one to a tiny remainder)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 3))
    A = np.array([[1.0, -1.0] * 4, [3.0, -3.0, 5.0, -5.0] * 2, [1.0] * 8])
    X = np.stack([np.repeat(x[::2], 2, axis=0), np.zeros((8, 3))])
    X[1, 0, 0] = 2.0 ** -80                     # row 0's first column: 2^-80 exactly
    M, err = mf.matmul(A, X, 2)
    diff = _check_product(A, X, M, err, 2, dense=False)
    assert np.all(diff == 0)
    assert M[0, 0, 0] == 2.0 ** -80 and M[0, 1, 0] == 3 * 2.0 ** -80
    assert not M[1:, :2].any() and not M[0, :2, 1:].any()


@pytest.mark.parametrize("n", [1, 2, 1000, pytest.param(5000, marks=pytest.mark.slow), 4097])
def test_matmul_inner_dimension_sets_beta(n):
    """beta = floor((53 - ceil(log2 n)) / 2): the widest slice products stay exact at the
    boundary sizes (n = 4097 needs 13 bits of headroom, 5000 too)."""
    rng = np.random.default_rng(n)
    A = rng.standard_normal((2, n))
    A[:, 0] = 1.0 - 2.0 ** -52                  # slice 0 rounds up to 1: |A_0| = 2^0 exactly
    X = _multi(rng, (n, 2), 3)
    X[0, 0] = 1.0 - 2.0 ** -52
    X[1:, 0] = 0.0
    M, err = mf.matmul(A, X, 3)
    _check_product(A, X, M, err, 3, dense=True)
    assert mf.beta_for(n) == (53 - int(np.ceil(np.log2(n)))) // 2


@pytest.mark.parametrize("narrow", [True, False])
def test_matmul_column_chunks_and_layouts(monkeypatch, narrow):
    """Small chunks (several per call, the last one wider) in both layouts of the data
    slices: side by side per weight slice (narrow chunks) or one stacked product per data
    slice (wide chunks); batched data broadcast over the weight."""
    monkeypatch.setattr(mf, "CHUNK_ELEMS", 40 * 16)
    monkeypatch.setattr(mf, "NARROW", 10 ** 9 if narrow else 0)
    rng = np.random.default_rng(30)
    A = rng.standard_normal((9, 40))
    A[0, 5] = 2.0 ** -70                        # sparse deep weight slices too
    X = _multi(rng, (2, 40, 53), 3)
    M, err = mf.matmul(A, X, 3)
    assert M.shape == (3, 2, 9, 53)
    for b in range(2):
        _check_product(A, X[:, b], M[:, b], err[b], 3, dense=False)


@pytest.mark.slow
@pytest.mark.parametrize("k", [2, 3, 4])
def test_matmul_larger_shapes(k):
    """The slow run: im2col-like shapes (hundreds of columns, several default chunks)."""
    rng = np.random.default_rng(40 + k)
    A = rng.standard_normal((16, 300)) / 17
    X = _multi(rng, (300, 700), k)
    X[:, :, ::7] = np.maximum(X[:, :, ::7], 0)
    M, err = mf.matmul(A, X, k)
    _check_product(A, X, M, err, k, dense=True)


def test_matmul_left_matches_transposed_product():
    """X @ A (data on the left, as im2col and x @ W.T call it) is A^T @ X^T transposed, to
    the bit, and encloses the exact product; batched X broadcasts over the weight."""
    rng = np.random.default_rng(5)
    A = rng.standard_normal((19, 4))
    X = _multi(rng, (3, 7, 19), 3)              # (kx, batch, p, n)
    M, err = mf.matmul_left(X, A, 3)
    assert M.shape == (3, 3, 7, 4) and err.shape == (3, 7, 4)
    Mt, et = mf.matmul(A.T, np.swapaxes(X, -1, -2), 3)
    assert np.array_equal(M, np.swapaxes(Mt, -1, -2))
    assert np.array_equal(err, np.swapaxes(et, -1, -2))
    for b in range(3):
        _check_product(A.T, np.swapaxes(X[:, b], -1, -2), np.swapaxes(M[:, b], -1, -2),
                       err[b].T, 3, dense=True)


def test_weight_slices_are_reused_bit_for_bit():
    rng = np.random.default_rng(6)
    A = rng.standard_normal((5, 30))
    S = mf.split_rows(A)
    X2, X4 = _multi(rng, (30, 4), 2), _multi(rng, (30, 4), 4)
    a = mf.matmul(A, X4, 4, A_slices=S)          # extends S to the slices k = 4 needs
    b = mf.matmul(A, X2, 2, A_slices=S)          # reuses them, fewer
    assert all(np.array_equal(u, v) for u, v in zip(a, mf.matmul(A, X4, 4)))
    assert all(np.array_equal(u, v) for u, v in zip(b, mf.matmul(A, X2, 2)))
    assert all(np.array_equal(u, v) for u, v in zip(b, mf.matmul(None, X2, 2, A_slices=S)))
    with pytest.raises(ValueError, match="A_slices were made from shape"):
        mf.matmul(A[:, :10], X2[:, :10], 2, A_slices=S)
    with pytest.raises(ValueError, match="use split_cols"):
        mf.matmul_left(np.swapaxes(X2, -1, -2), A.T, 2, A_slices=S)


@pytest.mark.parametrize("where", ["A", "X"])
@pytest.mark.parametrize("bad", [np.inf, np.nan])
def test_matmul_refuses_non_finite(where, bad):
    A = np.ones((2, 3))
    X = np.ones((2, 3, 2))
    if where == "A":
        A[1, 2] = bad
        msg = r"split_rows: A has a non-finite entry .* at index \(1, 2\)"
    else:
        X[1, 0, 1] = bad
        msg = r"matmul: X has a non-finite entry .* at index \(1, 0, 1\)"
    with pytest.raises(ValueError, match=msg):
        mf.matmul(A, X, 2)


def test_matmul_refuses_bad_shapes_and_overflow():
    with pytest.raises(ValueError, match="contracted dimensions differ"):
        mf.matmul(np.ones((2, 3)), np.ones((2, 4, 2)), 2)
    with pytest.raises(ValueError, match=r"shape \(k, \.\.\., n, p\)"):
        mf.matmul(np.ones((2, 3)), np.ones((3, 2)), 2)
    with pytest.raises(ValueError, match="overflows float64"):
        mf.matmul(np.full((1, 2), 2.0 ** 1000), np.full((1, 2, 1), 2.0 ** 100), 2)


# ----------------------------------------------------------------------------- radius
def test_abs_matmul_up_bounds_and_is_tight():
    rng = np.random.default_rng(7)
    P = np.abs(rng.standard_normal((4, 300)))
    R = np.abs(rng.standard_normal((300, 3))) * 2.0 ** -40
    R[5, 1] = 2.0 ** -1074                       # a product below 2^-1022: underflow term
    P[0] = 2.0 ** -1000
    for left, right in ((P, R), (R.T, P.T)):     # |A| R and R |A|
        ub = mf.abs_matmul_up(left, right)
        exact = _Q(left) @ _Q(right)
        assert np.all(_Q(ub) >= exact)
        n = left.shape[-1]
        assert np.all(ub <= (exact * (1 + gmpy2.mpq(4 * n + 16, 2 ** 53)))
                      + (2 * n + 2) * gmpy2.mpq(2) ** -1074)
    with pytest.raises(ValueError, match="nonnegative"):
        mf.abs_matmul_up(-P, R)
    with pytest.raises(ValueError, match="non-finite"):
        mf.abs_matmul_up(P, R * np.inf)


# ----------------------------------------------------------------------------- slicing
def test_extract_rounds_to_the_grid_exactly():
    """sigma = 1.5 2^s: q is R rounded to the nearest multiple of 2^(s-52), the remainder
    at most half of it (with sigma = 2^s it could reach a whole unit above sigma)."""
    rng = np.random.default_rng(8)
    s = 10
    R = rng.uniform(-1, 1, 2000) * 2.0 ** (s - 1)
    R[:4] = [2.0 ** (s - 1), -2.0 ** (s - 1), 0.0, 2.0 ** (s - 53) * 3]
    R0 = R.copy()
    q = mf._extract(R, 1.5 * 2.0 ** s)
    u = 2.0 ** (s - 52)
    assert np.all(np.mod(q, u) == 0) and np.all(np.abs(R) <= u / 2)
    assert np.all(_Q(q) + _Q(R) == _Q(R0))


@pytest.mark.parametrize("J", [1, 2])
def test_skipped_remainder_bound_is_sharp(monkeypatch, J):
    """A plan that skips the data's remainder after J slices (the planner prefers the
    float64 tail, but every plan must be accounted for), every remainder near the largest
    the bound allows and of one sign: the bound holds (it caught remainders of a whole
    unit when sigma was 2^s) and is within 3 bits of the loss."""
    n = 64
    A = np.ones((1, n))
    S = mf.split_rows(A)
    beta_a, beta_x = mf.betas(n)
    plan = mf._Plan(beta=beta_a, beta_x=beta_x, J=[J], tail=[False], sa=1, Jmax=J)
    monkeypatch.setattr(mf, "_plan", lambda *a: plan)
    u = 2.0 ** (-plan.beta_x * plan.J[0])       # grid of the last slice kept
    x = np.full((1, n, 4), 0.75)                # u / 32 >= ulp(0.75) = 2^-53: exact
    x[0, :, 0] += 15 / 32 * u
    x[0, :, 1] -= 15 / 32 * u
    x[0, :, 2] += 31 / 32 * u                   # rounds up: remainder -u/32
    x[0, :, 3] += 39 / 32 * u
    M, err = mf.matmul(A, x, 2, A_slices=S)
    diff = np.abs(_Q(A) @ _val(x) - _val(M))
    assert np.all(diff <= _Q(err)) and np.all(diff > 0)
    assert np.all(_Q(err[:, :2]) <= diff[:, :2] * 8)


def test_matmul_overlapping_components_are_renormalised():
    """Components that overlap (three copies of one value, opposite halves) would make a
    data slice too wide for an exact product: the chunk is renormalised first."""
    rng = np.random.default_rng(9)
    A = rng.standard_normal((4, 50))
    x = rng.standard_normal((50, 6))
    X = np.stack([x, x, x * (1 + 2.0 ** -30), -x / 3])
    M, err = mf.matmul(A, X, 3)
    _check_product(A, X, M, err, 3, dense=False)


def test_matmul_grouped_weight_and_sample_batch():
    """A weight with a group axis (grouped convolution: (G, m, n)) and data with a sample
    axis in front of the group axis (N, G): the samples move into the columns and back;
    each (sample, group) block encloses its exact product."""
    rng = np.random.default_rng(11)
    A = rng.standard_normal((2, 5, 12))
    X = _multi(rng, (3, 2, 12, 4), 2)
    M, err = mf.matmul(A, X, 2)
    assert M.shape == (2, 3, 2, 5, 4) and err.shape == (3, 2, 5, 4)
    for b in range(3):
        for g in range(2):
            _check_product(A[g], X[:, b, g], M[:, b, g], err[b, g], 2, dense=True)
    Ml, el = mf.matmul_left(np.swapaxes(X, -1, -2), np.swapaxes(A, -1, -2), 2)
    assert Ml.shape == (2, 3, 2, 4, 5)
    for b in range(3):
        for g in range(2):
            _check_product(A[g], X[:, b, g], np.swapaxes(Ml[:, b, g], -1, -2),
                           el[b, g].T, 2, dense=True)


def test_renorm_array_input_more_components_than_parts_and_k1_product():
    """An array whose first axis lists the parts; k above the number of parts pads zero
    components; k = 1 products round to one float64 with err covering the rest."""
    rng = np.random.default_rng(12)
    P = rng.standard_normal((2, 3, 4))
    M, err = mf.renorm(P, 4)
    assert M.shape == (4, 3, 4) and not M[2:].any() and not err.any()
    assert np.all(_val(M) == _Q(P[0]) + _Q(P[1]))
    A = rng.standard_normal((3, 8))
    X = _multi(rng, (8, 2), 2)
    M1, e1 = mf.matmul(A, X, 1)
    assert M1.shape == (1, 3, 2)
    _check_product(A, X, M1, e1, 1, dense=True)
