"""v30 benchmark: grouped grid.sync plans with a barrier per (direction, group) (GROUP_BARRIERS=True, an
option: measured slower) against grid.sync() over the whole grid (the default). ab_alternate.py alternates the modes on ROWS (the
grouped forwards that run grid.sync: groups of 16); run as a script, the pair bench times fwd+bwd (the
grouped backward runs grid.sync at every B) and cuDNN on TRAIN_ROWS.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v30_barriers --rounds 3 --name ab_barriers_v30
    python benchmarks/bench_persistent_v30_barriers.py OUT_DIR [--repeats N] [--rows N]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402

ROWS = [("float16", 1024, 32), ("float16", 512, 32)]
MODES = {"group barriers": {"GROUP_BARRIERS": True}, "grid.sync": {}}
TRAIN_ROWS = [("float16", 1024, 16), ("bfloat16", 1024, 16), ("float16", 512, 32), ("float16", 1024, 32)]
row, markdown, main = ab_modes.pair_bench(TRAIN_ROWS, MODES, ("group barriers", "grid.sync"), "persistent_v30_barriers",
                                          "--grid-sync-first", "time the grid.sync mode first (order bias check)")

if __name__ == "__main__":
    main()
