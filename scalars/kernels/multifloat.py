"""Multi-float64 arrays and error-free matrix products on float64 BLAS (Ozaki splitting).

A *multi-float* array is a float64 ndarray ``M`` of shape ``(k,) + shape`` whose value is the
exact sum ``M[0] + M[1] + ... + M[k-1]``; after :func:`renorm` the components do not
overlap: ``|M[i+1]| <= ulp(M[i])``, and ``M[i+1] == 0`` where ``M[i] == 0``.  k components
carry about 53k bits, which is what a ball context with a multi-float midpoint needs to
absorb the growth of its radius through deep networks.

The products follow Ozaki, Ogita, Oishi and Rump (2012).  A (float64 weights) is scaled by
a power of two per row (|A| < 1) and cut into slices ``A_i`` whose entries are integer
multiples of ``2^-beta_a(i+1)`` below ``2^-beta_a i``; X (multi-float data) likewise per
column into ``X_j`` (multiples of ``2^-beta_x(j+1)``).  With ``n 2^(beta_a + beta_x) <=
2^53`` every partial sum of ``A_i @ X_j`` is an integer multiple of the product of the
units below 2^53 of them, so ANY float64 matmul (any order, FMA or not, any thread count)
computes it exactly; the integer bounds are checked before each product is trusted.
Slice products are summed error-free (in accumulators whose headroom is counted, then
:func:`renorm`); the remainder of the data below the kept precision meets each weight
slice in one plain float64 product (its rounding bounded by gamma_n) or is skipped (its
size bounded), and those bounds, the weight's remainder and underflow terms are added to
the returned ``err``.  A column chunk at a time, so that the elementwise work stays in
cache.

Functions: :func:`renorm`, :func:`split_rows` / :func:`split_cols` (a weight's slices, to
reuse across calls), :func:`matmul` (weight on the left), :func:`matmul_left` (data on the
left, as im2col convolutions and ``x @ W.T`` call it) and :func:`abs_matmul_up` (a
rigorous upper bound of ``|A| R`` for radius propagation).  Pure numpy; every function
refuses inf/NaN input with a ValueError (callers check finiteness before, this is the
last line of defence).

How the graph's contractions map here (the data is always the multi-float):
``graph/ops_conv.py`` multiplies ``cols [N, G, P, K] @ wmat [G, K, O/G]``, i.e.
``matmul_left(X of shape (k, N, G, P, K), wmat, k, A_slices=split_cols(wmat))`` (the
sample axis N moves into the columns: one product per group); ``linear`` is
``x @ W.T``: ``matmul_left(X (k, B, n), W.T, k, A_slices=split_cols(W.T))``; a weight on
the left, ``W @ x``, is :func:`matmul` with :func:`split_rows`.  Reusing the slices
object across calls is what makes a weight's splitting a one-off.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["renorm", "split_rows", "split_cols", "RowSlices", "matmul", "matmul_left",
           "abs_matmul_up", "beta_for", "bits_kept"]

_U = 2.0 ** -53            # unit roundoff of float64, round to nearest
_TINY = 2.0 ** -1074       # smallest subnormal
_MIN_NORMAL = 2.0 ** -1022


# ----------------------------------------------------------------------------- helpers
def _finite(name: str, what: str, a) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype != np.float64:
        if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)):
            raise ValueError(f"{name}: {what} must be a float64 array, got dtype {a.dtype}")
        a = a.astype(np.float64)
    # max and min propagate NaN and show inf: two read-only passes, no mask array
    if a.size and not (np.isfinite(np.max(a)) and np.isfinite(np.min(a))):
        bad = np.argwhere(~np.isfinite(a))[0]
        raise ValueError(f"{name}: {what} has a non-finite entry ({a[tuple(bad)]!r} at index "
                         f"{tuple(int(v) for v in bad)}); multi-float products need finite "
                         f"values")
    return a


def _two_sum(a, b):
    """(s, e) with s = RN(a + b) and a + b = s + e exactly (Knuth's TwoSum, no ordering
    precondition; exact with gradual underflow, meaningless on overflow)."""
    s = a + b
    bb = s - a
    e = a - (s - bb)
    e += b - bb
    return s, e


def _inflate(x, nops: int):
    """An upper bound of the exact value of a sum (or sum of products) of ``nops``
    nonnegative terms whose float64 evaluation in round to nearest is ``x``.

    The computed value is (1 + theta) times the exact one with |theta| <= gamma_nops, so
    exact <= x / (1 - gamma) <= x (1 + 2 gamma) <= x (1 + 4 nops u) for nops u <= 1/4; the
    factor's own product rounds down by at most u relative, covered by 8u more.  Below
    2^-1022 additions are exact and products are handled by the callers' underflow terms.
    """
    c = 1.0 + (4 * nops + 8) * _U        # exact: an integer times 2^-53 plus one
    return x * c


def _vec_sum(Q):
    """One bottom-up VecSum sweep over the list ``Q`` (in place, error free): the running
    sum moves to Q[0], the rounding errors stay behind."""
    for t in range(len(Q) - 1, 0, -1):
        Q[t - 1], Q[t] = _two_sum(Q[t - 1], Q[t])


def _nonoverlap_violations(M):
    """Boolean mask over entries where some pair (M[c], M[c+1]) overlaps."""
    bad = np.zeros(M.shape[1:], dtype=bool)
    for c in range(M.shape[0] - 1):
        hi, lo = np.abs(M[c]), np.abs(M[c + 1])
        bad |= lo > np.spacing(hi)
        bad |= (hi == 0) & (lo != 0)
    return bad


# ----------------------------------------------------------------------------- renorm
def renorm(parts, k: int):
    """``(M, err)``: a k-component non-overlapping multi-float ``M`` (shape ``(k,) +
    shape``) of the exact sum of ``parts`` (a list of same-shape float64 arrays, or an
    array whose first axis lists them), and ``err`` (float64, same shape) >= |exact sum -
    sum(M)|, 0 where the k components hold the sum exactly.

    How: TwoSum sweeps (VecSum, bottom-up) never change the exact sum of the list; after a
    sweep the list's first entry is close to the sum of the list, so it is peeled off as
    the next component (two sweeps before the first peel, one before the others).  What
    stays in the list after k peels is exactly ``sum - sum(M)``, and ``err`` bounds the sum
    of its absolute values rounded up (:func:`_inflate`).  Finally adjacent components
    that overlap are merged by TwoSum (exact again) until none overlaps; the passes are
    checked, not assumed.  Raises ValueError on non-finite parts or an overflowing sum.
    """
    if not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"renorm: k must be a positive int, got {k!r}")
    if isinstance(parts, np.ndarray):
        plist = list(parts) if parts.ndim >= 1 else [parts]
    else:
        plist = list(parts)
    if not plist:
        raise ValueError("renorm: no parts to sum")
    Q = []
    shape = None
    for i, p in enumerate(plist):
        p = _finite("renorm", f"part {i}", p)
        if shape is None:
            shape = p.shape
        elif p.shape != shape:
            raise ValueError(f"renorm: part {i} has shape {list(p.shape)}, part 0 has "
                             f"{list(shape)}")
        Q.append(np.array(p, dtype=np.float64, copy=True))
    return _renorm_owned(Q, k, "renorm")


def _renorm_owned(Q, k, name):
    """:func:`renorm` on a list of float64 arrays it may overwrite (no checks)."""
    shape = Q[0].shape
    M = np.zeros((k,) + shape)
    Q = [q for q in Q if q.any()] or [Q[0]]
    with np.errstate(over="ignore", invalid="ignore"):
        for c in range(k):
            if not Q:
                break
            for _ in range(2 if c == 0 else 1):
                _vec_sum(Q)
            M[c] = Q.pop(0)
            Q = [q for q in Q if q.any()]
        if not np.all(np.isfinite(M)):
            raise ValueError(f"{name}: the sum overflows float64 (a component is "
                             f"{M[~np.isfinite(M)][0]!r})")
        if Q:
            acc = np.abs(Q[0])
            for q in Q[1:]:
                acc += np.abs(q)
            if not np.all(np.isfinite(acc)):     # an intermediate sum overflowed
                raise ValueError(f"{name}: the sum overflows float64 (an intermediate "
                                 f"TwoSum overflowed)")
            err = _inflate(acc, len(Q))
        else:
            err = np.zeros(shape)
        _repair(M, name)
    return M, err


def _repair(M, name):
    """Merge overlapping neighbours of M in place by top-down TwoSum passes (exact),
    until no pair overlaps; a bounded loop whose result is checked."""
    k = M.shape[0]
    if k == 1:
        return
    for _ in range(3 * k + 4):
        bad = _nonoverlap_violations(M)
        if not bad.any():
            return
        idx = np.nonzero(bad)
        sub = M[(slice(None),) + idx]            # (k, nbad): only the overlapping entries
        for c in range(k - 1):
            sub[c], sub[c + 1] = _two_sum(sub[c], sub[c + 1])
        # a zero above a nonzero: move the nonzero up (TwoSum(0, x) = (x, 0) did that)
        M[(slice(None),) + idx] = sub
    raise RuntimeError(f"{name}: components still overlap after renormalisation passes "
                       f"(internal error)")


# ----------------------------------------------------------------------------- splitting
def beta_for(n: int) -> int:
    """Bits per weight slice for inner dimension n: half of 53 - ceil(log2 n), rounded
    down (the data slices get the other half, :func:`betas`)."""
    return betas(n)[0]


def betas(n: int) -> tuple:
    """(beta_a, beta_x): bits per slice of the weight and of the data, with
    n 2^(beta_a + beta_x) <= 2^53 so that every slice product is exact; an odd bit goes
    to the data, which has more bits to cover (53 k against the weight's 53)."""
    if n < 1:
        raise ValueError(f"multifloat: inner dimension must be >= 1, got {n}")
    total = 53 - max(0, math.ceil(math.log2(n)))
    return total // 2, total - total // 2


def _extract(R, sigma):
    """q = RN(R + sigma) - sigma, R -= q (in place), for sigma = 1.5 2^s and
    |R| <= 2^(s-1): sigma + R lies in [2^s, 2^(s+1)), one binade whose grid is
    u = 2^(s-52), so q is R rounded to the nearest multiple of u (|R - q| <= u/2, ties
    to even), the subtraction of sigma is exact (Sterbenz) and so is R - q (a multiple
    of ulp(R) no larger than u/2).  Rump-Ogita-Oishi's ExtractScalar with the 1.5 factor
    that keeps the sum in one binade (with sigma = 2^s the grid doubles above sigma and
    the remainder could reach u)."""
    q = R + sigma
    q -= sigma
    R -= q
    return q


def _sigma_exp(beta: int, i: int) -> int:
    """s with sigma = 1.5 2^s extracting slice i of width beta: grid 2^-beta(i+1) =
    2^(s-52)."""
    return 52 - beta * (i + 1)


@dataclass
class RowSlices:
    """The Ozaki slices of a float64 matrix A (shape (..., m, n)) by rows, made by
    :func:`split_rows` and extended on demand by :func:`matmul`.

    ``exps``: the row exponents e_r (ints: |A[r]| < 2^e_r, 0 for zero rows); the scaled
    slices ``slices[i]`` hold integer multiples of 2^-beta(i+1) with |entry| <= 2^-beta i
    (half that for i >= 1: each remainder is at most half a unit); ``rem`` the exact
    remainder A 2^-e_r - sum(slices); ``norm1[i]`` an upper bound of the row 1-norms of
    slice i (shape (..., m)); ``amax[i]`` the largest |entry| of slice i."""
    shape: tuple
    n: int
    beta: int
    exps: np.ndarray
    rownz: np.ndarray
    scaled_norm1: np.ndarray
    rem: np.ndarray
    slices: list = field(default_factory=list)
    norm1: list = field(default_factory=list)
    amax: list = field(default_factory=list)
    cols: list = field(default_factory=list)
    rem_norm1: np.ndarray = None
    rem_zero: bool = False
    transposed: bool = False
    stacks: dict = field(default_factory=dict)
    a: np.ndarray = None         # the matrix itself (rows as sliced), for |A| bounds

    def stacked(self, idx: tuple) -> np.ndarray:
        """The slices ``idx`` stacked along the rows (one BLAS call for all of them)."""
        st = self.stacks.get(idx)
        if st is None:
            st = self.slices[idx[0]] if len(idx) == 1 else \
                np.concatenate([self.slices[i] for i in idx], axis=-2)
            self.stacks[idx] = st
        return st

    def ensure(self, count: int) -> None:
        """Extract slices until there are ``count`` of them (or the remainder is zero)."""
        while len(self.slices) < count and not self.rem_zero:
            i = len(self.slices)
            sigma = 1.5 * 2.0 ** _sigma_exp(self.beta, i)
            q = _extract(self.rem, sigma)
            self.slices.append(q)
            aq = np.abs(q)
            self.norm1.append(_inflate(aq.sum(axis=-1), self.n))
            self.amax.append(float(aq.max()) if aq.size else 0.0)
            cols = None
            if q.ndim == 2:
                used = np.nonzero(aq.any(axis=0))[0]
                if used.size * 2 <= self.n:
                    cols = used
            self.cols.append(cols)
            self._update_rem()

    def _update_rem(self):
        ar = np.abs(self.rem)
        self.rem_zero = not ar.any()
        self.rem_norm1 = _inflate(ar.sum(axis=-1), self.n)


def split_rows(A) -> RowSlices:
    """The slices of the float64 matrix ``A`` (shape (..., m, n)) for :func:`matmul`
    (``A @ X``): computed once per weight, reused by every call that passes them."""
    A = _finite("split_rows", "A", A)
    if A.ndim < 2:
        raise ValueError(f"split_rows: A must have rank >= 2 (..., m, n), got shape "
                         f"{list(A.shape)}")
    n = A.shape[-1]
    beta = beta_for(n)
    rowmax = np.max(np.abs(A), axis=-1) if n else np.zeros(A.shape[:-1])
    exps = np.frexp(rowmax)[1].astype(np.int64)          # rowmax < 2^e (0 for zero rows)
    rownz = rowmax > 0
    # ldexp by -e is exact except where an entry falls below 2^-1022 after scaling: then
    # it loses at most 2^-1075 (scaled), which the underflow term of matmul covers.
    rem = np.ldexp(A, -exps[..., None])
    s = RowSlices(shape=A.shape, n=n, beta=beta, exps=exps, rownz=rownz,
                  scaled_norm1=_inflate(np.abs(rem).sum(axis=-1), n), rem=rem, a=A)
    s._update_rem()
    return s


def split_cols(A) -> RowSlices:
    """The slices of ``A`` (shape (..., n, m)) by columns, for :func:`matmul_left`
    (``X @ A``): the row slices of A's transpose."""
    A = _finite("split_cols", "A", A)
    if A.ndim < 2:
        raise ValueError(f"split_cols: A must have rank >= 2 (..., n, m), got shape "
                         f"{list(A.shape)}")
    s = split_rows(np.swapaxes(A, -1, -2))
    s.transposed = True
    return s


# ----------------------------------------------------------------------------- matmul
def bits_kept(k: int) -> int:
    """The level L (bits below |A||X|'s scale) down to which :func:`matmul` keeps the
    product: skipped and inexact parts are bounded by about 2^-L n max|A_r| max|X_c|."""
    return 53 * k - 5


@dataclass
class _Plan:
    beta: int          # bits per weight slice
    beta_x: int        # bits per data slice
    J: list            # per A slice i: X slices paired exactly with it
    tail: list         # per A slice i: True if A_i @ (X remainder after J_i slices) is computed
    sa: int            # A slices used
    Jmax: int


def _plan(S: RowSlices, L: int, n: int, kx: int = 3) -> _Plan:
    """Which slice products to compute.  Scaled |A_i| <= 2^-beta_a i and the data's
    remainder after J slices is below kx/2 2^-beta_x J of its column scale: the product
    A_i @ (remainder) is below ratio_i kx/2 2^-beta_x J times the row's 1-norm, with
    ratio_i the largest ratio of slice i's row 1-norms to A's.  Skipping it costs that
    much; computing it in plain float64 costs gamma_n times that (and one product).  The
    budget 2^-L is shared: equal shares first, then what is left buys fewer products.  The
    plan only chooses; the bounds added to err are computed from the actual slices."""
    beta, beta_x = S.beta, betas(n)[1]
    # A slices: until the remainder is zero or its whole contribution (|rem| <= 2^-beta s
    # / 2 times |X| < 1, n terms) is below 2^-L n / 4
    sa_max = max(1, math.ceil((L + 2) / beta))
    S.ensure(sa_max)
    sa = min(len(S.slices), sa_max)
    while sa > 1 and S.amax[sa - 1] == 0.0:
        sa -= 1                      # trailing all-zero slices (exactly representable A)
    base = np.where(S.scaled_norm1 > 0, S.scaled_norm1, 1.0)
    gam = 1.01 * n * _U + 2.0 ** -60
    budget = 2.0 ** -L
    # per slice i the options (products, estimated bound relative to the row's 1-norm):
    # J exact products and the remainder skipped, or J + 1 with the remainder's product
    # in float64; the data remainder after J slices is about kx/2 2^-beta_x J
    options = []
    for i in range(sa):
        r = float(np.max(S.norm1[i] / base)) if S.norm1[i].size else 0.0
        opts = []
        for J in range(0, math.ceil((L + 64) / beta_x) + 1):
            t = 1.0 if J == 0 else max(kx, 2) / 2 * 2.0 ** (-beta_x * J)
            opts.append((J, J, False, r * t))
            opts.append((J + 1, J, True, r * t * gam))
        opts.sort(key=lambda o: (o[0], o[3]))
        # keep the Pareto front: fewer products, larger bound
        front = []
        for o in opts:
            if not front or o[3] < front[-1][3]:
                front.append(o)
        options.append(front)
    # start from an equal share, then spend what is left on fewer products
    pick = []
    for front in options:
        ok = [o for o in front if o[3] <= budget / sa]
        pick.append(ok[0] if ok else front[-1])
    changed = True
    while changed:
        changed = False
        left = budget - sum(o[3] for o in pick)
        for i, front in enumerate(options):
            cheaper = [o for o in front if o[0] < pick[i][0] and o[3] - pick[i][3] <= left]
            if cheaper:
                pick[i] = cheaper[0]
                changed = True
                break
    J = [o[1] for o in pick]
    tail = [o[2] for o in pick]
    return _Plan(beta=beta, beta_x=beta_x, J=J, tail=tail, sa=sa, Jmax=max(J) if J else 0)


def matmul(A, X, k: int, *, A_slices: RowSlices | None = None):
    """``(M, err)``: the product ``A @ X`` of a float64 matrix A (shape (..., m, n)) and a
    multi-float X (shape (kx, ..., n, p), numpy matmul broadcasting of the leading axes)
    as a k-component multi-float M (shape (k, ..., m, p)) with err >= |A X - sum(M)|
    elementwise.  ``A_slices``: :func:`split_rows` of A, to reuse a weight's slices."""
    S, X = _operands("matmul", A, X, k, A_slices, left=False)
    return _product(S, X, int(k), "matmul")


def matmul_left(X, A, k: int, *, A_slices: RowSlices | None = None):
    """``(M, err)``: the product ``X @ A`` of a multi-float X (shape (kx, ..., p, n)) and a
    float64 matrix A (shape (..., n, m)), M of shape (k, ..., p, m) and err >= |X A -
    sum(M)|.  ``A_slices``: :func:`split_cols` of A."""
    S, X = _operands("matmul_left", A, X, k, A_slices, left=True)
    M, err = _product(S, np.swapaxes(X, -1, -2), int(k), "matmul_left")
    # transposed views, not copies: a convolution transposes its product back to
    # (channels, positions), which is then the contiguous layout again (resnet18 224x224:
    # two copies of every conv output, ~0.5 s CPU per sample, saved)
    return np.swapaxes(M, -1, -2), np.swapaxes(err, -1, -2)


def _operands(name, A, X, k, S, left: bool):
    """Checked (slices, X) of a product; ``left``: X @ A (slices of A's columns)."""
    if not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"{name}: k must be a positive int, got {k!r}")
    if S is None:
        S = split_cols(A) if left else split_rows(A)
    elif A is not None:
        shape = np.shape(A)
        if left:
            shape = tuple(shape[:-2]) + tuple(shape[-1:]) + tuple(shape[-2:-1])
        if tuple(shape) != tuple(S.shape):
            raise ValueError(f"{name}: A has shape {list(np.shape(A))} but A_slices were "
                             f"made from shape {list(S.shape)}{' (transposed)' if left else ''}")
    if S.transposed != left:
        made = "split_cols (for matmul_left)" if S.transposed else "split_rows (for matmul)"
        use = "split_cols(A) for X @ A" if left else "split_rows(A) for A @ X"
        raise ValueError(f"{name}: A_slices come from {made}; use {use}")
    X = _finite(name, "X", X)
    dims = "(k, ..., p, n)" if left else "(k, ..., n, p)"
    if X.ndim < 3:
        raise ValueError(f"{name}: X must be a multi-float of shape {dims}, got "
                         f"{list(X.shape)}")
    if X.shape[-1 if left else -2] != S.n:
        raise ValueError(f"{name}: contracted dimensions differ: A{'^T' if left else ''} is "
                         f"{list(S.shape)}, X components are {list(X.shape[1:])}")
    return S, X


class _Overlap(Exception):
    """A data slice has more than beta_x bits (the multi-float's components overlap)."""


#: data columns per chunk: about CHUNK_ELEMS entries of X (n x columns) so that the
#: elementwise work of a chunk (slicing, summation) stays in the core's cache
CHUNK_ELEMS = 1 << 18
#: chunks narrower than this many columns multiply all data slices of a weight slice at once
NARROW = 256


def _product(S: RowSlices, X, k: int, name: str):
    """A @ X for row slices S and a multi-float X (kx, ..., n, p).  Leading axes of X
    that the weight does not have (a batch of samples over one weight, or over its
    groups) are moved into the columns first: one wide product instead of many narrow
    ones."""
    B = tuple(S.shape[:-2])
    L = tuple(X.shape[1:-2])
    nf = len(L) - len(B)
    if nf <= 0 or L[nf:] != B:
        return _product_cols(S, X, k, name)
    F = L[:nf]
    kx, n, p = X.shape[0], X.shape[-2], X.shape[-1]
    f = math.prod(F)
    # (kx, F.., B.., n, p) -> (kx, B.., n, F.., p) -> (kx, B.., n, f p)
    perm = (0,) + tuple(range(1 + nf, 1 + len(L))) + (1 + len(L),) + \
        tuple(range(1, 1 + nf)) + (2 + len(L),)
    Xf = np.transpose(X, perm).reshape((kx,) + B + (n, f * p))
    M, err = _product_cols(S, Xf, k, name)
    m = S.shape[-2]
    M = M.reshape((k,) + B + (m,) + F + (p,))
    err = err.reshape(B + (m,) + F + (p,))
    nb = len(B)
    # back: (k, B.., m, F.., p) -> (k, F.., B.., m, p)
    permM = (0,) + tuple(range(2 + nb, 2 + nb + nf)) + tuple(range(1, 1 + nb)) + \
        (1 + nb, 2 + nb + nf)
    perme = tuple(range(1 + nb, 1 + nb + nf)) + tuple(range(nb)) + (nb, 1 + nb + nf)
    return (np.ascontiguousarray(np.transpose(M, permM)),
            np.ascontiguousarray(np.transpose(err, perme)))


def _product_cols(S: RowSlices, X, k: int, name: str):
    """A @ X, column chunk by chunk (every step is per column, so the chunks are
    independent)."""
    n = S.n
    kx = X.shape[0]
    plan = _plan(S, bits_kept(k), n, kx)
    S.ensure(plan.sa)
    if len(S.slices) < plan.sa:
        raise RuntimeError(f"{name}: the plan uses {plan.sa} weight slices, there are "
                           f"{len(S.slices)} (internal error)")
    lead = X.shape[1:-2]
    p = X.shape[-1]
    out_lead = np.broadcast_shapes(S.shape[:-2], lead)
    m = S.shape[-2]
    M = np.empty((k,) + out_lead + (m, p))
    err = np.empty(out_lead + (m, p))
    width = max(16, CHUNK_ELEMS // max(n * max(1, math.prod(lead)), 1))
    bounds = []
    c0 = 0
    while c0 < p:
        c1 = c0 + width if p - (c0 + width) >= width // 2 else p
        bounds.append((c0, c1))
        c0 = c1
    wmax = max((c1 - c0 for c0, c1 in bounds), default=0)
    # work arrays reused by every chunk (fresh large arrays cost page faults each time)
    ntail = len({plan.J[i] for i in range(plan.sa) if plan.tail[i]})
    # narrow chunks (few columns: BLAS runs below speed) put the data slices side by side
    # along the columns, so one product per weight slice covers all its data slices
    narrow = wmax < NARROW
    J1 = max(plan.Jmax, 1)
    work = (np.empty((kx,) + lead + (n, wmax)),
            np.empty(lead + (n, J1, wmax)) if narrow else np.empty((J1,) + lead + (n, wmax)),
            np.empty((max(ntail, 1),) + lead + (n, wmax)), narrow,
            np.empty(lead + (n, wmax)) if kx > 1 else None)
    for c0, c1 in bounds:
        Xc = X[..., c0:c1]
        try:
            Mc, ec = _product_chunk(S, Xc, k, plan, name, work)
        except _Overlap:
            # components that overlap (not renormalised) made a data slice too wide for
            # an exact product: renormalise this chunk (exactly, or with its error
            # carried through |A|) and run it again
            Xr, ex = _renorm_owned([Xc[t].copy() for t in range(kx)], kx, name)
            try:
                Mc, ec = _product_chunk(S, Xr, k, plan, name, work)
            except _Overlap:
                raise RuntimeError(f"{name}: data slices too wide after renormalisation "
                                   f"(internal error)") from None
            if ex.any():
                ec = _inflate(ec + abs_matmul_up(np.abs(S.a), ex), 2)
        M[..., c0:c1] = Mc
        err[..., c0:c1] = ec
    return M, err


def _pow2(e):
    """2.0 ** e for an int array with -1022 <= e <= 1023 (exact)."""
    return np.ldexp(1.0, e)


def _absmax(x, axis=None, keepdims=False):
    """max |x| without a temporary |x| array (two read-only reductions)."""
    return np.maximum(np.max(x, axis=axis, keepdims=keepdims),
                      -np.min(x, axis=axis, keepdims=keepdims))


def _product_chunk(S: RowSlices, X, k: int, plan: _Plan, name: str, work):
    n = S.n
    kx = X.shape[0]
    beta, bx = plan.beta, plan.beta_x
    Jmax = plan.Jmax
    lead = X.shape[1:-2]
    p = X.shape[-1]

    # --- X: per-column exponent e_c with sum_t |X_t| < 2^e_c in every column: from the
    # column maxima of each component (their sum bounds every entry's sum); the float sum
    # is within kx u of the exact one and 2^-40 covers that
    cm = [_absmax(X[t], axis=-2, keepdims=True) if n else
          np.zeros(lead + (1, p)) for t in range(kx)]
    colsum = cm[0].copy()
    for t in range(1, kx):
        colsum += cm[t]
    cexp = np.frexp(colsum * (1.0 + 2.0 ** -40))[1].astype(np.int64)
    colnz = colsum > 0
    cexp = np.where(colnz, cexp, 0)
    # Scale the columns by 2^-e_c (|X| < 1 after): a product by the power of two where
    # it is a float64 (exact unless an entry falls below 2^-1022: then at most 2^-1075 is
    # lost, the eta term below), ldexp beyond.
    R = [w[..., :p] for w in work[0]]
    with np.errstate(under="ignore"):
        if int(cexp.min()) >= -1022 and int(cexp.max()) <= 1022:
            inv = _pow2(-cexp)
            for t in range(kx):
                np.multiply(X[t], inv, out=R[t])
        else:
            for t in range(kx):
                R[t][...] = np.ldexp(X[t], -cexp)
    # a priori bounds of each component's remainder (scaled, RN is monotone): 1 for the
    # leading one, the largest entry for the others (no non-overlap assumed)
    with np.errstate(under="ignore"):
        bnd = [1.0] + [float(np.max(np.ldexp(cm[t], -cexp))) if cm[t].size else 0.0
                       for t in range(1, kx)]

    narrow = work[3]
    XB = work[1][..., :p]

    def slot(j):
        return XB[..., j, :] if narrow else XB[j]
    xunits = []                     # per slice: an int N with |X_j| <= N u_j
    tb = []                         # per J: a bound of |X - sum_{j<J} X_j| (scaled)
    tails = {}
    tail_js = sorted({plan.J[i] for i in range(plan.sa) if plan.tail[i]})
    for j in range(Jmax + 1):
        # |X| < 1; then each R_t <= bnd[t] (fsum is correctly rounded: 2^-50 covers it)
        tb.append(1.0 if j == 0 else math.fsum(bnd) * (1.0 + 2.0 ** -50))
        if j in tail_js:
            V = work[2][tail_js.index(j)][..., :p]
            np.add(R[kx - 1], R[kx - 2], out=V) if kx > 1 else np.copyto(V, R[0])
            for t in range(kx - 3, -1, -1):
                V += R[t]
            tails[j] = V
        if j == Jmax:
            break
        uj = 2.0 ** (-bx * (j + 1))
        sigma = 1.5 * 2.0 ** _sigma_exp(bx, j)
        units = 0
        out = slot(j)
        first = True
        for t in range(kx):
            if bnd[t] < uj / 2:       # RN rounds it to 0: the extraction would give zeros
                continue
            # q = RN(R + sigma) - sigma, R -= q (see _extract), q added into the slice:
            # exact, multiples of uj whose sum the budget below bounds
            if first:
                q = np.add(R[t], sigma, out=out)
                q -= sigma
                R[t] -= q
                first = False
            else:
                q = np.add(R[t], sigma, out=work[4][..., :p])
                q -= sigma
                R[t] -= q
                out += q
            # q is R_t rounded to a multiple of uj, so |q| <= bnd rounded up to the grid
            units += math.ceil(bnd[t] / uj)
            bnd[t] = uj / 2
        if first:
            out[...] = 0.0
            xunits.append(0)
            continue
        if units > 2 ** bx:          # the a priori sum is loose (3 active comps): measure
            units = int(float(_absmax(out)) / uj) if out.size else 0
            if units > 2 ** bx:      # only with overlapping components
                raise _Overlap
        xunits.append(units)

    # --- exact products.  Entries of A_i @ X_j and all their partial sums are integer
    # multiples of U = 2^-e, e = beta_a (i+1) + beta_x (j+1) (times 2^e_c), below
    # n Na Nx U; products go into accumulators whose sums stay exact: an accumulator
    # counts its bound in units of its finest U, and takes a product while that stays
    # <= 2^53 (then every partial sum is an integer below 2^53 times that unit).  The
    # dense weight slices that meet X_j are stacked into one product.
    acc_list = []                   # [e (finest unit 2^-e), bound used (int), array]
    parts_tail = []
    cap = 2 ** 53
    na = [int(S.amax[i] / 2.0 ** (-beta * (i + 1))) for i in range(plan.sa)]  # exact
    m = S.shape[-2]

    def add(i, j, val):
        e = beta * (i + 1) + bx * (j + 1)
        cost = n * na[i] * xunits[j]
        if cost > cap:
            raise RuntimeError(f"{name}: slice product ({i}, {j}) would not be "
                               f"exact (internal error: {cost} > 2^53)")
        for a in acc_list:
            if abs(a[0] - e) > 2:
                continue
            fine = max(a[0], e)
            used = (a[1] << (fine - a[0])) + (cost << (fine - e))
            if used <= cap:
                a[2] += val
                a[0], a[1] = fine, used
                return
        acc_list.append([e, cost, val.copy()])

    if narrow:
        XBf = XB.reshape(lead + (n, XB.shape[-2] * p))
        for i in range(plan.sa):
            Ji, cols = plan.J[i], S.cols[i]
            if Ji == 0 or na[i] == 0:
                continue
            if cols is None:
                prod = S.slices[i] @ XBf[..., :Ji * p]
            else:
                prod = S.slices[i][:, cols] @ XBf[..., cols, :Ji * p]
            prod = prod.reshape(prod.shape[:-1] + (Ji, p))
            for j in range(Ji):
                if xunits[j]:
                    add(i, j, prod[..., j, :])
    for j in range(0 if narrow else Jmax):
        if xunits[j] == 0:
            continue
        Xj = XB[j]
        dense = tuple(i for i in range(plan.sa)
                      if plan.J[i] > j and na[i] > 0 and S.cols[i] is None)
        if dense:
            prod = S.stacked(dense) @ Xj
            for r, i in enumerate(dense):
                add(i, j, prod[..., r * m:(r + 1) * m, :])
        for i in range(plan.sa):
            cols = S.cols[i]
            if plan.J[i] > j and na[i] > 0 and cols is not None:
                add(i, j, S.slices[i][:, cols] @ Xj[..., cols, :])
    for i in range(plan.sa):
        if plan.tail[i] and na[i] > 0:
            V, cols = tails[plan.J[i]], S.cols[i]
            parts_tail.append(S.slices[i] @ V if cols is None else
                              S.slices[i][:, cols] @ V[..., cols, :])
    acc_list.sort(key=lambda a: a[0])
    # the tails are float64 products already (their rounding is bounded below): summed in
    # float64 too, one part for renorm instead of one per slice; that sum's own rounding
    # is at most ntails u times the sum of |tails| (bounded below as well)
    if len(parts_tail) > 1:
        tsum = parts_tail[0]
        for t in parts_tail[1:]:
            tsum += t
        parts_tail = [tsum]
    parts = [a[2] for a in acc_list] + parts_tail
    out_shape = np.broadcast_shapes(S.shape[:-2], lead) + (S.shape[-2], p)
    if not parts:
        parts = [np.zeros(out_shape)]
    parts = [np.broadcast_to(q, out_shape).copy() if q.shape != out_shape else q
             for q in parts]
    Ms, err_s = _renorm_owned(parts, k, name)

    # --- a priori bounds, in the units of the rows' scaled A and the columns' 2^e_c:
    # sum over the A slices of |A_i| |X remainder| (skipped) or gamma_n times it (tail
    # computed in float64), |A remainder| |X|, and A's scaling loss (2^-1075 per entry).
    # gamma_n = n u / (1 - n u) <= 1.01 n u for n u <= 0.01; the tail's own sum of kx
    # components adds gamma_kx.
    gam = (1.01 * n + 2 * kx + 4) * _U
    ntails = sum(1 for i in range(plan.sa) if plan.tail[i] and na[i] > 0)
    # |tail_i| <= (1 + gamma) |A_i| |V| <= 2 norm1_i tb: the float sum of ntails of them
    # is off by at most (ntails - 1) u (1 + ...) times their sum
    tsum_f = 2 * (ntails + 1) * _U if ntails > 1 else 0.0
    rowterm = np.zeros(S.shape[:-1])
    for i in range(plan.sa):
        f = tb[plan.J[i]]
        if plan.tail[i]:
            f *= gam + tsum_f
        rowterm = rowterm + S.norm1[i] * f
    for i in range(plan.sa, len(S.slices)):   # extracted slices a smaller k leaves out
        rowterm = rowterm + S.norm1[i]
    rowterm = rowterm + S.rem_norm1 + (n + 1) * _TINY
    rowterm = _inflate(rowterm, 2 * len(S.slices) + 4)
    # underflow in the tail products (each term at most 2^-1075) and, when the columns
    # were scaled, their scaling loss (at most 2^-1075 per entry and component)
    eta = (n * (kx + 2 + plan.sa) + 16) * _TINY
    rowterm = np.where(S.rownz, rowterm, 0.0)
    E = (rowterm + np.where(S.rownz, eta, 0.0))[..., :, None] * colnz
    err_s = _inflate(err_s + E, 2)

    # --- back to the unscaled values: multiply by 2^(e_r (+ e_c when scaled))
    shift = S.exps[..., :, None] + cexp
    with np.errstate(over="ignore", under="ignore"):
        M = np.ldexp(Ms, shift)
        err = np.ldexp(err_s, shift)
    if not np.all(np.isfinite(M)):
        raise ValueError(f"{name}: the product overflows float64")
    small = np.abs(M) < _MIN_NORMAL
    if small.any():
        # a component that became subnormal was rounded (at most 2^-1075 lost)
        back = np.ldexp(M, -shift)
        lost = np.count_nonzero((back != Ms) & small, axis=0)
        if lost.any():
            # a subnormal err takes lost 2^-1074 exactly (one grid); a normal one could
            # absorb them, so it grows by 2^-45 relative first (>= 127 2^-1074)
            err = np.where(lost > 0, err * (1.0 + 2.0 ** -45) + lost * _TINY, err)
            _repair(M, name)
    # ldexp rounds to nearest only when the result is subnormal: at most 2^-1075 lost
    err = np.where((err_s > 0) & (err <= _MIN_NORMAL), err + _TINY, err)
    return M, err


# ----------------------------------------------------------------------------- radius
def abs_matmul_up(P, Q):
    """An upper bound of ``P @ Q`` for nonnegative float64 P, Q (numpy matmul rules):
    ``abs_matmul_up(|A|, R)`` bounds |A| R, ``abs_matmul_up(R, |A|)`` bounds R |A|.

    The product runs in numpy (BLAS, any order, FMA or not) in round to nearest: for
    nonnegative terms the computed C satisfies exact <= C / (1 - gamma_n) plus n 2^-1075
    for products that fall below 2^-1022; the result is C (1 + (4n + 8) 2^-53) + (n + 1)
    2^-1074, the underflow term left out when the smallest positive entries' product is
    normal (no term can underflow then)."""
    P = _finite("abs_matmul_up", "P", P)
    Q = _finite("abs_matmul_up", "Q", Q)
    if P.ndim == 0 or Q.ndim == 0:
        raise ValueError("abs_matmul_up: operands must have rank >= 1")
    for what, t in (("P", P), ("Q", Q)):
        if t.size and np.min(t) < 0:
            bad = np.argwhere(t < 0)[0]
            raise ValueError(f"abs_matmul_up: operands must be nonnegative (absolute values "
                             f"and radii); {what} has {t[tuple(bad)]!r} at index "
                             f"{tuple(int(v) for v in bad)}")
    n = P.shape[-1]
    with np.errstate(over="ignore"):
        C = np.matmul(P, Q)
        ub = _inflate(C, n)
    if P.size and Q.size:
        pmin = np.min(P, initial=np.inf, where=P > 0)
        qmin = np.min(Q, initial=np.inf, where=Q > 0)
        if np.isfinite(pmin) and np.isfinite(qmin) and float(pmin) * float(qmin) < _MIN_NORMAL:
            ub = ub + (n + 1) * _TINY
    return ub
