#!/usr/bin/env bash
# On the GPU machine: one mine-and-train cycle of two rounds with a tiny locally built model
# and the embedded level3 suite (nothing downloaded). Round 2's Coder must load round 1's
# checkpoint. Logs and the step-time split (generation / reward / update) land under $OUT.
#   bash scripts/gpu_check_train.sh          (ROUNDS=2 STEPS=3 TASKS=l3_01_deep_mlp,...)
set -uo pipefail
OUT=${OUT:-/tmp/km-gpu-train}; mkdir -p "$OUT"
PY=${PYTHON:-python}
export KERNELMINE_CACHE=${KERNELMINE_CACHE:-$OUT/cache}
ROOT="$OUT/data"; TINY="$OUT/tiny-model"
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
$PY -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))" | tee -a "$OUT/gpu.txt"
# the CLI needs hydra/omegaconf; bring them as wheels when they are missing (DESIGN.md)
if ! $PY -c "import hydra, omegaconf" 2>/dev/null; then
  if ls shared/wheels/*.whl >/dev/null 2>&1; then $PY -m pip install -q --no-index shared/wheels/*.whl;
  else echo "hydra-core/omegaconf missing and no shared/wheels/*.whl to install" | tee "$OUT/error.txt"; exit 2; fi
fi
$PY -m agents.tiny_model "$TINY" > "$OUT/tiny_model.txt" 2>&1 || { cat "$OUT/tiny_model.txt"; exit 1; }
ARGS=(store.root="$ROOT" model=hf model.path="$TINY" model.sampling.max_tokens=${MAX_TOKENS:-128}
      +rounds=${ROUNDS:-2} run_id=gpucheck train.steps=${STEPS:-3} train.group_size=4
      train.prompts_per_step=2 train.grad_accum=2 train.max_completion_length=${MAX_TOKENS:-128}
      train.lr=1e-4 train.prompts_from_tasks=true train.max_prompts=4 train.device=cuda
      agents.samples_per_task=1 agents.max_turns=${MAX_TURNS:-4})
[ -n "${TASKS:-}" ] && ARGS+=(task.ids="[${TASKS}]")
t0=$(date +%s)
$PY -m mining cycle "${ARGS[@]}" > "$OUT/cycle.jsonl" 2> "$OUT/cycle.log"; rc=$?
echo "cycle rc=$rc wall=$(( $(date +%s) - t0 ))s" | tee "$OUT/summary.txt"
tail -n 30 "$OUT/cycle.log"
cat "$OUT/cycle.jsonl"
# checks: two checkpoints, round 2's coder adapter == round 1's checkpoint adapter; time split
$PY - "$OUT/cycle.jsonl" "$ROOT" > "$OUT/check.txt" <<'PY'

import json, sys, glob
recs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
ok = len(recs) >= 2 and recs[1]["coder_adapter"] == recs[0]["adapter"]
print("round2 uses round1 checkpoint:", ok)
for r in recs:
    t = r["train_split_s"]; tot = t["step_s"] or 1.0
    print(f"round {r['round']}: checkpoint {r['checkpoint']}  stages {r['stage_s']}  train: "
          f"generation {t['gen_s']:.2f}s ({t['gen_s']/tot:.0%}), reward {t['eval_s']:.2f}s "
          f"(blocking {t['reward_wait_s']:.2f}s), update {t['update_s']:.2f}s, step total {tot:.2f}s")
for p in sorted(glob.glob(f"{sys.argv[2]}/train/*.jsonl")):
    rows = [json.loads(l) for l in open(p)]
    print(p.split('/')[-1], "steps", len(rows), "mean step_s",
          round(sum(x["step_s"] for x in rows) / len(rows), 3))
sys.exit(0 if ok else 1)
PY
crc=$?
cat "$OUT/check.txt" | tee -a "$OUT/summary.txt"
[ $rc -eq 0 ] && [ $crc -eq 0 ]
