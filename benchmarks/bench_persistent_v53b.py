"""v53 benchmark, second set: the clustered fp32 split forward's first-poll spin (rules.SPLIT_POLL_SPIN_CYCLES, 800
cycles since v42, which measured only 600 and 800) swept again on the H200 with the code of v52.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v53b --rounds 4 --name ab_alternate_v53b
"""
ROWS = [("float32", 1024, 8), ("float32", 1280, 8), ("float32", 1024, 12)]
ALTERNATE_MODES = {"spin 800 (v42)": {}, "spin 500": {"POLL_SPIN_CYCLES": 500},
                   "spin 1100": {"POLL_SPIN_CYCLES": 1100}, "spin 1400": {"POLL_SPIN_CYCLES": 1400}}
MODES = ALTERNATE_MODES
