#!/usr/bin/env bash
# Issues 15 and 18 on the GPU machine, resumable over several device calls of at most 10 minutes:
#   tests   the GPU tests of the harness, profiling and red-team (KernelBench semantics included;
#           about 5 min for the first two files, the red-team live cases longer)
#   import  `python -m mining eval <one real KernelBench run dir>` (scripts/gpu_check_import.sh)
#   bench   bench/real_code.py over every hand-labelled public program, appended to
#           $STATE/real_code_h200.jsonl (programs already there are skipped)
# State that must outlive a call (the bench's results, the import's store) lives in $STATE, inside
# the carried corpus folder; after each call copy $OUT/real_code_h200.jsonl and
# $OUT/import_store.tar.gz back into it (untar the store there) and carry it again.
#   device run, carry [".whl", "bench/real_code/data"]:
#   STAGES=tests,import,bench DEADLINE_S=560 bash scripts/gpu_check_realcode.sh
# Then on CPU: python bench/real_code.py --replay bench/real_code/data/gpu_state/real_code_h200.jsonl
set -uo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s)
export OUT=${OUT:-/tmp/km-gpu-out} PYTHONUNBUFFERED=1; mkdir -p "$OUT"
STATE=${STATE:-bench/real_code/data/gpu_state}; mkdir -p "$STATE"
export WORK=${WORK:-/tmp/km-gpu-work}; mkdir -p "$WORK"
DEADLINE_DEFAULT_S=560; source scripts/gpu_bounded.sh   # wheels, PYTHONPATH, left()
rc=0
STAGES=${STAGES:-tests,import,bench}
for s in ${STAGES//,/ }; do
  budget=$(left); [ "$budget" -lt 30 ] && { echo "== $s: skipped, ${budget}s left" >> "$OUT/summary.txt"; continue; }
  t=$(date +%s)
  case $s in
    tests)
      timeout -k 15 $(( budget < ${TEST_LIMIT_S:-420} ? budget : ${TEST_LIMIT_S:-420} )) \
        python3 -m pytest -v -p no:cacheprovider --durations=15 -m gpu tests/test_harness_gpu.py \
        tests/test_profiling_gpu.py tests/test_rewards_redteam.py > "$OUT/tests.log" 2>&1 || rc=1
      echo "== tests: $(tail -n 1 "$OUT/tests.log")" >> "$OUT/summary.txt" ;;
    import)
      # the store of an earlier call, carried in $STATE, is resumed (RESUME=1)
      if [ -d "$STATE/import_data" ]; then cp -r "$STATE/import_data" "$WORK/"; export RESUME=1; fi
      TIMEOUT=$(( budget - 130 )) bash scripts/gpu_check_import.sh > "$WORK/import.out" 2>&1 || rc=1
      echo "== import ($(( $(date +%s) - t )) s):" >> "$OUT/summary.txt"
      cat "$OUT/import.txt" >> "$OUT/summary.txt" 2>/dev/null ;;
    bench)
      # the import's build cache is reused: programs of its run are not built again
      timeout -k 20 $(( budget - 25 )) python3 bench/real_code.py --out "$STATE/real_code_h200.jsonl" ${SHARD:+--shard $SHARD} \
        cache_dir="$WORK/cache" timed_calls=${CALLS:-30} profiling.nsys.enabled=false \
        > "$OUT/bench.log" 2>&1
      echo "bench exit status $?" >> "$OUT/bench.log"   # 124: cut by the deadline (resumable)
      cp "$STATE/real_code_h200.jsonl" "$OUT/" 2>/dev/null
      echo "== bench ($(( $(date +%s) - t )) s): $(wc -l < "$STATE/real_code_h200.jsonl") programs recorded" \
        >> "$OUT/summary.txt"
      grep '^\[[0-9]' "$OUT/bench.log" | tail -n 1 >> "$OUT/summary.txt"   # this call's programs per minute
      tail -n 40 "$OUT/bench.log" | grep -v '^\[' >> "$OUT/summary.txt" ;;
    *) echo "unknown stage '$s' (tests, import, bench)" >&2; exit 2 ;;
  esac
done
cat "$OUT/summary.txt"
exit $rc
