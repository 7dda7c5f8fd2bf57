"""v52 benchmark: 16-bit forwards with W_ih k-tiles of the in-kernel projection in registers (INPUT_REG_K_TILES),
and fp16 B=16 ungrouped on 8-warp blocks with every W_ih tile in registers (FORWARD_WARPS), against v51's plans.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v52 --rounds 4 --name ab_alternate_v52
"""
ROWS = [("float16", 1024, 16), ("float16", 1024, 8), ("bfloat16", 1024, 4), ("float16", 768, 4), ("float16", 512, 8)]
ALTERNATE_MODES = {
    "v51": {},
    "W_ih 2 k-tiles in registers": {"INPUT_REG_K_TILES": 2},
    "W_ih all in registers (backed off where it spills)": {"INPUT_REG_K_TILES": "all"},
    "all, whole projection in the kernel": {"INPUT_REG_K_TILES": "all", "INPUT_PART_K_TILES": 0},
    "ungrouped on 8 warps, all in registers": {"INPUT_REG_K_TILES": "all", "FORWARD_WARPS": 8, "BATCH_GROUPS": False},
}
MODES = ALTERNATE_MODES
