#!/usr/bin/env bash
# Every GPU check of the project, stage by stage, with the results folded into at most 8 files
# under $OUT (what the device tool brings back). The whole set takes about 15 minutes on one
# H200, more than one device call allows, so run it as two calls:
#   STAGES=harness,profiles bash scripts/gpu_check_all.sh     (~8 min)
#   STAGES=pipeline bash scripts/gpu_check_all.sh             (~7 min: mining, split+score, cycle)
# Stages: probe (what a fresh worker pays in the GPU slot), harness (GPU tests + throughput bench;
# BENCH=0: tests only), bench (the bench only), profiles (capture + profiling GPU tests;
# CAPTURE=0: tests only), pipeline. FAIL_FAST=1 stops at the first failing stage.
# Needs hydra-core/omegaconf/antlr4 wheels in .whl/ for the pipeline (carry .whl).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/km-gpu-out}; mkdir -p "$OUT"
STAGES=${STAGES:-harness,profiles,pipeline}
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
W=$(mktemp -d /tmp/km-all-XXXX); rc=0
for s in ${STAGES//,/ }; do
  t0=$(date +%s)
  case $s in
    probe)    mkdir -p "$W/probe" && PYTHONPATH="$PWD:${PYTHONPATH:-}" timeout 200 python3 scripts/probe_slot_costs.py \
                > "$W/probe/probe.txt" 2> "$W/probe.out" ;;
    harness)  OUT=$W/harness bash scripts/gpu_check_harness.sh > "$W/harness.out" 2>&1 ;;
    bench)    OUT=$W/bench TESTS=0 BENCH=1 bash scripts/gpu_check_harness.sh > "$W/bench.out" 2>&1 ;;
    profiles) OUT=$W/profiles CPU_TESTS=0 bash scripts/gpu_capture_profiles.sh > "$W/profiles.out" 2>&1 ;;
    pipeline) OUT=$W/pipeline bash scripts/gpu_check_pipeline.sh > "$W/pipeline.out" 2>&1 ;;
    *) echo "unknown stage '$s' (probe, harness, bench, profiles, pipeline)" >&2; exit 2 ;;
  esac
  r=$?; [ $r -ne 0 ] && rc=1
  echo "== $s: rc=$r in $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
  cat "$W/$s"/summary.txt >> "$OUT/summary.txt" 2>/dev/null
  # logs of the stage in one file; fixtures and bench logs kept whole
  for f in "$W/$s.out" "$W/$s"/*.log "$W/$s"/*.txt; do [ -f "$f" ] && { echo "### $f"; cat "$f"; }; done > "$OUT/$s.log"
  for f in harness_throughput.log sysprof_events.json ncu_raw.json; do [ -f "$W/$s/$f" ] && cp "$W/$s/$f" "$OUT/"; done
  [ $r -ne 0 ] && [ "${FAIL_FAST:-0}" = 1 ] && { echo "FAIL_FAST: stopped after $s" >> "$OUT/summary.txt"; break; }
done
cat "$OUT/summary.txt"
exit $rc
