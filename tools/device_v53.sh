#!/bin/bash
# v53's device visit: v52's stages (tools/device_v52.sh) with v53's defaults. STAGES, all under $OUT:
#   tests     GPU tests ($FILES, else test_persistent_gpu.py; REST: more, as "$REPO/tests/x.py")
#   ab        benchmarks/ab_alternate.py over $AB (bench_persistent_v53b, v53c: the poll waits; bench_persistent_v53 needs commit 6b8ac73)
#   sanitize, train, clocks, diagin, host, quick, cache: as v52's
set -u
export OUT=${OUT:-/tmp/v53_out}
mkdir -p "$OUT"
for stage in ${STAGES:-tests}; do
  case $stage in
    tests) FILES=${FILES:-"$PWD/tests/test_persistent_gpu.py"} \
             STAGES=tests bash tools/device_v52.sh ;;
    *) AB=${AB:-bench_persistent_v53c} STAGES=$stage bash tools/device_v52.sh ;;
  esac
done
