"""v38: tagged tensor-core forwards staging their vector k-tile by k-tile, each k-tile's mma as soon as its words
are staged (persistent.STAGE_PER_TILE), against v37's whole-slice staging, alternated in one process.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v38 --rounds 4 --name ab_tiles_v38
"""
# #5's tagged cells first (bf16 H=2048 B=4: v37's 1.2 us product, half of it from shared memory)
ROWS = [("bfloat16", 2048, 4), ("float16", 2048, 4), ("bfloat16", 1024, 4), ("float16", 1024, 8),
        ("float16", 1024, 16), ("float32", 1024, 4)]
MODES = {"v37": {}, "per tile": {"STAGE_PER_TILE": True}}
ALTERNATE_MODES = {**MODES, "tile polls, whole slice": {"STAGE_PER_TILE": 2}}
