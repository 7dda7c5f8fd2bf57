#!/bin/bash
# v46's device visit: a replayed forward's host time (v45's stages besides). The input-pairs and x-replica probes of
# this visit ran from commit 9184cd7 (their stages: pairs with SET 1 and 3, tests).
# Stages (STAGES), all under $OUT:
#   host      benchmarks/profile_host_v46.py (a replayed forward's event span, bare graph, host time, cProfile)
#   v45:*     a stage of tools/device_v45.sh (fitreg, b7, odd, sanitize, v44:* (..., v42:* (tests, quick, rest, ...)))
set -u
OUT=${OUT:-/tmp/v46_out}
mkdir -p "$OUT"
for stage in ${STAGES:-host}; do
  case $stage in
    host) source benchmarks/device_setup.sh && record_device "$OUT/device.txt"
          timeout "${BENCH_TIMEOUT:-200}" python3 benchmarks/profile_host_v46.py "$OUT" 2>&1 | tail -40 ;;
    v45:*) OUT=$OUT STAGES=${stage#v45:} bash tools/device_v45.sh ;;
  esac
done
