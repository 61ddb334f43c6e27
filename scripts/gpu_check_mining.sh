#!/usr/bin/env bash
# GPU check of `mining run`: the replay backend serves hand-written CUDA candidates
# (tests/fixtures/replay/cuda_suite.jsonl: compile error, slow naive GEMM, wrong, correct) for
# SAMPLES concurrent trajectories; proves build + execute + profile under concurrency and
# reports trajectories/hour and the fraction of time the GPU was busy.
#
#   bash scripts/gpu_check_mining.sh            # SAMPLES=16 CONCURRENCY=16 by default
#   SAMPLES=32 CONCURRENCY=32 bash scripts/gpu_check_mining.sh
#
# Needs python with torch + CUDA, ninja, pyarrow, rich, hydra-core/omegaconf (install them from
# wheels first if missing: WHEELS=dir bash scripts/gpu_check_mining.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python}
SAMPLES=${SAMPLES:-16}
CONCURRENCY=${CONCURRENCY:-16}
OUTDIR=${OUT:-/tmp/kernelmine_gpu_check}
mkdir -p "$OUTDIR"
ROOT="$OUTDIR/data"
rm -rf "$ROOT"

if ! $PY -c "import hydra, omegaconf, rich, pyarrow" 2>/dev/null; then
  if [ -n "${WHEELS:-}" ]; then
    $PY -m pip install -q --no-index --find-links "$WHEELS" hydra-core omegaconf antlr4-python3-runtime rich
  else
    echo "error: hydra-core/omegaconf/rich/pyarrow missing; pass WHEELS=/dir/with/wheels" >&2; exit 2
  fi
fi
$PY -c "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 'error: no CUDA GPU visible')"
$PY tests/fixtures/replay/make_fixtures.py >/dev/null

# GPU utilization sampler (nvidia-smi, else torch.cuda.utilization) every 0.2 s
$PY - "$OUTDIR/util.txt" <<'PYEOF' &
import subprocess, sys, time, shutil
out = open(sys.argv[1], "w", buffering=1)
smi = shutil.which("nvidia-smi")
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

START=$(date +%s.%N)
$PY -m mining run +task=level3 task.ids=[l3_01_mlp] model=replay \
  model.path=tests/fixtures/replay/cuda_suite.jsonl store.root="$ROOT" \
  agents.samples_per_task="$SAMPLES" agents.concurrency="$CONCURRENCY" \
  harness.cache_dir="$OUTDIR/cache" run_id=gpu-check 2>&1 | tee "$OUTDIR/run.log"
END=$(date +%s.%N)
kill $SAMPLER 2>/dev/null || true

$PY - "$ROOT" "$OUTDIR/util.txt" "$START" "$END" <<'PYEOF'
import collections, json, sys
from mining.store import Store
root, util, t0, t1 = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
s = Store(root)
trajs = s.read("trajectories").to_pylist()
turns = s.read("turns").to_pylist()
wall = t1 - t0
vals = [float(l.split()[1]) for l in open(util) if len(l.split()) >= 2 and l.split()[1] != "nan"]
busy = sum(v > 0 for v in vals) / len(vals) if vals else float("nan")
mean_util = sum(vals) / len(vals) if vals else float("nan")
status = collections.Counter(t["status"] for t in turns if t["role"] == "verifier")
builds = [json.loads(t["result_json"]).get("build_s") for t in turns if t["role"] == "verifier" and t["result_json"]]
print(f"trajectories        {len(trajs)} in {wall:.0f} s  ->  {len(trajs) / wall * 3600:.1f} per hour")
print(f"correct             {sum(t['best_correct'] for t in trajs)}/{len(trajs)}; best speedup "
      f"{max((t['best_speedup'] or 0) for t in trajs):.2f}x; stop reasons "
      f"{dict(collections.Counter(t['stop_reason'] for t in trajs))}")
print(f"verifier statuses   {dict(status)}")
print(f"builds              {sum(1 for b in builds if b)} with build_s, max {max([b for b in builds if b] or [0]):.1f} s")
print(f"GPU busy fraction   {busy:.2f} (samples with utilization > 0; mean utilization {mean_util:.1f} %, {len(vals)} samples)")
PYEOF
