#!/usr/bin/env bash
# Issues 16 (sandbox, verified caches) and 17 (GPU lock scope, faster builds, throughput) on the GPU
# machine in one device call, each stage bounded by what is left of DEADLINE_S:
#   import      finish a carried `mining eval` store (gpu_check_realcode.sh STAGES=import): the
#               real-program run through the new scheduler and the sandbox (evidence.sandbox)
#   tests       GPU tests: the sandbox on a CUDA candidate, the attack suite (CPU, as root there), no
#               overlap of timed sections with 8 candidates over 2 tasks, the split build equal to the
#               original (TEST_FILES picks; TESTS_S bounds each file)
#   buildspeed  bench/build_speed.py: original vs fast recipe, 8 builds at once (BUILD_ARGS: e.g.
#               "--recipes fast,fast-fullpch", the light headers' PCH against the full one)
#   sandboxcost bench/sandbox_cost.py: a worker's spawn, hello and clean-up, sandbox off vs best
#   throughput  bench/harness_throughput.py: this harness vs KernelBench's batch recipe; its progress log goes
#               straight to $OUT/throughput.log, so a run cut at the device limit still returns it
#   throughput2 the same with THROUGHPUT2_ARGS (a second comparison in one call; $OUT/throughput2.*)
#   device run, carry [".whl", "bench/real_code/data"]:
#   STAGES=import,tests,buildspeed,throughput DEADLINE_S=500 bash scripts/gpu_check_sandbox_speed.sh
set -uo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s)
export OUT=${OUT:-/tmp/km-gpu-out} PYTHONUNBUFFERED=1; mkdir -p "$OUT"
export WORK=${WORK:-/tmp/km-gpu-work}; mkdir -p "$WORK"
DEADLINE_DEFAULT_S=500; source scripts/gpu_bounded.sh   # wheels, PYTHONPATH, left()
cap() { local b; b=$(left); echo $(( b < $1 ? b : $1 )); }   # a stage's limit: its own, or what is left
rc=0
STAGES=${STAGES:-import,tests,buildspeed,throughput}
for s in ${STAGES//,/ }; do
  [ "$(left)" -lt 40 ] && { echo "== $s: skipped, $(left)s left" >> "$OUT/summary.txt"; continue; }
  t=$(date +%s)
  case $s in
    import)
      DEADLINE_S=$(cap ${IMPORT_S:-190}) STAGES=import bash scripts/gpu_check_realcode.sh > "$WORK/import_stage.log" 2>&1 || rc=1
      python3 - "$WORK/import_data" >> "$OUT/summary.txt" 2>&1 <<'PYEOF' || true
import collections, json, sys
from mining.store import Store
sc = Store(sys.argv[1]).read("scores").to_pylist()
sb = collections.Counter(json.dumps(json.loads(x["result_json"])["evidence"].get("sandbox"), sort_keys=True)
                         for x in sc if x["result_json"])
print("evidence.sandbox over", len(sc), "scores:", dict(sb))
PYEOF
      ;;
    tests)  # one pytest per file, each bounded: a cut file still leaves the others' failure reasons
      for f in ${TEST_FILES:-tests/test_sandbox_gpu.py tests/test_sandbox_attacks.py tests/test_harness_lock.py tests/test_buildspeed.py}; do
        m=gpu; [ "$f" = tests/test_sandbox_attacks.py ] && m="slow or not slow"  # the CPU attack suite, as root there
        n=$(basename "$f" .py)
        timeout -k 15 "$(cap ${TESTS_S:-170})" python3 -m pytest -v -p no:cacheprovider --tb=short -m "$m" "$f" \
          > "$OUT/$n.log" 2>&1 || rc=1
        echo "== $n ($(( $(date +%s) - t )) s): $(tail -n 1 "$OUT/$n.log")" >> "$OUT/summary.txt"
        grep -E "PASSED|FAILED|SKIPPED|ERROR|sandbox evidence|^E " "$OUT/$n.log" | cut -c1-400 | head -40 >> "$OUT/summary.txt"
      done ;;
    buildspeed)
      timeout -k 15 "$(cap ${BUILD_S:-150})" python3 bench/build_speed.py --jobs 8 -n ${BUILD_N:-8} ${BUILD_ARGS:-} \
        --out "$OUT/build_speed.txt" > "$WORK/build_speed.log" 2>&1 || rc=1
      echo "== buildspeed ($(( $(date +%s) - t )) s):" >> "$OUT/summary.txt"
      tail -n 25 "$WORK/build_speed.log" >> "$OUT/summary.txt" ;;
    sandboxcost)  # worker spawn + hello + clean-up, sandbox off vs best (issue 16's cost per candidate)
      timeout -k 10 "$(cap ${COST_S:-150})" python3 bench/sandbox_cost.py --n ${COST_N:-4} > "$OUT/sandbox_cost.txt" 2>&1 || rc=1
      echo "== sandboxcost ($(( $(date +%s) - t )) s):" >> "$OUT/summary.txt"
      tail -n 8 "$OUT/sandbox_cost.txt" >> "$OUT/summary.txt" ;;
    throughput|throughput2)  # throughput2: a second comparison in the same call (THROUGHPUT2_ARGS)
      args=${THROUGHPUT_ARGS:-}; [ "$s" = throughput2 ] && args=${THROUGHPUT2_ARGS:-}
      b=$(cap 600); timeout -k 15 "$b" python3 bench/harness_throughput.py --deadline $(( b - 20 )) \
        $args --out "$OUT/$s.txt" > "$OUT/$s.log" 2>&1 || rc=1
      echo "== $s ($(( $(date +%s) - t )) s):" >> "$OUT/summary.txt"
      tail -n 40 "$OUT/$s.log" >> "$OUT/summary.txt" ;;
    *) echo "unknown stage '$s' (import, tests, buildspeed, sandboxcost, throughput, throughput2)" >&2; exit 2 ;;
  esac
done
cat "$OUT/summary.txt"
exit $rc
