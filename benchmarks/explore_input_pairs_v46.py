"""v46 exploration: the 16-bit forwards with the in-kernel projection staging x of two steps at a time
(persistent.INPUT_PAIRS), with and without a spin on the steps that only unpark, against the engine's choice
("auto"): #5's fp16 H=1024 B=16 (missed) and B=8, bf16 H=1024 B=4 (on the line), and cells around them. Per cell
and mode, alternated in one process: the forward kernel alone and the whole forward (graph replay), T=256,
input = hidden.

    python benchmarks/explore_input_pairs_v46.py OUT_DIR [--rounds N] [--repeats N] [--set N]
Writes OUT_DIR/explore_input_pairs_v46.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from explore_cluster_k_v42 import measure_cell  # noqa: E402
from explore_groups_v39 import run  # noqa: E402


def pairs(spin=0, **extra):
    """x of two steps staged together every other step, ``spin`` SM cycles after the publish on the others."""
    return {"INPUT_PAIRS": True, "INPUT_PAIR_SPIN_CYCLES": spin, **extra}


SPINS = {"pairs": pairs(), "pairs spin300": pairs(300), "pairs spin600": pairs(600), "pairs spin900": pairs(900)}

REPLICAS = {"x in 2 copies": {"X_REPLICAS": 2}, "x in 4 copies": {"X_REPLICAS": 4},
            "x in 16 copies": {"X_REPLICAS": 16}}

# (dtype, hidden, batch, {mode: flags} besides "auto"), per --set
CELL_SETS = {
    1: [("float16", 1024, 16, SPINS), ("float16", 1024, 8, SPINS), ("bfloat16", 1024, 4, SPINS)],
    3: [("float16", 1024, 16, REPLICAS), ("float16", 1024, 8, REPLICAS), ("bfloat16", 1024, 4, REPLICAS)],
    2: [("float16", 512, 8, SPINS), ("bfloat16", 1024, 8, SPINS), ("float16", 1024, 4, SPINS),
        ("float16", 768, 16, SPINS), ("bfloat16", 512, 32, SPINS)],
}


if __name__ == "__main__":
    run(CELL_SETS, "explore_input_pairs_v46", measure=measure_cell)
