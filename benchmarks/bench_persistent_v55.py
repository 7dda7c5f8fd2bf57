"""v55 diagnostic (timing only: the sums are wrong): the 16-bit forwards with the in-kernel projection stage x_{t+1}
after the publish only every n-th step (DIAG_X_STAGE_EVERY), the other steps multiplying the x left from before. An
upper bound for staging several steps of x at once. Built as X_STEPS (4 steps by cp.async, commit 8d9e3f5), it measured
slower: its staging step ran 3.6 us while the other blocks polled (notes_persistent.md, v55).

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v55 --rounds 3 --name ab_alternate_v55
"""
ROWS = [("float16", 1024, 16), ("bfloat16", 1024, 16), ("float16", 1024, 8)]
ALTERNATE_MODES = {
    "v53 (x staged every step)": {},
    "every 2nd step (diagnostic)": {"DIAG_X_STAGE_EVERY": 2},
    "every 4th step (diagnostic)": {"DIAG_X_STAGE_EVERY": 4},
    "first step only (diagnostic)": {"DIAG_X_STAGE_EVERY": 1000000},
}
MODES = ALTERNATE_MODES
