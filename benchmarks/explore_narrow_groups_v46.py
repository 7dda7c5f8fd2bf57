"""v46 exploration: 16-bit passes at B = 10-14 (set 1; set 2: B = 4-8) in two batch groups of 5-7 (2-4) columns
(each padded to one mma N tile; capacity.BATCH_GROUP_MIN lowered) against the engine's choice ("auto": ungrouped there). Per cell and
mode, alternated in one process: the whole forward (graph replay), the forward kernel alone and fwd+bwd, T=256,
input = hidden.

    python benchmarks/explore_narrow_groups_v46.py OUT_DIR [--rounds N] [--repeats N] [--set N]
Writes OUT_DIR/explore_narrow_groups_v46.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from explore_groups_v39 import measure_modes_cell, run  # noqa: E402

TWO_NARROW_GROUPS = {"2 groups": {"BATCH_GROUPS": 2, "BATCH_GROUP_MIN": 4}}


def measure_cell(dtype, hidden, batch, modes, rounds, repeats, train=True) -> dict:
    return measure_modes_cell(dtype, hidden, batch, {"auto": {}, **modes}, rounds, repeats, train)


VERY_NARROW = {"2 groups": {"BATCH_GROUPS": 2, "BATCH_GROUP_MIN": 2}}

# (dtype, hidden, batch, {mode: flags} besides "auto"), per --set
CELL_SETS = {
    1: [("float16", 1024, 12, TWO_NARROW_GROUPS), ("float16", 1024, 10, TWO_NARROW_GROUPS),
        ("float16", 1024, 14, TWO_NARROW_GROUPS), ("bfloat16", 1024, 12, TWO_NARROW_GROUPS),
        ("float16", 512, 12, TWO_NARROW_GROUPS), ("bfloat16", 256, 10, TWO_NARROW_GROUPS),
        ("float16", 768, 14, TWO_NARROW_GROUPS)],
    # 2: B <= 8 in two groups of 2-4 columns against one (call 8; since rules.narrow_groups_pay, "auto" groups the
    # cells it measured to pay, so a rerun compares those with themselves)
    2: [("float16", 256, 8, VERY_NARROW), ("float16", 512, 8, VERY_NARROW), ("bfloat16", 384, 8, VERY_NARROW),
        ("float16", 1024, 8, VERY_NARROW), ("float16", 256, 6, VERY_NARROW), ("bfloat16", 256, 4, VERY_NARROW),
        ("bfloat16", 512, 4, VERY_NARROW)],
}


if __name__ == "__main__":
    run(CELL_SETS, "explore_narrow_groups_v46", measure=measure_cell)
