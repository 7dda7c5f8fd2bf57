#!/bin/bash
# v50's device visit. Stages (STAGES), all under $OUT:
#   tests     GPU tests ($FILES, else those that call the functional API; REST: more, as "$REPO/tests/x.py")
#   sweep     benchmarks/sweep_strategies_v50.py (persistent, fused and cuDNN at fp32 B=8-128, fp16 B=32-128)
#   api       benchmarks/diag_api_overhead_v50.py (the engine against lstm_forward, alternated)
#   pieces    benchmarks/diag_api_pieces_v50.py (lstm_forward's host time piece by piece)
#   quick     benchmarks/bench_persistent.py --quick (issue 5's cells, cuDNN in the process)
#   cache     the CuPy kernel cache into $OUT (15 MB parts) for the next visit to carry as .devcache/
set -u
OUT=${OUT:-/tmp/v50_out}
mkdir -p "$OUT"
API_TESTS="fused_gpu persistent_cluster_gpu persistent_gpu persistent_mma_gpu persistent_v9_gpu persistent_v13_gpu
 persistent_v15_gpu persistent_v27_gpu persistent_v32_gpu persistent_v34_gpu torch_gpu"
for stage in ${STAGES:-tests}; do
  case $stage in
    tests) source benchmarks/device_setup.sh && record_device "$OUT/device.txt"
           run_gpu_tests "$OUT/tests.log" ${FILES:-$(for t in $API_TESTS; do echo "$REPO/tests/test_$t.py"; done)} ${REST:-} ;;
    sweep) source benchmarks/device_setup.sh
           timeout "${BENCH_TIMEOUT:-400}" python3 benchmarks/sweep_strategies_v50.py "$OUT" 2>&1 | grep -v '^{' | tail -20 ;;
    api) source benchmarks/device_setup.sh
         timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/diag_api_overhead_v50.py "$OUT" --rounds "${ROUNDS:-6}" 2>&1 \
           | grep -v '^{' | tail -7 ;;
    pieces) source benchmarks/device_setup.sh
            timeout "${BENCH_TIMEOUT:-200}" python3 benchmarks/diag_api_pieces_v50.py "$OUT" 2>&1 | grep -v '^{"device' | tail -3 ;;
    quick) source benchmarks/device_setup.sh
           timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/bench_persistent.py --out "$OUT" --quick 2>&1 | tail -14 ;;
    cache) source benchmarks/device_setup.sh && save_cupy_cache "$OUT" ;;
  esac
done
