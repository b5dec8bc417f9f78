"""``scalarlab libm`` speed: inputs per second of the library call and of the lab's check
(correctly rounded reference, bit compare, float64 error estimate), and their ratio, on
chunks of consecutive binary32 inputs; the time an exhaustive 2^32 run of ``exp`` would
take from those rates.  ``--full`` runs the whole exhaustive numpy ``exp`` audit.

    python bench/libm_exhaustive.py [--chunk-log2 22] [--chunks 4] [--full --workers 2]
"""
from __future__ import annotations

import argparse
import time

import benchlib  # noqa: F401  (one thread per library; before numpy)
import numpy as np

from scalarlab.experiments import libm_audit as L


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunk-log2", type=int, default=22)
    ap.add_argument("--chunks", type=int, default=4)
    ap.add_argument("--funcs", default="exp,log,sin,cos,tanh")
    ap.add_argument("--libs", default="numpy,libm,torch")
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    n = 1 << a.chunk_log2
    rng = np.random.default_rng(0)
    lo, hi = L.ordinal_range("binary32")
    starts = rng.integers(lo, hi - n, size=a.chunks)
    print(f"{L.glibc_version()}; numpy {np.__version__} ({L.numpy_simd()})")
    print(f"{a.chunks} chunks of 2^{a.chunk_log2} consecutive binary32 inputs at random places")
    print(f"{'function':8s} {'library':7s} {'call/s':>10s} {'check/s':>10s} {'check/call':>10s}"
          f" {'2^32 (1 proc)':>14s}")
    for func in a.funcs.split(","):
        t_ref = 0.0
        xs = [L.from_ordinals("binary32", np.arange(s, s + n)) for s in starts]
        refs = []
        for x in xs:
            t = time.perf_counter()
            refs.append(L.reference(func, "binary32", x))
            t_ref += time.perf_counter() - t
        for lib in a.libs.split(","):
            call = L.library_function(lib, func, "binary32")
            if call is None:
                continue
            call(xs[0][:16])     # compile / warm
            t_call = t_chk = 0.0
            for x, r in zip(xs, refs):
                t = time.perf_counter()
                with np.errstate(all="ignore"):
                    call(x)
                t_call += time.perf_counter() - t
                t = time.perf_counter()
                L.check_block(lib, func, "binary32", x, r)
                t_chk += time.perf_counter() - t
            # the check includes a second library call; its own cost is the rest + reference
            check = t_chk - t_call + t_ref
            rate_call = a.chunks * n / t_call
            rate_chk = a.chunks * n / check
            full = 2 ** 32 / a.chunks / n * (t_chk + t_ref)
            print(f"{func:8s} {lib:7s} {rate_call:10.3g} {rate_chk:10.3g} "
                  f"{rate_call / rate_chk:10.1f} {full:12.0f} s")
    if a.full:
        t = time.perf_counter()
        df = L.libm_audit(["exp"], ["numpy"], "binary32", exhaustive=True,
                          workers=a.workers, quiet=False)
        print(df.to_string())
        print(f"exhaustive binary32 exp, numpy, {a.workers} processes: "
              f"{time.perf_counter() - t:.0f} s")


if __name__ == "__main__":
    main()
