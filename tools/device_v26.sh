#!/bin/bash
# v26's device visit: the v26 GPU tests and the tensor-core tests around them, the v26/v25 forward
# alternated, the pair bench (fwd+bwd, cuDNN in the process). Everything under $OUT (STAGES picks parts).
set -u
OUT=${OUT:-/tmp/v26_out}
mkdir -p "$OUT"
source benchmarks/device_setup.sh
record_device "$OUT/device.txt"
STAGES=${STAGES:-"tests alternate bench"}
for stage in $STAGES; do
  case $stage in
    tests)
      run_gpu_tests "$OUT/tests.log" ${TESTS:-"$REPO/tests/test_persistent_v26_gpu.py" "$REPO/tests/test_persistent_v12_gpu.py" \
        "$REPO/tests/test_persistent_v17_gpu.py" "$REPO/tests/test_persistent_v23_gpu.py"} ;;
    alternate) timeout "${ALT_TIMEOUT:-200}" python3 benchmarks/ab_alternate.py "$OUT" bench_persistent_v26 \
      --rounds "${ROUNDS:-3}" --rows "${ROWS:-6}" --name ab_alternate_v26 2>&1 | tail -9 ;;
    bench) timeout "${BENCH_TIMEOUT:-150}" python3 benchmarks/bench_persistent_v26.py "$OUT" ${BENCH_ARGS:-} 2>&1 | tail -12 ;;
  esac
done
