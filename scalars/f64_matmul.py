"""Float64 matmul in a fixed, documented order: one sequential FMA chain per output.

For every output ``C[i, j]`` of ``A (M x K) @ B (K x N)``::

    acc = RN(A[i, 0] * B[0, j])
    acc = fma(A[i, k], B[k, j], acc)        for k = 1, 2, ..., K - 1   (one rounding each)

No K-splitting, no pairwise or tree partial sums: the value of every output depends only on
its own row and column, never on the machine, the BLAS build, the blocking or the thread
count, so the float64 context's matmul is bit-reproducible and can be checked against an
oracle that performs the same chain (gmpy2 at 53 bits, subnormalised).

Vectorised ACROSS outputs: a micro-kernel (LLVM IR through a Numba intrinsic, as in
:mod:`scalars.binary32_matmul`) keeps an ``R x W`` block of accumulators in vector
registers (``<8 x double>``, ``llvm.fma.v8f64``) over the k loop.  B is copied into
contiguous ``K x W`` panels (zero-padded past N), A into ``K x R`` micro-panels (rows of
one k adjacent; zero-padded past M) unless its rows are already adjacent (an F-order A such
as ``g.T``), so the kernel reads both with unit stride whatever the operands' strides.  The
k loop is cut into blocks of ``KC`` for cache reuse; the accumulators are stored into C
between blocks and loaded back, which is exact, so the chain above is unchanged.

``matmul_f64(a, b)`` returns None for the cases it leaves to numpy (non-float64, small
products where the call overhead dominates, K == 0, shapes it does not handle).
"""
from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

R = 8          # rows of A per micro-kernel call
V = 3          # vectors of 8 doubles per row: the tile is R x W outputs
W = 8 * V      # columns per B panel
KC = 256       # k block (A micro-panel KC x R and B panel KC x W stay in L1/L2)
MIN_FLOPS = 1 << 17   # below M*N*K of this, numpy's BLAS call is cheaper than ours

_jit = numba.njit(cache=True, error_model="numpy", nogil=True)


def _make_micro(R: int, V: int):
    """An intrinsic ``micro(a, aks, p, c, ldc, kd, init)`` on raw addresses (int64):
    C[r, j] (r < R, j < 8V; row stride ``ldc`` elements) continues the fma chains of rows
    a[k*aks + r] (k < kd) against the panel p[k*8V + j].  ``init`` != 0 starts the chains
    (acc = a0*b0, one rounding) instead of loading them from C."""
    Wd = 8 * V

    @intrinsic
    def micro(typingctx, a, aks, p, c, ldc, kd, init):
        sig = types.void(types.int64, types.int64, types.int64, types.int64, types.int64,
                         types.int64, types.int64)

        def codegen(context, builder, signature, args):
            a_addr, aks_v, p_addr, c_addr, ldc_v, kd_v, init_v = args
            f64 = ir.DoubleType()
            i32, i64 = ir.IntType(32), ir.IntType(64)
            vt = ir.VectorType(f64, 8)
            dp, vp = f64.as_pointer(), vt.as_pointer()
            undef = ir.Constant(vt, ir.Undefined)
            zmask = ir.Constant(ir.VectorType(i32, 8), [0] * 8)

            def c64(v):
                return ir.Constant(i64, v)

            fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vt, [vt, vt, vt]),
                                                 "llvm.fma.v8f64")
            A = builder.inttoptr(a_addr, dp)
            P = builder.inttoptr(p_addr, dp)
            C = builder.inttoptr(c_addr, dp)

            def splat(x):
                return builder.shuffle_vector(
                    builder.insert_element(undef, x, ir.Constant(i32, 0)), undef, zmask)

            def a_at(krow, r):          # krow = k * aks
                return splat(builder.load(builder.gep(A, [builder.add(krow, c64(r))])))

            def p_at(k, v):
                q = builder.gep(P, [builder.add(builder.mul(k, c64(Wd)), c64(8 * v))])
                return builder.load(builder.bitcast(q, vp), align=8)

            def c_ptr(r, v):
                q = builder.gep(C, [builder.add(builder.mul(c64(r), ldc_v), c64(8 * v))])
                return builder.bitcast(q, vp)

            accs = [[cgutils.alloca_once(builder, vt) for _ in range(V)] for _ in range(R)]
            k_start = cgutils.alloca_once(builder, i64)
            is_init = builder.icmp_signed("!=", init_v, c64(0))
            with builder.if_else(is_init) as (then, otherwise):
                with then:
                    bs = [p_at(c64(0), v) for v in range(V)]
                    for r in range(R):
                        av = a_at(c64(0), r)
                        for v in range(V):
                            builder.store(builder.fmul(av, bs[v]), accs[r][v])
                    builder.store(c64(1), k_start)
                with otherwise:
                    for r in range(R):
                        for v in range(V):
                            builder.store(builder.load(c_ptr(r, v), align=8), accs[r][v])
                    builder.store(c64(0), k_start)
            with cgutils.for_range_slice(builder, builder.load(k_start), kd_v, c64(1),
                                         inc=True) as (k, _):
                krow = builder.mul(k, aks_v)
                bs = [p_at(k, v) for v in range(V)]
                for r in range(R):
                    av = a_at(krow, r)
                    for v in range(V):
                        builder.store(builder.call(fma, [av, bs[v], builder.load(accs[r][v])]),
                                      accs[r][v])
            for r in range(R):
                for v in range(V):
                    builder.store(builder.load(accs[r][v]), c_ptr(r, v), align=8)
            return context.get_dummy_value()
        return sig, codegen
    return micro


_micro = _make_micro(R, V)


@intrinsic
def _load(typingctx, addr, idx):
    """The float64 at byte address ``addr`` + 8 * ``idx``."""
    sig = types.float64(types.int64, types.int64)

    def codegen(context, builder, signature, args):
        p = builder.inttoptr(args[0], ir.DoubleType().as_pointer())
        return builder.load(builder.gep(p, [args[1]]), align=8)
    return sig, codegen


@_jit
def _gemm(a_addr, a_bs, a_rs, a_ks, b_addr, b_bs, b_ks, b_js, out, M, N, K):
    """out[q] = A[q] @ B[q] (q < out.shape[0]) in the sequential fma order; A and B are
    read from raw addresses with element strides (batch, row/k, k/column); ``out`` is a C
    float64 (nb, M, N) array."""
    nb = out.shape[0]
    Mp = (M + R - 1) // R * R
    kc_max = min(K, KC)
    pbuf = np.zeros(kc_max * W + 8)
    p_addr = pbuf.ctypes.data
    p_addr += (64 - p_addr % 64) % 64                 # 64-byte aligned panel rows
    pan = p_addr - pbuf.ctypes.data                   # element offset of the panel
    pan //= 8
    tile = np.empty(R * W)
    t_addr = tile.ctypes.data
    in_place = a_rs == 1 and M % R == 0               # rows of one k already adjacent
    if in_place:
        apack = np.empty(1)
    else:
        apack = np.zeros(Mp * K)                      # (Mp/R) micro-panels of K x R
    ap_addr = apack.ctypes.data
    out_addr = out.ctypes.data
    for q in range(nb):
        aq = a_addr + 8 * q * a_bs
        bq = b_addr + 8 * q * b_bs
        if not in_place:
            for i0 in range(0, M, R):
                ih = min(R, M - i0)
                base = i0 * K
                for k in range(K):
                    for r in range(ih):
                        apack[base + k * R + r] = _load(aq, (i0 + r) * a_rs + k * a_ks)
        oq = out_addr + 8 * q * M * N
        for j0 in range(0, N, W):
            jw = min(W, N - j0)
            for k0 in range(0, K, KC):
                kd = min(KC, K - k0)
                # pack B[k0:k0+kd, j0:j0+jw] into the panel (columns past jw stay zero)
                if b_ks <= b_js:
                    for j in range(jw):
                        for k in range(kd):
                            pbuf[pan + k * W + j] = _load(bq, (k0 + k) * b_ks + (j0 + j) * b_js)
                else:
                    for k in range(kd):
                        for j in range(jw):
                            pbuf[pan + k * W + j] = _load(bq, (k0 + k) * b_ks + (j0 + j) * b_js)
                if jw < W:
                    for k in range(kd):
                        for j in range(jw, W):
                            pbuf[pan + k * W + j] = 0.0
                init = 1 if k0 == 0 else 0
                for i0 in range(0, M, R):
                    if in_place:
                        a0, aks = aq + 8 * (i0 + k0 * a_ks), a_ks
                    else:
                        a0, aks = ap_addr + 8 * (i0 * K + k0 * R), R
                    if jw == W and i0 + R <= M:
                        _micro(a0, aks, p_addr, oq + 8 * (i0 * N + j0), N, kd, init)
                    else:
                        ih = min(R, M - i0)
                        if init == 0:
                            for r in range(ih):
                                for j in range(jw):
                                    tile[r * W + j] = out[q, i0 + r, j0 + j]
                        _micro(a0, aks, p_addr, t_addr, W, kd, init)
                        for r in range(ih):
                            for j in range(jw):
                                out[q, i0 + r, j0 + j] = tile[r * W + j]


def _estrides(x):
    """Element strides of a float64 array, or None when one is not a multiple of 8."""
    s = x.strides
    if any(t % 8 for t in s):
        return None
    return [t // 8 for t in s]


def matmul_f64(a, b):
    """``a @ b`` for float64 arrays (2-d or 3-d, 3-d operands sharing or broadcasting a
    batch dimension) as sequential fma chains (module docstring), C-order result; None
    when this module leaves the case to numpy (other dtypes or ranks, K == 0, products
    below ``MIN_FLOPS``, shapes that do not contract: the caller reports those)."""
    if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
            and a.dtype == np.float64 and b.dtype == np.float64
            and a.ndim in (2, 3) and b.ndim in (2, 3)):
        return None
    M, K = a.shape[-2:]
    K2, N = b.shape[-2:]
    if K != K2 or K == 0 or M * N * K < MIN_FLOPS:
        return None
    na = a.shape[0] if a.ndim == 3 else 1
    nbb = b.shape[0] if b.ndim == 3 else 1
    if na != nbb and na != 1 and nbb != 1:
        return None
    nb = max(na, nbb)
    sa, sb = _estrides(a), _estrides(b)
    if sa is None:
        a, sa = np.ascontiguousarray(a), _estrides(np.ascontiguousarray(a))
    if sb is None:
        b, sb = np.ascontiguousarray(b), _estrides(np.ascontiguousarray(b))
    a_bs = sa[0] if a.ndim == 3 and na == nb else 0
    b_bs = sb[0] if b.ndim == 3 and nbb == nb else 0
    out = np.empty((nb, M, N))
    _gemm(a.ctypes.data, a_bs, sa[-2], sa[-1], b.ctypes.data, b_bs, sb[-2], sb[-1],
          out, M, N, K)
    if a.ndim == 2 and b.ndim == 2:
        return out[0]
    return out
