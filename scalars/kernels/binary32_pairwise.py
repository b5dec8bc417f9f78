"""Pairwise-order binary32 dot products in hardware float32, vectorised across outputs.

The order is the one of the ``<fmt>/pairwise`` contexts (:func:`scalars.kernels.binary_format.
sum_pairwise` and ``matmul_pairwise``): the K rounded products ``RN(a_k*b_k)`` of an
output are added level by level, adjacent pairs (0,1), (2,3), ... with one rounding each
and an odd last entry carried up unchanged, until one is left.  At level l, entry t is the
sum over the leaves ``[t*2^l, min((t+1)*2^l, K))``, so the tree depends on K only and is a
recursive split at power-of-two aligned midpoints:

* every aligned block of S = 2^s leaves (S = ``S``) is a complete binary tree, and
* levels >= s are the same pairwise rule applied to the ceil(K/S) block values, the last
  (a partial block of K mod S leaves) being the pairwise tree of those leaves.

So a micro-kernel (LLVM IR with explicit <16 x float> vectors, like
:mod:`scalars.kernels.binary32_matmul`) computes the complete-block trees of R rows x 16 columns,
fully unrolled in registers: leaf = ``a[i, k] * panel[k]`` (one broadcast, one multiply),
node = ``left + right``; no fast-math flags, so LLVM neither contracts nor reassociates.
The partial block and the levels above the blocks run level by level on the R x 16 tile of
block values.  Each output keeps exactly its own tree; only which outputs share vector
lanes changes, so the results are bit-identical to the emulated path.  NaN outputs are
recomputed by that path (LLVM may swap a multiply's operands, which decides which of two
NaN payloads propagates), and a thread with flush-to-zero on (the probe of
:mod:`scalars.kernels.binary32_hw`) gets the emulated path for the whole product.

The kernel takes float32 C arrays and writes float32 (one compiled signature); the driver
:func:`matmul32_pairwise` also writes a float64 ``out`` (widened exactly), and
:func:`matmul` accepts float64 arrays of binary32 values (checked bit for bit).
"""
from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from . import binary32_hw as H
from . import binary_format as K
from .. import formats
from .binary32_matmul import R, W   # rows of A per micro-kernel call, panel columns (lanes)
from .binary32_matmul import pack_edge_rows, pack_panel, row_pointers, vector_ir

S = 16        # leaves per complete block (a power of two), unrolled in registers

_jit = numba.njit(cache=True, error_model="numpy", nogil=True)
_SPEC = formats.binary32.spec


@intrinsic
def _micro_blocks(typingctx, a, panel, sums, i0, k0, nblk):
    """sums[t, r*W:(r+1)*W] = the pairwise tree of the S products a[i0+r, kb+l] *
    panel[kb+l, :], l = 0..S-1, kb = k0 + t*S, for t < nblk and r < R (a: M x K, panel:
    K x W, sums: (>= nblk) x (R*W), all float32 C arrays).  The S panel rows of a block
    are loaded once into registers and shared by the R rows' trees."""
    sig = types.void(a, panel, sums, i0, k0, nblk)

    def codegen(context, builder, signature, args):
        aty, pty, sty = signature.args[:3]
        A = context.make_array(aty)(context, builder, args[0])
        P = context.make_array(pty)(context, builder, args[1])
        Sm = context.make_array(sty)(context, builder, args[2])
        i0v, k0v, nblkv = args[3], args[4], args[5]
        vt, c64, splat = vector_ir(builder)
        rows = row_pointers(builder, A, i0v)
        with cgutils.for_range(builder, nblkv) as loop:
            t = loop.index
            kb = builder.add(k0v, builder.mul(t, c64(S)))
            pbase = builder.gep(P.data, [builder.mul(kb, c64(W))])
            pv = [builder.load(builder.bitcast(builder.gep(pbase, [c64(l * W)]),
                                               vt.as_pointer()), align=4)
                  for l in range(S)]
            for r in range(R):
                arow = builder.gep(rows[r], [kb])

                def tree(lo, size):
                    if size == 1:
                        av = splat(builder.load(builder.gep(arow, [c64(lo)])))
                        return builder.fmul(av, pv[lo])
                    left = tree(lo, size // 2)
                    right = tree(lo + size // 2, size // 2)
                    return builder.fadd(left, right)

                v = tree(0, S)
                dst = builder.gep(Sm.data, [builder.mul(builder.add(builder.mul(t, c64(R)),
                                                                    c64(r)), c64(W))])
                builder.store(v, builder.bitcast(dst, vt.as_pointer()), align=4)
        return context.get_dummy_value()
    return sig, codegen


@intrinsic
def _add_tiles(typingctx, buf, d, i, j):
    """buf[d] = buf[i] + buf[j] for rows of R*W float32 of the 2-d C array ``buf`` (explicit
    <16 x float> loads, adds and stores: the operands may be the destination)."""
    sig = types.void(buf, d, i, j)

    def codegen(context, builder, signature, args):
        Bf = context.make_array(signature.args[0])(context, builder, args[0])
        i64 = ir.IntType(64)
        vt = ir.VectorType(ir.FloatType(), W)
        ld = cgutils.unpack_tuple(builder, Bf.shape, 2)[1]

        def vec(row, r):
            p = builder.gep(Bf.data, [builder.add(builder.mul(row, ld), ir.Constant(i64, r * W))])
            return builder.bitcast(p, vt.as_pointer())

        vals = [builder.fadd(builder.load(vec(args[2], r), align=4),
                             builder.load(vec(args[3], r), align=4)) for r in range(R)]
        for r in range(R):
            builder.store(vals[r], vec(args[1], r), align=4)
        return context.get_dummy_value()
    return sig, codegen


@numba.njit(error_model="numpy", nogil=True)
def _levels(buf, m):
    """buf[0] = the pairwise tree of the m entries buf[0 .. m-1] (rows of R x W float32),
    level by level in place (adjacent pairs, odd last carried up)."""
    while m > 1:
        half = m // 2
        for t in range(half):
            _add_tiles(buf, t, 2 * t, 2 * t + 1)
        if m % 2 == 1:
            src, dst = buf[m - 1], buf[half]
            for j in range(R * W):
                dst[j] = src[j]
        m = half + m % 2


@_jit
def _kernel(a, b, out, b_t):
    """out[q] = a[q] @ b[q] in the pairwise order (a (nb, M, K) float32 C; b (nb, K, N), or
    with ``b_t`` (nb, N, K): the weight W of x @ W.T read in place; out (nb, M, N); all
    float32 C arrays: one compiled signature).  Edge tiles are padded to R x W (the
    padding's rows and lanes are discarded; lanes never mix).  Returns whether some
    output is NaN (its bits are then the hardware's, see :func:`matmul32_pairwise`)."""
    nb, M, Kd = a.shape
    N = b.shape[1] if b_t else b.shape[2]
    if Kd == 0:
        for q in range(nb):
            for i in range(M):
                for j in range(N):
                    out[q, i, j] = 0.0
        return False
    nfull = Kd // S
    rem = Kd - nfull * S
    nval = nfull + (1 if rem else 0)
    panel = np.zeros((Kd, W), dtype=np.float32)
    sums = np.empty((nval, R * W), dtype=np.float32)     # block values, R x W each
    part = np.empty((max(rem, 1), R * W), dtype=np.float32)   # partial block's products
    apad = np.zeros((R, Kd), dtype=np.float32)
    Mf = M - M % R
    nan = False
    for q in range(nb):
        aq, bq, oq = a[q], b[q], out[q]
        pack_edge_rows(aq, apad, Mf)
        for j0 in range(0, N, W):
            jw = pack_panel(bq, panel, j0, b_t)
            for i0 in range(0, M, R):
                # twin of binary32_matmul._kernel's edge-row choice: an inline helper slowed the cold compile
                if i0 < Mf:
                    src, s0, ih = aq, i0, R
                else:
                    src, s0, ih = apad, 0, M - Mf
                if nfull:
                    _micro_blocks(src, panel, sums, s0, 0, nfull)
                if rem:
                    kb = nfull * S
                    for l in range(rem):
                        pk = panel[kb + l]
                        for r in range(R):
                            av = src[s0 + r, kb + l]
                            for j in range(W):
                                part[l, r * W + j] = av * pk[j]
                    _levels(part, rem)
                    for j in range(R * W):
                        sums[nfull, j] = part[0, j]
                _levels(sums, nval)
                for r in range(ih):
                    for j in range(jw):
                        v = sums[0, r * W + j]
                        nan |= v != v
                        oq[i0 + r, j0 + j] = v
    return nan


_FIX_CHUNK = 1024    # sparse NaN outputs recomputed per call of the emulated kernel
_FIX_ROWS = 128      # rows per call where NaN outputs are dense


def matmul32_pairwise(a, b, out, b_t):
    """out[q] = a[q] @ b[q] in the pairwise binary32 order: a (nb, M, K) and b (nb, K, N),
    or with ``b_t`` (nb, N, K) (the weight W of x @ W.T read in place), float32 or float64
    arrays of binary32 values (checked bit for bit, ValueError naming the first entry that
    is not); out (nb, M, N) float32 or float64 (the float32 results widened exactly).

    NaN outputs are recomputed by the emulated path (:func:`scalars.kernels.binary_format.
    matmul_pairwise`, float64; :func:`_redo_nans`) so that their bits are that path's:
    LLVM may swap the operands of a vector multiply (it folds the broadcast of ``a`` into
    the instruction), which changes which of two NaNs propagates.  With flush-to-zero on
    in this thread the whole product is computed by the emulated path."""
    a = np.ascontiguousarray(_f32(a, "first operand"))
    b = np.ascontiguousarray(_f32(b, "second operand"))
    if H.flush_to_zero(H.PROBE):
        _emulated(a, b, out, b_t)
        return
    res = out if out.dtype == np.float32 and out.flags.c_contiguous else \
        np.empty(out.shape, dtype=np.float32)
    if _kernel(a, b, res, b_t):
        _redo_nans(a, b, res, b_t)
    if res is not out:
        out[...] = res


def _redo_nans(a, b, res, b_t):
    """res[NaN entries] = the emulated path's values there: each output's row and column
    gathered where NaNs are sparse; whole rows (B converted once per batch entry) where
    they are dense (a NaN operand makes a row or column of NaNs), so the cost stays below
    the emulated path's for those rows."""
    nan = np.isnan(res)
    N = res.shape[2]
    for q in np.flatnonzero(nan.any(axis=(1, 2))):
        m = nan[q]
        rows = np.flatnonzero(m.any(axis=1))
        if 8 * int(m.sum()) < rows.size * N:
            i, j = np.nonzero(m)
            for s in range(0, i.size, _FIX_CHUNK):
                ii, jj = i[s:s + _FIX_CHUNK], j[s:s + _FIX_CHUNK]
                A = a[q, ii, :].astype(np.float64)[:, None, :]
                B = (b[q, jj, :] if b_t else b[q][:, jj].T).astype(np.float64)[:, :, None]
                res[q, ii, jj] = _emulated_block(A, B)[:, 0, 0]
            continue
        Bq = (b[q].T if b_t else b[q]).astype(np.float64)[None]
        for s in range(0, rows.size, _FIX_ROWS):
            rr = rows[s:s + _FIX_ROWS]
            o = _emulated_block(a[q, rr, :].astype(np.float64)[None], Bq)[0]
            res[q, rr, :] = np.where(m[rr], o, res[q, rr, :])


def _emulated_block(A, B):
    """The emulated pairwise kernel on float64 (nb, M, K) x (nb, K, N) arrays."""
    A, B = np.ascontiguousarray(A), np.ascontiguousarray(B)
    o = np.empty((A.shape[0], A.shape[1], B.shape[2]))
    unsafe = np.zeros(o.shape, dtype=np.uint8)
    K.matmul_pairwise(K.FAST, A, B, o, unsafe, _SPEC)
    return o


def _emulated(a, b, out, b_t):
    """The whole product by the emulated path, for a thread whose float32 arithmetic
    flushes subnormals (FTZ/DAZ set by some library; the probe of :mod:`scalars.
    binary32_hw`).  DAZ/FTZ also flush subnormals in float32 <-> float64 conversions, so
    operands and results cross between the formats by their bits."""
    o = _emulated_block(widen_bits(a), widen_bits(np.swapaxes(b, 1, 2) if b_t else b))
    if out.dtype == np.float32:
        out[...] = narrow_bits(o)
    else:
        out[...] = o


def widen_bits(x):
    """float64 C array of the float32 array ``x``, exactly, by integer operations (not
    affected by denormals-are-zero); NaN payloads and signs kept."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    sign = (u >> np.uint64(31)) << np.uint64(63)
    e = (u >> np.uint64(23)) & np.uint64(0xFF)
    m = u & np.uint64(0x7FFFFF)
    e64 = np.where(e == 255, np.uint64(0x7FF), e + np.uint64(1023 - 127))
    out = (sign | (e64 << np.uint64(52)) | (m << np.uint64(29))).view(np.float64)
    sub = e == 0                                  # zeros and subnormals: m * 2^-149
    if sub.any():
        v = m[sub].astype(np.float64) * 2.0 ** -149     # a normal float64 (or 0)
        out[sub] = np.where(sign[sub] != 0, -v, v)
    return out


def narrow_bits(x):
    """float32 array of the float64 array ``x`` of binary32 values, exactly, by integer
    operations (not affected by flush-to-zero)."""
    u = np.ascontiguousarray(x, dtype=np.float64).view(np.uint64)
    sign = ((u >> np.uint64(63)) << np.uint64(31)).astype(np.uint32)
    e = ((u >> np.uint64(52)) & np.uint64(0x7FF)).astype(np.int64)
    m = u & np.uint64((1 << 52) - 1)
    e32 = np.where(e == 0x7FF, 255, np.maximum(e - (1023 - 127), 0))
    m32 = m >> np.uint64(29)
    sub = (e > 0) & (e < 1023 - 126)                # binary32 subnormals
    if sub.any():
        shift = (29 + (1023 - 126) - e[sub]).astype(np.uint64)
        m32[sub] = (m[sub] | np.uint64(1 << 52)) >> shift
    bits = sign | (e32.astype(np.uint32) << np.uint32(23)) | m32.astype(np.uint32)
    return bits.view(np.float32)


def matmul(a, b, out=None, b_t=False):
    """a @ b in the pairwise binary32 order for 3-d operands (see :func:`matmul32_pairwise`);
    returns the float32 (nb, M, N) result unless ``out`` is given."""
    if out is None:
        out = np.empty((np.shape(a)[0], np.shape(a)[1],
                        np.shape(b)[1] if b_t else np.shape(b)[2]), dtype=np.float32)
    matmul32_pairwise(a, b, out, b_t)
    return out


def _f32(x, which):
    """x as float32: float32 as it is, float64 converted where every entry is bit for bit a
    binary32 value (NaNs whose payload float32 cannot carry are refused too)."""
    x = np.asarray(x)
    if x.dtype == np.float32:
        return x
    if x.dtype != np.float64:
        raise TypeError(f"binary32 pairwise matmul: {which} has dtype {x.dtype}, expected "
                        f"float32 or float64")
    if H.flush_to_zero(H.PROBE):       # conversions would flush subnormals: by bits
        f = narrow_bits(x)
        bad = (widen_bits(f).view(np.int64) != x.view(np.int64)).any()
    else:
        f = np.empty(x.shape, dtype=np.float32)
        bad = H.narrow(np.ascontiguousarray(x).reshape(-1), f.reshape(-1))
    if bad:
        same = widen_bits(f).view(np.int64) == x.view(np.int64)
        bad = tuple(int(i) for i in np.argwhere(~same)[0])
        raise ValueError(f"binary32 pairwise matmul: {which}{list(bad)} = {x[bad]!r} is "
                         f"not a binary32 value")
    return f
