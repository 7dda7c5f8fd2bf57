"""v39: the whole forward (graph replay) and the kernel alone with each warp's first-poll delay adapting step by step
(persistent.ADAPTIVE_POLL_DELAY = (down_ns, up_ns, max_ns)) against the plans' constant delays, alternated in one
process. The cells: the tagged tensor-core forwards with a constant delay (fp32 split at B=4, 16-bit at B <= 2) and
without one (the in-kernel projection's, the grouped B=16).

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v39 --rounds 4 --name ab_adaptive_delay_v39
"""
ROWS = [("float32", 1024, 4), ("float16", 1024, 1), ("bfloat16", 1024, 2), ("float32", 1536, 4),
        ("bfloat16", 1024, 4), ("float16", 1024, 8), ("float16", 1024, 16)]
ALTERNATE_MODES = {"v38": {}, "adapt 25/100": {"ADAPTIVE_POLL_DELAY": (25, 100, 1600)},
                   "adapt 50/50": {"ADAPTIVE_POLL_DELAY": (50, 50, 1600)}}
MODES = ALTERNATE_MODES
