"""v30 benchmark variant: bench_persistent_v30's pair bench with the grouped backward on 8-warp blocks
(32 k-tiles per warp) instead of 16 (capacity.GROUP_WARPS), to pick the backward's warps.

    python benchmarks/bench_persistent_v30_bwd8.py OUT_DIR [--repeats N] [--rows N] [--v29-first]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402
from bench_persistent_v30 import MODES, TRAIN_ROWS  # noqa: E402

from ecornn.engines import persistent_capacity  # noqa: E402

persistent_capacity.GROUP_WARPS = {**persistent_capacity.GROUP_WARPS, "backward": 8}
row, markdown, main = ab_modes.pair_bench(TRAIN_ROWS, MODES, ("grouped", "v29"), "persistent_v30_bwd8_bench",
                                          "--v29-first", "time the v29 mode first (order bias check)")

if __name__ == "__main__":
    main()
