"""v29 benchmark: the fp32 split forward with its input projection in the kernel (W_ih split tiles in
shared memory, x as split_x_rows' row-scaled halves; rules.split_projection_pays) against v28's
(IN_KERNEL_PROJECTION off: the fp16-split GEMM before the kernel). Rows where the rule does not take
the projection run the same plan in both modes (the noise floor). benchmarks/ab_alternate.py
alternates the two modes (whole forward by graph replay and the kernel alone); run as a script, the
pair bench (once per mode) adds fwd+bwd and cuDNN for TRAIN_ROWS.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v29 --rounds 3 --name ab_alternate_v29
    python benchmarks/bench_persistent_v29.py OUT_DIR [--repeats N] [--rows N] [--v28-first]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402

ROWS = [("float32", h, b) for h, b in ((1024, 4), (1024, 8), (512, 4), (1536, 4))]
MODES = {"v29": {}, "v28": {"IN_KERNEL_PROJECTION": False}}
TRAIN_ROWS = [("float32", 1024, 4)]
row, markdown, main = ab_modes.pair_bench(TRAIN_ROWS, MODES, ("v29", "v28"), "persistent_v29_bench", "--v28-first",
                                          "time the v28 mode first (order bias check)")

if __name__ == "__main__":
    main()
