#!/bin/bash
# v53's device visit: v52's stages (tools/device_v52.sh) with v53's defaults. STAGES, all under $OUT:
#   tests     GPU tests ($FILES, else test_persistent_gpu.py and v53's; REST: more, as "$REPO/tests/x.py")
#   ab        benchmarks/ab_alternate.py over $AB (bench_persistent_v53)
#   bulkclocks  diag_step_clocks_v37.py with x staged by loads and by bulk copies a step ahead ($CELLS)
#   sanitize, train, clocks, diagin, host, quick, cache: as v52's
set -u
export OUT=${OUT:-/tmp/v53_out}
mkdir -p "$OUT"
for stage in ${STAGES:-tests}; do
  case $stage in
    tests) FILES=${FILES:-"$PWD/tests/test_persistent_gpu.py $(ls $PWD/tests/test_*v53*_gpu.py 2>/dev/null)"} \
             STAGES=tests bash tools/device_v52.sh ;;
    bulkclocks) source benchmarks/device_setup.sh
                for bulk in 0 1; do
                  echo "== X_BULK $bulk"
                  timeout "${BENCH_TIMEOUT:-200}" python3 benchmarks/diag_step_clocks_v37.py "$OUT/bulkclocks_$bulk" --rounds 2 \
                    --flags "{\"X_BULK\": $bulk}" --cells ${CELLS:-float16:1024:16 float16:1024:8} 2>&1 | grep -v "^{" | tail -6
                done ;;
    *) AB=${AB:-bench_persistent_v53} STAGES=$stage bash tools/device_v52.sh ;;
  esac
done
