"""Float64 matmul in a fixed, documented order: fma chains over k blocks of 256, added in order.

For every output ``C[i, j]`` of ``A (M x K) @ B (K x N)``, with k cut into blocks
``[0, KB), [KB, 2 KB), ...`` (``KB`` = 256, the last one shorter)::

    s_b = RN(A[i, k0] * B[k0, j]);  s_b = fma(A[i, k], B[k, j], s_b)   for k in block b
    C = s_0;  C = RN(C + s_b)                                          for b = 1, 2, ...

The order depends only on K: every output's value depends only on its own row and
column, never on the machine, the BLAS build, the passes or the thread count, so the
float64 context's matmul is bit-reproducible and can be checked against an oracle doing
the same (gmpy2 at 53 bits, subnormalised).  The blocks keep the rounding error of long
dot products at BLAS's level (a single chain's grows with K; measured on a 784-input
layer of a CNN against the exact result: max |error| 5.8e-16 with blocks, 1.37e-15 with
one chain, 7.1e-16 with OpenBLAS), for about 4% of the speed.

Vectorised ACROSS outputs: a micro-kernel (LLVM IR through a Numba intrinsic, as in
:mod:`scalars.kernels.binary32_matmul`) keeps an ``R x W`` block of accumulators (8 x 24: 24 zmm
registers, enough independent chains to cover the FMA latency on both ports) in vector
registers (``<8 x double>``, ``llvm.fma.v8f64``; no fast-math flags, so LLVM never
reassociates) over the k loop.  B is copied, one ``kc x W`` panel at a time, into a
contiguous buffer (zero columns past N; a B read along k, such as ``W.T``, by 8 x 8
register transposes, a row-major B by vector copies) that stays in L1/L2 while every row
tile of A passes over it.  A C-order A is read in place (R row streams); any other A, and
the last partial row tile, is copied into ``K x R`` micro-panels (zero rows past M), read
with prefetch.  The micro-kernel runs each order block's chain in registers and then
stores it (the first block) or adds it into C; k is cut into passes of whole blocks (at
most ``KC`` rounded up to a multiple of ``KB``), one B panel each.
Edge tiles go through an ``R x W`` scratch tile whose padding lanes are discarded (a zero
padding lane may hold inf * 0 = NaN; it is never copied out).

``matmul_f64(a, b)`` returns None for the cases it leaves to numpy: non-float64 operands,
ranks other than 2 and 3, K == 0, batches that do not broadcast, shapes that do not
contract, and products with M*N*K < ``MIN_FLOPS`` or M or N < ``MIN_MN``.  ``MIN_FLOPS``
is OpenBLAS's own bound for running a product on one thread (65536 * 4 multiply-adds): a
product numpy runs multi-threaded leaves OpenBLAS's threads spinning for ~0.1 s, taking
the cores from the chain's threads (measured: the next 1024 x 784 x 1024 chain 2x slower),
so the float64 context hands numpy only products it runs on one thread (save those with
M or N below ``MIN_MN``, which the 8 x 24 tiles would mostly pad).  Between that
bound and ~2^21 the chain is slower than numpy's call (per-call packing; measured 64^3
2.3x, 96^3 1.2x, 128 x 256 x 10 1.45x numpy's time, single-threaded both).

Threads: above ``MIN_THREAD_MACS`` per thread the rows (one matrix) or the batch entries
are cut into ranges computed in parallel, up to ``numba.config.NUMBA_NUM_THREADS`` (the
number of cores unless NUMBA_NUM_THREADS is set); every output is still its own chain, so
the bits do not depend on the thread count.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

R = 8          # rows of A per micro-kernel call
V = 3          # vectors of 8 doubles per row: the tile is R x W outputs
W = 8 * V      # columns per B panel
KB = 256       # the order's k block: each output adds its blocks' chains in k order
KC = 2048      # k range per pass over a B panel (a multiple of KB; stays in L2)
PF_A = 16      # a packed A micro-panel is prefetched this many k ahead
MIN_FLOPS = 1 << 18   # from M*N*K of this, OpenBLAS would use threads (docstring)
MIN_MN = 8            # ... and below M or N of this (padding to R x W tiles wastes most)

_jit = numba.njit(cache=True, error_model="numpy", nogil=True)


def _make_micro(R: int, V: int, unit_k: bool):
    """An intrinsic ``micro(a, ars, aks, p, c, ldc, kd, init)`` on raw addresses and
    element strides (int64): C[r, j] (r < R, j < 8V; row stride ``ldc``) continues the fma
    chains of rows A[r, k] = a[r*ars + k*aks] (k < kd) against the panel p[k*8V + j];
    ``unit_k``: aks is 1 (C-order rows of A), else ars is 1 (the R values of one k
    adjacent: F-order A or a packed micro-panel).  ``init`` != 0 starts the chains
    (acc = a0*b0, one rounding) instead of loading them from C."""
    Wd = 8 * V

    @intrinsic
    def micro(typingctx, a, ars, aks, p, c, ldc, kd, init):
        sig = types.void(*[types.int64] * 8)

        def codegen(context, builder, signature, args):
            a_addr, ars_v, aks_v, p_addr, c_addr, ldc_v, kd_v, init_v = args
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

            if unit_k:      # A[r, k] at a + r*ars + k: R row pointers, one index
                rows = [builder.gep(A, [builder.mul(c64(r), ars_v)]) for r in range(R)]

                def a_at(k, r):
                    return splat(builder.load(builder.gep(rows[r], [k])))
            else:           # A[r, k] at a + k*aks + r: one pointer, constant offsets
                def a_at(k, r):
                    return splat(builder.load(builder.gep(A, [builder.add(
                        builder.mul(k, aks_v), c64(r))])))

            def p_at(k, v):
                q = builder.gep(P, [builder.add(builder.mul(k, c64(Wd)), c64(8 * v))])
                return builder.load(builder.bitcast(q, vp), align=8)

            def c_ptr(r, v):
                q = builder.gep(C, [builder.add(builder.mul(c64(r), ldc_v), c64(8 * v))])
                return builder.bitcast(q, vp)

            i8p = ir.IntType(8).as_pointer()
            pf = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                "llvm.prefetch.p0")

            def prefetch(ptr):          # read, keep in all cache levels, data
                builder.call(pf, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0),
                                  ir.Constant(i32, 3), ir.Constant(i32, 1)])

            accs = [[cgutils.alloca_once(builder, vt) for _ in range(V)] for _ in range(R)]
            # The call covers KB-aligned k blocks [s, min(s + KB, kd)): each block is a
            # fresh chain (first product rounded, then fma), added into C at its end
            # (C = RN(C + chain)), except the output's first block, which is stored.
            first_call = builder.icmp_signed("!=", init_v, c64(0))
            with cgutils.for_range_slice(builder, c64(0), kd_v, c64(KB),
                                         inc=True) as (s0, _):
                s1 = builder.add(s0, c64(KB))
                s1 = builder.select(builder.icmp_signed("<", s1, kd_v), s1, kd_v)
                bs = [p_at(s0, v) for v in range(V)]
                for r in range(R):
                    av = a_at(s0, r)
                    for v in range(V):
                        builder.store(builder.fmul(av, bs[v]), accs[r][v])
                with cgutils.for_range_slice(builder, builder.add(s0, c64(1)), s1, c64(1),
                                             inc=True) as (k, _):
                    bs = [p_at(k, v) for v in range(V)]
                    if PF_A and not unit_k:
                        kp = builder.add(k, c64(PF_A))
                        prefetch(builder.gep(A, [builder.mul(kp, aks_v)]))  # (never faults)
                    for r in range(R):
                        av = a_at(k, r)
                        for v in range(V):
                            builder.store(builder.call(fma, [av, bs[v],
                                                             builder.load(accs[r][v])]),
                                          accs[r][v])
                store = builder.and_(first_call, builder.icmp_signed("==", s0, c64(0)))
                with builder.if_else(store) as (then, otherwise):
                    with then:
                        for r in range(R):
                            for v in range(V):
                                builder.store(builder.load(accs[r][v]), c_ptr(r, v),
                                              align=8)
                    with otherwise:
                        for r in range(R):
                            for v in range(V):
                                cp = c_ptr(r, v)
                                builder.store(builder.fadd(builder.load(cp, align=8),
                                                           builder.load(accs[r][v])),
                                              cp, align=8)
            return context.get_dummy_value()
        return sig, codegen
    return micro


_micro_c = _make_micro(R, V, True)     # C-order A read in place (rows contiguous in k)
_micro_p = _make_micro(R, V, False)    # packed K x R micro-panels of A


@intrinsic
def _load(typingctx, addr, idx):
    """The float64 at byte address ``addr`` + 8 * ``idx``."""
    sig = types.float64(types.int64, types.int64)

    def codegen(context, builder, signature, args):
        p = builder.inttoptr(args[0], ir.DoubleType().as_pointer())
        return builder.load(builder.gep(p, [args[1]]), align=8)
    return sig, codegen


@intrinsic
def _copy8(typingctx, src, dst):
    """Copy 8 float64 from byte address ``src`` to ``dst`` (one vector load and store)."""
    sig = types.void(types.int64, types.int64)

    def codegen(context, builder, signature, args):
        vp = ir.VectorType(ir.DoubleType(), 8).as_pointer()
        v = builder.load(builder.inttoptr(args[0], vp), align=8)
        builder.store(v, builder.inttoptr(args[1], vp), align=8)
        return context.get_dummy_value()
    return sig, codegen


@intrinsic
def _transpose8(typingctx, src, ld_src, dst, ld_dst):
    """dst[c * ld_dst + r] = src[r * ld_src + c] for an 8 x 8 block of float64 at byte
    addresses ``src``, ``dst`` (strides in elements): 8 vector loads, 24 shuffles, 8 vector
    stores, where a scalar copy would take 64 loads and 64 stores."""
    sig = types.void(*[types.int64] * 4)

    def codegen(context, builder, signature, args):
        i32, i64, f64 = ir.IntType(32), ir.IntType(64), ir.DoubleType()
        vt = ir.VectorType(f64, 8)
        S = builder.inttoptr(args[0], f64.as_pointer())
        D = builder.inttoptr(args[2], f64.as_pointer())

        def ptr(base, i, ld):
            q = builder.gep(base, [builder.mul(ir.Constant(i64, i), ld)])
            return builder.bitcast(q, vt.as_pointer())

        def shuf(x, y, idx):
            return builder.shuffle_vector(x, y, ir.Constant(ir.VectorType(i32, 8), idx))

        rw = [builder.load(ptr(S, r, args[1]), align=8) for r in range(8)]
        lo, hi = [0, 8, 2, 10, 4, 12, 6, 14], [1, 9, 3, 11, 5, 13, 7, 15]
        t = []
        for r in range(0, 8, 2):                       # pairs of rows interleaved
            t += [shuf(rw[r], rw[r + 1], lo), shuf(rw[r], rw[r + 1], hi)]
        # t[0] = (r0c0 r1c0 r0c2 r1c2 ...), t[1] = odd columns, t[2], t[3] rows 2-3, ...
        lo2, hi2 = [0, 1, 8, 9, 4, 5, 12, 13], [2, 3, 10, 11, 6, 7, 14, 15]
        u = [None] * 8
        for g in (0, 4):                               # rows 0-3, rows 4-7
            u[g + 0] = shuf(t[g], t[g + 2], lo2)       # columns 0 and 4
            u[g + 2] = shuf(t[g], t[g + 2], hi2)       # columns 2 and 6
            u[g + 1] = shuf(t[g + 1], t[g + 3], lo2)   # columns 1 and 5
            u[g + 3] = shuf(t[g + 1], t[g + 3], hi2)   # columns 3 and 7
        lo4, hi4 = [0, 1, 2, 3, 8, 9, 10, 11], [4, 5, 6, 7, 12, 13, 14, 15]
        for c in range(4):
            builder.store(shuf(u[c], u[c + 4], lo4), ptr(D, c, args[3]), align=8)
            builder.store(shuf(u[c], u[c + 4], hi4), ptr(D, c + 4, args[3]), align=8)
        return context.get_dummy_value()
    return sig, codegen


@_jit
def _pack_panel(bq, b_ks, b_js, pbuf, pan, p_addr, k0, kd, j0, jw):
    """pbuf[pan + k * W + j] = B[k0 + k, j0 + j] (k < kd, j < jw; zeros for jw <= j < W);
    a transposing gather (B's k stride 1) goes by 8 x 8 register transposes."""
    if b_ks == 1 and b_js != 1:
        jt = jw - jw % 8
        kt = kd - kd % 8
        for jj in range(0, jt, 8):
            for kk in range(0, kt, 8):
                _transpose8(bq + 8 * (k0 + kk + (j0 + jj) * b_js), b_js,
                            p_addr + 8 * (kk * W + jj), W)
            for k in range(kt, kd):
                for j in range(jj, jj + 8):
                    pbuf[pan + k * W + j] = _load(bq, k0 + k + (j0 + j) * b_js)
        for j in range(jt, jw):
            for k in range(kd):
                pbuf[pan + k * W + j] = _load(bq, k0 + k + (j0 + j) * b_js)
    elif b_js == 1 and jw == W:                       # rows of B: vector copies
        for k in range(kd):
            for v in range(0, W, 8):
                _copy8(bq + 8 * ((k0 + k) * b_ks + j0 + v), p_addr + 8 * (k * W + v))
    else:
        for k in range(kd):
            for j in range(jw):
                pbuf[pan + k * W + j] = _load(bq, (k0 + k) * b_ks + (j0 + j) * b_js)
    if jw < W:
        for k in range(kd):
            for j in range(jw, W):
                pbuf[pan + k * W + j] = 0.0


@_jit
def _pack_a(aq, a_rs, a_ks, apack, ap_addr, M, K):
    """apack[i0*K + k*R + r] = A[i0 + r, k]: the rows of A as K x R micro-panels (zero rows
    past M); C-order rows go by 8 x 8 register transposes."""
    for i0 in range(0, M, R):
        ih = min(R, M - i0)
        base = i0 * K
        kt = 0
        if a_ks == 1 and ih == R and R == 8:
            kt = K - K % 8
            for kk in range(0, kt, 8):
                _transpose8(aq + 8 * (i0 * a_rs + kk), a_rs, ap_addr + 8 * (base + kk * R), R)
        elif a_rs == 1 and ih == R and R == 8:        # the R values of one k adjacent
            kt = K
            for k in range(K):
                _copy8(aq + 8 * (i0 + k * a_ks), ap_addr + 8 * (base + k * R))
        for k in range(kt, K):
            for r in range(ih):
                apack[base + k * R + r] = _load(aq, (i0 + r) * a_rs + k * a_ks)


@_jit
def _gemm(a_addr, a_bs, a_rs, a_ks, b_addr, b_bs, b_ks, b_js, out, M, N, K, kc):
    """out[q] = A[q] @ B[q] (q < out.shape[0]) in the module's order; A and B are
    read from raw addresses with element strides (batch, row/k, k/column); ``out`` is a C
    float64 (nb, M, N) array; K >= 1; k blocks of at most ``kc``."""
    nb = out.shape[0]
    nkb = (K + kc - 1) // kc
    kb = (K + nkb - 1) // nkb                         # passes of (nearly) equal size,
    kb = (kb + KB - 1) // KB * KB                     # each whole order blocks
    pbuf = np.zeros(kb * W + 8)
    p_addr = pbuf.ctypes.data
    p_addr += (64 - p_addr % 64) % 64                 # 64-byte aligned panel rows
    pan = (p_addr - pbuf.ctypes.data) // 8            # element offset of the panel
    tile = np.empty(R * W)
    t_addr = tile.ctypes.data
    # A is read in place when its rows are contiguous in k (the R row streams prefetch
    # well); otherwise, and for its last partial row tile, it is copied into K x R
    # micro-panels (zero rows past M), one sequential stream.
    Mf = M - M % R
    first_packed = Mf if a_ks == 1 else 0
    apack = np.zeros((M - first_packed + R - 1) // R * R * K)
    ap_addr = apack.ctypes.data
    out_addr = out.ctypes.data
    for q in range(nb):
        aq = a_addr + 8 * q * a_bs
        bq = b_addr + 8 * q * b_bs
        if q == 0 or a_bs != 0:                     # (a broadcast A is packed once)
            _pack_a(aq + 8 * first_packed * a_rs, a_rs, a_ks, apack, ap_addr,
                    M - first_packed, K)
        oq = out_addr + 8 * q * M * N
        for j0 in range(0, N, W):
            jw = min(W, N - j0)
            for k0 in range(0, K, kb):
                kd = min(kb, K - k0)
                _pack_panel(bq, b_ks, b_js, pbuf, pan, p_addr, k0, kd, j0, jw)
                init = 1 if k0 == 0 else 0
                for i0 in range(0, M, R):
                    in_place = i0 < first_packed
                    if in_place:
                        a0 = aq + 8 * (i0 * a_rs + k0)
                    else:
                        a0 = ap_addr + 8 * ((i0 - first_packed) * K + k0 * R)
                    ih = min(R, M - i0)
                    direct = jw == W and ih == R
                    if direct:
                        dst, ldc = oq + 8 * (i0 * N + j0), N
                    else:                             # edge tile: through a full R x W tile
                        dst, ldc = t_addr, W
                        if init == 0:
                            for r in range(ih):
                                for j in range(jw):
                                    tile[r * W + j] = out[q, i0 + r, j0 + j]
                    if in_place:
                        _micro_c(a0, a_rs, 1, p_addr, dst, ldc, kd, init)
                    else:
                        _micro_p(a0, 1, R, p_addr, dst, ldc, kd, init)
                    if not direct:
                        for r in range(ih):
                            for j in range(jw):
                                out[q, i0 + r, j0 + j] = tile[r * W + j]


@numba.njit(cache=True)
def _address(x):
    """The address of ``x``'s first element (``x.ctypes.data`` costs ~1 us in Python)."""
    return x.ctypes.data


def _estrides(x, addr):
    """Element strides of a float64 array at ``addr``, or None when its data or a stride
    is not a multiple of 8 bytes (such a view is copied first)."""
    s = x.strides
    if addr % 8 or any(t % 8 for t in s):
        return None
    return [t // 8 for t in s]


def matmul_f64(a, b, out=None):
    """``a @ b`` for float64 arrays (2-d or 3-d, 3-d operands sharing or broadcasting a
    batch dimension) in the module docstring's order, C-order result; None
    when this module leaves the case to numpy (other dtypes or ranks, K == 0, products
    below ``MIN_FLOPS``, shapes that do not contract: the caller reports those).
    ``out``: a C-contiguous float64 array of the result's shape, overlapping neither
    operand, to write into (returned); anything else is ignored (a new array)."""
    if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
            and a.dtype == np.float64 and b.dtype == np.float64
            and a.ndim in (2, 3) and b.ndim in (2, 3)):
        return None
    M, K = a.shape[-2:]
    K2, N = b.shape[-2:]
    if K != K2 or K == 0 or M * N * K < MIN_FLOPS or min(M, N) < MIN_MN:
        return None
    na = a.shape[0] if a.ndim == 3 else 1
    nbb = b.shape[0] if b.ndim == 3 else 1
    if na != nbb and na != 1 and nbb != 1:
        return None
    nb = max(na, nbb)
    pa, pb = _address(a), _address(b)
    sa, sb = _estrides(a, pa), _estrides(b, pb)
    if sa is None:
        a = np.array(a)                   # a fresh, aligned C-order copy
        pa = _address(a)
        sa = _estrides(a, pa)
    if sb is None:
        b = np.array(b)
        pb = _address(b)
        sb = _estrides(b, pb)
    a_bs = sa[0] if a.ndim == 3 and na == nb else 0
    b_bs = sb[0] if b.ndim == 3 and nbb == nb else 0
    shape = (M, N) if a.ndim == 2 and b.ndim == 2 else (nb, M, N)
    if not (isinstance(out, np.ndarray) and out.dtype == np.float64 and out.shape == shape
            and out.flags.c_contiguous and not np.may_share_memory(out, a)
            and not np.may_share_memory(out, b)):
        out = np.empty(shape)
    res = out
    out = out.reshape(nb, M, N)
    args = (pa, a_bs, sa[-2], sa[-1], pb, b_bs, sb[-2], sb[-1])
    _run(args, out, M, N, K)
    return res


# Threads (module docstring): row or batch ranges, each a call of _gemm (which releases
# the GIL), at least MIN_THREAD_MACS multiply-adds each.
MIN_THREAD_MACS = 1 << 22
_POOL = None
_POOL_LOCK = threading.Lock()


def _pool(workers: int):
    """The module's worker threads (created once, under a lock: first use may be
    concurrent)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL._max_workers < workers:
            _POOL = ThreadPoolExecutor(workers, thread_name_prefix="f64_matmul")
        return _POOL


def _run(args, out, M, N, K):
    """_gemm over ``out`` (nb, M, N), split across threads when the product is large."""
    nb = out.shape[0]
    threads = min(numba.config.NUMBA_NUM_THREADS, nb * M * N * K // MIN_THREAD_MACS,
                  nb if nb > 1 else (M + R - 1) // R)
    if threads <= 1:
        _gemm(*args, out, M, N, K, KC)
        return
    a_addr, a_bs, a_rs, a_ks, b_addr, b_bs, b_ks, b_js = args
    jobs = []
    if nb > 1:                            # batch ranges: out[q0:q1] is a C array
        for t in range(threads):
            q0, q1 = nb * t // threads, nb * (t + 1) // threads
            jobs.append(((a_addr + 8 * q0 * a_bs, a_bs, a_rs, a_ks,
                          b_addr + 8 * q0 * b_bs, b_bs, b_ks, b_js), out[q0:q1], M))
    else:                                 # row ranges of whole R-row tiles
        tiles = (M + R - 1) // R
        for t in range(threads):
            i0, i1 = R * (tiles * t // threads), min(M, R * (tiles * (t + 1) // threads))
            jobs.append(((a_addr + 8 * i0 * a_rs, a_bs, a_rs, a_ks) + args[4:],
                         out[:, i0:i1], i1 - i0))
    pool = _pool(threads - 1)
    futures = [pool.submit(_gemm, *ja, o, m, N, K, KC) for ja, o, m in jobs[1:]]
    ja, o, m = jobs[0]
    _gemm(*ja, o, m, N, K, KC)            # the first range on the calling thread
    for f in futures:
        f.result()


def product(a, b, out=None):
    """``a @ b`` of float64 arrays: :func:`matmul_f64`'s chains where it takes the case,
    numpy's matmul (BLAS) otherwise; written into ``out`` when given (numpy's rules).
    For code that needs a float64 product whose rounding error obeys the order-free
    bound |fl(AB) - AB| <= gamma_K |A||B| (midpoint-radius interval products): both
    paths do."""
    y = matmul_f64(a, b, out)
    if y is None:
        return np.matmul(a, b) if out is None else np.matmul(a, b, out=out)
    if out is not None and y is not out:
        out[...] = y
        return out
    return y
