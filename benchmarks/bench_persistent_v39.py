"""v39: the whole forward (graph replay) and the kernel alone of the tagged 16-bit forwards with h exchanged as packed
16-bit values, the tag bit in each value's exponent top bit (persistent.PACKED_TAGS), against v38's one word per value,
alternated in one process.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v39 --rounds 4 --name ab_parity_words_v39
"""
ROWS = [("float16", 1024, 16), ("float16", 1024, 8), ("bfloat16", 1024, 4), ("bfloat16", 1024, 16), ("float16", 1024, 1),
        ("bfloat16", 1024, 2), ("float16", 512, 8), ("bfloat16", 2048, 2)]
MODES = {"v38": {}, "packed tags": {"PACKED_TAGS": True}}
