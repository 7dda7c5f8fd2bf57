"""v48 benchmark: the fp16 split of x by one warp per row (gpu_blas.SPLIT_BY_WARPS) against v28's block per row,
alternated in one process (benchmarks/ab_alternate.py). The kernel alone is the same in both modes: a control.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v48 --rounds 4 --name ab_alternate_v48
"""
ROWS = [("float32", 1024, 8), ("float32", 1024, 4), ("float32", 512, 4), ("float32", 1536, 4), ("float32", 768, 8)]
ALTERNATE_MODES = {"v48": {}, "block split": {"SPLIT_BY_WARPS": False}}
MODES = ALTERNATE_MODES
