#!/bin/bash
# v29's device visit (the fp32 split's in-kernel projection). Stages (STAGES), everything under $OUT:
#   tests       GPU test files ($TESTS; default the v29 file)
#   explore     the kernel alone (explore_exchange_delay.py): fp32 H=1024 B=4 with and without the
#               projection, tagged at first-poll delays ($DELAYS) and under the split grid barrier
#   alternate   whole forward, the split's projection in the kernel vs v28's GEMM (ab_alternate.py
#               bench_persistent_v29)
#   pair        fwd+bwd with cuDNN (bench_persistent_v29.py); bench: the quick bench; cache: the NVRTC cache
set -u
OUT=${OUT:-/tmp/v29_out}
mkdir -p "$OUT"
source benchmarks/device_setup.sh
record_device "$OUT/device.txt"
for stage in ${STAGES:-"tests cache"}; do
  case $stage in
    tests) run_gpu_tests "$OUT/tests.log" ${TESTS:-"$REPO/tests/test_persistent_v29_gpu.py"} ;;
    explore)
      timeout "${EXPLORE_TIMEOUT:-240}" python3 benchmarks/explore_exchange_delay.py "$OUT" --rounds "${ROUNDS:-3}" \
        --cells "${CELLS:-[[\"float32\", 1024, 4]]}" --only '["chosen", "w8u8 proj", "w8u8 tagged 400", "w8u8 grid"]' \
        --delays "${DELAYS:-[0, 100, 200, 400]}" --name "${EXPLORE_NAME:-explore_split_projection}" 2>&1 | tail -14 ;;
    alternate) timeout "${ALT_TIMEOUT:-200}" python3 benchmarks/ab_alternate.py "$OUT" bench_persistent_v29 \
      --rounds "${ROUNDS:-3}" --name ab_alternate_v29 2>&1 | tail -12 ;;
    pair) timeout "${PAIR_TIMEOUT:-200}" python3 benchmarks/bench_persistent_v29.py "$OUT" 2>&1 | tail -8 ;;
    bench) timeout "${BENCH_TIMEOUT:-150}" python3 benchmarks/bench_persistent.py --out "$OUT" --quick 2>&1 | tail -14 ;;
    cache) save_cupy_cache "$OUT" ;;
  esac
done
