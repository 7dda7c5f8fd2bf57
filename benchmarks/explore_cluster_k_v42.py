"""v42 (and v43, set 7) exploration: tensor-core forwards on thread-block clusters, each block 1/C of K
(persistent.CLUSTER_K = C, CLUSTER_WARPS warps per block, CLUSTER_POLL_DELAY_NS), against the engine's choice ("auto"). Per cell and mode,
alternated in one process: the forward kernel alone and the whole forward (graph replay), T=256, input = hidden.
16-bit cluster modes run the ungrouped plan with the projection as a GEMM (BATCH_GROUPS, IN_KERNEL_PROJECTION off).
Sets 1-4 ran before the rule: their "C2..." modes without "d..." had no first-poll delay (since, clustered plans wait
rules.CLUSTER_POLL_DELAY_NS); "auto" was then the unclustered plan.

    python benchmarks/explore_cluster_k_v42.py OUT_DIR [--rounds N] [--repeats N] [--set N]
Writes OUT_DIR/explore_cluster_k_v42.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402
from explore_groups_v39 import measure_modes_cell, run  # noqa: E402

UNGROUPED_GEMM = {"BATCH_GROUPS": False, "IN_KERNEL_PROJECTION": False}


def cluster(c, warps=None, delay=None, **extra):
    return {"CLUSTER_K": c, "CLUSTER_WARPS": warps, "CLUSTER_POLL_DELAY_NS": delay, **extra}


# (dtype, hidden, batch, {mode: flags} besides "auto"), per --set
CELL_SETS = {
    # 1: call 1 (clusters of 4 were not co-resident: 30 active clusters of 4 on the H200, 120 blocks)
    1: [("float32", 1024, 8, {"C2": cluster(2), "C2w8": cluster(2, 8), "C4w8": cluster(4, 8),
                              "C4w8d400": cluster(4, 8, 400), "C4w8ord": cluster(4, 8, CLUSTER_COOPERATIVE=False)}),
        ("float32", 1024, 4, {"C2w8": cluster(2, 8), "C4w8": cluster(4, 8), "C4w8d0": cluster(4, 8, 0)}),
        ("float16", 1024, 16, {"ungrouped": UNGROUPED_GEMM, "C2": cluster(2, **UNGROUPED_GEMM),
                               "C4w8": cluster(4, 8, **UNGROUPED_GEMM)}),
        ("float16", 1024, 8, {"C2w8": cluster(2, 8, **UNGROUPED_GEMM), "C4w8": cluster(4, 8, **UNGROUPED_GEMM)})],
    # 2: call 2, clusters of 2
    2: [("float32", 1024, 8, {"C2": cluster(2), "C2w8": cluster(2, 8), "C2d400": cluster(2, None, 400),
                              "C2ord": cluster(2, CLUSTER_COOPERATIVE=False)}),
        ("float32", 1024, 4, {"C2w8": cluster(2, 8), "C2w8d0": cluster(2, 8, 0), "C2w16": cluster(2, 16)}),
        ("float16", 1024, 16, {"ungrouped": UNGROUPED_GEMM, "C2": cluster(2, **UNGROUPED_GEMM),
                               "C2w8": cluster(2, 8, **UNGROUPED_GEMM)}),
        ("float16", 1024, 8, {"C2w8": cluster(2, 8, **UNGROUPED_GEMM), "C2": cluster(2, **UNGROUPED_GEMM)}),
        ("bfloat16", 1024, 4, {"C2w8": cluster(2, 8, **UNGROUPED_GEMM)})],
    # 3: call 3, fp32 B=8: 8 warps, first-poll delays, clusters of 3
    3: [("float32", 1024, 8, {"C2w8": cluster(2, 8), "C2w8d200": cluster(2, 8, 200), "C2w8d400": cluster(2, 8, 400),
                              "C2w8d700": cluster(2, 8, 700), "C3w8": cluster(3, 8), "C3w8d400": cluster(3, 8, 400)}),
        ("float32", 1280, 8, {"C2w8": cluster(2, 8), "C2w8d400": cluster(2, 8, 400)}),
        ("float32", 768, 8, {"C2w8": cluster(2, 8, BATCH_GROUPS=False), "ungrouped": {"BATCH_GROUPS": False}})],
    # 4: call 4, 8 warps with first-poll delays around 400 ns across the fp32 split's ungrouped cells
    4: [("float32", 1024, 8, {"C2w8d300": cluster(2, 8, 300), "C2w8d400": cluster(2, 8, 400),
                              "C2w8d500": cluster(2, 8, 500)}),
        ("float32", 1280, 8, {"C2w8d400": cluster(2, 8, 400), "C2w8d600": cluster(2, 8, 600)}),
        ("float32", 1536, 8, {"C2w8d400": cluster(2, 8, 400), "C2w8d600": cluster(2, 8, 600)}),
        ("float32", 896, 8, {"C2w8d400": cluster(2, 8, 400)}),
        ("float32", 1024, 6, {"C2w8d400": cluster(2, 8, 400)}),
        ("float32", 1024, 16, {"C2w8d400": cluster(2, 8, 400, BATCH_GROUPS=False),
                               "C2d400": cluster(2, None, 400, BATCH_GROUPS=False)}),
        ("float32", 512, 8, {"C2w8d400": cluster(2, 8, 400, BATCH_GROUPS=False)})],
    # 5: call 6 (the engine flag CLUSTER_ARRIVALS of commit 7ff2bd9, since removed: the partials handed over by mbarrier
    # arrivals) ran "auto" (the rule's plans), "arrivals", "arrivals d300" and no clusters; now "auto" against no clusters
    5: [("float32", 1024, 8, {"no clusters": {"CLUSTER_K": False}}),
        ("float32", 1280, 8, {"no clusters": {"CLUSTER_K": False}})],
    # 6: call 10, the clustered plans' first-poll wait as a clock64() spin (v35's POLL_SPIN_CYCLES) against the sleep
    # ("auto" then; since dfd576a the spin of 800 cycles is "auto")
    6: [("float32", 1024, 8, {"spin 600": {"POLL_SPIN_CYCLES": 600}, "spin 800": {"POLL_SPIN_CYCLES": 800}}),
        ("float32", 1280, 8, {"spin 800": {"POLL_SPIN_CYCLES": 800}})],
    # 7: v43 call 1 (the engine flag CLUSTER_ASYNC of commit efb08da, since removed: the partials by st.async onto the
    # owner's mbarrier instead of the cluster barrier) ran "auto", "async" (a tie), "async" with spins of 400 and 1200
    # cycles (slower) and the paired B=4 split on clusters with it (slower); then (call 2) spins of 700 and 900 cycles
    7: [("float32", 1024, 8, {"spin 700": {"POLL_SPIN_CYCLES": 700}, "spin 900": {"POLL_SPIN_CYCLES": 900}}),
        ("float32", 1280, 8, {"spin 1000": {"POLL_SPIN_CYCLES": 1000}})],
}


def measure_cell(dtype, hidden, batch, modes, rounds, repeats, train=False) -> dict:
    """Per mode ("auto" and ``modes``) whose forward builds: whole forward and kernel, alternated."""
    return measure_modes_cell(dtype, hidden, batch, {"auto": {}, **modes}, rounds, repeats, train,
                              lambda *args: ab_modes.plannable_modes(*args, built=True))


if __name__ == "__main__":
    run(CELL_SETS, "explore_cluster_k_v42", measure=measure_cell)
