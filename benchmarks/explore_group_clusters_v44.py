"""v44 exploration: tensor-core forwards in batch groups on thread-block clusters (GROUPS with CLUSTER_K, the
projection as a GEMM) against the engine's choice ("auto"): #5's missed fp16 H=1024 B=16 (2 groups of 8, tagged, the
projection in the kernel) and fp32 H=1024 B=8 / B=16. Per cell and mode, alternated in one process: the forward
kernel alone and the whole forward (graph replay), T=256, input = hidden.

    python benchmarks/explore_group_clusters_v44.py OUT_DIR [--rounds N] [--repeats N] [--set N]
Writes OUT_DIR/explore_group_clusters_v44.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from explore_cluster_k_v42 import UNGROUPED_GEMM, cluster, measure_cell  # noqa: E402
from explore_groups_v39 import run  # noqa: E402


def grouped_clusters(groups, warps=8, **extra):
    """``groups`` batch groups, each on clusters of 2 blocks of ``warps`` warps, the projection as a GEMM."""
    return cluster(2, warps, BATCH_GROUPS=groups, IN_KERNEL_PROJECTION=False, **extra)


# (dtype, hidden, batch, {mode: flags} besides "auto"), per --set
CELL_SETS = {
    1: [("float16", 1024, 16, {"G2 C2w8": grouped_clusters(2), "G2 C2w16": grouped_clusters(2, 16),
                               "G2 C2w8 spin400": grouped_clusters(2, POLL_SPIN_CYCLES=400),
                               "G2 C2w8 spin1200": grouped_clusters(2, POLL_SPIN_CYCLES=1200),
                               "G2 C2w8 no wait": grouped_clusters(2, CLUSTER_POLL_DELAY_NS=0),
                               "C2w8": cluster(2, 8, **UNGROUPED_GEMM)}),
        ("float16", 1024, 8, {"C2w8": cluster(2, 8, **UNGROUPED_GEMM)}),
        ("bfloat16", 1024, 4, {"C2w8": cluster(2, 8, **UNGROUPED_GEMM)}),
        ("float32", 1024, 16, {"G2 C2w8": grouped_clusters(2)}),
        ("float32", 1024, 8, {"G2 C2w8": grouped_clusters(2), "C2w16": cluster(2, 16)})],
    # 2: the input projection in the kernel on clusters (each rank half of the input columns); more fp32 grouped cells
    2: [("float16", 1024, 16, {"G2 C2w8 proj": cluster(2, 8, BATCH_GROUPS=2),
                               "G2 C2w8 proj no wait": cluster(2, 8, 0, BATCH_GROUPS=2),
                               "G2 C2w8 proj spin400": cluster(2, 8, BATCH_GROUPS=2, POLL_SPIN_CYCLES=400)}),
        ("float16", 1024, 8, {"C2w8 proj": cluster(2, 8), "C2w8 proj no wait": cluster(2, 8, 0)}),
        ("bfloat16", 1024, 4, {"C2w8 proj": cluster(2, 8), "C2w8 proj no wait": cluster(2, 8, 0)}),
        ("float32", 768, 16, {"G2 C2w8": grouped_clusters(2)}),
        ("float32", 1024, 24, {"C2w8": cluster(2, 8, BATCH_GROUPS=False)}),   # no groups fit: ungrouped
        ("float32", 1024, 32, {"C2w8": cluster(2, 8, BATCH_GROUPS=False)})],
    # 3: the fp32 split's batch groups ("auto": the groups of rules.split_group_counts) on clusters of 2, by cell
    3: [("float32", 1024, 16, {"C2w8": cluster(2, 8)}), ("float32", 896, 16, {"C2w8": cluster(2, 8)}),
        ("float32", 640, 16, {"C2w8": cluster(2, 8)}), ("float32", 512, 16, {"C2w8": cluster(2, 8)}),
        ("float32", 512, 32, {"C2w8": cluster(2, 8)}), ("float32", 768, 32, {"C2w8": cluster(2, 8)}),
        ("float32", 384, 16, {"C2w8": cluster(2, 8)}), ("float32", 768, 24, {"C2w8": cluster(2, 8)})],
}


if __name__ == "__main__":
    run(CELL_SETS, "explore_group_clusters_v44", measure=measure_cell)
