"""GPU checks and benchmarks of the numba_cuda provider (called by bench/gpu_check.sh).

Subcommands:

* ``ptx-audit``  compile every kernel for sm_90 WITHOUT running it (needs libNVVM, e.g.
  the ``nvidia-cuda-nvcc-cu12`` wheel, but no GPU) and check the rounding-relevant
  instructions: the plain GEMM has no ``fma`` (products and sums are separate ``.rn``
  instructions), the fma GEMM has ``fma.rn.f32``, no kernel uses a directed-rounding
  instruction (``.rm`` / ``.rp``) — intervals round by TwoSum + bit steps.
* ``verify``     on a GPU: the production tiling (128x128x8, 8x8 per thread) against the
  binary32 reference bit for bit at a few odd sizes, and the ULP gaps of the
  transcendental kernels on 2^20 samples.
* ``bench``      on a GPU: linear 4096^3 vs torch float32 matmul (TF32 off), elementwise
  kernels vs device copy bandwidth, interval linear vs float linear.  Prints a table and
  writes it (Markdown + JSON) to ``--out``.
* ``smoke``      the same code paths at tiny sizes; runs in the simulator on a CPU.

Speed ratios are measured side by side in one process; nothing here is a test assertion
except the documented floors, reported as PASS/FAIL lines.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

FLOOR_LINEAR = 0.25        # of torch float32 (TF32 off) throughput, H200
FLOOR_ELEMENTWISE = 0.60   # of device copy bandwidth


# --------------------------------------------------------------------------- ptx audit
def ptx_audit(cc=(9, 0)) -> int:
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "0")
    from numba import config, cuda, types
    if config.ENABLE_CUDASIM:
        print("ptx-audit: needs NUMBA_ENABLE_CUDASIM=0 (compiles for real hardware)")
        return 2
    import numba.cuda.dispatcher as disp
    from numba.cuda.cudadrv import driver
    try:
        driver.driver.cuInit          # a driver is present: compile for the real device
    except Exception:
        # No driver on this machine: device functions called from a kernel are compiled
        # for the current device's capability, so name one (compile only, nothing runs).
        class _Dev:
            compute_capability = cc
        disp.get_current_device = lambda: _Dev()
    from scalarlab.cuda_kernels import elementwise, gemm, interval, reduce, rowwise

    f32_1 = types.Array(types.float32, 1, "C")
    f32_2 = types.Array(types.float32, 2, "C")

    def ptx(kern, sig):
        text, _ = cuda.compile_ptx(kern.py_func, sig, device=False, cc=cc)
        return text

    def count(text, needle):
        return sum(1 for line in text.splitlines()
                   if line.strip().startswith(needle))

    failures = []
    rows = []

    def check(name, text, must=(), must_not=()):
        ok = True
        for m in must:
            if count(text, m) == 0:
                failures.append(f"{name}: expected {m!r}")
                ok = False
        for m in must_not:
            n = count(text, m)
            if n:
                failures.append(f"{name}: found {n} {m!r}")
                ok = False
        rows.append((name, "ok" if ok else "FAIL", count(text, "fma.rn.f32"),
                     count(text, "mul.rn.f32"), count(text, "add.rn.f32"),
                     count(text, ".local")))

    directed = ("add.rm", "add.rp", "mul.rm", "mul.rp", "fma.rm", "fma.rp", "cvt.rm", "cvt.rp")
    gsig = (f32_2, f32_2, f32_1, types.boolean, f32_2)
    for tiling in ("SMALL", "LARGE"):
        t = getattr(gemm, tiling)
        check(f"gemm {tiling} plain", ptx(gemm.make_gemm(fma=False, **t), gsig),
              must=("mul.rn.f32", "add.rn.f32"), must_not=("fma.rn.f32",) + directed)
        check(f"gemm {tiling} fma", ptx(gemm.make_gemm(fma=True, **t), gsig),
              must=("fma.rn.f32",), must_not=directed)
    for name, k in elementwise.BINARY.items():
        check(f"elementwise {name}", ptx(k, (f32_1, f32_1, f32_1)), must_not=("fma.rn.f32",) + directed)
    # exp/tanh/sigmoid/softmax call libdevice (__nv_expf uses fma.rm internally): their
    # directed-rounding instructions are the math library's, not a rounding policy of ours
    for name, k in elementwise.UNARY.items():
        check(f"elementwise {name}", ptx(k, (f32_1, f32_1)),
              must_not=() if name in ("exp", "tanh", "sigmoid") else directed)
    check("reduce tree(64)", ptx(reduce.make_row_sum(64), (f32_2, f32_1)),
          must=("add.rn.f32",), must_not=("fma.rn.f32",) + directed)
    check("softmax rows", ptx(rowwise.softmax_rows, (f32_2, f32_2)))
    check("layernorm rows", ptx(rowwise.layernorm_rows, (f32_2, f32_1, f32_1, f32_1, f32_2)),
          must=("div.rn.f32", "sqrt.rn.f32"), must_not=("fma.rn.f32",) + directed)
    check("interval add", ptx(interval.iadd_kernel, (f32_1,) * 6), must_not=directed)
    check("interval relu", ptx(interval.irelu_kernel, (f32_1,) * 4), must_not=directed)
    check("interval tanh", ptx(interval.itanh_kernel, (f32_1,) * 4), must_not=directed)
    check("interval linear", ptx(interval.make_ilinear(16), (f32_2,) * 4 + (f32_1,) * 2 + (f32_2,) * 2),
          must_not=directed)
    print(f"{'kernel':28s} {'status':6s} {'fma.rn.f32':>10s} {'mul.rn.f32':>10s} "
          f"{'add.rn.f32':>10s} {'.local':>6s}")
    for r in rows:
        print(f"{r[0]:28s} {r[1]:6s} {r[2]:10d} {r[3]:10d} {r[4]:10d} {r[5]:6d}")
    for f in failures:
        print("FAIL:", f)
    print("ptx-audit:", "PASS" if not failures else "FAIL")
    return 1 if failures else 0


# ---------------------------------------------------------------------------- helpers
def _sync():
    from numba import cuda
    cuda.synchronize()


def _time(fn, reps):
    fn()
    _sync()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    _sync()
    return (time.perf_counter() - t) / reps


def _ulps(a, b):
    import scalarlab.scalars.formats as F
    return np.asarray(F.ulp_distance(np.asarray(a, np.float64), np.asarray(b, np.float64),
                                     F.get("binary32")))


# ------------------------------------------------------------------------------ verify
def verify(sizes, samples: int) -> int:
    """Production tiling vs the binary32 reference contexts; transcendental ULP gaps."""
    from scalarlab import scalars
    from scalarlab.cuda_kernels import gemm, host
    from scalarlab.cuda_kernels.elementwise import ULP_BOUND

    rng = np.random.default_rng(7)
    bad = 0
    for (M, K, N) in sizes:
        x = rng.standard_normal((M, K)).astype(np.float32)
        Wt = rng.standard_normal((K, N)).astype(np.float32)
        b = rng.standard_normal(N).astype(np.float32)
        for fma, cname in ((False, "binary32"), (True, "binary32+fma")):
            ctx = scalars.get(cname)
            ref = ctx.add(ctx.matmul(x.astype(np.float64), Wt.astype(np.float64)), b.astype(np.float64))
            got = host.linear(x, Wt, b, fma=fma, tiling=gemm.LARGE).astype(np.float64)
            same = np.array_equal(ref, got)
            bad += not same
            print(f"verify linear {M}x{K}x{N} {cname:13s} bit-identical: {same}"
                  + ("" if same else f" (max gap {int(_ulps(ref, got).max())} ulp)"))
    ctx = scalars.get("binary32")
    xs = (rng.standard_normal(samples) * 6).astype(np.float32)
    for op in ("exp", "tanh", "sigmoid"):
        xin = xs if op != "exp" else (xs * 14).astype(np.float32)
        ref = getattr(ctx, op)(xin.astype(np.float64))
        got = host.unary(op, xin).astype(np.float64)
        g = _ulps(ref, got)
        ok = int(g.max()) <= ULP_BOUND[op]
        bad += not ok
        print(f"verify {op:8s} max gap {int(g.max())} ulp (bound {ULP_BOUND[op]}), "
              f"mean {g.mean():.3f}, exact {np.mean(g == 0) * 100:.1f}%: {'PASS' if ok else 'FAIL'}")
    return 1 if bad else 0


# ------------------------------------------------------------------------------- bench
def bench(n: int, elems: int, reps: int, out_dir: str, *, small=False, judge=True) -> int:
    from numba import cuda
    from scalarlab.cuda_kernels import elementwise, gemm, interval
    from scalarlab.cuda_kernels.host import ILINEAR_TILE

    tiling = gemm.SMALL if small else gemm.LARGE
    rows = []
    rng = np.random.default_rng(0)
    A = cuda.to_device(rng.standard_normal((n, n)).astype(np.float32))
    B = cuda.to_device(rng.standard_normal((n, n)).astype(np.float32))
    bias = cuda.to_device(rng.standard_normal(n).astype(np.float32))
    C = cuda.device_array((n, n), dtype=np.float32)
    flops = 2.0 * n ** 3
    t_plain = _time(lambda: gemm.launch_gemm(A, B, bias, C, fma=False, tiling=tiling), reps)
    t_fma = _time(lambda: gemm.launch_gemm(A, B, bias, C, fma=True, tiling=tiling), reps)
    t_torch = None
    try:
        import torch
        if torch.cuda.is_available():
            torch.backends.cuda.matmul.allow_tf32 = False       # true float32 GEMM
            torch.backends.cudnn.allow_tf32 = False
            torch.set_float32_matmul_precision("highest")
            ta = torch.randn(n, n, device="cuda")
            tb = torch.randn(n, n, device="cuda")
            tbias = torch.randn(n, device="cuda")

            def tmm():
                torch.addmm(tbias, ta, tb)
            tmm()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(reps):
                tmm()
            torch.cuda.synchronize()
            t_torch = (time.perf_counter() - t0) / reps
    except ImportError:
        pass
    for name, t in (("linear (mul.rn+add.rn)", t_plain), ("linear (fma)", t_fma)):
        ratio = None if t_torch is None else t_torch / t
        rows.append({"kernel": name, "size": f"{n}^3", "time_ms": t * 1e3,
                     "throughput": f"{flops / t / 1e12:.2f} TFLOP/s",
                     "vs": "torch fp32 (TF32 off)", "ratio": ratio, "floor": FLOOR_LINEAR})
    if t_torch is not None:
        rows.append({"kernel": "torch.addmm fp32", "size": f"{n}^3", "time_ms": t_torch * 1e3,
                     "throughput": f"{flops / t_torch / 1e12:.2f} TFLOP/s", "vs": "", "ratio": None,
                     "floor": None})

    # interval linear vs float linear (same sizes, smaller if n is huge: it is ~30x slower)
    ni = min(n, 2048)
    Xl = cuda.to_device(rng.standard_normal((ni, ni)).astype(np.float32))
    Xh = cuda.to_device(np.asarray(Xl.copy_to_host() + np.float32(0.01), np.float32))
    Wt = cuda.to_device(rng.standard_normal((ni, ni)).astype(np.float32))
    bb = cuda.to_device(rng.standard_normal(ni).astype(np.float32))
    Ol = cuda.device_array((ni, ni), dtype=np.float32)
    Oh = cuda.device_array((ni, ni), dtype=np.float32)
    Cf = cuda.device_array((ni, ni), dtype=np.float32)
    kern = interval.get_ilinear(ILINEAR_TILE)
    grid = ((ni + ILINEAR_TILE - 1) // ILINEAR_TILE,) * 2
    t_iv = _time(lambda: kern[grid, (ILINEAR_TILE, ILINEAR_TILE)](Xl, Xh, Wt, Wt, bb, bb, Ol, Oh), max(1, reps // 2))
    t_fl = _time(lambda: gemm.launch_gemm(Xl, Wt, bb, Cf, fma=False, tiling=tiling), reps)
    rows.append({"kernel": "interval linear", "size": f"{ni}^3", "time_ms": t_iv * 1e3,
                 "throughput": f"{2.0 * ni ** 3 / t_iv / 1e12:.3f} TFLOP/s",
                 "vs": "float linear (same size)", "ratio": t_fl / t_iv, "floor": None})

    # elementwise vs copy bandwidth
    a = cuda.to_device(rng.standard_normal(elems).astype(np.float32))
    b2 = cuda.to_device(rng.standard_normal(elems).astype(np.float32))
    o = cuda.device_array(elems, dtype=np.float32)
    blocks = elementwise.grid_for(elems)
    t_copy = _time(lambda: o.copy_to_device(a), reps)
    copy_bw = 2 * 4 * elems / t_copy
    t_kcopy = _time(lambda: elementwise.copy_kernel[blocks, elementwise.THREADS](a, o), reps)
    rows.append({"kernel": "device memcpy (DtoD)", "size": f"{elems}", "time_ms": t_copy * 1e3,
                 "throughput": f"{copy_bw / 1e9:.0f} GB/s", "vs": "", "ratio": None, "floor": None})
    rows.append({"kernel": "copy kernel", "size": f"{elems}", "time_ms": t_kcopy * 1e3,
                 "throughput": f"{2 * 4 * elems / t_kcopy / 1e9:.0f} GB/s", "vs": "memcpy",
                 "ratio": t_copy / t_kcopy, "floor": None})
    for name, k in elementwise.BINARY.items():
        t = _time(lambda: k[blocks, elementwise.THREADS](a, b2, o), reps)
        bw = 3 * 4 * elems / t
        rows.append({"kernel": name, "size": f"{elems}", "time_ms": t * 1e3,
                     "throughput": f"{bw / 1e9:.0f} GB/s", "vs": "memcpy bandwidth",
                     "ratio": bw / copy_bw, "floor": FLOOR_ELEMENTWISE})
    for name in ("relu", "exp", "tanh", "sigmoid"):
        k = elementwise.UNARY[name]
        t = _time(lambda: k[blocks, elementwise.THREADS](a, o), reps)
        bw = 2 * 4 * elems / t
        rows.append({"kernel": name, "size": f"{elems}", "time_ms": t * 1e3,
                     "throughput": f"{bw / 1e9:.0f} GB/s", "vs": "memcpy bandwidth",
                     "ratio": bw / copy_bw, "floor": FLOOR_ELEMENTWISE})
    return _report(rows, out_dir, judge)


def _report(rows, out_dir, judge=True) -> int:
    lines = ["| kernel | size | time ms | throughput | vs | ratio | floor | verdict |",
             "|---|---|---|---|---|---|---|---|"]
    fails = 0
    for r in rows:
        verdict = ""
        if judge and r["floor"] is not None and r["ratio"] is not None:
            ok = r["ratio"] >= r["floor"]
            fails += not ok
            verdict = "PASS" if ok else "FAIL"
        ratio = "" if r["ratio"] is None else f"{r['ratio']:.3f}"
        floor = "" if r["floor"] is None else f">= {r['floor']:.2f}"
        lines.append(f"| {r['kernel']} | {r['size']} | {r['time_ms']:.3f} | {r['throughput']} | "
                     f"{r['vs']} | {ratio} | {floor} | {verdict} |")
    text = "\n".join(lines)
    print(text)
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, "gpu_bench.md"), "w") as f:
            f.write(text + "\n")
        with open(os.path.join(out_dir, "gpu_bench.json"), "w") as f:
            json.dump(rows, f, indent=1)
    return 1 if fails else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("ptx-audit")
    v = sub.add_parser("verify")
    v.add_argument("--samples", type=int, default=1 << 20)
    b = sub.add_parser("bench")
    b.add_argument("--n", type=int, default=4096)
    b.add_argument("--elems", type=int, default=1 << 26)
    b.add_argument("--reps", type=int, default=10)
    b.add_argument("--out", default=os.environ.get("OUT", ""))
    s = sub.add_parser("smoke")
    s.add_argument("--out", default="")
    args = ap.parse_args(argv)
    if args.cmd == "ptx-audit":
        return ptx_audit()
    if args.cmd == "verify":
        return verify([(129, 257, 131), (300, 64, 257), (1, 1000, 3)], args.samples)
    if args.cmd == "bench":
        return bench(args.n, args.elems, args.reps, args.out)
    # smoke: tiny sizes, simulator-friendly; the floors are not judged
    rc = verify([(3, 9, 5)], 64)
    bench(16, 256, 1, args.out, small=True, judge=False)
    return rc


if __name__ == "__main__":
    sys.exit(main())
