"""v35 benchmark: the passes around the fp32 forward's kernel. Four modes alternated in one process
(benchmarks/ab_alternate.py): v35 (the split of x reads the caller's x; the unscale pass by four columns), each
change alone, and v34 (both off). The kernel alone is the same in all four: a control.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v35 --rounds 3 --name ab_alternate_v35
"""
ROWS = [("float32", 1024, 4), ("float32", 1024, 8), ("float32", 1536, 4), ("float32", 512, 4), ("float32", 1024, 1)]
ALTERNATE_MODES = {"v35": {}, "flat pass": {"UNSCALE_BY_FOURS": False}, "x copied": {"SPLIT_READS_X": False},
                   "v34": {"UNSCALE_BY_FOURS": False, "SPLIT_READS_X": False}}
MODES = ALTERNATE_MODES
