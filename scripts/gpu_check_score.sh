#!/usr/bin/env bash
# GPU check of `split` + `score` over the store the mining check wrote ($ROOT): every sample is
# rebuilt (cache shared with mining), re-run on the GPU and rewarded; reports counts and timing.
#
#   bash scripts/gpu_check_score.sh          # after scripts/gpu_check_mining.sh; ~1 min on an H200
#   DRY=1 bash scripts/gpu_check_score.sh    # on CPU, after DRY=1 bash scripts/gpu_check_mining.sh
# Writes $OUT/score.txt (summary) and $OUT/score.log.
set -uo pipefail
. "$(dirname "$0")/gpu_check_common.sh"
require_cli
t0=$(date +%s.%N)
$PY -m mining split store.root="$ROOT" +task=level3 > "$OUT/score.log" 2>&1; src=$?
t1=$(date +%s.%N)
$PY -m mining score store.root="$ROOT" +task=level3 "${HARNESS[@]}" >> "$OUT/score.log" 2>&1; rc=$?
t2=$(date +%s.%N)
tail -n 15 "$OUT/score.log"
$PY - "$ROOT" "$t0" "$t1" "$t2" "$src" "$rc" > "$OUT/score.txt" <<'PYEOF'
import collections, json, statistics, sys
from mining.store import Store
root, t0, t1, t2, src, rc = sys.argv[1], *map(float, sys.argv[2:5]), sys.argv[5], sys.argv[6]
s = Store(root)
samples, scores = s.read("samples").to_pylist(), s.read("scores").to_pylist()
print(f"split rc={src} in {t1 - t0:.1f} s: {len(samples)} samples "
      f"(skill 1: {sum(x['skill'] == 1 for x in samples)}, skill 2: {sum(x['skill'] == 2 for x in samples)}, "
      f"negatives: {sum(bool(x['negative']) for x in samples)})")
print(f"score rc={rc} in {t2 - t1:.1f} s: {len(scores)} scores, "
      f"{(t2 - t1) / max(1, len(scores)):.1f} s per sample wall; statuses "
      f"{dict(collections.Counter(x['status'] for x in scores))}; correct {sum(x['correct'] for x in scores)}")
res = [json.loads(x["result_json"]) for x in scores]
gpus = {x["gpu"] for x in scores}
print(f"scored on {sorted(map(str, gpus))}; reward mean "
      f"{statistics.fmean([x['reward'] for x in scores if x['reward'] is not None] or [float('nan')]):.3f}; "
      f"speedups {sorted(round(x['speedup'], 2) for x in scores if x['speedup'])}; "
      f"vs torch.compile {sorted(round(x['speedup_vs_compile'], 2) for x in scores if x['speedup_vs_compile'])}")
print(f"builds: {sum(bool(r.get('cache_hit')) for r in res)} cache hits of {len(res)}; "
      f"build_s max {max([r.get('build_s') or 0 for r in res] or [0]):.1f}")
sys.exit(0 if src == "0" and rc == "0" and scores and len(scores) == len([x for x in samples if x.get('code')]) else 1)
PYEOF
crc=$?
cat "$OUT/score.txt"
[ $src -eq 0 ] && [ $rc -eq 0 ] && [ $crc -eq 0 ]
