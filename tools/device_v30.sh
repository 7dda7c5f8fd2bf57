#!/bin/bash
# v30's device visit (the 16-bit forward's batch as groups on blocks of their own). Stages (STAGES),
# everything under $OUT:
#   tests       GPU test files ($TESTS; default the v30 file)
#   explore     the kernel alone (explore_exchange_delay.py --groups): fp16/bf16 H=1024 B=16, the chosen
#               plan against the grouped plans ($ONLY, $DELAYS)
#   alternate   whole forward, grouped vs ungrouped (ab_alternate.py bench_persistent_v30)
#   pair        fwd+bwd with cuDNN (bench_persistent_v30.py); pair8: the same, the grouped backward on 8 warps
#   sweep       whole forward, grouped vs v29 on bench_persistent_v30_sweep's rows; sweep_train: fwd+bwd there
#   profile     the training call's kernels, grouped and not (profile_training_v30.py)
#   plots       the #5 16-bit plot sweep (vs batch at H=1024, cuDNN in the process); planner: the 16-bit
#               persistent/fused sweep at B >= 16 (the planner's pick where groups changed persistent)
#   barriers    a barrier per group vs grid.sync() in the grouped grid.sync plans (forward and fwd+bwd)
#   bench       the quick bench; cache: the NVRTC cache
set -u
OUT=${OUT:-/tmp/v30_out}
mkdir -p "$OUT"
source benchmarks/device_setup.sh
record_device "$OUT/device.txt"
for stage in ${STAGES:-"tests cache"}; do
  case $stage in
    tests) run_gpu_tests "$OUT/tests.log" ${TESTS:-"$REPO/tests/test_persistent_v30_gpu.py"} ;;
    explore)
      timeout "${EXPLORE_TIMEOUT:-300}" python3 benchmarks/explore_exchange_delay.py "$OUT" --rounds "${ROUNDS:-3}" \
        --cells "${CELLS:-[[\"float16\", 1024, 16]]}" --groups '[1, 2]' --only "${ONLY:-[\"chosen\", \"g2\"]}" \
        --delays "${DELAYS:-[0]}" --name "${EXPLORE_NAME:-explore_groups}" 2>&1 | tail -14 ;;
    alternate) timeout "${ALT_TIMEOUT:-200}" python3 benchmarks/ab_alternate.py "$OUT" bench_persistent_v30 \
      --rounds "${ROUNDS:-3}" --name ab_alternate_v30 2>&1 | tail -12 ;;
    pair) timeout "${PAIR_TIMEOUT:-200}" python3 benchmarks/bench_persistent_v30.py "$OUT" 2>&1 | tail -8 ;;
    pair8) timeout "${PAIR_TIMEOUT:-200}" python3 benchmarks/bench_persistent_v30_bwd8.py "$OUT" 2>&1 | tail -8 ;;
    sweep) timeout "${SWEEP_TIMEOUT:-300}" python3 benchmarks/ab_alternate.py "$OUT" bench_persistent_v30_sweep \
      --rounds "${ROUNDS:-2}" --name sweep_forward_v30 2>&1 | tail -12 ;;
    sweep_train) timeout "${SWEEP_TIMEOUT:-300}" python3 benchmarks/bench_persistent_v30_sweep.py "$OUT" 2>&1 | tail -12 ;;
    profile) timeout "${PROFILE_TIMEOUT:-150}" python3 benchmarks/profile_training_v30.py "$OUT" 2>&1 | tail -30 ;;
    plots) timeout "${PLOT_TIMEOUT:-200}" python3 -m ecornn.run sweep --hidden 1024 --batch 1,2,4,8,16,32,64 \
      --dtype float16,bfloat16 --mode inference --seq-len 256 --iterations 3 --json "$OUT/plot_batch.json" 2>&1 | tail -3 ;;
    planner) timeout "${PLANNER_TIMEOUT:-400}" python3 -m ecornn.run sweep --hidden 256,512,1024,1536 --batch 16,32,64 \
      --dtype float16,bfloat16 --mode inference,training --seq-len 256 --iterations 2 --no-torch \
      --json "$OUT/sweep_16bit.json" 2>&1 | tail -3 ;;
    barriers) timeout "${ALT_TIMEOUT:-200}" python3 benchmarks/ab_alternate.py "$OUT" bench_persistent_v30_barriers \
      --rounds "${ROUNDS:-3}" --name ab_barriers_v30 2>&1 | tail -6
      timeout "${PAIR_TIMEOUT:-200}" python3 benchmarks/bench_persistent_v30_barriers.py "$OUT" 2>&1 | tail -8 ;;
    bench) timeout "${BENCH_TIMEOUT:-150}" python3 benchmarks/bench_persistent.py --out "$OUT" --quick 2>&1 | tail -14 ;;
    cache) save_cupy_cache "$OUT" ;;
  esac
done
