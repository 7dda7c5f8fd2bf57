#!/bin/bash
# v38's device visit (k-tile by k-tile staging).
# Stages (STAGES), all under $OUT:
#   tests     GPU test files ($TESTS; default the v38 file), TEST_TIMEOUT (default 300)
#   ab        v38's A/B (benchmarks/bench_persistent_v38.py through ab_alternate.py; ROUNDS, AB_ROWS, AB_NAME)
#   clocks    v37's step-clock diagnostic (CELLS: its --cells); clocks_tiles: the same under STAGE_PER_TILE=$TILE_MODE
#             (default 1), into $OUT/tiles
#   quick     the quick bench (#5's table, cuDNN in the process)
#   rest      more GPU test files ($REST), TEST_TIMEOUT
#   cache     the NVRTC cache
set -u
OUT=${OUT:-/tmp/v38_out}
mkdir -p "$OUT"
source benchmarks/device_setup.sh
record_device "$OUT/device.txt"
for stage in ${STAGES:-"tests clocks cache"}; do
  case $stage in
    tests) run_gpu_tests "$OUT/tests.log" ${TESTS:-"$REPO/tests/test_persistent_v38_gpu.py"} ;;
    ab) timeout "${BENCH_TIMEOUT:-400}" python3 benchmarks/ab_alternate.py "$OUT" "${AB_MODULE:-bench_persistent_v38}" \
      --rounds "${ROUNDS:-4}" --name "${AB_NAME:-ab_tiles_v38}" ${AB_ROWS:+--rows $AB_ROWS} 2>&1 | tail -12 ;;
    clocks) timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/diag_step_clocks_v37.py "$OUT" \
      --rounds "${ROUNDS:-4}" ${CELLS:+--cells $CELLS} 2>&1 | tail -14 ;;
    clocks_tiles) mkdir -p "$OUT/tiles" && timeout "${BENCH_TIMEOUT:-300}" python3 -c "
import sys; sys.path.insert(0, 'benchmarks')
from ecornn.engines import persistent; persistent.STAGE_PER_TILE = ${TILE_MODE:-1}
import diag_step_clocks_v37 as d; d.main(sys.argv[1:])" "$OUT/tiles" --rounds "${ROUNDS:-4}" ${CELLS:+--cells $CELLS} 2>&1 | tail -14 ;;
    quick) timeout "${QUICK_TIMEOUT:-150}" python3 benchmarks/bench_persistent.py --out "$OUT" --quick 2>&1 | tail -14 ;;
    rest) run_gpu_tests "$OUT/rest.log" $(for f in ${REST:-}; do echo "$REPO/tests/$f"; done) ;;
    cache) save_cupy_cache "$OUT" ;;
  esac
done
