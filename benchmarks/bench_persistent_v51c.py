"""v51 benchmark, third set: rules.input_part_k_tiles' cells (half the input k-tiles in the kernel at B=4 from H=768)
against the whole in-kernel projection, more rounds (calls 8-9 read -0.02 to -0.15 us/step there).

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v51c --rounds 8 --name ab_alternate_v51c
"""
ROWS = [("bfloat16", 1024, 4), ("float16", 1024, 4), ("float16", 768, 4), ("bfloat16", 896, 4)]
ALTERNATE_MODES = {"v51 rule (half in the kernel)": {}, "whole projection in the kernel": {"INPUT_PART_K_TILES": 0}}
MODES = ALTERNATE_MODES
