#!/bin/bash
# v52's device visit: v51's stages (tools/device_v51.sh) with v52's defaults, plus one of its own. STAGES, all under $OUT:
#   tests     GPU tests ($FILES, else test_persistent_gpu.py and v52's; REST: more, as "$REPO/tests/x.py")
#   ab        benchmarks/ab_alternate.py over $AB (bench_persistent_v52; v52b, v52c: the other sets)
#   sanitize  compute-sanitizer over benchmarks/persistent_input_reg_small_run.py ($SAN_SCRIPT)
#   train     benchmarks/ab_train_v52.py (fwd+bwd with and without 2 W_ih k-tiles in registers)
#   clocks, diagin, host, quick, cache: as v51's
set -u
export OUT=${OUT:-/tmp/v52_out}
mkdir -p "$OUT"
for stage in ${STAGES:-tests}; do
  case $stage in
    tests) FILES=${FILES:-"$PWD/tests/test_persistent_gpu.py $(ls $PWD/tests/test_*v52*_gpu.py 2>/dev/null)"} \
             STAGES=tests bash tools/device_v51.sh ;;
    train) source benchmarks/device_setup.sh && record_device "$OUT/device.txt"
           timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/ab_train_v52.py "$OUT" --rounds "${ROUNDS:-4}" 2>&1 \
             | grep -v '^{' | tail -9 ;;
    *) AB=${AB:-bench_persistent_v52} SAN_SCRIPT=${SAN_SCRIPT:-benchmarks/persistent_input_reg_small_run.py} \
         STAGES=$stage bash tools/device_v51.sh ;;
  esac
done
