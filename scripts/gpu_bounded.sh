# Sourced by the bounded GPU scripts (gpu_check_realcode.sh, gpu_check_sandbox_speed.sh) after they
# set T0 and cd to the repository: the carried wheels (.whl/: hydra-core, omegaconf, antlr4; the GPU
# machine has no package registry) and the project on PYTHONPATH, and left(), the seconds to
# DEADLINE_S (default DEADLINE_DEFAULT_S) counted from T0.
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
    && export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}"
left() { echo $(( ${DEADLINE_S:-$DEADLINE_DEFAULT_S} - ($(date +%s) - T0) )); }
