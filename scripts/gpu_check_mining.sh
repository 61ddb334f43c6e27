#!/usr/bin/env bash
# GPU check of `mining run`: the replay backend serves hand-written CUDA candidates
# (tests/fixtures/replay/cuda_suite.jsonl: a compile error, a correct but slow one, a wrong one,
# the correct fused epilogue) to SAMPLES trajectories, CONCURRENCY at once. Proves build +
# execute + profile under concurrency; reports trajectories/hour and the GPU busy fraction.
#
#   bash scripts/gpu_check_mining.sh                 # SAMPLES=4 CONCURRENCY=4; ~2.5 min on an H200
#   DRY=1 bash scripts/gpu_check_mining.sh           # the same on CPU (pure-PyTorch candidates)
# Writes $OUT/mining.txt (summary) and $OUT/mining.log; the store goes to $ROOT (see common).
set -uo pipefail
. "$(dirname "$0")/gpu_check_common.sh"
require_cli
SAMPLES=${SAMPLES:-4}
CONCURRENCY=${CONCURRENCY:-$SAMPLES}
rm -rf "$ROOT"
if [ "$DEVICE" = cuda ]; then FIXTURE=tests/fixtures/replay/cuda_suite.jsonl; else FIXTURE=$(cpu_replay); fi

# GPU utilisation every 0.2 s (nvidia-smi, else torch.cuda.utilization); nothing on CPU
if [ "$DEVICE" = cuda ]; then
  $PY - "$WORK/util.txt" <<'PYEOF' &
import shutil, subprocess, sys, time
out, smi = open(sys.argv[1], "w", buffering=1), shutil.which("nvidia-smi")
def sample():
    if smi:
        r = subprocess.run([smi, "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=5)
        return float(r.stdout.split()[0])
    import torch
    return float(torch.cuda.utilization(0))
while True:
    try:
        out.write(f"{time.time():.2f} {sample():.1f}\n")
    except Exception as e:
        out.write(f"{time.time():.2f} nan {e}\n")
    time.sleep(0.2)
PYEOF
  SAMPLER=$!
  trap 'kill $SAMPLER 2>/dev/null || true' EXIT
else
  : > "$WORK/util.txt"
fi

START=$(date +%s.%N)
$PY -m mining run +task=level3 task.ids=[l3_01_mlp] model=replay model.path="$FIXTURE" \
  store.root="$ROOT" "${HARNESS[@]}" agents.samples_per_task="$SAMPLES" \
  agents.concurrency="$CONCURRENCY" agents.max_turns="${MAX_TURNS:-6}" run_id=gpu-check \
  > "$OUT/mining.log" 2>&1
rc=$?
END=$(date +%s.%N)
[ -n "${SAMPLER:-}" ] && kill "$SAMPLER" 2>/dev/null
tail -n 15 "$OUT/mining.log"

$PY - "$ROOT" "$WORK/util.txt" "$START" "$END" "$CONCURRENCY" "$rc" > "$OUT/mining.txt" <<'PYEOF'
import collections, json, sys
from mining.store import Store
root, util, t0, t1, conc, rc = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5], sys.argv[6]
s = Store(root)
trajs, turns = s.read("trajectories").to_pylist(), s.read("turns").to_pylist()
wall = t1 - t0
vals = [float(x.split()[1]) for x in open(util) if len(x.split()) >= 2 and x.split()[1] != "nan"]
ver = [t for t in turns if t["role"] == "verifier"]
res = [json.loads(t["result_json"]) for t in ver if t["result_json"]]
builds = [r["build_s"] for r in res if r.get("build_s") and not r.get("cache_hit")]
print(f"mining rc={rc}: {len(trajs)} trajectories in {wall:.0f} s at concurrency {conc} -> "
      f"{len(trajs) / wall * 3600:.1f} trajectories/hour")
print(f"correct {sum(t['best_correct'] for t in trajs)}/{len(trajs)}; best speedup "
      f"{max([t['best_speedup'] or 0 for t in trajs] or [0]):.2f}x; stop reasons "
      f"{dict(collections.Counter(t['stop_reason'] for t in trajs))}")
print(f"verifier statuses {dict(collections.Counter(t['status'] for t in ver))}")
sp = sorted(round(r["speedup"], 2) for r in res if r.get("speedup"))
print(f"speedups of correct candidates {sp}")
print(f"builds (cache misses) {len(builds)}, max {max(builds or [0]):.1f} s")
if vals:
    print(f"GPU busy fraction {sum(v > 0 for v in vals) / len(vals):.2f} (share of 0.2 s samples with "
          f"utilization > 0; mean utilization {sum(vals) / len(vals):.1f} %, {len(vals)} samples)")
else:
    print("GPU busy fraction: n/a (no GPU samples)")
sys.exit(0 if rc == "0" and trajs else 1)
PYEOF
crc=$?
cat "$OUT/mining.txt"
[ $rc -eq 0 ] && [ $crc -eq 0 ]
