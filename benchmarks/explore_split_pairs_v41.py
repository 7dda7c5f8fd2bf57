"""v41 exploration: the fp32 split forward in groups of 2 columns (paired: each group's hi and lo rows fill half of
the mma's N=8), below v40's smallest split group (4 columns; set 1 ran with capacity.SPLIT_GROUP_MIN lowered to 2 by
this script, v41's default since), against the engine's choice ("auto": the ungrouped paired split at H=1024 B=4, FFMA below): per cell and mode,
alternated in one process, the forward kernel alone and the whole forward (graph replay), T=256, input = hidden.

    python benchmarks/explore_split_pairs_v41.py OUT_DIR [--rounds N] [--repeats N]
Writes OUT_DIR/explore_split_pairs_v41.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from explore_groups_v39 import run  # noqa: E402

# (dtype, hidden, batch, groups to try besides "auto", train)
CELL_SETS = {1: [("float32", 1024, 4, (2,), False), ("float32", 512, 4, (2,), False), ("float32", 768, 4, (2,), False),
                 ("float32", 384, 4, (2,), False), ("float32", 256, 4, (2,), False), ("float32", 1024, 2, (2,), False),
                 ("float32", 512, 8, (4,), False)],
             # 2: call 8, "auto" with v41's rule (groups of 2 columns first at B <= 8) against no groups (False: the
             # ungrouped split or FFMA) and v40's pick (2 groups of 4 at B=8)
             2: [("float32", 256, 8, (False, 2), False), ("float32", 384, 8, (False, 2), False),
                 ("float32", 640, 4, (False,), False), ("float32", 512, 6, (False,), False),
                 ("float32", 512, 4, (False,), False), ("float32", 768, 8, (4,), False)]}

if __name__ == "__main__":
    run(CELL_SETS, "explore_split_pairs_v41")
