"""v30 benchmark: the 16-bit forward with its batch as 2 groups on blocks of their own
(capacity.grouped_plan, BATCH_GROUPS=True) against v29's plans ("auto" before the rule). The grouped
plan takes the tagged exchange with the in-kernel projection (a batch-8 plan's rules), or with
IN_KERNEL_PROJECTION=False grid.sync and the projection GEMM ("grouped gemm"). benchmarks/ab_alternate.py
alternates ALTERNATE_MODES (whole forward by graph replay and the kernel alone); run as a script, the
pair bench (once per mode) adds fwd+bwd (the backward is not grouped) and cuDNN for TRAIN_ROWS.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v30 --rounds 3 --name ab_alternate_v30
    python benchmarks/bench_persistent_v30.py OUT_DIR [--repeats N] [--rows N] [--v29-first]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402

ROWS = [("float16", 1024, 16), ("bfloat16", 1024, 16), ("float16", 512, 16), ("bfloat16", 768, 16)]
MODES = {"grouped": {"BATCH_GROUPS": True}, "v29": {"BATCH_GROUPS": False}}
ALTERNATE_MODES = {**MODES, "grouped gemm": {"BATCH_GROUPS": True, "IN_KERNEL_PROJECTION": False}}
TRAIN_ROWS = [("float16", 1024, 16), ("bfloat16", 1024, 16)]
row, markdown, main = ab_modes.pair_bench(TRAIN_ROWS, MODES, ("grouped", "v29"), "persistent_v30_bench", "--v29-first",
                                          "time the v29 mode first (order bias check)")

if __name__ == "__main__":
    main()
