#!/usr/bin/env bash
# GPU check of the numba_cuda provider: one prepared script for a machine with an NVIDIA GPU.
#
#   bench/gpu_check.sh            on a GPU: compiled kernel tests, PTX audit, production-tiling
#                                 verification, benchmarks; table -> $OUT/gpu_bench.md (+ .json)
#   bench/gpu_check.sh --smoke    on a CPU: the same steps in Numba's CUDA simulator at tiny sizes
#                                 (floors not judged), to check the script itself
#
# Floors (H200): linear >= 25% of torch float32 matmul throughput (TF32 off); elementwise
# kernels >= 60% of the device copy bandwidth.  Exit status: non-zero if any step failed.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$(pwd)/out/gpu_check}"
mkdir -p "$OUT"
export OUT
PY="${PYTHON:-python}"
status=0

step() {  # step NAME CMD...: run, tee the log to $OUT, remember failures
    local name="$1"; shift
    echo "== $name"
    "$@" 2>&1 | tee "$OUT/$name.log"
    local rc=${PIPESTATUS[0]}
    echo "== $name: exit $rc"
    [ "$rc" -eq 0 ] || status=1
}

if [ "${1:-}" = "--smoke" ]; then
    export NUMBA_ENABLE_CUDASIM=1
    step tests_simulator "$PY" -m pytest tests/cuda_kernels tests/plan -q -p no:cacheprovider
    step smoke "$PY" bench/gpu_kernels.py smoke --out "$OUT"
else
    export NUMBA_ENABLE_CUDASIM=0
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee "$OUT/device.txt"
    # the kernel tests, compiled for the real device (conftest only sets the simulator by default)
    step tests_gpu "$PY" -m pytest tests/cuda_kernels tests/plan -q -p no:cacheprovider
    step ptx_audit "$PY" bench/gpu_kernels.py ptx-audit
    step verify "$PY" bench/gpu_kernels.py verify
    step bench "$PY" bench/gpu_kernels.py bench --out "$OUT"
fi
echo "results in $OUT (exit $status)"
exit $status
