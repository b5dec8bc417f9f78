"""Sequential-order binary32 dot products in hardware float32, register- and cache-blocked.

The order is the reference one of :mod:`scalars.binary` (and of
:func:`scalars.kernels.binary_format.matmul_hw`): for every output, ``acc = RN(a0*b0)`` and then
``acc = RN(acc + RN(a_k*b_k))`` for k = 1, 2, ... (or ``acc = fma(a_k, b_k, acc)`` fused).
Every output keeps its own k order; only *which outputs* are computed together changes,
so results are bit-identical to the unblocked kernel.

Blocking: the columns of B are cut into tiles of ``W`` = 16 and each tile is copied into a
contiguous K x 16 panel (one sequential stream, L1/L2 resident); a micro-kernel keeps the
``R x 16`` accumulators of R = 8 rows of A in vector registers for the whole k loop, so the
inner loop is one panel load, R broadcasts and R vector multiply-adds: no accumulator
traffic through memory.  The micro-kernel is written in LLVM IR (a Numba intrinsic) with
explicit <16 x float> vectors, because LLVM does not keep a Numba array of accumulators in
registers.  Multiplication and addition are separate IEEE operations (no fast-math flags,
so LLVM never contracts them into an fma); the fused variant calls ``llvm.fma.v16f32``.
Edge rows and columns are zero-padded to a full tile (the padding's lanes are discarded).
"""
from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

W = 16   # columns per panel (vector lanes of the micro-kernel)
R = 8    # rows of A per micro-kernel call

_jit = numba.njit(cache=True, error_model="numpy", nogil=True)


# LLVM IR pieces shared by the micro-kernels here and in scalars/kernels/binary32_pairwise.py.
def vector_ir(builder):
    """(vt, c64, splat): the <W x float> type, an i64 constant, and a float broadcast to
    all W lanes (insertelement + zero-mask shufflevector) emitted by ``builder``."""
    i32 = ir.IntType(32)
    vt = ir.VectorType(ir.FloatType(), W)
    zero_mask = ir.Constant(ir.VectorType(i32, W), [0] * W)
    undef = ir.Constant(vt, ir.Undefined)

    def c64(v):
        return ir.Constant(ir.IntType(64), v)

    def splat(x):
        v = builder.insert_element(undef, x, ir.Constant(i32, 0))
        return builder.shuffle_vector(v, undef, zero_mask)

    return vt, c64, splat


def row_pointers(builder, A, i0v):
    """Pointers to rows i0 .. i0 + R - 1 of the 2-d C array ``A`` (a numba array struct)."""
    lda = cgutils.unpack_tuple(builder, A.shape, 2)[1]
    return [builder.gep(A.data, [builder.mul(builder.add(i0v, ir.Constant(ir.IntType(64), r)),
                                             lda)])
            for r in range(R)]


def _make_microkernel(fused: bool):
    @intrinsic
    def micro(typingctx, a, panel, out, i0, kd):
        """out (R x W) = sequential dot products of rows i0 .. i0+R-1 of ``a`` (M x K, C
        order) with the K x W ``panel``; kd = K >= 1."""
        sig = types.void(a, panel, out, i0, kd)

        def codegen(context, builder, signature, args):
            aty, pty, oty = signature.args[:3]
            A = context.make_array(aty)(context, builder, args[0])
            P = context.make_array(pty)(context, builder, args[1])
            O = context.make_array(oty)(context, builder, args[2])
            i0v, kdv = args[3], args[4]
            vt, c64, splat = vector_ir(builder)
            rows = row_pointers(builder, A, i0v)
            ldo = cgutils.unpack_tuple(builder, O.shape, 2)[1]

            def load_panel(k):
                p = builder.gep(P.data, [builder.mul(k, c64(W))])
                return builder.load(builder.bitcast(p, vt.as_pointer()), align=4)

            accs = [cgutils.alloca_once(builder, vt) for _ in range(R)]
            if fused:
                fn = cgutils.get_or_insert_function(
                    builder.module, ir.FunctionType(vt, [vt, vt, vt]), "llvm.fma.v16f32")
            b0 = load_panel(c64(0))
            for r in range(R):
                a0 = builder.load(rows[r])
                builder.store(builder.fmul(splat(a0), b0), accs[r])
            with cgutils.for_range_slice(builder, c64(1), kdv, c64(1), inc=True) as (k, _):
                bk = load_panel(k)
                for r in range(R):
                    av = splat(builder.load(builder.gep(rows[r], [k])))
                    c = builder.load(accs[r])
                    if fused:
                        c = builder.call(fn, [av, bk, c])
                    else:
                        c = builder.fadd(c, builder.fmul(av, bk))
                    builder.store(c, accs[r])
            for r in range(R):
                p = builder.gep(O.data, [builder.mul(c64(r), ldo)])
                builder.store(builder.load(accs[r]), builder.bitcast(p, vt.as_pointer()),
                              align=4)
            return context.get_dummy_value()
        return sig, codegen
    return micro


_micro_plain = _make_microkernel(False)
_micro_fused = _make_microkernel(True)


# Panel packing shared by this sequential driver and the pairwise one
# (scalars/kernels/binary32_pairwise.py); they run outside the micro-kernels' loops.  Inlined:
# as compiled functions of their own they made a cold matmul32 compile ~0.2 s slower.
@numba.njit(inline="always")
def pack_edge_rows(aq, apad, Mf):
    """apad[:M - Mf] = aq[Mf:] (the last, partial R-row tile of A, zero-padded)."""
    for r in range(aq.shape[0] - Mf):
        for k in range(aq.shape[1]):
            apad[r, k] = aq[Mf + r, k]


@numba.njit(inline="always")
def pack_panel(bq, panel, j0, b_t):
    """panel[:, :jw] = columns j0 .. j0 + jw of B (rows of ``bq`` with ``b_t``); jw =
    min(W, N - j0) is returned (lanes past it keep stale values, discarded later)."""
    Kd = panel.shape[0]
    if b_t:
        jw = min(panel.shape[1], bq.shape[0] - j0)
        for j in range(jw):
            for k in range(Kd):
                panel[k, j] = bq[j0 + j, k]
    else:
        jw = min(panel.shape[1], bq.shape[1] - j0)
        for k in range(Kd):
            for j in range(jw):
                panel[k, j] = bq[k, j0 + j]
    return jw


@_jit
def matmul32(fused, a, b, out, b_t):
    """out[q] = a[q] @ b[q] in binary32 sequential order (float32 3-d C arrays in, out
    float64 (nb, M, N) holding the float32 results; a (nb, M, K), b (nb, K, N)); with ``b_t`` b is given transposed,
    (nb, N, K) (a weight matrix W of x @ W.T, read in place).  Edge tiles are zero-padded
    to R x W (the padding's products are discarded)."""
    nb, M, Kd = a.shape
    N = b.shape[1] if b_t else b.shape[2]
    if Kd == 0:
        out[:] = 0.0
        return
    panel = np.zeros((Kd, W), dtype=np.float32)
    tile = np.empty((R, W), dtype=np.float32)
    apad = np.zeros((R, Kd), dtype=np.float32)
    Mf = M - M % R
    for q in range(nb):
        aq, bq, oq = a[q], b[q], out[q]
        pack_edge_rows(aq, apad, Mf)
        for j0 in range(0, N, W):
            jw = pack_panel(bq, panel, j0, b_t)
            for i0 in range(0, M, R):
                # written out again in binary32_pairwise._kernel: as an inline helper it slowed the cold compile
                if i0 < Mf:
                    src, s0, ih = aq, i0, R
                else:
                    src, s0, ih = apad, 0, M - Mf
                if fused:
                    _micro_fused(src, panel, tile, s0, Kd)
                else:
                    _micro_plain(src, panel, tile, s0, Kd)
                for r in range(ih):
                    for j in range(jw):
                        oq[i0 + r, j0 + j] = tile[r, j]
