#!/usr/bin/env bash
# Scale-out check for a machine with 2+ GPUs (NOT run yet: multi-GPU machines were withheld).
#   bash scripts/gpu_check_scale.sh              (OUT=... CANDS=16 DRY=1 for a CPU syntax/dry run)
# 1. Ray executor: CANDS CUDA candidates over every GPU (count per GPU), then the same batch on
#    1 GPU vs 2 GPUs (throughput ratio; builds are cached after the first, so this is the
#    execution side; the build side scales with CPU cores, not GPUs).
# 2. Data-parallel GRPO: tests/ddp_worker.py on 1 GPU vs torchrun on 2 GPUs, same global batch;
#    LoRA weight difference and grad-norm ratio.
# Needs ray (pip install "ray>=2.9"; its wheel is ~70 MB, too big to carry: the machine must
# have it or reach PyPI). Results: $OUT/summary.txt, ray.json, ddp.txt, logs.
set -uo pipefail
OUT=${OUT:-/tmp/km-gpu-scale}; mkdir -p "$OUT"
PY=${PYTHON:-python3}
CANDS=${CANDS:-16}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
NGPU=$($PY -c "import torch; print(torch.cuda.device_count())" 2>/dev/null || echo 0)
echo "gpus=$NGPU cands=$CANDS" | tee "$OUT/summary.txt"
nvidia-smi --query-gpu=index,name,memory.total --format=csv >> "$OUT/summary.txt" 2>&1
if [ "${DRY:-0}" = 1 ]; then echo "dry run: syntax only" | tee -a "$OUT/summary.txt"; exit 0; fi
if [ "$NGPU" -lt 2 ]; then echo "needs 2+ GPUs, found $NGPU" | tee -a "$OUT/summary.txt"; exit 2; fi
rc=0

# -- 1. Ray executor ------------------------------------------------------------------------
if $PY -c "import ray" 2>/dev/null; then
$PY - "$OUT" "$CANDS" "$NGPU" > "$OUT/ray.log" 2>&1 <<'PY'
import collections, hashlib, json, os, sys, time
from dataclasses import dataclass
from pathlib import Path
import ray
from rewards.executors import make_executor
from rewards.executors.ray_exec import TaskSpec

out, n, ngpu = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
@dataclass
class T:  # the harness needs id, source, hash, small
    id: str; source: str; hash: str; small: dict | None = None
src = Path("tests/candidates/tiny_task.py").read_text()
task = T("tiny", src, hashlib.sha256(src.encode()).hexdigest())
cand = Path("tests/candidates/cuda_gelu.py").read_text()
H = {"device": "cuda", "cache_dir": str(out / "cache"), "timed_calls": 50, "profile": False,
     "compile_baseline": False}
ray.init(include_dashboard=False, log_to_driver=False,  # actors import this checkout
         runtime_env={"env_vars": {"PYTHONPATH": os.getcwd()}})
res = {}
def batch(workers):
    with make_executor({"kind": "ray", "num_gpu_workers": workers}, H) as ex:
        ex.submit(task, cand).result()                     # the one build + task baselines
        for s in ex.slots:                                 # warm every actor's reference
            ray.get(s.actor.evaluate.remote(TaskSpec.of(task), cand))
        t0 = time.perf_counter()
        rs = [f.result() for f in [ex.submit(task, cand) for _ in range(n)]]
        wall = time.perf_counter() - t0
    return rs, wall
rs, wall = batch(ngpu)
per_gpu = collections.Counter(r.evidence.get("executor_gpu") for r in rs)
res["all_gpus"] = {"workers": ngpu, "wall_s": wall, "per_gpu": dict(per_gpu),
                   "status": dict(collections.Counter(r.status for r in rs))}
for w in (1, 2):
    rs, wall = batch(w)
    res[f"gpus_{w}"] = {"wall_s": wall, "cands_per_s": n / wall,
                        "status": dict(collections.Counter(r.status for r in rs))}
res["speedup_2_vs_1"] = res["gpus_2"]["cands_per_s"] / res["gpus_1"]["cands_per_s"]
ok = (len(per_gpu) == ngpu and res["all_gpus"]["status"] == {"ok": n}
      and res["speedup_2_vs_1"] > 1.6)
res["ok"] = ok
(out / "ray.json").write_text(json.dumps(res, indent=2))
print(json.dumps(res, indent=2))
sys.exit(0 if ok else 1)
PY
r=$?; [ $r -ne 0 ] && rc=1
echo "ray executor rc=$r: $(tr -d '\n ' < "$OUT/ray.json" 2>/dev/null | head -c 600)" | tee -a "$OUT/summary.txt"
else
  echo "ray executor: SKIPPED (ray not installed)" | tee -a "$OUT/summary.txt"; rc=1
fi

# -- 2. DDP vs single GPU ---------------------------------------------------------------------
TINY="$OUT/tiny"; DDP="$OUT/ddp"
$PY -m agents.tiny_model "$TINY" > "$OUT/ddp.log" 2>&1
export KM_DDP_DEVICE=cuda
$PY tests/ddp_worker.py update "$TINY" "$DDP" >> "$OUT/ddp.log" 2>&1 \
  && $PY -m torch.distributed.run --standalone --nproc-per-node 2 tests/ddp_worker.py update "$TINY" "$DDP" >> "$OUT/ddp.log" 2>&1 \
  && $PY tests/ddp_worker.py update "$TINY" "$DDP/again" >> "$OUT/ddp.log" 2>&1
$PY - "$DDP" > "$OUT/ddp.txt" 2>&1 <<'PY'
import json, sys, torch
d = sys.argv[1]
one, two, again = (torch.load(f"{d}/{p}") for p in ("update-w1-r0.pt", "update-w2-r0.pt", "again/update-w1-r0.pt"))
dd = max(float((one[k] - two[k]).abs().max()) for k in one)
noise = max(float((one[k] - again[k]).abs().max()) for k in one)   # 1 GPU run-to-run
moved = max(float(one[k].abs().max()) for k in one if "lora_B" in k)
g1 = json.load(open(f"{d}/update-w1-r0.json"))["grad_norm"]; g2 = json.load(open(f"{d}/update-w2-r0.json"))["grad_norm"]
print(f"max |w(2 GPUs) - w(1 GPU)| = {dd:.2e}; 1-GPU run-to-run {noise:.2e}; lora_B moved {moved:.2e}")
print("grad_norm 1 GPU", g1, "2 GPUs", g2)
ok = moved > 1e-3 and dd < max(3e-5, 10 * noise) and all(abs(a - b) <= 1e-3 * abs(a) + 1e-6 for a, b in zip(g1, g2))
print("DDP matches single GPU:", ok)
sys.exit(0 if ok else 1)
PY
r=$?; [ $r -ne 0 ] && rc=1
cat "$OUT/ddp.txt" | tee -a "$OUT/summary.txt"
echo "overall rc=$rc" | tee -a "$OUT/summary.txt"
exit $rc
