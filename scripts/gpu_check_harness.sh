#!/usr/bin/env bash
# On the GPU machine: the harness GPU tests, then the throughput benchmark; logs under $OUT.
#   bash scripts/gpu_check_harness.sh            (BENCH=0 skips the benchmark, TESTS=0 the tests)
set -uo pipefail
OUT=${OUT:-/tmp/km-gpu-out}; mkdir -p "$OUT"
PY=${PYTHON:-python}
# GPU nodes lack pytest/pyyaml: a copy may travel in .device/harness_py (git-ignored)
[ -d .device/harness_py ] && export PYTHONPATH="$PWD/.device/harness_py:$PWD:${PYTHONPATH:-}"
export KERNELMINE_CACHE=${KERNELMINE_CACHE:-$OUT/cache}
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
$PY -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))" | tee -a "$OUT/gpu.txt"
rc=0
if [ "${TESTS:-1}" = 1 ]; then
  $PY -m pytest -q -s -p no:cacheprovider tests/test_harness_gpu.py 2>&1 | tee "$OUT/test_harness_gpu.log" || rc=1
fi
if [ "${BENCH:-1}" = 1 ]; then
  $PY bench/harness_throughput.py ${BENCH_ARGS:-} 2>&1 | tee "$OUT/harness_throughput.log" || rc=1
fi
exit $rc
