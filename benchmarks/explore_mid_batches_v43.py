"""v43 exploration: fp32 forwards at the batches between the measured ones. "auto" runs FFMA at B=5-7 from H=512
(rules.fp32_split_pays: the split from B=8, the paired split at B=4) and the ungrouped 16-warp split at B=9-15 from
H=1024; here against the split (ungrouped, the batch padded to the mma's N), on clusters of 2 blocks of 8 warps (v42's
shape), and in batch groups. Per cell and mode, alternated in one process: the forward kernel alone and the whole
forward (graph replay), T=256, input = hidden.

    python benchmarks/explore_mid_batches_v43.py OUT_DIR [--rounds N] [--repeats N] [--set N]
Writes OUT_DIR/explore_mid_batches_v43.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from explore_cluster_k_v42 import measure_cell  # noqa: E402
from explore_groups_v39 import run  # noqa: E402

SPLIT = {"FP32_TENSOR_CORES": True, "BATCH_GROUPS": False, "CLUSTER_K": False}
SPLIT_C2 = {"FP32_TENSOR_CORES": True, "BATCH_GROUPS": False, "CLUSTER_K": 2, "CLUSTER_WARPS": 8}


def groups(count):
    return {"FP32_TENSOR_CORES": True, "BATCH_GROUPS": count}


# (dtype, hidden, batch, {mode: flags} besides "auto"), per --set
CELL_SETS = {
    1: [("float32", 1024, 6, {"split": SPLIT, "split C2": SPLIT_C2}),
        ("float32", 1024, 5, {"split C2": SPLIT_C2}),
        ("float32", 1024, 7, {"split C2": SPLIT_C2}),
        ("float32", 1280, 6, {"split C2": SPLIT_C2}),
        ("float32", 768, 6, {"split C2": SPLIT_C2, "groups 3": groups(3), "groups 2": groups(2)}),
        ("float32", 512, 6, {"groups 2": groups(2)}),   # "auto": 3 groups of 2
        ("float32", 1024, 12, {"groups 2": groups(2), "split C2": SPLIT_C2})],
    # 2: the edges (at H=896 and 640 a block's units are odd, so "split C2" runs the split unclustered)
    2: [("float32", 1024, 9, {"split C2": SPLIT_C2}), ("float32", 1024, 10, {"split C2": SPLIT_C2}),
        ("float32", 1024, 14, {"split C2": SPLIT_C2}), ("float32", 1024, 15, {"split C2": SPLIT_C2}),
        ("float32", 768, 5, {"split C2": SPLIT_C2}), ("float32", 768, 7, {"split C2": SPLIT_C2}),
        ("float32", 768, 8, {"split C2": SPLIT_C2}), ("float32", 768, 12, {"split C2": SPLIT_C2}),
        ("float32", 896, 6, {"split": SPLIT_C2}), ("float32", 640, 6, {"split": SPLIT_C2}),
        ("float32", 1536, 6, {"split C2": SPLIT_C2}), ("float32", 1280, 12, {"split C2": SPLIT_C2})],
    # 3: B=3 and B=2, FFMA in "auto", against the split (unpaired at B=3, 3 mma per tile; paired at B=2)
    3: [("float32", 1024, 3, {"split": SPLIT}), ("float32", 1280, 3, {"split": SPLIT}),
        ("float32", 1536, 3, {"split": SPLIT}), ("float32", 768, 3, {"split": SPLIT}),
        ("float32", 1024, 2, {"split": SPLIT})],
}


if __name__ == "__main__":
    run(CELL_SETS, "explore_mid_batches_v43", measure=measure_cell)
