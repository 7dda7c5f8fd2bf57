#!/bin/bash
# v39's device visit. Calls 1-3 also had an "ab" stage (ab_alternate.py over bench_persistent_v39*.py) and the v39 GPU
# tests of the removed options: the adaptive delay and the early poll (their code: commit 622cde1), the packed tags
# (commit 039bbba).
# Stages (STAGES), all under $OUT:
#   tests     GPU test files ($TESTS; default the v39 file), TEST_TIMEOUT (default 300)
#   order     benchmarks/diag_publish_order_v39.py (CELLS: its --cells; ORDER_MODES: its --modes, |-separated)
#   groups    benchmarks/explore_groups_v39.py (ROUNDS, default 2): more than two batch groups
#   gbench    benchmarks/bench_groups_v39.py: the many-group cells with fused and cuDNN in the process
#   quick     the quick bench (#5's table, cuDNN in the process)
#   rest      more GPU test files ($REST), TEST_TIMEOUT
#   sanitize  compute-sanitizer memcheck and racecheck over benchmarks/persistent_groups_small_run.py (SAN_TIMEOUT)
#   cache     the NVRTC cache
set -u
IFS='|' read -ra ORDER_MODES_LIST <<< "${ORDER_MODES:-}"
OUT=${OUT:-/tmp/v39_out}
mkdir -p "$OUT"
source benchmarks/device_setup.sh
record_device "$OUT/device.txt"
for stage in ${STAGES:-"tests quick cache"}; do
  case $stage in
    tests) run_gpu_tests "$OUT/tests.log" ${TESTS:-"$REPO/tests/test_persistent_v39_gpu.py"} ;;
    order) timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/diag_publish_order_v39.py "$OUT" \
      ${CELLS:+--cells $CELLS} ${ORDER_MODES:+--modes "${ORDER_MODES_LIST[@]}"} 2>&1 | tail -12 ;;
    groups) timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/explore_groups_v39.py "$OUT" --rounds "${ROUNDS:-2}" \
      2>&1 | tail -24 ;;
    gbench) timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/bench_groups_v39.py "$OUT" 2>&1 | tail -16 ;;
    quick) timeout "${QUICK_TIMEOUT:-150}" python3 benchmarks/bench_persistent.py --out "$OUT" --quick 2>&1 | tail -14 ;;
    rest) run_gpu_tests "$OUT/rest.log" $(for f in ${REST:-}; do echo "$REPO/tests/$f"; done) ;;
    sanitize) run_sanitizers benchmarks/persistent_groups_small_run.py "$OUT/sanitizers.log" "${SAN_TIMEOUT:-150}" 10 ;;
    cache) save_cupy_cache "$OUT" ;;
  esac
done
