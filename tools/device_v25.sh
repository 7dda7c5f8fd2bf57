#!/bin/bash
# v25's device visit: the one-pass 3xTF32 GPU tests and the fp32 tests around it, the GEMM probe,
# the v25/v24 pair bench and the forward alternated. Everything under $OUT (STAGES picks parts).
set -u
OUT=${OUT:-/tmp/v25_out}
mkdir -p "$OUT"
source benchmarks/device_setup.sh
record_device "$OUT/device.txt"
STAGES=${STAGES:-"tests probe bench alternate"}
for stage in $STAGES; do
  case $stage in
    tests)
      run_gpu_tests "$OUT/tests.log" ${TESTS:-"$REPO/tests/test_persistent_v25_gpu.py" "$REPO/tests/test_persistent_v22_gpu.py" \
        "$REPO/tests/test_persistent_v6_gpu.py"} ;;
    probe) timeout 120 python3 benchmarks/bench_tf32_onepass.py --out "$OUT" 2>&1 | tail -12 ;;
    bench) timeout 300 python3 benchmarks/bench_persistent_v25.py "$OUT" ${BENCH_ARGS:-} 2>&1 | tail -12 ;;
    alternate) timeout 240 python3 benchmarks/ab_alternate.py "$OUT" bench_persistent_v25 --rounds 3 --rows 4 \
      --name ab_alternate_v25 2>&1 | tail -8 ;;
  esac
done
