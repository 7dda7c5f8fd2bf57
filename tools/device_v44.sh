#!/bin/bash
# v44's device visit: tensor-core forwards in batch groups on thread-block clusters (v42's and v43's stages besides).
# Stages (STAGES), all under $OUT:
#   gc        benchmarks/explore_group_clusters_v44.py (SET, default 1; ROUNDS, default 3)
#   gbench    benchmarks/bench_group_clusters_v44.py (persistent, fused and cuDNN in the process)
#   sanitize  compute-sanitizer memcheck and racecheck over benchmarks/persistent_group_clusters_small_run.py
#   v43:*     a stage of tools/device_v43.sh (mid, mbench, pack, v42:* (tests, quick, rest, sanitize, cache, ...))
set -u
OUT=${OUT:-/tmp/v44_out}
mkdir -p "$OUT"
for stage in ${STAGES:-"gc v43:v42:cache"}; do
  case $stage in
    gc) source benchmarks/device_setup.sh && record_device "$OUT/device.txt"
        timeout "${BENCH_TIMEOUT:-400}" python3 benchmarks/explore_group_clusters_v44.py "$OUT" --rounds "${ROUNDS:-3}" \
          --set "${SET:-1}" 2>&1 | grep -v "^{'dtype'" | tail -30 ;;
    gbench) source benchmarks/device_setup.sh
            timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/bench_group_clusters_v44.py "$OUT" 2>&1 | tail -10 ;;
    sanitize) source benchmarks/device_setup.sh
              run_sanitizers benchmarks/persistent_group_clusters_small_run.py "$OUT/sanitizers.log" "${SAN_TIMEOUT:-150}" 10 ;;
    v43:*) OUT=$OUT STAGES=${stage#v43:} bash tools/device_v43.sh ;;
  esac
done
