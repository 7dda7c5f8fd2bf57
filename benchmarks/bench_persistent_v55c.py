"""v55: the tagged exchange's repolls reload only the quads a lane found stale (POLL_STALE_ONLY) against the whole
chunk (the default), whole forward and kernel alone, alternated in one process; with a shorter first-poll spin too
(POLL_SPIN_CYCLES 600: every plan with a first-poll delay spins that long; fp32 H=1024 B=8 spins 800 by the rule).

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v55c --rounds 4 --name ab_alternate_v55c
"""
ROWS = [("float32", 1024, 8), ("float32", 1024, 4), ("float16", 1024, 16), ("float16", 1024, 8),
        ("bfloat16", 1024, 4)]
ALTERNATE_MODES = {
    "whole chunk (v53)": {},
    "stale quads only": {"POLL_STALE_ONLY": True},
    "stale quads only, spin 600": {"POLL_STALE_ONLY": True, "POLL_SPIN_CYCLES": 600},
}
MODES = ALTERNATE_MODES
