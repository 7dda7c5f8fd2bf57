"""v53 benchmark: x_t staged by the copy engine (X_BULK: bulk copies on an mbarrier) against loads through registers,
issued a step ahead (1) or after the publish (2, v12's place), on issue 5's 16-bit cells and two neighbours. Measured
slower everywhere (results/persistent_v53, call 1); X_BULK was removed after it (its code and GPU tests: commit 6b8ac73).

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v53 --rounds 4 --name ab_alternate_v53
"""
ROWS = [("float16", 1024, 16), ("float16", 1024, 8), ("bfloat16", 1024, 4), ("float16", 1024, 4),
        ("bfloat16", 1024, 16), ("float16", 512, 8)]
ALTERNATE_MODES = {"loads (v52)": {}, "bulk, a step ahead": {"X_BULK": 1}, "bulk, after the publish": {"X_BULK": 2}}
MODES = ALTERNATE_MODES
