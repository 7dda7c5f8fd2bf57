#!/bin/bash
# v42's device visit: tensor-core forwards on thread-block clusters, each block 1/C of K.
# Stages (STAGES), all under $OUT:
#   tests     GPU test files ($TESTS; default the v42 file), TEST_TIMEOUT (default 300)
#   clusters  benchmarks/explore_cluster_k_v42.py (SET, default 1; ROUNDS, default 2)
#   cbench    benchmarks/bench_cluster_k_v42.py: the clustered cells with fused and cuDNN in the process
#   diag      benchmarks/diag_step_clocks_v37.py over $CELLS, plain and with $DIAG_FLAGS (a JSON object)
#   quick     the quick bench (#5's table, cuDNN in the process)
#   rest      more GPU test files ($REST), TEST_TIMEOUT
#   sanitize  compute-sanitizer memcheck and racecheck over benchmarks/persistent_cluster_k_small_run.py
#   cache     the NVRTC cache
set -u
OUT=${OUT:-/tmp/v42_out}
mkdir -p "$OUT"
source benchmarks/device_setup.sh
record_device "$OUT/device.txt"
for stage in ${STAGES:-"tests quick cache"}; do
  case $stage in
    tests) run_gpu_tests "$OUT/tests.log" ${TESTS:-"$REPO/tests/test_persistent_v42_gpu.py"} ;;
    clusters) timeout "${BENCH_TIMEOUT:-400}" python3 benchmarks/explore_cluster_k_v42.py "$OUT" --rounds "${ROUNDS:-2}" --set "${SET:-1}" 2>&1 | tail -30 ;;
    cbench) timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/bench_cluster_k_v42.py "$OUT" 2>&1 | tail -8 ;;
    diag) n=0; for flags in '{}' "${DIAG_FLAGS:-{\"CLUSTER_K\": 2, \"CLUSTER_WARPS\": 8}}"; do
        mkdir -p "$OUT/diag$((++n))"
        timeout 200 python3 benchmarks/diag_step_clocks_v37.py "$OUT/diag$n" --cells ${CELLS:-float32:1024:8} --flags "$flags" 2>&1 | tail -5
      done ;;
    quick) timeout "${QUICK_TIMEOUT:-150}" python3 benchmarks/bench_persistent.py --out "$OUT" --quick 2>&1 | tail -14 ;;
    rest) run_gpu_tests "$OUT/rest.log" $(for f in ${REST:-}; do echo "$REPO/tests/$f"; done) ;;
    sanitize) run_sanitizers benchmarks/persistent_cluster_k_small_run.py "$OUT/sanitizers.log" "${SAN_TIMEOUT:-150}" 10 ;;
    cache) save_cupy_cache "$OUT" ;;
  esac
done
