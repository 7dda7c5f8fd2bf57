# Sourced by the device_*.sh scripts: install the checkout and put it on PYTHONPATH. ecornn maps
# kernels/ and layouts/ as ecornn.kernels / ecornn.layouts itself when run from a checkout.
export PYTHONUNBUFFERED=1
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
REPO=$PWD
export PYTHONPATH=$REPO${PYTHONPATH:+:$PYTHONPATH}

# The GPU, its driver and clock, and the CuPy / torch / cuDNN versions, into a file (and printed).
record_device() {  # file
  {
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv
    python3 -c "import cupy, torch; print('cupy', cupy.__version__, 'torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"
  } > "$1" 2>&1
  cat "$1"
}

# The named GPU test files (-m gpu) under a timeout ($TEST_TIMEOUT, else 300 s), run from /tmp so
# that the installed checkout is imported; the log's last 40 lines go to the file, 15 are printed.
run_gpu_tests() {  # log test_file...
  local log=$1; shift
  (cd /tmp && timeout "${TEST_TIMEOUT:-300}" python3 -m pytest -q -m gpu -rfEs -p no:cacheprovider \
    --import-mode=append --rootdir "$REPO" "$@" 2>&1 \
    | grep -v "moduleUnload\|Exception ignored\|NoneType\|excepthook\|^$" | tail -40) > "$log"
  tail -15 "$log"
}

# compute-sanitizer (memcheck and racecheck, or $SAN_TOOLS) over one small-run script, each tool
# under a timeout ($SAN_TIMEOUT, else the third argument); the log is written and printed.
run_sanitizers() {  # script log [timeout_s] [tail_lines]
  local script=$1 log=$2 limit=${3:-40} lines=${4:-8} tool
  {
    for tool in ${SAN_TOOLS:-memcheck racecheck}; do
      echo "== compute-sanitizer --tool $tool"
      timeout "${SAN_TIMEOUT:-$limit}" compute-sanitizer --tool "$tool" --error-exitcode 9 \
        python3 "$script" 2>&1 | tail -"$lines"
      echo "exit: ${PIPESTATUS[0]}"
    done
  } > "$log" 2>&1
  cat "$log"
}

# CuPy's NVRTC cache between device visits (each visit starts on a bare machine, and compiling every
# kernel variant cold costs minutes): restored from .devcache/cupy_cache.tgz when that was carried
# (an ignored path), saved to $OUT by save_cupy_cache for the next visit to carry.
export CUPY_CACHE_DIR=/tmp/cupy_kernel_cache
mkdir -p "$CUPY_CACHE_DIR"
if ls .devcache/cupy_cache.tgz* >/dev/null 2>&1; then   # one tarball, or its 15 MB parts (.part-aa, ...)
  cat .devcache/cupy_cache.tgz* | tar xz -C "$CUPY_CACHE_DIR" && echo "cupy cache: $(ls "$CUPY_CACHE_DIR" | wc -l) files restored"
fi
save_cupy_cache() {  # out_dir: 15 MB parts (the device tool returns at most 16 MiB per file)
  tar cz -C "$CUPY_CACHE_DIR" . | split -b 15000000 - "$1/cupy_cache.tgz.part-" && ls -la "$1"/cupy_cache.tgz.part-*
}
