#!/usr/bin/env bash
# On the GPU machine: the harness GPU tests (CUDA gelu cases, then KernelBench semantics: train mode,
# shared names, TF32, ScriptModule profiling, a forced profiler failure, unverifiable, dropout), then the
# throughput benchmark in what is left of TOTAL_S; under 6 minutes.
#   OUT=/some/dir bash scripts/gpu_check_harness.sh     (BENCH=0 skips the benchmark, TESTS=0 the tests)
#   DRY=1 bash scripts/gpu_check_harness.sh             (CPU machine: the same steps, CPU bench mode)
# Writes $OUT/gpu.txt, $OUT/test_harness_gpu.log, $OUT/harness_throughput.log and $OUT/summary.txt.
set -uo pipefail
OUT=${OUT:-/tmp/km-gpu-out}; mkdir -p "$OUT"
PY=${PYTHON:-python3}
# GPU nodes may lack pytest/pyyaml: a copy may travel in .device/harness_py (git-ignored)
[ -d .device/harness_py ] && export PYTHONPATH="$PWD/.device/harness_py:${PYTHONPATH:-}"
export PYTHONPATH="$PWD:${PYTHONPATH:-}"
export KERNELMINE_CACHE=${KERNELMINE_CACHE:-$(mktemp -d /tmp/km-cache-XXXX)}   # fresh: builds are measured
T0=$(date +%s)
if [ "${DRY:-0}" = 1 ]; then BENCH_ARGS=${BENCH_ARGS:---dry --cv}; fi
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv 2>&1 || true; nproc; } > "$OUT/gpu.txt"
$PY -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available() and torch.cuda.get_device_name(0))" >> "$OUT/gpu.txt" 2>&1
rc=0
if [ "${TESTS:-1}" = 1 ]; then
  # SIGTERM first: the bench then kills its workers; workers also die with their parent (pdeathsig)
  timeout --foreground -k 15 ${TEST_LIMIT_S:-240} $PY -m pytest -q -s -p no:cacheprovider tests/test_harness_gpu.py \
    > "$OUT/test_harness_gpu.log" 2>&1 || rc=1
  echo "tests: $(tail -1 "$OUT/test_harness_gpu.log") [$(( $(date +%s) - T0 )) s]" | tee -a "$OUT/summary.txt"
fi
if [ "${BENCH:-1}" = 1 ]; then
  # whatever the tests left of the TOTAL_S budget (the harness table prints first; CV prints last)
  left=$(( ${TOTAL_S:-345} - ($(date +%s) - T0) - 20 ))
  timeout --foreground -k 15 ${BENCH_LIMIT_S:-$left} $PY bench/harness_throughput.py --deadline $(( ${BENCH_LIMIT_S:-$left} - 20 )) ${BENCH_ARGS:-} \
    > "$OUT/harness_throughput.log" 2>&1 || rc=1
  { echo "bench [$(( $(date +%s) - T0 )) s]:"; grep -v '^\[' "$OUT/harness_throughput.log" | tail -30; } | tee -a "$OUT/summary.txt"
fi
exit $rc
