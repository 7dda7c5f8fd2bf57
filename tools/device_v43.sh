#!/bin/bash
# v43's device visit: fp32 forwards at the batches between the measured ones (v42's stages besides).
# Stages (STAGES), all under $OUT:
#   mid       benchmarks/explore_mid_batches_v43.py (SET, default 1; ROUNDS, default 3)
#   mbench    benchmarks/bench_mid_batches_v43.py (persistent, fused and cuDNN in the process)
#   v42:*     a stage of tools/device_v42.sh (tests, clusters, cbench, diag, quick, rest, sanitize, cache)
#   pack      every result file under $OUT but the cache parts moved into results.tgz (the tool returns <= 8 files)
set -u
OUT=${OUT:-/tmp/v43_out}
mkdir -p "$OUT"
for stage in ${STAGES:-"mid v42:cache"}; do
  case $stage in
    mid) source benchmarks/device_setup.sh && record_device "$OUT/device.txt"
         timeout "${BENCH_TIMEOUT:-400}" python3 benchmarks/explore_mid_batches_v43.py "$OUT" --rounds "${ROUNDS:-3}" \
           --set "${SET:-1}" 2>&1 | grep -v "^{'dtype'" | tail -30 ;;
    mbench) source benchmarks/device_setup.sh
            timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/bench_mid_batches_v43.py "$OUT" 2>&1 | tail -10 ;;
    v42:*) OUT=$OUT STAGES=${stage#v42:} bash tools/device_v42.sh ;;
    pack) (cd "$OUT" && find . -type f ! -name 'cupy_cache.tgz.part-*' ! -name results.tgz > /tmp/packed \
             && tar czf results.tgz -T /tmp/packed && xargs rm -f < /tmp/packed && ls -la results.tgz) ;;
  esac
done
