"""v38: the whole forward (graph replay) of the plans rules.v4_warps_kept now ranks anew (8 warps) against the picks
kept before (REGISTER_MODEL="v19-kept"), alternated in one process.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v38 --rounds 4 --name ab_picks_v38
"""
ROWS = [("bfloat16", 2048, 4), ("float16", 2048, 4), ("bfloat16", 1792, 4), ("float16", 1216, 1), ("bfloat16", 1472, 1)]
MODES = {"v38": {}, "v37 picks": {"REGISTER_MODEL": "v19-kept"}}
