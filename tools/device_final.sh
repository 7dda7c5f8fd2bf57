#!/usr/bin/env bash
# The lead's combined device visit, in two parts that each fit one device call:
#   bash tools/device_final.sh tests   # every GPU test, ecornn.LSTM (mxnet) on the device,
#                                      # the torch training benchmark, the FlashRNN peer
#   bash tools/device_final.sh sweep   # the bf16 planner sweep (full grid) + the persistent plots sweep
# Carry .whl (mxnet and flashrnn wheels). Everything lands in $OUT/final_<part>.tgz + a summary,
# because a device call returns at most 8 files.
set -u
PART=${1:-tests}
OUT=${OUT:-/tmp/out}
WORK=/tmp/final_$PART
mkdir -p "$WORK" "$OUT"
export PYTHONUNBUFFERED=1 ECORNN_CACHE=$WORK/cache
REPO=$PWD
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$WORK/pip.log" 2>&1
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import cupy, torch, numpy, sys; print('python', sys.version.split()[0], 'cupy', cupy.__version__, 'torch', torch.__version__, 'cudnn', torch.backends.cudnn.version(), 'numpy', numpy.__version__)"
  (cd /tmp && python3 -c "import ecornn, ecornn.layouts, ecornn.kernels; print('ecornn from', ecornn.__file__)")
} > "$WORK/env.txt" 2>&1
cat "$WORK/env.txt"

section() {  # name, timeout seconds, command...
  local name=$1 limit=$2; shift 2
  local start=$SECONDS
  timeout "$limit" "$@" > "$WORK/$name.log" 2>&1
  local rc=$?
  echo "== $name: exit $rc in $((SECONDS - start)) s" | tee -a "$WORK/summary.txt"
  tail -n 6 "$WORK/$name.log" | tee -a "$WORK/summary.txt"
}

if [ "$PART" = tests ]; then
  section gpu_tests 330 python3 -m pytest -q -m gpu -rfEs -p no:cacheprovider --durations=15 tests/
  section mxnet 60 bash tools/device_mxnet.sh
  [ "${TORCH_TRAIN:-0}" = 1 ] && section torch_train 80 python3 benchmarks/bench_torch_train.py --out "$WORK"
  if ls .whl/flashrnn-*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --target /tmp/frsite .whl/flashrnn-*.whl
    python3 benchmarks/patch_flashrnn_cuda13.py /tmp/frsite
    section flashrnn ${FLASHRNN_TIMEOUT:-240} env PYTHONPATH=/tmp/frsite python3 benchmarks/bench_flashrnn.py "$WORK"
  fi
else
  [ -n "${PYTEST_K:-}" ] && section pytest_k 90 python3 -m pytest -q -m gpu -rfEs -p no:cacheprovider -k "$PYTEST_K" tests/
  # 16-bit kernels changed (persistent v4 mma, fused v3 epilogue): re-measure every bf16 cell
  section sweep_bf16 330 python3 -m ecornn.run sweep --hidden 256,512,768,1024,1536,2048 \
      --batch 1,2,4,8,16,32,64,128,256 --dtype bfloat16 --mode inference,training --seq-len 256 \
      --iterations 2 --no-torch --json "$WORK/sweep_bf16.json" --csv "$WORK/sweep_bf16.csv"
  # the persistent plots: every strategy and cuDNN in one process, vs batch at H=1024, vs H at B=4
  section plot_batch 120 python3 -m ecornn.run sweep --hidden 1024 --batch 1,2,4,8,16,32,64 \
      --dtype float32,bfloat16 --mode inference --seq-len 256 --iterations 3 --json "$WORK/plot_batch.json"
  section plot_hidden 120 python3 -m ecornn.run sweep --hidden 256,512,768,1024,1536,2048 --batch 4 \
      --dtype float32,bfloat16 --mode inference --seq-len 256 --iterations 3 --json "$WORK/plot_hidden.json"
  if [ "${FLASHRNN:-0}" = 1 ] && ls .whl/flashrnn-*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --target /tmp/frsite .whl/flashrnn-*.whl
    python3 benchmarks/patch_flashrnn_cuda13.py /tmp/frsite
    section flashrnn ${FLASHRNN_TIMEOUT:-150} env PYTHONPATH=/tmp/frsite python3 benchmarks/bench_flashrnn.py "$WORK"
  fi
fi
tar czf "$OUT/final_$PART.tgz" -C "$WORK" --exclude=cache .
cp "$WORK/summary.txt" "$OUT/summary_$PART.txt"
