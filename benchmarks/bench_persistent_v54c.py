"""v54b benchmark: the 16-bit grouped forward's input product shared by the groups' blocks of the same units
(PAIR_INPUT: clusters of 2, each half of the inputs for both groups) against v53's plans.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v54c --rounds 3 --name ab_alternate_v54c
"""
ROWS = [("float16", 1024, 16), ("bfloat16", 1024, 16), ("float16", 768, 16), ("float16", 512, 16)]
ALTERNATE_MODES = {
    "v53": {},
    "paired input product (1 W_ih register k-tile after the back-off)": {"PAIR_INPUT": True},
    "paired, no W_ih register k-tile": {"PAIR_INPUT": True, "INPUT_REG_K_TILES": 0},
}
MODES = ALTERNATE_MODES
