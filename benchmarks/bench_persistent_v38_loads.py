"""v38: what makes STAGE_PER_TILE's polls slower than stage_tagged's (call 2: staging the whole slice through the
tile polls lost 0.5-0.7 us/step). Call 3: the loads (missing quads only, every quad, predicated) changed little.
Call 4: the warp-uniform poll loop (take, ballot, reissue) against stage_tagged's per-lane loop (STAGE_PER_TILE 3:
per tile, 4: the whole slice first).

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v38_loads --rounds 3 --name ab_loops_v38
"""
ROWS = [("float16", 1024, 8), ("bfloat16", 2048, 4)]
ALTERNATE_MODES = {"v37": {}, "tile, warp loop": {"STAGE_PER_TILE": 1}, "tile, lane loops": {"STAGE_PER_TILE": 3},
                   "whole, lane loops": {"STAGE_PER_TILE": 4}}
MODES = ALTERNATE_MODES
