#!/bin/bash
# v45's device visit: the clustered split's registers on NVRTC, fp32 B=7's kernels (v44's stages besides).
# Stages (STAGES), all under $OUT:
#   fitreg    tools/fit_cluster_registers.py --compiler nvrtc (the engine's own builds; JOBS, default 14)
#   b7        benchmarks/profile_batch7_v45.py (CUPTI: fp32 H=1024 B=6, 7, 8 forward replay and training kernels)
#   odd       benchmarks/explore_odd_batch_v45.py (SET, default 1: fp32 training, the rows against the grid backward)
#   sanitize  compute-sanitizer memcheck and racecheck over benchmarks/persistent_rows_padded_small_run.py
#   v44:*     a stage of tools/device_v44.sh (gc, gbench, sanitize, v43:* (mid, mbench, pack, v42:* (tests, quick,
#             rest, sanitize, cache, ...)))
set -u
OUT=${OUT:-/tmp/v45_out}
mkdir -p "$OUT"
for stage in ${STAGES:-fitreg b7 v44:v43:v42:quick v44:v43:pack}; do
  case $stage in
    fitreg) source benchmarks/device_setup.sh && record_device "$OUT/device.txt"
            timeout "${FIT_TIMEOUT:-300}" python3 tools/fit_cluster_registers.py "$OUT/fit_cluster_registers_nvrtc.json" \
              --compiler nvrtc --jobs "${JOBS:-14}" > "$OUT/fit_cluster_registers_nvrtc.md" 2>&1; tail -50 "$OUT/fit_cluster_registers_nvrtc.md" ;;
    b7) source benchmarks/device_setup.sh
        timeout "${BENCH_TIMEOUT:-240}" python3 benchmarks/profile_batch7_v45.py "$OUT" 2>&1 | tail -5 ;;
    odd) source benchmarks/device_setup.sh
         timeout "${BENCH_TIMEOUT:-240}" python3 benchmarks/explore_odd_batch_v45.py "$OUT" --set "${SET:-1}" 2>&1 | tail -10 ;;
    sanitize) source benchmarks/device_setup.sh
              run_sanitizers benchmarks/persistent_rows_padded_small_run.py "$OUT/sanitizers.log" "${SAN_TIMEOUT:-150}" 10 ;;
    v44:*) OUT=$OUT STAGES=${stage#v44:} bash tools/device_v44.sh ;;
  esac
done
