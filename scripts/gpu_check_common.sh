# Sourced by scripts/gpu_check_*.sh: the interpreter, the folders and the shared harness settings.
# Nothing here installs anything: hydra-core/omegaconf/antlr4 must already be importable, e.g.
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
# DRY=1 runs the same commands on CPU (harness.device=cpu, pure-PyTorch replay candidates).
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PY:-python3}
OUT=${OUT:-/tmp/km-gpu-check}          # what comes back: a few small text files only
WORK=${WORK:-/tmp/km-gpu-work}         # stores, build cache, models (never under $OUT)
ROOT=${ROOT:-$WORK/data}               # the mining store that split and score read
CACHE=${CACHE:-$WORK/cache}            # one build + baseline cache for every stage
mkdir -p "$OUT" "$WORK"
if [ "${DRY:-0}" = 1 ]; then DEVICE=cpu; else DEVICE=cuda; fi
# one set of harness settings for every stage, so reference baselines are measured once
HARNESS=(harness.device="$DEVICE" harness.cache_dir="$CACHE" harness.timed_calls="${CALLS:-20}"
         harness.warmup=2 harness.trials=3 harness.compile_baseline="${COMPILE_BASELINE:-true}")

require_cli() {  # the CLI's imports, and a GPU unless DRY=1; one sentence and exit 2 otherwise
  if ! $PY -c "import hydra, omegaconf, pyarrow, rich, torch" 2>"$WORK/import.err"; then
    echo "error: $(tail -n 1 "$WORK/import.err"); put hydra-core/omegaconf/antlr4 on PYTHONPATH" \
         "(this script never installs anything)" | tee -a "$OUT/summary.txt" >&2
    exit 2
  fi
  if [ "$DEVICE" = cuda ] && ! $PY -c "import torch,sys; sys.exit(not torch.cuda.is_available())"; then
    echo "error: no CUDA GPU is visible (DRY=1 runs the CPU dry run)" | tee -a "$OUT/summary.txt" >&2
    exit 2
  fi
}

cpu_replay() {  # DRY=1: pure-PyTorch replay candidates (no compiler needed), written under $WORK
  $PY -c "import sys; sys.path.insert(0, 'tests'); from pathlib import Path; \
from test_run_resume import replay_file; print(replay_file(Path('$WORK')))"
}
