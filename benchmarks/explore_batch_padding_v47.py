"""v47 exploration: batches the persistent engine now runs padded (persistent.run_config: an odd B as B+1 zero-padded
columns, in more batch groups) against the same call unpadded (BATCH_PADDING=False). Per cell and mode, alternated in
one process: the whole forward (graph replay), the forward kernel alone (at the batch it runs as) and fwd+bwd, T=256,
input = hidden.

    python benchmarks/explore_batch_padding_v47.py OUT_DIR [--rounds N] [--repeats N] [--set N]
Writes OUT_DIR/explore_batch_padding_v47.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from explore_groups_v39 import run  # noqa: E402
from explore_narrow_groups_v46 import measure_cell  # noqa: E402  ("auto" against the cell's modes)

UNPADDED = {"unpadded": {"BATCH_PADDING": False}}


# (dtype, hidden, batch, {mode: flags} besides "auto"[, train]), per --set
CELL_SETS = {
    # 1: 16-bit odd batches (one group unpadded, two padded), B=3 training (the B=4 backward's two groups), B=27
    # training (does not plan unpadded)
    1: [("float16", 1024, 13, UNPADDED), ("float16", 1024, 9, UNPADDED), ("float16", 1024, 15, UNPADDED),
        ("bfloat16", 1024, 11, UNPADDED), ("float16", 512, 13, UNPADDED), ("bfloat16", 256, 9, UNPADDED),
        ("float16", 256, 7, UNPADDED), ("float16", 1024, 25, UNPADDED), ("float16", 1536, 11, UNPADDED),
        ("bfloat16", 384, 3, UNPADDED), ("float16", 1024, 27, UNPADDED)],
    # 2: fp32 (the split's groups at H <= 768; H=1024 B=15 the clustered groups of 8; B=5, 7 the grid backward's)
    2: [("float32", 256, 7, UNPADDED), ("float32", 256, 5, UNPADDED), ("float32", 512, 3, UNPADDED),
        ("float32", 512, 11, UNPADDED), ("float32", 768, 7, UNPADDED), ("float32", 1024, 15, UNPADDED),
        ("float32", 1024, 5, UNPADDED), ("float32", 1024, 7, UNPADDED), ("float32", 256, 3, UNPADDED)],
}


if __name__ == "__main__":
    run(CELL_SETS, "explore_batch_padding_v47", measure=measure_cell)
