#!/bin/bash
# One device visit for persistent v5/v6 (tagged exchanges + graph replay): the first GPU tests
# (FIRST_TESTS, default the v5 file; the rest is skipped if they fail), compute-sanitizer over
# SAN_SCRIPTS, the benchmark (BENCH_SCRIPT, default bench_persistent_v5.py; BENCH_ARGS), then the whole GPU suite. Logs under $OUT/v5/.
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
    -p no:cacheprovider --rootdir "$REPO" ${PYTEST_ARGS:-} "$@" > "$LOG/$name.full.log" 2>&1
   echo "pytest exit: $? (124: timeout)" >> "$LOG/$name.full.log")
  tail -60 "$LOG/$name.full.log" > "$LOG/$name.log"
  tail -${TAIL:-25} "$LOG/$name.log"
}
FIRST_TESTS=${FIRST_TESTS:-tests/test_persistent_v5_gpu.py}
if [ "$PARTS" != "${PARTS/tests/}" ]; then
  first=(); for f in $FIRST_TESTS; do first+=("$REPO/$f"); done
  run_tests first_tests ${V5_TIMEOUT:-150} -x "${first[@]}"
  summary=$(grep -E "[0-9]+ (passed|failed|error)" "$LOG/first_tests.log" | tail -1)
  [[ "$summary" == *passed* && "$summary" != *failed* && "$summary" != *error* ]] \
    || { echo "first tests not green: stopping"; exit 1; }
fi
if [ "$PARTS" != "${PARTS/sanitizer/}" ]; then
  for script in ${SAN_SCRIPTS:-benchmarks/persistent_mma_small_run.py}; do
    run_sanitizers "$script" "$LOG/sanitizer_$(basename "$script" .py).log"
  done
fi
if [ "$PARTS" != "${PARTS/bench/}" ]; then
  timeout ${BENCH_TIMEOUT:-150} python3 ${BENCH_SCRIPT:-benchmarks/bench_persistent_v5.py} "$LOG" --repeats ${REPEATS:-10} ${BENCH_ROWS:+--rows $BENCH_ROWS} \
    ${BENCH_ARGS:-} 2>&1 | tail -30 > "$LOG/bench.log"
  cat "$LOG/bench.log"
fi
if [ "$PARTS" != "${PARTS/tests/}" ] && [ -z "${SKIP_SUITE:-}" ]; then
  deselect=(); for f in $FIRST_TESTS; do deselect+=(--deselect "$REPO/$f"); done
  run_tests gpu_suite ${SUITE_TIMEOUT:-240} "$REPO/tests" "${deselect[@]}" ${SUITE_K:+-k "$SUITE_K"}
fi
if [ "$PARTS" != "${PARTS/explore/}" ]; then
  timeout ${EXPLORE_TIMEOUT:-200} python3 benchmarks/explore_mma_plans.py "$LOG" 2>&1 | tail -25 > "$LOG/explore.log"
  cat "$LOG/explore.log"
fi
if [ -n "${SAVE_CACHE:-}" ]; then save_cupy_cache "$OUT"; fi   # for the next visit: copy the parts into .devcache/
