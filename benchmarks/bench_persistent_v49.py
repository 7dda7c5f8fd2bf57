"""v49 benchmark: fp32 H=1024 B=4 (on the 2.0 line) under the two waits and passes v33/v35 measured on the H100 only,
alternated in one process (benchmarks/ab_alternate.py): xw unscaled in the kernel instead of by its pass (v33: +0.01
and +0.09 µs/step there), and the first poll's 400 ns wait as an 800-cycle spin (v35: a tie there).

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v49 --rounds 6 --name ab_alternate_v49
"""
ROWS = [("float32", 1024, 4)]
ALTERNATE_MODES = {"v48": {}, "xw unscaled in the kernel": {"XW_UNSCALE_IN_KERNEL": True},
                   "spin 800": {"POLL_SPIN_CYCLES": 800}}
MODES = ALTERNATE_MODES
