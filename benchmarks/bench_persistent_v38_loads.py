"""v38: what makes STAGE_PER_TILE's polls slower than stage_tagged's (call 2: staging the whole slice through the
tile polls lost 0.5-0.7 us/step): its loads of the missing quads only, every quad reloaded, or predicated loads.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v38_loads --rounds 3 --name ab_loads_v38
"""
ROWS = [("float16", 1024, 8), ("bfloat16", 2048, 4)]
ALTERNATE_MODES = {"v37": {}, "whole, missing": {"STAGE_PER_TILE": 2}, "whole, all": {"STAGE_PER_TILE": 2, "TILE_POLL_LOADS": 1},
                   "whole, predicated": {"STAGE_PER_TILE": 2, "TILE_POLL_LOADS": 2},
                   "tile, all": {"STAGE_PER_TILE": 1, "TILE_POLL_LOADS": 1},
                   "tile, predicated": {"STAGE_PER_TILE": 1, "TILE_POLL_LOADS": 2}}
MODES = ALTERNATE_MODES
