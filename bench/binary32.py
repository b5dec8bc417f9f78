"""Benchmark: binary32 context elementwise ops (hardware float32 path) vs numpy float32.

Side by side in one process, single-threaded, interleaved (ours, peer, ours, peer, ...),
best of k.  ``ratio`` = peer time / our time (1.0: as fast as numpy float32; the floor of
issue 16 for add and mul is 0.8).  Also shown: the emulated path (float64 op + one
rounding, scalars.binary_kernels) that the hardware path replaced, as a ratio to ours.

Our values are float64 arrays holding binary32 values (the context's storage), so every op
moves 24 bytes per element against numpy float32's 12: once arrays leave L2, memory
bandwidth caps the ratio near 0.5.  The fma peer is numpy's a*b + c in float32 (two
roundings; numpy has no fused multiply-add).

Usage: python bench/binary32.py [--repeats K] [--sizes 1e4,1e5,...]
"""
from __future__ import annotations

import benchlib  # noqa: E402  (first: one thread for every library)

import argparse  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402

from scalarlab import scalars  # noqa: E402
from scalarlab.scalars import binary_kernels as K  # noqa: E402
from scalarlab.scalars import formats  # noqa: E402

FLOOR = 0.8


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--sizes", default="1e4,1e5,1e6,1e7")
    args = ap.parse_args(argv)
    ctx = scalars.get("binary32")
    spec = formats.binary32.spec
    rng = np.random.default_rng(16)
    print(f"binary32 context (hardware float32 path) vs numpy float32, 1 thread, best of "
          f"{args.repeats}, interleaved; ratio = numpy time / our time "
          f"(floor {FLOOR} for add, mul)\n")
    print(f"{'op':<5} {'N':>9} {'ours us':>10} {'numpy32 us':>11} {'ratio':>6} "
          f"{'emulated us':>12} {'hw speedup':>10}")
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

        absa, absa32 = np.abs(a), np.abs(a32)
        cases = [
            ("add", lambda: ctx.add(a, b), lambda: a32 + b32, emu(K.ADD)),
            ("mul", lambda: ctx.mul(a, b), lambda: a32 * b32, emu(K.MUL)),
            ("sub", lambda: ctx.sub(a, b), lambda: a32 - b32, emu(K.SUB)),
            ("div", lambda: ctx.div(a, b), lambda: a32 / b32, emu(K.DIV)),
            ("sqrt", lambda: ctx.sqrt(absa), lambda: np.sqrt(absa32), emu_sqrt),
            ("fma", lambda: ctx.fma(a, b, c), lambda: a32 * b32 + c32, emu_fma),
        ]
        for name, ours, peer, emulated in cases:
            got = ours()
            if name in ("add", "mul", "sub", "div"):
                assert np.array_equal(got, peer().astype(np.float64))   # IEEE binary32
            emulated()
            (t_ours, t_np, t_emu), _ = benchlib.interleaved([ours, peer, emulated], args.repeats,
                                                          inner=inner)
            r = t_np / t_ours
            if name in ("add", "mul") and r < FLOOR:
                fails.append(f"{name} N={n}: {r:.2f}")
            print(f"{name:<5} {n:>9,} {t_ours * 1e6:10.1f} {t_np * 1e6:11.1f} {r:6.2f} "
                  f"{t_emu * 1e6:12.1f} {t_emu / t_ours:10.2f}")
        print()
    print("floor 0.8x numpy float32 (add, mul): " +
          ("PASS" if not fails else "FAIL at " + "; ".join(fails)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
