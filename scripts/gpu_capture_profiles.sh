#!/usr/bin/env bash
# On the GPU machine: capture two-level profiles (2 tasks + 2 candidates), run the profiling GPU
# tests, then the CPU profiling tests on the captured fixtures. Results under $OUT (5 files).
#   bash scripts/gpu_capture_profiles.sh        (DRY=1: check inputs only, no GPU)
set -uo pipefail
OUT=${OUT:-/tmp/km-gpu-out}; mkdir -p "$OUT"
PY=${PYTHON:-python3}
if ls .whl/*.whl >/dev/null 2>&1; then  # hydra/omegaconf/antlr4 (+pyyaml) carried by the lead
  $PY -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
[ -d .device/harness_py ] && export PYTHONPATH="$PWD/.device/harness_py:${PYTHONPATH:-}"
export PYTHONPATH="$PWD:${PYTHONPATH:-}"
export KM_PROFILE_CACHE=${KM_PROFILE_CACHE:-/tmp/km-prof-cache}   # never under $OUT (8 files come back)
if [ "${DRY:-0}" = 1 ]; then
  exec $PY scripts/capture_profiles.py --out "$OUT" --cache "$KM_PROFILE_CACHE" --dry
fi
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; which ncu nsys; ncu --version | tail -1; } > "$OUT/env.txt" 2>&1
rc=0
t0=$(date +%s)
if [ "${CAPTURE:-1}" = 1 ]; then
  timeout ${CAPTURE_LIMIT_S:-240} $PY scripts/capture_profiles.py --out "$OUT" --cache "$KM_PROFILE_CACHE" 2>&1 | tee "$OUT/capture.log" || rc=1
  echo "capture wall: $(( $(date +%s) - t0 )) s" | tee -a "$OUT/capture.log"
fi
# GPU tests reuse the capture's build/baseline/ncu caches; CPU tests read the captured fixtures
{ timeout ${GPU_TESTS_LIMIT_S:-150} $PY -m pytest -q -p no:cacheprovider tests/test_profiling_gpu.py || rc=1
  if [ "${CPU_TESTS:-1}" = 1 ]; then  # CPU tests on the fresh captures (CPU_TESTS=0: run them elsewhere)
    KM_PROFILE_FIXTURES="$OUT" timeout 60 $PY -m pytest -q -p no:cacheprovider tests/test_profiling.py || rc=1; fi; } 2>&1 | tee "$OUT/tests.log"
exit $rc
