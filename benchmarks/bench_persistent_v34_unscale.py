"""v34 re-check of v33's split rule (rules.split_xw_unscale_pays: the unscale pass below 4H x B = 24K values per
step) on the v34 kernel: "auto" (the pass at these cells) against the scaled xw unscaled in the kernel
(XW_UNSCALE_IN_KERNEL=True). v33 measured H=1024 B=4 +0.01 and +0.09 µs/step for the kernel (the pass faster);
call 7's profile shows the pass at 18 µs per call there.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v34_unscale --rounds 5 --name ab_unscale_v34
"""
# (the last, 24K values, is in-kernel under "auto" already: a null row; --rows 3 leaves it out)
ROWS = [("float32", 1024, 4), ("float32", 1280, 4), ("float32", 512, 8), ("float32", 768, 8)]
MODES = {"auto": {}, "in kernel": {"XW_UNSCALE_IN_KERNEL": True}}
