"""v30 sweep: where the grouped 16-bit passes (BATCH_GROUPS=True) beat v29's plans, for
rules.batch_groups_pay. ab_alternate.py alternates the two modes on ROWS (whole forward and the kernel
alone); run as a script, the pair bench times fwd+bwd (and cuDNN) on the same rows.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v30_sweep --rounds 2 --name sweep_forward_v30
    python benchmarks/bench_persistent_v30_sweep.py OUT_DIR [--repeats N] [--rows N] [--start K]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402
from bench_persistent_v30 import MODES  # noqa: E402

ROWS = [("float16", 256, 16), ("float16", 512, 16), ("bfloat16", 768, 16), ("float16", 1024, 24),
        ("float16", 256, 32), ("float16", 512, 32), ("float16", 1024, 32), ("bfloat16", 512, 64)]
row, markdown, main = ab_modes.pair_bench(ROWS, MODES, ("grouped", "v29"), "persistent_v30_sweep", "--v29-first",
                                          "time the v29 mode first (order bias check)")

if __name__ == "__main__":
    main()
