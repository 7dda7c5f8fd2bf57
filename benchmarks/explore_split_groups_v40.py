"""v40 exploration: the fp32 split forward (fp16 hi/lo halves on the tensor cores) with its batch in groups on blocks
of their own (persistent.BATCH_GROUPS = G: G groups of B/G columns, each on 1/G of the SMs, wherever they fit)
against the engine's choice ("auto": the ungrouped split, or FFMA where rules.fp32_split_pays says so). Per cell and
mode, alternated in one process: the forward kernel alone and the whole forward (graph replay), T=256, input = hidden;
fwd+bwd too where a cell's 5th item says so (the backward is the fp32 FFMA kernels' in every mode).

    python benchmarks/explore_split_groups_v40.py OUT_DIR [--rounds N] [--repeats N] [--set 1|2]
Writes OUT_DIR/explore_split_groups_v40.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from explore_groups_v39 import run  # noqa: E402

# (dtype, hidden, batch, groups to try besides "auto", train)
CELL_SETS = {
    1: [("float32", 256, 32, (2, 4, 8), False), ("float32", 512, 32, (2, 4), False),
        ("float32", 256, 64, (4, 8, 16), False), ("float32", 512, 16, (2, 4), False),
        ("float32", 1024, 8, (2,), False), ("float32", 384, 32, (4, 8), False),
        ("float32", 256, 16, (2, 4), False)],
    2: [("float32", 512, 64, (4,), False), ("float32", 768, 16, (2,), False),
        ("float32", 768, 32, (2,), False), ("float32", 1024, 16, (2,), False), ("float32", 512, 8, (2,), False),
        ("float32", 384, 16, (2, 4), False), ("float32", 128, 64, (8, 16), False), ("float32", 256, 8, (2,), False),
        ("float32", 384, 24, (3, 6), False), ("float32", 128, 128, (16, 32), False)],
    # 3: v40's rule as "auto" against no groups (False: the ungrouped split or FFMA) on cells calls 1-2 did not measure,
    # below the rule's smallest hidden size (forced counts), and fwd+bwd on two of them
    3: [("float32", 768, 8, (False,), False), ("float32", 128, 32, (False,), False), ("float32", 512, 12, (False,), False),
        ("float32", 384, 20, (False,), False), ("float32", 256, 40, (False,), False), ("float32", 512, 18, (False,), False),
        ("float32", 96, 32, (False, 8), False), ("float32", 64, 16, (False, 4), False), ("float32", 1536, 8, (False, 2), False),
        ("float32", 512, 16, (False,), True), ("float32", 256, 32, (False,), True)]}


if __name__ == "__main__":
    run(CELL_SETS, "explore_split_groups_v40")
