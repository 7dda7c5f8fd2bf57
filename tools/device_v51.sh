#!/bin/bash
# v51's device visit. Stages (STAGES), all under $OUT:
#   tests     GPU tests ($FILES, else test_persistent_gpu.py and v51's; REST: more, as "$REPO/tests/x.py")
#   probe     benchmarks/probe_spare_sm_tail_v51.py (the projection tail beside the kernel on the spare SMs)
#   clocks    benchmarks/diag_step_clocks_v37.py on the missed cells (fresh phases on the H200)
#   diagin    diag_step_clocks_v37.py with the input product over all / half / none of its k-tiles (DIAG_IN_K_TILES_USED)
#   ab        benchmarks/ab_alternate.py over bench_persistent_v51 (16-bit forwards: the projection part in the kernel, part GEMM)
#   host      benchmarks/diag_prelaunch_v48.py and diag_host_path_v49.py (a replay's host time before its launch)
#   sanitize  compute-sanitizer memcheck and racecheck over benchmarks/persistent_input_part_small_run.py ($SAN_SCRIPT)
#   quick     benchmarks/bench_persistent.py --quick (issue 5's cells, cuDNN in the process)
#   cache     the CuPy kernel cache into $OUT (15 MB parts) for the next visit to carry as .devcache/
set -u
OUT=${OUT:-/tmp/v51_out}
mkdir -p "$OUT"
for stage in ${STAGES:-tests}; do
  case $stage in
    tests) source benchmarks/device_setup.sh && record_device "$OUT/device.txt"
           run_gpu_tests "$OUT/tests.log" ${FILES:-$REPO/tests/test_persistent_gpu.py $(ls $REPO/tests/test_*v51*_gpu.py 2>/dev/null)} ${REST:-} ;;
    probe) source benchmarks/device_setup.sh && record_device "$OUT/device.txt"
           timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/probe_spare_sm_tail_v51.py "$OUT" --rounds "${ROUNDS:-8}" 2>&1 \
             | grep -v '^{' | tail -30 ;;
    clocks) source benchmarks/device_setup.sh
            timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/diag_step_clocks_v37.py "$OUT" --rounds 2 \
              --cells ${CELLS:-float32:1024:8 float32:1024:4 float16:1024:16} 2>&1 | grep -v '^{' | tail -20 ;;
    diagin) source benchmarks/device_setup.sh
            for used in none 4 0; do
              flags='{}'; [ "$used" != none ] && flags="{\"DIAG_IN_K_TILES_USED\": $used}"
              echo "== input k-tiles used: $used"
              timeout "${BENCH_TIMEOUT:-200}" python3 benchmarks/diag_step_clocks_v37.py "$OUT/diagin_$used" --rounds 2 \
                --flags "$flags" --cells ${CELLS:-float16:1024:16 float16:1024:8 bfloat16:1024:4} 2>&1 | grep -v "^{" | tail -6
            done ;;
    ab) source benchmarks/device_setup.sh; AB=${AB:-bench_persistent_v51}
        timeout "${BENCH_TIMEOUT:-450}" python3 benchmarks/ab_alternate.py "$OUT" $AB --rounds "${ROUNDS:-4}" \
          --name ab_alternate_${AB#bench_persistent_} 2>&1 | grep -v '^{' | tail -8 ;;
    host) source benchmarks/device_setup.sh
          timeout "${BENCH_TIMEOUT:-200}" python3 benchmarks/diag_prelaunch_v48.py "$OUT" 2>&1 | grep -v '^{' | tail -30
          timeout "${BENCH_TIMEOUT:-200}" python3 benchmarks/diag_host_path_v49.py "$OUT" 2>&1 | grep -v '^{' | tail -12 ;;
    sanitize) source benchmarks/device_setup.sh
              run_sanitizers ${SAN_SCRIPT:-benchmarks/persistent_input_part_small_run.py} "$OUT/sanitizers.log" "${SAN_TIMEOUT:-150}" 10 ;;
    quick) source benchmarks/device_setup.sh
           timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/bench_persistent.py --out "$OUT" --quick 2>&1 | tail -14 ;;
    cache) source benchmarks/device_setup.sh && save_cupy_cache "$OUT" ;;
  esac
done
