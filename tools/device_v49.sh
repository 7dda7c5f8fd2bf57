#!/bin/bash
# v49's device visit. Stages (STAGES), all under $OUT:
#   tests     GPU tests ($FILES, else v49's; REST: more test files, as "$REPO/tests/test_persistent_v9_gpu.py": the
#             tests run from /tmp)
#   host      benchmarks/diag_host_path_v49.py (the replay's host time before the launch, piece by piece)
#   ab        benchmarks/ab_alternate.py over bench_persistent_v49 (fp32 H=1024 B=4's modes alternated)
#   quick     benchmarks/bench_persistent.py --quick (issue 5's cells, cuDNN in the process)
#   ring      benchmarks/ab_ring_publish_v49.py (v49's ring publish against v48's, alternated)
#   cache     the CuPy kernel cache into $OUT (15 MB parts) for the next visit to carry as .devcache/
#   v48:*     a stage of tools/device_v48.sh
set -u
OUT=${OUT:-/tmp/v49_out}
mkdir -p "$OUT"
for stage in ${STAGES:-tests}; do
  case $stage in
    tests) source benchmarks/device_setup.sh && record_device "$OUT/device.txt"
           run_gpu_tests "$OUT/tests.log" ${FILES:-"$REPO/tests/test_persistent_v49_gpu.py"} ${REST:-} ;;
    host) source benchmarks/device_setup.sh
          timeout "${BENCH_TIMEOUT:-200}" python3 benchmarks/diag_host_path_v49.py "$OUT" 2>&1 | tail -40 ;;
    ab) source benchmarks/device_setup.sh
        timeout "${BENCH_TIMEOUT:-240}" python3 benchmarks/ab_alternate.py "$OUT" bench_persistent_v49 \
          --rounds "${ROUNDS:-6}" --name ab_alternate_v49 2>&1 | tail -8 ;;
    quick) source benchmarks/device_setup.sh
           timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/bench_persistent.py --out "$OUT" --quick 2>&1 | tail -14 ;;
    ring) source benchmarks/device_setup.sh
          timeout "${BENCH_TIMEOUT:-240}" python3 benchmarks/ab_ring_publish_v49.py "$OUT" 2>&1 | tail -7 ;;
    cache) source benchmarks/device_setup.sh && save_cupy_cache "$OUT" ;;
    v48:*) OUT=$OUT STAGES=${stage#v48:} bash tools/device_v48.sh ;;
  esac
done
