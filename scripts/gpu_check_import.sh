#!/usr/bin/env bash
# GPU check of `python -m mining eval <KernelBench run dir>`: one real public Level 3 run (>= 50
# programs, KernelBench's eval_results.json beside them) imported, scored on the GPU in one
# harness session, and its disagreements with KernelBench's recorded verdicts counted.
#
#   bash scripts/gpu_check_import.sh          # carry bench/real_code/data (scripts/fetch_real_code.py)
#   RUN=yenhao-huang__KernelBench/runs/qwen36_retime_l3 bash scripts/gpu_check_import.sh
#   DRY=1 LIMIT=3 bash scripts/gpu_check_import.sh    # on CPU: CUDA programs fail to build, bookkeeping only
#   RESUME=1 bash scripts/gpu_check_import.sh          # the first call hit TIMEOUT (540 s): finish it
# A SIGTERM (timeout) writes every finished result first; the next call scores only the rest.
# Writes $OUT/import.txt (wall time, candidates per minute, statuses, disagreement counts; the
# summary JSON), $OUT/import.log and $OUT/import_store.tar.gz (the store: query it elsewhere with
# `python -m mining query disagreements store.root=<untarred>/data`; duckdb is absent here).
set -uo pipefail
COMPILE_BASELINE=false   # the HARNESS settings of gpu_check_common.sh, without torch.compile timing
. "$(dirname "$0")/gpu_check_common.sh"
export PYTHONUNBUFFERED=1
DATA=${DATA:-bench/real_code/data}
RUN=${RUN:-technoabsurdist__KernelBench/runs/gemini_level3_run}   # 50 programs, 47 verdicts (A100)
REPO_DIR=$DATA/${RUN%%/runs/*}                                   # its KernelBench/level3 references
STORE=$WORK/import_data
if [ ! -f "$DATA/$RUN/eval_results.json" ] || [ ! -d "$REPO_DIR/KernelBench/level3" ]; then
  echo "error: $DATA/$RUN (with eval_results.json) and $REPO_DIR/KernelBench/level3 are needed:" \
       "run scripts/fetch_real_code.py and carry $DATA" | tee -a "$OUT/summary.txt" >&2
  exit 2
fi
require_cli
[ "${RESUME:-0}" = 1 ] || rm -rf "$STORE"   # RESUME=1: continue a call cut by TIMEOUT (warm machine)
ARGS=(task=kernelbench task.root="$REPO_DIR" task.level=3 store.root="$STORE"
      "${HARNESS[@]}" harness.profiling.kernel.enabled=false
      harness.profiling.nsys.enabled=false ${LIMIT:+store.ingest.limit=$LIMIT}
      ${SCORER_VERSION:+store.score.scorer_version=$SCORER_VERSION})   # pin: resume a store scored by older code
t0=$(date +%s.%N)
timeout -k 20 "${TIMEOUT:-540}" $PY -m mining eval "$DATA/$RUN" "${ARGS[@]}" > "$OUT/import.log" 2>&1; rc=$?
t1=$(date +%s.%N)
# a second call must evaluate nothing (resume)
# bounded: after a first call cut by TIMEOUT this one would otherwise score the rest unbounded
timeout -k 10 "${AGAIN_TIMEOUT:-90}" $PY -m mining eval "$DATA/$RUN" "${ARGS[@]}" > "$WORK/import_again.log" 2>&1; rc2=$?
tail -n 25 "$OUT/import.log"
$PY - "$STORE" "$t0" "$t1" "$rc" "$rc2" "$WORK/import_again.log" "$OUT/import.log" "${LIMIT:-}" \
  > "$OUT/import.txt" <<'PYEOF'
import collections, json, sys
from mining.ingest.verdicts import KINDS, disagreements
from mining.store import Store
root, t0, t1, rc, rc2, again, log, limit = (sys.argv[1], float(sys.argv[2]), float(sys.argv[3]),
                                            *sys.argv[4:])
s = Store(root)
imp = s.read("imports").to_pylist()
sc = {r["sample_id"]: r for r in s.read("scores").to_pylist()}
wall = t1 - t0
scored = [sc[r["sample_id"]] for r in imp if r["sample_id"] in sc]
summ = [ln for ln in open(log).read().splitlines() if ln.startswith("summary: ")]
first = json.loads(summ[-1].split(": ", 1)[1]) if summ else {}
# counted from the store, not the summary line: a call cut by TIMEOUT prints no summary
n = sum(x["scored_at"].timestamp() >= t0 and x["scored_at"].timestamp() <= t1 for x in scored)
print(f"eval rc={rc}: {len(imp)} programs, {n} evaluated in {wall:.1f} s wall "
      f"({60 * n / wall:.1f} candidates/min, builds + reference baselines included), "
      f"{sum(r['error'] is not None for r in imp)} not evaluated; {len(scored)} scored after both calls")
print("statuses here:", dict(collections.Counter(x["status"] for x in scored)),
      "| correct here:", sum(bool(x["correct"]) for x in scored),
      "| correct per KernelBench:", sum(r["kb_correct"] is True for r in imp),
      "| GPUs:", sorted({str(x["gpu"]) for x in scored}))
rows = collections.defaultdict(list)
for r in imp:
    x = sc.get(r["sample_id"])
    if x:
        for k in disagreements(r["kb_correct"], x["correct"], x["reward"], x["major_hack"]):
            rows[k].append(f"P{r['problem_id']}({x['status']}, kb_correct={r['kb_correct']}, "
                           f"reward={x['reward']:.2f}, {','.join(x['hack_categories'] or [])})")
both = sum(r["kb_correct"] is not None and r["sample_id"] in sc for r in imp)
print(f"disagreements with KernelBench over {both} programs with both verdicts:",
      {k: len(rows[k]) for k in KINDS})
for k in KINDS:
    print(f"  {k}: {'; '.join(rows[k]) or '-'}")
errs = collections.Counter((r["error"] or "")[:60] for r in imp if r["error"])
print("not evaluated:", dict(errs) or "-")
lines = [ln for ln in open(again).read().splitlines() if "to score" in ln]
print(f"second call rc={rc2}: {lines[-1] if lines else '(no line)'}")
print(summ[-1] if summ else "summary: (none: the first call did not finish)")
# the resume: the second call finds every program the first scored (and, without LIMIT, nothing left)
resumed = bool(lines) and f" {first.get('scored')} already scored" in lines[-1] and (
    bool(limit) or " 0 to score" in lines[-1])
print(f"resume: {'ok' if resumed else 'FAILED'}")
ok = rc == "0" and rc2 == "0" and resumed and len(scored) > 0
sys.exit(0 if ok else 1)
PYEOF
crc=$?
tar -czf "$OUT/import_store.tar.gz" -C "$WORK" import_data 2>/dev/null
cat "$OUT/import.txt"
echo "== import: rc=$rc resume_rc=$rc2 check_rc=$crc" >> "$OUT/summary.txt"
[ $rc -eq 0 ] && [ $rc2 -eq 0 ] && [ $crc -eq 0 ]
