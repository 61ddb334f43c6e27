#!/usr/bin/env bash
# The GPU checks of issues 5, 6 and 7 in one call: mining (replay CUDA candidates under
# concurrency) -> split -> score (harness.device=cuda) -> cycle (2 rounds, tiny local model).
# One build/baseline cache is shared by every stage. About 6-8 minutes on one H200.
#
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
#   PYTHONPATH=/tmp/site OUT=$OUT bash scripts/gpu_check_pipeline.sh
#   DRY=1 bash scripts/gpu_check_pipeline.sh     # CPU dry run of the same commands
# $OUT gets 7 small files: summary.txt (stage times + every stage summary), mining.txt/.log,
# score.txt/.log, cycle.txt/.log.
set -uo pipefail
. "$(dirname "$0")/gpu_check_common.sh"
export OUT WORK ROOT CACHE PY
rm -f "$OUT/summary.txt"
require_cli
{ date -u; $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda,
  torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU')"; } >> "$OUT/summary.txt"
status=0
for stage in mining score train; do
  if [ $stage = score ] && [ "$mining_rc" -ne 0 ]; then
    echo "== score: skipped (mining failed)" >> "$OUT/summary.txt"; continue
  fi
  t0=$(date +%s)
  bash "scripts/gpu_check_$stage.sh"; rc=$?
  [ $stage = mining ] && mining_rc=$rc
  echo "== $stage: rc=$rc in $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
  name=$stage; [ $stage = train ] && name=cycle
  [ -f "$OUT/$name.txt" ] && cat "$OUT/$name.txt" >> "$OUT/summary.txt"
  [ $rc -eq 0 ] || status=1
done
echo "== pipeline: $([ $status -eq 0 ] && echo PASS || echo FAIL)" >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
exit $status
