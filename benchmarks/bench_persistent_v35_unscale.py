"""v35 re-check of v33's split rule (rules.split_xw_unscale_pays: the unscale pass below 4H x B = 24K values per
step, the scaled xw unscaled in the kernel from there) with v35's four-column pass: "auto" against the pass
everywhere (XW_UNSCALE_IN_KERNEL=False) and in the kernel everywhere (True).

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v35_unscale --rounds 5 --name ab_unscale_v35
"""
ROWS = [("float32", 1024, 4), ("float32", 1024, 8), ("float32", 1536, 4), ("float32", 512, 8), ("float32", 1024, 16)]
ALTERNATE_MODES = {"auto": {}, "pass": {"XW_UNSCALE_IN_KERNEL": False}, "in kernel": {"XW_UNSCALE_IN_KERNEL": True}}
MODES = ALTERNATE_MODES
