"""v39: the whole forward (graph replay) and the kernel alone of the tagged forwards with the in-kernel projection,
their next step's first poll copied to shared memory in the middle of the input product
(persistent.EARLY_POLL_AT = k: before input k-tile k of 8) against v38 (the poll after the product), alternated.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v39_early --rounds 4 --name ab_early_poll_v39
"""
ROWS = [("float16", 1024, 16), ("float16", 1024, 8), ("bfloat16", 1024, 4), ("bfloat16", 1024, 16)]
ALTERNATE_MODES = {"v38": {}, "early at 2": {"EARLY_POLL_AT": 2}, "early at 4": {"EARLY_POLL_AT": 4},
                   "early at 6": {"EARLY_POLL_AT": 6}}
MODES = ALTERNATE_MODES
