"""v55: fp32 H=1024 B=8 (the split on clusters, first poll after an 800-cycle spin) with the repoll backoff and an
earlier first poll together: a backoff makes early polls cheaper for the blocks still publishing, so the spin that
keeps them away might shorten.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v55e --rounds 4 --name ab_alternate_v55e
"""
ROWS = [("float32", 1024, 8), ("float32", 1280, 8)]
ALTERNATE_MODES = {
    "spin 800, repoll at once (v53)": {},
    "spin 600, backoff 100 ns": {"POLL_SPIN_CYCLES": 600, "POLL_BACKOFF_NS": 100},
    "spin 400, backoff 100 ns": {"POLL_SPIN_CYCLES": 400, "POLL_BACKOFF_NS": 100},
    "spin 400, backoff 200 ns": {"POLL_SPIN_CYCLES": 400, "POLL_BACKOFF_NS": 200},
}
MODES = ALTERNATE_MODES
