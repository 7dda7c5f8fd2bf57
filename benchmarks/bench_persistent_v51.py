"""v51 benchmark: 16-bit forwards whose in-kernel projection covers only the first k-tiles of each warp's inputs, a
GEMM before the kernel the rest (persistent.INPUT_PART_K_TILES, kernel define INPUT_PART), against v50's plan (all
8 k-tiles in the kernel), alternated in one process (benchmarks/ab_alternate.py).

Why: the v51 diagnostic (DIAG_IN_K_TILES_USED, results/persistent_v51 call 4) put fp16 H=1024 B=16's step at 2273 ns
with the whole in-kernel input product, 1887 with half its k-tiles and 1751 without it: the product's W_ih reads from
shared memory (128 KB per block per step) sit on every block's own loop. The projection as a GEMM alone (call 5)
gave the kernel's gain back to the GEMM (2.374 vs 2.376 us/step); half of each should keep most of the kernel's gain
for half the GEMM.

    python benchmarks/ab_alternate.py OUT_DIR bench_persistent_v51 --rounds 4 --name ab_alternate_v51
"""
ROWS = [("float16", 1024, 16), ("bfloat16", 1024, 4), ("float16", 1024, 8)]
ALTERNATE_MODES = {"v50 (8 k-tiles in the kernel)": {}, "6 in the kernel": {"INPUT_PART_K_TILES": 6},
                   "4 in the kernel": {"INPUT_PART_K_TILES": 4}, "3 in the kernel": {"INPUT_PART_K_TILES": 3}}
MODES = ALTERNATE_MODES
