#!/bin/bash
# v41's device visit: the fp32 grid backward in batch groups.
# Stages (STAGES), all under $OUT:
#   tests     GPU test files ($TESTS; default the v41 file), TEST_TIMEOUT (default 300)
#   bgroups   benchmarks/explore_backward_groups_v41.py (SET, default 1; ROUNDS, default 2)
#   bbench    benchmarks/bench_backward_groups_v41.py: the grouped cells' fwd+bwd with cuDNN in the process
#   layers    benchmarks/bench_backward_groups_layers_v41.py: stacked and bidirectional fp32 training, cuDNN in the process
#   spairs    benchmarks/explore_split_pairs_v41.py: the fp32 split forward in groups of 2 columns
#   pbench    benchmarks/bench_split_pairs_v41.py: the 2-column split cells with fused and cuDNN in the process
#   quick     the quick bench (#5's table, cuDNN in the process)
#   rest      more GPU test files ($REST), TEST_TIMEOUT
#   sanitize  compute-sanitizer memcheck and racecheck over benchmarks/persistent_backward_groups_small_run.py
#   cache     the NVRTC cache
set -u
OUT=${OUT:-/tmp/v41_out}
mkdir -p "$OUT"
source benchmarks/device_setup.sh
record_device "$OUT/device.txt"
for stage in ${STAGES:-"tests quick cache"}; do
  case $stage in
    tests) run_gpu_tests "$OUT/tests.log" ${TESTS:-"$REPO/tests/test_persistent_v41_gpu.py"} ;;
    bgroups) timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/explore_backward_groups_v41.py "$OUT" \
      --rounds "${ROUNDS:-2}" --set "${SET:-1}" 2>&1 | tail -40 ;;
    bbench) timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/bench_backward_groups_v41.py "$OUT" 2>&1 | tail -16 ;;
    layers) timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/bench_backward_groups_layers_v41.py "$OUT" 2>&1 | tail -12 ;;
    spairs) timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/explore_split_pairs_v41.py "$OUT" --rounds "${ROUNDS:-2}" --set "${SET:-2}" 2>&1 | tail -20 ;;
    pbench) timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/bench_split_pairs_v41.py "$OUT" 2>&1 | tail -12 ;;
    quick) timeout "${QUICK_TIMEOUT:-150}" python3 benchmarks/bench_persistent.py --out "$OUT" --quick 2>&1 | tail -14 ;;
    rest) run_gpu_tests "$OUT/rest.log" $(for f in ${REST:-}; do echo "$REPO/tests/$f"; done) ;;
    sanitize) run_sanitizers benchmarks/persistent_backward_groups_small_run.py "$OUT/sanitizers.log" "${SAN_TIMEOUT:-150}" 10 ;;
    cache) save_cupy_cache "$OUT" ;;
  esac
done
