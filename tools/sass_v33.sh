#!/bin/bash
# v33: SASS of the forward step loops with and without the in-kernel unscale: the grid kernel's H=1024 B=1
# plan and the fp32 split's H=1024 B=4 plan, v32's text (commit 5c2bf55, from git: run it in a clone with
# history; calls 7 and 9 ran it with copies of those files) as "old", the checkout's as "new"; where the
# exponents' ldexpf (VIADDMNMX) sits against the polls (NANOSLEEP).
set -u
GRID="-DPASS=0 -DBATCH=1 -DNWARPS=16 -DLANE_ROWS=16 -DROWS_PER_LANE=2 -DCOLS_PER_LANE=32 -DREG_COLS=32 -DTAGGED=1 -DPOLL_DELAY_NS=250 -DKERNEL_BIAS=1"
SPLIT="-DPASS=0 -DBF16=0 -DBATCH=4 -DNWARPS=8 -DM_TILES=2 -DK_TILES=8 -DREG_K_TILES=8 -DTAGGED=1 -DSPLIT=1 -DPOLL_DELAY_NS=400"
OLD=/tmp/v32_kernels
mkdir -p $OLD
for f in persistent_lstm.cu persistent_mma.cu persistent_common.cuh mma_common.cuh; do git show 5c2bf55:kernels/$f > $OLD/$f; done
sass() {  # name defines source
  nvcc -arch=sm_90 -std=c++17 -cubin -o /tmp/$1.cubin $2 $3
  cuobjdump -sass /tmp/$1.cubin | grep -E "^\s+/\*[0-9a-f]+\*/" | grep -vE "FFMA|FADD|FMUL|HMMA" > $OUT/sass_$1.txt
  echo "$1: $(wc -l < $OUT/sass_$1.txt) lines; NANOSLEEP / VIADDMNMX at:" \
    $(grep -nE "NANOSLEEP|VIADDMNMX" $OUT/sass_$1.txt | cut -d: -f1 | tr '\n' ' ')
}
sass grid_new "$GRID" kernels/persistent_lstm.cu
sass grid_old "$GRID" $OLD/persistent_lstm.cu
sass split_new "$SPLIT" kernels/persistent_mma.cu
sass split_old "$SPLIT" $OLD/persistent_mma.cu
