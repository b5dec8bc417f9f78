"""Benchmark: binary32 context elementwise ops (hardware float32 path) vs numpy float32.

Side by side in one process, single-threaded, interleaved (ours, peer, ours, peer, ...),
best of k.  ``ratio`` = peer time / our time (1.0: as fast as numpy float32; the floor of
issue 16 for add and mul is 0.8).  Also shown: the emulated path (float64 op + one
rounding, scalars.kernels.binary_format) that the hardware path replaced, as a ratio to ours.

The context stores binary32 values as float32 arrays, so ours and numpy run on the SAME
float32 arrays (12 bytes moved per element each).  Timings are process CPU seconds (a
shared machine), best of k; wall times beside.  The fma peer is numpy's a*b + c in
float32 (two roundings; numpy has no fused multiply-add).

Usage: python bench/binary32.py [--repeats K] [--sizes 1e4,1e5,...]
"""
from __future__ import annotations

import benchlib  # noqa: E402  (first: one thread for every library)

import argparse  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402

from scalarlab import scalars  # noqa: E402
from scalarlab.scalars.kernels import binary_format as K  # noqa: E402
from scalarlab.scalars import formats  # noqa: E402

FLOOR = 0.8
# The floor is checked from 10^5 elements (the figures are for 10^7).  Below, a
# call is a few microseconds and the ratio measures per-call costs and allocator luck:
# numpy's own add at 10^4 takes ~1.4 us when its fresh output happens to be 64-byte
# aligned and ~2.3 us otherwise; the rows are printed, with that spread measured.
FLOOR_MIN_N = 100_000


def numpy_alignment_spread(a32, b32, repeats: int, inner: int) -> str:
    """numpy's float32 add into a preallocated output at each offset from a 64-byte
    boundary (0, 16, 32, 48 bytes; malloc gives any of them), in microseconds."""
    n = a32.size
    buf = np.empty(n + 64, dtype=np.float32)
    base = (-buf.ctypes.data % 64) // 4
    outs = [buf[base + k // 4: base + k // 4 + n] for k in (0, 16, 32, 48)]
    _, cpu = benchlib.interleaved([lambda o=o: np.add(a32, b32, out=o) for o in outs],
                                  repeats, inner=inner)
    return ("      numpy add into an output 0/16/32/48 bytes past a 64-byte boundary: "
            + " / ".join(f"{t * 1e6:.2f}" for t in cpu) + " us")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--sizes", default="1e4,1e5,1e6,1e7")
    args = ap.parse_args(argv)
    ctx = scalars.get("binary32")
    spec = formats.binary32.spec
    rng = np.random.default_rng(16)
    print(f"binary32 context (float32 storage, hardware float32) vs numpy float32 on the "
          f"same arrays, 1 thread, best of {args.repeats}, interleaved, CPU time; ratio = "
          f"numpy time / our time (floor {FLOOR} for add, mul); wall = the wall-time "
          f"ratio\n")
    print(f"{'op':<5} {'N':>9} {'ours us':>10} {'numpy32 us':>11} {'ratio':>6} "
          f"{'wall':>7} {'emulated us':>12} {'hw speedup':>10}")
    fails = []
    for size in args.sizes.split(","):
        n = int(float(size))
        a32 = (rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3, n)).astype(np.float32)
        b32 = (rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3, n)).astype(np.float32)
        c32 = rng.standard_normal(n).astype(np.float32)
        a, b, c = (v.astype(np.float64) for v in (a32, b32, c32))
        inner = max(1, 200_000 // n)

        def emu(code):
            def run():
                out = np.empty(n)
                K.binary_fast(code, a, b, out, spec)
                return out
            return run

        def emu_fma():
            out = np.empty(n)
            K.fma_kernel(K.FAST, a, b, c, out, np.zeros(n, np.uint8), spec)
            return out

        def emu_sqrt():
            out = np.empty(n)
            K.sqrt_kernel(K.FAST, np.abs(a), out, np.zeros(n, np.uint8), spec)
            return out

        absa32 = np.abs(a32)
        cases = [
            ("add", lambda: ctx.add(a32, b32), lambda: a32 + b32, emu(K.ADD)),
            ("mul", lambda: ctx.mul(a32, b32), lambda: a32 * b32, emu(K.MUL)),
            ("sub", lambda: ctx.sub(a32, b32), lambda: a32 - b32, emu(K.SUB)),
            ("div", lambda: ctx.div(a32, b32), lambda: a32 / b32, emu(K.DIV)),
            ("sqrt", lambda: ctx.sqrt(absa32), lambda: np.sqrt(absa32), emu_sqrt),
            ("fma", lambda: ctx.fma(a32, b32, c32), lambda: a32 * b32 + c32, emu_fma),
        ]
        for name, ours, peer, emulated in cases:
            got = ours()
            assert got.dtype == np.float32                              # the storage
            if name in ("add", "mul", "sub", "div"):
                assert np.array_equal(got.view(np.uint32), peer().view(np.uint32))  # IEEE
            emulated()
            # ours and numpy interleaved; the emulated path (float64 arrays, twice the
            # bytes) timed apart: its large frees make glibc trim the heap, and whichever
            # call ran next would pay the page faults of re-growing it
            (w_ours, w_np), (t_ours, t_np) = benchlib.interleaved([ours, peer], args.repeats,
                                                                  inner=inner)
            _, (t_emu,) = benchlib.interleaved([emulated], args.repeats, inner=inner)
            r = t_np / t_ours
            if name in ("add", "mul") and r < FLOOR and n >= FLOOR_MIN_N:
                fails.append(f"{name} N={n}: {r:.2f}")
            print(f"{name:<5} {n:>9,} {t_ours * 1e6:10.1f} {t_np * 1e6:11.1f} {r:6.2f} "
                  f"{w_np / w_ours:7.2f} {t_emu * 1e6:12.1f} {t_emu / t_ours:10.2f}"
                  + ("" if n >= FLOOR_MIN_N or name not in ("add", "mul")
                     else "   (per-call regime: not in the floor)"))
        if n < FLOOR_MIN_N:
            print(numpy_alignment_spread(a32, b32, args.repeats, inner))
        print()
    print(f"floor 0.8x numpy float32 (add, mul; N >= {FLOOR_MIN_N:,}): " +
          ("PASS" if not fails else "FAIL at " + "; ".join(fails)))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
