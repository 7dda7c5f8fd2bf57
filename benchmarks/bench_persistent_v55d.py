"""v55: the repoll backoff (POLL_BACKOFF_NS) on the fp32 forwards where call 10 saw it pay (the paired split at
H=1024 B=4: 2.103 -> 2.029 / 2.038 at 50 / 100 ns), with its neighbours, more rounds.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v55d --rounds 6 --name ab_alternate_v55d
"""
ROWS = [("float32", 1024, 4), ("float32", 1536, 4), ("float32", 512, 4), ("float32", 1024, 2), ("float32", 768, 4)]
ALTERNATE_MODES = {
    "poll again at once (v53)": {},
    "backoff 50 ns": {"POLL_BACKOFF_NS": 50},
    "backoff 100 ns": {"POLL_BACKOFF_NS": 100},
}
MODES = ALTERNATE_MODES
