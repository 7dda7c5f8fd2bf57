"""v55 diagnostic (timing only: the sums are wrong): the 16-bit forwards with the in-kernel projection stage x_{t+1}
after the publish only every n-th step (DIAG_X_STAGE_EVERY), the other steps multiplying the x left from before. An
upper bound for staging several steps of x at once (v55's probe: 64 KB by one block in flight costs ~1030 SM cycles
against ~500 for 16 KB, so four steps' x at once would cost about half of four stagings).

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
