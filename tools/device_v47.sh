#!/bin/bash
# v47's device visit: batch padding (persistent.run_config; layouts.batch).
# Stages (STAGES), all under $OUT:
#   pad       benchmarks/explore_batch_padding_v47.py (padded against unpadded; SET 1 16-bit, 2 fp32)
#   tests     GPU tests of v47 (REST: more test files, e.g. "$REPO/tests/test_persistent_v9_gpu.py")
#   pbench    benchmarks/bench_batch_padding_v47.py (padded cells against cuDNN)
#   sanitize  compute-sanitizer memcheck and racecheck over benchmarks/persistent_padded_small_run.py
#   v46:*     a stage of tools/device_v46.sh (host, narrow, tests, nbench, sanitize, v45:* (..., quick via v42:*))
set -u
OUT=${OUT:-/tmp/v47_out}
mkdir -p "$OUT"
for stage in ${STAGES:-pad}; do
  case $stage in
    pad) source benchmarks/device_setup.sh && record_device "$OUT/device.txt"
         timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/explore_batch_padding_v47.py "$OUT" --set "${SET:-1}" \
           --rounds "${ROUNDS:-2}" 2>&1 | tail -20 ;;
    tests) source benchmarks/device_setup.sh && record_device "$OUT/device.txt"
           run_gpu_tests "$OUT/tests.log" "$REPO/tests/test_persistent_v47_gpu.py" ${REST:-} ;;
    pbench) source benchmarks/device_setup.sh
            timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/bench_batch_padding_v47.py "$OUT" 2>&1 | tail -12 ;;
    sanitize) source benchmarks/device_setup.sh
              run_sanitizers benchmarks/persistent_padded_small_run.py "$OUT/sanitizers.log" "${SAN_TIMEOUT:-150}" 10 ;;
    v46:*) OUT=$OUT STAGES=${stage#v46:} bash tools/device_v46.sh ;;
  esac
done
