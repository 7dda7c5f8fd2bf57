"""v33 benchmark: the fp32 grid (FFMA) forwards unscaling the fp16-split GEMM's xw where they load it
(XW_UNSCALE_IN_KERNEL, as v32's split forwards) against the unscale pass over xw. The flag's ablation
also gives the split rows v31's pass back: fp32 H=1024 B=4 is v32's row again (a check of v32's gain).
benchmarks/ab_alternate.py alternates the two modes (whole forward by graph replay and the kernel alone).

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v33 --rounds 3 --name ab_alternate_v33
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402

ROWS = [("float32", h, b) for h, b in ((1024, 4), (1024, 8), (1536, 4),   # the split (--rows 3: these alone)
                                       (512, 4), (1024, 1), (1024, 2), (768, 4), (256, 8), (1536, 2))]
MODES = {"v33": {}, "pass": {"XW_UNSCALE_IN_KERNEL": False}}
# ab_alternate's modes: where xw is applied (the pointwise, v33; where loaded, v32) x the unscale (in the kernel;
# the pass): "pass at load" is v31's kernel code, "at load" v32's
ALTERNATE_MODES = {"v33": {}, "at load": {"XW_AT_LOAD": True}, "pass": {"XW_UNSCALE_IN_KERNEL": False},
                   "pass at load": {"XW_UNSCALE_IN_KERNEL": False, "XW_AT_LOAD": True}}
TRAIN_ROWS = [("float32", 512, 4)]
row, markdown, main = ab_modes.pair_bench(TRAIN_ROWS, MODES, ("v33", "pass"), "persistent_v33_bench", "--pass-first",
                                          "time the pass mode first (order bias check)")

if __name__ == "__main__":
    main()
