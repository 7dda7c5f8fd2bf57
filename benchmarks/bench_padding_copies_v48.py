"""v48 benchmark, part 2: a padded inference forward's copies (v47) — x padded from the caller's array by one
launch and the outputs cut as they are copied out — against v47's (x copied, then padded by memcpy2D and a fill;
the outputs cut by the graph, then copied out), alternated in one process (benchmarks/ab_alternate.py). The
kernel alone is the same in both modes: a control.

    python benchmarks/ab_alternate.py OUT_DIR bench_padding_copies_v48 --rounds 4 --name ab_padding_copies_v48
"""
ROWS = [("float16", 1024, 13), ("float16", 1024, 9), ("float16", 512, 13), ("bfloat16", 256, 9),
        ("float32", 256, 7), ("float32", 512, 11)]
ALTERNATE_MODES = {"v48": {}, "v47 copies": {"PAD_READS_X": False, "PAD_BY_KERNEL": False, "CUT_AT_COPY_OUT": False}}
MODES = ALTERNATE_MODES
