#!/usr/bin/env bash
# GPU check of `cycle`: two rounds of mine, split, score, train with a tiny locally built model
# (nothing downloaded) on the embedded suite. Round 2's Coder must load round 1's checkpoint.
# Reports the train step time split into generation, reward and update.
#
#   bash scripts/gpu_check_train.sh          # ROUNDS=2 STEPS=3; ~2 min on an H200
#   DRY=1 bash scripts/gpu_check_train.sh    # the same on CPU
# Writes $OUT/cycle.txt (summary) and $OUT/cycle.log; its store is $WORK/cycle.
set -uo pipefail
. "$(dirname "$0")/gpu_check_common.sh"
require_cli
TINY="$WORK/tiny-model"; CROOT="$WORK/cycle"
rm -rf "$CROOT"
[ -f "$TINY/config.json" ] || $PY -m agents.tiny_model "$TINY" > "$OUT/cycle.log" 2>&1 \
  || { tail -n 20 "$OUT/cycle.log"; exit 1; }
MAXTOK=${MAX_TOKENS:-128}
ARGS=(store.root="$CROOT" "${HARNESS[@]}" +task=level3 task.ids=[${TASKS:-l3_01_mlp}]
      model=hf model.path="$TINY" model.sampling.max_tokens="$MAXTOK" rounds="${ROUNDS:-2}"
      run_id=gpucheck train.steps="${STEPS:-3}" train.group_size=4 train.prompts_per_step=2
      train.grad_accum=2 train.max_completion_length="$MAXTOK" train.lr=1e-4
      train.prompts_from_tasks=true train.max_prompts=4 train.device="$DEVICE"
      train.log.tensorboard=false agents.samples_per_task=1 agents.max_turns="${MAX_TURNS:-4}")
t0=$(date +%s)
$PY -m mining cycle "${ARGS[@]}" > "$WORK/cycle.jsonl" 2>> "$OUT/cycle.log"; rc=$?
echo "cycle rc=$rc wall=$(( $(date +%s) - t0 ))s" > "$OUT/cycle.txt"
tail -n 20 "$OUT/cycle.log"
# two checkpoints; round 2's coder adapter is round 1's checkpoint adapter; the time split
$PY - "$WORK/cycle.jsonl" "$CROOT" >> "$OUT/cycle.txt" <<'PYEOF'
import glob, json, sys
from mining.store import Store
recs = [json.loads(x) for x in open(sys.argv[1]) if x.startswith("{")]
ck = Store(sys.argv[2]).read("checkpoints").to_pylist()
ok = len(recs) >= 2 and recs[0]["coder_adapter"] is None and recs[1]["coder_adapter"] == recs[0]["adapter"]
meta = {r["round"]: json.loads(r["metadata_json"] or "{}") for r in ck}
ok = ok and meta.get(1, {}).get("config", {}).get("adapter") == recs[0]["adapter"]
print(f"round 2 uses round 1's checkpoint (coder adapter and train start): {ok}; checkpoints {len(ck)}")
for r in recs:  # shares of the trainer thread's time; reward evaluation overlaps generation
    t = r["train_split_s"]; tot = (t["gen_s"] + t["reward_wait_s"] + t["update_s"]) or 1.0
    print(f"round {r['round']}: checkpoint {r['checkpoint']} reward {r['reward_first']} -> {r['reward_last']}; "
          f"stage s {r['stage_s']}; train step time: generation {t['gen_s']:.2f}s ({t['gen_s'] / tot:.0%}), "
          f"reward {t['reward_wait_s']:.2f}s blocking ({t['reward_wait_s'] / tot:.0%}; {t['eval_s']:.2f}s of "
          f"evaluation in all, overlapped), update {t['update_s']:.2f}s ({t['update_s'] / tot:.0%})")
for p in sorted(glob.glob(f"{sys.argv[2]}/train/*.jsonl")):
    rows = [json.loads(x) for x in open(p)]
    print(p.split("/")[-1], "steps", len(rows), "mean step_s",
          round(sum(x["step_s"] for x in rows) / max(1, len(rows)), 3))
sys.exit(0 if ok else 1)
PYEOF
crc=$?
cat "$OUT/cycle.txt"
[ $rc -eq 0 ] && [ $crc -eq 0 ]
