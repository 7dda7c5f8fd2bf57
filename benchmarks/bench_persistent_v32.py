"""v32 benchmark: the fp32 split forwards unscaling the fp16-split GEMM's xw where they load it
(XW_UNSCALE_IN_KERNEL) against v31's unscale pass over xw. benchmarks/ab_alternate.py alternates the
two modes (whole forward by graph replay and the kernel alone); run as a script, the pair bench (once
per mode) adds fwd+bwd and cuDNN for TRAIN_ROWS.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v32 --rounds 3 --name ab_alternate_v32
    python benchmarks/bench_persistent_v32.py OUT_DIR [--repeats N] [--rows N] [--v31-first]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402

ROWS = [("float32", h, b) for h, b in ((1024, 4), (1024, 8), (1536, 4), (1024, 1), (1024, 16), (512, 8))]
MODES = {"v32": {}, "v31": {"XW_UNSCALE_IN_KERNEL": False}}
TRAIN_ROWS = [("float32", 1024, 4), ("float32", 1024, 8)]
row, markdown, main = ab_modes.pair_bench(TRAIN_ROWS, MODES, ("v32", "v31"), "persistent_v32_bench", "--v31-first",
                                          "time the v31 mode first (order bias check)")

if __name__ == "__main__":
    main()
