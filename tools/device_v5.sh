#!/bin/bash
# One device visit for persistent v5 (tagged exchange + graph replay): the v5 GPU tests, the whole
# GPU suite, compute-sanitizer on a small tagged config, then the v5 benchmark. Logs under $OUT/v5/.
set -u
OUT=${OUT:-/tmp/v5_out}
LOG="$OUT/v5"
PARTS=${PARTS:-tests sanitizer bench}   # also: explore (alternative mma plans)
mkdir -p "$LOG"
source benchmarks/device_setup.sh
record_device "$LOG/device.txt"
run_tests() {  # name timeout pytest-args...
  local name=$1 limit=$2; shift 2
  (cd /tmp && timeout "$limit" python3 -m pytest -q -m gpu -rfEs --durations=10 --import-mode=append \
    -p no:cacheprovider --rootdir "$REPO" "$@" 2>&1 | tail -60) > "$LOG/$name.log"
  tail -${TAIL:-25} "$LOG/$name.log"
}
if [ "$PARTS" != "${PARTS/tests/}" ]; then
  run_tests v5_tests ${V5_TIMEOUT:-150} -x "$REPO/tests/test_persistent_v5_gpu.py"
  [ -n "${SKIP_SUITE:-}" ] || run_tests gpu_suite ${SUITE_TIMEOUT:-240} "$REPO/tests" --deselect "$REPO/tests/test_persistent_v5_gpu.py" ${SUITE_K:+-k "$SUITE_K"}
fi
if [ "$PARTS" != "${PARTS/sanitizer/}" ]; then
  run_sanitizers benchmarks/persistent_mma_small_run.py "$LOG/sanitizer.log"
fi
if [ "$PARTS" != "${PARTS/bench/}" ]; then
  timeout ${BENCH_TIMEOUT:-150} python3 benchmarks/bench_persistent_v5.py "$LOG" --repeats ${REPEATS:-10} ${BENCH_ROWS:+--rows $BENCH_ROWS} \
    2>&1 | tail -30 > "$LOG/bench.log"
  cat "$LOG/bench.log"
fi
if [ "$PARTS" != "${PARTS/explore/}" ]; then
  timeout ${EXPLORE_TIMEOUT:-200} python3 benchmarks/explore_mma_plans.py "$LOG" 2>&1 | tail -25 > "$LOG/explore.log"
  cat "$LOG/explore.log"
fi
