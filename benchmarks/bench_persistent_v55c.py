"""v55: a sleep after every incomplete poll of the tagged exchange (POLL_BACKOFF_NS) against polling again at once,
whole forward and kernel alone, alternated in one process. (Call 8-9's modes, repolls of the stale quads only, are
in commits 495b4f7 and 98bce4d: slower.)

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v55c --rounds 3 --name ab_alternate_v55c
"""
ROWS = [("float32", 1024, 8), ("float32", 1024, 4), ("float16", 1024, 16), ("float16", 1024, 8),
        ("bfloat16", 1024, 4)]
ALTERNATE_MODES = {
    "poll again at once (v53)": {},
    "backoff 50 ns": {"POLL_BACKOFF_NS": 50},
    "backoff 100 ns": {"POLL_BACKOFF_NS": 100},
    "backoff 200 ns": {"POLL_BACKOFF_NS": 200},
    "backoff 400 ns": {"POLL_BACKOFF_NS": 400},
}
MODES = ALTERNATE_MODES
