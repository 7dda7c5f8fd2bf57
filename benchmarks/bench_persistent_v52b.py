"""v52 benchmark, second set: how many W_ih k-tiles per warp in registers (INPUT_REG_K_TILES 0-4) pay, over the
16-bit forwards with the in-kernel projection (call 1: 2 gained at fp16 H=1024 B=16 and B=8 and bf16 H=1024 B=4, lost
at fp16 H=768 B=4).

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v52b --rounds 3 --name ab_alternate_v52b
"""
ROWS = [("float16", 1024, 16), ("bfloat16", 1024, 16), ("float16", 768, 16), ("float16", 1024, 12),
        ("float16", 1024, 8), ("bfloat16", 1024, 8), ("float16", 512, 8), ("bfloat16", 1024, 4), ("float16", 1024, 4),
        ("float16", 896, 4), ("bfloat16", 512, 4), ("float16", 1024, 2)]
ALTERNATE_MODES = {"v51 (none)": {"INPUT_REG_K_TILES": 0}, "1": {"INPUT_REG_K_TILES": 1},
                   "2": {"INPUT_REG_K_TILES": 2}, "3": {"INPUT_REG_K_TILES": 3}, "4": {"INPUT_REG_K_TILES": 4}}
MODES = ALTERNATE_MODES
